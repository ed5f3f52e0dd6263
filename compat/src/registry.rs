//! Choosing an engine by name at run time.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::options::EngineOptions;

/// The engines this crate knows, whether or not they are compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// vmemkv, always available.
    Vmemkv,
    /// RocksDB (cargo feature `rocksdb`).
    RocksDb,
    /// RocksDB with integrated blob files (cargo feature `rocksdb`).
    BlobDb,
    /// LMDB through heed (cargo feature `lmdb`).
    Lmdb,
    /// fjall 3, an LSM-tree in Rust (cargo feature `fjall`).
    Fjall,
    /// fjall 3 with key-value separation (cargo feature `fjall`).
    FjallBlob,
    /// Sparkey, a write-once hash store: point operations only (cargo
    /// feature `sparkey`).
    Sparkey,
    /// Stores nothing: writes are dropped, reads find nothing. Always
    /// available; it measures the caller (db_bench's own ceiling), not an
    /// engine, and is not run by the conformance suite.
    Null,
}

impl EngineKind {
    /// Every engine, compiled in or not.
    pub const ALL: [EngineKind; 8] = [
        EngineKind::Vmemkv,
        EngineKind::RocksDb,
        EngineKind::BlobDb,
        EngineKind::Lmdb,
        EngineKind::Fjall,
        EngineKind::FjallBlob,
        EngineKind::Sparkey,
        EngineKind::Null,
    ];

    /// The name `FromStr` accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vmemkv => "vmemkv",
            EngineKind::RocksDb => "rocksdb",
            EngineKind::BlobDb => "blobdb",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Fjall => "fjall",
            EngineKind::FjallBlob => "fjall-blob",
            EngineKind::Sparkey => "sparkey",
            EngineKind::Null => "null",
        }
    }

    /// The cargo feature that builds the engine in (`""` for vmemkv and
    /// null, always in).
    pub fn feature(self) -> &'static str {
        match self {
            EngineKind::Vmemkv | EngineKind::Null => "",
            EngineKind::RocksDb | EngineKind::BlobDb => "rocksdb",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Fjall | EngineKind::FjallBlob => "fjall",
            EngineKind::Sparkey => "sparkey",
        }
    }

    /// Whether this build includes the engine.
    pub fn is_compiled_in(self) -> bool {
        match self {
            EngineKind::Vmemkv => cfg!(feature = "vmemkv"),
            EngineKind::Null => true,
            EngineKind::RocksDb | EngineKind::BlobDb => cfg!(feature = "rocksdb"),
            EngineKind::Lmdb => cfg!(feature = "lmdb"),
            EngineKind::Fjall | EngineKind::FjallBlob => cfg!(feature = "fjall"),
            EngineKind::Sparkey => cfg!(feature = "sparkey"),
        }
    }

    /// The engines compiled into this build.
    pub fn compiled_in() -> Vec<EngineKind> {
        Self::ALL
            .into_iter()
            .filter(|k| k.is_compiled_in())
            .collect()
    }

    /// Every engine's name, comma-separated, in [`EngineKind::ALL`]'s order
    /// (for messages: generated, so a new engine cannot be left out).
    pub fn names() -> String {
        Self::ALL
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether `name` is a file this engine creates in its directory
    /// (known whether or not the engine is compiled in).
    pub fn owns_file(self, name: &str) -> bool {
        crate::destroy::owns_file(self, name)
    }

    /// The cargo feature that compiles the engine in, if any.
    pub fn cargo_feature(self) -> Option<&'static str> {
        match self {
            EngineKind::Vmemkv => Some("vmemkv"),
            EngineKind::Null => None,
            EngineKind::RocksDb | EngineKind::BlobDb => Some("rocksdb"),
            EngineKind::Lmdb => Some("lmdb"),
            EngineKind::Fjall | EngineKind::FjallBlob => Some("fjall"),
            EngineKind::Sparkey => Some("sparkey"),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EngineKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vmemkv" => Ok(EngineKind::Vmemkv),
            "rocksdb" => Ok(EngineKind::RocksDb),
            "blobdb" | "rocksdb-blobdb" | "rocksdb_blobdb" => Ok(EngineKind::BlobDb),
            "lmdb" => Ok(EngineKind::Lmdb),
            "fjall" => Ok(EngineKind::Fjall),
            "fjall-blob" | "fjall_blob" | "fjallblob" => Ok(EngineKind::FjallBlob),
            "sparkey" => Ok(EngineKind::Sparkey),
            "null" => Ok(EngineKind::Null),
            other => Err(Error::InvalidArgument(format!(
                "unknown engine '{other}'; expected one of {}",
                EngineKind::names()
            ))),
        }
    }
}

fn not_compiled(kind: EngineKind) -> Error {
    let feature = kind.cargo_feature().unwrap_or("?");
    let or = if kind == EngineKind::Vmemkv {
        "a default feature"
    } else {
        "or `--features rivals`"
    };
    Error::NotSupported(format!(
        "engine '{kind}' is not compiled into this build; rebuild with `--features {feature}` ({or})"
    ))
}

/// Opens the engine `kind` at `path`.
///
/// ```
/// use vmemkv_compat::{open, EngineKind, EngineOptions, ReadOptions, WriteOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let db = open(EngineKind::Vmemkv, dir.path(), &EngineOptions::default()).unwrap();
/// db.put(&WriteOptions::default(), b"k", b"v").unwrap();
/// assert_eq!(db.get(&ReadOptions::default(), b"k").unwrap(), Some(b"v".to_vec()));
/// ```
pub fn open(kind: EngineKind, path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    match kind {
        #[cfg(feature = "vmemkv")]
        EngineKind::Vmemkv => crate::engines::vmemkv::open(path, opts),
        EngineKind::Null => crate::engines::null::open(path, opts),
        #[cfg(feature = "rocksdb")]
        EngineKind::RocksDb => crate::engines::rocksdb::open(path, opts, false),
        #[cfg(feature = "rocksdb")]
        EngineKind::BlobDb => crate::engines::rocksdb::open(path, opts, true),
        #[cfg(feature = "lmdb")]
        EngineKind::Lmdb => crate::engines::lmdb::open(path, opts),
        #[cfg(feature = "fjall")]
        EngineKind::Fjall => crate::engines::fjall::open(path, opts, false),
        #[cfg(feature = "fjall")]
        EngineKind::FjallBlob => crate::engines::fjall::open(path, opts, true),
        #[cfg(feature = "sparkey")]
        EngineKind::Sparkey => crate::engines::sparkey::open(path, opts),
        #[allow(unreachable_patterns)]
        other => Err(not_compiled(other)),
    }
}
