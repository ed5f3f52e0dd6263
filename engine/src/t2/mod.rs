//! T2: the value store, an append-only log of mmap'd segment files that is
//! also the write-ahead log.

pub(crate) mod durable;
pub mod log;
pub(crate) mod marks;
pub(crate) mod packed;
pub(crate) mod readahead;
pub mod record;
pub mod residency;
pub mod scan;
pub mod segment;
pub(crate) mod value_crc;

/// Where a value lives in T2: bytes `[offset, offset+len)` of segment file `segment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Locator {
    /// Segment file id.
    pub segment: u32,
    /// Byte offset of the record inside the segment.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}
