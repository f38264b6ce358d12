//! Reassembly of an incoming message from DATA packets that may arrive out
//! of order, duplicated, or not at all.

use bytes::{Bytes, BytesMut};

/// What adding one packet's bytes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Added {
    /// Bytes that were new.
    pub new: u32,
    /// Bytes already present.
    pub duplicate: u32,
}

/// Sorted, disjoint, non-adjacent half-open byte ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u32, u32)>,
}

impl RangeSet {
    /// Inserts `[start, end)`; returns how many of its bytes were not yet in
    /// the set. Packets mostly arrive in order, so the search starts from the
    /// tail.
    pub fn insert(&mut self, start: u32, end: u32) -> u32 {
        if start >= end {
            return 0;
        }
        // First range whose end reaches `start` (ranges that could touch).
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let mut covered = 0u32;
        let mut new_start = start;
        let mut new_end = end;
        let mut last = first;
        while last < self.ranges.len() && self.ranges[last].0 <= end {
            let (s, e) = self.ranges[last];
            covered += e.min(end).saturating_sub(s.max(start));
            new_start = new_start.min(s);
            new_end = new_end.max(e);
            last += 1;
        }
        self.ranges
            .splice(first..last, std::iter::once((new_start, new_end)));
        (end - start) - covered
    }

    /// The first missing range within `[0, limit)`, if any.
    pub fn first_gap(&self, limit: u32) -> Option<(u32, u32)> {
        let mut pos = 0;
        for &(s, e) in &self.ranges {
            if s > pos {
                return Some((pos, s.min(limit))).filter(|(a, b)| a < b);
            }
            pos = e;
        }
        (pos < limit).then_some((pos, limit))
    }

    /// Number of disjoint ranges (a measure of fragmentation).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when nothing has been inserted.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// An incoming message being reassembled.
#[derive(Debug)]
pub struct InMessage {
    /// Total length the sender announced.
    pub length: u32,
    buf: BytesMut,
    ranges: RangeSet,
    /// Distinct bytes received.
    pub received: u32,
    /// Bytes the sender may send without further grants (the larger of its
    /// `incoming` field and our grants).
    pub granted: u32,
    /// Scheduled priority in our latest grant.
    pub priority: u8,
    /// Arrival order, for FIFO grants and tie-breaking.
    pub seq: u64,
}

impl InMessage {
    /// A message of `length` bytes; the buffer is allocated zeroed, which the
    /// allocator backs lazily.
    pub fn new(length: u32, seq: u64) -> InMessage {
        InMessage {
            length,
            buf: BytesMut::zeroed(length as usize),
            ranges: RangeSet::default(),
            received: 0,
            granted: 0,
            priority: 0,
            seq,
        }
    }

    /// Copies in the bytes of one packet at `offset`. The caller has checked
    /// that they lie within the message.
    pub fn add(&mut self, offset: u32, data: &[u8]) -> Added {
        let end = offset + data.len() as u32;
        let new = self.ranges.insert(offset, end);
        if new > 0 {
            self.buf[offset as usize..end as usize].copy_from_slice(data);
            self.received += new;
        }
        Added {
            new,
            duplicate: data.len() as u32 - new,
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

    /// The assembled message.
    pub fn into_bytes(self) -> Bytes {
        self.buf.freeze()
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
        let mut m = InMessage::new(5000, 0);
        m.granted = 5000;
        let chunks: Vec<(u32, &[u8])> = msg
            .chunks(1000)
            .enumerate()
            .map(|(i, c)| (i as u32 * 1000, c))
            .collect();
        for &i in &[3usize, 0, 4, 0, 2, 3] {
            m.add(chunks[i].0, chunks[i].1);
        }
        assert!(!m.is_complete());
        assert_eq!(m.first_gap(), Some((1000, 2000)));
        assert_eq!(m.remaining(), 1000);
        let a = m.add(chunks[1].0, chunks[1].1);
        assert_eq!(
            a,
            Added {
                new: 1000,
                duplicate: 0
            }
        );
        let a = m.add(500, &msg[500..1500]);
        assert_eq!(
            a,
            Added {
                new: 0,
                duplicate: 1000
            }
        );
        assert!(m.is_complete());
        assert_eq!(&m.into_bytes()[..], &msg[..]);
    }

    #[test]
    fn empty_message_is_complete_at_once() {
        let m = InMessage::new(0, 0);
        assert!(m.is_complete());
        assert_eq!(m.first_gap(), None);
    }
}
