//! The LMDB adapter (cargo feature `lmdb`, crate `heed` 0.23).
//!
//! * Configured as in the original benchmark: `MDB_WRITEMAP` (option
//!   `writemap`, default on) and synchronous commits for `sync=true` writes.
//! * Map size: one large sparse mapping (option `map_size`, default 1 TiB;
//!   with `writemap` the data file is sparse at that size). LMDB cannot grow
//!   the map while read transactions are open, so it is sized once; running
//!   out is an `IoError` saying "map full" and naming the option, never a
//!   crash.
//! * Writers are serialised by a mutex in the adapter (LMDB allows one write
//!   transaction at a time, and the NO_SYNC toggling below must not race).
//! * `WriteOptions::sync=false` (or `disable_wal`) commits with
//!   `MDB_NOSYNC`: the write survives a process crash but not a power loss.
//!   `sync=true` commits with LMDB's default full sync. LMDB flags are
//!   env-wide, so the adapter flips `MDB_NOSYNC` under the writer mutex
//!   before a commit whose mode differs from the previous one.
//! * Readers: each get and each iterator runs in its own read transaction
//!   (a snapshot); a `WriteBatch` is one write transaction, so readers see it
//!   whole or not at all. [`Db::snapshot`] holds one read transaction that
//!   every read naming it shares (serialised by a mutex, as LMDB requires).
//!   As with any LMDB reader, a held snapshot keeps the pages it sees from
//!   reuse, so the data file grows under writes until it is dropped.
//! * Keys: 1 to 511 bytes (LMDB's `MDB_MAXKEYSIZE`; LMDB rejects empty keys,
//!   so does the adapter, with `InvalidArgument`). Values: no limit below
//!   the map size.
//! * MultiScan: the trait's default, one read transaction and cursor per
//!   range.
//! * A second open of the same directory fails with `Busy`: `<dir>/LOCK`
//!   is held the way vmemkv holds its own ([`vmemkv::DirLock`]).

mod iter;

use std::sync::Arc;

use std::ops::Bound;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use heed::types::Bytes;
use heed::{
    CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, FlagSetMode, MdbError, RwTxn,
    WithoutTls,
};

use crate::lock::DirLock;
use crate::{
    check_sizes, BatchOp, Db, DbIterator, EngineOptions, Error, Limits, OptionMap, ReadOptions,
    Result, Snapshot, WriteBatch, WriteOptions,
};
use iter::LmdbSnapshot;

/// LMDB's compiled-in maximum key size (`MDB_MAXKEYSIZE`).
pub const MAX_KEY_SIZE: usize = 511;

/// Default map size: 1 TiB of address space (sparse on disk).
pub const DEFAULT_MAP_SIZE: usize = 1 << 40;

/// Every engine option the LMDB adapter accepts.
pub const LMDB_OPTION_KEYS: &[&str] = &["map_size", "max_readers", "writemap", "no_readahead"];

const LIMITS: Limits = Limits {
    max_key_size: Some(MAX_KEY_SIZE),
    max_value_size: None,
};

/// Maps a heed error onto the trait's categories.
pub(crate) fn map_err(what: &str, e: heed::Error) -> Error {
    let msg = format!("lmdb {what}: {e}");
    match e {
        heed::Error::Mdb(MdbError::MapFull) => Error::IoError(crate::IoFailure::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "lmdb {what}: map full: the LMDB map is exhausted; reopen with a larger \
             'map_size' option"
            ),
        )),
        heed::Error::Mdb(MdbError::ReadersFull) => Error::Busy(format!(
            "{msg}; every reader slot is in use (raise the 'max_readers' option)"
        )),
        heed::Error::Mdb(
            MdbError::Corrupted
            | MdbError::PageNotFound
            | MdbError::VersionMismatch
            | MdbError::Invalid,
        ) => Error::Corruption(msg),
        heed::Error::Mdb(MdbError::BadValSize) => Error::InvalidArgument(msg),
        heed::Error::EnvAlreadyOpened => Error::Busy(format!(
            "{msg} (the environment is already open in this process; lock held)"
        )),
        _ => Error::IoError(msg.into()),
    }
}

/// [`map_err`] for the environment in `dir`: corruption names the data file.
pub(crate) fn map_err_in(dir: &Path, what: &str, e: heed::Error) -> Error {
    match map_err(what, e) {
        Error::Corruption(m) => {
            Error::Corruption(format!("{m} (file {})", dir.join("data.mdb").display()))
        }
        other => other,
    }
}

