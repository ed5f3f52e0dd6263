//! The process-wide budget for prefetched-but-unread bytes.
//!
//! An async MultiScan asks the kernel to read ahead of where its consumer
//! is. If every scan prefetched all its ranges at once, a 15 x 100-key scan
//! of 64 KiB values would put 96 MB in flight; two or four of them in a
//! 384 MiB cgroup evicted their own prefetched pages before reaching them
//! and read them twice (measured: async 7 ops/s against sync 16-17 at 2
//! threads). So the bytes planned by all scans and not yet consumed are
//! counted here, and a scan plans a range ahead of its current one only
//! while the total is under [`limit`]. The current range is always planned:
//! a scan never waits for another to make room.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bytes currently planned ahead by all scans of the process.
static AHEAD: AtomicU64 = AtomicU64::new(0);

/// The budget is an eighth of the page cache the process can expect to
/// keep (`membudget`): the rest holds values being served, the T1 of
/// other threads' work and whatever else the process caches.
const SHARE: u64 = 8;
const MIN: u64 = 8 << 20;
const MAX: u64 = 1 << 30;
/// Without a readable budget.
const DEFAULT: u64 = 64 << 20;

/// The default for the most bytes all scans together plan ahead of their
/// current range (measured once per process).
pub(crate) fn limit() -> u64 {
    (page_cache() / SHARE).clamp(MIN, MAX)
}

/// The page cache the process can expect (`membudget`, measured once per
/// process; [`DEFAULT`] times [`SHARE`] when unreadable).
pub(crate) fn page_cache() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| crate::membudget::budget().unwrap_or(DEFAULT * SHARE))
}

/// Bytes a single window of resolved entries may hold: a quarter of the
/// limit, so that a range of huge values is fetched piecewise with the
/// queue kept full instead of in one read larger than the cache can hold.
pub(crate) fn window_bytes(limit: u64) -> u64 {
    (limit / 4).max(1)
}

/// All scans together hold less than `limit` bytes planned ahead.
pub(crate) fn has_room(limit: u64) -> bool {
    AHEAD.load(Ordering::Relaxed) < limit
}

/// One scan's share of [`AHEAD`]; returned when dropped.
#[derive(Default)]
pub(crate) struct Held(u64);

impl Held {
    pub fn add(&mut self, bytes: u64) {
        self.0 += bytes;
        AHEAD.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn sub(&mut self, bytes: u64) {
        let b = bytes.min(self.0);
        self.0 -= b;
        AHEAD.fetch_sub(b, Ordering::Relaxed);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        AHEAD.fetch_sub(self.0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_never_returns_more_than_it_holds() {
        let mut h = Held::default();
        h.add(1000);
        h.sub(400);
        assert_eq!(h.0, 600);
        h.sub(10_000);
        assert_eq!(h.0, 0, "a double release must not underflow the counter");
        h.add(50);
        assert_eq!(h.0, 50);
    }

    #[test]
    fn limits_are_clamped() {
        assert!((MIN..=MAX).contains(&limit()));
        assert_eq!(window_bytes(limit()), limit() / 4);
        assert_eq!(window_bytes(2), 1, "a window always holds something");
    }
}
