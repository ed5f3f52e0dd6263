//! A facade with the `rocksdb` crate's (0.25) names and signatures over any
//! engine of this crate.
//!
//! A program written against the crate's default `DB` moves over by
//! changing one line, `use rocksdb::...` to
//! `use vmemkv_compat::rocksdb_api as rocksdb;` (or the item list from this
//! module), and picks its engine with the one setter the crate lacks,
//! [`Options::set_engine`] (vmemkv by default):
//!
//! ```
//! use vmemkv_compat::rocksdb_api as rocksdb;
//! use rocksdb::{IteratorMode, Options, WriteBatch, DB};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut opts = Options::default();
//! opts.create_if_missing(true);
//! opts.set_engine(vmemkv_compat::EngineKind::Vmemkv);
//! let db = DB::open(&opts, dir.path()).unwrap();
//! let mut batch = WriteBatch::default();
//! batch.put(b"a", b"1");
//! batch.put(b"b", b"2");
//! db.write(batch).unwrap();
//! let keys: Vec<_> = db
//!     .iterator(IteratorMode::End)
//!     .map(|kv| kv.unwrap().0)
//!     .collect();
//! assert_eq!(keys, vec![Box::from(&b"b"[..]), Box::from(&b"a"[..])]);
//! ```
//!
//! The crate's `DB` is `DBWithThreadMode<SingleThreaded>` (without its
//! `multi-threaded-cf` feature): `create_cf` and `drop_cf` take `&mut self`
//! and `cf_handle` lends a `&ColumnFamily`. This `DB` has the same shape,
//! so the same calling code compiles. What the crate has and this module
//! does not is listed in `docs/rocksdb_api.md`; a method with no
//! equivalent is absent, so that such code fails to compile rather than
//! behaving differently.

mod error;
mod iter;
mod options;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use crate::db::Db;
use crate::family::Cf;

pub use crate::registry::EngineKind;
pub use error::{Error, ErrorKind};
pub use iter::{DBIterator, DBRawIterator, Direction, IteratorMode, KVBytes};
pub use options::{DBCompressionType, Options, ReadOptions, WriteOptions};

/// The default family's name (the crate's constant).
pub const DEFAULT_COLUMN_FAMILY_NAME: &str = Cf::DEFAULT_NAME;

/// A column family of an open [`DB`], lent by [`DB::cf_handle`].
#[derive(Debug)]
pub struct ColumnFamily {
    cf: Cf,
}

/// What the `_cf` methods accept: `&ColumnFamily` (and `&&ColumnFamily`),
/// as in the crate.
pub trait AsColumnFamilyRef {
    /// The family this refers to (facade only).
    fn handle(&self) -> Cf;
}

impl AsColumnFamilyRef for ColumnFamily {
    fn handle(&self) -> Cf {
        self.cf
    }
}

impl AsColumnFamilyRef for &ColumnFamily {
    fn handle(&self) -> Cf {
        self.cf
    }
}

/// A value read by [`DB::get_pinned`]: derefs to `[u8]`. The crate's pins
/// an engine buffer; here the engine's bytes are copied once, as `get`
/// does.
pub struct DBPinnableSlice<'a> {
    data: Vec<u8>,
    _db: PhantomData<&'a DB>,
}

impl AsRef<[u8]> for DBPinnableSlice<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl std::ops::Deref for DBPinnableSlice<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl std::fmt::Debug for DBPinnableSlice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.data.fmt(f)
    }
}

