//! The vmemkv adapter: maps the [`Db`] trait onto `vmemkv::Db`.
//!
//! # Options (`EngineOptions::extra`)
//! `segment_size` (bytes), `checkpoint_interval_bytes`, `bloom`,
//! `inline_values` (alias `inline`), `prefault`, `random_access`,
//! `pread_min_bytes`, `background`,
//! `defrag_garbage_ratio`, `defrag_max_bytes_per_cycle`, `split_threshold`,
//! `maintenance_interval_ms`, `maintenance_nice`, `max_space_amplification`,
//! `order_idle_ms`, `sorted_run_bytes`, `sort_tail_at_close`, `merge_idle_ms`, `use_direct_reads` (async MultiScan reads with
//! `O_DIRECT`, or into the page cache; unset = direct first, the page
//! cache for bytes scanned again, see `BufferMode::Auto`). Unknown
//! options are an `InvalidArgument`.
//!
//! `wait_for_background_work` (db_bench `waitforcompaction`) runs the
//! key-order pass to completion: values of a random-order load are
//! rewritten in key order, as RocksDB's compactions leave SST files sorted.
//!
//! # Limits
//! Keys up to 65,533 bytes (the engine's 65,535 less the two a family
//! prefix takes); values up to `min(16 MiB, segment_size / 4)`
//! (16 MiB with the default 64 MiB segments).
//!
//! # What concurrent readers see
//! RocksDB's semantics (design.md §8): a `write(batch)` becomes visible
//! all at once; an iterator, a multi-key `multi_get` and a `multi_scan` read
//! the database as of their start; [`Db::snapshot`] is the engine's
//! snapshot, released on drop (release it before closing the database).
//! With `sync = true` a write is made durable before the call returns, but
//! it may become visible to other threads slightly earlier.
//! `disable_wal` puts may be lost in a crash until `flush`, close or a
//! logged write, as in RocksDB: vmemkv packs them, values back to back,
//! and writes their keys when the packed record is sealed.
//!
//! # Column families
//! `default` keeps its keys as they are; every other family lives under a
//! two-byte prefix, `FF` and its slot, in the engine's one keyspace
//! (layout in the private `keys` module, and design.md §12): a batch
//! across families is one engine batch and a snapshot one engine
//! snapshot. The catalog of families is the engine's application metadata
//! file (`APPMETA`), replaced atomically; `drop_cf` rewrites it, then
//! tombstones the family's keys with a synced batch. A database holds up to
//! 254 families besides `default`. The adapter opens only databases it
//! wrote (they have the catalog); a non-empty database without one is
//! `Corruption` naming the missing file, never misread.

mod keys;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::db::{check_sizes, Db};
use crate::error::{Error, IoFailure, Result};
use crate::family::{check_family_name, Cf, Families};
use crate::iter::DbIterator;
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::options::{EngineOptions, Limits, OptionMap, ReadOptions, WriteOptions};
use crate::{BatchOp, WriteBatch};
use keys::DEFAULT_SLOT;

pub(crate) fn map_err(e: vmemkv::Error) -> Error {
    match e {
        vmemkv::Error::InvalidArgument(m) => Error::InvalidArgument(m),
        vmemkv::Error::Corruption(m) => Error::Corruption(m),
        vmemkv::Error::IoError(m) => Error::IoError(IoFailure::new(m.kind(), m.message())),
        vmemkv::Error::Busy(m) => Error::Busy(m),
        vmemkv::Error::ShutdownInProgress(m) => Error::ShutdownInProgress(m),
        vmemkv::Error::Poisoned(m) => Error::Poisoned(m),
    }
}

/// Builds engine options from the generic ones.
pub fn engine_options(opts: &EngineOptions) -> Result<vmemkv::Options> {
    let mut m = OptionMap::new("vmemkv", opts);
    let mut o = vmemkv::Options::default()
        .create_if_missing(opts.create_if_missing)
        .error_if_exists(opts.error_if_exists);
    if let Some(v) = m.take::<usize>("segment_size")? {
        o.segment_size = v;
    }
    if let Some(v) = m.take::<u64>("checkpoint_interval_bytes")? {
        o.checkpoint_interval_bytes = v;
    }
    if let Some(v) = m.take_bool("bloom")? {
        o.bloom = v;
    }
    if let Some(v) = m.take_bool("inline")? {
        o.inline_values = v;
    }
    if let Some(v) = m.take_bool("inline_values")? {
        o.inline_values = v;
    }
    if let Some(v) = m.take_bool("prefault")? {
        o.prefault = v;
    }
    if let Some(v) = m.take_bool("random_access")? {
        o.random_access = v;
    }
    if let Some(v) = m.take::<usize>("pread_min_bytes")? {
        o.pread_min_bytes = v;
    }
    if let Some(v) = m.take_bool("background")? {
        o.background = v;
    }
    if let Some(v) = m.take::<f64>("defrag_garbage_ratio")? {
        o.defrag_garbage_ratio = v;
    }
    if let Some(v) = m.take::<u64>("defrag_max_bytes_per_cycle")? {
        o.defrag_max_bytes_per_cycle = v;
    }
    if let Some(v) = m.take::<usize>("split_threshold")? {
        o.split_threshold = v;
    }
    if let Some(v) = m.take::<u64>("maintenance_interval_ms")? {
        o.maintenance_interval_ms = v;
    }
    if let Some(v) = m.take::<i32>("maintenance_nice")? {
        o.maintenance_nice = v;
    }
    if let Some(v) = m.take::<f64>("max_space_amplification")? {
        o.max_space_amplification = v;
    }
    if let Some(v) = m.take::<u64>("order_idle_ms")? {
        o.order_idle_ms = v;
    }
    if let Some(v) = m.take::<u64>("sorted_run_bytes")? {
        o.sorted_run_bytes = v;
    }
    if let Some(v) = m.take_bool("sort_tail_at_close")? {
        o.sort_tail_at_close = v;
    }
    if let Some(v) = m.take::<u64>("merge_idle_ms")? {
        o.merge_idle_ms = v;
    }
    if let Some(v) = m.take_bool("use_direct_reads")? {
        o.use_direct_reads = Some(v);
    }
    m.finish()?;
    Ok(o)
}

