//! What an endpoint remembers about each peer (address and port), and the
//! bounded table that holds it.
//!
//! A peer exists only while it has an accepted RPC, owes or is owed acks, or
//! was recently busy: a packet that is refused creates nothing. Idle peers
//! are kept (for their cutoffs) until `peer_idle_ns` passes or the table is
//! full, then forgotten oldest first. Per-peer state is where per-peer
//! parameters (RTT, windows, link rate) live when a policy needs them.

use crate::keyed::{quick_key, remembered, AddrKey, KeyedMap, NO_KEY};
use crate::Nanos;
use homa_wire::{CUTOFF_UNLIMITED, MAX_PRIORITIES};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Largest message sent at the highest level to a peer whose cutoffs are
/// not known yet (Linux's default cutoff for its top level).
const TOP_LEVEL_CUTOFF: u32 = 200;

/// The cutoffs a sender uses before a receiver's own arrive: messages up
/// to 200 B (Linux's top cutoff) at the highest level, all other
/// unscheduled bytes at the level below it, as Linux sends everything to a
/// new peer at that level. Every allocation keeps the highest level for
/// unscheduled packets and the one below it for unscheduled packets or its
/// shortest granted messages, so these packets never rank below more than a
/// receiver's shortest granted messages. (Linux's default table sent
/// messages over 15 KB at level 4, a scheduled level for a receiver with
/// fewer than four unscheduled levels: there they ranked below every
/// message it was granting and waited in its downlink queue until a RESEND
/// timeout — found in the simulator, w5 messages of 40–70 KB delayed
/// 3–8 ms.)
pub fn unknown_peer_cutoffs(num_priorities: u8) -> [u32; MAX_PRIORITIES] {
    let top = num_priorities.clamp(1, MAX_PRIORITIES as u8) as usize - 1;
    let mut cutoffs = [0; MAX_PRIORITIES];
    cutoffs[0] = CUTOFF_UNLIMITED;
    if top >= 2 {
        cutoffs[top] = TOP_LEVEL_CUTOFF;
        cutoffs[top - 1] = CUTOFF_UNLIMITED;
    } else {
        cutoffs[top] = CUTOFF_UNLIMITED;
    }
    cutoffs
}

/// Per-peer state.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Unscheduled cutoffs this peer (as a receiver) asked us to use.
    pub cutoffs: [u32; MAX_PRIORITIES],
    /// Version of those cutoffs; 0 = the defaults, none received yet.
    pub cutoff_version: u16,
    /// When we last sent this peer our cutoffs (ns).
    pub cutoffs_sent_at: Option<Nanos>,
    /// Client ids of finished RPCs whose server (this peer) has not been
    /// told yet.
    pub pending_acks: VecDeque<u64>,
    /// Deadline of the timer that flushes `pending_acks`.
    pub acks_timer: Option<Nanos>,
    /// RPCs with this peer (client and server).
    pub rpcs: u32,
    /// Server RPCs (requests from this peer) in the table.
    pub server_rpcs: u32,
    /// The latest tick with timer-packet slots handed out to this peer's
    /// RPCs, and how many of its slots are taken.
    slot_tick: u64,
    slots_used: u32,
    /// Last time any packet came from this peer (ns).
    pub last_heard: Nanos,
    /// When an ICMP destination-unreachable came back for one of our RPCs
    /// with this peer (and nothing from the peer since): its other RPCs
    /// give up at their next timer round instead of counting rounds.
    pub unreachable_since: Option<Nanos>,
    /// The peer answered something we sent (a response to our request, an
    /// ack of our response, its cutoffs), sent a second packet for one of
    /// its RPCs, or we chose to talk to it. An idle peer that never did
    /// (e.g. the spoofed source of a first packet that went nowhere) is
    /// forgotten at once, and its server RPCs give up after two silent
    /// timer rounds, except a fully sent response, kept (no packet sent)
    /// while the client may still ask for it or until the room is needed
    /// (`endpoint::unproven`). (A blind attacker can make a peer proven
    /// only by sending more packets for the RPCs it started.)
    pub proven: bool,
    /// Key in the table's idle set while the peer is idle.
    idle_since: Option<Nanos>,
    /// The tick of the latest NEED_ACK we answered for an RPC we no longer
    /// know, and how many such answers went to this peer in it.
    need_ack_tick: u64,
    need_ack_replies: u32,
    /// ByteDance mode's view of the peer: RTT, link rate, unscheduled
    /// ratio, probes (untouched when the mode is off).
    pub bytedance: crate::bytedance::PeerState,
}

