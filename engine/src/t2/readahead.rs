//! Readahead for synchronous reads of many values: their pages are handed
//! to the kernel with `MADV_WILLNEED`, coalesced into runs, so the page
//! faults that follow wait for reads already in flight instead of issuing
//! one 4 KiB read each.
//!
//! Segments are mapped `MADV_RANDOM` (point reads must not drag in
//! neighbours), which also turns off the kernel's own readahead; without
//! this a cold scan of 100 values costs 100+ serial reads. Users: the
//! MultiScan synchronous path (the entered range) and iterators (the next
//! entries once a scan is detected).

use crate::t2::residency::resident;
use crate::t2::segment::Segment;

const PAGE: u64 = 4096;

/// Runs probed with `mincore` before advising: when all of them are
/// resident the values are taken as warm and nothing is advised, so a warm
/// scan pays a few `mincore` calls rather than one `madvise` per value.
const PROBES: usize = 4;

/// Page-aligned runs `(segment key, start, end)` covering values given in
/// scan order as `(segment key, offset, length)`; a value starting within
/// `coalesce` bytes after the previous run on the same segment joins it.
pub(crate) fn runs(
    values: impl IntoIterator<Item = (u32, u32, u32)>,
    coalesce: u64,
) -> Vec<(u32, u64, u64)> {
    let mut runs: Vec<(u32, u64, u64)> = Vec::new();
    for (seg, off, len) in values {
        let start = u64::from(off) & !(PAGE - 1);
        let end = (u64::from(off) + u64::from(len)).div_ceil(PAGE) * PAGE;
        match runs.last_mut() {
            Some((s, a, b)) if *s == seg && start >= *a && start <= b.saturating_add(coalesce) => {
                *b = (*b).max(end);
            }
            _ => runs.push((seg, start, end)),
        }
    }
    runs
}

/// Advises every run unless the first few are already resident, and
/// returns whether it advised anything. `seg(key)` maps a run's segment key
/// to its segment.
pub(crate) fn advise<'s>(
    runs: &[(u32, u64, u64)],
    seg: impl Fn(u32) -> Option<&'s Segment>,
) -> bool {
    let mut pages = Vec::new();
    let warm = runs.iter().take(PROBES).all(|&(k, a, b)| {
        seg(k).is_some_and(|s| {
            resident(s, a as usize, (b - a) as usize, &mut pages);
            pages.iter().all(|p| p & 1 == 1)
        })
    });
    if warm {
        return false;
    }
    for &(k, a, b) in runs {
        if let Some(s) = seg(k) {
            s.will_need(a as usize, (b - a) as usize);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn coalesces_forward_runs_per_segment() {
        let v = [
            (1, 100, 50),
            (1, 5000, 10),
            (1, 40_000, 10),
            (2, 0, 9000),
            (1, 0, 10),
        ];
        assert_eq!(
            runs(v, 16 * 1024),
            vec![
                (1, 0, 8192),
                (1, 36_864, 40_960),
                (2, 0, 12_288),
                (1, 0, 4096)
            ]
        );
        assert_eq!(runs([(1, 4095, 2)], 0), vec![(1, 0, 8192)]);
    }
}
