//! Which value pages `BufferMode::Auto` scans read recently, so that a
//! cold scan reads directly and a scan of the same bytes again goes
//! through the page cache.
//!
//! `O_DIRECT` reads are the faster way to serve a cold scan (exact
//! completions, no page faults, no page-cache pages to allocate; 1.1-1.2x
//! on the shape at 1 thread), but they never warm the cache: data
//! scanned over and over would be read from disk every time. So, like a
//! scan-resistant cache's admission filter, the first read of a page is
//! direct, and a window of entries 90% of whose pages were read recently
//! is advised into the page cache, where later scans find it resident.
//!
//! Each segment keeps one bit per page ([`PageMarks`], allocated on first
//! use: 2 KiB for a 64 MiB segment), exact rather than hashed: a first
//! version marked 256 KiB chunks in a hashed table, and over a 400-op run
//! of random 64 KB windows a third of the chunks got marked, so unrelated
//! windows that merely shared a chunk were sent to the page cache.
//! "Recently" is two generations: the generation turns once scans have
//! read half of the expected page cache directly since it began, and a
//! segment's marks older than the previous generation are cleared when
//! next touched, so a page counts as read recently while the page cache
//! could plausibly still have held it.
//!
//! **Re-reading.** Page marks catch a window read again, not a run that
//! keeps scanning a log that fits in memory: random windows mostly overlap
//! earlier ones only partly, so they stayed direct, and the run kept
//! reading from disk what the synchronous path had long cached (10 s
//! cold-start runs of the shape at 2 threads: async 2.5k ops/s,
//! sync 4.3k). So once the `Auto` scans of an open database have read, in
//! all, a quarter of such a log ([`REREAD_SHARE`]), every window of later
//! scans goes through the page cache.
//!
//! Why a quarter: caching costs about a fifth more per cold byte at one
//! thread (page-cache inserts, faults on the mapping), so it pays when a
//! page's chance of being read again exceeds about 0.2. With no idea of
//! what is to come, take the scans still ahead to be as many as those
//! behind (a run has as long again to go as it has gone); over uniformly
//! spread ranges that chance is `1 - exp(-read / log)`, past 0.2 once
//! `read` is about `log / 4`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::residency::PAGE;

static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Scans are re-reading a log once they have read, in all, this part of
/// it (`log / REREAD_SHARE` bytes).
const REREAD_SHARE: u64 = 4;
/// Bytes read directly by `Auto` scans in the current generation.
static DIRECT_BYTES: AtomicU64 = AtomicU64::new(0);

/// One bit per page of a segment: read by an `Auto` scan recently.
pub(crate) struct PageMarks {
    generation: AtomicU64,
    bits: Box<[AtomicU64]>,
}

impl PageMarks {
    /// Marks for a segment of `size` bytes.
    pub fn new(size: usize) -> PageMarks {
        let words = size.div_ceil(PAGE).div_ceil(64);
        PageMarks {
            generation: AtomicU64::new(GENERATION.load(Ordering::Relaxed)),
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks pages `[first, end)` and returns how many of them were marked
    /// already, and how many there are.
    pub fn touch(&self, first: usize, end: usize) -> (usize, usize) {
        let now = GENERATION.load(Ordering::Relaxed);
        let was = self.generation.swap(now, Ordering::Relaxed);
        if was + 1 < now {
            // Older than the previous generation: forget it. (A racing
            // scan may lose a mark or keep a stale one; either costs one
            // read of the wrong kind, never a wrong value.)
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
/// opened, to tell when they are re-reading it; and how many async scans
/// of it are running.
#[derive(Default)]
pub(crate) struct Scanned {
    bytes: AtomicU64,
    running: AtomicUsize,
}

impl Scanned {
    pub fn add(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Scans have read enough of the `log`-byte log to be re-reading it.
    pub fn rereading(&self, log: u64) -> bool {
        self.bytes.load(Ordering::Relaxed) >= log / REREAD_SHARE
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

/// Counts `bytes` read directly by an `Auto` scan; `horizon` bytes of them
/// end a generation.
pub(crate) fn read_directly(bytes: u64, horizon: u64) {
    if DIRECT_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes > horizon {
        DIRECT_BYTES.store(0, Ordering::Relaxed);
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_new_once_then_remembered_for_two_generations() {
        let m = PageMarks::new(1 << 20);
        assert_eq!(m.touch(0, 3), (0, 3));
        assert_eq!(m.touch(1, 2), (1, 1), "same page");
        assert_eq!(m.touch(2, 5), (1, 3), "one page was read");
        // A generation later the marks are still there...
        read_directly(u64::MAX / 2, 0);
        assert_eq!(m.touch(0, 1), (1, 1));
        // ...two later they are gone.
        read_directly(u64::MAX / 2, 0);
        read_directly(u64::MAX / 2, 0);
        assert_eq!(m.touch(1, 2), (0, 1));
        // Past the end of the segment nothing is counted.
        assert_eq!(m.touch(255, 258), (0, 1));
    }
}
