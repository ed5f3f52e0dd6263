//! `Options`, `ReadOptions` and `WriteOptions` with the `rocksdb` crate's
//! setters.

use std::collections::BTreeMap;

use crate::options::EngineOptions;
use crate::registry::EngineKind;

use super::{Error, Snapshot};

/// Compression for RocksDB's SST files (the crate's `DBCompressionType`);
/// only the RocksDB engines use it.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum DBCompressionType {
    /// No compression.
    None,
    /// Snappy.
    Snappy,
    /// zlib (not built into this RocksDB: opening fails naming it).
    Zlib,
    /// bzip2 (not built into this RocksDB: opening fails naming it).
    Bz2,
    /// LZ4.
    Lz4,
    /// LZ4HC.
    Lz4hc,
    /// Zstandard.
    Zstd,
}

impl DBCompressionType {
    fn as_option(self) -> &'static str {
        match self {
            DBCompressionType::None => "none",
            DBCompressionType::Snappy => "snappy",
            DBCompressionType::Zlib => "zlib",
            DBCompressionType::Bz2 => "bzip2",
            DBCompressionType::Lz4 => "lz4",
            DBCompressionType::Lz4hc => "lz4hc",
            DBCompressionType::Zstd => "zstd",
        }
    }
}

/// Options for opening a database (the crate's `Options`), plus the one
/// setter the crate does not have: [`Options::set_engine`].
///
/// As in the crate, `create_if_missing` is off by default
/// ([`super::DB::open_default`] turns it on). The tuning setters
/// (`set_write_buffer_size` and the like) reach the RocksDB engines'
/// options of the same name; the other engines have no such knob and
/// ignore them, which changes speed, never results.
#[derive(Debug, Clone)]
pub struct Options {
    pub(crate) engine: EngineKind,
    pub(crate) create_if_missing: bool,
    pub(crate) create_missing_column_families: bool,
    error_if_exists: bool,
    rocksdb_tuning: BTreeMap<&'static str, String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            engine: EngineKind::Vmemkv,
            create_if_missing: false,
            create_missing_column_families: false,
            error_if_exists: false,
            rocksdb_tuning: BTreeMap::new(),
        }
    }
}

impl Options {
    /// Facade only: the engine to open (vmemkv by default). The one line a
    /// program moving from the `rocksdb` crate adds.
    pub fn set_engine(&mut self, engine: EngineKind) {
        self.engine = engine;
    }

    /// The engine [`super::DB::open`] will open (facade only).
    pub fn engine(&self) -> EngineKind {
        self.engine
    }

    /// Create the database if the directory holds none.
    pub fn create_if_missing(&mut self, create_if_missing: bool) {
        self.create_if_missing = create_if_missing;
    }

    /// Create the families [`super::DB::open_cf`] lists that do not exist.
    pub fn create_missing_column_families(&mut self, create_missing_cfs: bool) {
        self.create_missing_column_families = create_missing_cfs;
    }

    /// Fail if a database already exists at the path.
    pub fn set_error_if_exists(&mut self, enabled: bool) {
        self.error_if_exists = enabled;
    }

    fn tune(&mut self, key: &'static str, value: impl ToString) {
        self.rocksdb_tuning.insert(key, value.to_string());
    }

    /// RocksDB's `write_buffer_size` (RocksDB engines only).
    pub fn set_write_buffer_size(&mut self, size: usize) {
        self.tune("write_buffer_size", size);
    }

    /// RocksDB's `max_write_buffer_number` (RocksDB engines only).
    pub fn set_max_write_buffer_number(&mut self, nbuf: i32) {
        self.tune("max_write_buffer_number", nbuf);
    }

    /// RocksDB's `max_background_jobs` (RocksDB engines only).
    pub fn set_max_background_jobs(&mut self, jobs: i32) {
        self.tune("max_background_jobs", jobs);
    }

    /// RocksDB's `target_file_size_base` (RocksDB engines only).
    pub fn set_target_file_size_base(&mut self, size: u64) {
        self.tune("target_file_size_base", size);
    }

    /// RocksDB's `level0_file_num_compaction_trigger` (RocksDB engines only).
    pub fn set_level_zero_file_num_compaction_trigger(&mut self, n: i32) {
        self.tune("level0_file_num_compaction_trigger", n);
    }

    /// RocksDB's `compression_type` (RocksDB engines only).
    pub fn set_compression_type(&mut self, t: DBCompressionType) {
        self.tune("compression_type", t.as_option());
    }

    /// The engine-neutral open options for the chosen engine.
    pub(crate) fn engine_options(&self) -> EngineOptions {
        let mut eo = EngineOptions {
            create_if_missing: self.create_if_missing,
            error_if_exists: self.error_if_exists,
            ..EngineOptions::default()
        };
        if matches!(self.engine, EngineKind::RocksDb | EngineKind::BlobDb) {
            for (k, v) in &self.rocksdb_tuning {
                eo.extra.insert((*k).to_string(), v.clone());
            }
        }
        eo
    }
}

/// Options for reads and iterators (the crate's `ReadOptions`).
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub(crate) inner: crate::ReadOptions,
    /// Set when the snapshot given to `set_snapshot` could not be taken:
    /// every read with these options reports it rather than reading the
    /// latest state.
    pub(crate) snapshot_error: Option<Error>,
}

impl ReadOptions {
    /// Read as of `snapshot`.
    pub fn set_snapshot(&mut self, snapshot: &Snapshot<'_>) {
        match snapshot.inner() {
            Ok(s) => {
                self.inner.snapshot = Some(s.clone());
                self.snapshot_error = None;
            }
            Err(e) => self.snapshot_error = Some(e),
        }
    }

    /// Iterators return no key below `key` (inclusive bound).
    pub fn set_iterate_lower_bound<K: Into<Vec<u8>>>(&mut self, key: K) {
        self.inner.iterate_lower_bound = Some(key.into());
    }

    /// Iterators return no key at or above `key` (exclusive bound).
    pub fn set_iterate_upper_bound<K: Into<Vec<u8>>>(&mut self, key: K) {
        self.inner.iterate_upper_bound = Some(key.into());
    }

    /// Whether blocks read populate the engine's cache.
    pub fn fill_cache(&mut self, v: bool) {
        self.inner.fill_cache = v;
    }

    /// Whether data read from disk has its checksums verified.
    pub fn set_verify_checksums(&mut self, v: bool) {
        self.inner.verify_checksums = v;
    }

    /// Iterator readahead, in bytes (0: the engine chooses).
    pub fn set_readahead_size(&mut self, v: usize) {
        self.inner.readahead_size = v;
    }

    /// Whether iterators may read ahead asynchronously.
    pub fn set_async_io(&mut self, v: bool) {
        self.inner.async_io = v;
    }

    pub(crate) fn check(&self) -> Result<&crate::ReadOptions, Error> {
        match &self.snapshot_error {
            Some(e) => Err(e.clone()),
            None => Ok(&self.inner),
        }
    }
}

/// Options for writes (the crate's `WriteOptions`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub(crate) inner: crate::WriteOptions,
}

impl WriteOptions {
    /// The defaults: no sync, WAL on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Durable before the write returns.
    pub fn set_sync(&mut self, sync: bool) {
        self.inner.sync = sync;
    }

    /// Skip the write-ahead log: the write may be lost in a crash.
    pub fn disable_wal(&mut self, disable: bool) {
        self.inner.disable_wal = disable;
    }
}
