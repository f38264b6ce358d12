//! A one-value channel from the endpoint to an async waiter, with no
//! executor behind it: the receiver is a future that any executor can poll
//! (tokio, another, or a plain `block_on`), woken through its `Waker`.
//!
//! The same contract as tokio's `oneshot`, which the endpoint used before:
//! `send` hands the value back when the receiver is gone, and the receiver
//! resolves to `Err(Closed)` when the sender is dropped without sending.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

type Shared<T> = Arc<Mutex<Slot<T>>>;

fn lock<T>(shared: &Shared<T>) -> MutexGuard<'_, Slot<T>> {
    // Nothing runs user code under this lock but `Waker::wake`; a panic
    // there leaves the slot consistent.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sending half.
pub(crate) struct Sender<T> {
    shared: Shared<T>,
}

/// The receiving half: a future of the value.
pub(crate) struct Receiver<T> {
    shared: Shared<T>,
}

/// The sender was dropped without sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed;

/// A new channel.
pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    }));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// True once the receiver is gone (a `send` would hand the value back).
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.shared).receiver_gone
    }

    /// Delivers `value`, or hands it back if the receiver is gone.
    pub(crate) fn send(self, value: T) -> Result<(), T> {
        let waker = {
            let mut slot = lock(&self.shared);
            if slot.receiver_gone {
                return Err(value);
            }
            slot.value = Some(value);
            slot.waker.take()
        };
        // `self` drops here: the receiver sees the value before the hang-up.
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.shared);
            slot.sender_gone = true;
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.shared);
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Ok(v));
        }
        if slot.sender_gone {
            return Poll::Ready(Err(Closed));
        }
        match &mut slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Receiver<T> {
    /// Hangs up (a later `send` gets its value back) and takes the value
    /// already sent, if any: what a waiter that gives up does, so that a
    /// value sent at that moment is not lost.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn close_and_take(&mut self) -> Option<T> {
        let mut slot = lock(&self.shared);
        slot.receiver_gone = true;
        slot.waker = None;
        slot.value.take()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut slot = lock(&self.shared);
        slot.receiver_gone = true;
        slot.waker = None;
        // A value sent but never received drops with the last handle.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll<T>(rx: &mut Receiver<T>, waker: &Waker) -> Poll<Result<T, Closed>> {
        Pin::new(rx).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn value_sent_before_or_after_the_first_poll_arrives_and_wakes() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());

        let (tx, mut rx) = channel();
        tx.send(7).unwrap();
        assert_eq!(poll(&mut rx, &waker), Poll::Ready(Ok(7)));

        let (tx, mut rx) = channel();
        assert_eq!(poll(&mut rx, &waker), Poll::Pending);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        tx.send(8).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut rx, &waker), Poll::Ready(Ok(8)));
    }

    #[test]
    fn dropped_sender_closes_and_dropped_receiver_returns_the_value() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());

        let (tx, mut rx) = channel::<u32>();
        assert_eq!(poll(&mut rx, &waker), Poll::Pending);
        drop(tx);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut rx, &waker), Poll::Ready(Err(Closed)));

        let (tx, rx) = channel();
        drop(rx);
        assert_eq!(tx.send(9), Err(9));
    }
}
