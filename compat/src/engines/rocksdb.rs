//! The RocksDB and RocksDB-BlobDB adapters (cargo feature `rocksdb`).
//!
//! * Options: the original benchmark's rival defaults (no compression,
//!   256 MiB write buffers, leveled compaction, background jobs = cores;
//!   BlobDB adds `enable_blob_files`, `min_blob_size=256` and blob GC), then
//!   every db_bench flag listed in [`ROCKSDB_OPTION_KEYS`].
//! * Reads see a consistent snapshot per call; an iterator sees the
//!   snapshot taken when it was created. A `WriteBatch` is atomic for
//!   readers too (RocksDB publishes it under one sequence number).
//!   [`Db::snapshot`] is RocksDB's `GetSnapshot` (the private `snapshot`
//!   module); a multi-range MultiScan takes one for the call, so every
//!   range, native group and unbounded range reads one view. The database
//!   stays open until the last snapshot handle is dropped.
//! * MultiScan is RocksDB's own `DB::NewMultiScan` (see the private `multiscan` module), so
//!   `MultiScanArgs::{use_async_io, io_coalesce_threshold,
//!   max_prefetch_size}` reach RocksDB unchanged. `property("compat.multiscan")`
//!   says so.
//! * Limits: keys up to [`MAX_KEY_SIZE`] (8 MiB, far below RocksDB's own
//!   4 GiB), values up to [`MAX_VALUE_SIZE`] (3 GiB; RocksDB's hard limit is
//!   4 GiB − 1). `limits()` reports the value limit as `None` because no test
//!   can reach it.
//! * Column families are RocksDB's own, one for one: [`Db::create_cf`] and
//!   [`Db::drop_cf`] are `CreateColumnFamily` and `DropColumnFamily`, which
//!   record the change in the MANIFEST before they return. Open lists the
//!   directory's families (`ListColumnFamilies`) and opens every one, each
//!   with the options built for the database (BlobDB's blob settings apply
//!   to every family). A `WriteBatch` becomes one RocksDB batch with a
//!   family per update, so it is atomic across families; a snapshot is
//!   RocksDB's, which covers every family; the MultiScan shim scans any
//!   family natively. The default family is reached without the family
//!   table; the others cost a table lookup and an `Arc` clone per call.
//!   `flush` and `compact_range` cover every family. A family's dropped
//!   files are deleted once no iterator reads them. With
//!   `WriteOptions::disable_wal`, families are flushed one by one (RocksDB's
//!   `atomic_flush` is off), so a crash may keep part of a cross-family
//!   batch written without the WAL; with the WAL, recovery replays it whole.

mod families;
mod multiscan;
mod options;
mod snapshot;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rocksdb::{
    DBRawIteratorWithThreadMode, ErrorKind, WaitForCompactOptions, WriteBatch as RWriteBatch, DB,
};

use self::families::{unbind, CfRef};

pub use self::multiscan::io_uring_enabled;
pub use self::options::ROCKSDB_OPTION_KEYS;
use crate::family::{check_family_name, unknown_family};
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::{
    check_sizes, BatchOp, Cf, Db, DbIterator, EngineOptions, Error, Families, Limits, ReadOptions,
    Result, Snapshot, WriteBatch, WriteOptions,
};
use snapshot::RocksSnapshot;

/// Largest key the adapter accepts.
pub const MAX_KEY_SIZE: usize = 8 << 20;
/// Largest value the adapter accepts.
pub const MAX_VALUE_SIZE: usize = 3 << 30;

/// The value of `property("compat.multiscan")`.
pub const MULTISCAN_KIND: &str =
    "native: RocksDB DB::NewMultiScan via compat/cpp/multiscan_shim.cc";

const KEY_LIMITS: Limits = Limits {
    max_key_size: Some(MAX_KEY_SIZE),
    max_value_size: Some(MAX_VALUE_SIZE),
};

/// Opens RocksDB at `path`; `blob` selects RocksDB with integrated blob
/// files (the `blobdb` engine).
pub fn open(path: &Path, opts: &EngineOptions, blob: bool) -> Result<Box<dyn Db>> {
    let parsed = options::parse(opts, blob)?;
    let name = if blob { "blobdb" } else { "rocksdb" };
    let (db, names) = families::open_all(&parsed.opts, path)
        .map_err(|e| map_err(&format!("open {}", path.display()), e))?;
    let handle = |n: &str| {
        db.cf_handle(n).map(unbind).ok_or_else(|| {
            Error::Corruption(format!(
                "{name} {}: column family {n:?} was opened but has no handle",
                path.display()
            ))
        })
    };
    let families = Families::new(name, handle(Cf::DEFAULT_NAME)?);
    for n in names.iter().filter(|n| *n != Cf::DEFAULT_NAME) {
        families.add(n, handle(n)?)?;
    }
    Ok(Box::new(RocksDb {
        families,
        ddl: Mutex::new(()),
        db: Arc::new(db),
        opts: parsed.opts,
        statistics: parsed.statistics,
        blob,
        default_ro: rocksdb::ReadOptions::default(),
        write_opts: [
            write_options(false, false),
            write_options(false, true),
            write_options(true, false),
            write_options(true, true),
        ],
    }))
}

fn write_options(sync: bool, disable_wal: bool) -> rocksdb::WriteOptions {
    let mut w = rocksdb::WriteOptions::default();
    w.set_sync(sync);
    w.disable_wal(disable_wal);
    w
}