/// Opens (creating if allowed) the LMDB environment in directory `path`.
pub fn open(path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    let mut om = OptionMap::new("lmdb", opts);
    let map_size = om.take::<usize>("map_size")?.unwrap_or(DEFAULT_MAP_SIZE);
    let max_readers = om.take::<u32>("max_readers")?.unwrap_or(4096);
    let writemap = om.take_bool("writemap")?.unwrap_or(true);
    let no_readahead = om.take_bool("no_readahead")?.unwrap_or(false);
    om.finish()?;
    if map_size < (1 << 20) {
        return Err(Error::InvalidArgument(format!(
            "lmdb option 'map_size': {map_size} bytes is below the 1 MiB minimum"
        )));
    }

    let exists = path.join("data.mdb").exists();
    // vmemkv's lock: a POSIX record lock, which a forked child does not
    // inherit, plus a registry that refuses a second open in this process.
    let lock = super::open_dir::prepare("lmdb", path, exists, opts)?;

    let mut flags = EnvFlags::NO_SYNC;
    if writemap {
        flags |= EnvFlags::WRITE_MAP;
    }
    if no_readahead {
        flags |= EnvFlags::NO_READ_AHEAD;
    }
    let mut eo = EnvOpenOptions::new().read_txn_without_tls();
    eo.map_size(map_size).max_readers(max_readers).max_dbs(1);
    // SAFETY: the flags are LMDB's documented trade-offs, not memory-safety
    // hazards for this process: WRITE_MAP maps the file writable (stray
    // writes through the map could corrupt the file, but the adapter only
    // writes through LMDB's API); NO_SYNC defers fsync to the next synced
    // commit (it is cleared for `sync=true` writes, see `LmdbWriter`).
    // NO_READ_AHEAD only changes madvise. The env is opened once per path:
    // `lock` is held (its registry refuses a second open in this process),
    // which rules out the double-open-in-one-process hazard that makes
    // `open` unsafe.
    let env = unsafe { eo.flags(flags).open(path) }
        .map_err(|e| map_err_in(path, &format!("open {}", path.display()), e))?;
    let wtxn = env
        .write_txn()
        .map_err(|e| map_err_in(path, "open: write transaction", e))?;
    let db: Database<'static, Bytes, Bytes> = env
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            opener
                .create_database::<Bytes, Bytes>(wtxn, None)
                .map(CommitOrAbort::<_, ()>::Commit)
        })
        .map_err(|e| map_err_in(path, "open: create database", e))?
        .unwrap_commit();
    Ok(Box::new(Lmdb {
        env,
        db,
        writer: Mutex::new(LmdbWriter { nosync: true }),
        map_size,
        id: {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        },
        _lock: lock,
    }))
}

/// State guarded by the writer mutex.
struct LmdbWriter {
    /// Whether `MDB_NOSYNC` is currently set on the env.
    nosync: bool,
}

/// An open LMDB environment with its unnamed database.
struct Lmdb {
    env: Env<WithoutTls>,
    db: Database<'static, Bytes, Bytes>,
    writer: Mutex<LmdbWriter>,
    map_size: usize,
    /// Unique per open in this process: snapshots name the open they came
    /// from, and an address could be reused by a later open.
    id: usize,
    // Declared last so it is released after the env is closed.
    _lock: DirLock,
}

fn check_key(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument(
            "lmdb: empty keys are not supported (LMDB requires 1..=511-byte keys)".into(),
        ));
    }
    check_sizes(&LIMITS, key, value)
}

impl Lmdb {
    fn owner(&self) -> usize {
        self.id
    }

