//! The fjall adapter (cargo feature `fjall`, crate `fjall` 3): an LSM-tree
//! in pure Rust, in two variants.
//!
//! * `fjall`: one keyspace (`"default"`) with fjall's default options.
//! * `fjall-blob`: the same keyspace with key-value separation
//!   (`KeyspaceCreateOptions::with_kv_separation`): values of at least
//!   `blob_separation_threshold` bytes (option, default fjall's 1 KiB) go to
//!   blob files, as in RocksDB-BlobDB.
//!
//! Column families are keyspaces of the one fjall database: the default
//! family is the keyspace `"default"` (where it always was), and family
//! `name` is the keyspace `name` (the adapter stores nothing else, so no
//! family name can collide with its own data; `default` itself is taken).
//! Every family is created with the options of the default one, so under
//! fjall-blob each separates values as the default family does. On open,
//! every keyspace the database holds is opened as a family. A batch across
//! families is one fjall batch (one sequence number); a snapshot is one
//! sequence number, so it covers every family; `drop_cf` deletes the
//! keyspace (its files go once the last iterator on it is dropped). The
//! default family is addressed without consulting the family table.
//!
//! Durability, mapped onto fjall's `PersistMode`s:
//! * every write goes to fjall's journal and is handed to the OS before the
//!   call returns (`PersistMode::Buffer`, fjall's default): it survives a
//!   process crash, not a power loss, as `WriteOptions::sync=false` asks;
//! * `sync=true` persists the journal with `PersistMode::SyncAll` (fsync)
//!   before the call returns;
//! * `disable_wal` cannot be honoured per write (fjall journals every
//!   write); such writes are journalled like any other, which is more
//!   durable than asked, never less;
//! * [`Db::flush`] syncs the journal (`SyncAll`) and writes the memtable out
//!   to a table, waiting for it.
//!
//! Reads: a point read without a snapshot reads the latest committed state;
//! [`Db::snapshot`] is a fjall `Snapshot` (a sequence number that holds back
//! garbage collection); an iterator takes one at creation and reads as of
//! it, as the trait documents. A `WriteBatch` is one fjall batch, committed
//! under one sequence number: readers see it whole or not at all, and after
//! a crash it is wholly present or absent.
//!
//! fjall's batches have no range delete: a batch holding `delete_range`
//! lists the keys in the range from a snapshot and deletes them in the same
//! fjall batch. Such a batch holds the adapter's writer lock exclusively
//! (ordinary writes share it), so no concurrent write can slip between the
//! listing and the commit.
//!
//! Keys: 1 to 65,535 bytes (fjall's limits; an empty key is an
//! `InvalidArgument`, where fjall itself would panic). Values: up to
//! 2^32 - 1 bytes.
//!
//! Locking: fjall locks `<dir>/lock` with `flock`, which a forked child
//! inherits. The adapter first takes vmemkv's POSIX record lock on
//! `<dir>/LOCK` (not inherited; a second open is `Busy`), and under it
//! replaces fjall's lock file with a fresh one, so that a child forked while
//! an earlier handle was open cannot keep the database locked after the
//! parent closed it.
//!
//! MultiScan: the trait's default, one snapshot iterator per range.

use std::borrow::Cow;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use fjall::{
    Database, KeyspaceCreateOptions, KvSeparationOptions, PersistMode, Readable,
    Snapshot as FjSnapshot,
};

use super::collapse::{collapse_families, has_delete_range};
use crate::family::check_family_name;
use crate::lock::DirLock;
use crate::{
    check_sizes, BatchOp, Cf, Db, DbIterator, EngineOptions, Error, Families, IoFailure, Limits,
    OptionMap, ReadOptions, Result, Snapshot, WriteBatch, WriteOptions,
};

/// fjall's largest key (a `u16` length).
pub const MAX_KEY_SIZE: usize = u16::MAX as usize;

/// fjall's largest value (a `u32` length).
pub const MAX_VALUE_SIZE: usize = u32::MAX as usize;

/// Every engine option the fjall adapters accept.
pub const FJALL_OPTION_KEYS: &[&str] = &[
    "cache_size",
    "max_memtable_size",
    "max_write_buffer_size",
    "max_journaling_size",
    "worker_threads",
    "blob_separation_threshold",
];

