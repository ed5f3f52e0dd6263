//! vmemkv: a larger-than-memory key-value engine. Keys live in RAM (T1,
//! the in-memory index); values live in mmap'd, append-only segment files
//! (T2) that double as the write-ahead log.
//!
//! Start with [`Db::open`]. The on-disk format, commit and recovery
//! protocol, maintenance and consistency rules are in `docs/design.md`.
#![deny(clippy::unwrap_used)]
#![deny(clippy::undocumented_unsafe_blocks)]

// Layers, each importing only those below it (`tests/module_graph.rs`
// checks): the facade `db`; the subsystems (`recovery`, `write`, `read`,
// `iter`, `multiscan`, `checkpointing`, `maintenance`, `unlogged`,
// `statistics`); the shared state `state`; T1, T2 and leaf helpers.
// Every module is private: the public API is the `pub use` list below.
mod apply;
mod appmeta;
mod batch;
mod bgerror;
mod checkpoint;
mod checkpointing;
mod clock;
mod crc;
mod db;
mod dir;
mod error;
mod files;
mod fsutil;
mod index;
mod infolog;
mod iter;
mod maintenance;
mod membudget;
mod multiscan;
mod options;
mod prefetch;
mod read;
mod recovery;
mod sharded;
mod snapshot;
mod state;
mod statistics;
mod stats;
mod stripes;
mod t1;
mod t1_stats;
mod t2;
mod unlogged;
mod write;

/// Crash points and injected I/O errors for the kill and fault tests
/// (`docs/reliability.md`); inert unless built with feature `failpoints`.
pub mod failpoint;

pub use batch::{BatchFault, BatchIter, BatchOp, MalformedBatch, WriteBatch};
pub use db::Db;
pub use dir::DirLock;
pub use error::{Error, IoFailure, Result};
pub use files::is_own_file;
pub use iter::{Bounds, Iter};
pub use maintenance::DefragReport;
pub use multiscan::{
    BufferMode, InvalidScan, MultiScanArgs, MultiScanIter, MultiScanOptions, MultiScanStats,
    ScanRange, DEFAULT_IO_COALESCE_THRESHOLD,
};
pub use options::{Options, MAX_KEY_SIZE, MAX_SEGMENT_SIZE, MAX_VALUE_SIZE, MIN_SEGMENT_SIZE};
pub use snapshot::Snapshot;
pub use stats::{Statistics, ENTRY_OVERHEAD};
pub use write::WriteOptions;

/// T1, T2 and MultiScan below the `Db` facade, for the engine's own
/// white-box tests and benchmarks (feature `internals`). Not a stable API:
/// nothing here is needed to use the engine.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::multiscan::{fallback, multi_scan, UNBOUNDED_WINDOW};
    pub use crate::t1::{Entry, Locator, Payload, T1Config, Upsert, T1};
    pub use crate::t2::log::Log;
    pub use crate::t2::record::Kind;
    pub use crate::t2::residency;
    pub use crate::t2::segment::{MapOpts, Segment};
}
