//! A blocking call in a lane of its own (`Config::lanes`, UDP; the sockets
//! are `socket/lanes.rs`'s): the call's RPC gets an id whose bits name a
//! free lane, and its thread sleeps in that lane's socket, which only this
//! RPC's packets reach, so the kernel wakes it directly when its grants
//! and response come: no reader thread reads them for it and wakes it
//! (two wake-ups a call instead of one, the hand-off that kept many
//! threads sharing one endpoint behind TCP's one connection each).
//!
//! Everything else stays with the reader of the main socket (lane 0): new
//! requests of a server, `send_request`'s RPCs, timers. The thread in a
//! lane hands what it reads to the core as any reader does, under the
//! endpoint's lock, but runs no timers (the reader does; a lane's packets
//! a slow thread has not read yet may then look like silence, which costs
//! a RESEND at worst). A lane nobody holds may still get packets (a late
//! NEED_ACK, a duplicate): the thread leaving a lane reads what is there,
//! and the reader reads one free lane each time it is about to sleep.

use super::*;
use crate::socket::{lane_kick, lane_of};

/// Datagrams a lane's thread takes per receive call.
const LANE_BATCH: usize = 8;

/// Longest a lane's thread sleeps in one receive call: the bound on how
/// late it notices an outcome another thread put in its handoff if that
/// thread's kick were lost (a full socket refuses it, but then the lane
/// has packets: its thread is awake anyway).
const LANE_SLEEP: Duration = Duration::from_millis(20);

/// One lane beside the main socket.
pub(super) struct Lane {
    /// Its socket, in the main socket's group.
    pub(super) sock: HomaSocket,
    /// Its receive buffers, made on first use; held by the thread in the
    /// lane for its whole call (or by the reader sweeping a free lane).
    bufs: Mutex<Option<RecvBufs>>,
}

impl Lane {
    pub(super) fn new(sock: HomaSocket) -> Lane {
        Lane {
            sock,
            bufs: Mutex::new(None),
        }
    }
}

/// Which lanes are taken, and the kicks owed (under the endpoint's lock;
/// a thread leaving its lane frees it without the lock).
#[derive(Default)]
pub(super) struct LaneState {
    /// Lanes the endpoint has (0, or a power of two: 1 << bits).
    count: usize,
    /// Bit k: a call holds lane k (bit 0, the main socket, never); the
    /// same as `Inner::lane_taken`, through which a thread leaving its
    /// lane frees it.
    taken: Arc<AtomicU64>,
    /// Bit k: the thread in lane k must be woken (its outcome came
    /// through another thread, or its RPC was aborted), once the lock is
    /// released.
    kicks: u64,
    /// The next free lane the reader looks into.
    sweep: usize,
    /// A call has taken a lane (before, there is nothing to sweep).
    used: bool,
}

impl LaneState {
    pub(super) fn new(count: usize, taken: Arc<AtomicU64>) -> LaneState {
        LaneState {
            count,
            taken,
            ..LaneState::default()
        }
    }

    /// Takes a free lane for a call, `hint` (the thread's last) if free,
    /// else the lowest; `None` when every lane is taken or there are none.
    fn take(&mut self, hint: usize) -> Option<usize> {
        if self.count <= 1 {
            return None;
        }
        let all = if self.count == 64 {
            u64::MAX
        } else {
            (1u64 << self.count) - 1
        };
        let free = all & !self.taken.load(Ordering::Acquire) & !1;
        if free == 0 {
            return None;
        }
        let lane = if hint > 0 && hint < self.count && free & (1 << hint) != 0 {
            hint
        } else {
            free.trailing_zeros() as usize
        };
        // (Under the lock: only frees race with this, each of its own bit.)
        self.taken.fetch_or(1 << lane, Ordering::AcqRel);
        self.used = true;
        Some(lane)
    }

    /// The id tag that puts an RPC in `lane` (none without lanes).
    pub(super) fn tag(&self, lane: usize) -> homa_core::IdTag {
        if self.count <= 1 {
            return homa_core::IdTag::NONE;
        }
        homa_core::IdTag {
            mask: ((self.count as u64) - 1) << 1,
            bits: (lane as u64) << 1,
        }
    }