    /// The LMDB snapshot `ro` names, checked to be this database's.
    fn snapshot_of<'s>(&self, ro: &'s ReadOptions) -> Result<Option<&'s Arc<LmdbSnapshot>>> {
        ro.snapshot
            .as_ref()
            .map(|s| s.downcast::<Arc<LmdbSnapshot>>("lmdb", self.owner()))
            .transpose()
    }

    fn err(&self, what: &str, e: heed::Error) -> Error {
        map_err_in(self.env.path(), what, e)
    }

    /// Runs `f` in one write transaction under the writer mutex, committing
    /// with or without sync as `opts` asks.
    fn with_write_txn<F>(&self, opts: &WriteOptions, what: &str, f: F) -> Result<()>
    where
        F: FnOnce(&mut RwTxn<'_>) -> std::result::Result<(), heed::Error>,
    {
        let mut w: MutexGuard<'_, LmdbWriter> =
            self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let want_nosync = !opts.sync;
        if w.nosync != want_nosync {
            let mode = if want_nosync {
                FlagSetMode::Enable
            } else {
                FlagSetMode::Disable
            };
            // SAFETY: mdb_env_set_flags must not be called concurrently
            // from several threads; every call happens under `self.writer`.
            // NO_SYNC is one of the flags LMDB allows to change on an open
            // env, and only commits read it, which also run under the mutex.
            unsafe { self.env.set_flags(EnvFlags::NO_SYNC, mode) }
                .map_err(|e| self.err("set NO_SYNC", e))?;
            w.nosync = want_nosync;
        }
        let mut txn = self
            .env
            .write_txn()
            .map_err(|e| self.err(&format!("{what}: begin"), e))?;
        // On error the transaction is dropped, which aborts it.
        f(&mut txn).map_err(|e| self.map_write_err(what, e))?;
        txn.commit()
            .map_err(|e| self.map_write_err(&format!("{what}: commit"), e))
    }

    fn map_write_err(&self, what: &str, e: heed::Error) -> Error {
        match e {
            heed::Error::Mdb(MdbError::MapFull) => Error::IoError(crate::IoFailure::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "lmdb {what}: map full: the LMDB map of {} bytes is exhausted; reopen with a \
                 larger 'map_size' option",
                    self.map_size
                ),
            )),
            e => self.err(what, e),
        }
    }
}

impl Db for Lmdb {
    fn name(&self) -> &'static str {
        "lmdb"
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let snapshot = self.snapshot_of(opts)?;
        if key.is_empty() || key.len() > MAX_KEY_SIZE {
            // Such a key can never have been stored.
            return Ok(false);
        }
        let copy = |got: heed::Result<Option<&[u8]>>, out: &mut Vec<u8>| match got {
            Ok(Some(v)) => {
                out.extend_from_slice(v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(self.err("get", e)),
        };
        match snapshot {
            Some(s) => s.read(|txn| copy(self.db.get(txn, key), out)),
            None => {
                let txn = self.env.read_txn().map_err(|e| self.err("get: begin", e))?;
                copy(self.db.get(&txn, key), out)
            }
        }
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let s = LmdbSnapshot::begin(&self.env).map_err(|e| self.err("snapshot: begin", e))?;
        Ok(Snapshot::new("lmdb", self.owner(), Arc::new(s)))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key, Some(value))?;
        self.with_write_txn(opts, "put", |txn| self.db.put(txn, key, value))
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        check_key(key, None)?;
        self.with_write_txn(opts, "delete", |txn| self.db.delete(txn, key).map(|_| ()))
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        crate::family::default_only_batch(self.name(), batch)?;
        // Validate everything first: a rejected batch applies nothing.
        for op in batch {
            match op {
                BatchOp::Put { key, value, .. } => check_key(key, Some(value))?,
                BatchOp::Delete { key, .. } => check_key(key, None)?,
                // Range ends are compared, never stored: any length works.
                BatchOp::DeleteRange { .. } => {}
            }
        }
        self.with_write_txn(opts, "write", |txn| {
            for op in batch {
                match op {
                    BatchOp::Put { key, value, .. } => self.db.put(txn, key, value)?,
                    BatchOp::Delete { key, .. } => {
                        self.db.delete(txn, key)?;
                    }
                    BatchOp::DeleteRange { begin, end, .. } => {
                        let lo = iter::lmdb_lower(Bound::Included(begin));
                        let Some(hi) = iter::lmdb_upper(Bound::Excluded(end)) else {
                            continue;
                        };
                        let range = (iter::bref(&lo), iter::bref(&hi));
                        if !iter::empty(range.0, range.1) {
                            self.db.delete_range(txn, &range)?;
                        }
                    }
                }
            }
            Ok(())
        })
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        let snapshot = self.snapshot_of(opts)?.cloned();
        Ok(Box::new(iter::LmdbIter::new(
            &self.env, self.db, opts, snapshot,
        )?))
    }

    fn flush(&self) -> Result<()> {
        // Makes every NO_SYNC commit durable.
        self.env.force_sync().map_err(|e| self.err("flush", e))
    }

