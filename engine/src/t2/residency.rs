//! Page-cache residency of segment pages (`mincore`) and, for cold-cache
//! tests and benchmarks, eviction of a segment from the page cache.

use std::os::unix::io::AsRawFd;

use crate::error::{Error, Result};
use crate::t2::segment::Segment;

/// The page size assumed for extents (mappings are page-aligned).
pub const PAGE: usize = 4096;

/// One byte per page of `[start, start+len)` of `seg`, bit 0 set when the
/// page is resident. `start` must be page-aligned; the range is clamped to
/// the file. On failure every page is reported non-resident, which only
/// costs a redundant read.
pub(crate) fn resident(seg: &Segment, start: usize, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let len = len.min(seg.size().saturating_sub(start));
    let pages = len.div_ceil(PAGE);
    out.resize(pages, 0);
    if pages == 0 || !start.is_multiple_of(PAGE) {
        return;
    }
    let Some(b) = seg.bytes(start, len) else {
        return;
    };
    // SAFETY: `b` lies inside the segment's live mapping and starts on a
    // page boundary (the mapping is page-aligned and `start` is a multiple
    // of PAGE); `out` has one byte per page of `len`, as mincore requires.
    // mincore only reads page tables; it touches no mapped memory.
    let rc = unsafe { libc::mincore(b.as_ptr() as *mut libc::c_void, len, out.as_mut_ptr()) };
    if rc != 0 {
        out.iter_mut().for_each(|p| *p = 0);
    }
}

/// Drops `seg` from the page cache so the next read goes to the disk:
/// writes dirty pages back, unmaps this process's page-table entries
/// (`MADV_DONTNEED` on a shared file mapping discards no data) and asks
/// the kernel to drop the clean pages (`POSIX_FADV_DONTNEED`). Pages other
/// processes have mapped stay resident.
pub fn evict(seg: &Segment) -> Result<()> {
    seg.flush_range(0, seg.size())?;
    seg.forget_verified();
    if let Some(b) = seg.bytes(0, seg.size()) {
        // SAFETY: the range is the whole live mapping (page-aligned).
        // MADV_DONTNEED on a MAP_SHARED file mapping only drops page-table
        // entries: later accesses fault the same file pages back in, so no
        // reader can observe different bytes. Failure is reported below.
        let rc = unsafe {
            libc::madvise(
                b.as_ptr() as *mut libc::c_void,
                b.len(),
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(Error::io(
                format!("madvise(DONTNEED) of {}", seg.path.display()),
                std::io::Error::last_os_error(),
            ));
        }
    }
    // SAFETY: plain syscall on a file descriptor the segment owns.
    let rc =
        unsafe { libc::posix_fadvise(seg.file().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(Error::io(
            format!("posix_fadvise(DONTNEED) of {}", seg.path.display()),
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

/// Resident bytes of `seg` (a multiple of the page size).
pub fn resident_bytes(seg: &Segment) -> usize {
    let mut v = Vec::new();
    resident(seg, 0, seg.size(), &mut v);
    v.iter().filter(|p| *p & 1 != 0).count() * PAGE
}

#[cfg(feature = "internals")]
/// Resident pages of `[start, start+len)` of `seg` (`start` page-aligned).
pub fn resident_pages_in(seg: &Segment, start: usize, len: usize) -> usize {
    let mut v = Vec::new();
    resident(seg, start, len, &mut v);
    v.iter().filter(|p| *p & 1 != 0).count()
}