impl Peer {
    fn new(num_priorities: u8) -> Peer {
        Peer {
            cutoffs: unknown_peer_cutoffs(num_priorities),
            cutoff_version: 0,
            cutoffs_sent_at: None,
            pending_acks: VecDeque::new(),
            acks_timer: None,
            rpcs: 0,
            server_rpcs: 0,
            slot_tick: 0,
            slots_used: 0,
            last_heard: 0,
            unreachable_since: None,
            proven: false,
            idle_since: None,
            need_ack_tick: 0,
            need_ack_replies: 0,
            bytedance: Default::default(),
        }
    }

    /// Takes one of `per_tick` answers this peer may get per tick to
    /// NEED_ACKs for RPCs we no longer know; false when none is left.
    pub fn take_need_ack_reply(&mut self, tick: u64, per_tick: u32) -> bool {
        if self.need_ack_tick != tick {
            self.need_ack_tick = tick;
            self.need_ack_replies = 0;
        }
        if self.need_ack_replies >= per_tick.max(1) {
            return false;
        }
        self.need_ack_replies += 1;
        true
    }

    /// Reserves a slot for one timer-driven packet (RESEND, NEED_ACK,
    /// probe) to this peer, at most `per_tick` per tick: returns the tick it
    /// may be sent in, `tick` itself or a later one. Each round reserves
    /// once, so rounds beyond the rate are spread over later ticks without
    /// being looked at again every tick.
    pub fn reserve_timer_slot(&mut self, tick: u64, per_tick: u32) -> u64 {
        if self.slot_tick < tick {
            self.slot_tick = tick;
            self.slots_used = 0;
        }
        if self.slots_used >= per_tick.max(1) {
            self.slot_tick += 1;
            self.slots_used = 0;
        }
        self.slots_used += 1;
        self.slot_tick
    }

    fn is_idle(&self) -> bool {
        self.rpcs == 0 && self.pending_acks.is_empty()
    }

    /// Whether [`PeerTable::refresh`] would change anything for this peer:
    /// it went idle or busy since it was last filed. (When not, a caller
    /// that holds the peer can skip the call and its lookup.)
    pub fn needs_refresh(&self) -> bool {
        self.is_idle() != self.idle_since.is_some()
    }
}

/// The peer table is full of busy peers: nothing can be forgotten to make
/// room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeersFull;

/// All peers, at most `max` of them.
///
/// Peers live in slots of a vector (reused through a free list, so it never
/// holds more than `max`), found by a keyed map from address to slot. The
/// slot of the last peer looked up is remembered: the many lookups made for
/// one packet (all of the same peer) cost an address comparison instead of
/// a hash lookup each. That memory is checked against the slot's own
/// address, so it can never name another peer.
#[derive(Debug)]
pub struct PeerTable {
    map: KeyedMap<AddrKey, u32>,
    /// Each slot's peer with its address; `None` when free.
    slots: Vec<Option<(SocketAddr, Peer)>>,
    /// Free slots.
    free: Vec<u32>,
    /// The [`quick_key`] and slot of the last IPv4 peer looked up
    /// ([`NO_KEY`]: none).
    last: Cell<(u64, u32)>,
    /// Peers in the order they went idle, as (since when, address). An
    /// entry is current while its peer is still idle since that time;
    /// a peer that gets busy again leaves its entry behind (unless it is
    /// the newest, which goes at once), to be skipped
    /// when it reaches the front (a BTreeSet insert and remove for every
    /// RPC that made its peer busy and idle again cost more than the rest
    /// of the peer's bookkeeping). Compacted when stale entries outnumber
    /// the peers, so it holds at most 2 × `max` + 64 entries.
    idle: VecDeque<(Nanos, SocketAddr)>,
    /// Peers that are idle now (`idle_since` set).
    idle_count: usize,
    max: usize,
    num_priorities: u8,
}

impl PeerTable {
    /// An empty table of at most `max` peers.
    pub fn new(max: usize, num_priorities: u8) -> PeerTable {
        PeerTable {
            map: KeyedMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            last: Cell::new((NO_KEY, 0)),
            idle: VecDeque::new(),
            idle_count: 0,
            max: max.max(1),
            num_priorities,
        }
    }

    /// The slot of the peer at `addr`, if known.
    #[inline]
    fn slot_of(&self, addr: &SocketAddr) -> Option<usize> {
        let key = quick_key(addr);
        let (last, i) = self.last.get();
        if key == last {
            return Some(i as usize);
        }
        self.look_up(addr, key)
    }

