//! A `BTreeMap` oracle implementing [`Db`], used only as the conformance
//! suite's reference and never offered as an engine.
//!
//! [`Fault`] lets a test break the model on purpose, to prove that the suite
//! notices when an engine misbehaves.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use vmemkv_compat::{
    check_sizes, BatchOp, Db, DbIterator, EngineOptions, Error, Limits, ReadOptions, Result,
    Snapshot, WriteBatch, WriteOptions,
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
}

/// The model's persisted state: one map per path, shared across "reopens" so
/// persistence can be tested, plus the path's lock flag.
type Store = Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>;

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

/// The oracle engine.
pub struct ModelDb {
    path: PathBuf,
    map: Store,
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
            .or_insert_with(|| (Arc::new(Mutex::new(BTreeMap::new())), false));
        if entry.1 {
            return Err(Error::Busy(format!(
                "{}/LOCK: already held by this process",
                path.display()
            )));
        }
        entry.1 = true;
        if fault == Fault::LosesDataOnReopen {
            lock(&entry.0).clear();
        }
        Ok(Box::new(ModelDb {
            path: key,
            map: entry.0.clone(),
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

/// A model snapshot: a copy of the map.
type View = Arc<BTreeMap<Vec<u8>, Vec<u8>>>;

impl ModelDb {
    fn owner(&self) -> usize {
        Arc::as_ptr(&self.map) as usize
    }

    /// Runs `f` on the map `opts` reads: its snapshot, or the live map.
    fn read<T>(
        &self,
        opts: &ReadOptions,
        f: impl FnOnce(&BTreeMap<Vec<u8>, Vec<u8>>) -> T,
    ) -> Result<T> {
        match &opts.snapshot {
            Some(s) => {
                let view = s.downcast::<View>("model", self.owner())?;
                if self.fault == Fault::SnapshotReadsLive {
                    return Ok(f(&lock(&self.map)));
                }
                Ok(f(view))
            }
            None => Ok(f(&lock(&self.map))),
        }
    }
}

impl Db for ModelDb {
    fn name(&self) -> &'static str {
        "model"
    }

    fn limits(&self) -> Limits {
        MODEL_LIMITS
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        check_sizes(&MODEL_LIMITS, key, None)?;
        self.read(opts, |map| match map.get(key) {
            Some(v) if v.is_empty() && self.fault == Fault::EmptyValueMissing => false,
            Some(v) => {
                out.extend_from_slice(v);
                true
            }
            None => false,
        })
    }

    fn snapshot(&self) -> Result<Snapshot> {
        let view: View = Arc::new(lock(&self.map).clone());
        Ok(Snapshot::new("model", self.owner(), view))
    }

    fn put(&self, _: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        check_sizes(&MODEL_LIMITS, key, Some(value))?;
        lock(&self.map).insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&self, _: &WriteOptions, key: &[u8]) -> Result<()> {
        check_sizes(&MODEL_LIMITS, key, None)?;
        if self.fault != Fault::DeleteIgnored {
            lock(&self.map).remove(key);
        }
        Ok(())
    }

    fn write(&self, _: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        vmemkv_compat::family::default_only_batch(self.name(), batch)?;
        for op in batch {
            match op {
                BatchOp::Put { key, value, .. } => check_sizes(&MODEL_LIMITS, key, Some(value))?,
                BatchOp::Delete { key, .. } => check_sizes(&MODEL_LIMITS, key, None)?,
                BatchOp::DeleteRange { begin, end, .. } => {
                    check_sizes(&MODEL_LIMITS, begin, None)?;
                    check_sizes(&MODEL_LIMITS, end, None)?;
                }
            }
        }
        if self.fault == Fault::BatchTorn {
            for op in batch {
                apply(&mut lock(&self.map), op);
                std::thread::yield_now();
            }
            return Ok(());
        }
        let mut map = lock(&self.map);
        let take = if self.fault == Fault::BatchTruncated {
            1
        } else {
            usize::MAX
        };
        for op in batch.iter().take(take) {
            apply(&mut map, op);
        }
        Ok(())
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        let lower = opts.iterate_lower_bound.as_deref();
        let upper = opts.iterate_upper_bound.as_deref();
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = self.read(opts, |map| {
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
        (name == "model.num-keys").then(|| lock(&self.map).len().to_string())
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
