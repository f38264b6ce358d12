//! An outgoing message: segmentation into packets, the unscheduled prefix,
//! what grants allow, and retransmission of ranges a receiver asked for.

use bytes::Bytes;
use std::collections::VecDeque;

/// Retransmission requests kept per message; more are ignored (the receiver
/// asks again after its next timeout), so a peer cannot grow our memory.
const MAX_RESEND_RANGES: usize = 32;

/// What a RESEND did to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResendOutcome {
    /// Bytes were queued for retransmission.
    Queued,
    /// The range lies in bytes not sent yet: the sender is busy elsewhere
    /// (answer BUSY).
    NotSentYet,
    /// The range was retransmitted less than a cooldown ago (the copy is on
    /// its way), or it is already queued: nothing to do.
    Duplicate,
    /// The message has used its retransmission budget: ignored, so that a
    /// peer cannot make us send without end.
    OverBudget,
}

/// The next packet's worth of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Offset of the first byte.
    pub offset: u32,
    /// Bytes (0 only for the single packet of an empty message).
    pub len: u32,
    /// Priority to send it at.
    pub priority: u8,
    /// Sent because of a RESEND or restart.
    pub retransmit: bool,
}

/// A message being sent.
#[derive(Debug)]
pub struct OutMessage {
    /// The bytes.
    pub data: Bytes,
    /// `data.len()`.
    pub length: u32,
    /// Next byte never sent before.
    pub next_offset: u32,
    /// Bytes we may send (unscheduled prefix plus grants).
    pub granted: u32,
    /// The unscheduled prefix: sent at once, at `unsched_priority`.
    pub unsched_limit: u32,
    /// Priority of the unscheduled bytes, from the receiver's cutoffs.
    pub unsched_priority: u8,
    /// Priority of scheduled bytes, from the latest grant.
    pub sched_priority: u8,
    resend: VecDeque<(u32, u32, u8)>,
    /// Ranges retransmitted recently and when (ns): a RESEND for them within
    /// the cooldown is a duplicate.
    served: VecDeque<(u32, u32, u64)>,
    /// Bytes this message may still retransmit in whole ranges.
    retransmit_budget: u64,
    /// Bytes it may still retransmit once `retransmit_budget` is spent: one
    /// packet per RESEND, at most one per cooldown (`trickle_at`). See
    /// [`OutMessage::resend`].
    trickle_budget: u64,
    /// When (ns) a packet of `trickle_budget` may next go.
    trickle_at: u64,
    /// Creation order, for the pacer's FIFO share and tie-breaking.
    pub seq: u64,
    /// A packet of this message went out. A message with no unscheduled
    /// bytes (empty, or a SIRD message above UnschT) first sends one DATA
    /// packet without payload: it is the whole message, or the request for
    /// credit that makes the receiver aware of it.
    announced: bool,
}

impl OutMessage {
    /// A message whose first `unsched_limit` bytes (already rounded up to
    /// whole packets by the caller) go without grants. It may retransmit
    /// `retransmit_budget` bytes over its life in whole ranges, and as many
    /// again one packet at a time (see [`OutMessage::resend`]).
    pub fn new(
        data: Bytes,
        unsched_limit: u32,
        unsched_priority: u8,
        seq: u64,
        retransmit_budget: u64,
    ) -> OutMessage {
        let length = data.len() as u32;
        let unsched_limit = unsched_limit.min(length);
        OutMessage {
            served: VecDeque::new(),
            retransmit_budget,
            trickle_budget: retransmit_budget,
            trickle_at: 0,
            data,
            length,
            next_offset: 0,
            granted: unsched_limit,
            unsched_limit,
            unsched_priority,
            sched_priority: 0,
            resend: VecDeque::new(),
            seq,
            announced: false,
        }
    }

    /// Something can be sent now.
    pub fn has_sendable(&self) -> bool {
        !self.resend.is_empty() || self.next_offset < self.granted || !self.announced
    }

    /// Every byte has been sent at least once.
    pub fn all_sent(&self) -> bool {
        if self.length == 0 {
            self.announced
        } else {
            self.next_offset >= self.length
        }
    }

