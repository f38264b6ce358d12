//! The receive path and the reader role: who reads the socket, how it
//! sleeps (in the receive call itself on UDP, woken by the socket's receive
//! timeout at its deadline), and how waiting threads get what they wait
//! for.

use super::*;

/// Most ended RPCs a thread frees ([`homa_core::Endpoint::reap`]) each time
/// it is about to sleep or finds no input: the freeing waits for a moment
/// with nothing better to do (as Linux's `homa_rpc_reap`), never between
/// a packet's arrival and handing its message over, and a batch holds the
/// endpoint's lock only briefly. (The core frees the oldest by itself
/// when more than `homa_core::endpoint::MAX_DEAD_RPCS` wait.)
const REAP_BATCH: usize = 16;
/// A receive call that may sleep and took at least this long (ns) to bring
/// its first datagram slept for it; one that finds a datagram queued
/// returns in about a microsecond.
const SLEPT_NS: Nanos = 4_000;

impl Inner {
    /// Takes in one received datagram: through the fault shim if there is
    /// one, then the port check, then the core.
    pub(super) fn receive(
        &self,
        st: &mut State,
        now: Nanos,
        src: SocketAddr,
        bytes: &[u8],
        meta: PacketMeta,
    ) {
        let Some(f) = st.faults.as_mut() else {
            self.deliver(st, now, src, bytes, meta);
            return;
        };
        let s = &self.stats;
        let verdict = f.recv.decide();
        match verdict {
            Verdict::Pass => {}
            Verdict::Drop => {
                s.injected_recv_drops.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Verdict::Duplicate => {
                s.injected_recv_duplicates.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Hold => {
                s.injected_recv_reorders.fetch_add(1, Ordering::Relaxed);
                f.recv.hold(now, (src, bytes.to_vec(), meta.ce));
                return;
            }
        }
        let released = f.recv.passed();
        self.deliver(st, now, src, bytes, meta);
        if verdict == Verdict::Duplicate {
            self.deliver(st, now, src, bytes, meta);
        }
        for (src, bytes, ce) in released {
            self.deliver(st, now, src, &bytes, late(ce));
        }
    }

    /// Hands the `n` datagrams received in `rb` to the core (kicks
    /// dropped); returns whether there was a kick among them.
    /// `backlogged`: more were waiting than the call took.
    pub(super) fn receive_batch(
        &self,
        st: &mut State,
        now: Nanos,
        rb: &mut RecvBufs,
        n: usize,
        backlogged: bool,
    ) -> bool {
        let mut ce_marks = 0;
        let mut kicked = false;
        for i in 0..n {
            // A large packet alone in its buffer is kept as it is (no
            // copy), unless the fault shim wants a copy to play with.
            let owned = if st.faults.is_none() {
                rb.take_datagram(i)
            } else {
                None
            };
            if let Some((src, bytes, ce)) = owned {
                ce_marks += ce as u64;
                let meta = PacketMeta { ce, backlogged };
                if self.ports_match(src, &bytes) {
                    st.core.handle_packet_bytes_meta(now, src.ip(), bytes, meta);
                }
                continue;
            }
            let (src, bytes, ce) = rb.datagram(i);
            if crate::socket::is_kick(src, bytes, self.local) {
                kicked = true;
                continue;
            }
            ce_marks += ce as u64;
            self.receive(st, now, src, bytes, PacketMeta { ce, backlogged });
        }
        if ce_marks > 0 {
            self.stats
                .ce_received
                .fetch_add(ce_marks, Ordering::Relaxed);
        }
        kicked
    }

    /// Hands held-back received packets whose time has come to the core.
    pub(super) fn receive_due(&self, st: &mut State, now: Nanos) {
        let Some(f) = st.faults.as_mut() else {
            return;
        };
        for (src, bytes, ce) in f.recv.due(now) {
            self.deliver(st, now, src, &bytes, late(ce));
        }
    }

    /// Hands a packet to the core unless its Homa ports contradict its UDP
    /// ports (UDP only; shorter packets go on, for the core to reject).
    /// `meta.backlogged`: the socket holds more than we took in this call,
    /// so the core may shed new requests of unproven peers (see
    /// `homa_core::Endpoint::handle_packet_backlogged`); `meta.ce`: the
    /// packet came marked CE.
    pub(super) fn deliver(
        &self,
        st: &mut State,
        now: Nanos,
        src: SocketAddr,
        bytes: &[u8],
        meta: PacketMeta,
    ) {
        if self.ports_match(src, bytes) {
            st.core.handle_packet_meta(now, src.ip(), bytes, meta);
        }
    }

    /// UDP only: whether the Homa header's ports agree with the datagram's
    /// UDP source port and this endpoint's port (counted and false if not).
    pub(super) fn ports_match(&self, src: SocketAddr, bytes: &[u8]) -> bool {
        if self.sock.has_udp_ports() && bytes.len() >= 4 {
            let sport = u16::from_be_bytes([bytes[0], bytes[1]]);
            let dport = u16::from_be_bytes([bytes[2], bytes[3]]);
            if sport != src.port() || dport != self.local.port() {
                self.stats
                    .port_mismatch_drops
                    .fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        true
    }

    /// Hands the ICMP destination-unreachables queued on a raw socket to
    /// the core, which ends the RPCs they name (see
    /// `homa_core::Endpoint::handle_unreachable`).
    #[inline]
    pub(super) fn take_icmp_errors(&self) {
        let errors = self.sock.take_icmp_errors();
        if errors.is_empty() {
            return;
        }
        self.handle_icmp_errors(errors);
    }

    /// [`Inner::take_icmp_errors`] when there are some.
    #[inline(never)]
    fn handle_icmp_errors(&self, errors: Vec<(std::net::IpAddr, Vec<u8>)>) {
        self.stats
            .icmp_errors
            .fetch_add(errors.len() as u64, Ordering::Relaxed);
        let mut st = self.lock();
        let now = self.now();
        for (dst, quoted) in &errors {
            st.core.handle_unreachable(now, *dst, quoted);
        }
        self.end_round(st, now);
    }

    /// Ends a round of input: takes what the core will send, hands events
    /// to their waiters, then (the lock released) wakes those threads and
    /// sends.
    pub(super) fn end_round(&self, mut st: MutexGuard<'_, State>, now: Nanos) {
        let mut out = Output::new();
        self.take_output(&mut st, now, &mut out);
        self.dispatch(&mut st, now);
        let send = self.queue_out(&mut out);
        let woken = st.parked.take_woken();
        let kicks = st.lanes.take_kicks();
        drop(st);
        unpark(woken);
        if kicks != 0 {
            self.kick_lanes(kicks);
        }
        self.send_queued(send, &out);
    }

    /// One round of the reader's work: wait for input (or a deadline), then
    /// process what came and run due timers. Readers sleep in `ppoll` (the
    /// background thread can be kicked out of it); a polling thread does not
    /// sleep.
    pub(super) fn reader_step(&self, deadline: Option<Instant>, mode: ReadMode, spins: u32) {
        if mode == ReadMode::Busy {
            // Spinning: look at timers and the pacer only now and then. (A
            // call for a whole batch costs no more than a probe for one
            // datagram when one is queued, and under load, e.g. a flood,
            // reading one per call made the reader fall behind.)
            self.take_input(self.config.recv_batch, spins % 32 == 0);
        } else {
            let block = self.sleep_until_input(deadline, mode);
            self.take_input_from(self.config.recv_batch, true, block);
        }
    }

    /// Sleeps until the socket is readable, the next timer or pacer
    /// deadline, `deadline`, or a kick. Returns true instead of sleeping
    /// when the caller is to sleep in the receive call itself (an
    /// application reader on UDP with its next deadline far enough away):
    /// the socket's receive timeout ends that sleep (see
    /// `socket/timeout.rs`) by the caller's deadline and the core's next
    /// timer. Only for the pacer's and the fault shim's deadlines, which
    /// need more precision, does the background thread kick the reader; a
    /// strict deadline nearer than a jiffy is slept for in `ppoll`, which
    /// needs no other thread either. (The core's lenient timers, an ack
    /// flush above all, may be served up to a jiffy late: before that
    /// distinction a client slept in `ppoll` on nearly every round trip.)
    pub(super) fn sleep_until_input(&self, deadline: Option<Instant>, mode: ReadMode) -> bool {
        self.sweep_a_free_lane();
        let now = self.now();
        let mut st = self.lock();
        // About to sleep: free ended RPCs first (their timers too, so the
        // deadlines below are not theirs), and do what the core left for
        // after a send.
        st.core.settle();
        st.core.reap(REAP_BATCH);
        let since = |t: Nanos| Duration::from_nanos(t.saturating_sub(now));
        // The core's strict timers and the caller's deadline must not be
        // missed (a late RESEND tick delays the recovery of every lost
        // packet); its lenient ones (an ack flush: a client nearly always
        // has one under a jiffy away) and the safety net of `MAX_SLEEP`,
        // when nothing comes sooner, may run late by less than a jiffy.
        let core = st.core.poll_timeout().map(since);
        let strict = st.core.poll_timeout_strict().map(since);
        let coarse = core.unwrap_or(MAX_SLEEP).min(MAX_SLEEP);
        let user = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        // Deadlines finer than a jiffy: the pacer's and the fault shim's.
        let mut fine = None;
        if st.held.is_some() {
            if let Some(p) = &st.pacer {
                fine = Some(Duration::from_nanos(p.next_send_time(now) - now));
            }
        }
        if let Some(t) = st.faults.as_ref().and_then(|f| f.next_deadline()) {
            let fw = since(t);
            fine = Some(fine.map_or(fw, |x: Duration| x.min(fw)));
        }
        let exact = match (user, fine) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wait = coarse.min(exact.unwrap_or(Duration::MAX));
        if mode == ReadMode::App && self.sock.can_block() && wait >= BLOCK_IN_RECV_FROM {
            let jiffy = crate::socket::jiffy();
            let fine_first = fine.is_some_and(|f| f <= wait);
            if let (false, Some(j)) = (fine_first, jiffy) {
                let late = strict
                    .unwrap_or(Duration::MAX)
                    .min(coarse + j - Duration::from_nanos(1));
                let latest = late.min(exact.unwrap_or(Duration::MAX));
                if self.sock.bound_recv_wait(latest) {
                    st.recv_blocked = true;
                    return true;
                }
            }
            if fine_first || jiffy.is_none() {
                let until = now + wait.as_nanos() as Nanos;
                st.recv_blocked = true;
                st.recv_blocked_until = Some(until);
                // (Under the lock: the background thread decides how long
                // to sleep under it too, so it cannot miss this.)
                if st.bg_wakes_at.is_none_or(|t| t > until) {
                    self.bg_cond.notify_one();
                }
                return true;
            }
        }
        drop(st);
        if wait > SPIN_BELOW {
            let (_, kicked, error) = sleep(self.sock.fd(), &self.kick, Some(wait));
            if error {
                // `take_input` reads the queued ICMP errors (a socket with
                // one queued stays POLLERR).
                self.sock.note_poll_error();
            }
            if kicked {
                self.kick.drain();
            }
        }
        false
    }

    /// Processes whatever the socket holds, runs due timers, sends what
    /// that produced and hands events to their waiters.
    pub(super) fn take_input(&self, first: usize, housekeeping: bool) {
        self.take_input_from(first, housekeeping, false)
    }

    /// [`Inner::take_input`]; with `block`, the first receive call sleeps
    /// until something comes ([`HomaSocket::recv_wait`]).
    pub(super) fn take_input_from(&self, first: usize, housekeeping: bool, mut block: bool) {
        let mut rb = self.recv_bufs.lock();
        self.take_icmp_errors();
        // A polling reader between round trips asks for one datagram (see
        // `RecvBufs::probe_size`); if one came, the round ends with it
        // (another call now would most likely find nothing, and its cost
        // would be on the round trip), and the next call takes a batch.
        // A sleeping reader whose last sleep ended with one datagram asks
        // for one again (`RecvBufs::block_size`): if it sleeps for it, the
        // socket held nothing else, and the round ends with it as a
        // probe's does.
        let mut max = if block {
            rb.block_size(first)
        } else {
            rb.probe_size(first)
        };
        let probe = max < first;
        for _ in 0..RECV_ROUNDS {
            // (When the call that may sleep began: endpoint time, ns.)
            let began = block.then(|| self.now());
            let got = if block {
                self.sock.recv_wait(&mut rb, max)
            } else {
                self.sock.recv(&mut rb, max)
            };
            let n = match got {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "receive failed");
                    0
                }
            };
            rb.note_received(n, block);
            if n == 0 && !housekeeping {
                return;
            }
            if n > 0 {
                self.stats.recv_calls.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .packets_received
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
            let mut st = self.lock();
            if block {
                st.recv_blocked = false;
                st.recv_blocked_until = None;
                block = false;
                if n == 0 {
                    self.stats.recv_timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
            let now = self.now();
            // Whether the call slept for what it brought (a call that finds
            // its datagram queued returns in about a microsecond).
            let slept = began.is_some_and(|b| n > 0 && now.saturating_sub(b) >= SLEPT_NS);
            if began.is_some() {
                rb.note_slept(slept);
            }
            if n == 0 {
                // Nothing came: a moment to free ended RPCs (and to do what
                // the core left for after a send).
                st.core.settle();
                st.core.reap(REAP_BATCH);
            }
            let backlogged = n == max && max > 1;
            self.receive_batch(&mut st, now, &mut rb, n, backlogged);
            // (Only with the fault shim: the call to find that out cost
            // some 20 instructions a round.)
            if st.faults.is_some() {
                self.receive_due(&mut st, now);
            }
            // Timers only once the socket is drained: packets still queued
            // in our own socket must not count as a peer's silence. (Not
            // after a one-datagram call, even one that slept: that it
            // slept is a guess from the time it took, and a reader behind
            // under load must not judge a peer silent. A timer that is due
            // keeps the next round from sleeping, and its batch call
            // drains the socket.)
            let drained = n < max;
            if drained && st.core.poll_timeout().is_some_and(|t| t <= now) {
                st.core.handle_timeout(now);
            } else if !drained
                && st
                    .core
                    .poll_timeout()
                    .is_some_and(|t| t + st.core.config().tick_ns <= now)
            {
                // Behind by more than a tick with packets still queued (a
                // flood): let the core give up on peers that never answered,
                // without judging the others' silence.
                st.core.handle_timeout_backlogged(now);
            }
            self.end_round(st, now);
            if drained || probe {
                break;
            }
            max = self.config.recv_batch;
        }
    }

    /// Waits until `check` yields a result, reading the socket meanwhile if
    /// nobody else does.
    pub(super) fn wait_until<T>(
        &self,
        what: WaitFor,
        deadline: Option<Instant>,
        check: impl FnMut(&mut State) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait_until_with(what, deadline, None, None, check)
    }

    /// [`Inner::wait_until`], with a [`Handoff`] the result may come in
    /// instead: `check` enters it in the endpoint's state (under the lock)
    /// while it finds no result; `unregister(st)` takes it out when the
    /// wait ends without one (a timeout, a close; a result from `check`
    /// means `check` left nothing behind). Woken with the result in it,
    /// the thread returns without taking the endpoint's lock again.
    /// `clock` is a reading of the clock the caller took just before (to
    /// compute `deadline`), if any: the first round uses it instead of
    /// reading the clock again (the first round read it three more times,
    /// each a vDSO call and `Instant` arithmetic, some 40 instructions).
    #[allow(clippy::type_complexity)]
    pub(super) fn wait_until_with<T>(
        &self,
        what: WaitFor,
        deadline: Option<Instant>,
        clock: Option<Instant>,
        handoff: Option<(&Handoff<Result<T, Error>>, &dyn Fn(&mut State))>,
        mut check: impl FnMut(&mut State) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiters);
        let busy = self.config.busy_poll;
        // Like Homa/Linux, poll a while before sleeping: a message that
        // comes soon is taken without a wake-up.
        let mut polling = self.config.poll_us > 0
            && !busy
            && !(self.config.poll_adaptive && self.cpu.contended());
        if polling {
            self.stats.polled_waits.fetch_add(1, Ordering::Relaxed);
        }
        // A reading still fresh (nothing waited since it was taken): the
        // clock is read again only after the thread waited or read input.
        let mut fresh = clock;
        let now = |fresh: &mut Option<Instant>| *fresh.get_or_insert_with(Instant::now);
        let poll_until = if polling {
            now(&mut fresh) + Duration::from_micros(self.config.poll_us)
        } else {
            self.epoch
        };
        let mut spins: u32 = 0;
        let mut seen = u64::MAX;
        let mut reading = false;
        let mut st = self.lock();
        // What the core left for after the send (`homa_core::Endpoint::
        // settle`): this thread usually comes here from sending a request
        // or a reply, and has nothing more urgent to do.
        st.core.settle();
        // Whether the loop ended with a result (from the handoff or the
        // check), which leaves nothing registered.
        let mut settled = true;
        let mut result = loop {
            if let Some(r) = handoff.and_then(|(h, _)| h.take()) {
                break r;
            }
            if self.closed.load(Ordering::Acquire) {
                settled = false;
                break Err(Error::Closed);
            }
            if st.generation != seen {
                seen = st.generation;
                if let Some(r) = check(&mut st) {
                    break r;
                }
                // Nothing for this thread yet: a moment to free ended RPCs
                // (as Linux's homa_wait_for_message reaps before it polls).
                st.core.reap(REAP_BATCH);
            }
            // (Spinning threads read the clock only now and then.)
            if (spins % 16 == 0 || !busy) && deadline.is_some_and(|d| now(&mut fresh) >= d) {
                settled = false;
                break Err(Error::Timeout);
            }
            if !reading && st.reader == Reader::Nobody {
                // (Straight on to read: what was checked above still holds.)
                st.reader = Reader::App;
                st.parked.set_reader(Some(what));
                reading = true;
            }
            if reading {
                drop(st);
                spins = spins.wrapping_add(1);
                let mode = if busy || (polling && now(&mut fresh) < poll_until) {
                    ReadMode::Busy
                } else {
                    polling = false;
                    ReadMode::App
                };
                self.reader_step(deadline, mode, spins);
                fresh = None;
                st = self.lock();
                continue;
            }
            if st.reader == Reader::Background {
                self.kick.kick();
            }
            // Only the reader polls; others would just burn the CPU the
            // reader needs (unless busy polling was asked for).
            if busy {
                drop(st);
                std::hint::spin_loop();
                fresh = None;
                st = self.lock();
                continue;
            }
            let mut wait = MAX_SLEEP;
            if let Some(d) = deadline {
                wait = wait.min(d.saturating_duration_since(Instant::now()));
            }
            st.core.settle();
            st.core.reap(REAP_BATCH);
            let ticket = st.parked.enter(what);
            drop(st);
            std::thread::park_timeout(wait);
            fresh = None;
            if let Some(r) = handoff.and_then(|(h, _)| h.take()) {
                // Whoever put it there also took the handoff, the claim
                // and this thread's parked entry out of the state: nothing
                // is left to do under the lock. (A thread parked here is
                // never the reader.)
                return r;
            }
            st = self.lock();
            st.parked.leave(what, ticket);
        };
        if let Some((h, unregister)) = handoff.filter(|_| !settled) {
            unregister(&mut st);
            // (Filled only under the lock, so not after the check above
            // unless by this very round: keep what it brought.)
            if let Some(r) = h.take() {
                result = r;
            }
        }
        self.sync_ready(&st);
        if reading {
            st.reader = Reader::Nobody;
            st.reader_free_at = self.recent_now();
            st.parked.set_reader(None);
            st.parked.wake_one();
            let woken = st.parked.take_woken();
            drop(st);
            unpark(woken);
        }
        result
    }

    /// Reads the socket whenever no application thread does.
    pub(super) fn background(self: Arc<Self>) {
        loop {
            let mut st = self.lock();
            loop {
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                let now = self.now();
                let free = st.reader == Reader::Nobody
                    && self.waiters.load(Ordering::Acquire) == 0
                    && now.saturating_sub(st.reader_free_at)
                        >= BACKGROUND_GRACE.as_nanos() as Nanos;
                if free {
                    break;
                }
                // While application threads wait, one of them reads: sleep
                // until told (`watch.rs` tells when none waits any more).
                let mut wait = if self.waiters.load(Ordering::Acquire) > 0 {
                    BACKGROUND_IDLE
                } else {
                    BACKGROUND_GRACE
                };
                if let Some(until) = st.recv_blocked_until {
                    // An application reader sleeps in the receive call
                    // with a deadline its receive timeout cannot keep
                    // (the pacer's, the fault shim's): wake it on time.
                    if until <= now {
                        st.recv_blocked_until = None;
                        self.kick_self();
                        continue;
                    }
                    wait = wait.min(Duration::from_nanos(until - now));
                }
                st.bg_wakes_at = Some(now + wait.as_nanos() as Nanos);
                self.bg_cond.wait_for(&mut st, wait);
                self.stats.background_wakes.fetch_add(1, Ordering::Relaxed);
                st.bg_wakes_at = None;
            }
            st.reader = Reader::Background;
            self.stats.background_reads.fetch_add(1, Ordering::Relaxed);
            drop(st);
            while !self.closed.load(Ordering::Acquire) && self.waiters.load(Ordering::Acquire) == 0
            {
                self.reader_step(None, ReadMode::Background, 0);
            }
            let mut st = self.lock();
            st.reader = Reader::Nobody;
            st.reader_free_at = self.now();
            st.parked.wake_one();
            let woken = st.parked.take_woken();
            drop(st);
            unpark(woken);
        }
    }
}
