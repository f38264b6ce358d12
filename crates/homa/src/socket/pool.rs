//! A bounded pool of receive buffers, reused last in, first out.
//!
//! A large datagram alone in its receive buffer is handed to the core as
//! that buffer (no copy, see [`super::RecvBufs::take_datagram`]), and the
//! application's message keeps it. A fresh allocation for each one made
//! every datagram land in memory that was cold (and at times new to the
//! process: a page fault per 4 KiB). Here the buffer comes back when the
//! last slice of it is dropped, and the next receive reuses the one given
//! back last: the buffer the application has just read, still in the
//! cache.

use bytes::Bytes;
use std::sync::{Arc, Weak};

/// The buffers a pool keeps, most recently given back last.
type Shelf = parking_lot::Mutex<Vec<Vec<u8>>>;

/// Receive buffers of one capacity, given back by the messages that held
/// them. Keeps at most `max` of them; buffers given back beyond that are
/// freed. Cloning shares the pool.
#[derive(Clone)]
pub(crate) struct BufPool {
    shelf: Arc<Shelf>,
    /// Capacity of every buffer handed out.
    capacity: usize,
    /// Most buffers kept for reuse.
    max: usize,
}

impl BufPool {
    /// A pool of buffers of `capacity` bytes that keeps at most `max`.
    pub(crate) fn new(capacity: usize, max: usize) -> BufPool {
        BufPool {
            shelf: Arc::new(parking_lot::Mutex::new(Vec::with_capacity(max))),
            capacity,
            max,
        }
    }

    /// An empty buffer of the pool's capacity: the one given back last, or
    /// a new one when the pool has none.
    pub(crate) fn get(&self) -> Vec<u8> {
        let reused = self.shelf.lock().pop();
        reused.unwrap_or_else(|| Vec::with_capacity(self.capacity))
    }

    /// `buf[start..end]` as [`Bytes`] that own `buf`: when the last slice
    /// of it goes, `buf` comes back to this pool (if the pool still exists
    /// and keeps fewer than its maximum). An empty slice holds nothing:
    /// `buf` comes back at once.
    pub(crate) fn lend(&self, buf: Vec<u8>, start: usize, end: usize) -> Bytes {
        Bytes::from_owner(Lent {
            buf,
            shelf: Arc::downgrade(&self.shelf),
            capacity: self.capacity,
            max: self.max,
        })
        .slice(start..end)
    }

    /// Buffers kept for reuse now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shelf.lock().len()
    }
}

/// A receive buffer lent out as [`Bytes`]; goes back to its pool on drop.
struct Lent {
    buf: Vec<u8>,
    shelf: Weak<Shelf>,
    /// The pool's buffer capacity: a smaller buffer is not taken back.
    capacity: usize,
    max: usize,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if self.buf.capacity() < self.capacity {
            return;
        }
        let Some(shelf) = self.shelf.upgrade() else {
            return;
        };
        let mut buf = std::mem::take(&mut self.buf);
        // (Its bytes stay initialised; the length only says how many the
        // kernel may be assumed to have written, and a reused buffer starts
        // over.)
        buf.clear();
        let mut s = shelf.lock();
        if s.len() < self.max {
            s.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_last_in_first_out() {
        let pool = BufPool::new(1024, 4);
        let mut a = pool.get();
        let mut b = pool.get();
        a.extend_from_slice(&[1; 100]);
        b.extend_from_slice(&[2; 100]);
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let sa = pool.lend(a, 10, 20);
        let sb = pool.lend(b, 0, 100);
        assert_eq!(&sa[..], &[1; 10]);
        assert_eq!(sb.len(), 100);
        let sa2 = sa.slice(2..5);
        drop(sa);
        assert_eq!(pool.len(), 0, "a slice still holds the buffer");
        drop(sa2);
        drop(sb);
        assert_eq!(pool.len(), 2);
        // b was given back last: it is reused first, empty, full capacity.
        let c = pool.get();
        assert_eq!(c.as_ptr(), pb);
        assert!(c.is_empty() && c.capacity() >= 1024);
        let d = pool.get();
        assert_eq!(d.as_ptr(), pa);
        assert_eq!(pool.len(), 0);
        assert!(pool.get().capacity() >= 1024, "empty pool: a new buffer");
    }

    #[test]
    fn the_pool_keeps_at_most_its_maximum() {
        let pool = BufPool::new(64, 3);
        let lent: Vec<Bytes> = (0..10)
            .map(|_| {
                let mut b = pool.get();
                b.push(1);
                pool.lend(b, 0, 1)
            })
            .collect();
        assert_eq!(pool.len(), 0);
        drop(lent);
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn a_buffer_outliving_its_pool_is_freed() {
        let pool = BufPool::new(64, 3);
        let b = pool.lend(vec![7; 8], 0, 8);
        drop(pool);
        assert_eq!(&b[..], &[7; 8]);
        drop(b);
    }

    #[test]
    fn a_smaller_buffer_is_not_taken_back() {
        let pool = BufPool::new(64, 3);
        drop(pool.lend(vec![7; 8], 0, 8));
        assert_eq!(pool.len(), 0);
    }
}