const LIMITS: Limits = Limits {
    max_key_size: Some(MAX_KEY_SIZE),
    max_value_size: Some(MAX_VALUE_SIZE),
};

const KEYSPACE: &str = Cf::DEFAULT_NAME;

/// Maps a fjall error onto the trait's categories, keeping the
/// `io::ErrorKind` of an I/O error in the message.
pub(crate) fn map_err(what: &str, e: fjall::Error) -> Error {
    match e {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => {
            Error::IoError(IoFailure::new(io.kind(), format!("fjall {what}: {io}")))
        }
        fjall::Error::KeyspaceDeleted => Error::InvalidArgument(format!(
            "fjall {what}: the column family's keyspace was dropped"
        )),
        fjall::Error::Locked => Error::Busy(format!(
            "fjall {what}: the database lock is held by another handle"
        )),
        fjall::Error::Poisoned => Error::Poisoned(format!(
            "fjall {what}: an earlier journal write or sync failed; reopen the database"
        )),
        e @ (fjall::Error::Storage(_)
        | fjall::Error::JournalRecovery(_)
        | fjall::Error::InvalidVersion(_)
        | fjall::Error::Decompress(_)
        | fjall::Error::InvalidTrailer
        | fjall::Error::InvalidTag(_)
        | fjall::Error::Unrecoverable) => Error::Corruption(format!("fjall {what}: {e:?}")),
        e => Error::IoError(format!("fjall {what}: {e:?}").into()),
    }
}

