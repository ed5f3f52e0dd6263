//! Which value bytes `BufferMode::Auto` scans read recently, so that a
//! cold scan reads directly and a scan of the same bytes again goes
//! through the page cache.
//!
//! `O_DIRECT` reads are the faster way to serve a cold scan (exact
//! completions, no page faults, no page-cache pages to allocate; 1.1-1.2x
//! on the shape at 1 thread), but they never warm the cache: data
//! scanned over and over would be read from disk every time. So, like a
//! scan-resistant cache's admission filter, the first read of a chunk is
//! direct, and a chunk read again while it is still remembered is advised
//! into the page cache, where later scans find it resident.
//!
//! The memory is one process-wide table of chunk tags, overwritten on
//! collision: it forgets a chunk after roughly `SLOTS` other chunks
//! (16 GiB of distinct data) were read, which is the scale of a page cache.
//! A forgotten or colliding chunk only costs one direct read too many or
//! one page-cache read too early.

use std::sync::atomic::{AtomicU64, Ordering};

/// Chunks are this many bytes of one segment.
const CHUNK_SHIFT: u32 = 18;
const SLOTS: usize = 1 << 16;

static TABLE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// A non-zero tag for chunk `chunk` of the segment with process-unique
/// serial `serial` (segment ids repeat across databases).
fn tag(serial: u64, chunk: u64) -> u64 {
    let x = (serial << 40 ^ chunk).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ x >> 29) | 1
}

/// The chunk holding byte `off` of a segment.
pub(crate) fn chunk_of(off: u64) -> u64 {
    off >> CHUNK_SHIFT
}

/// Records a read of the chunk holding byte `off` of segment `serial` and
/// returns whether that chunk was read before (and is still remembered).
pub(crate) fn touch(serial: u64, off: u64) -> bool {
    let t = tag(serial, chunk_of(off));
    let slot = (t >> 32) as usize % SLOTS;
    TABLE
        .get(slot)
        .is_some_and(|s| s.swap(t, Ordering::Relaxed) == t)
}

#[cfg(test)]
mod tests {
    use super::touch;

    #[test]
    fn a_chunk_is_new_once_and_then_remembered() {
        // Serials far from any real segment's.
        let s = u64::MAX - 7;
        assert!(!touch(s, 5 << 18));
        assert!(touch(s, 5 << 18));
        assert!(touch(s, (5 << 18) + 4096), "same chunk");
        assert!(!touch(s, 6 << 18), "next chunk");
        assert!(!touch(s - 1, 5 << 18), "other segment");
    }
}
