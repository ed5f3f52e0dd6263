//! The Sparkey adapter (cargo feature `sparkey`, crate `sparkey` 0.1, which
//! builds Sparkey's C sources and links the system's snappy).
//!
//! Sparkey is a write-once store: an append-only log (`<dir>/data.spl`)
//! and a hash index over it (`<dir>/data.spi`) that is *built* from the log
//! in one pass. Reads go through the index only.
//!
//! * Writes append to the log: a put is a log put, a delete a log delete,
//!   a `WriteBatch` a run of them. Each write call ends with a log flush
//!   (the entries and the log header's end mark go to the OS), so an
//!   acknowledged write survives a process crash; `sync=true` also fsyncs
//!   the log. A write cut short by a crash never reaches the header's end
//!   mark, and Sparkey drops it on reopen: batches are all or nothing.
//! * **The index is rebuilt lazily**: on [`Db::flush`], on open (if the log
//!   moved past the index) and before the first read after any write. The
//!   rebuild is Sparkey's own `hash_write`, which copies the previous index
//!   and reads the log tail written since — its cost grows with the whole
//!   index, not just the new writes, so a workload that alternates single
//!   writes and reads rebuilds the index on every read. Bulk-load, then
//!   read: that is the use Sparkey is built for. `sparkey.rebuilds` (a
//!   property) counts the rebuilds.
//! * Snapshots: a snapshot holds the index reader it was taken with
//!   (Sparkey writes a new index file and unlinks the old one, so a held
//!   reader keeps its view). Readers see a batch whole or not at all: they
//!   only ever see a complete index, built after whole write calls.
//! * `delete_range` lists the live keys from the index (an unordered walk
//!   of the whole log) and appends a delete for each in range.
//! * Not supported, with `NotSupported` naming Sparkey's limit: ordered
//!   iteration ([`Db::iter`]) and therefore MultiScan, since a hash index has
//!   no key order. [`Db::capabilities`] says so up front.
//! * Keys and values: no limit a test could reach (64-bit lengths).
//! * A second open of the same directory fails with `Busy` (vmemkv's
//!   `<dir>/LOCK`).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use sparkey::error::{Error as SpError, ErrorKind as SpKind};
use sparkey::{hash, log};

use super::collapse::collapse;
use crate::lock::DirLock;
use crate::{
    Capabilities, Capability, Db, DbIterator, EngineOptions, Error, IoFailure, Limits, OptionMap,
    ReadOptions, Result, Snapshot, WriteBatch, WriteOptions,
};

/// The log file in the database directory.
pub const LOG_FILE: &str = "data.spl";
/// The hash index file in the database directory.
pub const INDEX_FILE: &str = "data.spi";

/// Every engine option the Sparkey adapter accepts.
pub const SPARKEY_OPTION_KEYS: &[&str] = &["compression", "compression_block_size"];

/// Why Sparkey has only the default column family.
pub const NO_FAMILIES: &str =
    "sparkey: one hash log and index per database, so only the default column family";
/// Why Sparkey cannot iterate.
pub const NO_ITERATION: &str = "sparkey: no ordered iteration (hash index)";
/// Why MultiScan is unsupported.
pub const NO_MULTISCAN: &str =
    "sparkey: no multi_scan (a hash index has no key order to scan ranges in)";

const LIMITS: Limits = Limits {
    max_key_size: None,
    max_value_size: None,
};

/// Maps a Sparkey error onto the trait's categories.
pub(crate) fn map_err(what: &str, path: &Path, e: SpError) -> Error {
    let msg = format!("sparkey {what} ({}): {e}", path.display());
    match e.kind() {
        SpKind::IO(io) => Error::IoError(IoFailure::new(io.kind(), msg)),
        SpKind::OutOfDisk => Error::IoError(IoFailure::new(ErrorKind::StorageFull, msg)),
        SpKind::FileNotFound => Error::IoError(IoFailure::new(ErrorKind::NotFound, msg)),
        SpKind::PermissionDenied => {
            Error::IoError(IoFailure::new(ErrorKind::PermissionDenied, msg))
        }
        SpKind::FileBusy => Error::Busy(msg),
        SpKind::WrongLogMagicNumber
        | SpKind::WrongLogMajorVersion
        | SpKind::UnsupportedLogMinorVersion
        | SpKind::LogTooSmall
        | SpKind::LogHeaderCorrupt
        | SpKind::WrongHashMagicNumber
        | SpKind::WrongHashMajorVersion
        | SpKind::UnsupportedHashMinorVersion
        | SpKind::HashTooSmall
        | SpKind::FileIdentifierMismatch
        | SpKind::HashHeaderCorrupt
        | SpKind::HashSizeInvalid
        | SpKind::UnexpectedEof => Error::Corruption(msg),
        SpKind::InvalidCompressionBlockSize | SpKind::InvalidCompressionType => {
            Error::InvalidArgument(msg)
        }
        _ => Error::IoError(msg.into()),
    }
}

