//! RocksDB snapshots (`DB::GetSnapshot`) behind the trait's [`crate::Snapshot`].
//!
//! The crate's `SnapshotWithThreadMode` borrows the database, but the
//! trait's handle is a `'static`, cloneable value that may outlive a call,
//! and the C++ MultiScan shim needs the raw `rocksdb_snapshot_t*`. So the
//! adapter owns the raw snapshot next to an `Arc<DB>` (the database closes
//! after the last snapshot is released, as RocksDB requires), and lends it to
//! the crate's read options through [`Pinned`], a `DBAccess` whose
//! "create snapshot" returns the held one and whose "release" does nothing.

use std::sync::Arc;

use librocksdb_sys as ffi;
use rocksdb::{
    AsColumnFamilyRef, AsRawPtr, DBAccess, DBPinnableSlice, Error, ReadOptions,
    SnapshotWithThreadMode, DB,
};

/// One held RocksDB snapshot.
pub(crate) struct RocksSnapshot {
    raw: *const ffi::rocksdb_snapshot_t,
    db: Arc<DB>,
}

// SAFETY: a RocksDB `Snapshot` is an immutable object that RocksDB lets any
// thread read through and release (`DB::ReleaseSnapshot` is thread-safe);
// `raw` is only read, and released once, in `drop`.
unsafe impl Send for RocksSnapshot {}
// SAFETY: as above: shared use only reads the pointer.
unsafe impl Sync for RocksSnapshot {}

impl RocksSnapshot {
    pub(crate) fn take(db: &Arc<DB>) -> RocksSnapshot {
        // SAFETY: `as_raw_ptr` is the live `rocksdb_t*` of `db`, which the
        // returned value keeps open through its `Arc`.
        let raw = unsafe { ffi::rocksdb_create_snapshot(db.as_raw_ptr()) };
        RocksSnapshot {
            raw,
            db: Arc::clone(db),
        }
    }

    /// The raw handle, for the MultiScan shim (valid while `self` lives).
    pub(crate) fn raw(&self) -> *const ffi::rocksdb_snapshot_t {
        self.raw
    }

    /// Makes `ro` read as of this snapshot. `ro` keeps only the raw
    /// pointer, so the caller keeps `self` alive as long as `ro` is used.
    pub(crate) fn apply(&self, ro: &mut ReadOptions) {
        let pinned = Pinned {
            db: &self.db,
            raw: self.raw,
        };
        ro.set_snapshot(&SnapshotWithThreadMode::new(&pinned));
    }
}

impl Drop for RocksSnapshot {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `rocksdb_create_snapshot` on this
        // database, which `self.db` still holds open, and is released once.
        unsafe { ffi::rocksdb_release_snapshot(self.db.as_raw_ptr(), self.raw) }
    }
}

/// Lends a held snapshot to `SnapshotWithThreadMode` (see the module docs).
struct Pinned<'a> {
    db: &'a DB,
    raw: *const ffi::rocksdb_snapshot_t,
}

impl DBAccess for Pinned<'_> {
    unsafe fn create_snapshot(&self) -> *const ffi::rocksdb_snapshot_t {
        self.raw
    }

    unsafe fn release_snapshot(&self, _snapshot: *const ffi::rocksdb_snapshot_t) {
        // Released by `RocksSnapshot::drop`, not by the lender.
    }

    unsafe fn create_iterator(&self, readopts: &ReadOptions) -> *mut ffi::rocksdb_iterator_t {
        // SAFETY: forwarded unchanged; the caller upholds the contract.
        unsafe { self.db.create_iterator(readopts) }
    }

    unsafe fn create_iterator_cf(
        &self,
        cf_handle: *mut ffi::rocksdb_column_family_handle_t,
        readopts: &ReadOptions,
    ) -> *mut ffi::rocksdb_iterator_t {
        // SAFETY: forwarded unchanged; the caller upholds the contract.
        unsafe { self.db.create_iterator_cf(cf_handle, readopts) }
    }

    fn get_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        DBAccess::get_opt(self.db, key, readopts)
    }

    fn get_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<Vec<u8>>, Error> {
        DBAccess::get_cf_opt(self.db, cf, key, readopts)
    }

    fn get_pinned_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        DBAccess::get_pinned_opt(self.db, key, readopts)
    }

    fn get_pinned_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        readopts: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice<'_>>, Error> {
        DBAccess::get_pinned_cf_opt(self.db, cf, key, readopts)
    }

    fn multi_get_opt<K, I>(
        &self,
        keys: I,
        readopts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = K>,
    {
        DBAccess::multi_get_opt(self.db, keys, readopts)
    }

    fn multi_get_cf_opt<'b, K, I, W>(
        &self,
        keys_cf: I,
        readopts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>, Error>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: AsColumnFamilyRef + 'b,
    {
        DBAccess::multi_get_cf_opt(self.db, keys_cf, readopts)
    }
}
