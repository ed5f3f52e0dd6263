//! The synchronous path's readahead: when a range is entered, its values'
//! pages are handed to the kernel with `MADV_WILLNEED` (coalesced like the
//! async plan), so the page faults that follow wait for reads already in
//! flight instead of issuing one 4 KiB read each.
//!
//! Segments are mapped `MADV_RANDOM` (point reads must not drag in
//! neighbours), which also turns off the kernel's own readahead; without
//! this a cold synchronous scan of 100 values costs 100+ serial reads.
//! Only the current range is advised, as RocksDB's iterator readahead does,
//! so the async path (every range at once, through io_uring) keeps its lead.

use super::plan::{SegTable, Val, Window};
use super::residency::resident;

const PAGE: u64 = 4096;

/// Runs probed with `mincore` before advising: when all of them are
/// resident the window is taken as warm and nothing is advised, so a warm
/// scan pays a few `mincore` calls rather than one `madvise` per value.
const PROBES: usize = 4;

/// Advises every page the window's stored values live on, merging runs
/// closer than `coalesce` bytes into one call.
pub(crate) fn advise_window(w: &Window, segs: &SegTable, coalesce: u64) {
    let mut runs: Vec<(u32, u64, u64)> = Vec::new();
    for it in &w.items {
        let Val::Stored { seg, off, len, .. } = it.val else {
            continue;
        };
        let start = u64::from(off) & !(PAGE - 1);
        let end = (u64::from(off) + u64::from(len)).div_ceil(PAGE) * PAGE;
        match runs.last_mut() {
            Some((s, a, b)) if *s == seg && start >= *a && start <= b.saturating_add(coalesce) => {
                *b = (*b).max(end);
            }
            _ => runs.push((seg, start, end)),
        }
    }
    let mut pages = Vec::new();
    let warm = runs.iter().take(PROBES).all(|&(seg, a, b)| {
        segs.segs.get(seg as usize).is_some_and(|s| {
            resident(s, a as usize, (b - a) as usize, &mut pages);
            pages.iter().all(|p| p & 1 == 1)
        })
    });
    if warm {
        return;
    }
    for (seg, a, b) in runs {
        if let Some(s) = segs.segs.get(seg as usize) {
            s.will_need(a as usize, (b - a) as usize);
        }
    }
}
