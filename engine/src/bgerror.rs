//! Failures of background work, kept until someone is told.
//!
//! A background thread has no caller to return an error to, so a failed
//! defragment or checkpoint (or a panic that ended a thread) was once only a
//! LOG line. Now each is recorded here: counted and kept for
//! [`crate::Statistics`], and handed once to the next foreground write, the
//! way RocksDB reports a background error through the next write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::Error;

/// The record of background failures.
#[derive(Default)]
pub(crate) struct BackgroundErrors {
    count: AtomicU64,
    /// Set when `unreported` holds an error no foreground call has returned.
    pending: AtomicBool,
    unreported: Mutex<Option<Error>>,
    last: Mutex<Option<String>>,
}

/// The error `e` with `what` in front of its message, in the same category.
fn prefixed(what: &str, e: &Error) -> Error {
    let m = |s: &str| format!("{what}: {s}");
    match e {
        Error::InvalidArgument(s) => Error::InvalidArgument(m(s)),
        Error::Corruption(s) => Error::Corruption(m(s)),
        Error::IoError(s) => Error::IoError(crate::error::IoFailure::new(s.kind(), m(s))),
        Error::Busy(s) => Error::Busy(m(s)),
        Error::ShutdownInProgress(s) => Error::ShutdownInProgress(m(s)),
        Error::Poisoned(s) => Error::Poisoned(m(s)),
    }
}

impl BackgroundErrors {
    /// Records that `what` (e.g. "background defragment") failed with `e`.
    /// `for_writers`: hand it to the next foreground write too (not for
    /// work that a writer redoes itself when it needs it, such as a spare
    /// segment, which would only fail a write for a disk that has room again).
    pub fn record(&self, what: &str, e: &Error, for_writers: bool) {
        let e = prefixed(what, e);
        self.count.fetch_add(1, Ordering::Relaxed);
        *self.last.lock() = Some(e.to_string());
        if for_writers {
            let mut u = self.unreported.lock();
            // Keep the oldest: it is the cause, later ones often follow it.
            if u.is_none() {
                *u = Some(e);
            }
            self.pending.store(true, Ordering::Release);
        }
    }

    /// The oldest failure no foreground call has returned yet, once.
    #[inline]
    pub fn take(&self) -> Option<Error> {
        if !self.pending.load(Ordering::Acquire) {
            return None;
        }
        let mut u = self.unreported.lock();
        self.pending.store(false, Ordering::Release);
        u.take()
    }

    /// Failures since open.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The last failure's message.
    pub fn last(&self) -> Option<String> {
        self.last.lock().clone()
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_once_counted_always() {
        let b = BackgroundErrors::default();
        assert!(b.take().is_none());
        b.record(
            "preallocating a segment",
            &Error::IoError(String::from("full").into()),
            false,
        );
        assert!(b.take().is_none(), "not for writers");
        b.record(
            "background defragment",
            &Error::IoError(String::from("disk").into()),
            true,
        );
        assert_eq!(b.count(), 2);
        match b.take() {
            Some(Error::IoError(m)) => assert_eq!(m, "background defragment: disk"),
            other => panic!("{other:?}"),
        }
        assert!(b.take().is_none(), "handed out once");
        assert_eq!(
            b.last().as_deref(),
            Some("IO error: background defragment: disk")
        );
    }
}
