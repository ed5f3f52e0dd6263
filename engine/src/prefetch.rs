//! CPU-cache prefetch hints. A point read chains several cache misses
//! (Bloom block, search prefixes, record, value); a hint issued as soon as
//! an address is known lets the next miss overlap the current one.

/// Hints the CPU to load every cache line `s` touches. A hint only: a line
/// whose page is not mapped (or not resident) is dropped, never faulted in.
#[inline]
pub(crate) fn slice<T>(s: &[T]) {
    let len = std::mem::size_of_val(s);
    if len == 0 {
        return;
    }
    let p = s.as_ptr().cast::<u8>();
    let mut off = 0;
    while off < len {
        at(p.wrapping_add(off));
        off += 64;
    }
    // The last line, when `s` does not start on a line boundary.
    at(p.wrapping_add(len - 1));
}

/// Hints the CPU to load the cache line holding `*p`.
#[inline]
pub(crate) fn line_of<T>(p: &T) {
    at((p as *const T).cast::<u8>());
}

#[inline]
fn at(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 (SSE, part of the x86_64 baseline) reads no
    // memory architecturally: it cannot fault or change program state,
    // whatever the address; callers pass addresses inside live borrows.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