/// Opens (creating if allowed) a fjall database in directory `path`; `blob`
/// selects key-value separation.
pub fn open(path: &Path, opts: &EngineOptions, blob: bool) -> Result<Box<dyn Db>> {
    let name = if blob { "fjall-blob" } else { "fjall" };
    let mut om = OptionMap::new(name, opts);
    let cache_size = om.take::<u64>("cache_size")?;
    let max_memtable_size = om.take::<u64>("max_memtable_size")?;
    let max_write_buffer_size = om.take::<u64>("max_write_buffer_size")?;
    let max_journaling_size = om.take::<u64>("max_journaling_size")?;
    let worker_threads = om.take::<usize>("worker_threads")?;
    let threshold = om.take::<u32>("blob_separation_threshold")?;
    om.finish()?;
    if threshold.is_some() && !blob {
        return Err(Error::InvalidArgument(
            "fjall option 'blob_separation_threshold' applies to fjall-blob only".into(),
        ));
    }

    let exists = path.join("version").exists();
    let lock = super::open_dir::prepare(name, path, exists, opts)?;
    renew_fjall_lock_file(path, name)?;

    let mut b = Database::builder(path);
    if let Some(n) = cache_size {
        b = b.cache_size(n);
    }
    if let Some(n) = max_write_buffer_size {
        #[allow(deprecated)] // fjall 3 marks it "todo", but it is the knob.
        {
            b = b.max_write_buffer_size(Some(n));
        }
    }
    if let Some(n) = max_journaling_size {
        b = b.max_journaling_size(n);
    }
    if let Some(n) = worker_threads {
        b = b.worker_threads(n);
    }
    let db = b
        .open()
        .map_err(|e| map_err(&format!("open {}", path.display()), e))?;
    let config = KeyspaceConfig {
        max_memtable_size,
        blob,
        threshold,
    };
    let keyspace = config.open(&db, name, path, KEYSPACE)?;
    let families = Families::new(name, keyspace.clone());
    // Every other keyspace is a family created earlier (the adapter keeps
    // nothing else in the database).
    for ks in db.list_keyspace_names() {
        let ks: &str = &ks;
        if ks != KEYSPACE {
            families.add(ks, config.open(&db, name, path, ks)?)?;
        }
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
    Ok(Box::new(Fjall {
        name,
        db,
        keyspace,
        families,
        config,
        path: path.to_path_buf(),
        ddl: Mutex::new(()),
        writers: RwLock::new(()),
        id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        _lock: lock,
    }))
}

/// The keyspace options every family is created with.
struct KeyspaceConfig {
    max_memtable_size: Option<u64>,
    blob: bool,
    threshold: Option<u32>,
}

impl KeyspaceConfig {
    fn options(&self) -> KeyspaceCreateOptions {
        let mut o = KeyspaceCreateOptions::default();
        if let Some(n) = self.max_memtable_size {
            o = o.max_memtable_size(n);
        }
        if self.blob {
            let mut kv = KvSeparationOptions::default();
            if let Some(t) = self.threshold {
                kv.separation_threshold = t;
            }
            o = o.with_kv_separation(Some(kv));
        }
        o
    }

    /// Opens (creating if new) keyspace `ks`, refusing one whose key-value
    /// separation is not the variant's: a database is wholly one or the other.
    fn open(&self, db: &Database, name: &str, path: &Path, ks: &str) -> Result<fjall::Keyspace> {
        let keyspace = db
            .keyspace(ks, || self.options())
            .map_err(|e| map_err(&format!("open keyspace {ks:?}"), e))?;
        if keyspace.is_kv_separated() != self.blob {
            return Err(Error::InvalidArgument(format!(
                "{name}: {} holds a fjall database {} key-value separation (keyspace {ks:?}); \
                 open it as '{}'",
                path.display(),
                if self.blob { "without" } else { "with" },
                if self.blob { "fjall" } else { "fjall-blob" },
            )));
        }
        Ok(keyspace)
    }
}

/// Replaces `<dir>/lock` (fjall's `flock` file) with a fresh file, under
/// the adapter's own lock; see the module docs.
fn renew_fjall_lock_file(path: &Path, name: &str) -> Result<()> {
    let lock = path.join("lock");
    if !lock.exists() {
        return Ok(());
    }
    let tmp = path.join("lock.new");
    std::fs::write(&tmp, b"")
        .map_err(|e| Error::io(format!("{name}: create {}", tmp.display()), e))?;
    std::fs::rename(&tmp, &lock)
        .map_err(|e| Error::io(format!("{name}: replace {}", lock.display()), e))
}

struct Fjall {
    name: &'static str,
    db: Database,
    /// The default family's keyspace, used without the table.
    keyspace: fjall::Keyspace,
    /// Every family, `default` included.
    families: Families<fjall::Keyspace>,
    config: KeyspaceConfig,
    path: std::path::PathBuf,
    /// Serialises `create_cf` and `drop_cf`, so a name is checked and
    /// created (or looked up and deleted) with no other change between.
    ddl: Mutex<()>,
    /// Shared by ordinary writes, exclusive for batches with a
    /// `delete_range` (see the module docs) and for `drop_cf`, so that a
    /// write which found its family's keyspace completes before the
    /// keyspace is deleted.
    writers: RwLock<()>,
    id: usize,
    // Declared last so it is released after fjall is closed.
    _lock: DirLock,
}

fn check_key(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument(
            "fjall: empty keys are not supported (fjall requires 1..=65535-byte keys)".into(),
        ));
    }
    check_sizes(&LIMITS, key, value)
}

impl Fjall {
    /// The keyspace of family `cf`: the default one without a lookup.
    fn ks(&self, cf: Cf) -> Result<Cow<'_, fjall::Keyspace>> {
        if cf.is_default() {
            Ok(Cow::Borrowed(&self.keyspace))
        } else {
            self.families.get(cf).map(Cow::Owned)
        }
    }

    fn snapshot_of<'s>(&self, ro: &'s ReadOptions) -> Result<Option<&'s FjSnapshot>> {
        ro.snapshot
            .as_ref()
            .map(|s| s.downcast::<FjSnapshot>(self.name, self.id))
            .transpose()
    }

    fn persist_if(&self, opts: &WriteOptions, what: &str) -> Result<()> {
        if opts.sync {
            self.db
                .persist(PersistMode::SyncAll)
                .map_err(|e| map_err(&format!("{what}: sync"), e))?;
        }
        Ok(())
    }
}