    /// Every byte we may send has been sent (we wait for grants or are done).
    pub fn granted_all_sent(&self) -> bool {
        self.next_offset >= self.granted && self.announced
    }

    /// Scheduled bytes granted and not sent yet (credit held).
    pub fn unspent_credit(&self) -> u32 {
        self.granted
            .saturating_sub(self.next_offset.max(self.unsched_limit))
    }

    /// Bytes never sent; the sender's SRPT key.
    pub fn bytes_left(&self) -> u32 {
        self.length - self.next_offset
    }

    /// What the receiver can count on arriving without more grants.
    pub fn incoming(&self) -> u32 {
        self.granted
    }

    fn priority_at(&self, offset: u32) -> u8 {
        if offset < self.unsched_limit {
            self.unsched_priority
        } else {
            self.sched_priority
        }
    }

    /// Byte ranges waiting to be retransmitted.
    pub fn resend_ranges(&self) -> usize {
        self.resend.len()
    }

    /// Payload bytes of the packet [`Self::next_chunk`] would take now,
    /// without taking it.
    pub fn next_chunk_len(&self, max_payload: u32) -> Option<u32> {
        if let Some(&(start, end, _)) = self.resend.front() {
            return Some((end - start).min(max_payload));
        }
        if self.next_offset >= self.granted {
            return (!self.announced).then_some(0);
        }
        Some((self.granted - self.next_offset).min(max_payload))
    }

    /// Takes the next packet: retransmissions first, then new bytes.
    pub fn next_chunk(&mut self, max_payload: u32) -> Option<Chunk> {
        if let Some((start, end, priority)) = self.resend.pop_front() {
            let len = (end - start).min(max_payload);
            if start + len < end {
                self.resend.push_front((start + len, end, priority));
            }
            return Some(Chunk {
                offset: start,
                len,
                priority,
                retransmit: true,
            });
        }
        if self.next_offset >= self.granted {
            if self.announced {
                return None;
            }
            self.announced = true;
            return Some(Chunk {
                offset: 0,
                len: 0,
                priority: self.unsched_priority,
                retransmit: false,
            });
        }
        self.announced = true;
        let offset = self.next_offset;
        let len = (self.granted - offset).min(max_payload);
        self.next_offset += len;
        Some(Chunk {
            offset,
            len,
            priority: self.priority_at(offset),
            retransmit: false,
        })
    }

    /// Applies a GRANT. Returns true if it allowed more bytes.
    pub fn grant(&mut self, offset: u32, priority: u8) -> bool {
        self.sched_priority = priority;
        let offset = offset.min(self.length);
        if offset > self.granted {
            self.granted = offset;
            true
        } else {
            false
        }
    }