/// Maps a RocksDB error onto the trait's categories; `what` names the
/// action (and path) that failed.
fn map_err(what: &str, e: rocksdb::Error) -> Error {
    let msg = format!("rocksdb {what}: {e}");
    match e.kind() {
        ErrorKind::InvalidArgument => Error::InvalidArgument(msg),
        ErrorKind::NotSupported => Error::NotSupported(msg),
        ErrorKind::Corruption => Error::Corruption(msg),
        ErrorKind::Busy | ErrorKind::TryAgain => Error::Busy(msg),
        ErrorKind::Incomplete => Error::Incomplete(msg),
        ErrorKind::ShutdownInProgress => Error::ShutdownInProgress(msg),
        // Another handle holds the directory's LOCK file (another process:
        // "While lock file"; this process: "lock hold by current process").
        ErrorKind::IOError
            if e.as_ref().contains("While lock file")
                || e.as_ref().contains("lock hold by current process") =>
        {
            Error::Busy(msg)
        }
        // RocksDB's Status carries no errno; its message does (strerror).
        _ => {
            let kind = [
                ("No space left on device", std::io::ErrorKind::StorageFull),
                (
                    "Read-only file system",
                    std::io::ErrorKind::ReadOnlyFilesystem,
                ),
                ("Permission denied", std::io::ErrorKind::PermissionDenied),
                ("No such file or directory", std::io::ErrorKind::NotFound),
            ]
            .into_iter()
            .find_map(|(text, kind)| msg.contains(text).then_some(kind))
            .unwrap_or(std::io::ErrorKind::Other);
            Error::IoError(crate::IoFailure::new(kind, msg))
        }
    }
}

/// An open RocksDB or RocksDB-BlobDB database.
struct RocksDb {
    /// Every open family's RocksDB handle. Declared before `db`, so that
    /// the handles are released before the database closes.
    families: Families<CfRef>,
    /// Serializes `create_cf` and `drop_cf`, so that RocksDB's families and
    /// the table change together.
    ddl: Mutex<()>,
    /// Shared with every held snapshot, which must be released before the
    /// database closes.
    db: Arc<DB>,
    /// Kept for `statistics()`: the statistics object lives in the options.
    opts: rocksdb::Options,
    statistics: bool,
    blob: bool,
    /// Reused by `get_into` for default read options, so a point read
    /// allocates nothing on the Rust side.
    default_ro: rocksdb::ReadOptions,
    /// Indexed by `sync as usize * 2 + disable_wal as usize`.
    write_opts: [rocksdb::WriteOptions; 4],
}

fn is_default_read(ro: &ReadOptions) -> bool {
    ro.fill_cache
        && ro.verify_checksums
        && !ro.async_io
        && ro.readahead_size == 0
        && ro.snapshot.is_none()
}

/// Builds RocksDB read options; bounds only when `with_bounds`.
fn read_options(ro: &ReadOptions, with_bounds: bool) -> rocksdb::ReadOptions {
    let mut r = rocksdb::ReadOptions::default();
    r.fill_cache(ro.fill_cache);
    r.set_verify_checksums(ro.verify_checksums);
    r.set_async_io(ro.async_io);
    if ro.readahead_size > 0 {
        r.set_readahead_size(ro.readahead_size);
    }
    if with_bounds {
        if let Some(l) = &ro.iterate_lower_bound {
            r.set_iterate_lower_bound(l.clone());
        }
        if let Some(u) = &ro.iterate_upper_bound {
            r.set_iterate_upper_bound(u.clone());
        }
    }
    r
}

impl RocksDb {
    /// The RocksDB snapshot `ro` names, checked to be this database's.
    fn snapshot_of<'s>(&self, ro: &'s ReadOptions) -> Result<Option<&'s Arc<RocksSnapshot>>> {
        ro.snapshot
            .as_ref()
            .map(|s| s.downcast::<Arc<RocksSnapshot>>(self.name(), self.owner()))
            .transpose()
    }

    fn owner(&self) -> usize {
        Arc::as_ptr(&self.db) as usize
    }

    /// Read options for a point read or iterator, as of `ro`'s snapshot.
    fn custom_read(&self, ro: &ReadOptions, with_bounds: bool) -> Result<rocksdb::ReadOptions> {
        let mut r = read_options(ro, with_bounds);
        if let Some(s) = self.snapshot_of(ro)? {
            s.apply(&mut r);
        }
        Ok(r)
    }

    fn wopts(&self, w: &WriteOptions) -> &rocksdb::WriteOptions {
        &self.write_opts[usize::from(w.sync) * 2 + usize::from(w.disable_wal)]
    }

    /// RocksDB's handle of `cf`; `None` for the default family, which the
    /// crate's plain calls address without a handle, so it never consults
    /// the table.
    #[inline]
    fn family(&self, cf: Cf) -> Result<Option<CfRef>> {
        if cf.is_default() {
            Ok(None)
        } else {
            self.families.get(cf).map(Some)
        }
    }

    /// [`map_err`] for an action on family `cf`, naming the family unless
    /// it is the default one (whose messages read as before families).
    fn cf_err(&self, what: &str, cf: Cf, e: rocksdb::Error) -> Error {
        if cf.is_default() {
            return map_err(what, e);
        }
        match self.families.name_of(cf) {
            Some(name) => map_err(&format!("{what} in column family {name:?}"), e),
            None => map_err(&format!("{what} in column family {}", cf.id()), e),
        }
    }

    /// Read options for a point read: the shared default ones when `opts`
    /// asks for nothing else, so a default read allocates nothing.
    fn point_read<'r>(
        &'r self,
        opts: &ReadOptions,
        custom: &'r mut Option<rocksdb::ReadOptions>,
    ) -> Result<&'r rocksdb::ReadOptions> {
        if is_default_read(opts) {
            return Ok(&self.default_ro);
        }
        Ok(custom.insert(self.custom_read(opts, false)?))
    }
}