/// The engine's write options for the trait's.
fn native_write(opts: &WriteOptions) -> vmemkv::WriteOptions {
    vmemkv::WriteOptions {
        sync: opts.sync,
        disable_wal: opts.disable_wal,
    }
}

/// Opens vmemkv at `path`, with every family it holds.
pub fn open(path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    let o = engine_options(opts)?;
    let db = vmemkv::Db::open(path, o).map_err(map_err)?;
    let families = Families::new("vmemkv", DEFAULT_SLOT);
    let path = path.display().to_string();
    let retired = load_catalog(&db, &path, &families)?;
    let high = {
        let mut it = db.iter(vmemkv::Bounds::all());
        it.seek(keys::HOLE_START);
        it.status().map_err(map_err)?;
        it.valid()
    };
    let limits = Limits {
        max_key_size: Some(db.max_key_size() - keys::OVERHEAD),
        max_value_size: Some(db.max_value_size()),
    };
    Ok(Box::new(VmemkvDb {
        db,
        path,
        high_keys: AtomicBool::new(high || families.all().len() > 1),
        families,
        ddl: Mutex::new(retired),
        limits,
    }))
}

/// Reads the catalog (writing an empty one into an empty database), opens
/// every family in it, and removes keys left in a slot no family holds (a
/// `drop_cf` cut short after its catalog write). Returns the free slots.
fn load_catalog(db: &vmemkv::Db, path: &str, families: &Families<u8>) -> Result<Vec<u8>> {
    let catalog = match db.app_meta().map_err(map_err)? {
        Some(blob) => keys::decode_catalog(path, &blob)?,
        None => {
            let mut it = db.iter(vmemkv::Bounds::all());
            it.seek_to_first();
            it.status().map_err(map_err)?;
            if it.valid() {
                // Deleted, or never written: the database was filled through
                // the engine's own API. Either way the keys cannot be read
                // as families, so the open names the missing file.
                return Err(Error::Corruption(format!(
                    "{path}/APPMETA is missing but the database holds keys: without its column \
                     family catalog they cannot be read through the compat layer (a database \
                     written through the engine's own API opens with vmemkv::Db)"
                )));
            }
            db.set_app_meta(&keys::encode_catalog(&[]))
                .map_err(map_err)?;
            Vec::new()
        }
    };
    let mut free: Vec<u8> = keys::SLOTS.collect();
    for (name, slot) in catalog {
        free.retain(|s| *s != slot);
        families.add(&name, slot)?;
    }
    // One pass over the hole, a seek per slot that holds keys.
    let mut orphans = vmemkv::WriteBatch::new();
    {
        let mut it = db.iter(vmemkv::Bounds::new(
            Some(keys::HOLE_START),
            Some(keys::HOLE_END),
        ));
        it.seek_to_first();
        while it.valid() {
            let Some(&slot) = it.key().get(1) else {
                it.next();
                continue;
            };
            let (lo, hi) = keys::whole(slot);
            if free.contains(&slot) {
                orphans.delete_range(&lo, &hi);
            }
            it.seek(&hi);
        }
        it.status().map_err(map_err)?;
    }
    if !orphans.is_empty() {
        db.write(&SYNC, &orphans).map_err(map_err)?;
    }
    Ok(free)
}

/// The adapter.
pub struct VmemkvDb {
    db: vmemkv::Db,
    /// For messages.
    path: String,
    /// Open families and their slots (`default` is never looked up here).
    families: Families<u8>,
    /// The free slots, in the order they are taken; creating and dropping
    /// families holds it, so catalog writes never interleave.
    ddl: Mutex<Vec<u8>>,
    /// Whether the keyspace may hold keys from `HOLE_START` up: another
    /// family's, or `default`'s escaped ones. Until it does, a `default`
    /// cursor neither steps over the hole nor reads a key's first byte to
    /// decode it (that read is the first touch of the key's cache line: 6%
    /// of a 100-key scan). Set before the first such key is written, never
    /// cleared while open.
    high_keys: AtomicBool,
    /// The engine's limits less the two bytes a family's key carries.
    limits: Limits,
}

impl VmemkvDb {
    /// The native handle, for engine-specific calls.
    pub fn native(&self) -> &vmemkv::Db {
        &self.db
    }
}

/// The adapter's snapshot state: the engine's snapshot.
type VSnap = vmemkv::Snapshot;

const SYNC: vmemkv::WriteOptions = vmemkv::WriteOptions {
    sync: true,
    disable_wal: false,
};

impl VmemkvDb {
    fn owner(&self) -> usize {
        self as *const VmemkvDb as usize
    }

