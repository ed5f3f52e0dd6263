//! A `BTreeMap` oracle implementing [`Db`], used only as the conformance
//! suite's reference and never offered as an engine.
//!
//! It has column families: one map per family, all behind one lock, so a
//! batch is atomic across families and a snapshot (a copy of every map)
//! covers them all.
//!
//! [`Fault`] lets a test break the model on purpose, to prove that the suite
//! notices when an engine misbehaves.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use vmemkv_compat::family::{check_family_name, unknown_family};
use vmemkv_compat::{
    check_sizes, BatchOp, Cf, Db, DbIterator, EngineOptions, Error, Families, Limits, ReadOptions,
    Result, Snapshot, WriteBatch, WriteOptions,
};

/// A deliberate defect injected into the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Behaves correctly.
    None,
    /// `delete` does nothing.
    DeleteIgnored,
    /// Iterators never show the last key.
    IterDropsLast,
    /// `seek_for_prev` lands on the first key `>= target` instead.
    SeekForPrevIsSeek,
    /// A batch applies only its first update.
    BatchTruncated,
    /// Nothing survives a reopen.
    LosesDataOnReopen,
    /// Empty values read back as missing.
    EmptyValueMissing,
    /// Reads naming a snapshot read the live map.
    SnapshotReadsLive,
    /// A batch applies its updates one at a time, so readers can see half.
    BatchTorn,
    /// Every family reads and writes the default family's map (handles are
    /// still checked, so only the data is shared).
    FamiliesShareOneMap,
    /// `drop_cf` forgets the family's name but keeps its keys, and a family
    /// created again under that name finds them.
    DropKeepsData,
    /// A batch spanning families is applied one family at a time, with a
    /// gap in between in which readers and snapshots see part of it.
    CrossFamilyBatchTorn,
    /// A snapshot copies only the default family; reads of any other
    /// family at the snapshot read it live.
    SnapshotCoversDefaultOnly,
    /// Families are not opened again on reopen: their data stays on disk,
    /// but `cf_handle` and `cf_names` no longer know them.
    FamiliesForgottenOnReopen,
    /// `delete_range_cf` deletes the range from every family.
    DeleteRangeAllFamilies,
}

/// One family's keys.
type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a database holds. Families are stored by incarnation, a number
/// never reused within one store, so a handle to a dropped family can never
/// reach a family created again under the same name.
#[derive(Default)]
struct State {
    /// Live families by name; `default` is incarnation 0.
    names: BTreeMap<String, u64>,
    maps: BTreeMap<u64, Map>,
    next: u64,
    /// [`Fault::DropKeepsData`]: the maps of dropped families, by name.
    kept: BTreeMap<String, Map>,
}

impl State {
    fn fresh() -> State {
        let mut s = State {
            next: 1,
            ..State::default()
        };
        s.names.insert(Cf::DEFAULT_NAME.to_string(), 0);
        s.maps.insert(0, Map::new());
        s
    }
}

/// The model's persisted state: one per path, shared across "reopens" so
/// persistence can be tested, plus the path's lock flag.
type Store = Arc<Mutex<State>>;

struct Registry {
    stores: BTreeMap<PathBuf, (Store, bool)>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REG: Mutex<Registry> = Mutex::new(Registry {
        stores: BTreeMap::new(),
    });
    REG.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const NAME: &str = "model";

/// The oracle engine.
pub struct ModelDb {
    path: PathBuf,
    store: Store,
    /// This open's handles: each family's incarnation in [`State::maps`].
    families: Families<u64>,
    fault: Fault,
}

/// The model's size limits: small enough that tests can go one byte past.
pub const MODEL_LIMITS: Limits = Limits {
    max_key_size: Some(64 * 1024),
    max_value_size: Some(8 * 1024 * 1024),
};

impl ModelDb {
    /// Opens the model at `path` with a fault (or [`Fault::None`]).
    pub fn open(path: &Path, opts: &EngineOptions, fault: Fault) -> Result<Box<dyn Db>> {
        if !path.exists() {
            if !opts.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "{}: does not exist (create_if_missing is false)",
                    path.display()
                )));
            }
            fs::create_dir_all(path).map_err(|e| Error::io(path.display(), e))?;
        }
        let key = path
            .canonicalize()
            .map_err(|e| Error::io(path.display(), e))?;
        let mut reg = registry();
        let entry = reg
            .stores
            .entry(key.clone())
            .or_insert_with(|| (Arc::new(Mutex::new(State::fresh())), false));
        if entry.1 {
            return Err(Error::Busy(format!(
                "{}/LOCK: already held by this process",
                path.display()
            )));
        }
        entry.1 = true;
        let mut state = lock(&entry.0);
        if fault == Fault::LosesDataOnReopen {
            *state = State::fresh();
        }
        // As every adapter must: each existing family is open again.
        let families = Families::new(NAME, 0);
        if fault != Fault::FamiliesForgottenOnReopen {
            for (name, &inc) in &state.names {
                if name != Cf::DEFAULT_NAME {
                    families.add(name, inc)?;
                }
            }
        }
        drop(state);
        Ok(Box::new(ModelDb {
            path: key,
            store: entry.0.clone(),
            families,
            fault,
        }))
    }
}