    /// [`PeerTable::slot_of`] through the map (kept out of line, so that
    /// the remembered case inlines to a comparison).
    #[inline(never)]
    fn look_up(&self, addr: &SocketAddr, key: u64) -> Option<usize> {
        let i = *self.map.get(&AddrKey(*addr))?;
        self.last.set((remembered(key), i));
        Some(i as usize)
    }

    /// The peer at `addr`, if known.
    #[inline]
    pub fn get(&self, addr: &SocketAddr) -> Option<&Peer> {
        let i = self.slot_of(addr)?;
        match &self.slots[i] {
            Some((a, p)) if a == addr => Some(p),
            _ => None,
        }
    }

    /// Mutable [`PeerTable::get`].
    #[inline]
    pub fn get_mut(&mut self, addr: &SocketAddr) -> Option<&mut Peer> {
        let i = self.slot_of(addr)?;
        match &mut self.slots[i] {
            Some((a, p)) if a == addr => Some(p),
            _ => None,
        }
    }

    /// The peer at `addr`, created if needed; when the table is full the
    /// longest-idle peer is forgotten to make room.
    pub fn get_or_create(&mut self, addr: SocketAddr) -> Result<&mut Peer, PeersFull> {
        if let Some(i) = self.slot_of(&addr) {
            return Ok(self.peer_at(i));
        }
        if self.map.len() >= self.max {
            let Some(old) = self.pop_oldest_idle() else {
                return Err(PeersFull);
            };
            self.forget(old);
        }
        let peer = Peer::new(self.num_priorities);
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some((addr, peer));
                i
            }
            None => {
                self.slots.push(Some((addr, peer)));
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(AddrKey(addr), i);
        self.last.set((remembered(quick_key(&addr)), i));
        Ok(self.peer_at(i as usize))
    }

    /// The peer in occupied slot `i`.
    fn peer_at(&mut self, i: usize) -> &mut Peer {
        &mut self.slots[i].as_mut().expect("occupied slot").1
    }

    /// Files the peer as idle or busy after its RPCs or acks changed.
    pub fn refresh(&mut self, addr: SocketAddr, now: Nanos) {
        let len = self.map.len();
        let Some(p) = self.get_mut(&addr) else {
            return;
        };
        match (p.is_idle(), p.idle_since) {
            (true, None) if !p.proven => {
                self.forget(addr);
            }
            (true, None) => {
                p.idle_since = Some(now);
                self.idle_count += 1;
                self.idle.push_back((now, addr));
                if self.idle.len() > 2 * len + 64 {
                    self.compact_idle();
                }
            }
            (false, Some(since)) => {
                p.idle_since = None;
                self.idle_count -= 1;
                // The common case, a peer busy again before any other went
                // idle: its entry is the newest, and goes now rather than
                // waiting, stale, for a compaction.
                if self.idle.back() == Some(&(since, addr)) {
                    self.idle.pop_back();
                }
            }
            _ => {}
        }
    }

    /// Whether a peer going idle now would compact the idle list (see
    /// [`PeerTable::refresh`]).
    pub fn idle_push_compacts(&self) -> bool {
        self.idle.len() + 1 > 2 * self.map.len() + 64
    }

    /// Drops every stale entry of `idle` (kept out of line: rare, and
    /// inlined it made every call of [`PeerTable::refresh`] dearer).
    #[cold]
    #[inline(never)]
    fn compact_idle(&mut self) {
        let mut idle = std::mem::take(&mut self.idle);
        idle.retain(|e| self.current(e));
        self.idle = idle;
    }

    /// Whether an entry of `idle` still stands for an idle peer.
    fn current(&self, &(t, addr): &(Nanos, SocketAddr)) -> bool {
        self.get(&addr).is_some_and(|p| p.idle_since == Some(t))
    }

    /// Drops stale entries from the front of `idle`.
    fn skip_stale(&mut self) {
        while let Some(e) = self.idle.front() {
            if self.current(e) {
                break;
            }
            self.idle.pop_front();
        }
    }

    /// The longest-idle peer, taken off the idle list.
    fn pop_oldest_idle(&mut self) -> Option<SocketAddr> {
        self.skip_stale();
        self.idle.pop_front().map(|(_, a)| a)
    }

    /// Removes a peer, keeping the idle count.
    fn forget(&mut self, addr: SocketAddr) {
        let Some(i) = self.map.remove(&AddrKey(addr)) else {
            return;
        };
        if let Some((_, p)) = self.slots[i as usize].take() {
            self.idle_count -= p.idle_since.is_some() as usize;
        }
        self.free.push(i);
        if self.last.get().1 == i {
            self.last.set((NO_KEY, 0));
        }
    }