impl Db for Fjall {
    fn name(&self) -> &'static str {
        self.name
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
        let ks = self.ks(cf)?;
        let snapshot = self.snapshot_of(opts)?;
        if key.is_empty() || key.len() > MAX_KEY_SIZE {
            return Ok(false);
        }
        let got = match snapshot {
            Some(s) => s.get(&*ks, key),
            None => ks.get(key),
        }
        .map_err(|e| map_err("get", e))?;
        Ok(match got {
            Some(v) => {
                out.extend_from_slice(&v);
                true
            }
            None => false,
        })
    }

    fn multi_get_cf(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let ks = match self.ks(cf) {
            Ok(ks) => ks,
            Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
        };
        let snap = match self.snapshot_of(opts) {
            Ok(Some(s)) => s.clone(),
            Ok(None) => self.db.snapshot(),
            Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
        };
        keys.iter()
            .map(|k| {
                if k.is_empty() || k.len() > MAX_KEY_SIZE {
                    return Ok(None);
                }
                snap.get(&*ks, k)
                    .map(|v| v.map(|v| v.to_vec()))
                    .map_err(|e| map_err("multi_get", e))
            })
            .collect()
    }

    fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot::new(self.name, self.id, self.db.snapshot()))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key, Some(value))?;
        let _w = self.writers.read().unwrap_or_else(|p| p.into_inner());
        self.ks(cf)?
            .insert(key, value)
            .map_err(|e| map_err("put", e))?;
        self.persist_if(opts, "put")
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        check_key(key, None)?;
        let _w = self.writers.read().unwrap_or_else(|p| p.into_inner());
        self.ks(cf)?.remove(key).map_err(|e| map_err("delete", e))?;
        self.persist_if(opts, "delete")
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        // fjall panics on an invalid keyspace name; check it first.
        check_family_name(name)?;
        let _d = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        if self.families.handle(name).is_some() {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists in this {} database",
                self.name
            )));
        }
        let ks = self.config.open(&self.db, self.name, &self.path, name)?;
        self.families.add(name, ks)
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let _d = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let (cf, ks) = self.families.for_drop(name)?;
        let _w = self.writers.write().unwrap_or_else(|p| p.into_inner());
        self.db
            .delete_keyspace(ks)
            .map_err(|e| map_err(&format!("drop_cf {name:?}"), e))?;
        self.families.remove(cf);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        let mut checked = Cf::DEFAULT;
        for op in batch {
            match op {
                BatchOp::Put { key, value, .. } => check_key(key, Some(value))?,
                BatchOp::Delete { key, .. } => check_key(key, None)?,
                BatchOp::DeleteRange { .. } => {}
            }
            // An unknown family fails the whole batch, even an update that
            // would change nothing (an empty range).
            if op.cf() != checked {
                self.families.get(op.cf())?;
                checked = op.cf();
            }
        }
        // Collapsed even without a range delete: fjall commits a batch under
        // one sequence number, so two updates of one key must not both go in.
        let (_exclusive, _shared);
        if has_delete_range(batch) {
            _exclusive = self.writers.write().unwrap_or_else(|p| p.into_inner());
        } else {
            _shared = self.writers.read().unwrap_or_else(|p| p.into_inner());
        }
        let snap = self.db.snapshot();
        let ops = collapse_families(batch, |cf, lo, hi| {
            snap.range(&*self.ks(cf)?, lo..hi)
                .map(|g| g.key().map(|k| k.to_vec()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| map_err("write: delete_range listing", e))
        })?;
        drop(snap);
        let mut fb = self.db.batch();
        // The updates come family by family: one keyspace lookup each.
        let mut ks: Option<(Cf, Cow<'_, fjall::Keyspace>)> = None;
        for ((cf, k), v) in ops {
            let ks = match &ks {
                Some((c, ks)) if *c == cf => ks,
                _ => &ks.insert((cf, self.ks(cf)?)).1,
            };
            match v {
                Some(v) => fb.insert(ks, k, v),
                None => fb.remove(ks, k),
            }
        }
        if fb.is_empty() {
            return Ok(());
        }
        let fb = if opts.sync {
            fb.durability(Some(PersistMode::SyncAll))
        } else {
            fb
        };
        fb.commit().map_err(|e| map_err("write", e))
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let keyspace = self.ks(cf)?.into_owned();
        let snap = match self.snapshot_of(opts)? {
            Some(s) => s.clone(),
            None => self.db.snapshot(),
        };
        Ok(Box::new(FjallIter {
            snap,
            keyspace,
            lower: opts.iterate_lower_bound.clone(),
            upper: opts.iterate_upper_bound.clone(),
            cur: None,
            inner: None,
            status: Ok(()),
        }))
    }

    /// Syncs the journal and writes every family's memtable to a table.
    fn flush(&self) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| map_err("flush: sync journal", e))?;
        for (_, name, ks) in self.families.all() {
            ks.rotate_memtable_and_wait()
                .map_err(|e| map_err(&format!("flush: memtable of family {name:?}"), e))?;
        }
        Ok(())
    }

    fn compact_range(&self, _begin: Option<&[u8]>, _end: Option<&[u8]>) -> Result<()> {
        // fjall compacts a whole keyspace; a bounded range compacts it all.
        self.keyspace
            .major_compact()
            .map_err(|e| map_err("compact_range", e))
    }

    fn wait_for_background_work(&self) -> Result<()> {
        let t0 = std::time::Instant::now();
        while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
            if t0.elapsed() > std::time::Duration::from_secs(600) {
                return Err(Error::Incomplete(format!(
                    "{}: background work still running after 600 s",
                    self.name
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    /// Properties are named `fjall.<name>` for both variants, and also
    /// `fjall-blob.<name>` for fjall-blob (db_bench asks `<engine>.stats`).
    fn property(&self, name: &str) -> Option<String> {
        if name == "compat.multiscan" {
            return Some("per-range: one snapshot iterator per range".to_owned());
        }
        let rest = name
            .strip_prefix("fjall.")
            .or_else(|| name.strip_prefix(&format!("{}.", self.name)))?;
        match rest {
            "stats" => self.statistics(),
            "version" => Some(env!("VMEMKV_COMPAT_VERSION_FJALL").to_owned()),
            "disk_size" => self.db.disk_space().ok().map(|n| n.to_string()),
            "approximate_len" => Some(self.keyspace.approximate_len().to_string()),
            "table_count" => Some(self.keyspace.table_count().to_string()),
            "blob_file_count" => Some(self.keyspace.blob_file_count().to_string()),
            _ => None,
        }
    }

    fn statistics(&self) -> Option<String> {
        Some(format!(
            "{}: kv_separated={} tables={} l0_tables={} blob_files={} fragmented_blob_bytes={} \
             sealed_memtables={} write_buffer_size={} journals={} disk_space={} \
             outstanding_flushes={} active_compactions={} compactions_completed={} \
             cache_size={} cache_capacity={}\n",
            self.name,
            self.keyspace.is_kv_separated(),
            self.keyspace.table_count(),
            self.keyspace.l0_table_count(),
            self.keyspace.blob_file_count(),
            self.keyspace.fragmented_blob_bytes(),
            self.keyspace.sealed_memtable_count(),
            self.db.write_buffer_size(),
            self.db.journal_count(),
            self.db.disk_space().unwrap_or(0),
            self.db.outstanding_flushes(),
            self.db.active_compactions(),
            self.db.compactions_completed(),
            self.db.cache_size(),
            self.db.cache_capacity(),
        ))
    }
}

/// Which way the inner fjall iterator runs.
enum Dir {
    Forward,
    Backward,
}

/// A cursor over one fjall snapshot. fjall's iterators run one way over a
/// fixed range; the cursor opens a new range iterator whenever it seeks or
/// turns around, starting just past the current key.
struct FjallIter {
    snap: FjSnapshot,
    keyspace: fjall::Keyspace,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    cur: Option<(fjall::Slice, fjall::Slice)>,
    inner: Option<(fjall::Iter, Dir)>,
    status: Result<()>,
}

fn is_empty_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

impl FjallIter {
    fn lower_bound(&self) -> Bound<Vec<u8>> {
        self.lower.clone().map_or(Bound::Unbounded, Bound::Included)
    }

    fn upper_bound(&self) -> Bound<Vec<u8>> {
        self.upper.clone().map_or(Bound::Unbounded, Bound::Excluded)
    }

    /// Starts iterating `[lo, hi]` in direction `dir` and steps once.
    fn start(&mut self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, dir: Dir) {
        self.cur = None;
        self.inner = None;
        if self.status.is_err() || is_empty_range(&lo, &hi) {
            return;
        }
        let it = self.snap.range(&self.keyspace, (lo, hi));
        self.inner = Some((it, dir));
        self.step();
    }

    fn step(&mut self) {
        let Some((it, dir)) = self.inner.as_mut() else {
            self.cur = None;
            return;
        };
        let got = match dir {
            Dir::Forward => it.next(),
            Dir::Backward => it.next_back(),
        };
        match got.map(|g| g.into_inner()) {
            Some(Ok((k, v))) => self.cur = Some((k, v)),
            Some(Err(e)) => {
                self.status = Err(map_err("iterator", e));
                self.cur = None;
                self.inner = None;
            }
            None => {
                self.cur = None;
                self.inner = None;
            }
        }
    }

    /// `a` or `b`, whichever lower bound starts later.
    fn max_lower(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
        match (&a, &b) {
            (Bound::Unbounded, _) => b,
            (_, Bound::Unbounded) => a,
            (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
                if x > y || (x == y && matches!(a, Bound::Excluded(_))) {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// `a` or `b`, whichever upper bound ends earlier.
    fn min_upper(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
        match (&a, &b) {
            (Bound::Unbounded, _) => b,
            (_, Bound::Unbounded) => a,
            (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
                if x < y || (x == y && matches!(a, Bound::Excluded(_))) {
                    a
                } else {
                    b
                }
            }
        }
    }
}

impl DbIterator for FjallIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) {
        let (lo, hi) = (self.lower_bound(), self.upper_bound());
        self.start(lo, hi, Dir::Forward);
    }

    fn seek_to_last(&mut self) {
        let (lo, hi) = (self.lower_bound(), self.upper_bound());
        self.start(lo, hi, Dir::Backward);
    }

    fn seek(&mut self, key: &[u8]) {
        let lo = Self::max_lower(Bound::Included(key.to_vec()), self.lower_bound());
        let hi = self.upper_bound();
        self.start(lo, hi, Dir::Forward);
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        let lo = self.lower_bound();
        let hi = Self::min_upper(Bound::Included(key.to_vec()), self.upper_bound());
        self.start(lo, hi, Dir::Backward);
    }

    fn next(&mut self) {
        match (&self.cur, &self.inner) {
            (None, _) => {}
            (Some(_), Some((_, Dir::Forward))) => self.step(),
            (Some((k, _)), _) => {
                let lo = Bound::Excluded(k.to_vec());
                let hi = self.upper_bound();
                self.start(lo, hi, Dir::Forward);
            }
        }
    }

    fn prev(&mut self) {
        match (&self.cur, &self.inner) {
            (None, _) => {}
            (Some(_), Some((_, Dir::Backward))) => self.step(),
            (Some((k, _)), _) => {
                let lo = self.lower_bound();
                let hi = Bound::Excluded(k.to_vec());
                self.start(lo, hi, Dir::Backward);
            }
        }
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(_, v)| v)
    }

    fn status(&self) -> Result<()> {
        self.status.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Entries;

    fn open_tmp(blob: bool) -> (tempfile::TempDir, Box<dyn Db>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), &EngineOptions::default(), blob).expect("open");
        (dir, db)
    }

    #[test]
    fn cursor_turns_and_bounds() {
        for blob in [false, true] {
            let (_d, db) = open_tmp(blob);
            for i in 0..20u32 {
                db.put(
                    &WriteOptions::default(),
                    format!("k{i:02}").as_bytes(),
                    &vec![b'v'; if i % 2 == 0 { 4 } else { 4000 }],
                )
                .expect("put");
            }
            let ro = ReadOptions::default().with_bounds(Some(b"k05"), Some(b"k09"));
            let mut it = db.iter(&ro).expect("iter");
            assert!(!it.valid());
            it.seek_to_last();
            assert_eq!(it.key(), b"k08");
            it.prev();
            assert_eq!(it.key(), b"k07");
            assert_eq!(it.value().len(), 4000);
            it.next();
            assert_eq!(it.key(), b"k08");
            it.next();
            assert!(!it.valid());
            it.seek(b"a");
            assert_eq!(it.key(), b"k05");
            it.prev();
            assert!(!it.valid());
            it.seek_for_prev(b"zzz");
            assert_eq!(it.key(), b"k08");
            it.seek_for_prev(b"k06x");
            assert_eq!(it.key(), b"k06");
            it.seek(b"k09");
            assert!(!it.valid());
            it.status().expect("status");
            let all: Vec<_> = Entries::from_first(db.iter(&ReadOptions::default()).expect("it"))
                .collect::<Result<_>>()
                .expect("scan");
            assert_eq!(all.len(), 20);
            assert!(db
                .property("fjall.stats")
                .is_some_and(|s| s.contains(&format!("kv_separated={blob}"))));
            assert!(db
                .property(&format!("{}.stats", db.name()))
                .is_some_and(|s| s.contains("tables=")));
        }
    }

    #[test]
    fn variants_refuse_each_others_databases_and_empty_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(open(dir.path(), &EngineOptions::default(), true).expect("open blob"));
        let e = open(dir.path(), &EngineOptions::default(), false)
            .err()
            .expect("plain open of a blob database must fail");
        assert!(e.to_string().contains("fjall-blob"), "{e}");
        let db = open(dir.path(), &EngineOptions::default(), true).expect("reopen");
        assert!(matches!(
            db.put(&WriteOptions::default(), b"", b"v"),
            Err(Error::InvalidArgument(_))
        ));
        let bad = EngineOptions::default().set("blob_separation_threshold", 10);
        let other = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            open(other.path(), &bad, false),
            Err(Error::InvalidArgument(_))
        ));
    }

    fn keys(it: Box<dyn DbIterator + '_>) -> Vec<Vec<u8>> {
        Entries::from_first(it)
            .map(|kv| kv.expect("entry").0)
            .collect()
    }

    fn get(db: &dyn Db, cf: Cf, key: &[u8]) -> Option<Vec<u8>> {
        db.get_cf(&ReadOptions::default(), cf, key).expect("get_cf")
    }

    #[test]
    fn drop_recreate_and_reopen() {
        for blob in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let w = WriteOptions::default();
            let big = vec![b'v'; 5000];
            {
                let db = open(dir.path(), &EngineOptions::default(), blob).expect("open");
                let a = db.create_cf("a").expect("create a");
                let gone = db.create_cf("gone").expect("create gone");
                let long = "n".repeat(255);
                let l = db.create_cf(&long).expect("a 255-byte name");
                db.put_cf(&w, a, b"k", &big).expect("put");
                db.put_cf(&w, l, b"k", b"long").expect("put");
                db.put(&w, b"k", b"default").expect("put");
                // Journalled only (no flush): the reopen must not replay it
                // into the family created again under the same name.
                db.put_cf(&w, gone, b"k", b"old").expect("put");
                let it = db.iter_cf(&ReadOptions::default(), gone).expect("iter");
                db.drop_cf("gone").expect("drop");
                // An iterator taken before the drop still reads its view.
                assert_eq!(keys(it), [b"k".to_vec()]);
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
                db.drop_cf("gone").expect("drop");
                let again = db.create_cf("gone").expect("create a third time");
                db.put_cf(&w, again, b"k2", b"new").expect("put");
                db.flush().expect("flush");
            }
            let db = open(dir.path(), &EngineOptions::default(), blob).expect("reopen");
            let long = "n".repeat(255);
            assert_eq!(db.cf_names(), ["a", "default", "gone", long.as_str()]);
            let a = db.cf_handle("a").expect("a after reopen");
            let gone = db.cf_handle("gone").expect("gone after reopen");
            let l = db.cf_handle(&long).expect("long after reopen");
            assert_eq!(get(db.as_ref(), a, b"k"), Some(big.clone()));
            assert_eq!(get(db.as_ref(), l, b"k"), Some(b"long".to_vec()));
            assert_eq!(
                get(db.as_ref(), Cf::DEFAULT, b"k"),
                Some(b"default".to_vec())
            );
            assert_eq!(
                keys(db.iter_cf(&ReadOptions::default(), gone).expect("iter")),
                [b"k2".to_vec()]
            );
            // A family created after the reopen gets a handle no earlier
            // family has.
            let c = db.create_cf("c").expect("create c");
            assert!(![a, gone, l, Cf::DEFAULT].contains(&c));
            drop(db);
            // The other variant refuses the database, families included.
            assert!(open(dir.path(), &EngineOptions::default(), !blob).is_err());
        }
    }
}
