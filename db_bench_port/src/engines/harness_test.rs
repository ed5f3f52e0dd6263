//! `--engine=harness_test`: a `RwLock<BTreeMap>` behind the `Db` trait.
//!
//! Harness overhead check only, not a storage engine: nothing is persisted,
//! and `--use_existing_db` sees an empty map. Readrandom against it measures
//! what the harness itself costs per op (key generation, stats, dispatch).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;

use vmemkv_compat::BatchOp;
use vmemkv_compat::{Db, DbIterator, Error, Limits, ReadOptions, Result, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The in-process map engine.
///
/// With `null` set (`--engine_options=null=1`) it keeps nothing: every Get
/// finds a fixed 100-byte value and writes are dropped, so readrandom
/// measures the harness alone.
#[derive(Debug, Default)]
pub struct HarnessTestDb {
    map: RwLock<Map>,
    null: bool,
}

const NULL_VALUE: [u8; 100] = [b'v'; 100];

impl HarnessTestDb {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// A map configured from `--engine_options` (`null=1` only).
    pub fn with_options(extra: &std::collections::BTreeMap<String, String>) -> Result<Self> {
        let opts = vmemkv_compat::EngineOptions {
            extra: extra.clone(),
            ..Default::default()
        };
        let mut m = vmemkv_compat::OptionMap::new("harness_test", &opts);
        let null = m.take_bool("null")?.unwrap_or(false);
        m.finish()?;
        Ok(HarnessTestDb {
            map: RwLock::default(),
            null,
        })
    }

    fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, Map>> {
        self.map
            .read()
            .map_err(|_| Error::Corruption("harness_test map lock poisoned".into()))
    }

    fn write_lock(&self) -> Result<std::sync::RwLockWriteGuard<'_, Map>> {
        self.map
            .write()
            .map_err(|_| Error::Corruption("harness_test map lock poisoned".into()))
    }
}

impl Db for HarnessTestDb {
    fn name(&self) -> &'static str {
        "harness_test"
    }

    fn limits(&self) -> Limits {
        Limits {
            max_key_size: None,
            max_value_size: None,
        }
    }

    fn get_into(&self, _opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        if self.null {
            out.extend_from_slice(&NULL_VALUE);
            return Ok(true);
        }
        let m = self.read()?;
        match m.get(key) {
            Some(v) => {
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, _opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        if self.null {
            return Ok(());
        }
        let mut m = self.write_lock()?;
        match m.get_mut(key) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            None => {
                m.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }

    fn delete(&self, _opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.write_lock()?.remove(key);
        Ok(())
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        if self.null {
            return Ok(());
        }
        let mut m = self.write_lock()?;
        for op in batch.iter() {
            match op {
                BatchOp::Put { key, value, .. } => match m.get_mut(key) {
                    Some(v) => {
                        v.clear();
                        v.extend_from_slice(value);
                    }
                    None => {
                        m.insert(key.to_vec(), value.to_vec());
                    }
                },
                BatchOp::Delete { key, .. } => {
                    m.remove(key);
                }
                BatchOp::DeleteRange { begin, end, .. } => {
                    let doomed: Vec<Vec<u8>> = m
                        .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        m.remove(&k);
                    }
                }
            }
        }
        let _ = opts;
        Ok(())
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        Ok(Box::new(MapIter {
            db: self,
            lower: opts.iterate_lower_bound.clone(),
            upper: opts.iterate_upper_bound.clone(),
            key: Vec::new(),
            value: Vec::new(),
            valid: false,
            err: None,
        }))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact_range(&self, _begin: Option<&[u8]>, _end: Option<&[u8]>) -> Result<()> {
        Ok(())
    }

    fn property(&self, name: &str) -> Option<String> {
        match name {
            "harness_test.num-entries" | "rocksdb.stats" | "harness_test.stats" => {
                let n = self.read().map(|m| m.len()).unwrap_or(0);
                Some(format!(
                    "harness_test (in-process BTreeMap, not a storage engine): {n} entries\n"
                ))
            }
            _ => None,
        }
    }

    fn statistics(&self) -> Option<String> {
        self.property("harness_test.stats")
    }
}

/// A cursor that re-looks-up its position on every move.
struct MapIter<'a> {
    db: &'a HarnessTestDb,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    key: Vec<u8>,
    value: Vec<u8>,
    valid: bool,
    err: Option<Error>,
}

impl MapIter<'_> {
    fn land(&mut self, found: Option<(&Vec<u8>, &Vec<u8>)>) {
        match found {
            Some((k, v))
                if self.lower.as_deref().is_none_or(|l| k.as_slice() >= l)
                    && self.upper.as_deref().is_none_or(|u| k.as_slice() < u) =>
            {
                self.key.clear();
                self.key.extend_from_slice(k);
                self.value.clear();
                self.value.extend_from_slice(v);
                self.valid = true;
            }
            _ => self.valid = false,
        }
    }

    fn forward_from(&mut self, start: Bound<&[u8]>) {
        let lower = self.lower.clone();
        let start = match (start, lower.as_deref()) {
            (Bound::Included(s), Some(l)) if s < l => Bound::Included(l),
            (Bound::Excluded(s), Some(l)) if s < l => Bound::Included(l),
            (Bound::Unbounded, Some(l)) => Bound::Included(l),
            (s, _) => s,
        };
        match self.db.read() {
            Ok(m) => {
                let found = m.range::<[u8], _>((start, Bound::Unbounded)).next();
                self.land(found);
            }
            Err(e) => {
                self.err = Some(e);
                self.valid = false;
            }
        }
    }

    fn backward_from(&mut self, end: Bound<&[u8]>) {
        let upper = self.upper.clone();
        let end = match (end, upper.as_deref()) {
            (Bound::Included(e), Some(u)) if e >= u => Bound::Excluded(u),
            (Bound::Excluded(e), Some(u)) if e > u => Bound::Excluded(u),
            (Bound::Unbounded, Some(u)) => Bound::Excluded(u),
            (e, _) => e,
        };
        match self.db.read() {
            Ok(m) => {
                let found = m.range::<[u8], _>((Bound::Unbounded, end)).next_back();
                self.land(found);
            }
            Err(e) => {
                self.err = Some(e);
                self.valid = false;
            }
        }
    }
}

