//! Per-call and per-open options, shaped after RocksDB's.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::snapshot::Snapshot;

/// Options for reads, iterators and MultiScans (RocksDB's `ReadOptions`).
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Iterators never return keys below this bound (inclusive).
    pub iterate_lower_bound: Option<Vec<u8>>,
    /// Iterators never return keys at or above this bound (exclusive).
    pub iterate_upper_bound: Option<Vec<u8>>,
    /// Whether blocks read should populate the engine's cache.
    pub fill_cache: bool,
    /// Whether to verify checksums of data read from disk.
    pub verify_checksums: bool,
    /// Whether iterators may issue asynchronous reads ahead of the cursor.
    pub async_io: bool,
    /// Readahead for iterators, in bytes; 0 lets the engine choose.
    pub readahead_size: usize,
    /// Read as of this snapshot ([`crate::Db::snapshot`]). `None`: a point
    /// read sees the latest committed state; an iterator, `multi_get` or
    /// MultiScan sees the state as of its creation, as in RocksDB.
    pub snapshot: Option<Snapshot>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            fill_cache: true,
            verify_checksums: true,
            async_io: false,
            readahead_size: 0,
            snapshot: None,
        }
    }
}

impl ReadOptions {
    /// Sets both iterator bounds; `None` leaves a side open.
    pub fn with_bounds(mut self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self {
        self.iterate_lower_bound = lower.map(<[u8]>::to_vec);
        self.iterate_upper_bound = upper.map(<[u8]>::to_vec);
        self
    }

    /// Reads as of `snapshot`.
    pub fn with_snapshot(mut self, snapshot: &Snapshot) -> Self {
        self.snapshot = Some(snapshot.clone());
        self
    }
}

/// Options for writes (RocksDB's `WriteOptions`). The trait crate's own
/// type, so that it builds with no engine; adapters translate it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Durable before the call returns.
    pub sync: bool,
    /// The write may be lost in a crash until it is flushed; it never
    /// corrupts anything.
    pub disable_wal: bool,
}

impl WriteOptions {
    /// `sync = true`.
    pub fn sync() -> Self {
        WriteOptions {
            sync: true,
            disable_wal: false,
        }
    }
}

/// The largest key and value an engine accepts. `None` means no limit a test
/// could reach (e.g. RocksDB's are in the gigabytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted key, in bytes.
    pub max_key_size: Option<usize>,
    /// Largest accepted value, in bytes.
    pub max_value_size: Option<usize>,
}

/// Options used when opening any engine.
///
/// Generic knobs are fields; everything engine-specific goes through
/// [`EngineOptions::extra`], a string map that db_bench fills from its flags.
/// Adapters consume the keys they know through [`OptionMap`] and reject the
/// rest, naming the option.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Fail if a database already exists at the path.
    pub error_if_exists: bool,
    /// Engine-specific options, e.g. `write_buffer_size` for RocksDB.
    pub extra: BTreeMap<String, String>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            create_if_missing: true,
            error_if_exists: false,
            extra: BTreeMap::new(),
        }
    }
}

impl EngineOptions {
    /// Adds one engine-specific option.
    pub fn set(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.extra.insert(key.into(), value.to_string());
        self
    }
}

/// A consuming view of [`EngineOptions::extra`]: adapters take the options
/// they understand, then call [`OptionMap::finish`] so that anything left
/// over is reported as `InvalidArgument` naming the option.
#[derive(Debug)]
pub struct OptionMap {
    engine: &'static str,
    rest: BTreeMap<String, String>,
}

impl OptionMap {
    /// Starts consuming `opts.extra` for the named engine.
    pub fn new(engine: &'static str, opts: &EngineOptions) -> Self {
        OptionMap {
            engine,
            rest: opts.extra.clone(),
        }
    }

    /// Removes and returns the raw string value of `key`.
    pub fn take_str(&mut self, key: &str) -> Option<String> {
        self.rest.remove(key)
    }

    /// Removes `key` and parses it with `FromStr`; a malformed value is an
    /// `InvalidArgument` naming the option and the value.
    pub fn take<T: std::str::FromStr>(&mut self, key: &str) -> Result<Option<T>> {
        match self.rest.remove(key) {
            None => Ok(None),
            Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
                Error::InvalidArgument(format!(
                    "{} option '{key}': cannot parse value '{v}' as {}",
                    self.engine,
                    std::any::type_name::<T>()
                ))
            }),
        }
    }

    /// Removes `key` and parses it as a gflags-style boolean
    /// (`1/0/true/false/yes/no`).
    pub fn take_bool(&mut self, key: &str) -> Result<Option<bool>> {
        match self.rest.remove(key) {
            None => Ok(None),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "y" | "t" => Ok(Some(true)),
                "0" | "false" | "no" | "n" | "f" => Ok(Some(false)),
                _ => Err(Error::InvalidArgument(format!(
                    "{} option '{key}': cannot parse value '{v}' as a boolean",
                    self.engine
                ))),
            },
        }
    }

    /// Fails with `InvalidArgument` if any option was not consumed.
    pub fn finish(self) -> Result<()> {
        if self.rest.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = self.rest.keys().map(String::as_str).collect();
        Err(Error::InvalidArgument(format!(
            "unknown {} option(s): {}",
            self.engine,
            names.join(", ")
        )))
    }
}
