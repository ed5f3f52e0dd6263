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
//! Each segment keeps one bit per page (`t2::marks::PageMarks`, allocated
//! on first use: 2 KiB for a 64 MiB segment), exact rather than hashed: a first
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

use std::sync::atomic::{AtomicU64, Ordering};

use crate::t2::marks::Scanned;

static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Scans are re-reading a log once they have read, in all, this part of
/// it (`log / REREAD_SHARE` bytes).
const REREAD_SHARE: u64 = 4;
/// Bytes read directly by `Auto` scans in the current generation.
static DIRECT_BYTES: AtomicU64 = AtomicU64::new(0);

/// The current generation, for the segments' page marks.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Scans have read enough of the `log`-byte log to be re-reading it.
pub(crate) fn rereading(scanned: &Scanned, log: u64) -> bool {
    scanned.bytes() >= log / REREAD_SHARE
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
    fn a_horizon_of_direct_reads_turns_the_generation() {
        let g = generation();
        read_directly(10, u64::MAX);
        assert!(generation() >= g, "below the horizon the generation stays");
        read_directly(u64::MAX / 2, 0);
        assert!(generation() > g, "past the horizon it turns");
    }

    #[test]
    fn a_log_is_rereading_once_a_quarter_was_scanned() {
        let s = Scanned::default();
        s.add(24);
        assert!(!rereading(&s, 100));
        s.add(1);
        assert!(rereading(&s, 100));
    }
}
