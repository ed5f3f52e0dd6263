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
//!
//! # Column families
//! Families are named databases of the one environment. The default family
//! is LMDB's unnamed (main) database, where the adapter always kept its
//! data, so a database written before families existed opens unchanged.
//! LMDB lists the named databases as keys of the main database; family
//! `name` is the named database [`FAMILY_PREFIX`]` + name`, and the key
//! range of that prefix is reserved: the default family refuses to write a
//! key in it (`InvalidArgument`), finds nothing there and steps over it
//! when iterating, so the records never show and no user key or family name
//! can collide with them. Up to `max_column_families` families (option,
//! default [`DEFAULT_MAX_FAMILIES`]) can be open; LMDB sizes every read
//! transaction by it, so the default is kept small. On open every family
//! in the main database is opened.
//!
//! A batch across families is one write transaction and a snapshot is one
//! read transaction, which covers every database; a family created after
//! a snapshot reads as empty in it. `create_cf` and `drop_cf` commit with a
//! full sync; `drop_cf` frees the family's pages and deletes its database
//! in one write transaction. LMDB closes a dropped database's handle (and
//! may reuse it for a later family), so reads of a family hold its lock
//! while they use the handle, and an iterator over a family that was
//! dropped ends with an `InvalidArgument` at its next move. The default
//! family takes no lock and no table lookup.

mod iter;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::ops::Bound;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

use heed::types::Bytes;
use heed::{
    CommitOrAbort, CommitToken, Database, Env, EnvFlags, EnvOpenOptions, FlagSetMode, MdbError,
    OnCommit, RoTxn, RwTxn, WithoutTls,
};

use crate::family::check_family_name;
use crate::iter::NeverValid;
use crate::lock::DirLock;
use crate::{
    check_sizes, BatchOp, Cf, Db, DbIterator, EngineOptions, Error, Families, Limits, OptionMap,
    ReadOptions, Result, Snapshot, WriteBatch, WriteOptions,
};
use iter::LmdbSnapshot;

/// LMDB's compiled-in maximum key size (`MDB_MAXKEYSIZE`).
pub const MAX_KEY_SIZE: usize = 511;

/// Default map size: 1 TiB of address space (sparse on disk).
pub const DEFAULT_MAP_SIZE: usize = 1 << 40;

/// Every engine option the LMDB adapter accepts.
pub const LMDB_OPTION_KEYS: &[&str] = &[
    "map_size",
    "max_readers",
    "writemap",
    "no_readahead",
    "max_column_families",
];

/// Default of the option `max_column_families`: how many families besides
/// `default` may be open. LMDB allocates and zeroes ~49 bytes per slot in
/// every read transaction (one per point read), so it is kept small.
pub const DEFAULT_MAX_FAMILIES: u32 = 16;

/// The start of every family's database name; the main database's keys
/// from here to `FAMILY_PREFIX_END` are the families' records. Unit
/// separators around a name no application key is likely to start with.
pub const FAMILY_PREFIX: &str = "\u{1f}vmemkv.cf\u{1f}";

/// The first key after the range of [`FAMILY_PREFIX`].
const FAMILY_PREFIX_END: &[u8] = b"\x1fvmemkv.cf\x20";

/// The range of the families' records in the main database.
const RECORDS: (Bound<&[u8]>, Bound<&[u8]>) = (
    Bound::Included(FAMILY_PREFIX.as_bytes()),
    Bound::Excluded(FAMILY_PREFIX_END),
);

/// Whether `key` of the default family lies in the range reserved for the
/// families' records.
fn reserved(key: &[u8]) -> bool {
    key.starts_with(FAMILY_PREFIX.as_bytes())
}

type Db0 = Database<'static, Bytes, Bytes>;

/// A family other than `default`: its database and whether it is live.
struct Family {
    name: String,
    db: Db0,
    /// The family epoch of its creation (0 for a family found on open): a
    /// snapshot begun at an earlier epoch reads the family as empty. The
    /// epoch moves after the creating commit and before the family can be
    /// written, so a snapshot that sees an epoch this low began after it.
    created: u64,
    /// `false` once dropped. Held for reading while the handle is in use;
    /// `drop_cf` holds it for writing while LMDB closes the handle.
    live: RwLock<bool>,
}

