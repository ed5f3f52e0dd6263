//! Asks the kernel to back large sorted-region arrays with transparent huge pages, so
//! binary searches over them miss the TLB less often. Purely advisory.

/// Arrays smaller than this gain little from huge pages.
const MIN_BYTES: usize = 4 << 20;
const HUGE: usize = 2 << 20;

/// Advises `MADV_HUGEPAGE` on the 2 MiB-aligned interior of `v`'s allocation. Call it
/// before the memory is first written so page faults can allocate huge pages directly.
pub(crate) fn advise_huge<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < MIN_BYTES {
        return;
    }
    let start = v.as_ptr() as usize;
    let (lo, hi) = (
        (start + HUGE - 1) & !(HUGE - 1),
        (start + bytes) & !(HUGE - 1),
    );
    if hi <= lo {
        return;
    }
    // SAFETY: [lo, hi) lies inside the allocation owned by `v`, which outlives the call.
    // MADV_HUGEPAGE only changes how future faults are served and never alters the
    // contents or validity of the mapping; a failure (e.g. THP disabled) is harmless.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
    }
}
