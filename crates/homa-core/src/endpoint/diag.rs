//! Diagnostics: a snapshot of one RPC's state, for an application that
//! gives up on an RPC and wants to say why.

use super::Endpoint;
use crate::event::RpcId;
use crate::Nanos;
use std::fmt;

/// How far one message of an RPC got (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MessageProgress {
    /// Message length.
    pub length: u32,
    /// Sent at least once (outgoing) / distinct bytes received (incoming).
    pub done: u32,
    /// Bytes the sender may send.
    pub granted: u32,
    /// Queued with the sender (outgoing) or receiver (incoming) policy.
    pub queued: bool,
}

/// One RPC's state at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RpcSnapshot {
    /// Phase name ("client", "receiving", "in service", "responding").
    pub phase: &'static str,
    /// When the peer last showed progress on it (ns).
    pub last_heard: Nanos,
    /// Timer rounds sent since then.
    pub unanswered: u32,
    /// The outgoing message, if any.
    pub outgoing: Option<MessageProgress>,
    /// Ranges queued for retransmission.
    pub resend_ranges: usize,
    /// The incoming message, if any.
    pub incoming: Option<MessageProgress>,
    /// Incast control in force.
    pub incast: bool,
}

impl fmt::Display for RpcSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {} unanswered rounds", self.phase, self.unanswered)?;
        if let Some(m) = &self.outgoing {
            write!(
                f,
                "; out {} B: sent {}, granted {}, {} resend ranges, {}",
                m.length,
                m.done,
                m.granted,
                self.resend_ranges,
                if m.queued { "sendable" } else { "not sendable" }
            )?;
        }
        if let Some(m) = &self.incoming {
            write!(
                f,
                "; in {} B: received {}, granted {}, {}",
                m.length,
                m.done,
                m.granted,
                if m.queued {
                    "grantable"
                } else {
                    "not grantable"
                }
            )?;
        }
        if self.incast {
            write!(f, "; incast")?;
        }
        Ok(())
    }
}

impl Endpoint {
    /// A snapshot of RPC `id`'s state, if it exists.
    pub fn rpc_snapshot(&self, id: RpcId) -> Option<RpcSnapshot> {
        let rpc = self.rpcs.get(&id)?;
        let out = rpc.phase.msgout();
        Some(RpcSnapshot {
            phase: rpc.phase.name(),
            last_heard: rpc.last_heard,
            unanswered: rpc.unanswered,
            outgoing: out.map(|m| MessageProgress {
                length: m.length,
                done: m.next_offset,
                granted: m.granted,
                queued: rpc.sendable.is_some(),
            }),
            resend_ranges: out.map_or(0, |m| m.resend_ranges()),
            incoming: rpc.phase.msgin().map(|m| MessageProgress {
                length: m.length,
                done: m.received,
                granted: m.granted,
                queued: m.granted < m.length,
            }),
            incast: rpc.incast,
        })
    }
}