impl Family {
    fn live(&self) -> RwLockReadGuard<'_, bool> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }

    fn dropped(&self) -> Error {
        Error::InvalidArgument(format!("lmdb: column family {:?} was dropped", self.name))
    }
}

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
    let max_families = om
        .take::<u32>("max_column_families")?
        .unwrap_or(DEFAULT_MAX_FAMILIES);
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
    eo.map_size(map_size)
        .max_readers(max_readers)
        .max_dbs(max_families);
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
    // Our own refusals abort the transaction and come back as `Abort`.
    let opened = env
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            let main = opener.create_database::<Bytes, Bytes>(wtxn, None)?;
            let mut names = Vec::new();
            for kv in main.range(wtxn, &RECORDS)? {
                names.push(kv?.0.to_vec());
            }
            let mut found = Vec::new();
            for key in names {
                let Ok(name) = std::str::from_utf8(&key) else {
                    return Ok(CommitOrAbort::Abort(not_a_family(path, &key)));
                };
                match opener.create_database::<Bytes, Bytes>(wtxn, Some(name)) {
                    Ok(db) => found.push((name.to_owned(), db)),
                    Err(heed::Error::Mdb(MdbError::Incompatible)) => {
                        return Ok(CommitOrAbort::Abort(not_a_family(path, &key)))
                    }
                    Err(heed::Error::Mdb(MdbError::DbsFull)) => {
                        return Ok(CommitOrAbort::Abort(Error::InvalidArgument(format!(
                            "lmdb open {}: it holds more column families than the \
                             'max_column_families' option ({max_families}) allows",
                            path.display()
                        ))))
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(CommitOrAbort::Commit(Opened(main, found)))
        })
        .map_err(|e| map_err_in(path, "open: databases", e))?;
    let Opened(db, found) = match opened {
        CommitOrAbort::Commit(o) => o,
        CommitOrAbort::Abort(e) => return Err(e),
    };
    let families = Families::new("lmdb", None);
    for (name, db) in found {
        let name = name[FAMILY_PREFIX.len()..].to_owned();
        let family = Family {
            name: name.clone(),
            db,
            created: 0,
            live: RwLock::new(true),
        };
        families.add(&name, Some(Arc::new(family)))?;
    }
    Ok(Box::new(Lmdb {
        env,
        db,
        families,
        epoch: AtomicU64::new(0),
        writer: Mutex::new(LmdbWriter { nosync: true }),
        map_size,
        id: {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        },
        _lock: lock,
    }))
}

/// The main database and the families found in it, as opened in the open
/// transaction; made usable beyond it by heed's commit.
struct Opened<D>(D, Vec<(String, D)>);

impl<'e> OnCommit for Opened<Database<'e, Bytes, Bytes>> {
    type Committed = Opened<Db0>;

    fn on_commit(self, token: &CommitToken) -> Opened<Db0> {
        Opened(
            self.0.on_commit(token),
            self.1
                .into_iter()
                .map(|(n, d)| (n, d.on_commit(token)))
                .collect(),
        )
    }
}

/// A key in the range reserved for family records that is not one.
fn not_a_family(dir: &Path, key: &[u8]) -> Error {
    Error::Corruption(format!(
        "lmdb open: key {:?} of the main database lies in the range reserved for column-family \
         records but names no family database (file {})",
        String::from_utf8_lossy(key),
        dir.join("data.mdb").display()
    ))
}

/// State guarded by the writer mutex.
struct LmdbWriter {
    /// Whether `MDB_NOSYNC` is currently set on the env.
    nosync: bool,
}