    fn property(&self, name: &str) -> Option<String> {
        match name {
            "lmdb.stat" | "lmdb.stats" => self.statistics(),
            "lmdb.version" => {
                let v = heed::lmdb_version();
                Some(format!("{}.{}.{}", v.major, v.minor, v.patch))
            }
            "lmdb.info" => {
                let i = self.env.info();
                Some(format!(
                    "map_size={} last_page_number={} last_txn_id={} max_readers={} readers={}",
                    i.map_size,
                    i.last_page_number,
                    i.last_txn_id,
                    i.maximum_number_of_readers,
                    i.number_of_readers
                ))
            }
            "lmdb.entries" => {
                let txn = self.env.read_txn().ok()?;
                self.db.len(&txn).ok().map(|n| n.to_string())
            }
            "lmdb.disk_size" => self.env.real_disk_size().ok().map(|n| n.to_string()),
            "compat.multiscan" => {
                Some("per-range: one read transaction and cursor per range".to_owned())
            }
            _ => None,
        }
    }

    fn statistics(&self) -> Option<String> {
        let i = self.env.info();
        let txn = self.env.read_txn().ok()?;
        let s = self.db.stat(&txn).ok()?;
        Some(format!(
            "lmdb.stat: page_size={} depth={} branch_pages={} leaf_pages={} overflow_pages={} \
             entries={}\nlmdb.info: map_size={} last_page_number={} last_txn_id={} \
             max_readers={} readers={}\n",
            s.page_size,
            s.depth,
            s.branch_pages,
            s.leaf_pages,
            s.overflow_pages,
            s.entries,
            i.map_size,
            i.last_page_number,
            i.last_txn_id,
            i.maximum_number_of_readers,
            i.number_of_readers
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multiscan::{collect_multi_scan, MultiScanArgs, ScanRange};
    use crate::Entries;

    fn open_tmp(extra: &[(&str, &str)]) -> (tempfile::TempDir, Box<dyn Db>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = EngineOptions::default().set("map_size", 64 << 20);
        for (k, v) in extra {
            o = o.set(*k, v);
        }
        let db = open(dir.path(), &o).expect("open");
        (dir, db)
    }

    #[test]
    fn put_get_iterate_multiscan() {
        let (_d, db) = open_tmp(&[]);
        let w = WriteOptions::default();
        for i in 0..50u32 {
            db.put(
                &w,
                format!("k{i:03}").as_bytes(),
                format!("v{i}").as_bytes(),
            )
            .expect("put");
        }
        db.put(&WriteOptions::sync(), b"k010", b"synced")
            .expect("sync put");
        db.delete(&w, b"k011").expect("delete");
        assert_eq!(
            db.get(&ReadOptions::default(), b"k010").expect("get"),
            Some(b"synced".to_vec())
        );
        assert_eq!(db.get(&ReadOptions::default(), b"k011").expect("get"), None);
        let all: Vec<_> = Entries::from_first(db.iter(&ReadOptions::default()).expect("iter"))
            .collect::<Result<_>>()
            .expect("scan");
        assert_eq!(all.len(), 49);

        let ro = ReadOptions::default().with_bounds(Some(b"k005"), Some(b"k009"));
        let mut it = db.iter(&ro).expect("iter");
        it.seek_to_last();
        assert_eq!(it.key(), b"k008");
        it.prev();
        assert_eq!(it.key(), b"k007");
        it.next();
        assert_eq!(it.key(), b"k008");
        it.next();
        assert!(!it.valid());
        it.seek(b"a");
        assert_eq!(it.key(), b"k005");
        it.prev();
        assert!(!it.valid());
        it.seek_for_prev(b"zzz");
        assert_eq!(it.key(), b"k008");
        it.seek_for_prev(b"k006x");
        assert_eq!(it.key(), b"k006");
        assert_eq!(it.value(), b"v6");
        it.status().expect("status");

        let args = MultiScanArgs::new(vec![
            ScanRange::new(b"k010", b"k013"),
            ScanRange::unbounded(b"k048"),
        ]);
        let got = collect_multi_scan(
            db.multi_scan(&ReadOptions::default(), &args)
                .expect("ms")
                .as_mut(),
        )
        .expect("scan");
        let keys: Vec<Vec<Vec<u8>>> = got
            .iter()
            .map(|r| r.iter().map(|(k, _)| k.clone()).collect())
            .collect();
        assert_eq!(
            keys,
            vec![
                vec![b"k010".to_vec(), b"k012".to_vec()],
                vec![b"k048".to_vec(), b"k049".to_vec()]
            ]
        );
        let stats = db.statistics().expect("stats");
        assert!(stats.contains("entries=49"), "{stats}");
        assert!(db.property("lmdb.info").is_some());
        assert!(db
            .property("compat.multiscan")
            .is_some_and(|p| p.starts_with("per-range")));
    }

    #[test]
    fn batches_limits_and_iterator_snapshot() {
        let (_d, db) = open_tmp(&[("writemap", "false")]);
        let mut b = WriteBatch::new();
        for i in 0..10u32 {
            b.put(format!("k{i}").as_bytes(), b"x");
        }
        b.delete_range(b"k2", b"k5");
        b.delete_range(b"k9", b"k8");
        db.write(&WriteOptions::default(), &b).expect("write");
        let it = db.iter(&ReadOptions::default()).expect("iter");
        // Writes after the iterator was created are invisible to it.
        db.put(&WriteOptions::default(), b"k99", b"late")
            .expect("put");
        let keys: Vec<_> = Entries::from_first(it)
            .map(|kv| kv.expect("kv").0)
            .collect();
        assert_eq!(keys.len(), 7);
        let long = vec![b'k'; MAX_KEY_SIZE + 1];
        assert!(matches!(
            db.put(&WriteOptions::default(), &long, b"v"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            db.put(&WriteOptions::default(), b"", b"v"),
            Err(Error::InvalidArgument(_))
        ));
        let mut bad = WriteBatch::new();
        bad.put(b"fine", b"x");
        bad.put(&long, b"x");
        assert!(db.write(&WriteOptions::default(), &bad).is_err());
        assert_eq!(db.get(&ReadOptions::default(), b"fine").expect("get"), None);
    }

    #[test]
    fn map_full_is_a_clear_error() {
        let (_d, db) = open_tmp(&[("map_size", "1048576")]);
        let v = vec![1u8; 64 * 1024];
        let mut err = None;
        for i in 0..100u32 {
            if let Err(e) = db.put(&WriteOptions::default(), format!("k{i}").as_bytes(), &v) {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("a 1 MiB map must fill up");
        assert!(e.to_string().contains("map full"), "{e}");
        assert!(e.to_string().contains("map_size"), "{e}");
        // The database stays usable for reads.
        assert!(db
            .get(&ReadOptions::default(), b"k0")
            .expect("get")
            .is_some());
    }

    #[test]
    fn options_and_second_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad = EngineOptions::default().set("no_such_option", "1");
        let e = open(dir.path(), &bad).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("no_such_option")));
        let bad = EngineOptions::default().set("map_size", "huge");
        let e = open(dir.path(), &bad).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("map_size") && e.contains("huge")));
        let o = EngineOptions::default().set("map_size", 64 << 20);
        let first = open(dir.path(), &o).expect("open");
        assert!(matches!(open(dir.path(), &o).err(), Some(Error::Busy(_))));
        drop(first);
        assert!(open(dir.path(), &o).is_ok());
    }

    #[test]
    fn concurrent_writers_with_mixed_sync_are_serialised() {
        let (_d, db) = open_tmp(&[]);
        let db = db.as_ref();
        std::thread::scope(|s| {
            for t in 0..4u32 {
                s.spawn(move || {
                    for i in 0..100u32 {
                        let w = if (i + t) % 3 == 0 {
                            WriteOptions::sync()
                        } else {
                            WriteOptions::default()
                        };
                        let k = format!("t{t}-{i:03}");
                        db.put(&w, k.as_bytes(), &i.to_le_bytes()).expect("put");
                        // A reader in the middle of the writers.
                        let got = db.get(&ReadOptions::default(), k.as_bytes()).expect("get");
                        assert_eq!(got, Some(i.to_le_bytes().to_vec()));
                    }
                });
            }
        });
        let n = Entries::from_first(db.iter(&ReadOptions::default()).expect("iter")).count();
        assert_eq!(n, 400);
        db.flush().expect("flush");
    }

    #[test]
    fn iterator_moves_between_threads() {
        let (_d, db) = open_tmp(&[]);
        db.put(&WriteOptions::default(), b"a", b"1").expect("put");
        db.put(&WriteOptions::default(), b"b", b"2").expect("put");
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        let key = std::thread::scope(|s| {
            s.spawn(move || {
                it.next();
                it.key().to_vec()
            })
            .join()
            .expect("join")
        });
        assert_eq!(key, b"b");
    }
}
