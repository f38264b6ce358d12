//! A delivered message: the payloads of the packets that carried it, in
//! order, without copying them into one buffer.
//!
//! A receiver that gets each packet as a [`Bytes`] (a slice of a receive
//! buffer, or in the simulator a slice of one shared buffer) keeps those
//! slices; the application gets them as they are. A driver that needs one
//! contiguous buffer calls [`Message::into_bytes`], which copies only when
//! the message came in more than one piece.

use bytes::{Buf, Bytes, BytesMut};

/// An incoming message as a sequence of byte slices.
#[derive(Clone, Default)]
pub struct Message {
    parts: Parts,
    len: usize,
}

/// The slices of a message: one (most messages: no vector to allocate)
/// or any number.
#[derive(Clone)]
enum Parts {
    One(Bytes),
    Many(Vec<Bytes>),
}

impl Default for Parts {
    fn default() -> Parts {
        Parts::Many(Vec::new())
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("len", &self.len)
            .field("parts", &self.parts().len())
            .finish()
    }
}

impl Message {
    /// A message made of `parts`, in order.
    pub fn from_parts(parts: Vec<Bytes>) -> Message {
        let len = parts.iter().map(Bytes::len).sum();
        Message {
            parts: Parts::Many(parts),
            len,
        }
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty message.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slices, in order.
    pub fn parts(&self) -> &[Bytes] {
        match &self.parts {
            Parts::One(b) => std::slice::from_ref(b),
            Parts::Many(v) => v,
        }
    }

    /// The message in one buffer: free for a message of one piece, one copy
    /// otherwise.
    pub fn into_bytes(self) -> Bytes {
        match self.parts {
            Parts::One(b) => b,
            Parts::Many(mut v) => match v.len() {
                0 => Bytes::new(),
                1 => v.pop().expect("one part"),
                _ => {
                    let mut b = BytesMut::with_capacity(self.len);
                    for p in &v {
                        b.extend_from_slice(p);
                    }
                    b.freeze()
                }
            },
        }
    }

    /// A copy of the bytes in one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for p in self.parts() {
            v.extend_from_slice(p);
        }
        v
    }

    /// A reader over the bytes ([`bytes::Buf`]).
    pub fn reader(&self) -> impl Buf + '_ {
        MessageBuf {
            parts: self.parts(),
            index: 0,
            offset: 0,
            remaining: self.len,
        }
    }
}

impl From<Bytes> for Message {
    fn from(b: Bytes) -> Message {
        let len = b.len();
        let parts = if len == 0 {
            Parts::default()
        } else {
            Parts::One(b)
        };
        Message { parts, len }
    }
}

impl From<&'static [u8]> for Message {
    fn from(b: &'static [u8]) -> Message {
        Message::from(Bytes::from_static(b))
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        if self.len != other.len {
            return false;
        }
        let (mut a, mut b) = (self.reader(), other.reader());
        while a.has_remaining() {
            let n = a.chunk().len().min(b.chunk().len());
            if a.chunk()[..n] != b.chunk()[..n] {
                return false;
            }
            a.advance(n);
            b.advance(n);
        }
        true
    }
}

impl Eq for Message {}

impl PartialEq<[u8]> for Message {
    fn eq(&self, other: &[u8]) -> bool {
        if other.len() != self.len {
            return false;
        }
        let mut at = 0;
        for p in self.parts() {
            if other[at..at + p.len()] != p[..] {
                return false;
            }
            at += p.len();
        }
        true
    }
}

impl PartialEq<Bytes> for Message {
    fn eq(&self, other: &Bytes) -> bool {
        *self == other[..]
    }
}

impl PartialEq<&[u8]> for Message {
    fn eq(&self, other: &&[u8]) -> bool {
        *self == **other
    }
}

struct MessageBuf<'a> {
    parts: &'a [Bytes],
    index: usize,
    offset: usize,
    remaining: usize,
}

impl Buf for MessageBuf<'_> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts
            .get(self.index)
            .map(|p| &p[self.offset..])
            .unwrap_or(&[])
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of a message");
        self.remaining -= cnt;
        while cnt > 0 {
            let left = self.parts[self.index].len() - self.offset;
            if cnt < left {
                self.offset += cnt;
                return;
            }
            cnt -= left;
            self.index += 1;
            self.offset = 0;
        }
        while self.index < self.parts.len() && self.parts[self.index].len() == self.offset {
            self.index += 1;
            self.offset = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_read_as_one_message() {
        let m = Message::from_parts(vec![
            Bytes::from_static(b"hel"),
            Bytes::from_static(b"lo, "),
            Bytes::from_static(b"world"),
        ]);
        assert_eq!(m.len(), 12);
        assert_eq!(m, b"hello, world"[..]);
        assert_ne!(m, b"hello, World"[..]);
        let mut r = m.reader();
        let mut out = vec![0u8; 12];
        r.copy_to_slice(&mut out);
        assert_eq!(&out, b"hello, world");
        assert_eq!(&m.clone().into_bytes()[..], b"hello, world");
        assert_eq!(m.to_vec(), b"hello, world");
    }

    #[test]
    fn one_piece_is_not_copied() {
        let b = Bytes::from(vec![1u8; 1000]);
        let m = Message::from(b.clone());
        assert_eq!(m.parts().len(), 1);
        assert_eq!(m, b[..]);
        assert_eq!(m.reader().chunk().len(), 1000);
        assert_eq!(m.into_bytes().as_ptr(), b.as_ptr());
        assert!(Message::from(Bytes::new()).parts().is_empty());
        assert!(Message::from(Bytes::new()).is_empty());
        assert_eq!(Message::default().into_bytes().len(), 0);
    }
}