/// An open LMDB environment with its unnamed database.
struct Lmdb {
    env: Env<WithoutTls>,
    /// The default family (the unnamed database), used without the table.
    db: Db0,
    /// Every family; `default`'s entry is `None` (it is `db`).
    families: Families<Option<Arc<Family>>>,
    /// Moves once per `create_cf`; see [`Family::created`].
    epoch: AtomicU64,
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

/// [`check_key`] for the default family, which keeps its hands off the
/// family records.
fn check_default_key(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    check_key(key, value)?;
    if reserved(key) {
        return Err(Error::InvalidArgument(format!(
            "lmdb: key {:?} of the default column family lies in the range the adapter reserves \
             for column-family records (keys starting {FAMILY_PREFIX:?})",
            String::from_utf8_lossy(key)
        )));
    }
    Ok(())
}

/// Deletes `[begin, end)` from `db`; for the default family (`hole`), all
/// but the family records.
fn delete_range(
    db: Db0,
    txn: &mut RwTxn<'_>,
    begin: &[u8],
    end: &[u8],
    hole: bool,
) -> heed::Result<()> {
    let mut one = |lo: &[u8], hi: &[u8]| -> heed::Result<()> {
        let lo = iter::lmdb_lower(Bound::Included(lo));
        let Some(hi) = iter::lmdb_upper(Bound::Excluded(hi)) else {
            return Ok(());
        };
        let range = (iter::bref(&lo), iter::bref(&hi));
        if !iter::empty(range.0, range.1) {
            db.delete_range(txn, &range)?;
        }
        Ok(())
    };
    if !hole {
        return one(begin, end);
    }
    let p = FAMILY_PREFIX.as_bytes();
    one(begin, end.min(p))?;
    one(begin.max(FAMILY_PREFIX_END), end)
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

    /// The family `cf` (`None` for the default one), or the error naming a
    /// stale handle.
    fn family(&self, cf: Cf) -> Result<Option<Arc<Family>>> {
        if cf.is_default() {
            return Ok(None);
        }
        self.families.get(cf)
    }

    /// Runs `f` on the database of `cf` (with whether it is the default
    /// family's), holding a family's lock; `Ok(None)` if the family is
    /// newer than `snapshot`, so empty in it.
    fn with_db<T>(
        &self,
        cf: Cf,
        snapshot: Option<&LmdbSnapshot>,
        f: impl FnOnce(Db0, bool) -> Result<T>,
    ) -> Result<Option<T>> {
        let Some(fam) = self.family(cf)? else {
            return f(self.db, true).map(Some);
        };
        let live = fam.live();
        if !*live {
            return Err(fam.dropped());
        }
        if snapshot.is_some_and(|s| fam.created > s.epoch) {
            return Ok(None);
        }
        f(fam.db, false).map(Some)
    }

    /// Takes the writer mutex, with `MDB_NOSYNC` set as `sync` asks.
    fn writer(&self, sync: bool) -> Result<MutexGuard<'_, LmdbWriter>> {
        let mut w: MutexGuard<'_, LmdbWriter> =
            self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let want_nosync = !sync;
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
        Ok(w)
    }

