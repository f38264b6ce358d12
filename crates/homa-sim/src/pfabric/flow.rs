//! A flow's sender state (window, packets in flight, lost ones) and a
//! receiver's per-message and per-sender state.

use super::*;

/// A set of packet numbers `0..n`: one inline word for messages of up to 64
/// packets, a heap bitmap for longer ones.
#[derive(Debug, Clone)]
pub(super) struct PacketSet {
    pub(super) small: u64,
    pub(super) large: Vec<u64>,
}

impl PacketSet {
    pub(super) fn new(n: u32) -> Self {
        PacketSet {
            small: 0,
            large: if n <= 64 {
                Vec::new()
            } else {
                vec![0; (n as usize).div_ceil(64)]
            },
        }
    }

    pub(super) fn word(&self, i: u32) -> u64 {
        if self.large.is_empty() {
            self.small
        } else {
            self.large[(i / 64) as usize]
        }
    }

    pub(super) fn word_mut(&mut self, i: u32) -> &mut u64 {
        if self.large.is_empty() {
            &mut self.small
        } else {
            &mut self.large[(i / 64) as usize]
        }
    }

    pub(super) fn contains(&self, i: u32) -> bool {
        self.word(i) & (1 << (i % 64)) != 0
    }

    /// Adds `i`; true if it was not there.
    pub(super) fn insert(&mut self, i: u32) -> bool {
        let bit = 1 << (i % 64);
        let w = self.word_mut(i);
        let new = *w & bit == 0;
        *w |= bit;
        new
    }

    /// Removes `i`; true if it was there.
    pub(super) fn remove(&mut self, i: u32) -> bool {
        let bit = 1 << (i % 64);
        let w = self.word_mut(i);
        let was = *w & bit != 0;
        *w &= !bit;
        was
    }
}

/// Sender state of one message.
///
/// Packet `s` is unsent if `s >= next_new`; otherwise it is acknowledged
/// (in `acked`), lost (in `lost`: timed out and not yet resent) or in
/// flight (neither).
#[derive(Debug)]
pub(super) struct Flow {
    pub(super) dst: HostId,
    pub(super) index: u64,
    pub(super) size: u64,
    pub(super) packets: u32,
    pub(super) hash: u64,
    pub(super) next_new: u32,
    /// Every packet below is acknowledged.
    pub(super) first_unacked: u32,
    /// No lost packet below this.
    pub(super) resend_cursor: u32,
    pub(super) acked: PacketSet,
    pub(super) lost: PacketSet,
    pub(super) acked_packets: u32,
    pub(super) acked_bytes: u64,
    pub(super) in_flight: u32,
    pub(super) lost_packets: u32,
    pub(super) cwnd: u32,
    pub(super) ssthresh: u32,
    /// ACKs counted toward the next window increase above `ssthresh`.
    pub(super) ca_acks: u32,
    pub(super) consecutive_timeouts: u32,
    pub(super) probing: bool,
    /// Deadline of the flow's RTO timer, mirrored in `PFabricHost::timers`.
    pub(super) timer: Option<Time>,
    /// Remaining bytes under which the flow sits in `PFabricHost::ready`.
    pub(super) ready_rank: Option<u64>,
}

impl Flow {
    /// Bytes not yet acknowledged: the flow's pFabric priority.
    pub(super) fn remaining(&self) -> u64 {
        self.size - self.acked_bytes
    }

    /// Whether the flow may send a data packet now.
    pub(super) fn can_send(&self) -> bool {
        !self.probing
            && self.in_flight < self.cwnd
            && (self.lost_packets > 0 || self.next_new < self.packets)
    }

    /// Rank of a packet sent now.
    pub(super) fn rank(&self) -> u64 {
        self.remaining().max(1)
    }
}

/// Receiver state of one partially received multi-packet message.
#[derive(Debug)]
pub(super) struct Incoming {
    pub(super) index: u64,
    pub(super) packets: u32,
    pub(super) received: u32,
    pub(super) got: PacketSet,
}

/// Which messages from one sender have been completely received.
#[derive(Debug, Default)]
pub(super) struct Completed {
    /// Every message index below this is complete.
    pub(super) below: u64,
    /// Complete indices at or above `below`.
    pub(super) above: FxHashSet<u64>,
}

impl Completed {
    pub(super) fn contains(&self, index: u64) -> bool {
        index < self.below || self.above.contains(&index)
    }

    pub(super) fn insert(&mut self, index: u64) {
        if index == self.below {
            self.below += 1;
            while self.above.remove(&self.below) {
                self.below += 1;
            }
        } else if index > self.below {
            self.above.insert(index);
        }
    }
}

/// A 64-bit mix of a message's identity, for [`PacketMeta::flow`].
pub(super) fn flow_hash(src: HostId, key: u64) -> u64 {
    let mut z = key
        .wrapping_add((src as u64) << 40)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Puts `flow` into (or takes it out of) the SRPT set of flows that may
/// send, keyed by its current remaining bytes.
pub(super) fn refresh_ready(ready: &mut BTreeSet<(u64, u64)>, flow: &mut Flow, key: u64) {
    let want = flow.can_send().then(|| flow.remaining());
    if want != flow.ready_rank {
        if let Some(r) = flow.ready_rank {
            ready.remove(&(r, key));
        }
        if let Some(r) = want {
            ready.insert((r, key));
        }
        flow.ready_rank = want;
    }
}

/// Sets (or clears) the flow's RTO deadline.
pub(super) fn set_timer(
    timers: &mut BTreeSet<(Time, u64)>,
    flow: &mut Flow,
    key: u64,
    at: Option<Time>,
) {
    if at != flow.timer {
        if let Some(t) = flow.timer {
            timers.remove(&(t, key));
        }
        if let Some(t) = at {
            timers.insert((t, key));
        }
        flow.timer = at;
    }
}

/// A minimum-size control packet (rank 0).
pub(super) fn control_packet(
    pk: &Packetization,
    src: HostId,
    dst: HostId,
    flow: u64,
    transport_bytes: u32,
    rank: u64,
    body: PfBody,
) -> SimPacket<PfBody> {
    SimPacket {
        meta: PacketMeta {
            src,
            dst,
            priority: 0,
            rank,
            wire_bytes: pk.frame_bytes(transport_bytes),
            payload_bytes: 0,
            retransmit: false,
            flow,
            ecn: false,
        },
        body,
    }
}
