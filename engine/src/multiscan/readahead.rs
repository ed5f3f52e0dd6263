//! The synchronous path's readahead: when a range is entered, its values'
//! pages are advised (`crate::t2::readahead`), so their faults overlap.
//! Only the current range is advised, as RocksDB's iterator readahead does,
//! so the async path (every range at once, through io_uring) keeps its lead.

use super::plan::{SegTable, Val, Window};
use crate::t2::readahead::{advise, runs};

/// Advises every page the window's stored values live on, merging runs
/// closer than `coalesce` bytes into one call.
pub(crate) fn advise_window(w: &Window, segs: &SegTable, coalesce: u64) {
    let values = w.items.iter().filter_map(|it| match it.val {
        Val::Stored { seg, off, len, .. } => Some((seg, off, len)),
        Val::Inline { .. } => None,
    });
    advise(&runs(values, coalesce), |k| {
        segs.segs.get(k as usize).map(|s| &**s)
    });
}