    /// Runs `f` in one write transaction under the writer mutex, committing
    /// with or without sync as `opts` asks. `f` maps its heed errors with
    /// [`Lmdb::map_write_err`].
    fn with_write_txn<F>(&self, opts: &WriteOptions, what: &str, f: F) -> Result<()>
    where
        F: FnOnce(&mut RwTxn<'_>) -> Result<()>,
    {
        let _w = self.writer(opts.sync)?;
        let mut txn = self
            .env
            .write_txn()
            .map_err(|e| self.err(&format!("{what}: begin"), e))?;
        // On error the transaction is dropped, which aborts it.
        f(&mut txn)?;
        txn.commit()
            .map_err(|e| self.map_write_err(&format!("{what}: commit"), e))
    }

    /// The database of `fam` for a write, checked under the writer mutex
    /// (which `drop_cf` holds), so it stays open until the commit.
    fn write_db(fam: &Option<Arc<Family>>, default: Db0) -> Result<Db0> {
        match fam {
            None => Ok(default),
            Some(f) if *f.live() => Ok(f.db),
            Some(f) => Err(f.dropped()),
        }
    }

    /// A point read in `db` (the default family's if `hole`).
    fn get_in(
        &self,
        db: Db0,
        hole: bool,
        snapshot: Option<&Arc<LmdbSnapshot>>,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        if key.is_empty() || key.len() > MAX_KEY_SIZE || (hole && reserved(key)) {
            // Such a key can never have been stored (in this family).
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
            Some(s) => s.read(|txn| copy(db.get(txn, key), out)),
            None => {
                let txn = self.env.read_txn().map_err(|e| self.err("get: begin", e))?;
                copy(db.get(&txn, key), out)
            }
        }
    }

    /// The default family's entry count: the main database's, less the
    /// family records.
    fn default_entries(&self, txn: &RoTxn<'_, WithoutTls>) -> Option<u64> {
        let all = self.db.len(txn).ok()?;
        let records = self.db.range(txn, &RECORDS).ok()?.count() as u64;
        Some(all.saturating_sub(records))
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
        self.get_cf_into(opts, Cf::DEFAULT, key, out)
    }

    fn get_cf_into(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        out.clear();
        let snapshot = self.snapshot_of(opts)?;
        let got = self.with_db(cf, snapshot.map(|s| &**s), |db, hole| {
            self.get_in(db, hole, snapshot, key, out)
        })?;
        Ok(got.unwrap_or(false))
    }

    fn snapshot(&self) -> Result<Snapshot> {
        // Read before the transaction begins; see `Family::created`.
        let epoch = self.epoch.load(Ordering::SeqCst);
        let s =
            LmdbSnapshot::begin(&self.env, epoch).map_err(|e| self.err("snapshot: begin", e))?;
        Ok(Snapshot::new("lmdb", self.owner(), Arc::new(s)))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        let fam = self.family(cf)?;
        match fam {
            None => check_default_key(key, Some(value))?,
            Some(_) => check_key(key, Some(value))?,
        }
        self.with_write_txn(opts, "put", |txn| {
            Self::write_db(&fam, self.db)?
                .put(txn, key, value)
                .map_err(|e| self.map_write_err("put", e))
        })
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        let fam = self.family(cf)?;
        match fam {
            None => check_default_key(key, None)?,
            Some(_) => check_key(key, None)?,
        }
        self.with_write_txn(opts, "delete", |txn| {
            Self::write_db(&fam, self.db)?
                .delete(txn, key)
                .map(|_| ())
                .map_err(|e| self.map_write_err("delete", e))
        })
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        check_family_name(name)?;
        // Durable when it returns: the creating commit syncs.
        let _w = self.writer(true)?;
        if self.families.handle(name).is_some() {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists in this lmdb database"
            )));
        }
        let what = format!("create_cf {name:?}");
        let wtxn = self
            .env
            .write_txn()
            .map_err(|e| self.err(&format!("{what}: begin"), e))?;
        let db = self
            .env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener
                    .create_database::<Bytes, Bytes>(wtxn, Some(&format!("{FAMILY_PREFIX}{name}")))
                    .map(CommitOrAbort::<_, ()>::Commit)
            })
            .map_err(|e| match e {
                heed::Error::Mdb(MdbError::DbsFull) => Error::InvalidArgument(format!(
                    "lmdb {what}: every column-family slot is in use; reopen with a larger \
                     'max_column_families' option"
                )),
                e => self.map_write_err(&what, e),
            })?
            .unwrap_commit();
        // After the commit, before the family can be written.
        let created = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let family = Family {
            name: name.to_owned(),
            db,
            created,
            live: RwLock::new(true),
        };
        self.families.add(name, Some(Arc::new(family)))
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        // Durable when it returns: the dropping commit syncs. Holding the
        // writer mutex keeps every write out, so no open transaction has
        // modified the database (heed's condition for removing it).
        let _w = self.writer(true)?;
        let (cf, fam) = self.families.for_drop(name)?;
        let fam = fam.ok_or_else(|| crate::family::unknown_family("lmdb", cf))?;
        let what = format!("drop_cf {name:?}");
        // Waits for the reads using the handle; later ones find it dropped.
        let mut live = fam.live.write().unwrap_or_else(|p| p.into_inner());
        let mut txn = self
            .env
            .write_txn()
            .map_err(|e| self.err(&format!("{what}: begin"), e))?;
        // SAFETY: every copy of the handle is used only while holding
        // `fam.live` for reading and after checking it is true; we hold it
        // for writing and set it false below, so no copy is used after the
        // handle is closed. No transaction has modified the database
        // without committing: writes hold the writer mutex, which we hold.
        unsafe { fam.db.remove(&mut txn) }.map_err(|e| self.map_write_err(&what, e))?;
        // LMDB closed the handle in `remove`: the family is unusable in this
        // open whether or not the commit succeeds.
        *live = false;
        self.families.remove(cf);
        txn.commit()
            .map_err(|e| match self.map_write_err(&what, e) {
                Error::IoError(f) => Error::IoError(crate::IoFailure::new(
                    f.kind(),
                    format!(
                        "{f}; the family is closed and will reappear when the database is reopened"
                    ),
                )),
                e => e,
            })
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let snapshot = self.snapshot_of(opts)?.cloned();
        let fam = self.family(cf)?;
        let db = match &fam {
            None => self.db,
            Some(f) => {
                if !*f.live() {
                    return Err(f.dropped());
                }
                if snapshot.as_ref().is_some_and(|s| f.created > s.epoch) {
                    return Ok(Box::new(NeverValid(Ok(()))));
                }
                f.db
            }
        };
        Ok(Box::new(iter::LmdbIter::new(
            &self.env, db, fam, opts, snapshot,
        )?))
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        // Validate everything first: a rejected batch applies nothing.
        for op in batch {
            let check = if op.cf().is_default() {
                check_default_key
            } else {
                check_key
            };
            match op {
                BatchOp::Put { key, value, .. } => check(key, Some(value))?,
                BatchOp::Delete { key, .. } => check(key, None)?,
                // Range ends are compared, never stored: any length works.
                BatchOp::DeleteRange { .. } => {}
            }
        }
        // The families, looked up once per run of updates to one family.
        let mut fams: Vec<(Cf, Option<Arc<Family>>)> = Vec::new();
        if batch.uses_families() {
            for op in batch {
                if fams.last().is_none_or(|(cf, _)| *cf != op.cf()) {
                    fams.push((op.cf(), self.family(op.cf())?));
                }
            }
        }
        self.with_write_txn(opts, "write", |txn| {
            let fail = |e| self.map_write_err("write", e);
            let mut run = fams.iter();
            let mut cur: Option<(Cf, Db0)> = None;
            for op in batch {
                let cf = op.cf();
                let db = match cur {
                    _ if cf.is_default() => self.db,
                    Some((c, db)) if c == cf => db,
                    _ => {
                        // The runs were recorded in this order; checked
                        // live here, under the writer mutex.
                        let (_, fam) = run
                            .find(|(c, _)| *c == cf)
                            .ok_or_else(|| crate::family::unknown_family("lmdb", cf))?;
                        let db = Self::write_db(fam, self.db)?;
                        cur = Some((cf, db));
                        db
                    }
                };
                match op {
                    BatchOp::Put { key, value, .. } => db.put(txn, key, value).map_err(fail)?,
                    BatchOp::Delete { key, .. } => {
                        db.delete(txn, key).map_err(fail)?;
                    }
                    BatchOp::DeleteRange { begin, end, .. } => {
                        delete_range(db, txn, begin, end, cf.is_default()).map_err(fail)?
                    }
                }
            }
            Ok(())
        })
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
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
                self.default_entries(&txn).map(|n| n.to_string())
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
        let entries = self.default_entries(&txn)?;
        Some(format!(
            "lmdb.stat: page_size={} depth={} branch_pages={} leaf_pages={} overflow_pages={} \
             entries={}\nlmdb.info: map_size={} last_page_number={} last_txn_id={} \
             max_readers={} readers={}\n",
            s.page_size,
            s.depth,
            s.branch_pages,
            s.leaf_pages,
            s.overflow_pages,
            entries,
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

    fn keys(it: Box<dyn DbIterator + '_>) -> Vec<Vec<u8>> {
        Entries::from_first(it)
            .map(|kv| kv.expect("entry").0)
            .collect()
    }

    fn get(db: &dyn Db, cf: Cf, key: &[u8]) -> Option<Vec<u8>> {
        db.get_cf(&ReadOptions::default(), cf, key).expect("get_cf")
    }

    fn fill(db: &dyn Db, cf: Cf, tag: u8) {
        for k in 0..20u32 {
            db.put_cf(
                &WriteOptions::default(),
                cf,
                format!("k{k:02}").as_bytes(),
                &[tag],
            )
            .expect("put");
        }
    }

    #[test]
    fn families_are_isolated_and_their_records_stay_hidden() {
        let (_d, db) = open_tmp(&[]);
        let db = db.as_ref();
        let w = WriteOptions::default();
        let a = db.create_cf("a").expect("create a");
        let b = db.create_cf("b").expect("create b");
        assert_ne!(a, b);
        assert_eq!(db.cf_handle("b"), Some(b));
        assert!(matches!(db.create_cf("a"), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            db.create_cf("default"),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(db.cf_names(), ["a", "b", "default"]);
        fill(db, Cf::DEFAULT, b'0');
        fill(db, a, b'1');
        fill(db, b, b'2');
        db.delete_cf(&w, a, b"k03").expect("delete");
        assert_eq!(get(db, a, b"k03"), None);
        assert_eq!(get(db, b, b"k03"), Some(b"2".to_vec()));
        assert_eq!(get(db, Cf::DEFAULT, b"k03"), Some(b"0".to_vec()));
        let got: Vec<_> = db
            .multi_get_cf(&ReadOptions::default(), b, &[b"k00", b"zz"])
            .into_iter()
            .map(|r| r.expect("multi_get"))
            .collect();
        assert_eq!(got, [Some(b"2".to_vec()), None]);

        // The main database holds the families' records next to the
        // default family's keys; none of them shows through `default`.
        let record = format!("{FAMILY_PREFIX}a");
        assert_eq!(get(db, Cf::DEFAULT, record.as_bytes()), None);
        assert!(matches!(
            db.put(&w, record.as_bytes(), b"x"),
            Err(Error::InvalidArgument(m)) if m.contains("reserve")
        ));
        assert!(db.delete(&w, record.as_bytes()).is_err());
        db.put(&w, b"\x1f", b"below").expect("put");
        db.put(&w, b"\x1fvmemkv.cf\x20", b"above").expect("put");
        let all = keys(db.iter(&ReadOptions::default()).expect("iter"));
        assert_eq!(all.len(), 22);
        assert!(!all.iter().any(|k| reserved(k)));
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek(record.as_bytes());
        assert_eq!(it.key(), b"\x1fvmemkv.cf\x20");
        it.prev();
        assert_eq!(it.key(), b"\x1f");
        it.seek_for_prev(record.as_bytes());
        assert_eq!(it.key(), b"\x1f");
        it.next();
        assert_eq!(it.key(), b"\x1fvmemkv.cf\x20");
        drop(it);
        assert_eq!(db.property("lmdb.entries").as_deref(), Some("22"));
        // A range over all of `default` spares the records.
        let mut wipe = WriteBatch::new();
        wipe.delete_range(b"\x00", b"\xff");
        db.write(&w, &wipe).expect("wipe default");
        assert!(keys(db.iter(&ReadOptions::default()).expect("iter")).is_empty());
        assert_eq!(
            keys(db.iter_cf(&ReadOptions::default(), a).expect("iter")).len(),
            19
        );
        assert_eq!(get(db, b, b"k19"), Some(b"2".to_vec()));

        // iter_cf honours bounds as `iter` does, within the family.
        let ro = ReadOptions::default().with_bounds(Some(b"k05"), Some(b"k09"));
        let mut it = db.iter_cf(&ro, b).expect("iter_cf");
        it.seek_to_last();
        assert_eq!((it.key(), it.value()), (&b"k08"[..], &b"2"[..]));
        it.seek(b"a");
        assert_eq!(it.key(), b"k05");
        it.prev();
        assert!(!it.valid());
        it.seek_for_prev(b"k06x");
        assert_eq!(it.key(), b"k06");
        it.seek(b"k09");
        assert!(!it.valid());
        it.status().expect("status");
        drop(it);
        let ro = ReadOptions::default().with_bounds(Some(b"k02"), Some(b"k05"));
        assert_eq!(
            keys(db.iter_cf(&ro, a).expect("iter_cf")),
            [b"k02".to_vec(), b"k04".to_vec()]
        );
    }

    #[test]
    fn a_snapshot_covers_every_family_even_one_in_a_reused_slot() {
        let (_d, db) = open_tmp(&[]);
        let db = db.as_ref();
        let w = WriteOptions::default();
        let a = db.create_cf("a").expect("create a");
        let b = db.create_cf("b").expect("create b");
        let gone = db.create_cf("gone").expect("create gone");
        db.put_cf(&w, a, b"before", b"1").expect("put");
        db.put_cf(&w, gone, b"x", b"dropped data").expect("put");
        let snap = db.snapshot().expect("snapshot");
        let at = ReadOptions::default().with_snapshot(&snap);
        // The snapshot's transaction reads `gone` first, so LMDB has its
        // handle loaded when the slot is reused below.
        assert_eq!(
            db.get_cf(&at, gone, b"x").expect("get"),
            Some(b"dropped data".to_vec())
        );
        db.put_cf(&w, a, b"x", b"1").expect("put");
        let mut batch = WriteBatch::new();
        batch.put_cf(b, b"x", b"2");
        batch.delete_cf(a, b"before");
        db.write(&w, &batch).expect("write");
        db.drop_cf("gone").expect("drop");
        let c = db.create_cf("c").expect("create c");
        db.put_cf(&w, c, b"y", b"3").expect("put");
        for cf in [a, b, c] {
            assert_eq!(db.get_cf(&at, cf, b"x").expect("get"), None);
        }
        assert_eq!(db.get_cf(&at, c, b"y").expect("get"), None);
        assert!(keys(db.iter_cf(&at, c).expect("iter")).is_empty());
        assert!(keys(db.iter_cf(&at, b).expect("iter")).is_empty());
        assert_eq!(
            keys(db.iter_cf(&at, a).expect("iter")),
            [b"before".to_vec()]
        );
        assert!(matches!(
            db.get_cf(&at, gone, b"x"),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(get(db, b, b"x"), Some(b"2".to_vec()));
        assert_eq!(get(db, c, b"y"), Some(b"3".to_vec()));
        assert_eq!(get(db, c, b"x"), None);
    }

    #[test]
    fn drop_recreate_and_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = EngineOptions::default().set("map_size", 64 << 20);
        let w = WriteOptions::default();
        let long = "n".repeat(255);
        {
            let db = open(dir.path(), &o).expect("open");
            let a = db.create_cf("a").expect("create a");
            let gone = db.create_cf("gone").expect("create gone");
            let l = db.create_cf(&long).expect("a 255-byte name");
            db.put_cf(&w, a, b"k", b"a").expect("put");
            db.put_cf(&w, l, b"k", b"long").expect("put");
            db.put(&w, b"k", b"default").expect("put");
            db.put_cf(&w, gone, b"k", b"old").expect("put");
            db.put_cf(&w, gone, b"k2", b"old").expect("put");
            let mut it = db.iter_cf(&ReadOptions::default(), gone).expect("iter");
            it.seek_to_first();
            assert_eq!(it.key(), b"k");
            db.drop_cf("gone").expect("drop");
            // The handle is closed: the iterator stops with an error.
            it.next();
            assert!(!it.valid());
            assert!(matches!(it.status(), Err(Error::InvalidArgument(m)) if m.contains("gone")));
            drop(it);
            for r in [
                db.get_cf(&ReadOptions::default(), gone, b"k").map(|_| ()),
                db.put_cf(&w, gone, b"k", b"v"),
                db.delete_cf(&w, gone, b"k"),
                db.iter_cf(&ReadOptions::default(), gone).map(|_| ()),
            ] {
                assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
            }
            assert!(matches!(db.drop_cf("gone"), Err(Error::InvalidArgument(_))));
            assert!(matches!(
                db.drop_cf("default"),
                Err(Error::InvalidArgument(_))
            ));
            let again = db.create_cf("gone").expect("create again");
            assert_ne!(again, gone);
            assert_eq!(get(db.as_ref(), again, b"k"), None);
            assert!(db.get_cf(&ReadOptions::default(), gone, b"k").is_err());
            db.put_cf(&w, again, b"k3", b"new").expect("put");
        }
        let db = open(dir.path(), &o).expect("reopen");
        assert_eq!(db.cf_names(), ["a", "default", "gone", long.as_str()]);
        let a = db.cf_handle("a").expect("a after reopen");
        let gone = db.cf_handle("gone").expect("gone after reopen");
        let l = db.cf_handle(&long).expect("long after reopen");
        assert_eq!(get(db.as_ref(), a, b"k"), Some(b"a".to_vec()));
        assert_eq!(get(db.as_ref(), l, b"k"), Some(b"long".to_vec()));
        assert_eq!(
            get(db.as_ref(), Cf::DEFAULT, b"k"),
            Some(b"default".to_vec())
        );
        assert_eq!(
            keys(db.iter_cf(&ReadOptions::default(), gone).expect("iter")),
            [b"k3".to_vec()]
        );
        assert_eq!(
            keys(db.iter(&ReadOptions::default()).expect("iter")),
            [b"k".to_vec()]
        );
        drop(db);
        // Three families do not fit in two slots: the option is named.
        let small = o.clone().set("max_column_families", 2);
        let e = open(dir.path(), &small).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("max_column_families")));
        let db = open(dir.path(), &o.clone().set("max_column_families", 3)).expect("open");
        let e = db.create_cf("d").err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("max_column_families")));
        // A dropped family's slot serves the next one.
        db.drop_cf("a").expect("drop");
        db.create_cf("d").expect("create in the freed slot");
    }

    #[test]
    fn reads_racing_drop_and_recreate_see_their_own_family_or_an_error() {
        let (_d, db) = open_tmp(&[]);
        let db = db.as_ref();
        // Each generation's family takes the slot LMDB freed when the one
        // before was dropped; a read through a stale handle must never
        // reach the new family's data.
        let current = Mutex::new(None::<(Cf, u32)>);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut checked = 0u32;
                    while !done.load(Ordering::Relaxed) {
                        let Some((cf, gen)) = *current.lock().expect("lock") else {
                            continue;
                        };
                        let want = gen.to_le_bytes().to_vec();
                        match db.get_cf(&ReadOptions::default(), cf, b"k") {
                            Ok(v) => assert_eq!(v, Some(want.clone())),
                            Err(e) => assert!(matches!(e, Error::InvalidArgument(_)), "{e}"),
                        }
                        if let Ok(it) = db.iter_cf(&ReadOptions::default(), cf) {
                            for kv in Entries::from_first(it) {
                                match kv {
                                    Ok((_, v)) => assert_eq!(v, want),
                                    Err(e) => assert!(matches!(e, Error::InvalidArgument(_))),
                                }
                            }
                        }
                        checked += 1;
                    }
                    assert!(checked > 0);
                });
            }
            for gen in 0..100u32 {
                let cf = db.create_cf("f").expect("create");
                db.put_cf(&WriteOptions::default(), cf, b"k", &gen.to_le_bytes())
                    .expect("put");
                db.put_cf(&WriteOptions::default(), cf, b"k2", &gen.to_le_bytes())
                    .expect("put");
                *current.lock().expect("lock") = Some((cf, gen));
                std::thread::yield_now();
                db.drop_cf("f").expect("drop");
            }
            done.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn a_database_from_before_families_opens_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            // What the adapter wrote before families: the unnamed database
            // only, in an environment with one named-database slot.
            let mut eo = EnvOpenOptions::new().read_txn_without_tls();
            eo.map_size(64 << 20).max_dbs(1);
            // SAFETY: a fresh directory, opened once, closed below.
            let env = unsafe { eo.open(dir.path()) }.expect("env");
            let wtxn = env.write_txn().expect("txn");
            let main: Db0 = env
                .create_databases_and_commit(wtxn, |o, t| {
                    o.create_database::<Bytes, Bytes>(t, None)
                        .map(CommitOrAbort::<_, ()>::Commit)
                })
                .expect("main")
                .unwrap_commit();
            let mut t = env.write_txn().expect("txn");
            main.put(&mut t, b"a", b"1").expect("put");
            main.put(&mut t, b"\x1f", b"2").expect("put");
            t.commit().expect("commit");
            env.prepare_for_closing().wait();
        }
        let o = EngineOptions::default().set("map_size", 64 << 20);
        let db = open(dir.path(), &o).expect("open");
        assert_eq!(db.cf_names(), ["default"]);
        assert_eq!(
            keys(db.iter(&ReadOptions::default()).expect("iter")),
            [b"\x1f".to_vec(), b"a".to_vec()]
        );
        let cf = db.create_cf("new").expect("create");
        db.put_cf(&WriteOptions::default(), cf, b"a", b"3")
            .expect("put");
        drop(db);
        let db = open(dir.path(), &o).expect("reopen");
        assert_eq!(get(db.as_ref(), Cf::DEFAULT, b"a"), Some(b"1".to_vec()));
        let cf = db.cf_handle("new").expect("new after reopen");
        assert_eq!(get(db.as_ref(), cf, b"a"), Some(b"3".to_vec()));
        assert_eq!(db.property("lmdb.entries").as_deref(), Some("2"));
    }
}
