//! The `Db` trait every engine implements.

use crate::batch::WriteBatch;
use crate::capabilities::Capabilities;
use crate::error::{Error, Result};
use crate::family::{default_only, Cf};
use crate::iter::DbIterator;
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::options::{Limits, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;

/// A key-value engine behind a RocksDB-shaped interface.
///
/// The trait is object-safe (`Box<dyn Db>` is chosen at run time by
/// [`crate::open`]) and `Send + Sync` (one handle serves many threads).
/// Keys are ordered bytewise, as with RocksDB's default comparator.
///
/// # Implementing an engine
/// A new engine must provide the point operations (`get_into`, `put`,
/// `delete`, `write`), a cursor (`iter`), and `limits`. Everything else has a
/// default: `multi_get` loops over `get_into`, `multi_scan` runs one bounded
/// iterator per range, and the maintenance calls return `NotSupported`
/// (never a silent no-op). Column families: an engine that has them
/// overrides `create_cf`, `drop_cf`, `cf_handle`, `cf_names` and the
/// `_cf` forms, and handles [`crate::BatchOp::cf`] in `write`; the
/// defaults serve `default` alone. Then register it in [`crate::EngineKind`] and run
/// the conformance suite in `tests/` against it.
pub trait Db: Send + Sync {
    /// The engine's name as accepted by [`crate::EngineKind`], e.g. `"vmemkv"`.
    fn name(&self) -> &'static str;

    /// The largest key and value the engine accepts; one byte more is an
    /// `InvalidArgument`.
    fn limits(&self) -> Limits;

    /// The optional operation groups this engine lacks, with reasons
    /// (default: none lacking). An unsupported call still answers, with
    /// `NotSupported`; this lets callers say so before calling.
    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }

    /// Reads `key` into `out` (cleared first). Returns whether it was found.
    /// Reusing `out` across calls keeps the read path allocation-free.
    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;

    /// Reads `key`, allocating the result.
    fn get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(opts, key, &mut out)?.then_some(out))
    }

    /// Reads many keys; one result per key, in order. All keys are read
    /// from one view: `opts.snapshot`, or one taken for the call.
    fn multi_get(&self, opts: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_cf(opts, Cf::DEFAULT, keys)
    }

    /// A point-in-time view for later reads ([`ReadOptions::snapshot`]),
    /// released when the handle and its clones are dropped.
    fn snapshot(&self) -> Result<Snapshot> {
        Err(not_supported(self.name(), "snapshot"))
    }

    /// Sets `key` to `value`.
    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()>;

    /// Removes `key`; removing a missing key succeeds.
    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()>;

    /// Applies `batch` atomically: after a crash it is wholly present or
    /// wholly absent, and a concurrent reader sees all of it or none. A
    /// batch may span families; an engine without them refuses one that
    /// addresses any family but `default`.
    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()>;

    /// A cursor over the database, honouring the options' bounds. It reads
    /// `opts.snapshot`, or the database as of the call.
    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>>;

    /// Many ranges in one call; see [`crate::multiscan`]. Every range is
    /// read from one view: `opts.snapshot`, or one taken for the call.
    fn multi_scan<'a>(
        &'a self,
        opts: &ReadOptions,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        self.multi_scan_cf(opts, Cf::DEFAULT, args)
    }

    /// Creates column family `name` and returns its handle; an error if it
    /// exists. Durable when this returns.
    fn create_cf(&self, name: &str) -> Result<Cf> {
        let _ = name;
        Err(not_supported(self.name(), "column families"))
    }

    /// Drops column family `name` and every key in it; handles to it become
    /// invalid. `default` cannot be dropped. Durable when this returns.
    fn drop_cf(&self, name: &str) -> Result<()> {
        let _ = name;
        Err(not_supported(self.name(), "column families"))
    }

    /// The handle of the open family `name`, if any.
    fn cf_handle(&self, name: &str) -> Option<Cf> {
        (name == Cf::DEFAULT_NAME).then_some(Cf::DEFAULT)
    }

    /// Every family's name, `default` included, in name order.
    fn cf_names(&self) -> Vec<String> {
        vec![Cf::DEFAULT_NAME.to_string()]
    }

    /// [`Db::get_into`] in family `cf`.
    fn get_cf_into(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        default_only(self.name(), cf)?;
        self.get_into(opts, key, out)
    }

    /// [`Db::get`] in family `cf`.
    fn get_cf(&self, opts: &ReadOptions, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_cf_into(opts, cf, key, &mut out)?.then_some(out))
    }

    /// [`Db::multi_get`] in family `cf`.
    fn multi_get_cf(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let pinned;
        let opts = match (&opts.snapshot, keys.len() > 1) {
            (None, true) => match self.snapshot() {
                Ok(s) => {
                    pinned = opts.clone().with_snapshot(&s);
                    &pinned
                }
                // Transitional: engines without snapshots read live.
                Err(Error::NotSupported(_)) => opts,
                Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
            },
            _ => opts,
        };
        keys.iter().map(|k| self.get_cf(opts, cf, k)).collect()
    }

    /// [`Db::put`] in family `cf`.
    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        default_only(self.name(), cf)?;
        self.put(opts, key, value)
    }

    /// [`Db::delete`] in family `cf`.
    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        default_only(self.name(), cf)?;
        self.delete(opts, key)
    }

    /// [`Db::iter`] over family `cf`.
    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        default_only(self.name(), cf)?;
        self.iter(opts)
    }

    /// [`Db::multi_scan`] over family `cf`.
    fn multi_scan_cf<'a>(
        &'a self,
        opts: &ReadOptions,
        cf: Cf,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        let mut opts = opts.clone();
        if opts.snapshot.is_none() && args.ranges.len() > 1 {
            match self.snapshot() {
                Ok(s) => opts.snapshot = Some(s),
                // Transitional: engines without snapshots read live.
                Err(Error::NotSupported(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let ms = crate::multiscan::IterMultiScan::new(&opts, args, move |ro| self.iter_cf(ro, cf))?;
        Ok(Box::new(ms))
    }

    /// Persists buffered writes (RocksDB: flush memtables).
    fn flush(&self) -> Result<()> {
        Err(not_supported(self.name(), "flush"))
    }

    /// Compacts `[begin, end)` (`None` = open side).
    fn compact_range(&self, _begin: Option<&[u8]>, _end: Option<&[u8]>) -> Result<()> {
        Err(not_supported(self.name(), "compact_range"))
    }

    /// vmemkv: persists an index snapshot so recovery replays only the tail.
    fn checkpoint(&self) -> Result<()> {
        Err(not_supported(self.name(), "checkpoint"))
    }

    /// vmemkv: reclaims space held by dead values.
    fn defragment(&self) -> Result<()> {
        Err(not_supported(self.name(), "defragment"))
    }

    /// vmemkv: merges every shard's append region into its sorted region.
    fn reorganize(&self) -> Result<()> {
        Err(not_supported(self.name(), "reorganize"))
    }

    /// Waits until background work (compactions, merges) has settled.
    fn wait_for_background_work(&self) -> Result<()> {
        Ok(())
    }

    /// An engine property by name, e.g. `"rocksdb.stats"` or
    /// `"vmemkv.stats"`; `None` if the engine has no such property.
    fn property(&self, name: &str) -> Option<String>;

    /// The engine's own statistics as text (RocksDB's statistics string,
    /// LMDB's env info, vmemkv's counters).
    fn statistics(&self) -> Option<String> {
        None
    }

    /// Resets the calling thread's perf context and sets its level
    /// (RocksDB's `PerfLevel`: 1 off, 2 counts, 3-5 counts and timings).
    /// `false`: the engine keeps no per-thread perf context.
    fn start_perf_context(&self, _level: i32) -> bool {
        false
    }

    /// The calling thread's perf context since [`Db::start_perf_context`],
    /// in RocksDB's `PerfContext::ToString` text.
    fn perf_context(&self) -> Option<String> {
        None
    }
}

/// The standard `NotSupported` error for an operation an engine lacks.
pub fn not_supported(engine: &str, op: &str) -> Error {
    Error::NotSupported(format!("{engine} does not implement {op}"))
}

/// Checks a key and value against `limits`, naming the size at fault.
pub fn check_sizes(limits: &Limits, key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if let Some(max) = limits.max_key_size {
        if key.len() > max {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds the maximum key size of {max} bytes",
                key.len()
            )));
        }
    }
    if let (Some(max), Some(v)) = (limits.max_value_size, value) {
        if v.len() > max {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes exceeds the maximum value size of {max} bytes",
                v.len()
            )));
        }
    }
    Ok(())
}