    /// A thread in a lane waits for `rpc`, whose outcome has just gone
    /// elsewhere than through that thread's own read (or which was
    /// aborted): it owes that thread a kick, unless the caller is it.
    pub(super) fn note_finished(&mut self, rpc: RpcId) {
        if self.count <= 1 || !rpc.is_client() {
            return;
        }
        let lane = lane_of(rpc.id, self.count);
        if lane != 0 && self.is_taken(lane) && IN_LANE.get() != lane {
            self.kicks |= 1 << lane;
        }
    }

    /// The kicks owed, now taken.
    pub(super) fn take_kicks(&mut self) -> u64 {
        std::mem::take(&mut self.kicks)
    }

    /// Every taken lane (a shutdown wakes them all).
    pub(super) fn all_taken(&self) -> u64 {
        self.taken.load(Ordering::Acquire)
    }

    fn is_taken(&self, lane: usize) -> bool {
        self.taken.load(Ordering::Acquire) & (1 << lane) != 0
    }

    /// Frees `lane`.
    fn free(&self, lane: usize) {
        self.taken.fetch_and(!(1 << lane), Ordering::AcqRel);
    }

    /// The next free lane for the reader to look into, round the lanes.
    fn next_free(&mut self) -> Option<usize> {
        if !self.used {
            return None;
        }
        for _ in 1..self.count {
            self.sweep = if self.sweep + 1 >= self.count {
                1
            } else {
                self.sweep + 1
            };
            if !self.is_taken(self.sweep) {
                return Some(self.sweep);
            }
        }
        None
    }
}

