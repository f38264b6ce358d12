//! Reassembly of an incoming message from DATA packets that may arrive out
//! of order, duplicated, or not at all.

use crate::message::Message;
use bytes::Bytes;

/// What adding one packet's bytes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Added {
    /// Bytes that were new.
    pub new: u32,
    /// Bytes already present.
    pub duplicate: u32,
}

/// Sorted, disjoint, non-adjacent half-open byte ranges.
///
/// A message that arrives in order has one range: it is kept inline, and a
/// vector is allocated only when a second range appears.
#[derive(Debug, Clone, Default)]
pub struct RangeSet {
    /// The only range (if nonempty) until `spilled`.
    one: (u32, u32),
    /// All ranges once `spilled`.
    ranges: Vec<(u32, u32)>,
    /// True once the ranges moved to `ranges` (false: `one` holds them).
    spilled: bool,
}

impl PartialEq for RangeSet {
    fn eq(&self, other: &RangeSet) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for RangeSet {}

impl RangeSet {
    /// The ranges, in order.
    #[inline]
    fn as_slice(&self) -> &[(u32, u32)] {
        if self.spilled {
            &self.ranges
        } else if self.one.0 < self.one.1 {
            std::slice::from_ref(&self.one)
        } else {
            &[]
        }
    }

    /// The ranges in a vector, moved there from inline if needed.
    fn spill(&mut self) -> &mut Vec<(u32, u32)> {
        if !self.spilled {
            self.spilled = true;
            if self.one.0 < self.one.1 {
                self.ranges.push(self.one);
            }
        }
        &mut self.ranges
    }

    /// Inserts `[start, end)`; returns how many of its bytes were not yet in
    /// the set. Packets mostly arrive in order, so the search starts from the
    /// tail.
    pub fn insert(&mut self, start: u32, end: u32) -> u32 {
        if start >= end {
            return 0;
        }
        // Packets mostly arrive in order: extend or follow the last range.
        if !self.spilled {
            if self.one.0 >= self.one.1 {
                self.one = (start, end);
                return end - start;
            }
            if self.one.1 == start {
                self.one.1 = end;
                return end - start;
            }
        }
        let ranges = self.spill();
        match ranges.last_mut() {
            None => {
                ranges.push((start, end));
                return end - start;
            }
            Some(last) if last.1 == start => {
                last.1 = end;
                return end - start;
            }
            Some(last) if last.1 < start => {
                ranges.push((start, end));
                return end - start;
            }
            _ => {}
        }
        // First range whose end reaches `start` (ranges that could touch).
        let first = ranges.partition_point(|&(_, e)| e < start);
        let mut covered = 0u32;
        let mut new_start = start;
        let mut new_end = end;
        let mut last = first;
        while last < ranges.len() && ranges[last].0 <= end {
            let (s, e) = ranges[last];
            covered += e.min(end).saturating_sub(s.max(start));
            new_start = new_start.min(s);
            new_end = new_end.max(e);
            last += 1;
        }
        ranges.splice(first..last, std::iter::once((new_start, new_end)));
        (end - start) - covered
    }

    /// The first missing range within `[0, limit)`, if any.
    pub fn first_gap(&self, limit: u32) -> Option<(u32, u32)> {
        let mut pos = 0;
        for &(s, e) in self.as_slice() {
            if s > pos {
                return Some((pos, s.min(limit))).filter(|(a, b)| a < b);
            }
            pos = e;
        }
        (pos < limit).then_some((pos, limit))
    }

    /// The parts of `[start, end)` not in the set, in order.
    pub fn missing(&self, start: u32, end: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut pos = start;
        let first = self.as_slice().partition_point(|&(_, e)| e <= start);
        for &(s, e) in &self.as_slice()[first..] {
            if s >= end {
                break;
            }
            if s > pos {
                out.push((pos, s));
            }
            pos = pos.max(e);
        }
        if pos < end {
            out.push((pos, end));
        }
        out
    }

    /// True if inserting `[start, end)` would add a range rather than grow
    /// or merge existing ones.
    pub fn would_add_range(&self, start: u32, end: u32) -> bool {
        let first = self.as_slice().partition_point(|&(_, e)| e < start);
        self.as_slice().get(first).is_none_or(|&(s, _)| s > end)
    }

