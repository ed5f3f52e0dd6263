//! Where large sorted-region arrays come from: recycled from the regions that
//! merges replaced, or fresh, backed by transparent huge pages so binary
//! searches over them miss the TLB less often (purely advisory).

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

/// Arrays of at least this many bytes are recycled ([`take`], [`give`]):
/// below it the allocator's heap serves them without fresh pages.
const POOL_MIN_BYTES: usize = 1 << 20;
/// Arrays kept per element type: a merge frees the region it replaced
/// about when the next one starts building, so two cover one merge in
/// flight and one region still held by a reader.
const POOL_PER_TYPE: usize = 2;

/// Freed sorted-region arrays of one element type, for the next region
/// built. A region of a 1M-key shard is ~50 MB of arrays; taking them
/// fresh from the kernel for every merge zeroed each page on its first
/// write and shot the TLBs of every core when they were unmapped again
/// (`clear_page_erms` 6.6-10.8% of a 4-thread 8-byte `insert`'s samples,
/// beside `smp_call_function_many_cond`).
pub(crate) struct Pool<T> {
    free: parking_lot::Mutex<Vec<Vec<T>>>,
}

impl<T> Pool<T> {
    pub(crate) const fn new() -> Pool<T> {
        Pool {
            free: parking_lot::Mutex::new(Vec::new()),
        }
    }
}

/// An element type whose large arrays are recycled.
pub(crate) trait Pooled: Copy + 'static {
    fn pool() -> &'static Pool<Self>;
}

macro_rules! pooled {
    ($($t:ty),*) => {$(
        impl Pooled for $t {
            fn pool() -> &'static Pool<$t> {
                static POOL: Pool<$t> = Pool::new();
                &POOL
            }
        }
    )*};
}
pooled!(u8, u32, u64, super::entry::Rec, super::bloom::Block);

fn pooled_bytes<T>(cap: usize) -> usize {
    cap.saturating_mul(std::mem::size_of::<T>())
}

/// An empty array with room for `cap` elements: the smallest recycled one
/// that holds `cap`, else the largest (grown by the allocator, so only the
/// growth takes fresh pages), else a new one advised for huge pages.
pub(crate) fn take<T: Pooled>(cap: usize) -> Vec<T> {
    if pooled_bytes::<T>(cap) >= POOL_MIN_BYTES {
        let mut free = T::pool().free.lock();
        let caps = |i: &usize| free.get(*i).map_or(0, Vec::capacity);
        let fits = (0..free.len()).filter(|i| caps(i) >= cap).min_by_key(caps);
        let pick = fits.or_else(|| (0..free.len()).max_by_key(caps));
        if let Some(mut v) = pick.map(|i| free.swap_remove(i)) {
            drop(free);
            v.reserve_exact(cap);
            return v;
        }
    }
    let v = Vec::with_capacity(cap);
    advise_huge(&v);
    v
}

/// Open T1s. With none, nothing is recycled, so a process that closed its
/// databases keeps no arrays.
static USERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A T1 opened: freed arrays are recycled from now on.
pub(crate) fn user_opened() {
    USERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// A T1 closed; the last one frees every recycled array, and the regions it
/// frees after this are not recycled.
pub(crate) fn user_closed() {
    if USERS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
        release_pooled();
    }
}

/// Hands `v` back for a later [`take`]; a small array, or one smaller than
/// every array already kept when the pool is full, is freed.
pub(crate) fn give<T: Pooled>(mut v: Vec<T>) {
    if pooled_bytes::<T>(v.capacity()) < POOL_MIN_BYTES
        || USERS.load(std::sync::atomic::Ordering::SeqCst) == 0
    {
        return;
    }
    v.clear();
    let mut free = T::pool().free.lock();
    if free.len() < POOL_PER_TYPE {
        free.push(v);
        return;
    }
    let smallest = (0..free.len()).min_by_key(|&i| free.get(i).map_or(0, Vec::capacity));
    if let Some(slot) = smallest.and_then(|i| free.get_mut(i)) {
        if slot.capacity() < v.capacity() {
            // The smaller one is freed below, outside the lock.
            std::mem::swap(slot, &mut v);
        }
    }
}

/// Frees every recycled array (the writes that would reuse them have gone
/// quiet, or the database closed).
pub(crate) fn release_pooled() {
    fn release<T: Pooled>() {
        let arrays = std::mem::take(&mut *T::pool().free.lock());
        drop(arrays);
    }
    release::<u8>();
    release::<u32>();
    release::<u64>();
    release::<super::entry::Rec>();
    release::<super::bloom::Block>();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An element type of this test's own, so no other test shares its pool.
    #[derive(Clone, Copy)]
    struct Page {
        _bytes: [u8; 4096],
    }
    pooled!(Page);

    fn held() -> Vec<usize> {
        let mut caps: Vec<usize> = Page::pool().free.lock().iter().map(Vec::capacity).collect();
        caps.sort_unstable();
        caps
    }

    #[test]
    fn freed_arrays_are_taken_again_best_fit_first() {
        user_opened();
        let big: Vec<Page> = Vec::with_capacity(1024);
        let big_at = big.as_ptr() as usize;
        give(big);
        give(Vec::<Page>::with_capacity(512));
        give(Vec::<Page>::with_capacity(8)); // 32 KiB: freed, not kept
        assert_eq!(held(), vec![512, 1024]);
        give(Vec::<Page>::with_capacity(256)); // pool full, smaller than both
        assert_eq!(held(), vec![512, 1024]);
        give(Vec::<Page>::with_capacity(2048)); // replaces the smallest
        assert_eq!(held(), vec![1024, 2048]);
        let v = take::<Page>(600);
        assert_eq!(v.as_ptr() as usize, big_at, "the smallest that fits");
        assert!(v.is_empty());
        // None fits: the largest, grown.
        let w = take::<Page>(4096);
        assert!(w.capacity() >= 4096);
        assert!(held().is_empty());
        let fresh = take::<Page>(300);
        assert!(fresh.capacity() >= 300);
        user_closed();
    }
}
