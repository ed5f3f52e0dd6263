//! vmemkv: a larger-than-memory key-value engine. Keys live in RAM (T1,
//! the in-memory index); values live in mmap'd, append-only segment files
//! (T2) that double as the write-ahead log.
//!
//! Start with [`Db::open`]. The on-disk format, commit and recovery
//! protocol, maintenance and consistency rules are in `docs/design.md`.
#![deny(clippy::unwrap_used)]

mod apply;
pub mod batch;
mod bgerror;
pub mod checkpoint;
mod crc;
mod db;
mod dir;
pub mod error;
pub mod failpoint;
mod fsutil;
mod index;
mod infolog;
pub mod iter;
pub mod maintenance;
mod membudget;
pub mod multiscan;
pub mod options;
mod snapshot;
pub mod stats;
mod stripes;
pub mod t1;
mod t1_stats;
pub mod t2;
mod unlogged;
mod value_crc;

pub use batch::WriteBatch;
pub use db::{Db, WriteOptions};
pub use dir::{is_own_file, DirLock};
pub use error::{Error, Result};
pub use iter::{Bounds, Iter};
pub use maintenance::DefragReport;
pub use options::{Options, MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use snapshot::Snapshot;
pub use stats::Statistics;
