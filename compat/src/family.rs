//! Column families: named keyspaces inside one database.
//!
//! A family is addressed by a [`Cf`], a small copyable handle that
//! [`crate::Db::create_cf`] and [`crate::Db::cf_handle`] return. Every
//! database has the family `"default"` ([`Cf::DEFAULT`]), which the plain
//! calls (`get`, `put`, `iter`, ...) address; the `_cf` calls take a handle.
//! A batch may write to several families and is applied atomically across
//! them, and a snapshot covers every family.
//!
//! Handles are never reused within one open database: a handle to a dropped
//! family stays invalid (an `InvalidArgument` naming it) even after a family
//! of the same name is created again, as with RocksDB, whose handles keep
//! pointing at the dropped family.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use crate::error::{Error, Result};

/// A handle to one column family of one open database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cf(u32);

impl Cf {
    /// The family every database has, which the plain calls address.
    pub const DEFAULT: Cf = Cf(0);
    /// The default family's name.
    pub const DEFAULT_NAME: &'static str = "default";

    /// The handle with this number; adapters number their families.
    pub const fn from_id(id: u32) -> Cf {
        Cf(id)
    }

    /// The handle's number (0 for `default`).
    pub const fn id(self) -> u32 {
        self.0
    }

    /// Whether this is the default family.
    pub const fn is_default(self) -> bool {
        self.0 == 0
    }
}

/// The error for a handle that names no open family of `engine`.
pub fn unknown_family(engine: &str, cf: Cf) -> Error {
    Error::InvalidArgument(format!(
        "column family handle {} is not open in this {engine} database (dropped, or from another database)",
        cf.id()
    ))
}

/// For engines with only the default family: `Ok` for [`Cf::DEFAULT`],
/// else the error a caller can act on.
pub fn default_only(engine: &str, cf: Cf) -> Result<()> {
    if cf.is_default() {
        Ok(())
    } else {
        Err(unknown_family(engine, cf))
    }
}

/// For engines with only the default family: refuses a batch that
/// addresses any other family, naming the first such handle.
pub fn default_only_batch(engine: &str, batch: &crate::WriteBatch) -> Result<()> {
    if !batch.uses_families() {
        return Ok(());
    }
    match batch.iter().map(|op| op.cf()).find(|cf| !cf.is_default()) {
        Some(cf) => Err(unknown_family(engine, cf)),
        None => Ok(()),
    }
}

/// Whether `name` may name a family: non-empty, at most 255 bytes, and no
/// NUL (names travel through C APIs and file names).
pub fn check_family_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "column family name {name:?} must be 1 to 255 bytes with no NUL"
        )));
    }
    Ok(())
}

/// An adapter's table of open families: name, handle and the engine's own
/// object `H` for each (RocksDB's name, LMDB's database, fjall's partition).
///
/// Handles count up from 1 and are never reused. Adapters answer the
/// default family without consulting the table, so that a database that
/// uses only `default` pays nothing for families.
pub struct Families<H> {
    engine: &'static str,
    table: RwLock<Table<H>>,
}

struct Table<H> {
    by_name: BTreeMap<String, Cf>,
    by_id: HashMap<u32, (String, H)>,
    next: u32,
}

impl<H: Clone> Families<H> {
    /// A table holding only `default`, whose engine object is `default`.
    pub fn new(engine: &'static str, default: H) -> Self {
        let mut by_name = BTreeMap::new();
        by_name.insert(Cf::DEFAULT_NAME.to_string(), Cf::DEFAULT);
        let mut by_id = HashMap::new();
        by_id.insert(0, (Cf::DEFAULT_NAME.to_string(), default));
        Families {
            engine,
            table: RwLock::new(Table {
                by_name,
                by_id,
                next: 1,
            }),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table<H>> {
        // A panic while the table was held leaves it consistent: every
        // change below is one insert or remove pair done without unwinding.
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table<H>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds family `name` with engine object `h`; an error if it exists.
    pub fn add(&self, name: &str, h: H) -> Result<Cf> {
        check_family_name(name)?;
        let mut t = self.write();
        if t.by_name.contains_key(name) {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists in this {} database",
                self.engine
            )));
        }
        let cf = Cf(t.next);
        t.next += 1;
        t.by_name.insert(name.to_string(), cf);
        t.by_id.insert(cf.0, (name.to_string(), h));
        Ok(cf)
    }

    /// The engine object of `cf`, or the error naming the stale handle.
    pub fn get(&self, cf: Cf) -> Result<H> {
        self.read()
            .by_id
            .get(&cf.0)
            .map(|(_, h)| h.clone())
            .ok_or_else(|| unknown_family(self.engine, cf))
    }

    /// The name of `cf`, if open.
    pub fn name_of(&self, cf: Cf) -> Option<String> {
        self.read().by_id.get(&cf.0).map(|(n, _)| n.clone())
    }

    /// The handle of the open family `name`.
    pub fn handle(&self, name: &str) -> Option<Cf> {
        self.read().by_name.get(name).copied()
    }

    /// Every open family's name, `default` included, in name order.
    pub fn names(&self) -> Vec<String> {
        self.read().by_name.keys().cloned().collect()
    }

    /// Every open family: handle, name and engine object.
    pub fn all(&self) -> Vec<(Cf, String, H)> {
        let t = self.read();
        t.by_name
            .iter()
            .filter_map(|(n, cf)| t.by_id.get(&cf.0).map(|(_, h)| (*cf, n.clone(), h.clone())))
            .collect()
    }

    /// Looks `name` up for a drop: its handle and engine object. The
    /// default family cannot be dropped.
    pub fn for_drop(&self, name: &str) -> Result<(Cf, H)> {
        if name == Cf::DEFAULT_NAME {
            return Err(Error::InvalidArgument(
                "the default column family cannot be dropped".into(),
            ));
        }
        let t = self.read();
        let cf = *t.by_name.get(name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "column family {name:?} does not exist in this {} database",
                self.engine
            ))
        })?;
        let h = t.by_id.get(&cf.0).map(|(_, h)| h.clone());
        h.map(|h| (cf, h))
            .ok_or_else(|| unknown_family(self.engine, cf))
    }

    /// Removes `cf` from the table (after the engine dropped it).
    pub fn remove(&self, cf: Cf) {
        let mut t = self.write();
        if let Some((name, _)) = t.by_id.remove(&cf.0) {
            t.by_name.remove(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_never_reused_and_default_stays() {
        let f = Families::new("test", 0u8);
        let a = f.add("a", 1).expect("add");
        assert!(f.add("a", 2).is_err());
        assert_eq!(f.get(a).expect("get"), 1);
        let (cf, h) = f.for_drop("a").expect("drop");
        assert_eq!((cf, h), (a, 1));
        f.remove(cf);
        assert!(f.get(a).is_err());
        let a2 = f.add("a", 3).expect("re-add");
        assert_ne!(a, a2);
        assert!(f.get(a).is_err());
        assert!(f.for_drop("default").is_err());
        assert_eq!(f.names(), vec!["a".to_string(), "default".to_string()]);
        assert!(check_family_name("").is_err());
        assert!(check_family_name("x\0").is_err());
    }
}
