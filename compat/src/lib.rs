//! `vmemkv-compat`: one RocksDB-shaped interface over several engines.
//!
//! * [`Db`] is the trait: point reads and writes, [`WriteBatch`], a cursor
//!   [`DbIterator`], [`MultiScan`], and maintenance calls.
//! * [`open`] picks an engine by [`EngineKind`] at run time and returns a
//!   `Box<dyn Db>`.
//! * `engines::*` holds one adapter per engine: vmemkv always, RocksDB and
//!   RocksDB-BlobDB behind the `rocksdb` feature, LMDB behind `lmdb`,
//!   fjall and fjall with key-value separation behind `fjall`, Sparkey
//!   (a write-once hash store, point operations only) behind `sparkey`,
//!   and `null`, which stores nothing (the caller's own ceiling).
//!
//! The trait modules (`error`, `options`, `batch`, `iter`, `multiscan`,
//! `db`) depend on no engine, in the manner of TiKV's `engine_traits`.
#![deny(missing_docs)]
#![deny(clippy::unwrap_used)]

pub mod batch;
pub mod capabilities;
pub mod db;
mod destroy;
pub mod engines;
pub mod error;
pub mod family;
pub mod iter;
mod lock;
pub mod multiscan;
pub mod options;
pub mod registry;
pub mod rocksdb_api;
pub mod snapshot;

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use capabilities::{Capabilities, Capability};
pub use db::{check_sizes, not_supported, Db};
pub use destroy::{destroy, is_engine_database};
pub use error::{Error, IoFailure, Result};
pub use family::{Cf, Families};
pub use iter::{DbIterator, Entries, NeverValid};
pub use multiscan::{
    collect_multi_scan, InvalidScan, IterMultiScan, MultiScan, MultiScanArgs, ScanRange,
    ScanResults, DEFAULT_IO_COALESCE_THRESHOLD,
};
pub use options::{EngineOptions, Limits, OptionMap, ReadOptions, WriteOptions};
pub use registry::{open, EngineKind};
pub use snapshot::Snapshot;