    /// Up to `max` missing ranges within `[0, limit)`, in order.
    pub fn gaps(&self, limit: u32, max: usize) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut pos = 0;
        for &(s, e) in self.as_slice() {
            if out.len() >= max || pos >= limit {
                return out;
            }
            if s > pos {
                out.push((pos, s.min(limit)));
            }
            pos = e;
        }
        if pos < limit && out.len() < max {
            out.push((pos, limit));
        }
        out
    }

    /// End of the last range (0 when empty): nothing at or beyond it is in
    /// the set.
    pub fn last_end(&self) -> u32 {
        self.as_slice().last().map_or(0, |r| r.1)
    }

    /// Number of disjoint ranges (a measure of fragmentation).
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when nothing has been inserted.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// Most disjoint byte ranges an incoming message may have: a packet that
/// would open one more is dropped (and asked for again later). Bounds the
/// per-packet work and memory a peer can cause by sending tiny fragments.
pub const MAX_RANGES: usize = 1024;

/// An incoming message being reassembled. The bytes stay in the packets'
/// own buffers (slices, no copy) until the message is delivered.
#[derive(Debug)]
pub struct InMessage {
    /// Total length the sender announced.
    pub length: u32,
    /// The first slice received, with its offset (a message of one packet
    /// needs no vector).
    first: Option<(u32, Bytes)>,
    /// The other received bytes as disjoint slices with their offsets, in
    /// arrival order: O(1) per packet whatever the order; sorted once when
    /// the message is complete.
    parts: Vec<(u32, Bytes)>,
    ranges: RangeSet,
    /// Distinct bytes received.
    pub received: u32,
    /// Bytes the sender may send without further grants: the unscheduled
    /// bytes this receiver allows (never more than the sender claims) and
    /// this receiver's grants.
    pub granted: u32,
    /// What the sender may send before any grant, as this receiver
    /// believed it when the message began (`granted` then). Above it,
    /// `granted` holds our grants (ByteDance mode repeats them from it).
    pub unscheduled: u32,
    /// Scheduled priority in our latest grant.
    pub priority: u8,
    /// Arrival order, for FIFO grants and tie-breaking.
    pub seq: u64,
    /// End of the furthest byte received.
    high: u32,
    /// Missing ranges below this were already asked for early.
    fast_asked: u32,
}

/// Why a packet's bytes were not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The bytes lie beyond what the sender may send (unscheduled allowance
    /// plus grants) or beyond the message.
    BeyondGrant,
    /// The message is already split into [`MAX_RANGES`] pieces.
    TooFragmented,
}

impl InMessage {
    /// A message of `length` bytes of which the sender may send `granted`
    /// without grants (already clamped by the caller to what this receiver
    /// allows).
    pub fn new(length: u32, granted: u32, seq: u64) -> InMessage {
        InMessage {
            length,
            first: None,
            parts: Vec::new(),
            ranges: RangeSet::default(),
            received: 0,
            granted: granted.min(length),
            unscheduled: granted.min(length),
            priority: 0,
            seq,
            high: 0,
            fast_asked: 0,
        }
    }

    /// Missing ranges that bytes at least `behind` beyond them have
    /// overtaken (so they are probably lost rather than late) and that were
    /// not asked for this way before; at most `max`. Marks them asked.
    pub fn overtaken_gaps(&mut self, behind: u32, max: usize) -> Vec<(u32, u32)> {
        let limit = self.high.saturating_sub(behind);
        if limit <= self.fast_asked {
            return Vec::new();
        }
        let mut gaps = self.ranges.missing(self.fast_asked, limit);
        gaps.truncate(max);
        if let Some(&(_, e)) = gaps.last() {
            self.fast_asked = e;
        }
        gaps
    }

    /// Takes the bytes of one packet at `offset`, keeping only the parts not
    /// yet present (as slices of `data`).
    pub fn add(&mut self, offset: u32, data: Bytes) -> Result<Added, Refused> {
        let len = data.len() as u32;
        if offset == 0 && len == self.length && self.received == 0 && len != 0 {
            return self.add_whole(data);
        }
        let end = offset.checked_add(len).ok_or(Refused::BeyondGrant)?;
        if end > self.granted.min(self.length) {
            return Err(Refused::BeyondGrant);
        }
        if len == 0 {
            return Ok(Added::default());
        }
        if self.ranges.len() >= MAX_RANGES && self.ranges.would_add_range(offset, end) {
            return Err(Refused::TooFragmented);
        }
        if self.ranges.last_end() <= offset {
            // In order (the usual case): all new, kept whole.
            self.ranges.insert(offset, end);
            self.keep(offset, data);
            self.received += len;
            self.high = self.high.max(end);
            return Ok(Added {
                new: len,
                duplicate: 0,
            });
        }
        let mut new = 0;
        for (s, e) in self.ranges.missing(offset, end) {
            let part = data.slice((s - offset) as usize..(e - offset) as usize);
            self.keep(s, part);
            new += e - s;
        }
        if new > 0 {
            self.ranges.insert(offset, end);
            self.received += new;
            self.high = self.high.max(end);
        }
        Ok(Added {
            new,
            duplicate: len - new,
        })
    }