impl Db for RocksDb {
    fn name(&self) -> &'static str {
        if self.blob {
            "blobdb"
        } else {
            "rocksdb"
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_key_size: Some(MAX_KEY_SIZE),
            max_value_size: None,
        }
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.get_cf_into(opts, Cf::DEFAULT, key, out)
    }

    #[inline]
    fn get_cf_into(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        out.clear();
        let family = self.family(cf)?;
        let mut custom = None;
        let ro = self.point_read(opts, &mut custom)?;
        let got = match &family {
            None => self.db.get_pinned_opt(key, ro),
            Some(h) => self.db.get_pinned_cf_opt(h, key, ro),
        };
        match got {
            Ok(Some(v)) => {
                out.extend_from_slice(&v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(self.cf_err("get", cf, e)),
        }
    }

    /// RocksDB's batched `MultiGet` (the crate's `multi_get_opt` and
    /// `multi_get_cf_opt` call the array overload, which batches block
    /// reads). One call reads one view, so no snapshot is taken for it.
    fn multi_get_cf(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let mut custom = None;
        let prepared = self
            .family(cf)
            .and_then(|f| Ok((f, self.point_read(opts, &mut custom)?)));
        let (family, ro) = match prepared {
            Ok(p) => p,
            Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
        };
        let got = match &family {
            None => self.db.multi_get_opt(keys, ro),
            Some(h) => self.db.multi_get_cf_opt(keys.iter().map(|k| (h, *k)), ro),
        };
        got.into_iter()
            .map(|r| r.map_err(|e| self.cf_err("multi_get", cf, e)))
            .collect()
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    #[inline]
    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        check_sizes(&KEY_LIMITS, key, Some(value))?;
        let w = self.wopts(opts);
        match self.family(cf)? {
            None => self.db.put_opt(key, value, w),
            Some(h) => self.db.put_cf_opt(&h, key, value, w),
        }
        .map_err(|e| self.cf_err("put", cf, e))
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    #[inline]
    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        check_sizes(&KEY_LIMITS, key, None)?;
        let w = self.wopts(opts);
        match self.family(cf)? {
            None => self.db.delete_opt(key, w),
            Some(h) => self.db.delete_cf_opt(&h, key, w),
        }
        .map_err(|e| self.cf_err("delete", cf, e))
    }

    /// One RocksDB batch with a family per update: atomic across families
    /// because RocksDB publishes it under one sequence number and logs it
    /// as one WAL record.
    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        let mut b = RWriteBatch::default();
        // Updates to one family tend to come in runs; the last family's
        // handle is kept so that a run costs one table lookup.
        let mut last: Option<(Cf, CfRef)> = None;
        for op in batch {
            let cf = op.cf();
            let family = if cf.is_default() {
                None
            } else {
                if last.as_ref().map(|(c, _)| *c) != Some(cf) {
                    last = Some((cf, self.families.get(cf)?));
                }
                match &last {
                    Some((_, h)) => Some(h),
                    None => return Err(unknown_family(self.name(), cf)),
                }
            };
            match op {
                BatchOp::Put { key, value, .. } => {
                    check_sizes(&KEY_LIMITS, key, Some(value))?;
                    match family {
                        None => b.put(key, value),
                        Some(h) => b.put_cf(h, key, value),
                    }
                }
                BatchOp::Delete { key, .. } => {
                    check_sizes(&KEY_LIMITS, key, None)?;
                    match family {
                        None => b.delete(key),
                        Some(h) => b.delete_cf(h, key),
                    }
                }
                BatchOp::DeleteRange { begin, end, .. } => {
                    check_sizes(&KEY_LIMITS, begin, None)?;
                    check_sizes(&KEY_LIMITS, end, None)?;
                    match family {
                        None => b.delete_range(begin, end),
                        Some(h) => b.delete_range_cf(h, begin, end),
                    }
                }
            }
        }
        self.db
            .write_opt(b, self.wopts(opts))
            .map_err(|e| map_err("write", e))
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let s = Arc::new(RocksSnapshot::take(&self.db));
        Ok(Snapshot::new(self.name(), self.owner(), s))
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let family = self.family(cf)?;
        let ro = self.custom_read(opts, true)?;
        let it = match &family {
            None => self.db.raw_iterator_opt(ro),
            Some(h) => self.db.raw_iterator_cf_opt(h, ro),
        };
        Ok(Box::new(RocksIter {
            it,
            _snapshot: opts.snapshot.clone(),
            _family: family,
        }))
    }

    fn multi_scan_cf<'a>(
        &'a self,
        opts: &ReadOptions,
        cf: Cf,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        let family = self.family(cf)?;
        // One view for every range: the caller's snapshot, or one taken
        // for the call (a native group or an unbounded range would
        // otherwise each read the database as of its own start).
        let snap = match self.snapshot_of(opts)? {
            Some(s) => Some(Arc::clone(s)),
            None if args.ranges.len() > 1 => Some(Arc::new(RocksSnapshot::take(&self.db))),
            None => None,
        };
        Ok(Box::new(multiscan::NativeMultiScan::new(
            &self.db, family, opts, snap, args,
        )?))
    }

    /// Checks the name, then has RocksDB create the family (with the
    /// database's options) and record it in the MANIFEST.
    fn create_cf(&self, name: &str) -> Result<Cf> {
        check_family_name(name)?;
        let _ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        if self.families.handle(name).is_some() {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists in this {} database",
                self.name()
            )));
        }
        self.db
            .create_cf(name, &self.opts)
            .map_err(|e| map_err(&format!("create column family {name:?}"), e))?;
        let h = self.db.cf_handle(name).ok_or_else(|| {
            Error::Corruption(format!(
                "{}: column family {name:?} was created but has no handle",
                self.name()
            ))
        })?;
        self.families.add(name, unbind(h))
    }

    /// RocksDB's `DropColumnFamily`, recorded in the MANIFEST; the family's
    /// files are deleted once the last handle to it (the table's, or one an
    /// open iterator holds) is released.
    fn drop_cf(&self, name: &str) -> Result<()> {
        let _ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let (cf, h) = self.families.for_drop(name)?;
        self.db
            .drop_cf(name)
            .map_err(|e| map_err(&format!("drop column family {name:?}"), e))?;
        self.families.remove(cf);
        drop(h);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(|e| map_err("flush", e))?;
        for (cf, name, h) in self.families.all() {
            if !cf.is_default() {
                self.db
                    .flush_cf(&h)
                    .map_err(|e| map_err(&format!("flush column family {name:?}"), e))?;
            }
        }
        Ok(())
    }

    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db.compact_range(begin, end);
        for (cf, _, h) in self.families.all() {
            if !cf.is_default() {
                self.db.compact_range_cf(&h, begin, end);
            }
        }
        Ok(())
    }

    fn wait_for_background_work(&self) -> Result<()> {
        self.db
            .wait_for_compact(&WaitForCompactOptions::default())
            .map_err(|e| map_err("wait_for_compact", e))
    }

    fn property(&self, name: &str) -> Option<String> {
        match name {
            "compat.multiscan" => Some(MULTISCAN_KIND.to_owned()),
            "compat.io_uring" => Some(if io_uring_enabled() {
                "enabled (RocksDbIOUringEnable() = true)".to_owned()
            } else {
                "disabled (RocksDbIOUringEnable() = false)".to_owned()
            }),
            // librocksdb-sys's version is `<crate>+<RocksDB>`.
            "rocksdb.version" | "blobdb.version" => env!("VMEMKV_COMPAT_VERSION_LIBROCKSDB_SYS")
                .split_once('+')
                .map(|(_, v)| v.to_owned()),
            _ => self.db.property_value(name).ok().flatten(),
        }
    }

    fn statistics(&self) -> Option<String> {
        if self.statistics {
            self.opts.get_statistics()
        } else {
            None
        }
    }

    fn start_perf_context(&self, level: i32) -> bool {
        use rocksdb::perf::PerfStatsLevel as L;
        let lvl = match level {
            ..=1 => L::Disable,
            2 => L::EnableCount,
            3 => L::EnableTimeExceptForMutex,
            4 => L::EnableTimeAndCPUTimeExceptForMutex,
            _ => L::EnableTime,
        };
        rocksdb::perf::set_perf_stats(lvl);
        rocksdb::PerfContext::default().reset();
        true
    }

    fn perf_context(&self) -> Option<String> {
        Some(rocksdb::PerfContext::default().report(false))
    }
}

