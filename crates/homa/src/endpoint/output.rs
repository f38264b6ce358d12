//! The send path: packets taken from the core (through the pacer and the
//! fault shim) and handed to the kernel in the core's order, one thread at
//! a time.

use super::*;

impl Inner {
    /// Takes the core's packets that the pacer lets go now into `out`
    /// (which the caller keeps in place until it is sent: a `Transmit` is
    /// large, and every move of an `Output` copies it). They are sent with
    /// [`Inner::send_out`] after the lock is released, so the kernel's
    /// copying does not hold up other threads.
    pub(super) fn take_output(&self, st: &mut State, now: Nanos, out: &mut Output) {
        let lower = self.sock.lower_header_bytes() as usize;
        loop {
            let t = match st.held.take() {
                Some(t) => t,
                // (A poll that would find nothing is skipped: the one that
                // ends every batch, and one for a grant decision that
                // would decide nothing, made here instead.)
                None if !st.core.may_transmit_now() => break,
                None => match st.core.poll_transmit(now) {
                    Some(t) => t,
                    None => break,
                },
            };
            let ip_bytes = t.len() + lower;
            if let Some(p) = st.pacer.as_mut() {
                if !p.may_send(now, ip_bytes) {
                    st.held = Some(t);
                    self.stats.pacer_holds.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                p.on_send(now, ip_bytes);
            }
            if st.faults.is_none() {
                out.push(t);
            } else {
                self.push_through_faults(st, out, t, now);
            }
        }
        // Packets small enough to bypass the pacer (grants, acks, one-packet
        // messages) must not wait behind the full-size packet it holds.
        if st.held.is_some() {
            if let Some(bypass) = st.pacer.as_ref().map(|p| p.bypass_bytes()) {
                let max_len = bypass.saturating_sub(lower);
                while let Some(t) = st.core.poll_transmit_small(now, max_len) {
                    if let Some(p) = st.pacer.as_mut() {
                        p.on_send(now, t.len() + lower);
                    }
                    self.push_through_faults(st, out, t, now);
                }
            }
        }
        // Packets the fault shim held back whose time has come.
        if let Some(f) = st.faults.as_mut() {
            out.extend(f.send.due(now));
        }
    }

    /// Queues a packet for sending, through the fault shim if there is one.
    pub(super) fn push_through_faults(
        &self,
        st: &mut State,
        out: &mut Output,
        t: Transmit,
        now: Nanos,
    ) {
        let Some(f) = st.faults.as_mut() else {
            out.push(t);
            return;
        };
        let s = &self.stats;
        match f.send.decide() {
            Verdict::Pass => out.push(t),
            Verdict::Drop => {
                s.injected_drops.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Verdict::Duplicate => {
                s.injected_duplicates.fetch_add(1, Ordering::Relaxed);
                out.push(t.clone());
                out.push(t);
            }
            Verdict::Hold => {
                s.injected_reorders.fetch_add(1, Ordering::Relaxed);
                f.send.hold(now, t);
                return;
            }
        }
        out.extend(f.send.passed());
    }

    /// Queues packets taken from the core (call with the state lock held,
    /// so that the line's order is the core's). Returns the batch's
    /// [`sendq::KeyMask`] when the caller is to send it with
    /// [`Inner::send_queued`] after releasing the lock, from where it is
    /// (no copy); `None` when there was nothing to send, or when it shares
    /// an RPC with packets another thread is sending or that wait (it then
    /// moved into the line, and a sending thread will send it in turn).
    /// See `sendq.rs`.
    ///
    /// (Whether there is anything is checked inline: most rounds of input
    /// send nothing, and the call to find that out cost some 25
    /// instructions a round; the same for [`Inner::send_queued`].)
    #[inline]
    pub(super) fn queue_out(&self, out: &mut Output) -> Option<sendq::KeyMask> {
        if out.is_empty() {
            return None;
        }
        self.queue_batch(out)
    }

    /// [`Inner::queue_out`] of a batch that is not empty.
    #[inline(never)]
    fn queue_batch(&self, out: &mut Output) -> Option<sendq::KeyMask> {
        let mask = sendq::key_mask(out);
        let mut q = self.send_queue.lock();
        q.enqueue(mask, out).then_some(mask)
    }

    /// Sends `out`, then whatever waiting packets its end lets go (see
    /// `sendq.rs`), until none is left for this thread; `send` is what
    /// [`Inner::queue_out`] returned (when `None`, `out` is empty or was
    /// moved into the line).
    #[inline]
    pub(super) fn send_queued(&self, send: Option<sendq::KeyMask>, out: &Output) {
        if let Some(mask) = send {
            self.send_batch(mask, out);
        }
    }

    /// [`Inner::send_queued`] of a batch this thread is to send.
    #[inline(never)]
    fn send_batch(&self, mut mask: sendq::KeyMask, out: &Output) {
        self.send_out(out);
        loop {
            let next = {
                let mut q = self.send_queue.lock();
                q.finish(mask)
            };
            let Some((m, out)) = next else {
                return;
            };
            self.send_out(&out);
            mask = m;
        }
    }

    /// Hands packets to the kernel, up to 64 per system call.
    pub(super) fn send_out(&self, out: &[Transmit]) {
        for chunk in out.chunks(64) {
            let dropped = self.sock.send(chunk);
            let s = &self.stats;
            s.packets_sent
                .fetch_add((chunk.len() - dropped) as u64, Ordering::Relaxed);
            s.send_drops.fetch_add(dropped as u64, Ordering::Relaxed);
            s.send_calls.fetch_add(1, Ordering::Relaxed);
        }
    }
}
