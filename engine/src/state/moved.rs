//! Where movers put values since the current sorted-run tail began
//! (`maintenance::runs` reads it; movers and the runs pass write it).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Extents of packed records (moved values) written at or after the
/// current tail, which a tail sort leaves where they are, and the bytes
/// movers have appended, which do not count towards the tail. Movers
/// record only while runs are on (`sorted_run_bytes > 0`).
#[derive(Default)]
pub(crate) struct Packed {
    spans: Mutex<Vec<(u32, u32, u32)>>,
    pub(crate) bytes: AtomicU64,
}

impl Packed {
    /// Records that `[start, end)` of segment `seg` holds moved values, in
    /// a record of `record_len` bytes.
    pub(crate) fn add(&self, seg: u32, start: u32, end: u32, record_len: u64) {
        self.bytes.fetch_add(record_len, Ordering::Relaxed);
        let mut v = self.spans.lock();
        // Appends arrive in log order but for races between movers.
        let at = v.partition_point(|&(s, o, _)| (s, o) <= (seg, start));
        v.insert(at, (seg, start, end));
    }

    pub(crate) fn snapshot(&self) -> Vec<(u32, u32, u32)> {
        self.spans.lock().clone()
    }

    pub(crate) fn forget_below(&self, seg: u32) {
        self.spans.lock().retain(|&(s, _, _)| s >= seg);
    }
}
