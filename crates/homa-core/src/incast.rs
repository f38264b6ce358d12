//! Incast control (thesis §7.1.3).
//!
//! Incast is mostly self-inflicted: one client sends many RPCs at once and
//! the responses come back together, each with a full unscheduled prefix
//! that no receiver granted. The rule here: when a client has more than
//! `incast_threshold` RPCs outstanding, each new request carries the incast
//! flag, and the server sends that response with only
//! `incast_unsched_bytes` unscheduled; the rest is scheduled, so the
//! client's grants (bounded by `max_incoming`) limit what can pile up in the
//! switch.
//!
//! Default threshold: `max_incoming / unsched_bytes` (10 with Linux's
//! 400,000 and 40,000). Up to that many full unscheduled responses fit in
//! the bytes the receiver is willing to have in flight anyway; beyond it,
//! each further response would add `unsched_bytes` of unsolicited data.
//! Default reduced limit: 300 bytes ("a few hundred bytes" in the thesis),
//! so small responses still arrive in one unscheduled packet.

use crate::Config;

/// Whether a new request, made while `outstanding` client RPCs are already
/// in progress, asks the server for incast control.
pub fn request_needs_flag(config: &Config, outstanding: usize) -> bool {
    outstanding >= config.incast_threshold as usize
}

/// Unscheduled bytes for a message: the configured prefix (or the incast
/// limit when the peer asked for it), rounded up to whole packets as the
/// sender would send them anyway, and never beyond the message.
pub fn unsched_limit(config: &Config, length: u32, incast: bool) -> u32 {
    let base = if incast {
        config.incast_unsched_bytes.min(config.unsched_bytes)
    } else {
        config.unsched_bytes
    };
    let payload = config.max_payload().max(1);
    base.div_ceil(payload).saturating_mul(payload).min(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_and_limits() {
        let c = Config::default();
        assert_eq!(c.incast_threshold, c.max_incoming / c.unsched_bytes);
        assert!(!request_needs_flag(&c, 9));
        assert!(request_needs_flag(&c, 10));
        let p = c.max_payload();
        // 40,000 rounds up to whole packets.
        assert_eq!(
            unsched_limit(&c, 1_000_000, false),
            40_000u32.div_ceil(p) * p
        );
        // Incast: 300 bytes rounds up to one packet.
        assert_eq!(unsched_limit(&c, 1_000_000, true), p);
        // Short messages are entirely unscheduled either way.
        assert_eq!(unsched_limit(&c, 200, true), 200);
        assert_eq!(unsched_limit(&c, 0, false), 0);
    }
}