impl Drop for ModelDb {
    fn drop(&mut self) {
        if let Some(e) = registry().stores.get_mut(&self.path) {
            e.1 = false;
        }
    }
}

/// A model snapshot: a copy of every family's map, by incarnation.
type View = Arc<BTreeMap<u64, Map>>;

/// What a family that a snapshot does not hold reads as: it was created
/// after the snapshot, so nothing of it is visible.
static EMPTY: Map = BTreeMap::new();

impl ModelDb {
    fn owner(&self) -> usize {
        Arc::as_ptr(&self.store) as usize
    }

    /// The incarnation `cf` names, or the error for a stale handle.
    fn resolve(&self, cf: Cf) -> Result<u64> {
        let inc = if cf.is_default() {
            0
        } else {
            self.families.get(cf)?
        };
        Ok(if self.fault == Fault::FamiliesShareOneMap {
            0
        } else {
            inc
        })
    }

    /// Runs `f` on family `cf` as `opts` reads it: at its snapshot, or live.
    fn read<T>(&self, opts: &ReadOptions, cf: Cf, f: impl FnOnce(&Map) -> T) -> Result<T> {
        let inc = self.resolve(cf)?;
        if let Some(s) = &opts.snapshot {
            let view = s.downcast::<View>(NAME, self.owner())?;
            let live = self.fault == Fault::SnapshotReadsLive
                || (self.fault == Fault::SnapshotCoversDefaultOnly && inc != 0);
            if !live {
                return Ok(f(view.get(&inc).unwrap_or(&EMPTY)));
            }
        }
        let state = lock(&self.store);
        // Dropped between the handle check and the lock.
        let map = state
            .maps
            .get(&inc)
            .ok_or_else(|| unknown_family(NAME, cf))?;
        Ok(f(map))
    }