/// Updates applied atomically by [`DB::write`], across families.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    inner: crate::WriteBatch,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `capacity_bytes` of encoded updates.
    pub fn with_capacity_bytes(capacity_bytes: usize) -> Self {
        WriteBatch {
            inner: crate::WriteBatch::with_capacity(capacity_bytes),
        }
    }

    /// The number of updates.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The encoded size of the updates, in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.inner.data_size()
    }

    /// Sets `key` to `value` in the default family.
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) {
        self.inner.put(key.as_ref(), value.as_ref());
    }

    /// Sets `key` to `value` in `cf`.
    pub fn put_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) {
        self.inner.put_cf(cf.handle(), key.as_ref(), value.as_ref());
    }

    /// Removes `key` from the default family.
    pub fn delete<K: AsRef<[u8]>>(&mut self, key: K) {
        self.inner.delete(key.as_ref());
    }

    /// Removes `key` from `cf`.
    pub fn delete_cf<K: AsRef<[u8]>>(&mut self, cf: &impl AsColumnFamilyRef, key: K) {
        self.inner.delete_cf(cf.handle(), key.as_ref());
    }

    /// Removes every key in `[from, to)` of the default family.
    pub fn delete_range<K: AsRef<[u8]>>(&mut self, from: K, to: K) {
        self.inner.delete_range(from.as_ref(), to.as_ref());
    }

    /// Removes every key in `[from, to)` of `cf`.
    pub fn delete_range_cf<K: AsRef<[u8]>>(&mut self, cf: &impl AsColumnFamilyRef, from: K, to: K) {
        self.inner
            .delete_range_cf(cf.handle(), from.as_ref(), to.as_ref());
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.inner.clear();
    }
}

/// A point-in-time view of a [`DB`] across all families (the crate's
/// `Snapshot`), released when dropped.
pub struct Snapshot<'a> {
    db: &'a DB,
    snap: Result<crate::Snapshot, Error>,
}

impl<'a> Snapshot<'a> {
    pub(crate) fn inner(&self) -> Result<&crate::Snapshot, Error> {
        self.snap.as_ref().map_err(Clone::clone)
    }

    /// An iterator over the default family as of the snapshot.
    pub fn iterator(&self, mode: IteratorMode) -> DBIterator<'a> {
        self.iterator_opt(mode, ReadOptions::default())
    }

    /// An iterator over `cf` as of the snapshot.
    pub fn iterator_cf(&self, cf: &impl AsColumnFamilyRef, mode: IteratorMode) -> DBIterator<'a> {
        self.iterator_cf_opt(cf, ReadOptions::default(), mode)
    }

    /// [`Snapshot::iterator`] with read options.
    pub fn iterator_opt(&self, mode: IteratorMode, mut readopts: ReadOptions) -> DBIterator<'a> {
        readopts.set_snapshot(self);
        self.db.iterator_opt(mode, readopts)
    }

    /// [`Snapshot::iterator_cf`] with read options.
    pub fn iterator_cf_opt(
        &self,
        cf: &impl AsColumnFamilyRef,
        mut readopts: ReadOptions,
        mode: IteratorMode,
    ) -> DBIterator<'a> {
        readopts.set_snapshot(self);
        self.db.iterator_cf_opt(cf, readopts, mode)
    }

    /// A cursor over the default family as of the snapshot.
    pub fn raw_iterator(&self) -> DBRawIterator<'a> {
        self.raw_iterator_opt(ReadOptions::default())
    }

    /// A cursor over `cf` as of the snapshot.
    pub fn raw_iterator_cf(&self, cf: &impl AsColumnFamilyRef) -> DBRawIterator<'a> {
        self.raw_iterator_cf_opt(cf, ReadOptions::default())
    }

    /// [`Snapshot::raw_iterator`] with read options.
    pub fn raw_iterator_opt(&self, mut readopts: ReadOptions) -> DBRawIterator<'a> {
        readopts.set_snapshot(self);
        self.db.raw_iterator_opt(readopts)
    }

    /// [`Snapshot::raw_iterator_cf`] with read options.
    pub fn raw_iterator_cf_opt(
        &self,
        cf: &impl AsColumnFamilyRef,
        mut readopts: ReadOptions,
    ) -> DBRawIterator<'a> {
        readopts.set_snapshot(self);
        self.db.raw_iterator_cf_opt(cf, readopts)
    }

    /// The value of `key` in the default family as of the snapshot.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Vec<u8>>, Error> {
        self.get_opt(key, ReadOptions::default())
    }

    /// The value of `key` in `cf` as of the snapshot.
    pub fn get_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<Vec<u8>>, Error> {
        self.get_cf_opt(cf, key, ReadOptions::default())
    }

    /// [`Snapshot::get`] with read options.
    pub fn get_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        mut readopts: ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        readopts.set_snapshot(self);
        self.db.get_opt(key, &readopts)
    }

    /// [`Snapshot::get_cf`] with read options.
    pub fn get_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        mut readopts: ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        readopts.set_snapshot(self);
        self.db.get_cf_opt(cf, key, &readopts)
    }

    /// The values of `keys` in the default family as of the snapshot.
    pub fn multi_get<K: AsRef<[u8]>, I>(&self, keys: I) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        I: IntoIterator<Item = K>,
    {
        let mut readopts = ReadOptions::default();
        readopts.set_snapshot(self);
        self.db.multi_get_opt(keys, &readopts)
    }
}

