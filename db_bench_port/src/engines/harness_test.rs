//! `--engine=harness_test`: a `RwLock<BTreeMap>` behind the `Db` trait.
//!
//! Harness overhead check only, not a storage engine: nothing is persisted,
//! and `--use_existing_db` sees an empty map. Readrandom against it measures
//! what the harness itself costs per op (key generation, stats, dispatch).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::RwLock;

use vmemkv_compat::family::unknown_family;
use vmemkv_compat::BatchOp;
use vmemkv_compat::{
    Cf, Db, DbIterator, Error, Families, Limits, ReadOptions, Result, WriteBatch, WriteOptions,
};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

const NAME: &str = "harness_test";

/// Every family's map under one lock, so that a batch spanning families is
/// applied atomically. The default family has its own field: a run with
/// one family pays no lookup.
#[derive(Debug, Default)]
struct Maps {
    default: Map,
    others: HashMap<u32, Map>,
}

impl Maps {
    fn get(&self, cf: Cf) -> Result<&Map> {
        if cf.is_default() {
            return Ok(&self.default);
        }
        self.others
            .get(&cf.id())
            .ok_or_else(|| unknown_family(NAME, cf))
    }

    fn get_mut(&mut self, cf: Cf) -> Result<&mut Map> {
        if cf.is_default() {
            return Ok(&mut self.default);
        }
        self.others
            .get_mut(&cf.id())
            .ok_or_else(|| unknown_family(NAME, cf))
    }
}

fn put_into(m: &mut Map, key: &[u8], value: &[u8]) {
    match m.get_mut(key) {
        Some(v) => {
            v.clear();
            v.extend_from_slice(value);
        }
        None => {
            m.insert(key.to_vec(), value.to_vec());
        }
    }
}

/// The in-process map engine, with column families (one map each).
///
/// With `null` set (`--engine_options=null=1`) it keeps nothing: every Get
/// finds a fixed 100-byte value and writes are dropped, so readrandom
/// measures the harness alone.
pub struct HarnessTestDb {
    maps: RwLock<Maps>,
    families: Families<()>,
    null: bool,
}

impl Default for HarnessTestDb {
    fn default() -> Self {
        HarnessTestDb {
            maps: RwLock::default(),
            families: Families::new(NAME, ()),
            null: false,
        }
    }
}

impl std::fmt::Debug for HarnessTestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessTestDb")
            .field("families", &self.families.names())
            .field("null", &self.null)
            .finish()
    }
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
        let mut m = vmemkv_compat::OptionMap::new(NAME, &opts);
        let null = m.take_bool("null")?.unwrap_or(false);
        m.finish()?;
        Ok(HarnessTestDb {
            null,
            ..Self::default()
        })
    }

    fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, Maps>> {
        self.maps
            .read()
            .map_err(|_| Error::Corruption("harness_test map lock poisoned".into()))
    }

    fn write_lock(&self) -> Result<std::sync::RwLockWriteGuard<'_, Maps>> {
        self.maps
            .write()
            .map_err(|_| Error::Corruption("harness_test map lock poisoned".into()))
    }

    fn check_cf(&self, cf: Cf) -> Result<()> {
        if cf.is_default() {
            Ok(())
        } else {
            self.families.get(cf)
        }
    }
}

impl Db for HarnessTestDb {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limits(&self) -> Limits {
        Limits {
            max_key_size: None,
            max_value_size: None,
        }
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.get_cf_into(opts, Cf::DEFAULT, key, out)
    }

