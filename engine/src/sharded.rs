//! Counters that every writer thread changes on every operation. One
//! `AtomicU64` that all writers `fetch_add` moves its cache line between
//! cores each time (the log's `appended` add alone was a tenth of
//! `append_with_crc`'s samples); here each thread adds to a slot on a line
//! of its own, and a read, which is rare, sums the slots.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots per counter; threads beyond this share them, still correct.
const SLOTS: usize = 16;

/// `T` alone on a pair of cache lines (the adjacent-line prefetcher pulls
/// lines in pairs), for a word that one thread writes and others read.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Line<T>(pub T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A counter summed over per-thread slots.
#[derive(Default)]
pub struct Sharded {
    slots: [Line<AtomicU64>; SLOTS],
}

/// This thread's slot index, assigned in turn on first use.
fn slot_index() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SLOT: Cell<usize> = const { Cell::new(usize::MAX) });
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        s.get()
    })
}

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.sum(Ordering::Relaxed))
    }
}

impl Sharded {
    /// This thread's slot, for an add that must be undone in the same slot
    /// (see [`Sharded::sum`]).
    pub(crate) fn mine(&self) -> &AtomicU64 {
        &self.slots[slot_index() % SLOTS].0
    }

    /// Adds `v` (relaxed: a statistic).
    #[inline]
    pub(crate) fn add(&self, v: u64) {
        self.mine().fetch_add(v, Ordering::Relaxed);
    }

    /// Takes `v` back (relaxed), e.g. bytes reserved and then returned.
    #[inline]
    pub(crate) fn sub(&self, v: u64) {
        self.mine().fetch_sub(v, Ordering::Relaxed);
    }

    /// The relaxed sum, for a statistic.
    pub(crate) fn get(&self) -> u64 {
        self.sum(Ordering::Relaxed)
    }

    /// The sum of every slot, read with `order`. Adds and subtracts wrap,
    /// so a slot that only ever had as much taken from it as was added
    /// contributes 0 however the others moved.
    pub(crate) fn sum(&self, order: Ordering) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.0.load(order)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds from many threads are all counted, and each lands in the
    /// adding thread's own slot.
    #[test]
    fn sums_adds_from_every_thread() {
        let c = Sharded::default();
        std::thread::scope(|s| {
            for _ in 0..20 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.add(3);
                    }
                    let t = c.mine();
                    t.fetch_add(5, Ordering::SeqCst);
                    t.fetch_sub(5, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(c.sum(Ordering::SeqCst), 20 * 3000);
        let busy = c.slots.iter().filter(|s| s.0.load(Ordering::Relaxed) != 0);
        assert!(busy.count() > 1, "threads add to slots of their own");
    }
}
