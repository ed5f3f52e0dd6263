//! Page-aligned read buffers for io_uring reads, and the per-ring pool that
//! reuses them.
//!
//! `O_DIRECT` needs memory aligned to the logical block size; a page
//! satisfies every device here. Buffers are zeroed once, when allocated,
//! and then reused without clearing: a fresh 64 KiB allocation per read
//! cost a `memset` (and, in a VM, host page faults) on every scan.

use std::alloc::Layout;
use std::ptr::NonNull;

const ALIGN: usize = crate::t2::residency::PAGE;
/// Buffer sizes are multiples of this, so similar reads share buffers.
const GRANULE: usize = 16 << 10;
/// Bytes of idle buffers one ring keeps.
const POOL_BYTES: usize = 16 << 20;

/// An owned, page-aligned, initialised heap buffer of `cap` bytes.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: plain owned memory with no thread affinity; `&AlignedBuf` only
// reads it.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    fn layout(cap: usize) -> Option<Layout> {
        Layout::from_size_align(cap.max(1), ALIGN).ok()
    }

    fn new(cap: usize) -> Option<AlignedBuf> {
        let layout = Self::layout(cap)?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| AlignedBuf { ptr, cap })
    }

    /// Start of the buffer, for the kernel to write `cap` bytes at most.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The first `len` bytes, if the buffer holds that many.
    pub fn get(&self, len: usize) -> Option<&[u8]> {
        (len <= self.cap).then(|| {
            // SAFETY: `ptr` points at `cap >= len` bytes owned by `self`,
            // initialised when allocated (zeroed) and since written only
            // by the kernel's reads; `&self` keeps them from being written
            // through `as_mut_ptr` meanwhile.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
        })
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.cap) {
            // SAFETY: allocated in `new` with this same layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

/// Idle buffers of one ring.
#[derive(Default)]
pub(crate) struct BufPool {
    free: Vec<AlignedBuf>,
    bytes: usize,
}

impl BufPool {
    /// A buffer of at least `len` bytes: the smallest idle one that is not
    /// more than twice as large, or a new one.
    pub fn take(&mut self, len: usize) -> Option<AlignedBuf> {
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.cap >= len && b.cap <= len.saturating_mul(2))
            .min_by_key(|(_, b)| b.cap)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let b = self.free.swap_remove(i);
            self.bytes -= b.cap;
            return Some(b);
        }
        AlignedBuf::new(len.div_ceil(GRANULE).max(1) * GRANULE)
    }

    /// Keeps `b` for later reads, or frees it when the pool is full.
    pub fn give(&mut self, b: AlignedBuf) {
        if self.bytes + b.cap <= POOL_BYTES {
            self.bytes += b.cap;
            self.free.push(b);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_reused() {
        let mut p = BufPool::default();
        let mut a = p.take(70_000).unwrap();
        assert_eq!(a.as_mut_ptr() as usize % ALIGN, 0);
        assert!(a.capacity() >= 70_000 && a.capacity() % GRANULE == 0);
        let addr = a.as_mut_ptr() as usize;
        p.give(a);
        let mut b = p.take(65_536).unwrap();
        assert_eq!(
            b.as_mut_ptr() as usize,
            addr,
            "a fitting idle buffer is reused"
        );
        p.give(b);
        // Too large to be worth it for a small read: a new one.
        let mut c = p.take(4096).unwrap();
        assert_ne!(c.as_mut_ptr() as usize, addr);
        assert_eq!(c.get(4096).map(<[u8]>::len), Some(4096));
        assert!(c.get(c.capacity() + 1).is_none());
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut p = BufPool::default();
        for _ in 0..(POOL_BYTES / (1 << 20)) + 4 {
            let b = AlignedBuf::new(1 << 20).unwrap();
            p.give(b);
        }
        assert!(p.bytes <= POOL_BYTES);
        assert_eq!(
            p.bytes,
            p.free.iter().map(AlignedBuf::capacity).sum::<usize>()
        );
    }
}
