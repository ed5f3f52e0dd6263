//! The open region of `disable_wal` puts and its bookkeeping, one per
//! database; the logic that fills and seals regions is in `unlogged`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::t2::packed::Directory;
use crate::t2::record::{record_len, HEADER_LEN};
use crate::t2::segment::Segment;

/// Record bytes a region reserves (as a key-order pass's records: a range
/// crosses a directory once in eighty).
pub(crate) const REGION: usize = 4 << 20;
/// Smallest region worth taking from the end of a segment.
pub(crate) const MIN_REGION: usize = 64 << 10;
/// Unlogged writes in a row before one opens a region: a workload that
/// mixes logged and unlogged writes keeps one record per write instead of
/// sealing a region at every switch.
pub(crate) const STREAK: u32 = 16;

/// The open region and its bookkeeping; one per database.
#[derive(Default)]
pub(crate) struct Unlogged {
    /// `cur.is_some()`, readable without the mutex: every logged write
    /// checks it.
    pub(crate) open: AtomicBool,
    pub(crate) cur: Mutex<Option<Region>>,
    pub(crate) streak: AtomicU32,
    /// Regions sealed since open.
    pub(crate) sealed: AtomicU64,
}

pub(crate) struct Region {
    pub(crate) seg: Arc<Segment>,
    /// Offset of the record's header.
    pub(crate) off: usize,
    /// End of the reservation.
    pub(crate) end: usize,
    pub(crate) dir: Directory,
}

impl Region {
    /// Where the next value's checksum goes.
    pub(crate) fn next_value(&self) -> usize {
        self.off + HEADER_LEN + self.dir.values_len()
    }

    /// Whether `more` body bytes still fit the reservation.
    pub(crate) fn fits(&self, more: usize) -> bool {
        self.off + record_len(self.dir.body_len() + more) <= self.end
    }
}

impl Unlogged {
    /// Whether an unlogged write should go into a region (`true`) or be
    /// logged as usual.
    pub(crate) fn wants(&self) -> bool {
        if self.open.load(Ordering::Acquire) {
            return true;
        }
        self.streak.fetch_add(1, Ordering::Relaxed) >= STREAK
    }

    /// Regions sealed since open.
    pub(crate) fn sealed(&self) -> u64 {
        self.sealed.load(Ordering::Relaxed)
    }

    /// Bytes of values (and their checksums) in the open region.
    pub(crate) fn open_bytes(&self) -> u64 {
        self.cur
            .lock()
            .as_ref()
            .map_or(0, |r| r.dir.values_len() as u64)
    }
}