/// Opens (creating if allowed) the Sparkey store in directory `path`.
pub fn open(path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    let mut om = OptionMap::new("sparkey", opts);
    let compression = om
        .take_str("compression")
        .unwrap_or_else(|| "none".to_owned());
    let block = om.take::<u32>("compression_block_size")?.unwrap_or(4096);
    om.finish()?;
    let compression = match compression.trim().to_ascii_lowercase().as_str() {
        "none" | "no" => log::CompressionType::None,
        "snappy" => log::CompressionType::Snappy,
        other => {
            return Err(Error::InvalidArgument(format!(
                "sparkey option 'compression': '{other}' is neither 'none' nor 'snappy'"
            )))
        }
    };
    let log_path = path.join(LOG_FILE);
    let index_path = path.join(INDEX_FILE);
    let exists = log_path.exists();
    let lock = super::open_dir::prepare("sparkey", path, exists, opts)?;

    let writer = if exists {
        log::Writer::append(&log_path)
    } else {
        let block = match compression {
            log::CompressionType::None => 0,
            log::CompressionType::Snappy => block,
        };
        log::Writer::create(&log_path, compression, block)
    }
    .map_err(|e| map_err("open log", &log_path, e))?;
    let sync_fd = std::fs::File::open(&log_path)
        .map_err(|e| Error::io(format!("sparkey: open {}", log_path.display()), e))?;

    let db = Sparkey {
        dir: path.to_path_buf(),
        log_path,
        index_path,
        writer: Mutex::new(Writer {
            log: Some(writer),
            sync_fd,
        }),
        reader: RwLock::new(None),
        dirty: std::sync::atomic::AtomicBool::new(true),
        rebuilds: AtomicU64::new(0),
        id: {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
            NEXT.fetch_add(1, Ordering::Relaxed)
        },
        _lock: lock,
    };
    db.build()?;
    Ok(Box::new(db))
}

struct Writer {
    /// `None` only while closing.
    log: Option<log::Writer>,
    /// A descriptor of the log file, for fsync.
    sync_fd: std::fs::File,
}

struct Sparkey {
    dir: PathBuf,
    log_path: PathBuf,
    index_path: PathBuf,
    writer: Mutex<Writer>,
    /// The index as of the last build.
    reader: RwLock<Option<Arc<hash::Reader>>>,
    /// Whether the log holds writes the index does not cover.
    dirty: std::sync::atomic::AtomicBool,
    rebuilds: AtomicU64,
    id: usize,
    _lock: DirLock,
}

impl Sparkey {
    /// Rebuilds the index if writes arrived since the last build. Holds the
    /// writer lock, so the log does not move during the build.
    fn build(&self) -> Result<()> {
        if !self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if !self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(log) = w.log.as_mut() {
            log.flush()
                .map_err(|e| map_err("flush log", &self.log_path, e))?;
        }
        let build_and_open = || {
            hash::Writer::write(&self.index_path, &self.log_path, None)
                .and_then(|()| hash::Reader::open(&self.index_path, &self.log_path))
        };
        let r = match build_and_open() {
            Ok(r) => r,
            Err(e) => {
                // An index cut short by a kill during a build (Sparkey
                // removes the old file, then writes the new one in place)
                // can neither seed an incremental build nor be opened; its
                // header may even claim to be current. Drop it and build
                // from the whole log, which the index only summarises.
                let first = map_err("build index", &self.index_path, e);
                let _ = std::fs::remove_file(&self.index_path);
                build_and_open().map_err(|e| match map_err("build index", &self.index_path, e) {
                    // Keep the second failure's category (a full disk stays
                    // StorageFull) and say that the first one came before it.
                    Error::IoError(f) => Error::IoError(IoFailure::new(
                        f.kind(),
                        format!("{first}; rebuilding from scratch failed too: {f}"),
                    )),
                    second => second,
                })?
            }
        };
        *self.reader.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(r));
        self.rebuilds.fetch_add(1, Ordering::Relaxed);
        self.dirty.store(false, Ordering::Release);
        drop(w);
        Ok(())
    }

    /// The current index, built first if writes are pending.
    fn current(&self) -> Result<Arc<hash::Reader>> {
        self.build()?;
        self.reader
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::ShutdownInProgress("sparkey: the index is closed".into()))
    }

    fn reader_for(&self, opts: &ReadOptions) -> Result<Arc<hash::Reader>> {
        match &opts.snapshot {
            Some(s) => Ok(s.downcast::<Arc<hash::Reader>>("sparkey", self.id)?.clone()),
            None => self.current(),
        }
    }

    /// Appends with `f`, then flushes (and fsyncs for `sync`), marking the
    /// index stale.
    fn append<F>(&self, opts: &WriteOptions, what: &str, f: F) -> Result<()>
    where
        F: FnOnce(&mut log::Writer) -> std::result::Result<(), SpError>,
    {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Writer { log, sync_fd } = &mut *w;
        let log = log
            .as_mut()
            .ok_or_else(|| Error::ShutdownInProgress("sparkey: the log is closed".into()))?;
        self.dirty.store(true, Ordering::Release);
        f(log).map_err(|e| map_err(what, &self.log_path, e))?;
        log.flush()
            .map_err(|e| map_err(&format!("{what}: flush log"), &self.log_path, e))?;
        if opts.sync {
            sync_fd.sync_data().map_err(|e| {
                Error::io(
                    format!("sparkey {what}: fsync {}", self.log_path.display()),
                    e,
                )
            })?;
        }
        Ok(())
    }

    fn live_keys_in(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<Vec<u8>>> {
        let r = self
            .reader
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(r) = r else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for k in r
            .keys()
            .map_err(|e| map_err("list keys", &self.index_path, e))?
        {
            let k = k.map_err(|e| map_err("list keys", &self.index_path, e))?;
            if k.as_slice() >= lo && k.as_slice() < hi {
                out.push(k);
            }
        }
        Ok(out)
    }
}