/// An open database (the crate's default `DB`), on the engine its
/// [`Options`] chose.
pub struct DB {
    db: Box<dyn Db>,
    /// The families this handle opened, by name, as the crate keeps them:
    /// empty after [`DB::open`], every listed one and `default` after
    /// [`DB::open_cf`].
    cfs: BTreeMap<String, ColumnFamily>,
    path: PathBuf,
}

impl std::fmt::Debug for DB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} database {{ path: {} }}",
            self.db.name(),
            self.path.display()
        )
    }
}

impl DB {
    /// Opens (creating if missing) the database at `path` with the default
    /// options: vmemkv.
    pub fn open_default<P: AsRef<Path>>(path: P) -> Result<Self, Error> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        Self::open(&opts, path)
    }

    /// Opens the database at `path`. As in RocksDB, a database that has
    /// families besides `default` must be opened with [`DB::open_cf`].
    pub fn open<P: AsRef<Path>>(opts: &Options, path: P) -> Result<Self, Error> {
        Self::open_cf(opts, path, None::<&str>)
    }

    /// Opens the database at `path` with the families `cfs`.
    ///
    /// RocksDB's rules: every existing family must be listed (`default` may
    /// be left out); a listed family that does not exist is created when
    /// [`Options::create_missing_column_families`] is set and is an error
    /// otherwise.
    pub fn open_cf<P, I, N>(opts: &Options, path: P, cfs: I) -> Result<Self, Error>
    where
        P: AsRef<Path>,
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let path = path.as_ref();
        let mut listed: Vec<String> = Vec::new();
        for name in cfs {
            let name = name.as_ref();
            if !listed.iter().any(|l| l == name) {
                listed.push(name.to_string());
            }
        }
        let db = crate::registry::open(opts.engine, path, &opts.engine_options())?;
        let unlisted: Vec<String> = db
            .cf_names()
            .into_iter()
            .filter(|n| n != Cf::DEFAULT_NAME && !listed.contains(n))
            .collect();
        let mut map = BTreeMap::new();
        if !listed.is_empty() {
            if !listed.iter().any(|n| n == Cf::DEFAULT_NAME) {
                listed.push(Cf::DEFAULT_NAME.to_string());
            }
            for name in listed {
                let cf = match db.cf_handle(&name) {
                    Some(cf) => cf,
                    None if opts.create_missing_column_families => db.create_cf(&name)?,
                    None => {
                        return Err(Error::invalid(format!(
                            "column family {name:?} not found in the {} database at {} \
                             (set create_missing_column_families to create it)",
                            db.name(),
                            path.display()
                        )))
                    }
                };
                map.insert(name, ColumnFamily { cf });
            }
        }
        if !unlisted.is_empty() {
            return Err(Error::invalid(format!(
                "column families not opened: {} (the {} database at {} has them; list them in open_cf)",
                unlisted.join(", "),
                db.name(),
                path.display()
            )));
        }
        Ok(DB {
            db,
            cfs: map,
            path: path.to_path_buf(),
        })
    }

    /// The families of the database at `path`, `default` included. The
    /// database is opened to read them, so this fails (`Busy`) while
    /// another handle has it open.
    pub fn list_cf<P: AsRef<Path>>(opts: &Options, path: P) -> Result<Vec<String>, Error> {
        let mut eo = opts.engine_options();
        eo.create_if_missing = false;
        eo.error_if_exists = false;
        let db = crate::registry::open(opts.engine, path.as_ref(), &eo)?;
        Ok(db.cf_names())
    }

    /// Removes the database at `path` (every engine's files).
    pub fn destroy<P: AsRef<Path>>(_opts: &Options, path: P) -> Result<(), Error> {
        crate::destroy(path.as_ref()).map_err(Error::from)
    }

    /// The database's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates family `name`. `opts` is accepted for the crate's signature;
    /// families have no options of their own here.
    pub fn create_cf<N: AsRef<str>>(&mut self, name: N, opts: &Options) -> Result<(), Error> {
        let _ = opts;
        let name = name.as_ref();
        let cf = self.db.create_cf(name)?;
        self.cfs.insert(name.to_string(), ColumnFamily { cf });
        Ok(())
    }

    /// Drops family `name` and every key in it.
    pub fn drop_cf(&mut self, name: &str) -> Result<(), Error> {
        if !self.cfs.contains_key(name) {
            return Err(Error::invalid(format!(
                "invalid column family: {name:?} is not open in this handle"
            )));
        }
        self.db.drop_cf(name)?;
        self.cfs.remove(name);
        Ok(())
    }

    /// The family `name`, if this handle opened or created it.
    pub fn cf_handle(&self, name: &str) -> Option<&ColumnFamily> {
        self.cfs.get(name)
    }

    /// The engine behind this database (facade only).
    pub fn engine(&self) -> &dyn Db {
        &*self.db
    }

    // ---- reads ----

    fn get_in(&self, cf: Cf, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.db.get_cf(ro.check()?, cf, key)?)
    }

    /// The value of `key` in the default family.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Vec<u8>>, Error> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// [`DB::get`] with read options.
    pub fn get_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        self.get_in(Cf::DEFAULT, key.as_ref(), readopts)
    }

    /// The value of `key` in `cf`.
    pub fn get_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<Vec<u8>>, Error> {
        self.get_cf_opt(cf, key, &ReadOptions::default())
    }

    /// [`DB::get_cf`] with read options.
    pub fn get_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        self.get_in(cf.handle(), key.as_ref(), readopts)
    }

    fn pinned<'a>(value: Option<Vec<u8>>) -> Option<DBPinnableSlice<'a>> {
        value.map(|data| DBPinnableSlice {
            data,
            _db: PhantomData,
        })
    }

    /// The value of `key` in the default family, as a slice.
    pub fn get_pinned<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        self.get_pinned_opt(key, &ReadOptions::default())
    }

    /// [`DB::get_pinned`] with read options.
    pub fn get_pinned_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        Ok(Self::pinned(self.get_opt(key, readopts)?))
    }

    /// The value of `key` in `cf`, as a slice.
    pub fn get_pinned_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        self.get_pinned_cf_opt(cf, key, &ReadOptions::default())
    }

    /// [`DB::get_pinned_cf`] with read options.
    pub fn get_pinned_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        Ok(Self::pinned(self.get_cf_opt(cf, key, readopts)?))
    }

    /// The values of `keys` in the default family, read as of one moment.
    pub fn multi_get<K, I>(&self, keys: I) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = K>,
    {
        self.multi_get_opt(keys, &ReadOptions::default())
    }

    /// [`DB::multi_get`] with read options.
    pub fn multi_get_opt<K, I>(
        &self,
        keys: I,
        readopts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = K>,
    {
        self.multi_in(
            keys.into_iter().map(|k| (Cf::DEFAULT, k)).collect(),
            readopts,
        )
    }

    /// The values of `(family, key)` pairs, read as of one moment.
    pub fn multi_get_cf<'b, K, I, W>(&self, keys: I) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: 'b + AsColumnFamilyRef,
    {
        self.multi_get_cf_opt(keys, &ReadOptions::default())
    }

    /// [`DB::multi_get_cf`] with read options.
    pub fn multi_get_cf_opt<'b, K, I, W>(
        &self,
        keys: I,
        readopts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: 'b + AsColumnFamilyRef,
    {
        self.multi_in(
            keys.into_iter().map(|(cf, k)| (cf.handle(), k)).collect(),
            readopts,
        )
    }

    fn multi_in<K: AsRef<[u8]>>(
        &self,
        keys: Vec<(Cf, K)>,
        readopts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>, Error>> {
        let ro = match readopts.check() {
            Ok(ro) => ro,
            Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
        };
        // Reads of several families must see one state, as RocksDB's
        // MultiGet does: pin a snapshot unless the caller gave one.
        let pinned;
        let ro = match (&ro.snapshot, keys.len() > 1) {
            (None, true) => match self.db.snapshot() {
                Ok(s) => {
                    pinned = ro.clone().with_snapshot(&s);
                    &pinned
                }
                Err(crate::Error::NotSupported(_)) => ro,
                Err(e) => return keys.iter().map(|_| Err(e.clone().into())).collect(),
            },
            _ => ro,
        };
        keys.iter()
            .map(|(cf, k)| Ok(self.db.get_cf(ro, *cf, k.as_ref())?))
            .collect()
    }

    // ---- writes ----

    /// Sets `key` to `value` in the default family.
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> Result<(), Error> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`DB::put`] with write options.
    pub fn put_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        key: K,
        value: V,
        writeopts: &WriteOptions,
    ) -> Result<(), Error> {
        Ok(self
            .db
            .put(&writeopts.inner, key.as_ref(), value.as_ref())?)
    }

    /// Sets `key` to `value` in `cf`.
    pub fn put_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) -> Result<(), Error> {
        self.put_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`DB::put_cf`] with write options.
    pub fn put_cf_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
        writeopts: &WriteOptions,
    ) -> Result<(), Error> {
        Ok(self
            .db
            .put_cf(&writeopts.inner, cf.handle(), key.as_ref(), value.as_ref())?)
    }

    /// Removes `key` from the default family.
    pub fn delete<K: AsRef<[u8]>>(&self, key: K) -> Result<(), Error> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// [`DB::delete`] with write options.
    pub fn delete_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        writeopts: &WriteOptions,
    ) -> Result<(), Error> {
        Ok(self.db.delete(&writeopts.inner, key.as_ref())?)
    }

    /// Removes `key` from `cf`.
    pub fn delete_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<(), Error> {
        self.delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// [`DB::delete_cf`] with write options.
    pub fn delete_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        writeopts: &WriteOptions,
    ) -> Result<(), Error> {
        Ok(self
            .db
            .delete_cf(&writeopts.inner, cf.handle(), key.as_ref())?)
    }

    /// Removes every key in `[from, to)` of `cf`.
    pub fn delete_range_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        from: K,
        to: K,
    ) -> Result<(), Error> {
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, from, to);
        self.write(batch)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, batch: WriteBatch) -> Result<(), Error> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// [`DB::write`] with write options.
    pub fn write_opt(&self, batch: WriteBatch, writeopts: &WriteOptions) -> Result<(), Error> {
        Ok(self.db.write(&writeopts.inner, &batch.inner)?)
    }

    // ---- iterators and snapshots ----

    /// An iterator over the default family.
    pub fn iterator(&self, mode: IteratorMode) -> DBIterator<'_> {
        self.iterator_opt(mode, ReadOptions::default())
    }

    /// [`DB::iterator`] with read options (bounds, snapshot).
    pub fn iterator_opt(&self, mode: IteratorMode, readopts: ReadOptions) -> DBIterator<'_> {
        DBIterator::new(self.raw_iterator_opt(readopts), mode)
    }

    /// An iterator over `cf`.
    pub fn iterator_cf(&self, cf: &impl AsColumnFamilyRef, mode: IteratorMode) -> DBIterator<'_> {
        self.iterator_cf_opt(cf, ReadOptions::default(), mode)
    }

    /// [`DB::iterator_cf`] with read options (note the crate's argument
    /// order: family, options, mode).
    pub fn iterator_cf_opt(
        &self,
        cf: &impl AsColumnFamilyRef,
        readopts: ReadOptions,
        mode: IteratorMode,
    ) -> DBIterator<'_> {
        DBIterator::new(self.raw_iterator_cf_opt(cf, readopts), mode)
    }

    /// The entries of the default family whose keys start with `prefix`,
    /// forward. Unlike the crate's, which stops at the prefix only when a
    /// prefix extractor of that length is configured, this one always
    /// stops there (see `docs/rocksdb_api.md`).
    pub fn prefix_iterator<P: AsRef<[u8]>>(&self, prefix: P) -> DBIterator<'_> {
        self.prefix_in(Cf::DEFAULT, prefix.as_ref())
    }

    /// The entries of `cf` whose keys start with `prefix`, forward.
    pub fn prefix_iterator_cf<P: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        prefix: P,
    ) -> DBIterator<'_> {
        self.prefix_in(cf.handle(), prefix.as_ref())
    }

    fn prefix_in(&self, cf: Cf, prefix: &[u8]) -> DBIterator<'_> {
        let ro = crate::ReadOptions {
            iterate_upper_bound: prefix_successor(prefix),
            ..crate::ReadOptions::default()
        };
        let raw = DBRawIterator::new(self.db.iter_cf(&ro, cf));
        DBIterator::new(raw, IteratorMode::From(prefix, Direction::Forward))
    }

    /// A cursor over the default family.
    pub fn raw_iterator(&self) -> DBRawIterator<'_> {
        self.raw_iterator_opt(ReadOptions::default())
    }

    /// [`DB::raw_iterator`] with read options.
    pub fn raw_iterator_opt(&self, readopts: ReadOptions) -> DBRawIterator<'_> {
        self.raw_in(Cf::DEFAULT, &readopts)
    }

    /// A cursor over `cf`.
    pub fn raw_iterator_cf(&self, cf: &impl AsColumnFamilyRef) -> DBRawIterator<'_> {
        self.raw_iterator_cf_opt(cf, ReadOptions::default())
    }

    /// [`DB::raw_iterator_cf`] with read options.
    pub fn raw_iterator_cf_opt(
        &self,
        cf: &impl AsColumnFamilyRef,
        readopts: ReadOptions,
    ) -> DBRawIterator<'_> {
        self.raw_in(cf.handle(), &readopts)
    }

    fn raw_in(&self, cf: Cf, readopts: &ReadOptions) -> DBRawIterator<'_> {
        match readopts.check() {
            Ok(ro) => DBRawIterator::new(self.db.iter_cf(ro, cf)),
            Err(e) => DBRawIterator::new(Err(e.as_compat().clone())),
        }
    }

    /// A point-in-time view of every family. An engine without snapshots
    /// gives one whose every read fails with `NotSupported`.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            db: self,
            snap: self.db.snapshot().map_err(Error::from),
        }
    }

    // ---- maintenance ----

    /// Makes every write durable (RocksDB: flushes the memtables).
    pub fn flush(&self) -> Result<(), Error> {
        Ok(self.db.flush()?)
    }

    /// Compacts the keys in `[start, end]` of the default family (`None`:
    /// open on that side).
    pub fn compact_range<S: AsRef<[u8]>, E: AsRef<[u8]>>(&self, start: Option<S>, end: Option<E>) {
        // The crate's signature returns nothing; an engine that cannot
        // compact has nothing to do.
        let _ = self.db.compact_range(
            start.as_ref().map(AsRef::as_ref),
            end.as_ref().map(AsRef::as_ref),
        );
    }

    /// A property of the engine (RocksDB's names on RocksDB, the engine's
    /// own elsewhere).
    pub fn property_value(&self, name: &str) -> Result<Option<String>, Error> {
        Ok(self.db.property(name))
    }
}

/// The smallest key above every key that starts with `prefix`, or `None`
/// when there is none (`prefix` empty or all `0xff`).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}
