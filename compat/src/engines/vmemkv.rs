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
//! Keys up to 65,535 bytes; values up to `min(16 MiB, segment_size / 4)`
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

use std::path::Path;

use crate::db::Db;
use crate::error::{Error, IoFailure, Result};
use crate::iter::DbIterator;
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::options::{EngineOptions, Limits, OptionMap, ReadOptions, WriteOptions};
use crate::{BatchOp, WriteBatch};

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

/// Opens vmemkv at `path`.
pub fn open(path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    let o = engine_options(opts)?;
    let db = vmemkv::Db::open(path, o).map_err(map_err)?;
    Ok(Box::new(VmemkvDb { db }))
}

/// The adapter.
pub struct VmemkvDb {
    db: vmemkv::Db,
}

impl VmemkvDb {
    /// The native handle, for engine-specific calls.
    pub fn native(&self) -> &vmemkv::Db {
        &self.db
    }
}

/// The adapter's snapshot state: the engine's snapshot.
type VSnap = vmemkv::Snapshot;

impl VmemkvDb {
    fn owner(&self) -> usize {
        self as *const VmemkvDb as usize
    }

    /// The engine snapshot `ro` names, checked to be this database's.
    fn snapshot_of<'s>(&self, ro: &'s ReadOptions) -> Result<Option<&'s VSnap>> {
        ro.snapshot
            .as_ref()
            .map(|s| s.downcast::<VSnap>("vmemkv", self.owner()))
            .transpose()
    }
}

struct VIter<'a> {
    it: vmemkv::Iter<'a>,
    /// The snapshot `it` reads, kept alive (declared after, dropped after).
    _snapshot: Option<crate::Snapshot>,
}

impl DbIterator for VIter<'_> {
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn seek_to_first(&mut self) {
        self.it.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.it.seek_to_last();
    }
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(key);
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.it.seek_for_prev(key);
    }
    fn next(&mut self) {
        self.it.next();
    }
    fn prev(&mut self) {
        self.it.prev();
    }
    fn key(&self) -> &[u8] {
        self.it.key()
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
    _snapshot: Option<crate::Snapshot>,
}

impl MultiScan for VMultiScan<'_> {
    fn next_range(&mut self) -> Result<bool> {
        self.it.next_range().map_err(map_err)
    }
    fn next_entry(&mut self) -> Result<bool> {
        self.it.next_entry().map_err(map_err)
    }
    fn range_index(&self) -> usize {
        self.it.range_index()
    }
    fn key(&self) -> &[u8] {
        self.it.key()
    }
    fn value(&self) -> &[u8] {
        self.it.value()
    }
}

impl Db for VmemkvDb {
    fn name(&self) -> &'static str {
        "vmemkv"
    }

    fn limits(&self) -> Limits {
        Limits {
            max_key_size: Some(self.db.max_key_size()),
            max_value_size: Some(self.db.max_value_size()),
        }
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.snapshot_of(opts)? {
            Some(s) => self.db.get_into_at(s, key, out, opts.verify_checksums),
            None => self.db.get_into_opt(key, out, opts.verify_checksums),
        }
        .map_err(map_err)
    }

    fn snapshot(&self) -> Result<crate::Snapshot> {
        Ok(crate::Snapshot::new(
            "vmemkv",
            self.owner(),
            self.db.snapshot(),
        ))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put_opt(&native_write(opts), key, value)
            .map_err(map_err)
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.db
            .delete_opt(&native_write(opts), key)
            .map_err(map_err)
    }

    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        crate::family::default_only_batch(self.name(), batch)?;
        let mut b = vmemkv::WriteBatch::new();
        for op in batch.iter() {
            match op {
                BatchOp::Put { key, value, .. } => b.put(key, value),
                BatchOp::Delete { key, .. } => b.delete(key),
                BatchOp::DeleteRange { begin, end, .. } => b.delete_range(begin, end),
            }
        }
        self.db.write(&native_write(opts), &b).map_err(map_err)
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        let bounds = vmemkv::Bounds::new(
            opts.iterate_lower_bound.as_deref(),
            opts.iterate_upper_bound.as_deref(),
        );
        let it = match self.snapshot_of(opts)? {
            Some(s) => self
                .db
                .iter_at(s, bounds, opts.verify_checksums)
                .map_err(map_err)?,
            None => self.db.iter_opt(bounds, opts.verify_checksums),
        };
        Ok(Box::new(VIter {
            it,
            _snapshot: opts.snapshot.clone(),
        }))
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
        // Same validation and messages as every other engine.
        args.validate()?;
        let native = vmemkv::MultiScanOptions {
            args: args.clone(),
            lower_bound: opts.iterate_lower_bound.clone(),
            upper_bound: opts.iterate_upper_bound.clone(),
            verify_checksums: opts.verify_checksums,
            ..Default::default()
        };
        let it = match self.snapshot_of(opts)? {
            Some(s) => self.db.multi_scan_at(s, &native),
            // One view for every range: the scan registers its own.
            None => self.db.multi_scan(&native),
        }
        .map_err(map_err)?;
        Ok(Box::new(VMultiScan {
            it,
            _snapshot: opts.snapshot.clone(),
        }))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(map_err)
    }

    /// Rewrites the range's values in key order (see `Db::compact_range`).
    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db
            .compact_range(begin, end)
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
}
