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
                // ends every batch.)
                None if !st.core.may_transmit() => break,
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
    /// so that the queue's order is the core's). Returns true when the
    /// caller is to send them with [`Inner::send_queued`] after releasing
    /// the lock; false when there was nothing to send or another thread is
    /// sending and will send these too (they were then moved into its
    /// queue). When no thread is sending, the queue is empty and `out`
    /// stays where it is, to be sent from there first (no copy).
    ///
    /// Threads that sent what they took in parallel reordered a message's
    /// packets (one thread's sendmmsg overtaking another's), and the
    /// receiver took the overtaken ones for lost: with 4 RPCs of 500 KB
    /// outstanding, 8.5% of the bytes received were retransmissions.
    pub(super) fn queue_out(&self, out: &mut Output) -> bool {
        if out.is_empty() {
            return false;
        }
        let mut q = self.send_queue.lock().unwrap_or_else(|p| p.into_inner());
        q.enqueue(out)
    }

    /// Sends `out`, then the packets other threads queued meanwhile, in
    /// order, until the queue is empty; `send` is what
    /// [`Inner::queue_out`] returned (when false, `out` is empty or was
    /// handed to the thread that is sending).
    pub(super) fn send_queued(&self, send: bool, out: &Output) {
        if !send {
            return;
        }
        self.send_out(out);
        loop {
            let next = {
                let mut q = self.send_queue.lock().unwrap_or_else(|p| p.into_inner());
                q.next()
            };
            let Some(out) = next else {
                return;
            };
            self.send_out(&out);
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

impl SendQueue {
    /// [`Inner::queue_out`] under the queue's lock, for a non-empty `out`:
    /// true when the caller is now the sender and sends `out` from where
    /// it is (nobody was sending, so nothing waits in the queue); false
    /// when another thread is sending, `out` then moved to the queue's end.
    fn enqueue(&mut self, out: &mut Output) -> bool {
        if self.sending {
            self.queue.push_back(std::mem::take(out));
            return false;
        }
        // The sender that cleared `sending` found the queue empty.
        debug_assert!(self.queue.is_empty());
        self.sending = true;
        true
    }

    /// The sender's next batch, oldest first; `None` ends its turn (nobody
    /// is sending any more).
    fn next(&mut self) -> Option<Output> {
        let out = self.queue.pop_front();
        self.sending = out.is_some();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_wire::{CommonHeader, DataHeader, HeaderBuf, PacketType};

    fn batch(tag: u64) -> Output {
        let common = CommonHeader {
            sport: 1,
            dport: 2,
            sender_id: tag,
        };
        let header = HeaderBuf::data(&common, &DataHeader::default());
        let mut out = Output::new();
        out.push(Transmit {
            dst: "127.0.0.1:2".parse().unwrap(),
            priority: 0,
            packet_type: PacketType::Data,
            header,
            payload: Bytes::new(),
        });
        out
    }

    #[test]
    fn the_first_batch_stays_with_its_sender_later_ones_queue_in_order() {
        let mut q = SendQueue::default();
        // Nobody sends: the caller sends its batch from where it is.
        let mut a = batch(2);
        assert!(q.enqueue(&mut a));
        assert_eq!(a.len(), 1);
        assert!(q.queue.is_empty() && q.sending);
        // Meanwhile two others queue theirs behind it, for the sender.
        let (mut b, mut c) = (batch(4), batch(6));
        let (b0, c0) = (b.clone(), c.clone());
        assert!(!q.enqueue(&mut b));
        assert!(!q.enqueue(&mut c));
        assert!(b.is_empty() && c.is_empty());
        // The sender takes them in order, then its turn ends.
        assert_eq!(q.next(), Some(b0));
        assert_eq!(q.next(), Some(c0));
        assert!(q.sending);
        assert_eq!(q.next(), None);
        assert!(!q.sending);
        // And the next caller is the sender again.
        let mut d = batch(8);
        assert!(q.enqueue(&mut d));
        assert_eq!(q.next(), None);
    }
}