    /// Applies a RESEND for `[offset, offset+length)` (`length` already
    /// resolved, never the "everything" marker) at time `now` (ns). Only
    /// bytes already sent are retransmitted: a RESEND never grants (a
    /// receiver repeats its GRANT to repair a lost one). A range served less
    /// than `cooldown` ns ago is not sent again, and the message never
    /// retransmits more than its budget.
    ///
    /// Once the budget is spent, a RESEND still obtains the first packet
    /// (`max_payload` bytes) of its range, at most one such packet per
    /// `cooldown`, from a second allowance as large as the first. A receiver
    /// behind a stall asks again for bytes whose copies are only late, and
    /// each such round used to retransmit its whole range: the budget could
    /// go to copies that all arrived, and a packet really lost afterwards
    /// was then refused for good (BUSY), although the receiver was alive and
    /// asking. Its RPC could only time out. The total stays bounded (twice
    /// the budget), and beyond the budget a RESEND never obtains more than
    /// one packet.
    pub fn resend(
        &mut self,
        now: u64,
        cooldown: u64,
        max_payload: u32,
        offset: u32,
        length: u32,
        priority: u8,
    ) -> ResendOutcome {
        if self.next_offset == 0 {
            // Only the empty announcing packet went out (an empty message,
            // or a request for credit): a receiver that asks has lost it.
            if !self.announced {
                return ResendOutcome::NotSentYet;
            }
            self.announced = false;
            return ResendOutcome::Queued;
        }
        let end = offset.saturating_add(length).min(self.length);
        let sent_end = end.min(self.next_offset);
        if offset >= sent_end {
            return ResendOutcome::NotSentYet;
        }
        while self
            .served
            .front()
            .is_some_and(|&(_, _, t)| now.saturating_sub(t) >= cooldown)
        {
            self.served.pop_front();
        }
        // What is queued or was served within the cooldown is not asked
        // for again: trim it off both ends of the range (a range inside it
        // stays; a receiver asks again for what it still lacks).
        let Some((offset, sent_end)) = self.uncovered(offset, sent_end) else {
            return ResendOutcome::Duplicate;
        };
        let bulk = (sent_end - offset) as u64 <= self.retransmit_budget;
        let end = if bulk {
            sent_end
        } else {
            let one = (sent_end - offset).min(max_payload.max(1));
            if one as u64 > self.trickle_budget || now < self.trickle_at {
                return ResendOutcome::OverBudget;
            }
            offset + one
        };
        if self.resend.len() >= MAX_RESEND_RANGES {
            return ResendOutcome::Duplicate;
        }
        let bytes = (end - offset) as u64;
        if bulk {
            self.retransmit_budget -= bytes;
        } else {
            self.trickle_budget -= bytes;
            self.trickle_at = now.saturating_add(cooldown);
        }
        self.resend.push_back((offset, end, priority));
        if self.served.len() >= MAX_RESEND_RANGES {
            self.served.pop_front();
        }
        self.served.push_back((offset, end, now));
        ResendOutcome::Queued
    }

    /// `[start, end)` less the ranges queued for retransmission or served
    /// within the cooldown that cover its start or its end, until none
    /// does; `None` when nothing is left. At most `2 × MAX_RESEND_RANGES`
    /// ranges, each looked at once per pass, and every pass but the last
    /// shrinks the range.
    fn uncovered(&self, mut start: u32, mut end: u32) -> Option<(u32, u32)> {
        loop {
            let mut shrunk = false;
            let ranges = self.resend.iter().map(|&(s, e, _)| (s, e));
            for (s, e) in ranges.chain(self.served.iter().map(|&(s, e, _)| (s, e))) {
                if s <= start && start < e {
                    start = e;
                    shrunk = true;
                }
                if start >= end {
                    return None;
                }
                if start < s && s < end && end <= e {
                    end = s;
                    shrunk = true;
                }
            }
            if !shrunk {
                return Some((start, end));
            }
        }
    }

    /// Stops sending: the receiver evidently has the whole message (a
    /// client saw the response start).
    pub fn finish(&mut self) {
        self.resend.clear();
        self.next_offset = self.length;
        self.granted = self.length;
        self.announced = true;
    }