    /// The stored key of `key` in `cf`, its length checked against the
    /// adapter's limit (two bytes under the engine's, for every family
    /// alike).
    #[inline]
    fn stored_key<'k>(&self, cf: Cf, key: &'k [u8]) -> Result<std::borrow::Cow<'k, [u8]>> {
        check_sizes(&self.limits, key, None)?;
        let stored = keys::encode(self.slot(cf)?, key);
        // Before the write that stores it, so a view that holds the key
        // finds the flag set (`high_after_view`).
        if matches!(stored, std::borrow::Cow::Owned(_)) && !self.high_keys.load(Ordering::Relaxed) {
            self.high_keys.store(true, Ordering::SeqCst);
        }
        Ok(stored)
    }

    /// `high_keys`, read after a cursor took its view: the flag was set
    /// before any key from `HOLE_START` up was written, and that view holds
    /// only writes published before it was taken.
    fn high_after_view(&self) -> bool {
        self.high_keys.load(Ordering::SeqCst)
    }

    /// The slot of `cf` (`DEFAULT_SLOT` for `default`).
    #[inline]
    fn slot(&self, cf: Cf) -> Result<u8> {
        if cf.is_default() {
            Ok(DEFAULT_SLOT)
        } else {
            self.families.get(cf)
        }
    }

    /// Every family but `default`, with its slot.
    fn catalog(&self) -> Vec<(String, u8)> {
        self.families
            .all()
            .into_iter()
            .filter(|(cf, _, _)| !cf.is_default())
            .map(|(_, name, slot)| (name, slot))
            .collect()
    }

    fn free_slots(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // The list is only ever popped or pushed whole, so a panic while it
        // was held leaves it consistent.
        self.ddl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The engine snapshot `ro` names, checked to be this database's.
    fn snapshot_of<'s>(&self, ro: &'s ReadOptions) -> Result<Option<&'s VSnap>> {
        ro.snapshot
            .as_ref()
            .map(|s| s.downcast::<VSnap>("vmemkv", self.owner()))
            .transpose()
    }
}

/// A cursor of one family. `DECODE` is false for a `default` cursor
/// whose view holds no key from `HOLE_START` up: it is the engine's cursor
/// with nothing added, so its moves are tail calls and `key` never reads
/// the key's bytes (a 100-key scan ran 6-9% slower with the checks).
struct VIter<'a, const DECODE: bool> {
    it: vmemkv::Iter<'a>,
    /// The family's slot.
    slot: u8,
    /// A `default` cursor that must step over other families' keys.
    holey: bool,
    /// A seek's target, encoded (reused).
    target: Vec<u8>,
    /// The snapshot `it` reads, kept alive (declared after, dropped after).
    _snapshot: Option<crate::Snapshot>,
}

impl<const DECODE: bool> VIter<'_, DECODE> {
    /// After a forward move: past the hole if the cursor is in it.
    #[inline]
    fn settle_forward(&mut self) {
        if DECODE && self.holey && self.it.valid() && keys::in_hole(self.it.key()) {
            self.it.seek(keys::HOLE_END);
        }
    }

    /// After a backward move: below the hole if the cursor is in it (no
    /// key is stored as `HOLE_START` itself).
    #[inline]
    fn settle_backward(&mut self) {
        if DECODE && self.holey && self.it.valid() && keys::in_hole(self.it.key()) {
            self.it.seek_for_prev(keys::HOLE_START);
        }
    }

    /// `key` as stored: itself, or encoded into the reused buffer.
    #[inline]
    fn stored<'k>(target: &'k mut Vec<u8>, slot: u8, key: &'k [u8]) -> &'k [u8] {
        if keys::verbatim(slot, key) {
            return key;
        }
        keys::encode_into(target, slot, key);
        target
    }
}

impl<const DECODE: bool> DbIterator for VIter<'_, DECODE> {
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn seek_to_first(&mut self) {
        self.it.seek_to_first();
        self.settle_forward();
    }
    fn seek_to_last(&mut self) {
        self.it.seek_to_last();
        self.settle_backward();
    }
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(Self::stored(&mut self.target, self.slot, key));
        self.settle_forward();
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.it
            .seek_for_prev(Self::stored(&mut self.target, self.slot, key));
        self.settle_backward();
    }
    fn next(&mut self) {
        self.it.next();
        self.settle_forward();
    }
    fn prev(&mut self) {
        self.it.prev();
        self.settle_backward();
    }
    fn key(&self) -> &[u8] {
        if DECODE {
            keys::user_key(self.slot, self.it.key())
        } else {
            self.it.key()
        }
    }
    fn value(&self) -> &[u8] {
        self.it.value()
    }
    fn status(&self) -> Result<()> {
        self.it.status().map_err(map_err)
    }
}

/// The scan, and the snapshot it reads (kept alive; dropped after it).
struct VMultiScan<'a> {
    it: vmemkv::MultiScanIter<'a>,
    slot: u8,
    /// The user's range of each of the engine's ranges: a `default` range
    /// that spans the hole is two engine ranges, below and above it.
    owner: Vec<usize>,
    started: bool,
    /// Its view may hold stored keys that are not the user's keys.
    decode: bool,
    /// A `default` scan that must skip other families' keys.
    holey: bool,
    _snapshot: Option<crate::Snapshot>,
}