    /// Forgets peers idle since before `now - idle_ns`; returns how many.
    pub fn sweep(&mut self, now: Nanos, idle_ns: Nanos) -> usize {
        let mut n = 0;
        loop {
            self.skip_stale();
            let Some(&(t, addr)) = self.idle.front() else {
                break;
            };
            if now.saturating_sub(t) < idle_ns {
                break;
            }
            self.idle.pop_front();
            self.forget(addr);
            n += 1;
        }
        n
    }

    /// Peers known.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no peer is known.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Since when the longest-idle peer is idle.
    /// (A peer that got busy again may still be counted here until the
    /// next sweep: the time is then earlier than the truth, never later.)
    pub fn oldest_idle(&self) -> Option<Nanos> {
        self.idle.front().map(|&(t, _)| t)
    }

    /// Peers that are idle (forgettable).
    pub fn idle_len(&self) -> usize {
        self.idle_count
    }

    /// Every known peer's address and state, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (SocketAddr, &Peer)> + '_ {
        self.slots.iter().flatten().map(|(a, p)| (*a, p))
    }

    /// The peers we owe acks, in address order. Scans the table: for an
    /// endpoint that is closing (`Endpoint::close`), not for any per-packet
    /// path.
    pub fn owed_acks(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = self
            .iter()
            .filter(|(_, p)| !p.pending_acks.is_empty())
            .map(|(a, _)| a)
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(i: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], i))
    }

    #[test]
    fn idle_for_a_moment_changes_nothing_unless_it_compacts() {
        // Peer 1 ends its last RPC and owes an ack at once: refreshed in
        // between (idle, then busy again) or only after, the table is the
        // same, stale entries and all, while the push would not compact.
        let history = |t: &mut PeerTable| {
            for i in 1..=3 {
                let p = t.get_or_create(a(i)).unwrap();
                p.proven = true;
                p.rpcs = 1;
                t.refresh(a(i), 0);
            }
            // Peer 2 idle, then busy again behind peer 3: a stale entry.
            t.get_mut(&a(2)).unwrap().rpcs = 0;
            t.refresh(a(2), 5);
            t.get_mut(&a(3)).unwrap().rpcs = 0;
            t.refresh(a(3), 6);
            t.get_mut(&a(2)).unwrap().rpcs = 1;
            t.refresh(a(2), 7);
        };
        let (mut both, mut after) = (PeerTable::new(8, 8), PeerTable::new(8, 8));
        history(&mut both);
        history(&mut after);
        assert!(!both.idle_push_compacts());
        both.get_mut(&a(1)).unwrap().rpcs = 0;
        both.refresh(a(1), 10);
        both.get_mut(&a(1)).unwrap().pending_acks.push_back(4);
        both.refresh(a(1), 10);
        after.get_mut(&a(1)).unwrap().rpcs = 0;
        after.get_mut(&a(1)).unwrap().pending_acks.push_back(4);
        after.refresh(a(1), 10);
        // (Everything but the map, whose iteration order is its own.)
        let state =
            |t: &PeerTable| format!("{:?} {:?} {:?} {}", t.slots, t.free, t.idle, t.idle_count);
        assert_eq!(state(&both), state(&after));
        assert_eq!(both.oldest_idle(), Some(5));
        assert_eq!(both.idle_len(), 1);
    }

    #[test]
    fn bounded_and_forgets_idle_peers_first() {
        let mut t = PeerTable::new(2, 8);
        t.get_or_create(a(1)).unwrap().rpcs = 1;
        t.refresh(a(1), 0);
        t.get_or_create(a(2)).unwrap().proven = true;
        t.refresh(a(2), 5);
        // Full: the idle peer 2 makes room for 3.
        t.get_or_create(a(3)).unwrap().rpcs = 1;
        t.refresh(a(3), 6);
        assert!(t.get(&a(2)).is_none());
        // Full of busy peers: refused.
        assert_eq!(t.get_or_create(a(4)).unwrap_err(), PeersFull);
        // A proven peer that goes idle is swept after the idle time; an
        // unproven one at once.
        t.get_mut(&a(1)).unwrap().proven = true;
        t.get_mut(&a(1)).unwrap().rpcs = 0;
        t.refresh(a(1), 10);
        assert_eq!(t.sweep(15, 10), 0);
        assert_eq!(t.sweep(20, 10), 1);
        assert_eq!(t.len(), 1);
        t.get_mut(&a(3)).unwrap().rpcs = 0;
        t.refresh(a(3), 30);
        assert!(t.is_empty());
    }

    /// A peer that goes busy and idle over and over leaves stale entries
    /// that stay bounded, and only its latest idle time counts.
    #[test]
    fn busy_idle_churn_stays_bounded() {
        let mut t = PeerTable::new(4, 8);
        t.get_or_create(a(1)).unwrap().proven = true;
        t.get_or_create(a(2)).unwrap().proven = true;
        t.refresh(a(2), 0);
        for now in 1..10_000 {
            t.get_mut(&a(1)).unwrap().rpcs = 1;
            t.refresh(a(1), now);
            t.get_mut(&a(1)).unwrap().rpcs = 0;
            t.refresh(a(1), now);
            assert!(t.idle.len() <= 2 * t.len() + 64);
            assert_eq!(t.idle_len(), 2);
        }
        // Peer 2 (idle since 0) goes first; peer 1 only from its last
        // idle time (9,999) on.
        assert_eq!(t.sweep(10_000, 5_000), 1);
        assert!(t.get(&a(2)).is_none());
        assert_eq!(t.oldest_idle(), Some(9_999));
        assert_eq!(t.sweep(14_998, 5_000), 0);
        assert_eq!(t.sweep(14_999, 5_000), 1);
        assert!(t.is_empty());
        assert_eq!(t.idle_len(), 0);
    }

    /// A freed slot is reused, and the remembered last lookup never hands
    /// out the slot's new occupant for the old address (or the reverse).
    #[test]
    fn slots_are_reused_and_lookups_never_cross() {
        let mut t = PeerTable::new(2, 8);
        t.get_or_create(a(1)).unwrap().rpcs = 1;
        t.get_or_create(a(2)).unwrap().rpcs = 2;
        assert_eq!(t.get(&a(1)).unwrap().rpcs, 1);
        // Peer 1 leaves (unproven and idle: forgotten at once) right after
        // a lookup made it the remembered one.
        t.get_mut(&a(1)).unwrap().rpcs = 0;
        t.refresh(a(1), 0);
        assert!(t.get(&a(1)).is_none());
        assert!(t.get_mut(&a(1)).is_none());
        // Peer 3 takes the freed slot; the table did not grow.
        t.get_or_create(a(3)).unwrap().rpcs = 3;
        assert_eq!(t.slots.len(), 2);
        assert!(t.get(&a(1)).is_none());
        assert_eq!(t.get(&a(3)).unwrap().rpcs, 3);
        assert_eq!(t.get(&a(2)).unwrap().rpcs, 2);
        assert_eq!(t.get(&a(3)).unwrap().rpcs, 3);
        // IPv6 peers are found through the map alone.
        let v6: SocketAddr = "[::1]:7".parse().unwrap();
        t.get_mut(&a(2)).unwrap().rpcs = 0;
        t.get_mut(&a(2)).unwrap().proven = true;
        t.refresh(a(2), 0);
        t.get_or_create(v6).unwrap().rpcs = 6;
        assert_eq!(t.get(&v6).unwrap().rpcs, 6);
        assert_eq!(t.get(&a(3)).unwrap().rpcs, 3);
        assert_eq!(t.get(&v6).unwrap().rpcs, 6);
        assert!(t.get(&"[::2]:7".parse().unwrap()).is_none());
        t.get_mut(&v6).unwrap().rpcs = 0;
        t.refresh(v6, 0);
        assert!(t.get(&v6).is_none());
        t.get_or_create(a(2)).unwrap().rpcs = 2;
        let mut all: Vec<_> = t.iter().map(|(addr, p)| (addr, p.rpcs)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(a(2), 2), (a(3), 3)]);
        // Many peers coming and going never grow the slots past the bound.
        for i in 10..1_000 {
            if let Some(p) = t.get_mut(&a(3)) {
                p.rpcs = 0;
            }
            t.refresh(a(3), 0);
            let p = t.get_or_create(a(i)).unwrap();
            assert_eq!(p.rpcs, 0, "a new peer starts afresh");
            t.refresh(a(i), 0);
            assert!(t.get(&a(i)).is_none());
            assert!(t.slots.len() <= 2 && t.len() <= 2);
        }
    }

    #[test]
    fn timer_slots_spread_over_ticks() {
        let mut p = Peer::new(8);
        assert_eq!(p.reserve_timer_slot(1, 2), 1);
        assert_eq!(p.reserve_timer_slot(1, 2), 1);
        assert_eq!(p.reserve_timer_slot(1, 2), 2);
        assert_eq!(p.reserve_timer_slot(1, 2), 2);
        assert_eq!(p.reserve_timer_slot(1, 2), 3);
        // Time moved on past the reservations.
        assert_eq!(p.reserve_timer_slot(9, 2), 9);
    }
}