/// A raw RocksDB iterator; RocksDB's own semantics, bounds included.
struct RocksIter<'a> {
    it: DBRawIteratorWithThreadMode<'a, DB>,
    /// Keeps the snapshot the iterator reads alive.
    _snapshot: Option<Snapshot>,
    /// Keeps the family's handle alive (`None` for default); dropped
    /// after `it`.
    _family: Option<CfRef>,
}

impl DbIterator for RocksIter<'_> {
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn seek_to_first(&mut self) {
        self.it.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.it.seek_to_last();
    }
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(key);
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.it.seek_for_prev(key);
    }
    fn next(&mut self) {
        self.it.next();
    }
    fn prev(&mut self) {
        self.it.prev();
    }
    fn key(&self) -> &[u8] {
        self.it.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.it.value().unwrap_or_default()
    }
    fn status(&self) -> Result<()> {
        self.it.status().map_err(|e| map_err("iterator", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multiscan::{collect_multi_scan, ScanRange};
    use crate::Entries;

    fn open_tmp(blob: bool) -> (tempfile::TempDir, Box<dyn Db>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = EngineOptions::default().set("write_buffer_size", 1 << 20);
        let db = open(dir.path(), &opts, blob).expect("open");
        (dir, db)
    }

    fn fill(db: &dyn Db, n: u32) {
        let mut b = WriteBatch::new();
        for i in 0..n {
            let k = format!("k{i:05}");
            b.put(
                k.as_bytes(),
                format!("v{i}")
                    .repeat(if i % 7 == 0 { 100 } else { 1 })
                    .as_bytes(),
            );
        }
        db.write(&WriteOptions::default(), &b).expect("write");
    }

    #[test]
    fn put_get_delete_iterate() {
        for blob in [false, true] {
            let (_d, db) = open_tmp(blob);
            let w = WriteOptions::default();
            let r = ReadOptions::default();
            db.put(&w, b"a", b"1").expect("put");
            db.put(&WriteOptions::sync(), b"b", b"2").expect("put");
            db.put(&w, b"c", &[9u8; 1000]).expect("put");
            let mut out = vec![7];
            assert!(db.get_into(&r, b"a", &mut out).expect("get"));
            assert_eq!(out, b"1");
            assert!(!db.get_into(&r, b"zz", &mut out).expect("get"));
            assert!(out.is_empty());
            db.delete(&w, b"a").expect("delete");
            assert_eq!(db.get(&r, b"a").expect("get"), None);
            db.flush().expect("flush");
            // Large value lives in a blob file for blobdb; still readable.
            assert_eq!(db.get(&r, b"c").expect("get"), Some(vec![9u8; 1000]));
            let all: Vec<_> = Entries::from_first(db.iter(&r).expect("iter"))
                .collect::<Result<_>>()
                .expect("iterate");
            assert_eq!(
                all,
                vec![
                    (b"b".to_vec(), b"2".to_vec()),
                    (b"c".to_vec(), vec![9u8; 1000])
                ]
            );
            assert!(db.property("rocksdb.stats").is_some());
            assert_eq!(db.property("no.such.property"), None);
            if blob {
                let files = db.property("rocksdb.num-blob-files").expect("blob prop");
                assert_ne!(files, "0", "blobdb must write blob files");
            }
        }
    }

    #[test]
    fn iterator_bounds_and_directions() {
        let (_d, db) = open_tmp(false);
        fill(db.as_ref(), 20);
        let ro = ReadOptions::default().with_bounds(Some(b"k00005"), Some(b"k00010"));
        let mut it = db.iter(&ro).expect("iter");
        it.seek_to_last();
        assert_eq!(it.key(), b"k00009");
        it.seek(b"a");
        assert_eq!(it.key(), b"k00005");
        it.prev();
        assert!(!it.valid());
        assert_eq!(it.key(), b"");
        it.seek_for_prev(b"k00007x");
        assert_eq!(it.key(), b"k00007");
        it.next();
        it.next();
        it.next();
        assert!(!it.valid());
        it.status().expect("status");
    }

    #[test]
    fn write_batch_delete_range_and_limits() {
        let (_d, db) = open_tmp(false);
        fill(db.as_ref(), 10);
        let mut b = WriteBatch::new();
        b.delete_range(b"k00002", b"k00008");
        b.put(b"k00005", b"x");
        db.write(&WriteOptions::default(), &b).expect("write");
        let keys: Vec<_> = Entries::from_first(db.iter(&ReadOptions::default()).expect("iter"))
            .map(|kv| kv.expect("kv").0)
            .collect();
        let want: Vec<Vec<u8>> = ["k00000", "k00001", "k00005", "k00008", "k00009"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        assert_eq!(keys, want);
        let big = vec![0u8; MAX_KEY_SIZE + 1];
        assert!(matches!(
            db.put(&WriteOptions::default(), &big, b""),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(db.limits().max_key_size, Some(MAX_KEY_SIZE));
    }

    #[test]
    fn native_multiscan_matches_iterator_reference() {
        for blob in [false, true] {
            let (_d, db) = open_tmp(blob);
            fill(db.as_ref(), 200);
            db.flush().expect("flush");
            // More writes in the memtable on top of the SST file.
            db.put(&WriteOptions::default(), b"k00050x", b"mem")
                .expect("put");
            db.delete(&WriteOptions::default(), b"k00052")
                .expect("delete");
            assert!(db
                .property("compat.multiscan")
                .is_some_and(|p| p.starts_with("native")));
            let ranges = vec![
                ScanRange::new(b"k00010", b"k00015"),
                ScanRange::new(b"k00050", b"k00055"),
                ScanRange::new(b"k00100", b"k00100\x00"),
                ScanRange::new(b"k00150", b"k00152"),
                ScanRange::unbounded(b"k00197"),
            ];
            for use_async_io in [false, true] {
                let mut args = MultiScanArgs::new(ranges.clone());
                args.use_async_io = use_async_io;
                for ro in [
                    ReadOptions::default(),
                    ReadOptions::default().with_bounds(Some(b"k00012"), Some(b"k00151")),
                ] {
                    let mut native = db.multi_scan(&ro, &args).expect("multiscan");
                    let got = collect_multi_scan(native.as_mut()).expect("scan");
                    let mut reference =
                        crate::multiscan::IterMultiScan::new(&ro, &args, |r| db.iter(r))
                            .expect("reference");
                    let want = collect_multi_scan(&mut reference).expect("reference scan");
                    assert_eq!(
                        got, want,
                        "async={use_async_io} bounds={:?}",
                        ro.iterate_lower_bound
                    );
                    assert_eq!(got.len(), ranges.len());
                }
            }
            let mut args = MultiScanArgs::new(ranges.clone());
            args.use_async_io = true;
            let got = collect_multi_scan(
                db.multi_scan(&ReadOptions::default(), &args)
                    .expect("multiscan")
                    .as_mut(),
            )
            .expect("scan");
            assert_eq!(got[1].len(), 5, "{:?}", got[1]);
            assert_eq!(got[4].len(), 3);
        }
    }

    /// Ranges RocksDB's Prepare does not accept (overlapping, repeated,
    /// several unbounded) must still give the reference results, on data
    /// in SST files with range tombstones.
    #[test]
    fn overlapping_and_unbounded_ranges_match_reference() {
        let (_d, db) = open_tmp(false);
        fill(db.as_ref(), 400);
        let mut b = WriteBatch::new();
        b.delete_range(b"k00030", b"k00040");
        db.write(&WriteOptions::default(), &b).expect("write");
        db.flush().expect("flush");
        let sets: Vec<Vec<ScanRange>> = vec![
            vec![
                ScanRange::new(b"k00010", b"k00050"),
                ScanRange::new(b"k00020", b"k00025"),
                ScanRange::new(b"k00020", b"k00045"),
                ScanRange::new(b"k00300", b"k00302"),
            ],
            vec![
                ScanRange::unbounded(b"k00390"),
                ScanRange::unbounded(b"k00395"),
            ],
            vec![
                ScanRange::new(b"k00001", b"k00003"),
                ScanRange::unbounded(b"k00398"),
                ScanRange::new(b"k00399", b"k00400"),
            ],
        ];
        for ranges in sets {
            for use_async_io in [false, true] {
                let mut args = MultiScanArgs::new(ranges.clone());
                args.use_async_io = use_async_io;
                let ro = ReadOptions::default();
                let mut ms = db.multi_scan(&ro, &args).expect("multiscan");
                let got = collect_multi_scan(ms.as_mut()).expect("scan");
                let mut reference =
                    crate::multiscan::IterMultiScan::new(&ro, &args, |r| db.iter(r))
                        .expect("reference");
                let want = collect_multi_scan(&mut reference).expect("reference scan");
                assert_eq!(got, want, "{ranges:?} async={use_async_io}");
            }
        }
    }

    #[test]
    fn multiscan_skips_unread_entries_and_reports_indices() {
        let (_d, db) = open_tmp(false);
        fill(db.as_ref(), 50);
        let args = MultiScanArgs::new(vec![
            ScanRange::new(b"k00001", b"k00009"),
            ScanRange::new(b"k00020", b"k00022"),
        ]);
        let mut ms = db.multi_scan(&ReadOptions::default(), &args).expect("ms");
        assert!(ms.next_range().expect("range"));
        assert_eq!(ms.range_index(), 0);
        assert!(ms.next_entry().expect("entry"));
        assert_eq!(ms.key(), b"k00001");
        assert!(ms.next_range().expect("range"));
        assert_eq!(ms.range_index(), 1);
        assert!(ms.next_entry().expect("entry"));
        assert_eq!(ms.key(), b"k00020");
        assert!(ms.next_entry().expect("entry"));
        assert!(!ms.next_entry().expect("entry"));
        assert!(!ms.next_range().expect("range"));
        assert!(!ms.next_range().expect("range"));
        let bad = MultiScanArgs::new(vec![ScanRange::new(b"b", b"a")]);
        assert!(matches!(
            db.multi_scan(&ReadOptions::default(), &bad).err(),
            Some(Error::InvalidArgument(_))
        ));
    }

    /// The io_uring instances of this process, seen as `anon_inode:[io_uring]`
    /// descriptors.
    fn io_uring_fds() -> usize {
        std::fs::read_dir("/proc/self/fd")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .filter(|t| t.to_string_lossy().contains("io_uring"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// The `COUNT` of a ticker or histogram in RocksDB's statistics string.
    fn stat_count(stats: &str, name: &str) -> u64 {
        let prefix = format!("{name} ");
        stats
            .lines()
            .find(|l| l.starts_with(&prefix))
            .and_then(|l| l.split("COUNT : ").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Evidence that the MultiScan is RocksDB's native one (Prepare ran and
    /// prefetched blocks) and that its async path reads through io_uring
    /// (async reads happened, none fell back, and a ring exists).
    #[test]
    fn async_multiscan_reads_through_io_uring() {
        assert!(io_uring_enabled(), "RocksDbIOUringEnable must be true");
        let dir = tempfile::tempdir().expect("tempdir");
        // No block cache, so every block comes from the file system.
        let opts = EngineOptions::default()
            .set("cache_size", 0)
            .set("statistics", true);
        let db = open(dir.path(), &opts, false).expect("open");
        fill(db.as_ref(), 5000);
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
        let ranges: Vec<ScanRange> = (0..20)
            .map(|i| {
                let a = format!("k{:05}", i * 240);
                let b = format!("k{:05}", i * 240 + 30);
                ScanRange::new(a.as_bytes(), b.as_bytes())
            })
            .collect();
        let mut args = MultiScanArgs::new(ranges);
        args.use_async_io = true;
        // The rings are per thread; scan on a fresh one.
        let (rings, n) = std::thread::scope(|s| {
            s.spawn(|| {
                let mut ms = db.multi_scan(&ReadOptions::default(), &args).expect("ms");
                let got = collect_multi_scan(ms.as_mut()).expect("scan");
                (io_uring_fds(), got.iter().map(Vec::len).sum::<usize>())
            })
            .join()
            .expect("join")
        });
        assert_eq!(n, 20 * 30);
        let stats = db.statistics().expect("statistics");
        assert!(
            stat_count(&stats, "rocksdb.multiscan.prepare.calls") > 0,
            "{stats}"
        );
        assert!(
            stat_count(&stats, "rocksdb.multiscan.blocks.prefetched") > 0,
            "{stats}"
        );
        assert!(
            stat_count(&stats, "rocksdb.async.read.bytes") > 0,
            "{stats}"
        );
        assert_eq!(
            stat_count(&stats, "rocksdb.file.submit.async.read.fallback"),
            0
        );
        // Other tests may own rings too, so only "none at all" is a
        // reliable failure: it means RocksDB's io_uring path is off.
        assert!(rings > 0, "RocksDB created no io_uring instance");
    }

    /// RocksDB's `PrefetchLimitReached` status comes through the shim as
    /// the trait's error of that name.
    #[test]
    fn prefetch_limit_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = EngineOptions::default()
            .set("cache_size", 0)
            .set("block_size", 256);
        let db = open(dir.path(), &opts, false).expect("open");
        fill(db.as_ref(), 3000);
        db.flush().expect("flush");
        let mut args = MultiScanArgs::new(vec![
            ScanRange::new(b"k00000", b"k01000"),
            ScanRange::new(b"k02000", b"k02900"),
        ]);
        args.max_prefetch_size = 1024;
        let mut ms = db.multi_scan(&ReadOptions::default(), &args).expect("ms");
        match collect_multi_scan(ms.as_mut()) {
            Err(Error::PrefetchLimitReached(_)) => {}
            other => panic!("expected PrefetchLimitReached, got {other:?}"),
        }
    }

    #[test]
    fn statistics_and_second_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = EngineOptions::default().set("statistics", "true");
        let db = open(dir.path(), &opts, false).expect("open");
        db.put(&WriteOptions::default(), b"k", b"v").expect("put");
        let s = db.statistics().expect("statistics");
        assert!(s.contains("rocksdb.number.keys.written"), "{s}");
        let second = open(dir.path(), &EngineOptions::default(), false);
        assert!(matches!(second.err(), Some(Error::Busy(_))));
        let bad = EngineOptions::default().set("bogus_flag", "1");
        let err = open(dir.path(), &bad, false).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("bogus_flag")));
    }

    /// The number of blob files in `dir` (BlobDB's `*.blob`).
    fn blob_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .expect("read_dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".blob"))
            .count()
    }

    /// Every entry of family `cf` as `db.iter_cf` sees it under `ro`.
    fn entries_cf(db: &dyn Db, ro: &ReadOptions, cf: Cf) -> Vec<(Vec<u8>, Vec<u8>)> {
        Entries::from_first(db.iter_cf(ro, cf).expect("iter_cf"))
            .collect::<Result<_>>()
            .expect("iterate")
    }

    fn kv(k: &str, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (k.as_bytes().to_vec(), v.to_vec())
    }

    /// A handle that names no open family: InvalidArgument from every call.
    fn assert_refused(db: &dyn Db, cf: Cf) {
        let r = ReadOptions::default();
        let w = WriteOptions::default();
        let refused = |res: Result<()>| matches!(res, Err(Error::InvalidArgument(_)));
        assert!(refused(db.put_cf(&w, cf, b"k", b"v")));
        assert!(refused(db.delete_cf(&w, cf, b"k")));
        assert!(refused(db.get_cf(&r, cf, b"k").map(drop)));
        assert!(refused(db.iter_cf(&r, cf).map(drop)));
        let args = MultiScanArgs::new(vec![ScanRange::new(b"a", b"z")]);
        assert!(refused(db.multi_scan_cf(&r, cf, &args).map(drop)));
        assert!(db
            .multi_get_cf(&r, cf, &[b"k", b"j"])
            .into_iter()
            .all(|g| matches!(g, Err(Error::InvalidArgument(_)))));
        let mut b = WriteBatch::new();
        b.put_cf(cf, b"k", b"v");
        assert!(refused(db.write(&w, &b)));
    }

    #[test]
    fn families_are_isolated() {
        for blob in [false, true] {
            let (d, db) = open_tmp(blob);
            let w = WriteOptions::default();
            let r = ReadOptions::default();
            let a = db.create_cf("a").expect("create a");
            let b = db.create_cf("b").expect("create b");
            assert_ne!(a, b);
            assert!(!a.is_default() && !b.is_default());
            assert_eq!(db.cf_handle("a"), Some(a));
            assert_eq!(db.cf_handle("default"), Some(Cf::DEFAULT));
            assert_eq!(db.cf_handle("c"), None);
            assert_eq!(db.cf_names(), vec!["a", "b", "default"]);
            assert!(matches!(db.create_cf("a"), Err(Error::InvalidArgument(_))));
            assert!(matches!(db.create_cf(""), Err(Error::InvalidArgument(_))));
            assert!(matches!(
                db.drop_cf("default"),
                Err(Error::InvalidArgument(_))
            ));
            assert!(matches!(db.drop_cf("c"), Err(Error::InvalidArgument(_))));

            // The same key in three families holds three values.
            let big = vec![7u8; 1000];
            db.put(&w, b"k", b"default").expect("put");
            db.put_cf(&w, a, b"k", b"in a").expect("put a");
            db.put_cf(&w, b, b"k", &big).expect("put b");
            db.put_cf(&w, a, b"only-a", b"1").expect("put a");
            assert_eq!(db.get(&r, b"k").expect("get"), Some(b"default".to_vec()));
            assert_eq!(
                db.get_cf(&r, a, b"k").expect("get a"),
                Some(b"in a".to_vec())
            );
            assert_eq!(db.get_cf(&r, b, b"k").expect("get b"), Some(big.clone()));
            assert_eq!(db.get(&r, b"only-a").expect("get"), None);
            assert_eq!(db.get_cf(&r, b, b"only-a").expect("get b"), None);
            db.flush().expect("flush");
            // Only family b holds a value over min_blob_size.
            assert_eq!(blob_files(d.path()) > 0, blob);
            // After the flush the values come from every family's files.
            assert_eq!(db.get_cf(&r, b, b"k").expect("get b"), Some(big.clone()));
            db.delete_cf(&w, a, b"k").expect("delete a");
            assert_eq!(db.get_cf(&r, a, b"k").expect("get a"), None);
            assert_eq!(db.get(&r, b"k").expect("get"), Some(b"default".to_vec()));
            assert_eq!(db.get_cf(&r, b, b"k").expect("get b"), Some(big.clone()));
            assert_eq!(entries_cf(db.as_ref(), &r, a), vec![kv("only-a", b"1")]);
            assert_eq!(entries_cf(db.as_ref(), &r, b), vec![kv("k", &big)]);
            assert_eq!(
                entries_cf(db.as_ref(), &r, Cf::DEFAULT),
                vec![kv("k", b"default")]
            );
            let got = db.multi_get_cf(&r, a, &[b"k", b"only-a", b"zz"]);
            let got: Vec<_> = got.into_iter().map(|g| g.expect("multi_get")).collect();
            assert_eq!(got, vec![None, Some(b"1".to_vec()), None]);
            let got = db.multi_get(&r, &[b"k", b"only-a"]);
            let got: Vec<_> = got.into_iter().map(|g| g.expect("multi_get")).collect();
            assert_eq!(got, vec![Some(b"default".to_vec()), None]);
        }
    }

    /// The native MultiScan reads the family it is given, on memtable and
    /// SST data, and agrees with iterators over that family.
    #[test]
    fn multiscan_cf_reads_its_family() {
        for blob in [false, true] {
            let (_d, db) = open_tmp(blob);
            let a = db.create_cf("a").expect("create");
            fill(db.as_ref(), 100);
            let mut b = WriteBatch::new();
            for i in (0..100).step_by(3) {
                b.put_cf(
                    a,
                    format!("k{i:05}").as_bytes(),
                    format!("a{i}").repeat(40).as_bytes(),
                );
            }
            db.write(&WriteOptions::default(), &b).expect("write");
            db.flush().expect("flush");
            db.put_cf(&WriteOptions::default(), a, b"k00010x", b"mem")
                .expect("put");
            let ranges = vec![
                ScanRange::new(b"k00000", b"k00010"),
                ScanRange::new(b"k00009", b"k00020"),
                ScanRange::new(b"k00050", b"k00060"),
                ScanRange::unbounded(b"k00095"),
            ];
            for use_async_io in [false, true] {
                let mut args = MultiScanArgs::new(ranges.clone());
                args.use_async_io = use_async_io;
                for ro in [
                    ReadOptions::default(),
                    ReadOptions::default().with_bounds(Some(b"k00003"), Some(b"k00097")),
                ] {
                    let mut ms = db.multi_scan_cf(&ro, a, &args).expect("multiscan_cf");
                    let got = collect_multi_scan(ms.as_mut()).expect("scan");
                    let mut reference =
                        crate::multiscan::IterMultiScan::new(&ro, &args, |r| db.iter_cf(r, a))
                            .expect("reference");
                    let want = collect_multi_scan(&mut reference).expect("reference scan");
                    assert_eq!(got, want, "blob={blob} async={use_async_io}");
                    let every: Vec<_> = got.iter().flatten().collect();
                    assert!(every
                        .iter()
                        .all(|(_, v)| v.starts_with(b"a") || v == b"mem"));
                }
            }
            let got = collect_multi_scan(
                db.multi_scan_cf(&ReadOptions::default(), a, &MultiScanArgs::new(ranges))
                    .expect("multiscan_cf")
                    .as_mut(),
            )
            .expect("scan");
            let keys = |i: usize| -> Vec<Vec<u8>> { got[i].iter().map(|e| e.0.clone()).collect() };
            assert_eq!(
                keys(0),
                vec![
                    b"k00000".to_vec(),
                    b"k00003".to_vec(),
                    b"k00006".to_vec(),
                    b"k00009".to_vec()
                ]
            );
            assert_eq!(
                keys(1),
                ["k00009", "k00010x", "k00012", "k00015", "k00018"]
                    .map(|k| k.as_bytes().to_vec())
                    .to_vec()
            );
            assert_eq!(keys(3), vec![b"k00096".to_vec(), b"k00099".to_vec()]);
        }
    }

    #[test]
    fn drop_and_recreate_starts_empty_and_refuses_old_handles() {
        for blob in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let opts = EngineOptions::default().set("write_buffer_size", 1 << 20);
            let w = WriteOptions::sync();
            let r = ReadOptions::default();
            {
                let db = open(dir.path(), &opts, blob).expect("open");
                let old = db.create_cf("users").expect("create");
                db.put_cf(&w, old, b"flushed", &[1u8; 500]).expect("put");
                db.flush().expect("flush");
                db.put_cf(&w, old, b"logged", b"2").expect("put");
                // An iterator opened before the drop keeps reading the
                // family as it was.
                let mut it = db.iter_cf(&r, old).expect("iter");
                db.drop_cf("users").expect("drop");
                it.seek_to_first();
                assert_eq!(it.key(), b"flushed");
                drop(it);
                assert_refused(db.as_ref(), old);
                assert!(matches!(
                    db.drop_cf("users"),
                    Err(Error::InvalidArgument(_))
                ));
                assert_eq!(db.cf_handle("users"), None);
                assert_eq!(db.cf_names(), vec!["default"]);
                let new = db.create_cf("users").expect("re-create");
                assert_ne!(new, old);
                assert_eq!(db.cf_handle("users"), Some(new));
                assert_refused(db.as_ref(), old);
                assert_eq!(db.get_cf(&r, new, b"flushed").expect("get"), None);
                assert_eq!(db.get_cf(&r, new, b"logged").expect("get"), None);
                assert!(entries_cf(db.as_ref(), &r, new).is_empty());
                db.put_cf(&w, new, b"fresh", b"3").expect("put");
            }
            // After a reopen the re-created family is there with its own
            // key only; the dropped family's keys stay gone.
            let db = open(dir.path(), &opts, blob).expect("reopen");
            let users = db.cf_handle("users").expect("users after reopen");
            assert_eq!(entries_cf(db.as_ref(), &r, users), vec![kv("fresh", b"3")]);
            db.drop_cf("users").expect("drop");
            drop(db);
            let db = open(dir.path(), &opts, blob).expect("reopen");
            assert_eq!(db.cf_handle("users"), None);
            assert_eq!(db.cf_names(), vec!["default"]);
            let users = db.create_cf("users").expect("create again");
            assert!(entries_cf(db.as_ref(), &r, users).is_empty());
        }
    }

    #[test]
    fn reopen_keeps_families_and_their_data() {
        for blob in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let opts = EngineOptions::default().set("write_buffer_size", 1 << 20);
            let w = WriteOptions::default();
            let r = ReadOptions::default();
            let big = vec![5u8; 2000];
            {
                let db = open(dir.path(), &opts, blob).expect("open");
                let a = db.create_cf("alpha").expect("create");
                let b = db.create_cf("beta").expect("create");
                db.put_cf(&w, a, b"sst", &big).expect("put");
                db.put(&w, b"sst", b"default").expect("put");
                db.flush().expect("flush");
                // Left in the memtables: recovered from the WAL.
                db.put_cf(&w, a, b"wal", b"a").expect("put");
                db.put_cf(&w, b, b"wal", b"b").expect("put");
                db.delete_cf(&w, a, b"gone").expect("delete");
            }
            let db = open(dir.path(), &opts, blob).expect("reopen");
            assert_eq!(db.cf_names(), vec!["alpha", "beta", "default"]);
            let a = db.cf_handle("alpha").expect("alpha");
            let b = db.cf_handle("beta").expect("beta");
            assert_eq!(
                entries_cf(db.as_ref(), &r, a),
                vec![kv("sst", &big), kv("wal", b"a")]
            );
            assert_eq!(entries_cf(db.as_ref(), &r, b), vec![kv("wal", b"b")]);
            assert_eq!(db.get(&r, b"sst").expect("get"), Some(b"default".to_vec()));
            assert!(matches!(
                db.create_cf("alpha"),
                Err(Error::InvalidArgument(_))
            ));
            // A family opened at reopen has the blob settings too: a large
            // value written to it now lands in a new blob file.
            let before = blob_files(dir.path());
            db.put_cf(&w, b, b"large", &big).expect("put");
            db.flush().expect("flush");
            assert_eq!(db.get_cf(&r, b, b"large").expect("get"), Some(big.clone()));
            assert_eq!(blob_files(dir.path()) > before, blob);
        }
    }
}