    /// [`InMessage::add`] of the whole message at once to a message that
    /// has no byte yet (most small messages: one packet): what the general
    /// path does then, without its searches. (No byte received means no
    /// range and no slice kept: `received` counts the bytes of both.)
    #[inline]
    fn add_whole(&mut self, data: Bytes) -> Result<Added, Refused> {
        let len = self.length;
        if len > self.granted {
            return Err(Refused::BeyondGrant);
        }
        debug_assert!(self.ranges.is_empty() && self.first.is_none() && self.high == 0);
        self.ranges.one = (0, len);
        self.first = Some((0, data));
        self.received = len;
        self.high = len;
        Ok(Added {
            new: len,
            duplicate: 0,
        })
    }

    /// Keeps new bytes at `offset`.
    fn keep(&mut self, offset: u32, data: Bytes) {
        if self.first.is_none() {
            self.first = Some((offset, data));
        } else {
            self.parts.push((offset, data));
        }
    }

    /// All bytes present.
    pub fn is_complete(&self) -> bool {
        self.received == self.length
    }

    /// Bytes still to arrive.
    pub fn remaining(&self) -> u32 {
        self.length - self.received
    }

    /// Granted bytes not yet received (what is in flight towards us).
    pub fn outstanding(&self) -> u32 {
        self.granted.min(self.length).saturating_sub(self.received)
    }

    /// The first missing range below what the sender may send.
    pub fn first_gap(&self) -> Option<(u32, u32)> {
        self.ranges.first_gap(self.granted.min(self.length))
    }

    /// Up to `max` missing ranges below what the sender may send, in order.
    pub fn gaps(&self, max: usize) -> Vec<(u32, u32)> {
        self.ranges.gaps(self.granted.min(self.length), max)
    }

    /// The assembled message.
    pub fn into_message(mut self) -> Message {
        self.take_message()
    }