    /// Starts over as if never sent (the receiver lost all state).
    pub fn restart(&mut self) {
        self.resend.clear();
        self.served.clear();
        self.next_offset = 0;
        self.granted = self.unsched_limit;
        self.announced = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(len: usize, unsched: u32) -> OutMessage {
        OutMessage::new(
            Bytes::from(vec![7u8; len]),
            unsched,
            6,
            0,
            len as u64 + 1_000,
        )
    }

    #[test]
    fn sends_unscheduled_prefix_then_waits_for_grants() {
        let mut m = msg(10_000, 3_000);
        let mut sent = vec![];
        while let Some(c) = m.next_chunk(1_000) {
            sent.push(c);
        }
        assert_eq!(sent.len(), 3);
        assert!(sent.iter().all(|c| c.priority == 6 && c.len == 1_000));
        assert!(m.granted_all_sent() && !m.all_sent());
        assert!(m.grant(5_500, 2));
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!((c.offset, c.len, c.priority), (3_000, 1_000, 2));
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!((c.offset, c.len), (4_000, 1_000));
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!((c.offset, c.len), (5_000, 500));
        assert_eq!(m.next_chunk(1_000), None);
        // A grant beyond the end is clamped.
        assert!(m.grant(1 << 30, 1));
        assert_eq!(m.granted, 10_000);
        while m.next_chunk(1_000).is_some() {}
        assert!(m.all_sent());
        // Old grants change nothing.
        assert!(!m.grant(20, 0));
    }

    #[test]
    fn empty_message_is_one_packet() {
        let mut m = msg(0, 3_000);
        assert!(m.has_sendable());
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!((c.offset, c.len), (0, 0));
        assert!(m.all_sent() && !m.has_sendable());
        assert_eq!(m.resend(0, 10, 1_000, 0, 0, 7), ResendOutcome::Queued);
        assert!(m.has_sendable());
    }

    #[test]
    fn resend_requeues_only_sent_bytes_and_never_grants() {
        let mut m = msg(10_000, 3_000);
        while m.next_chunk(1_000).is_some() {}
        // Range partly sent: only the sent part is retransmitted, and
        // nothing beyond the grant becomes sendable.
        assert_eq!(
            m.resend(0, 10, 1_000, 2_500, 2_000, 5),
            ResendOutcome::Queued
        );
        assert_eq!(m.granted, 3_000);
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!(
            (c.offset, c.len, c.retransmit, c.priority),
            (2_500, 500, true, 5)
        );
        assert_eq!(m.next_chunk(1_000), None);
        // Range entirely unsent: nothing to retransmit → caller sends BUSY.
        let mut m = msg(10_000, 3_000);
        assert_eq!(m.resend(0, 10, 1_000, 0, 100, 5), ResendOutcome::NotSentYet);
    }

    #[test]
    fn resends_within_the_cooldown_are_duplicates() {
        let mut m = msg(10_000, 3_000);
        while m.next_chunk(1_000).is_some() {}
        assert_eq!(m.resend(0, 10, 1_000, 0, 1_000, 5), ResendOutcome::Queued);
        // Still queued: a duplicate.
        assert_eq!(
            m.resend(1, 10, 1_000, 0, 1_000, 5),
            ResendOutcome::Duplicate
        );
        assert!(m.next_chunk(1_000).unwrap().retransmit);
        // Sent, but within the cooldown: still a duplicate.
        assert_eq!(
            m.resend(5, 10, 1_000, 0, 1_000, 5),
            ResendOutcome::Duplicate
        );
        // After the cooldown it goes again.
        assert_eq!(m.resend(10, 10, 1_000, 0, 1_000, 5), ResendOutcome::Queued);
    }

    #[test]
    fn a_resend_overlapping_what_is_queued_or_just_served_asks_for_the_rest() {
        let mut m = msg(10_000, 10_000);
        while m.next_chunk(1_000).is_some() {}
        // Queued [2000, 5000); asked [1000, 6000): [1000, 2000) and
        // [5000, 6000) are not covered, but only one contiguous range is
        // queued per RESEND: the ends are trimmed, the middle stays.
        assert_eq!(
            m.resend(0, 10, 1_000, 2_000, 3_000, 5),
            ResendOutcome::Queued
        );
        assert_eq!(
            m.resend(1, 10, 1_000, 1_000, 5_000, 5),
            ResendOutcome::Queued
        );
        // Asked [3000, 7000): [3000, 6000) is queued; only [6000, 7000) goes.
        assert_eq!(
            m.resend(2, 10, 1_000, 3_000, 4_000, 5),
            ResendOutcome::Queued
        );
        let mut got = Vec::new();
        while let Some(c) = m.next_chunk(1_000) {
            got.push((c.offset, c.len));
        }
        assert_eq!(
            got,
            vec![
                (2_000, 1_000),
                (3_000, 1_000),
                (4_000, 1_000),
                (1_000, 1_000),
                (2_000, 1_000),
                (3_000, 1_000),
                (4_000, 1_000),
                (5_000, 1_000),
                (6_000, 1_000),
            ]
        );
        // Served within the cooldown (a budget large enough for all):
        // a range is trimmed at whichever end they cover.
        let mut m = OutMessage::new(Bytes::from(vec![7u8; 10_000]), 10_000, 6, 0, 100_000);
        while m.next_chunk(1_000).is_some() {}
        let ask = |m: &mut OutMessage, t, offset, len| {
            let r = m.resend(t, 10, 1_000, offset, len, 5);
            let mut got = Vec::new();
            while let Some(c) = m.next_chunk(1_000) {
                got.push((c.offset, c.len));
            }
            (r, got)
        };
        let q = ResendOutcome::Queued;
        assert_eq!(ask(&mut m, 0, 2_000, 1_000), (q, vec![(2_000, 1_000)]));
        assert_eq!(ask(&mut m, 1, 1_500, 1_500), (q, vec![(1_500, 500)]));
        assert_eq!(ask(&mut m, 2, 2_500, 1_500), (q, vec![(3_000, 1_000)]));
        // Wholly covered by what was just served: a duplicate.
        assert_eq!(
            ask(&mut m, 3, 1_500, 2_500),
            (ResendOutcome::Duplicate, vec![])
        );
        // After the cooldown it goes again, whole.
        assert_eq!(
            ask(&mut m, 20, 1_500, 2_500),
            (q, vec![(1_500, 1_000), (2_500, 1_000), (3_500, 500)])
        );
    }

    #[test]
    fn retransmission_budget_is_finite() {
        let mut m = OutMessage::new(Bytes::from(vec![7u8; 3_000]), 3_000, 6, 0, 4_000);
        while m.next_chunk(1_000).is_some() {}
        let mut t = 0;
        let mut queued = Vec::new();
        loop {
            match m.resend(t, 1, 1_000, 0, 3_000, 5) {
                ResendOutcome::Queued => {
                    let mut bytes = 0;
                    while let Some(c) = m.next_chunk(1_000) {
                        bytes += c.len;
                    }
                    queued.push(bytes);
                }
                ResendOutcome::OverBudget => break,
                other => panic!("{other:?}"),
            }
            t += 1;
        }
        // 4,000 bytes of budget: one whole retransmission of 3,000; then
        // 4,000 more, one packet per RESEND.
        assert_eq!(queued, [3_000, 1_000, 1_000, 1_000, 1_000]);
    }

    #[test]
    fn over_the_budget_a_resend_gets_one_packet_per_cooldown() {
        let mut m = OutMessage::new(Bytes::from(vec![7u8; 10_000]), 10_000, 6, 0, 5_000);
        while m.next_chunk(1_000).is_some() {}
        // The whole range fits the budget once.
        assert_eq!(m.resend(0, 10, 1_000, 0, 5_000, 5), ResendOutcome::Queued);
        while m.next_chunk(1_000).is_some() {}
        // Then only its first packet, not again within the cooldown (for
        // any range of the message), and the budget's 5,000 bytes again at
        // most.
        assert_eq!(
            m.resend(10, 10, 1_000, 2_000, 3_000, 5),
            ResendOutcome::Queued
        );
        let c = m.next_chunk(1_000).unwrap();
        assert_eq!((c.offset, c.len, c.retransmit), (2_000, 1_000, true));
        assert_eq!(m.next_chunk(1_000), None);
        assert_eq!(
            m.resend(15, 10, 1_000, 6_000, 1_000, 5),
            ResendOutcome::OverBudget
        );
        let mut sent = 1_000;
        for t in (20..).step_by(10) {
            match m.resend(t, 10, 1_000, 6_000, 3_000, 5) {
                ResendOutcome::Queued => {
                    while let Some(c) = m.next_chunk(1_000) {
                        assert_eq!((c.offset, c.len), (6_000, 1_000));
                        sent += c.len;
                    }
                }
                ResendOutcome::OverBudget => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(sent, 5_000);
    }

    #[test]
    fn restart_goes_back_to_the_unscheduled_prefix() {
        let mut m = msg(10_000, 3_000);
        m.grant(10_000, 1);
        while m.next_chunk(1_000).is_some() {}
        m.restart();
        assert_eq!((m.next_offset, m.granted), (0, 3_000));
        assert_eq!(m.next_chunk(1_000).unwrap().offset, 0);
    }
}
