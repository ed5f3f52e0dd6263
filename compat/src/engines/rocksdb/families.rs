//! Column families: which families to open, and the handle the adapter
//! keeps for each in its [`crate::Families`] table.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{BoundColumnFamily, ColumnFamilyDescriptor, Options, DB};

use crate::Cf;

/// RocksDB's handle of one open family.
///
/// The crate ties a `BoundColumnFamily` to a borrow of the database, but
/// the adapter keeps its table next to the database it borrows from, which
/// a lifetime cannot express; [`unbind`] widens it to `'static`. The
/// adapter upholds what the lifetime stood for (no handle outlives the
/// database): the table is declared before the database and so dropped
/// first, and every other holder (an iterator, a MultiScan) borrows the
/// adapter. Holding the `Arc` also keeps a dropped family's handle valid
/// for reads already under way, as RocksDB intends: its files go when the
/// last handle does.
pub(super) type CfRef = Arc<BoundColumnFamily<'static>>;

/// Widens a handle's lifetime; see [`CfRef`].
pub(super) fn unbind(h: Arc<BoundColumnFamily<'_>>) -> CfRef {
    // SAFETY: only the lifetime parameter changes (same type, same layout);
    // the `Arc` is rebuilt from the pointer `into_raw` gave up, once. That
    // the handle does not outlive the database is kept by the adapter, as
    // described at `CfRef`.
    unsafe { Arc::from_raw(Arc::into_raw(h).cast::<BoundColumnFamily<'static>>()) }
}

/// The families to open at `path`, `default` first.
///
/// A directory without a `CURRENT` file holds no database yet (RocksDB
/// creates it with `default` alone). If RocksDB cannot list the families
/// of an existing one, `default` alone is tried too: the open then either
/// succeeds (there is nothing else) or fails with RocksDB's own reason
/// (another process holds the lock, the MANIFEST is corrupt, a family was
/// left out), which says more than the listing's error.
fn existing(opts: &Options, path: &Path) -> Vec<String> {
    let mut names = vec![Cf::DEFAULT_NAME.to_owned()];
    if path.join("CURRENT").exists() {
        if let Ok(listed) = DB::list_cf(opts, path) {
            names.extend(listed.into_iter().filter(|n| n != Cf::DEFAULT_NAME));
        }
    }
    names
}

/// Opens the database at `path` with every existing family, each with the
/// database's own options (so BlobDB's blob settings apply to every
/// family). Returns the database and the families' names, `default` first.
pub(super) fn open_all(opts: &Options, path: &Path) -> Result<(DB, Vec<String>), rocksdb::Error> {
    let names = existing(opts, path);
    let descriptors = names
        .iter()
        .map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
    let db = DB::open_cf_descriptors(opts, path, descriptors)?;
    Ok((db, names))
}
