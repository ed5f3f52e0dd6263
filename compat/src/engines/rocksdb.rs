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

mod multiscan;
mod options;
mod snapshot;

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    DBRawIteratorWithThreadMode, ErrorKind, WaitForCompactOptions, WriteBatch as RWriteBatch, DB,
};

pub use self::multiscan::io_uring_enabled;
pub use self::options::ROCKSDB_OPTION_KEYS;
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::{
    check_sizes, BatchOp, Db, DbIterator, EngineOptions, Error, Limits, ReadOptions, Result,
    Snapshot, WriteBatch, WriteOptions,
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
    let db = DB::open(&parsed.opts, path)
        .map_err(|e| map_err(&format!("open {}", path.display()), e))?;
    Ok(Box::new(RocksDb {
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
        out.clear();
        let custom;
        let ro = if is_default_read(opts) {
            &self.default_ro
        } else {
            custom = self.custom_read(opts, false)?;
            &custom
        };
        match self.db.get_pinned_opt(key, ro) {
            Ok(Some(v)) => {
                out.extend_from_slice(&v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(map_err("get", e)),
        }
    }

    /// RocksDB's batched `MultiGet` (the crate's `multi_get_opt` calls the
    /// array overload, which batches block reads).
    fn multi_get(&self, opts: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        let custom;
        let ro = if is_default_read(opts) {
            &self.default_ro
        } else {
            match self.custom_read(opts, false) {
                Ok(r) => custom = r,
                Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
            }
            &custom
        };
        self.db
            .multi_get_opt(keys, ro)
            .into_iter()
            .map(|r| r.map_err(|e| map_err("multi_get", e)))
            .collect()
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        check_sizes(&KEY_LIMITS, key, Some(value))?;
        self.db
            .put_opt(key, value, self.wopts(opts))
            .map_err(|e| map_err("put", e))
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        check_sizes(&KEY_LIMITS, key, None)?;
        self.db
            .delete_opt(key, self.wopts(opts))
            .map_err(|e| map_err("delete", e))
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        crate::family::default_only_batch(self.name(), batch)?;
        let mut b = RWriteBatch::default();
        for op in batch {
            match op {
                BatchOp::Put { key, value, .. } => {
                    check_sizes(&KEY_LIMITS, key, Some(value))?;
                    b.put(key, value);
                }
                BatchOp::Delete { key, .. } => {
                    check_sizes(&KEY_LIMITS, key, None)?;
                    b.delete(key);
                }
                BatchOp::DeleteRange { begin, end, .. } => {
                    check_sizes(&KEY_LIMITS, begin, None)?;
                    check_sizes(&KEY_LIMITS, end, None)?;
                    b.delete_range(begin, end);
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
        let it = self.db.raw_iterator_opt(self.custom_read(opts, true)?);
        Ok(Box::new(RocksIter {
            it,
            _snapshot: opts.snapshot.clone(),
        }))
    }

    fn multi_scan<'a>(
        &'a self,
        opts: &ReadOptions,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        // One view for every range: the caller's snapshot, or one taken
        // for the call (a native group or an unbounded range would
        // otherwise each read the database as of its own start).
        let snap = match self.snapshot_of(opts)? {
            Some(s) => Some(Arc::clone(s)),
            None if args.ranges.len() > 1 => Some(Arc::new(RocksSnapshot::take(&self.db))),
            None => None,
        };
        Ok(Box::new(multiscan::NativeMultiScan::new(
            &self.db, opts, snap, args,
        )?))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(|e| map_err("flush", e))
    }

    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db.compact_range(begin, end);
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
}
