//! What an endpoint remembers about each peer (address and port): the
//! cutoffs it gave us, loss-detection state, and acks owed to it.

use crate::Nanos;
use homa_wire::{CUTOFF_UNLIMITED, MAX_PRIORITIES};

/// Largest message sent at the highest level to a peer whose cutoffs are
/// not known yet (Linux's default cutoff for its top level).
const TOP_LEVEL_CUTOFF: u32 = 200;
use std::collections::VecDeque;

/// Per-peer state.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Unscheduled cutoffs this peer (as a receiver) asked us to use;
    /// until it has sent some, the two highest levels (see [`Peer::new`]).
    pub cutoffs: [u32; MAX_PRIORITIES],
    /// Version of those cutoffs; 0 = the defaults, none received yet.
    pub cutoff_version: u16,
    /// Tick at which we last sent this peer our cutoffs.
    pub cutoffs_sent_tick: Option<u64>,
    /// RESENDs (or NEED_ACKs) sent since we last heard from the peer.
    pub outstanding_resends: u32,
    /// Tick of the latest RESEND to this peer.
    pub last_resend_tick: Option<u64>,
    /// Id of the RPC that got the latest RESEND, so the next one goes to
    /// the following RPC (rotation).
    pub resend_cursor: u64,
    /// Client ids of finished RPCs whose server (this peer) has not been
    /// told yet.
    pub pending_acks: VecDeque<u64>,
    /// Timer tick at which `pending_acks` last went from empty to
    /// non-empty.
    pub acks_pending_since: u64,
    /// Last time anything was heard from or sent to the peer.
    pub last_active: Nanos,
}

impl Peer {
    /// A peer we know nothing about yet.
    ///
    /// Until the peer's cutoffs arrive, messages up to 200 B (Linux's top
    /// cutoff) go at the highest level and all other unscheduled bytes at
    /// the level below it, as Linux sends everything to a new peer at that
    /// level. Every allocation keeps the highest level for unscheduled
    /// packets and the one below it for unscheduled packets or for its
    /// shortest granted messages, so these packets never rank below more
    /// than a receiver's shortest granted messages. Linux's default table instead sent
    /// messages over 15 KB at level 4, a scheduled level for a receiver
    /// with fewer than four unscheduled levels: there they ranked below
    /// every message it was granting, although it did not know the message
    /// yet, and waited in its downlink queue until a RESEND timeout (found
    /// in the simulator: w5 messages of 40–70 KB delayed 3–8 ms).
    pub fn new(now: Nanos, num_priorities: u8) -> Peer {
        let top = num_priorities.clamp(1, MAX_PRIORITIES as u8) as usize - 1;
        let mut cutoffs = [0; MAX_PRIORITIES];
        cutoffs[0] = CUTOFF_UNLIMITED;
        if top >= 2 {
            cutoffs[top] = TOP_LEVEL_CUTOFF;
            cutoffs[top - 1] = CUTOFF_UNLIMITED;
        } else {
            cutoffs[top] = CUTOFF_UNLIMITED;
        }
        Peer {
            cutoffs,
            cutoff_version: 0,
            cutoffs_sent_tick: None,
            outstanding_resends: 0,
            last_resend_tick: None,
            resend_cursor: 0,
            pending_acks: VecDeque::new(),
            acks_pending_since: 0,
            last_active: now,
        }
    }

    /// A packet arrived from the peer: it is alive.
    pub fn heard_from(&mut self, now: Nanos) {
        self.outstanding_resends = 0;
        self.last_active = now;
    }
}