impl MultiScan for VMultiScan<'_> {
    fn next_range(&mut self) -> Result<bool> {
        let was = self.started.then(|| self.range_index());
        loop {
            if !self.it.next_range().map_err(map_err)? {
                return Ok(false);
            }
            self.started = true;
            if Some(self.range_index()) != was {
                return Ok(true);
            }
        }
    }
    fn next_entry(&mut self) -> Result<bool> {
        loop {
            if self.it.next_entry().map_err(map_err)? {
                if self.holey && keys::in_hole(self.it.key()) {
                    continue;
                }
                return Ok(true);
            }
            let i = self.it.range_index();
            // At the end of a range's part below the hole, its part above.
            if !self.started || self.owner.get(i + 1) != self.owner.get(i) {
                return Ok(false);
            }
            if !self.it.next_range().map_err(map_err)? {
                return Ok(false);
            }
        }
    }
    fn range_index(&self) -> usize {
        let i = self.it.range_index();
        self.owner.get(i).copied().unwrap_or(i)
    }
    fn key(&self) -> &[u8] {
        if self.decode {
            keys::user_key(self.slot, self.it.key())
        } else {
            self.it.key()
        }
    }
    fn value(&self) -> &[u8] {
        self.it.value()
    }
}

impl Db for VmemkvDb {
    fn name(&self) -> &'static str {
        "vmemkv"
    }

    /// The engine's limits less the two bytes a family's key carries.
    fn limits(&self) -> Limits {
        self.limits
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
        let k = self.stored_key(cf, key)?;
        match self.snapshot_of(opts)? {
            Some(s) => self.db.get_into_at(s, &k, out, opts.verify_checksums),
            None => self.db.get_into_opt(&k, out, opts.verify_checksums),
        }
        .map_err(map_err)
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        check_family_name(name)?;
        let mut free = self.free_slots();
        if self.families.handle(name).is_some() {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists in {}",
                self.path
            )));
        }
        let Some(&slot) = free.first() else {
            return Err(Error::InvalidArgument(format!(
                "{} already holds 254 column families besides default, vmemkv's limit",
                self.path
            )));
        };
        // `default`'s cursors step over the hole from now on.
        self.high_keys.store(true, Ordering::SeqCst);
        // Keys that a writer holding a handle of a family dropped earlier
        // in this slot may have left go before the slot is handed out.
        let (lo, hi) = keys::whole(slot);
        let mut b = vmemkv::WriteBatch::new();
        b.delete_range(&lo, &hi);
        self.db.write(&SYNC, &b).map_err(map_err)?;
        let mut catalog = self.catalog();
        catalog.push((name.to_string(), slot));
        self.db
            .set_app_meta(&keys::encode_catalog(&catalog))
            .map_err(map_err)?;
        free.remove(0);
        self.families.add(name, slot)
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let mut free = self.free_slots();
        let (cf, slot) = self.families.for_drop(name)?;
        // The catalog first: once it no longer names the family, its keys
        // are unreachable, and an open that finds them removes them.
        let catalog: Vec<_> = self
            .catalog()
            .into_iter()
            .filter(|(_, s)| *s != slot)
            .collect();
        self.db
            .set_app_meta(&keys::encode_catalog(&catalog))
            .map_err(map_err)?;
        self.families.remove(cf);
        let (lo, hi) = keys::whole(slot);
        let mut b = vmemkv::WriteBatch::new();
        b.delete_range(&lo, &hi);
        self.db.write(&SYNC, &b).map_err(map_err)?;
        // Taken last, so that a handle still in use elsewhere writes into a
        // slot nobody reads for as long as possible.
        free.push(slot);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn snapshot(&self) -> Result<crate::Snapshot> {
        Ok(crate::Snapshot::new(
            "vmemkv",
            self.owner(),
            self.db.snapshot(),
        ))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        let k = self.stored_key(cf, key)?;
        self.db
            .put_opt(&native_write(opts), &k, value)
            .map_err(map_err)
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        let k = self.stored_key(cf, key)?;
        self.db.delete_opt(&native_write(opts), &k).map_err(map_err)
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        let mut b = vmemkv::WriteBatch::new();
        for op in batch.iter() {
            match op {
                BatchOp::Put { cf, key, value } => b.put(&self.stored_key(cf, key)?, value),
                BatchOp::Delete { cf, key } => b.delete(&self.stored_key(cf, key)?),
                BatchOp::DeleteRange { cf, begin, end } => {
                    let (lo, hi) = (self.stored_key(cf, begin)?, self.stored_key(cf, end)?);
                    if cf.is_default() {
                        // Never across the hole: that would delete other
                        // families' keys.
                        for (lo, hi) in keys::around_hole(lo.into_owned(), Some(hi.into_owned())) {
                            b.delete_range(&lo, hi.as_deref().unwrap_or_default());
                        }
                    } else {
                        b.delete_range(&lo, &hi);
                    }
                }
            }
        }
        self.db.write(&native_write(opts), &b).map_err(map_err)
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let slot = self.slot(cf)?;
        let (lower, upper) = keys::bounds(
            slot,
            opts.iterate_lower_bound.as_deref(),
            opts.iterate_upper_bound.as_deref(),
        );
        let bounds = vmemkv::Bounds { lower, upper };
        let it = match self.snapshot_of(opts)? {
            Some(s) => self
                .db
                .iter_at(s, bounds, opts.verify_checksums)
                .map_err(map_err)?,
            None => self.db.iter_opt(bounds, opts.verify_checksums),
        };
        let (target, _snapshot) = (Vec::new(), opts.snapshot.clone());
        Ok(if slot != DEFAULT_SLOT || self.high_after_view() {
            Box::new(VIter::<true> {
                it,
                slot,
                holey: slot == DEFAULT_SLOT,
                target,
                _snapshot,
            })
        } else {
            Box::new(VIter::<false> {
                it,
                slot,
                holey: false,
                target,
                _snapshot,
            })
        })
    }

    /// The engine's own MultiScan: with `use_async_io`, all value reads of
    /// every range go to io_uring before the first key is returned. Past
    /// `max_prefetch_size` the scan continues synchronously (it does not
    /// report `PrefetchLimitReached`).
    fn multi_scan<'a>(
        &'a self,
        opts: &ReadOptions,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        self.multi_scan_cf(opts, Cf::DEFAULT, args)
    }

    fn multi_scan_cf<'a>(
        &'a self,
        opts: &ReadOptions,
        cf: Cf,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        // Same validation and messages as every other engine.
        args.validate()?;
        let slot = self.slot(cf)?;
        let mut stored = args
            .ranges
            .iter()
            .map(|r| {
                let (lo, hi) = keys::bounds(slot, r.start.as_deref(), r.limit.as_deref());
                // `validate` refused a range without a start.
                (lo.unwrap_or_default(), hi)
            })
            .peekable();
        let mut ranges = Vec::with_capacity(args.ranges.len());
        let mut owner = Vec::with_capacity(args.ranges.len());
        let mut i = 0;
        while let Some((lo, hi)) = stored.next() {
            // The engine takes ranges in the order of their starts, so a
            // part above the hole cannot precede a later range that starts
            // below it: such a range stays whole, and the scan skips the
            // hole's entries in it (`VMultiScan::holey`).
            let whole = slot != DEFAULT_SLOT
                || stored
                    .peek()
                    .is_some_and(|(s, _)| s.as_slice() < keys::HOLE_END);
            let parts: Vec<_> = if whole {
                vec![(lo, hi)]
            } else {
                keys::around_hole(lo, hi).collect()
            };
            for (start, limit) in parts {
                ranges.push(crate::ScanRange {
                    start: Some(start),
                    limit,
                });
                owner.push(i);
            }
            i += 1;
        }
        let args = MultiScanArgs {
            ranges,
            ..args.clone()
        };
        let (lower_bound, upper_bound) = keys::bounds(
            slot,
            opts.iterate_lower_bound.as_deref(),
            opts.iterate_upper_bound.as_deref(),
        );
        let native = vmemkv::MultiScanOptions {
            args,
            lower_bound,
            upper_bound,
            verify_checksums: opts.verify_checksums,
            ..Default::default()
        };
        let it = match self.snapshot_of(opts)? {
            Some(s) => self.db.multi_scan_at(s, &native),
            // One view for every range: the scan registers its own.
            None => self.db.multi_scan(&native),
        }
        .map_err(map_err)?;
        let decode = slot != DEFAULT_SLOT || self.high_after_view();
        Ok(Box::new(VMultiScan {
            it,
            slot,
            owner,
            started: false,
            decode,
            holey: decode && slot == DEFAULT_SLOT,
            _snapshot: opts.snapshot.clone(),
        }))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(map_err)
    }

    /// Rewrites the range's values in key order (see `Db::compact_range`).
    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        // Rewriting other families' values too, where the range spans the
        // hole, costs time but changes nothing they read.
        let enc = |k: &[u8]| keys::encode(DEFAULT_SLOT, k).into_owned();
        let (begin, end) = (begin.map(enc), end.map(enc));
        self.db
            .compact_range(begin.as_deref(), end.as_deref())
            .map(|_| ())
            .map_err(map_err)
    }

    fn checkpoint(&self) -> Result<()> {
        self.db.checkpoint().map_err(map_err)
    }

    fn defragment(&self) -> Result<()> {
        self.db.defragment().map(|_| ()).map_err(map_err)
    }

    fn reorganize(&self) -> Result<()> {
        self.db.reorganize().map_err(map_err)
    }

    fn wait_for_background_work(&self) -> Result<()> {
        self.db.wait_for_compaction().map(|_| ()).map_err(map_err)
    }

    fn property(&self, name: &str) -> Option<String> {
        let s = self.db.statistics();
        match name {
            "vmemkv.stats" => Some(s.to_string()),
            "vmemkv.num-entries" => Some(s.t1_entries.to_string()),
            "vmemkv.t2-live-bytes" => Some(s.t2_live_bytes.to_string()),
            "vmemkv.t2-total-bytes" => Some(s.t2_total_bytes.to_string()),
            "vmemkv.log-bytes-since-checkpoint" => Some(s.log_bytes_since_checkpoint.to_string()),
            _ => None,
        }
    }

    fn statistics(&self) -> Option<String> {
        Some(self.db.statistics().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineKind, Entries};

    fn open_tmp(dir: &Path) -> Box<dyn Db> {
        crate::open(EngineKind::Vmemkv, dir, &EngineOptions::default())
            .unwrap_or_else(|e| panic!("open: {e}"))
    }

    #[test]
    fn roundtrip_batch_iter_and_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let db = open_tmp(dir.path());
            let w = WriteOptions::default();
            db.put(&w, b"a", b"1")?;
            db.put(&w, b"b", &[7u8; 1000])?;
            let mut b = WriteBatch::new();
            b.put(b"c", b"3");
            b.delete(b"a");
            db.write(&WriteOptions::sync(), &b)?;
            let all: Vec<_> =
                Entries::from_first(db.iter(&ReadOptions::default())?).collect::<Result<_>>()?;
            assert_eq!(
                all,
                vec![
                    (b"b".to_vec(), vec![7u8; 1000]),
                    (b"c".to_vec(), b"3".to_vec())
                ]
            );
            let lim = db.limits();
            let big = vec![0u8; lim.max_value_size.unwrap_or(0) + 1];
            assert!(matches!(
                db.put(&w, b"x", &big),
                Err(Error::InvalidArgument(_))
            ));
            assert!(matches!(
                crate::open(EngineKind::Vmemkv, dir.path(), &EngineOptions::default()),
                Err(Error::Busy(_))
            ));
            assert!(db.property("vmemkv.stats").is_some());
        }
        let db = open_tmp(dir.path());
        assert_eq!(db.get(&ReadOptions::default(), b"a")?, None);
        assert_eq!(db.get(&ReadOptions::default(), b"c")?, Some(b"3".to_vec()));
        Ok(())
    }

    #[test]
    fn quiet_time_and_run_options_map_to_the_engine_options() -> Result<()> {
        type Field = fn(&vmemkv::Options) -> u64;
        let cases: [(&str, Field, u64); 2] = [
            ("merge_idle_ms", |o| o.merge_idle_ms, 1000),
            ("sorted_run_bytes", |o| o.sorted_run_bytes, 512 << 20),
        ];
        for (name, field, default) in cases {
            let o = |v: &str| engine_options(&EngineOptions::default().set(name, v));
            assert_eq!(field(&o("0")?), 0);
            assert_eq!(field(&o("250")?), 250);
            assert_eq!(field(&engine_options(&EngineOptions::default())?), default);
            assert!(matches!(o("soon"), Err(Error::InvalidArgument(m)) if m.contains(name)));
        }
        let close = |v: &str| {
            engine_options(&EngineOptions::default().set("sort_tail_at_close", v))
                .map(|o| o.sort_tail_at_close)
        };
        assert!(engine_options(&EngineOptions::default())?.sort_tail_at_close);
        assert!(!close("false")?);
        assert!(close("1")?);
        assert!(
            matches!(close("soon"), Err(Error::InvalidArgument(m)) if m.contains("sort_tail_at_close"))
        );
        Ok(())
    }

    #[test]
    fn unknown_option_is_rejected() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let o = EngineOptions::default().set("no_such_option", 1);
        assert!(matches!(
            crate::open(EngineKind::Vmemkv, dir.path(), &o),
            Err(Error::InvalidArgument(m)) if m.contains("no_such_option")
        ));
    }

    #[test]
    fn use_direct_reads_maps_to_the_engine_option() -> Result<()> {
        let o = |v: &str| engine_options(&EngineOptions::default().set("use_direct_reads", v));
        assert_eq!(o("1")?.use_direct_reads, Some(true));
        assert_eq!(o("false")?.use_direct_reads, Some(false));
        assert_eq!(
            engine_options(&EngineOptions::default())?.use_direct_reads,
            None
        );
        assert!(
            matches!(o("maybe"), Err(Error::InvalidArgument(m)) if m.contains("use_direct_reads"))
        );
        Ok(())
    }

    fn all_of(db: &dyn Db, cf: Cf, ro: &ReadOptions) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Entries::from_first(db.iter_cf(ro, cf)?).collect()
    }

    #[test]
    fn families_are_separate_keyspaces_that_persist() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (w, r) = (WriteOptions::default(), ReadOptions::default());
        let kv = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
        {
            let db = open_tmp(dir.path());
            let users = db.create_cf("users")?;
            let posts = db.create_cf("posts")?;
            assert!(matches!(
                db.create_cf("users"),
                Err(Error::InvalidArgument(_))
            ));
            db.put(&w, b"k", b"default")?;
            db.put_cf(&w, users, b"k", b"user")?;
            let mut b = WriteBatch::new();
            b.put_cf(posts, b"k", b"post");
            b.put_cf(users, b"j", b"user-j");
            b.delete(b"absent");
            let before = db.snapshot()?;
            db.write(&w, &b)?;
            assert_eq!(db.get_cf(&r, posts, b"k")?, Some(b"post".to_vec()));
            let old = r.clone().with_snapshot(&before);
            assert_eq!(db.get_cf(&old, posts, b"k")?, None);
            assert_eq!(all_of(db.as_ref(), users, &old)?, vec![kv(b"k", b"user")]);
            assert_eq!(
                all_of(db.as_ref(), users, &r)?,
                vec![kv(b"j", b"user-j"), kv(b"k", b"user")]
            );
            // Every direction and bound stays inside the family.
            let mut it = db.iter_cf(&r, posts)?;
            it.seek_to_last();
            assert_eq!((it.valid(), it.key()), (true, &b"k"[..]));
            it.next();
            assert!(!it.valid());
            it.seek_for_prev(b"a");
            assert!(!it.valid());
            let mut it = db.iter(&r)?;
            it.seek_to_first();
            assert_eq!(it.key(), b"k");
            it.prev();
            assert!(!it.valid());
            let bounded = r.clone().with_bounds(Some(b"k"), None);
            assert_eq!(
                all_of(db.as_ref(), users, &bounded)?,
                vec![kv(b"k", b"user")]
            );
            let mut del = WriteBatch::new();
            del.delete_range_cf(users, b"a", b"z");
            db.write(&w, &del)?;
            assert_eq!(all_of(db.as_ref(), users, &r)?, vec![]);
            assert_eq!(db.get(&r, b"k")?, Some(b"default".to_vec()));
            db.put_cf(&w, users, b"u", b"1")?;
        }
        let db = open_tmp(dir.path());
        assert_eq!(db.cf_names(), vec!["default", "posts", "users"]);
        let users = db
            .cf_handle("users")
            .ok_or(Error::InvalidArgument("users".into()))?;
        let posts = db
            .cf_handle("posts")
            .ok_or(Error::InvalidArgument("posts".into()))?;
        assert_eq!(db.get_cf(&r, users, b"u")?, Some(b"1".to_vec()));
        assert_eq!(
            all_of(db.as_ref(), Cf::DEFAULT, &r)?,
            vec![kv(b"k", b"default")]
        );
        db.drop_cf("posts")?;
        assert!(matches!(
            db.get_cf(&r, posts, b"k"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            db.drop_cf("default"),
            Err(Error::InvalidArgument(_))
        ));
        let again = db.create_cf("posts")?;
        assert_ne!(again, posts);
        assert_eq!(all_of(db.as_ref(), again, &r)?, vec![]);
        drop(db);
        let db = open_tmp(dir.path());
        let again = db
            .cf_handle("posts")
            .ok_or(Error::InvalidArgument("posts".into()))?;
        assert_eq!(db.get_cf(&r, again, b"k")?, None);
        Ok(())
    }

    #[test]
    fn multi_scan_and_multi_get_read_one_family() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = open_tmp(dir.path());
        let (w, r) = (WriteOptions::default(), ReadOptions::default());
        let cf = db.create_cf("c")?;
        for k in [&b"a"[..], b"b", b"c"] {
            db.put(&w, k, b"d")?;
            db.put_cf(&w, cf, k, b"c")?;
        }
        let args = MultiScanArgs::new(vec![
            crate::ScanRange::new(b"a", b"b"),
            crate::ScanRange::unbounded(b"b"),
        ]);
        let got = crate::collect_multi_scan(db.multi_scan_cf(&r, cf, &args)?.as_mut())?;
        let c = |k: &[u8]| (k.to_vec(), b"c".to_vec());
        assert_eq!(got, vec![vec![c(b"a")], vec![c(b"b"), c(b"c")]]);
        let got = crate::collect_multi_scan(db.multi_scan(&r, &args)?.as_mut())?;
        assert_eq!(got[1].len(), 2);
        assert!(got.iter().flatten().all(|(_, v)| v == b"d"));
        let vals = db.multi_get_cf(&r, cf, &[b"a", b"z"]);
        assert_eq!(vals[0].as_ref().ok(), Some(&Some(b"c".to_vec())));
        assert_eq!(vals[1].as_ref().ok(), Some(&None));
        Ok(())
    }

    #[test]
    fn a_database_without_the_catalog_is_refused_and_a_damaged_one_is_corruption() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let native =
                vmemkv::Db::open(dir.path(), vmemkv::Options::default()).map_err(map_err)?;
            native.put(b"raw", b"1").map_err(map_err)?;
        }
        let err = crate::open(EngineKind::Vmemkv, dir.path(), &EngineOptions::default());
        assert!(matches!(err, Err(Error::Corruption(m)) if m.contains("APPMETA is missing")));
        {
            let native =
                vmemkv::Db::open(dir.path(), vmemkv::Options::default()).map_err(map_err)?;
            native.set_app_meta(b"families-9").map_err(map_err)?;
        }
        let err = crate::open(EngineKind::Vmemkv, dir.path(), &EngineOptions::default());
        assert!(matches!(err, Err(Error::Corruption(m)) if m.contains("APPMETA")));
        // A drop cut short after its catalog write leaves keys in a slot no
        // family holds; the next open removes them before the slot is
        // handed out again.
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        {
            let db = open_tmp(dir.path());
            let cf = db.create_cf("a")?;
            db.put_cf(&WriteOptions::default(), cf, b"k", b"v")?;
        }
        {
            let native =
                vmemkv::Db::open(dir.path(), vmemkv::Options::default()).map_err(map_err)?;
            native
                .set_app_meta(&keys::encode_catalog(&[]))
                .map_err(map_err)?;
            assert!(native.get(b"\xFF\x01k").map_err(map_err)?.is_some());
        }
        {
            let _db = open_tmp(dir.path());
        }
        let native = vmemkv::Db::open(dir.path(), vmemkv::Options::default()).map_err(map_err)?;
        assert_eq!(native.get(b"\xFF\x01k").map_err(map_err)?, None);
        Ok(())
    }

    /// `default` keys that start with the escape byte, and every move,
    /// bound and range of `default` next to the hole where other families'
    /// keys sort.
    #[test]
    fn default_steps_over_the_other_families_in_every_direction() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (w, r) = (WriteOptions::default(), ReadOptions::default());
        let kv = |k: &[u8]| (k.to_vec(), k.to_vec());
        let db = open_tmp(dir.path());
        let defaults: [&[u8]; 5] = [b"", b"a", b"\xFE\xFF", b"\xFF", b"\xFF\x01k"];
        let keys_of = |ks: &[&[u8]]| ks.iter().map(|k| kv(k)).collect::<Vec<_>>();
        for k in defaults {
            db.put(&w, k, k)?;
        }
        // Before any family: no hole to step over.
        assert_eq!(all_of(db.as_ref(), Cf::DEFAULT, &r)?, keys_of(&defaults));
        let early = db.iter(&r)?;
        let cf = db.create_cf("c")?;
        let other = db.create_cf("d")?;
        for k in [&b""[..], b"\x01k", b"\xFF"] {
            db.put_cf(&w, cf, k, b"c")?;
            db.put_cf(&w, other, k, b"d")?;
        }
        drop(early);
        assert_eq!(all_of(db.as_ref(), Cf::DEFAULT, &r)?, keys_of(&defaults));
        let mut it = db.iter(&r)?;
        let mut back = Vec::new();
        it.seek_to_last();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev();
        }
        let mut want: Vec<Vec<u8>> = defaults.iter().map(|k| k.to_vec()).collect();
        want.reverse();
        assert_eq!(back, want);
        // Seeks that land in the hole leave it on the side they move to.
        it.seek(b"\xFE\xFF\x00");
        assert_eq!((it.valid(), it.key()), (true, &b"\xFF"[..]));
        it.prev();
        assert_eq!(it.key(), b"\xFE\xFF");
        it.next();
        assert_eq!(it.key(), b"\xFF");
        it.seek_for_prev(b"\xFF\x00");
        assert_eq!(it.key(), b"\xFF");
        // User bounds on either side of the hole.
        let below = r.clone().with_bounds(Some(b"a"), Some(b"\xFF"));
        assert_eq!(
            all_of(db.as_ref(), Cf::DEFAULT, &below)?,
            keys_of(&[b"a", b"\xFE\xFF"])
        );
        let mut it = db.iter(&below)?;
        it.seek_to_last();
        assert_eq!(it.key(), b"\xFE\xFF");
        // MultiScan: a range across the hole is still one range.
        let args = MultiScanArgs::new(vec![
            crate::ScanRange::new(b"", b"a"),
            crate::ScanRange::new(b"\xFE", b"\xFF\x01"),
            crate::ScanRange::unbounded(b"\xFF\x01"),
        ]);
        let got = crate::collect_multi_scan(db.multi_scan(&r, &args)?.as_mut())?;
        assert_eq!(
            got,
            vec![
                keys_of(&[b""]),
                keys_of(&[b"\xFE\xFF", b"\xFF"]),
                keys_of(&[b"\xFF\x01k"])
            ]
        );
        let mut ms = db.multi_scan(&r, &args)?;
        assert!(ms.next_range()? && ms.next_range()?);
        assert!(ms.next_entry()?);
        assert_eq!((ms.range_index(), ms.key()), (1, &b"\xFE\xFF"[..]));
        assert!(ms.next_range()? && ms.range_index() == 2 && ms.next_entry()?);
        assert_eq!(ms.key(), b"\xFF\x01k");
        assert!(!ms.next_entry()? && !ms.next_range()?);
        // A range across the hole followed by one that starts below it
        // stays whole (the engine takes ranges in order of their starts),
        // and the hole's entries are skipped.
        let overlapping = MultiScanArgs::new(vec![
            crate::ScanRange::unbounded(b""),
            crate::ScanRange::new(b"a", b"b"),
        ]);
        let got = crate::collect_multi_scan(db.multi_scan(&r, &overlapping)?.as_mut())?;
        assert_eq!(got, vec![keys_of(&defaults), keys_of(&[b"a"])]);
        // A range delete of `default` across the hole leaves the families.
        let mut b = WriteBatch::new();
        b.delete_range(b"a", b"\xFF\x01k");
        db.write(&w, &b)?;
        assert_eq!(
            all_of(db.as_ref(), Cf::DEFAULT, &r)?,
            keys_of(&[b"", b"\xFF\x01k"])
        );
        for (fam, v) in [(cf, b"c"), (other, b"d")] {
            let got = all_of(db.as_ref(), fam, &r)?;
            assert_eq!(got.len(), 3);
            assert!(got.iter().all(|(_, val)| val == v));
        }
        db.compact_range(None, None)?;
        assert_eq!(db.get_cf(&r, other, b"\xFF")?, Some(b"d".to_vec()));
        Ok(())
    }

    /// Keys of `default` that start with the escape byte are decoded by
    /// every view that may hold them, also one opened after a restart.
    #[test]
    fn escaped_default_keys_are_decoded_after_a_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (w, r) = (WriteOptions::default(), ReadOptions::default());
        let want = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"\xFFz".to_vec(), b"2".to_vec()),
        ];
        {
            let db = open_tmp(dir.path());
            db.put(&w, b"a", b"1")?;
            let before = db.iter(&r)?;
            db.put(&w, b"\xFFz", b"2")?;
            drop(before);
            assert_eq!(all_of(db.as_ref(), Cf::DEFAULT, &r)?, want);
        }
        let db = open_tmp(dir.path());
        assert_eq!(all_of(db.as_ref(), Cf::DEFAULT, &r)?, want);
        let args = MultiScanArgs::new(vec![crate::ScanRange::unbounded(b"")]);
        let got = crate::collect_multi_scan(db.multi_scan(&r, &args)?.as_mut())?;
        assert_eq!(got, vec![want]);
        Ok(())
    }
}
