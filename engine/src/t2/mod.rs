//! T2: the value store, an append-only log of mmap'd segment files that is
//! also the write-ahead log.

pub(crate) mod durable;
pub mod log;
pub(crate) mod packed;
pub(crate) mod readahead;
pub mod record;
pub mod scan;
pub mod segment;