    fn get_cf_into(
        &self,
        _opts: &ReadOptions,
        cf: Cf,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        out.clear();
        if self.null {
            self.check_cf(cf)?;
            out.extend_from_slice(&NULL_VALUE);
            return Ok(true);
        }
        let m = self.read()?;
        match m.get(cf)?.get(key) {
            Some(v) => {
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn put_cf(&self, _opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        if self.null {
            return self.check_cf(cf);
        }
        put_into(self.write_lock()?.get_mut(cf)?, key, value);
        Ok(())
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn delete_cf(&self, _opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        self.write_lock()?.get_mut(cf)?.remove(key);
        Ok(())
    }

    fn write(&self, _opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        if self.null {
            return batch.iter().try_for_each(|op| self.check_cf(op.cf()));
        }
        let mut maps = self.write_lock()?;
        // Every family first, so a batch naming a dropped one changes nothing.
        if batch.uses_families() {
            for op in batch.iter() {
                maps.get(op.cf())?;
            }
        }
        for op in batch.iter() {
            let m = maps.get_mut(op.cf())?;
            match op {
                BatchOp::Put { key, value, .. } => put_into(m, key, value),
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
        Ok(())
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        self.check_cf(cf)?;
        Ok(Box::new(MapIter {
            db: self,
            cf,
            lower: opts.iterate_lower_bound.clone(),
            upper: opts.iterate_upper_bound.clone(),
            key: Vec::new(),
            value: Vec::new(),
            valid: false,
            err: None,
        }))
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        let mut maps = self.write_lock()?;
        let cf = self.families.add(name, ())?;
        maps.others.insert(cf.id(), Map::new());
        Ok(cf)
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let mut maps = self.write_lock()?;
        let (cf, ()) = self.families.for_drop(name)?;
        maps.others.remove(&cf.id());
        self.families.remove(cf);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
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
                let n = self
                    .read()
                    .map(|m| m.default.len() + m.others.values().map(Map::len).sum::<usize>())
                    .unwrap_or(0);
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
    cf: Cf,
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
        let db = self.db;
        match db.read() {
            Ok(maps) => match maps.get(self.cf) {
                Ok(m) => {
                    let found = m.range::<[u8], _>((start, Bound::Unbounded)).next();
                    self.land(found);
                }
                Err(e) => {
                    self.err = Some(e);
                    self.valid = false;
                }
            },
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
        let db = self.db;
        match db.read() {
            Ok(maps) => match maps.get(self.cf) {
                Ok(m) => {
                    let found = m.range::<[u8], _>((Bound::Unbounded, end)).next_back();
                    self.land(found);
                }
                Err(e) => {
                    self.err = Some(e);
                    self.valid = false;
                }
            },
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
    fn families_are_separate_keyspaces_and_a_batch_spans_them() -> Result<()> {
        let db = HarnessTestDb::new();
        let w = WriteOptions::default();
        let r = ReadOptions::default();
        let a = db.create_cf("a")?;
        assert!(db.create_cf("a").is_err());
        let mut b = WriteBatch::new();
        b.put(b"k", b"default");
        b.put_cf(a, b"k", b"a");
        b.put_cf(a, b"only_a", b"1");
        db.write(&w, &b)?;
        assert_eq!(db.get(&r, b"k")?.as_deref(), Some(&b"default"[..]));
        assert_eq!(db.get_cf(&r, a, b"k")?.as_deref(), Some(&b"a"[..]));
        assert_eq!(db.get(&r, b"only_a")?, None);
        let mut it = db.iter_cf(&r, a)?;
        it.seek_to_first();
        assert_eq!(it.key(), b"k");
        it.next();
        assert_eq!(it.key(), b"only_a");
        drop(it);
        db.drop_cf("a")?;
        // A batch naming the dropped family changes nothing, default included.
        let mut b = WriteBatch::new();
        b.put(b"k", b"changed");
        b.put_cf(a, b"k", b"x");
        assert!(matches!(db.write(&w, &b), Err(Error::InvalidArgument(_))));
        assert_eq!(db.get(&r, b"k")?.as_deref(), Some(&b"default"[..]));
        let a2 = db.create_cf("a")?;
        assert_ne!(a, a2);
        assert_eq!(db.get_cf(&r, a2, b"k")?, None);
        assert_eq!(db.cf_names(), vec!["a".to_string(), "default".to_string()]);
        db.put_cf(&w, a2, b"z", b"1")?;
        assert!(db.put_cf(&w, a, b"z", b"1").is_err());
        Ok(())
    }

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