    /// Applies resolved updates under one lock, as one atomic step.
    fn apply_all(&self, ops: &[(u64, BatchOp<'_>)]) {
        let mut state = lock(&self.store);
        for (inc, op) in ops {
            self.apply_to(&mut state, *inc, *op);
        }
    }

    fn apply_to(&self, state: &mut State, inc: u64, op: BatchOp<'_>) {
        if self.fault == Fault::DeleteRangeAllFamilies && matches!(op, BatchOp::DeleteRange { .. })
        {
            for map in state.maps.values_mut() {
                apply(map, op);
            }
            return;
        }
        // Checked before the lock was taken; a family dropped since then
        // takes the update with it, as a write racing a drop may.
        if let Some(map) = state.maps.get_mut(&inc) {
            apply(map, op);
        }
    }
}

impl Db for ModelDb {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limits(&self) -> Limits {
        MODEL_LIMITS
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
        check_sizes(&MODEL_LIMITS, key, None)?;
        self.read(opts, cf, |map| match map.get(key) {
            Some(v) if v.is_empty() && self.fault == Fault::EmptyValueMissing => false,
            Some(v) => {
                out.extend_from_slice(v);
                true
            }
            None => false,
        })
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let state = lock(&self.store);
        let view: View = Arc::new(if self.fault == Fault::SnapshotCoversDefaultOnly {
            state
                .maps
                .range(0..1)
                .map(|(i, m)| (*i, m.clone()))
                .collect()
        } else {
            state.maps.clone()
        });
        Ok(Snapshot::new(NAME, self.owner(), view))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn put_cf(&self, _: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        check_sizes(&MODEL_LIMITS, key, Some(value))?;
        let inc = self.resolve(cf)?;
        self.apply_all(&[(inc, BatchOp::Put { cf, key, value })]);
        Ok(())
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn delete_cf(&self, _: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        check_sizes(&MODEL_LIMITS, key, None)?;
        let inc = self.resolve(cf)?;
        if self.fault != Fault::DeleteIgnored {
            self.apply_all(&[(inc, BatchOp::Delete { cf, key })]);
        }
        Ok(())
    }

    fn write(&self, _: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        // Everything is checked before anything is applied, so a refused
        // batch (a stale handle, an oversized key) applies nothing.
        let mut ops = Vec::with_capacity(batch.len());
        for op in batch {
            match op {
                BatchOp::Put { key, value, .. } => check_sizes(&MODEL_LIMITS, key, Some(value))?,
                BatchOp::Delete { key, .. } => check_sizes(&MODEL_LIMITS, key, None)?,
                BatchOp::DeleteRange { begin, end, .. } => {
                    check_sizes(&MODEL_LIMITS, begin, None)?;
                    check_sizes(&MODEL_LIMITS, end, None)?;
                }
            }
            ops.push((self.resolve(op.cf())?, op));
        }
        match self.fault {
            Fault::BatchTorn => {
                for op in &ops {
                    self.apply_all(std::slice::from_ref(op));
                    std::thread::yield_now();
                }
            }
            Fault::CrossFamilyBatchTorn => {
                let mut order: Vec<u64> = Vec::new();
                for (inc, _) in &ops {
                    if !order.contains(inc) {
                        order.push(*inc);
                    }
                }
                for inc in order {
                    let part: Vec<_> = ops.iter().filter(|(i, _)| *i == inc).copied().collect();
                    self.apply_all(&part);
                    std::thread::yield_now();
                }
            }
            Fault::BatchTruncated => self.apply_all(&ops[..ops.len().min(1)]),
            _ => self.apply_all(&ops),
        }
        Ok(())
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let lower = opts.iterate_lower_bound.as_deref();
        let upper = opts.iterate_upper_bound.as_deref();
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = self.read(opts, cf, |map| {
            map.iter()
                .filter(|(k, _)| vmemkv_compat::iter::within_bounds(lower, upper, k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })?;
        if self.fault == Fault::IterDropsLast {
            entries.pop();
        }
        Ok(Box::new(VecIter {
            entries,
            pos: None,
            fault: self.fault,
        }))
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        check_family_name(name)?;
        let mut state = lock(&self.store);
        let inc = state.next;
        // The table refuses a name already open; only then does the store
        // change, so a refused create leaves nothing behind.
        let cf = self.families.add(name, inc)?;
        state.next += 1;
        let map = match self.fault {
            Fault::DropKeepsData => state.kept.remove(name).unwrap_or_default(),
            _ => Map::new(),
        };
        state.names.insert(name.to_string(), inc);
        state.maps.insert(inc, map);
        Ok(cf)
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let mut state = lock(&self.store);
        let (cf, inc) = self.families.for_drop(name)?;
        state.names.remove(name);
        let map = state.maps.remove(&inc).unwrap_or_default();
        if self.fault == Fault::DropKeepsData {
            state.kept.insert(name.to_string(), map);
        }
        self.families.remove(cf);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn checkpoint(&self) -> Result<()> {
        Ok(())
    }

    fn reorganize(&self) -> Result<()> {
        Ok(())
    }

    fn defragment(&self) -> Result<()> {
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn property(&self, name: &str) -> Option<String> {
        (name == "model.num-keys").then(|| {
            lock(&self.store)
                .maps
                .get(&0)
                .map_or(0, |m| m.len())
                .to_string()
        })
    }
}

/// Applies one batch update to a map: the model's definition of each op.
pub fn apply(map: &mut BTreeMap<Vec<u8>, Vec<u8>>, op: BatchOp<'_>) {
    match op {
        BatchOp::Put { key, value, .. } => {
            map.insert(key.to_vec(), value.to_vec());
        }
        BatchOp::Delete { key, .. } => {
            map.remove(key);
        }
        BatchOp::DeleteRange { begin, end, .. } => {
            if begin < end {
                let doomed: Vec<Vec<u8>> = map
                    .range(begin.to_vec()..end.to_vec())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in doomed {
                    map.remove(&k);
                }
            }
        }
    }
}

/// A cursor over a materialised, sorted snapshot.
pub struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
    fault: Fault,
}

impl DbIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, key: &[u8]) {
        let i = self.entries.partition_point(|(k, _)| k.as_slice() < key);
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        if self.fault == Fault::SeekForPrevIsSeek {
            return self.seek(key);
        }
        let i = self.entries.partition_point(|(k, _)| k.as_slice() <= key);
        self.pos = i.checked_sub(1);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.entries[p].0)
    }
    fn value(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.entries[p].1)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}
