//! A NIC-queue estimator for drivers (Homa/Linux §4.3).
//!
//! The core chooses *which* packet goes next (SRPT); the driver decides
//! *when* it may ask. SRPT only means something if the NIC queue stays short,
//! so the driver hands a packet to the kernel only while the estimated time
//! at which the NIC will have sent everything queued (`idle_at`) is at most
//! `max_queue_ns` ahead of now. The estimate advances by each packet's wire
//! time at the link rate. Small packets (below `bypass_bytes`) are never held,
//! as in Linux, but their time counts: the queue they make delays the next
//! full-size packet.

use crate::Nanos;

/// Bytes of framing each packet costs on an Ethernet link beyond its IP
/// packet: header, CRC, preamble and inter-packet gap.
pub const ETHERNET_OVERHEAD: u64 = 38;

/// Tracks when the NIC will be idle, to keep its queue under a limit.
#[derive(Debug, Clone)]
pub struct Pacer {
    link_mbps: u64,
    max_queue_ns: u64,
    bypass_bytes: usize,
    idle_at: Nanos,
}

impl Pacer {
    /// A pacer for a link of `link_mbps` that lets at most `max_queue_ns` of
    /// transmission time wait in the NIC; packets smaller than `bypass_bytes`
    /// are never held (but are counted).
    pub fn new(link_mbps: u64, max_queue_ns: u64, bypass_bytes: usize) -> Pacer {
        Pacer {
            link_mbps: link_mbps.max(1),
            max_queue_ns,
            bypass_bytes,
            idle_at: 0,
        }
    }

    /// Packets smaller than this (IP bytes) are never held.
    pub fn bypass_bytes(&self) -> usize {
        self.bypass_bytes
    }

    /// Time the link needs for a packet of `ip_bytes`.
    pub fn wire_time(&self, ip_bytes: usize) -> Nanos {
        ((ip_bytes as u64 + ETHERNET_OVERHEAD) * 8_000).div_ceil(self.link_mbps)
    }

    /// True if a packet of `ip_bytes` may be handed to the NIC now.
    pub fn may_send(&self, now: Nanos, ip_bytes: usize) -> bool {
        ip_bytes < self.bypass_bytes || self.idle_at <= now + self.max_queue_ns
    }

    /// Earliest time at which a full-size packet may be sent.
    pub fn next_send_time(&self, now: Nanos) -> Nanos {
        self.idle_at.saturating_sub(self.max_queue_ns).max(now)
    }

    /// Records that a packet of `ip_bytes` went to the NIC at `now`.
    /// Small packets count too (as in Homa/Linux): they are never held, but
    /// the NIC queue they make delays the next full-size packet. On a slow
    /// link the CPU can generate small packets faster than the link sends.
    pub fn on_send(&mut self, now: Nanos, ip_bytes: usize) {
        self.idle_at = self.idle_at.max(now) + self.wire_time(ip_bytes);
    }

    /// Estimated queue in the NIC at `now`, in nanoseconds of link time.
    pub fn queued_ns(&self, now: Nanos) -> Nanos {
        self.idle_at.saturating_sub(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_queue_under_limit() {
        // 10 Gbit/s: a 1,500-byte packet (+38) takes 1,230.4 ns → 1,231.
        let mut p = Pacer::new(10_000, 2_000, 1_000);
        assert_eq!(p.wire_time(1_500), 1_231);
        assert!(p.may_send(0, 1_500));
        p.on_send(0, 1_500);
        assert!(p.may_send(0, 1_500));
        p.on_send(0, 1_500);
        // 2,462 ns queued > 2,000: hold until 462.
        assert!(!p.may_send(0, 1_500));
        assert_eq!(p.next_send_time(0), 462);
        assert!(p.may_send(462, 1_500));
        // Small packets are never held, but they do count: 238 B → 191 ns.
        assert!(p.may_send(0, 200));
        p.on_send(0, 200);
        assert_eq!(p.queued_ns(0), 2_462 + 191);
        // An idle link starts from now.
        p.on_send(1_000_000, 1_500);
        assert_eq!(p.queued_ns(1_000_000), 1_231);
    }
}