impl DbIterator for MapIter<'_> {
    fn valid(&self) -> bool {
        self.valid
    }
    fn seek_to_first(&mut self) {
        self.forward_from(Bound::Unbounded);
    }
    fn seek_to_last(&mut self) {
        self.backward_from(Bound::Unbounded);
    }
    fn seek(&mut self, key: &[u8]) {
        let k = key.to_vec();
        self.forward_from(Bound::Included(&k));
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        let k = key.to_vec();
        self.backward_from(Bound::Included(&k));
    }
    fn next(&mut self) {
        if self.valid {
            let k = std::mem::take(&mut self.key);
            self.forward_from(Bound::Excluded(&k));
            if !self.valid {
                self.key = k;
            }
        }
    }
    fn prev(&mut self) {
        if self.valid {
            let k = std::mem::take(&mut self.key);
            self.backward_from(Bound::Excluded(&k));
            if !self.valid {
                self.key = k;
            }
        }
    }
    fn key(&self) -> &[u8] {
        if self.valid {
            &self.key
        } else {
            &[]
        }
    }
    fn value(&self) -> &[u8] {
        if self.valid {
            &self.value
        } else {
            &[]
        }
    }
    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterator_respects_bounds_both_ways() -> Result<()> {
        let db = HarnessTestDb::new();
        let w = WriteOptions::default();
        for k in [b"a", b"b", b"c", b"d"] {
            db.put(&w, k, k)?;
        }
        let ro = ReadOptions::default().with_bounds(Some(b"b"), Some(b"d"));
        let mut it = db.iter(&ro)?;
        it.seek_to_first();
        assert_eq!(it.key(), b"b");
        it.next();
        assert_eq!(it.key(), b"c");
        it.next();
        assert!(!it.valid());
        it.seek_to_last();
        assert_eq!(it.key(), b"c");
        it.prev();
        assert_eq!(it.key(), b"b");
        it.prev();
        assert!(!it.valid());
        it.seek(b"a");
        assert_eq!(it.key(), b"b");
        it.seek_for_prev(b"z");
        assert_eq!(it.key(), b"c");
        Ok(())
    }
}