impl Drop for Sparkey {
    fn drop(&mut self) {
        // Build on close, so the next open finds the index current.
        let _ = self.build();
        *self.reader.write().unwrap_or_else(|p| p.into_inner()) = None;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        // sparkey's writer panics if closing fails; the log was flushed by
        // the build above, so a failure here would be a bug, not lost data.
        if let Some(log) = w.log.take() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(log)));
        }
    }
}

impl Db for Sparkey {
    fn name(&self) -> &'static str {
        "sparkey"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
            .without(Capability::OrderedIteration, NO_ITERATION)
            .without(Capability::MultiScan, NO_MULTISCAN)
            .without(Capability::ColumnFamilies, NO_FAMILIES)
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let r = self.reader_for(opts)?;
        match r.get(key).map_err(|e| map_err("get", &self.dir, e))? {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get(&self, opts: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        // One index for every key: the whole call reads one view.
        match self.reader_for(opts) {
            Ok(r) => keys
                .iter()
                .map(|k| r.get(k).map_err(|e| map_err("multi_get", &self.dir, e)))
                .collect(),
            Err(e) => keys.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot::new("sparkey", self.id, self.current()?))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.append(opts, "put", |l| l.put(key, value))
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.append(opts, "delete", |l| l.delete(key))
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        crate::family::default_only_batch(self.name(), batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        let ops = if super::collapse::has_delete_range(batch) {
            // The range's live keys come from a freshly built index. A
            // write landing between that build and this batch's append
            // would not be listed, so the append re-checks, under the
            // writer lock, that the index is still current, and lists
            // again if not.
            loop {
                self.build()?;
                let ops = collapse(batch, |lo, hi| self.live_keys_in(lo, hi))?;
                // Re-check under the lock that no write arrived since the
                // build; if one did, list again.
                let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
                if self.dirty.load(Ordering::Acquire) {
                    drop(w);
                    continue;
                }
                let Writer { log, sync_fd } = &mut *w;
                let log = log.as_mut().ok_or_else(|| {
                    Error::ShutdownInProgress("sparkey: the log is closed".into())
                })?;
                self.dirty.store(true, Ordering::Release);
                for (k, v) in &ops {
                    match v {
                        Some(v) => log.put(k, v),
                        None => log.delete(k),
                    }
                    .map_err(|e| map_err("write", &self.log_path, e))?;
                }
                log.flush()
                    .map_err(|e| map_err("write: flush log", &self.log_path, e))?;
                if opts.sync {
                    sync_fd.sync_data().map_err(|e| {
                        Error::io(
                            format!("sparkey write: fsync {}", self.log_path.display()),
                            e,
                        )
                    })?;
                }
                return Ok(());
            }
        } else {
            collapse(batch, |_, _| Ok(Vec::new()))?
        };
        self.append(opts, "write", |l| {
            for (k, v) in &ops {
                match v {
                    Some(v) => l.put(k, v)?,
                    None => l.delete(k)?,
                }
            }
            Ok(())
        })
    }

    fn iter<'a>(&'a self, _opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        Err(Error::NotSupported(NO_ITERATION.to_owned()))
    }

    fn multi_scan<'a>(
        &'a self,
        _opts: &ReadOptions,
        _args: &crate::MultiScanArgs,
    ) -> Result<Box<dyn crate::MultiScan + 'a>> {
        Err(Error::NotSupported(NO_MULTISCAN.to_owned()))
    }

    fn flush(&self) -> Result<()> {
        self.build()?;
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.sync_fd.sync_data().map_err(|e| {
            Error::io(
                format!("sparkey flush: fsync {}", self.log_path.display()),
                e,
            )
        })
    }

    fn property(&self, name: &str) -> Option<String> {
        match name {
            "sparkey.stats" => self.statistics(),
            "sparkey.version" => Some(env!("VMEMKV_COMPAT_VERSION_SPARKEY").to_owned()),
            "sparkey.rebuilds" => Some(self.rebuilds.load(Ordering::Relaxed).to_string()),
            "sparkey.entries" => self.current().ok().map(|r| r.num_entries().to_string()),
            _ => None,
        }
    }

    fn statistics(&self) -> Option<String> {
        let r = self.current().ok()?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        Some(format!(
            "sparkey: entries={} collisions={} index_rebuilds={} log_bytes={} index_bytes={}\n",
            r.num_entries(),
            r.num_collisions(),
            self.rebuilds.load(Ordering::Relaxed),
            size(&self.log_path),
            size(&self.index_path),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wo() -> WriteOptions {
        WriteOptions::default()
    }

    #[test]
    fn builds_lazily_and_refuses_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), &EngineOptions::default()).expect("open");
        let before: u64 = db
            .property("sparkey.rebuilds")
            .and_then(|s| s.parse().ok())
            .expect("rebuilds");
        for i in 0..100u32 {
            db.put(&wo(), format!("k{i}").as_bytes(), &i.to_le_bytes())
                .expect("put");
        }
        // Puts alone build nothing.
        assert_eq!(
            db.property("sparkey.rebuilds").as_deref(),
            Some(before.to_string().as_str())
        );
        assert_eq!(
            db.get(&ReadOptions::default(), b"k7").expect("get"),
            Some(7u32.to_le_bytes().to_vec())
        );
        let snap = db.snapshot().expect("snapshot");
        db.delete(&wo(), b"k7").expect("delete");
        let mut b = WriteBatch::new();
        b.delete_range(b"k1", b"k2");
        b.put(b"k15", b"back");
        db.write(&wo(), &b).expect("batch");
        let ro = ReadOptions::default();
        assert_eq!(db.get(&ro, b"k7").expect("get"), None);
        assert_eq!(db.get(&ro, b"k1").expect("get"), None);
        assert_eq!(db.get(&ro, b"k19").expect("get"), None);
        assert_eq!(db.get(&ro, b"k15").expect("get"), Some(b"back".to_vec()));
        assert_eq!(
            db.get(&ro, b"k2").expect("get"),
            Some(2u32.to_le_bytes().to_vec())
        );
        let at = ReadOptions::default().with_snapshot(&snap);
        assert_eq!(
            db.get(&at, b"k7").expect("get"),
            Some(7u32.to_le_bytes().to_vec())
        );
        assert_eq!(
            db.get(&at, b"k15").expect("get"),
            Some(15u32.to_le_bytes().to_vec())
        );
        match db.iter(&ro) {
            Err(Error::NotSupported(m)) => assert!(m.contains("hash index"), "{m}"),
            Err(e) => panic!("iter: expected NotSupported, got {e}"),
            Ok(_) => panic!("iter: expected NotSupported, got an iterator"),
        }
        assert!(!db.capabilities().supports(Capability::OrderedIteration));
        assert!(db.capabilities().supports(Capability::Snapshots));
        drop(snap);
        drop(db);
        let db = open(dir.path(), &EngineOptions::default()).expect("reopen");
        assert_eq!(db.get(&ro, b"k15").expect("get"), Some(b"back".to_vec()));
        assert_eq!(db.get(&ro, b"k7").expect("get"), None);
        assert_eq!(
            db.get(&ro, b"k99").expect("get"),
            Some(99u32.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn a_lost_index_is_rebuilt_from_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = EngineOptions::default().set("compression", "snappy");
        {
            let db = open(dir.path(), &o).expect("open");
            db.put(&WriteOptions::sync(), b"a", b"1").expect("put");
        }
        std::fs::write(dir.path().join(INDEX_FILE), b"torn").expect("tear");
        drop(open(dir.path(), &o).expect("reopen after a torn index"));
        // A kill mid-build: the header is whole (and claims the index is
        // current) but the table after it is cut short.
        let index = dir.path().join(INDEX_FILE);
        let len = std::fs::metadata(&index).expect("index").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&index)
            .and_then(|f| f.set_len(len - 4))
            .expect("truncate");
        let db = open(dir.path(), &o).expect("reopen");
        assert_eq!(
            db.get(&ReadOptions::default(), b"a").expect("get"),
            Some(b"1".to_vec())
        );
        let bad = EngineOptions::default().set("compression", "zstd");
        let other = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            open(other.path(), &bad),
            Err(Error::InvalidArgument(_))
        ));
    }
}