    /// The assembled message, taken out where the message lies (its bytes
    /// leave; its counts stay): a complete message is handed over without
    /// moving it out of its RPC first (an `InMessage` is large: moving it
    /// out and consuming it cost two copies of it).
    pub fn take_message(&mut self) -> Message {
        let Some(first) = self.first.take() else {
            return Message::default();
        };
        if self.parts.is_empty() {
            return Message::from(first.1);
        }
        let mut parts = std::mem::take(&mut self.parts);
        parts.push(first);
        // Usually already in order (pdqsort then makes one pass).
        parts.sort_unstable_by_key(|&(offset, _)| offset);
        Message::from_parts(parts.into_iter().map(|(_, b)| b).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_set_merges_and_counts_new_bytes() {
        let mut r = RangeSet::default();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.len(), 2);
        assert_eq!(r.insert(15, 35), 10); // fills 20..30
        assert_eq!(r.len(), 1);
        assert_eq!(r.insert(10, 40), 0);
        assert_eq!(r.insert(0, 10), 10); // adjacent: merged
        assert_eq!(r.len(), 1);
        assert_eq!(r.insert(5, 5), 0);
        assert_eq!(r.first_gap(100), Some((40, 100)));
        assert_eq!(r.first_gap(40), None);
    }

    /// One range stays inline; a second moves them all to the vector, and
    /// both forms answer alike.
    #[test]
    fn one_range_inline_then_spilled() {
        let mut r = RangeSet::default();
        assert!(r.is_empty() && r.last_end() == 0);
        assert_eq!(r.insert(0, 10), 10);
        assert_eq!(r.insert(10, 20), 10);
        assert!(!r.spilled && r.ranges.capacity() == 0);
        assert_eq!((r.len(), r.last_end()), (1, 20));
        assert_eq!(r.first_gap(30), Some((20, 30)));
        let mut in_order = RangeSet::default();
        in_order.insert(0, 20);
        assert_eq!(r, in_order);
        assert_eq!(r.insert(30, 40), 10);
        assert!(r.spilled);
        assert_eq!(r.len(), 2);
        assert_eq!(r.missing(0, 40), vec![(20, 30)]);
        assert_eq!(r.insert(5, 35), 10);
        assert_eq!(r.len(), 1);
        in_order.insert(20, 40);
        assert_eq!(r, in_order);
        // A first range that does not start at 0, then one before it.
        let mut s = RangeSet::default();
        assert_eq!(s.insert(10, 20), 10);
        assert_eq!(s.first_gap(30), Some((0, 10)));
        assert_eq!(s.insert(0, 5), 5);
        assert_eq!(s.gaps(30, 8), vec![(5, 10), (20, 30)]);
    }

    #[test]
    fn first_gap_finds_holes() {
        let mut r = RangeSet::default();
        assert_eq!(r.first_gap(50), Some((0, 50)));
        r.insert(0, 10);
        r.insert(20, 30);
        assert_eq!(r.first_gap(50), Some((10, 20)));
        assert_eq!(r.first_gap(15), Some((10, 15)));
        assert_eq!(r.first_gap(10), None);
        assert_eq!(r.first_gap(0), None);
    }

    #[test]
    fn reassembles_out_of_order_and_duplicated() {
        let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut m = InMessage::new(5000, 5000, 0);
        let chunks: Vec<(u32, &[u8])> = msg
            .chunks(1000)
            .enumerate()
            .map(|(i, c)| (i as u32 * 1000, c))
            .collect();
        for &i in &[3usize, 0, 4, 0, 2, 3] {
            m.add(chunks[i].0, Bytes::copy_from_slice(chunks[i].1))
                .unwrap();
        }
        assert!(!m.is_complete());
        assert_eq!(m.first_gap(), Some((1000, 2000)));
        assert_eq!(m.remaining(), 1000);
        let a = m
            .add(chunks[1].0, Bytes::copy_from_slice(chunks[1].1))
            .unwrap();
        assert_eq!(
            a,
            Added {
                new: 1000,
                duplicate: 0
            }
        );
        let a = m.add(500, Bytes::copy_from_slice(&msg[500..1500])).unwrap();
        assert_eq!(
            a,
            Added {
                new: 0,
                duplicate: 1000
            }
        );
        assert!(m.is_complete());
        assert_eq!(m.into_message(), msg[..]);
    }

    #[test]
    fn empty_message_is_complete_at_once() {
        let m = InMessage::new(0, 0, 0);
        assert!(m.is_complete());
        assert_eq!(m.first_gap(), None);
    }

    #[test]
    fn bytes_beyond_the_grant_are_refused() {
        let mut m = InMessage::new(10_000, 2_000, 0);
        let b = Bytes::from(vec![1u8; 1_000]);
        assert!(m.add(0, b.clone()).is_ok());
        assert_eq!(m.add(1_500, b.clone()), Err(Refused::BeyondGrant));
        assert_eq!(m.add(u32::MAX - 10, b.clone()), Err(Refused::BeyondGrant));
        m.granted = 10_000;
        assert!(m.add(1_500, b).is_ok());
        assert_eq!(m.received, 2_000);
    }

    /// A whole message in its first packet takes the short path
    /// (`add_whole`): it leaves the state the general path leaves (which a
    /// message of two packets shows), and refuses what it refuses.
    #[test]
    fn a_whole_message_at_once_matches_the_general_path() {
        let bytes = Bytes::from((0..100u8).collect::<Vec<u8>>());
        let mut whole = InMessage::new(100, 100, 7);
        let mut halves = InMessage::new(100, 100, 7);
        assert_eq!(
            whole.add(0, bytes.clone()),
            Ok(Added {
                new: 100,
                duplicate: 0
            })
        );
        halves.add(0, bytes.slice(..50)).unwrap();
        halves.add(50, bytes.slice(50..)).unwrap();
        assert!(whole.is_complete());
        assert_eq!(whole.ranges, halves.ranges);
        assert_eq!((whole.received, whole.high), (halves.received, halves.high));
        assert_eq!((whole.first_gap(), whole.outstanding()), (None, 0));
        assert_eq!(whole.overtaken_gaps(0, 8), vec![]);
        // A duplicate of it is all duplicate.
        assert_eq!(
            whole.add(0, bytes.clone()),
            Ok(Added {
                new: 0,
                duplicate: 100
            })
        );
        assert_eq!(whole.into_message(), bytes[..]);
        // Beyond the grant: refused, nothing kept.
        let mut short = InMessage::new(100, 60, 0);
        assert_eq!(short.add(0, bytes.clone()), Err(Refused::BeyondGrant));
        assert_eq!((short.received, short.ranges.len()), (0, 0));
        // After a first piece, the whole message again: the general path.
        let mut later = InMessage::new(100, 100, 0);
        later.add(10, bytes.slice(10..20)).unwrap();
        assert_eq!(
            later.add(0, bytes.clone()),
            Ok(Added {
                new: 90,
                duplicate: 10
            })
        );
        assert_eq!(later.into_message(), bytes[..]);
    }

    #[test]
    fn fragments_are_bounded() {
        let mut m = InMessage::new(1 << 20, 1 << 20, 0);
        let one = Bytes::from_static(b"x");
        for i in 0..MAX_RANGES as u32 {
            m.add(i * 2, one.clone()).unwrap();
        }
        assert_eq!(
            m.add(MAX_RANGES as u32 * 2 + 10, one.clone()),
            Err(Refused::TooFragmented)
        );
        // Filling a hole (merging ranges) is still allowed.
        assert!(m.add(1, one).is_ok());
    }

    #[test]
    fn gaps_and_missing() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        assert_eq!(r.missing(0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        assert_eq!(r.missing(12, 18), vec![]);
        assert_eq!(r.missing(15, 35), vec![(20, 30)]);
        assert_eq!(r.gaps(50, 8), vec![(0, 10), (20, 30), (40, 50)]);
        assert_eq!(r.gaps(50, 2), vec![(0, 10), (20, 30)]);
        assert_eq!(r.gaps(25, 8), vec![(0, 10), (20, 25)]);
        assert!(r.would_add_range(50, 60));
        assert!(!r.would_add_range(20, 25));
    }

    #[test]
    fn overtaken_gaps_are_asked_for_once() {
        let mut m = InMessage::new(10_000, 10_000, 0);
        let p = |o: u32| (o, Bytes::from(vec![0u8; 1_000]));
        for o in [0, 2_000, 3_000] {
            let (o, b) = p(o);
            m.add(o, b).unwrap();
        }
        // 1,000..2,000 is missing; 2 packets past it are not enough.
        assert_eq!(m.overtaken_gaps(3_000, 8), vec![]);
        let (o, b) = p(4_000);
        m.add(o, b).unwrap();
        assert_eq!(m.overtaken_gaps(3_000, 8), vec![(1_000, 2_000)]);
        // Not again.
        let (o, b) = p(6_000);
        m.add(o, b).unwrap();
        assert_eq!(m.overtaken_gaps(3_000, 8), vec![]);
    }

    proptest::proptest! {
        /// Whatever the arrival order (in order, which takes the fast
        /// paths, or shuffled, overlapping and duplicated), the set and the
        /// reassembled bytes match a byte-by-byte model.
        #[test]
        fn reassembly_matches_a_byte_model(
            pieces in proptest::collection::vec((0u32..3000, 1u32..700), 1..60),
            in_order_first in 0usize..60,
        ) {
            let length = 3000u32;
            let content: Vec<u8> = (0..length).map(|i| (i * 7 + 3) as u8).collect();
            let mut m = InMessage::new(length, length, 0);
            let mut model = vec![false; length as usize];
            // A prefix sent in order, then arbitrary pieces.
            let mut order: Vec<(u32, u32)> = Vec::new();
            let mut off = 0;
            for _ in 0..in_order_first {
                if off >= length { break; }
                let end = (off + 1000).min(length);
                order.push((off, end));
                off = end;
            }
            for &(o, l) in &pieces {
                order.push((o, (o + l).min(length)));
            }
            for (o, e) in order {
                let before = model.iter().filter(|&&b| b).count() as u32;
                let added = m.add(o, Bytes::copy_from_slice(&content[o as usize..e as usize])).unwrap();
                model[o as usize..e as usize].iter_mut().for_each(|b| *b = true);
                let after = model.iter().filter(|&&b| b).count() as u32;
                proptest::prop_assert_eq!(added.new, after - before);
                proptest::prop_assert_eq!(added.new + added.duplicate, e - o);
                proptest::prop_assert_eq!(m.received, after);
            }
            if m.is_complete() {
                let got = m.into_message().to_vec();
                proptest::prop_assert_eq!(got, content);
            }
        }
    }
}
