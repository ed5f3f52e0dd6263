//! What MultiScans have read of a segment and of a log, kept with the
//! storage they describe. The policy that reads these marks (generations,
//! when a log counts as re-read) is MultiScan's: `multiscan::admission`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::residency::PAGE;

/// One bit per page of a segment: read by an `Auto` scan in a recent
/// generation. Allocated on first use (2 KiB for a 64 MiB segment).
pub(crate) struct PageMarks {
    generation: AtomicU64,
    bits: Box<[AtomicU64]>,
}

impl PageMarks {
    /// Marks for a segment of `size` bytes, as of generation `now`.
    pub fn new(size: usize, now: u64) -> PageMarks {
        let words = size.div_ceil(PAGE).div_ceil(64);
        PageMarks {
            generation: AtomicU64::new(now),
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks pages `[first, end)` in generation `now` and returns how many
    /// of them were marked already, and how many there are. Marks older
    /// than the generation before `now` are forgotten first.
    pub fn touch(&self, now: u64, first: usize, end: usize) -> (usize, usize) {
        let was = self.generation.swap(now, Ordering::Relaxed);
        if was + 1 < now {
            // A racing scan may lose a mark or keep a stale one; either
            // costs one read of the wrong kind, never a wrong value.
            for w in self.bits.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        let (mut seen, mut total) = (0, 0);
        for p in first..end {
            let Some(w) = self.bits.get(p / 64) else {
                break;
            };
            let bit = 1u64 << (p % 64);
            seen += usize::from(w.fetch_or(bit, Ordering::Relaxed) & bit != 0);
            total += 1;
        }
        (seen, total)
    }
}

/// Bytes of windows `Auto` scans of one log have planned since it was
/// opened, and how many async scans of it are running.
#[derive(Default)]
pub(crate) struct Scanned {
    bytes: AtomicU64,
    running: AtomicUsize,
}

impl Scanned {
    pub fn add(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes planned so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// An async scan starts; returns how many others are running. Each call
    /// is paired with one [`Scanned::stop`].
    pub fn start(&self) -> usize {
        self.running.fetch_add(1, Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_new_once_then_remembered_for_two_generations() {
        let m = PageMarks::new(1 << 20, 1);
        assert_eq!(m.touch(1, 0, 3), (0, 3));
        assert_eq!(m.touch(1, 1, 2), (1, 1), "same page");
        assert_eq!(m.touch(1, 2, 5), (1, 3), "one page was read");
        // A generation later the marks are still there...
        assert_eq!(m.touch(2, 0, 1), (1, 1));
        // ...two later they are gone.
        assert_eq!(m.touch(4, 1, 2), (0, 1));
        // Past the end of the segment nothing is counted.
        assert_eq!(m.touch(4, 255, 258), (0, 1));
    }
}