thread_local! {
    /// The lane this thread is in (0: none).
    static IN_LANE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The lane this thread had last: it takes it again when free, so the
    /// stragglers of its last RPC (a NEED_ACK) come to a socket it reads.
    static LAST_LANE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Inner {
    /// Frees `lane` (without the endpoint's lock: `LaneState::taken` is
    /// shared with `Inner::lane_taken`).
    fn lanes_free(&self, lane: usize) {
        self.lane_taken.fetch_and(!(1 << lane), Ordering::AcqRel);
    }

    /// The lanes' sockets, opened on first use (none if that failed: the
    /// endpoint then works without, as with `lanes` 0).
    fn lane_sockets(&self) -> &[Lane] {
        self.lanes.get_or_init(
            || match crate::socket::open_lanes(self.local, &self.group) {
                Ok(v) => v.into_iter().map(Lane::new).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open the lanes' sockets; calls go without");
                    Vec::new()
                }
            },
        )
    }

    /// Wakes the threads in the lanes of `kicks` (bits), out of the lock.
    pub(super) fn kick_lanes(&self, kicks: u64) {
        let mut k = kicks;
        while k != 0 {
            let lane = k.trailing_zeros() as usize;
            k &= k - 1;
            let lanes = self.lanes.get().map_or(&[][..], |v| &v[..]);
            if let Some(l) = lanes.get(lane.wrapping_sub(1)) {
                l.sock.kick_self_with(self.local, &lane_kick(lane));
            }
        }
    }

    /// `call` in a lane: sends the request with an id in a free lane and
    /// waits in that lane. `None` (nothing sent) when no lane is free.
    pub(super) fn call_in_lane(
        &self,
        dest: SocketAddr,
        request: &Bytes,
        timeout: Duration,
    ) -> Option<Result<Message, Error>> {
        if self.lane_sockets().is_empty() {
            return None;
        }
        let mut out = Output::new();
        let (id, lane, first, st, send) = match self.start_request_in_lane(dest, request, &mut out)
        {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.stats
                    .lane_calls_refused
                    .fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Err(e) => return Some(Err(e)),
        };
        drop(st);
        self.stats.lane_calls.fetch_add(1, Ordering::Relaxed);
        self.send_queued(send, &out);
        let clock = Instant::now();
        let r = self.wait_in_lane(lane, id, first, Some(clock + timeout), clock);
        if matches!(r, Err(Error::Timeout)) {
            let _ = self.abort_rpc(id);
        }
        Some(r)
    }

    /// [`Inner::start_request`] in a free lane; the RPC is claimed for
    /// this thread's handoff at once (the outcome, if already known, is
    /// returned: an RPC refused at once).
    #[allow(clippy::type_complexity)]
    fn start_request_in_lane(
        &self,
        dest: SocketAddr,
        request: &Bytes,
        out: &mut Output,
    ) -> Result<
        Option<(
            RpcId,
            usize,
            Option<Outcome>,
            MutexGuard<'_, State>,
            Option<sendq::KeyMask>,
        )>,
        Error,
    > {
        self.check_open()?;
        self.check_dest(dest)?;
        let mut st = self.lock();
        self.check_open()?;
        let Some(lane) = st.lanes.take(LAST_LANE.get()) else {
            return Ok(None);
        };
        let now = self.now();
        let tag = st.lanes.tag(lane);
        let id = match st.core.send_request_tagged(now, dest, request.clone(), tag) {
            Ok(id) => id,
            Err(e) => {
                st.lanes.free(lane);
                return Err(e.into());
            }
        };
        LAST_LANE.set(lane);
        st.clients.start(id);
        let first = HANDOFF.with(|h| st.clients.collect(id, h));
        self.take_output(&mut st, now, out);
        self.wake_reader_for_pacer(&st);
        let send = self.queue_out(out);
        Ok(Some((id, lane, first, st, send)))
    }

    /// Waits in `lane` for the outcome of `id` (in that lane), reading the
    /// lane's socket: polling first as `wait_until` does, then asleep in
    /// the receive call. Leaves the lane on return.
    fn wait_in_lane(
        &self,
        lane: usize,
        id: RpcId,
        mut first: Option<Outcome>,
        deadline: Option<Instant>,
        clock: Instant,
    ) -> Result<Message, Error> {
        let l = &self.lane_sockets()[lane - 1];
        let mut guard = l.bufs.lock().unwrap_or_else(|p| p.into_inner());
        let rb = guard.get_or_insert_with(|| RecvBufs::new(LANE_BATCH));
        IN_LANE.set(lane);
        let busy = self.config.busy_poll;
        let polling = !busy
            && self.config.poll_us > 0
            && !(self.config.poll_adaptive && self.cpu.contended());
        if polling {
            self.stats.polled_waits.fetch_add(1, Ordering::Relaxed);
        }
        let poll_until = clock + Duration::from_micros(self.config.poll_us);
        let (result, settled) = HANDOFF.with(|h| {
            loop {
                // (The handoff first: an outcome put there has left the table, where
                // a look finds the RPC unknown.)
                if let Some(r) = h.take().or_else(|| first.take()) {
                    break (r, true);
                }
                if self.closed.load(Ordering::Acquire) {
                    break (Err(Error::Closed), false);
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break (Err(Error::Timeout), false);
                }
                let spinning = busy || (polling && now < poll_until);
                let n = if spinning {
                    l.sock.recv(rb, LANE_BATCH)
                } else {
                    let wait = deadline.map_or(LANE_SLEEP, |d| (d - now).min(LANE_SLEEP));
                    if l.sock.bound_recv_wait(wait) {
                        let n = l.sock.recv_wait(rb, LANE_BATCH);
                        if matches!(n, Ok(0)) {
                            self.stats.lane_timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        n
                    } else {
                        // Nearer than the kernel's timeout can keep: ppoll.
                        let _ = sleep(l.sock.fd(), &self.kick, Some(wait));
                        l.sock.recv(rb, LANE_BATCH)
                    }
                };
                // Woken by a kick (an abort, a shutdown, an outcome through
                // another thread) or by the timeout: look again. (Not after
                // each empty poll: that would take the lock on every spin.)
                let empty = matches!(n, Ok(0) | Err(_));
                if self.take_lane_input(rb, n) || (empty && !spinning) {
                    first = self.lock().clients.collect(id, h);
                }
            }
        });
        if !settled {
            let mut st = self.lock();
            HANDOFF.with(|h| st.clients.unclaim(id, h));
        }
        // (What comes to the lane later, e.g. a late duplicate, is read by
        // its next thread or the reader's sweep.)
        self.lanes_free(lane);
        IN_LANE.set(0);
        drop(guard);
        result
    }

    /// Hands `n` datagrams read from a lane to the core and ends the round
    /// (no timers: the main socket's reader runs them). True when there
    /// was a kick among them.
    fn take_lane_input(&self, rb: &mut RecvBufs, n: io::Result<usize>) -> bool {
        let n = match n {
            Ok(0) => return false,
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "lane receive failed");
                return false;
            }
        };
        self.stats.recv_calls.fetch_add(1, Ordering::Relaxed);
        self.stats
            .packets_received
            .fetch_add(n as u64, Ordering::Relaxed);
        let mut st = self.lock();
        let now = self.now();
        let kicked = self.receive_batch(&mut st, now, rb, n, false);
        self.receive_due(&mut st, now);
        self.end_round(st, now);
        kicked
    }

    /// The reader, about to sleep: reads one free lane (round the lanes),
    /// so that a straggler in a lane nobody holds is not left there.
    pub(super) fn sweep_a_free_lane(&self) {
        let Some(lanes) = self.lanes.get() else {
            return;
        };
        if lanes.is_empty() {
            return;
        }
        let Some(lane) = self.lock().lanes.next_free() else {
            return;
        };
        let l = &lanes[lane - 1];
        // (Taken meanwhile: its thread reads it.)
        let Ok(mut guard) = l.bufs.try_lock() else {
            return;
        };
        let rb = guard.get_or_insert_with(|| RecvBufs::new(LANE_BATCH));
        let n = l.sock.recv(rb, LANE_BATCH);
        let _ = self.take_lane_input(rb, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_taken_by_hint_then_lowest_and_never_lane_0() {
        let mut s = LaneState::new(4, Arc::default());
        assert_eq!(s.take(2), Some(2));
        assert_eq!(s.take(2), Some(1));
        assert_eq!(s.take(0), Some(3));
        assert_eq!(s.take(1), None);
        s.free(1);
        assert_eq!(s.take(3), Some(1));
        assert_eq!(LaneState::new(0, Arc::default()).take(1), None);
        assert_eq!(LaneState::new(1, Arc::default()).take(0), None);
        let mut all = LaneState::new(64, Arc::default());
        for _ in 1..64 {
            assert!(all.take(0).is_some());
        }
        assert_eq!(all.take(0), None);
    }

    #[test]
    fn tags_put_ids_in_their_lane() {
        let s = LaneState::new(8, Arc::default());
        for lane in 1..8 {
            let t = s.tag(lane);
            for r in [0u64, u64::MAX, 0x1234_5678_9abc_def1] {
                assert_eq!(lane_of(t.apply(r), 8), lane);
            }
        }
    }

    #[test]
    fn kicks_go_to_taken_lanes_of_client_rpcs_only() {
        let mut s = LaneState::new(4, Arc::default());
        let lane = s.take(2).unwrap();
        let peer = "127.0.0.1:9".parse().unwrap();
        let mine = RpcId {
            id: s.tag(lane).apply(0xff00),
            peer,
        };
        s.note_finished(RpcId {
            id: mine.id | 1,
            peer,
        }); // a server RPC
        s.note_finished(RpcId {
            id: s.tag(3).apply(0xff00),
            peer,
        }); // a free lane
        assert_eq!(s.take_kicks(), 0);
        s.note_finished(mine);
        assert_eq!(s.take_kicks(), 1 << lane);
        // The thread in the lane finishing its own RPC owes itself nothing.
        IN_LANE.set(lane);
        s.note_finished(mine);
        IN_LANE.set(0);
        assert_eq!(s.take_kicks(), 0);
    }

    #[test]
    fn the_sweep_visits_free_lanes_in_turn() {
        let mut s = LaneState::new(4, Arc::default());
        s.take(2);
        let seen: Vec<_> = (0..4).map(|_| s.next_free().unwrap()).collect();
        assert_eq!(seen, vec![1, 3, 1, 3]);
    }
}
