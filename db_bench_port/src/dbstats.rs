//! RocksDB-shaped statistics for engines that are not RocksDB.
//!
//! RocksDB's scripts (`tools/benchmark.sh`) read db_bench's output by line
//! prefix and field position: the `stats` benchmark's DB stats and
//! compaction table, `--statistics`' `rocksdb.*` lines, and the `RocksDB
//! version:` / `Git sha` lines of `LOG`. This module produces those lines,
//! in RocksDB's formats, from what the engine really did:
//!
//! * [`CountingDb`] wraps the engine and counts at the `Db` trait boundary
//!   what RocksDB counts at its API (writes, keys, bytes, reads, seeks),
//!   and, with `--statistics`, times each call into RocksDB's histograms;
//! * [`EngineFigures`] reads the engine's own counters (vmemkv's
//!   `statistics()` text: defragment, throttle, T2 size, sync rounds);
//! * [`stats_block`], [`statistics_text`] and [`log_header`] render them.
//!
//! Where an engine has no equivalent the figure is 0; README.md lists which.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use vmemkv_compat::{
    BatchOp, Cf, Db, DbIterator, Limits, MultiScan, MultiScanArgs, ReadOptions, Result, Snapshot,
    WriteBatch, WriteOptions,
};

use crate::histogram::Histogram;

/// One counter of [`CountingDb`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Ctr {
    /// Write requests (`put`, `delete`, `write` calls).
    Writes,
    /// Keys those requests wrote (puts, deletes, batch entries).
    KeysWritten,
    /// Key and value bytes those requests carried.
    BytesWritten,
    /// Write requests with the WAL on (`disable_wal` false).
    WalWrites,
    /// Key and value bytes of those.
    WalBytes,
    /// Write requests with `sync` on, which may share a commit group.
    SyncWrites,
    /// Point reads (`get`, `get_into`).
    Gets,
    /// Value bytes point reads returned.
    GetBytes,
    /// `multi_get` calls.
    MultiGets,
    /// Keys asked for by `multi_get`.
    MultiGetKeys,
    /// Keys `multi_get` found.
    MultiGetFound,
    /// Value bytes `multi_get` returned.
    MultiGetBytes,
    /// Iterator seeks (`seek`, `seek_for_prev`, `seek_to_first/last`).
    Seeks,
    /// Seeks that landed on an entry.
    SeeksFound,
    /// Iterator `next` calls.
    Nexts,
    /// `next` calls that landed on an entry.
    NextsFound,
    /// Iterator `prev` calls.
    Prevs,
    /// `prev` calls that landed on an entry.
    PrevsFound,
    /// Key and value bytes of the entries iterators landed on.
    IterBytes,
}

const N_CTRS: usize = Ctr::IterBytes as usize + 1;
const STRIPES: usize = 32;

/// One latency histogram [`CountingDb`] keeps with `--statistics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Lat {
    /// `get`/`get_into`: `rocksdb.db.get.micros`.
    Get,
    /// `put`/`delete`/`write`: `rocksdb.db.write.micros`.
    Write,
    /// `multi_get`: `rocksdb.db.multiget.micros`.
    MultiGet,
    /// Iterator seeks: `rocksdb.db.seek.micros`.
    Seek,
}

const N_LATS: usize = Lat::Seek as usize + 1;

#[repr(align(128))]
struct Stripe {
    ctrs: [AtomicU64; N_CTRS],
}

impl Default for Stripe {
    fn default() -> Self {
        Stripe {
            ctrs: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

/// The counters and histograms, striped by thread so that many benchmark
/// threads do not share one cache line.
pub struct Counters {
    stripes: Vec<Stripe>,
    lats: Option<Vec<Mutex<Vec<Histogram>>>>,
}

impl Counters {
    fn new(timed: bool) -> Self {
        Counters {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
            lats: timed.then(|| {
                (0..STRIPES)
                    .map(|_| Mutex::new(vec![Histogram::new(); N_LATS]))
                    .collect()
            }),
        }
    }

    #[inline]
    fn add(&self, c: Ctr, v: u64) {
        self.stripes[stripe_index()].ctrs[c as usize].fetch_add(v, Ordering::Relaxed);
    }

    /// The sum over all threads of counter `c`.
    pub fn get(&self, c: Ctr) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.ctrs[c as usize].load(Ordering::Relaxed))
            .sum()
    }

    #[inline]
    fn start(&self) -> Option<Instant> {
        self.lats.as_ref().map(|_| Instant::now())
    }

    #[inline]
    fn record(&self, l: Lat, t0: Option<Instant>) {
        if let (Some(t0), Some(lats)) = (t0, &self.lats) {
            let us = t0.elapsed().as_micros() as u64;
            if let Ok(mut h) = lats[stripe_index()].lock() {
                h[l as usize].add(us);
            }
        }
    }

    /// Histogram `l` merged over threads (`None` without `--statistics`).
    pub fn latency(&self, l: Lat) -> Option<Histogram> {
        let lats = self.lats.as_ref()?;
        let mut out = Histogram::new();
        for m in lats {
            if let Ok(h) = m.lock() {
                out.merge(&h[l as usize]);
            }
        }
        Some(out)
    }
}

/// A `Db` that forwards every call to the engine and counts it.
pub struct CountingDb {
    inner: Box<dyn Db>,
    counters: std::sync::Arc<Counters>,
}

impl CountingDb {
    /// Wraps `inner`; `timed` also keeps the latency histograms.
    pub fn new(inner: Box<dyn Db>, timed: bool) -> Self {
        CountingDb {
            inner,
            counters: std::sync::Arc::new(Counters::new(timed)),
        }
    }

    /// The counters, readable while the database is in use.
    pub fn counters(&self) -> std::sync::Arc<Counters> {
        self.counters.clone()
    }

    fn count_write(&self, opts: &WriteOptions, keys: u64, bytes: u64) {
        let c = &self.counters;
        c.add(Ctr::Writes, 1);
        c.add(Ctr::KeysWritten, keys);
        c.add(Ctr::BytesWritten, bytes);
        if !opts.disable_wal {
            c.add(Ctr::WalWrites, 1);
            c.add(Ctr::WalBytes, bytes);
        }
        if opts.sync {
            c.add(Ctr::SyncWrites, 1);
        }
    }
}

struct CountingIter<'a> {
    inner: Box<dyn DbIterator + 'a>,
    counters: &'a Counters,
}

impl CountingIter<'_> {
    fn landed(&self, total: Ctr, found: Ctr) {
        self.counters.add(total, 1);
        if self.inner.valid() {
            self.counters.add(found, 1);
            self.counters.add(
                Ctr::IterBytes,
                (self.inner.key().len() + self.inner.value().len()) as u64,
            );
        }
    }

    fn seek_with(&mut self, f: impl FnOnce(&mut dyn DbIterator)) {
        let t0 = self.counters.start();
        f(self.inner.as_mut());
        self.counters.record(Lat::Seek, t0);
        self.landed(Ctr::Seeks, Ctr::SeeksFound);
    }
}

impl DbIterator for CountingIter<'_> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.seek_with(|i| i.seek_to_first());
    }
    fn seek_to_last(&mut self) {
        self.seek_with(|i| i.seek_to_last());
    }
    fn seek(&mut self, key: &[u8]) {
        self.seek_with(|i| i.seek(key));
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.seek_with(|i| i.seek_for_prev(key));
    }
    fn next(&mut self) {
        self.inner.next();
        self.landed(Ctr::Nexts, Ctr::NextsFound);
    }
    fn prev(&mut self) {
        self.inner.prev();
        self.landed(Ctr::Prevs, Ctr::PrevsFound);
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

impl CountingDb {
    fn counted_get(
        &self,
        out: &mut Vec<u8>,
        get: impl FnOnce(&mut Vec<u8>) -> Result<bool>,
    ) -> Result<bool> {
        let t0 = self.counters.start();
        let r = get(out);
        self.counters.record(Lat::Get, t0);
        self.counters.add(Ctr::Gets, 1);
        if let Ok(true) = r {
            self.counters.add(Ctr::GetBytes, out.len() as u64);
        }
        r
    }

    fn counted_get_owned(
        &self,
        get: impl FnOnce() -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>> {
        let t0 = self.counters.start();
        let r = get();
        self.counters.record(Lat::Get, t0);
        self.counters.add(Ctr::Gets, 1);
        if let Ok(Some(v)) = &r {
            self.counters.add(Ctr::GetBytes, v.len() as u64);
        }
        r
    }

    fn counted_multi_get(
        &self,
        keys: usize,
        get: impl FnOnce() -> Vec<Result<Option<Vec<u8>>>>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let t0 = self.counters.start();
        let r = get();
        self.counters.record(Lat::MultiGet, t0);
        let c = &self.counters;
        c.add(Ctr::MultiGets, 1);
        c.add(Ctr::MultiGetKeys, keys as u64);
        for v in r.iter().flatten().flatten() {
            c.add(Ctr::MultiGetFound, 1);
            c.add(Ctr::MultiGetBytes, v.len() as u64);
        }
        r
    }
}

impl Db for CountingDb {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn capabilities(&self) -> vmemkv_compat::Capabilities {
        self.inner.capabilities()
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.counted_get(out, |out| self.inner.get_into(opts, key, out))
    }
    fn get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.counted_get_owned(|| self.inner.get(opts, key))
    }
    fn multi_get(&self, opts: &ReadOptions, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        self.counted_multi_get(keys.len(), || self.inner.multi_get(opts, keys))
    }
    fn snapshot(&self) -> Result<Snapshot> {
        self.inner.snapshot()
    }
    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let t0 = self.counters.start();
        let r = self.inner.put(opts, key, value);
        self.counters.record(Lat::Write, t0);
        self.count_write(opts, 1, (key.len() + value.len()) as u64);
        r
    }
    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        let t0 = self.counters.start();
        let r = self.inner.delete(opts, key);
        self.counters.record(Lat::Write, t0);
        self.count_write(opts, 1, key.len() as u64);
        r
    }
    fn write(&self, opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        let t0 = self.counters.start();
        let r = self.inner.write(opts, batch);
        self.counters.record(Lat::Write, t0);
        let bytes: usize = batch
            .iter()
            .map(|op| match op {
                BatchOp::Put { key, value, .. } => key.len() + value.len(),
                BatchOp::Delete { key, .. } => key.len(),
                BatchOp::DeleteRange { begin, end, .. } => begin.len() + end.len(),
            })
            .sum();
        self.count_write(opts, batch.len() as u64, bytes as u64);
        r
    }
    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        let inner = self.inner.iter(opts)?;
        Ok(Box::new(CountingIter {
            inner,
            counters: &self.counters,
        }))
    }
    fn multi_scan<'a>(
        &'a self,
        opts: &ReadOptions,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        self.inner.multi_scan(opts, args)
    }
    // The family calls go to the engine itself (the trait's defaults would
    // answer for `default` only) and are counted as their plain forms.
    fn create_cf(&self, name: &str) -> Result<Cf> {
        self.inner.create_cf(name)
    }
    fn drop_cf(&self, name: &str) -> Result<()> {
        self.inner.drop_cf(name)
    }
    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.inner.cf_handle(name)
    }
    fn cf_names(&self) -> Vec<String> {
        self.inner.cf_names()
    }
    fn get_cf_into(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        self.counted_get(out, |out| self.inner.get_cf_into(opts, cf, key, out))
    }
    fn get_cf(&self, opts: &ReadOptions, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.counted_get_owned(|| self.inner.get_cf(opts, cf, key))
    }
    fn multi_get_cf(
        &self,
        opts: &ReadOptions,
        cf: Cf,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.counted_multi_get(keys.len(), || self.inner.multi_get_cf(opts, cf, keys))
    }
    fn put_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        let t0 = self.counters.start();
        let r = self.inner.put_cf(opts, cf, key, value);
        self.counters.record(Lat::Write, t0);
        self.count_write(opts, 1, (key.len() + value.len()) as u64);
        r
    }
    fn delete_cf(&self, opts: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        let t0 = self.counters.start();
        let r = self.inner.delete_cf(opts, cf, key);
        self.counters.record(Lat::Write, t0);
        self.count_write(opts, 1, key.len() as u64);
        r
    }
    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        let inner = self.inner.iter_cf(opts, cf)?;
        Ok(Box::new(CountingIter {
            inner,
            counters: &self.counters,
        }))
    }
    fn multi_scan_cf<'a>(
        &'a self,
        opts: &ReadOptions,
        cf: Cf,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        self.inner.multi_scan_cf(opts, cf, args)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.compact_range(begin, end)
    }
    fn checkpoint(&self) -> Result<()> {
        self.inner.checkpoint()
    }
    fn defragment(&self) -> Result<()> {
        self.inner.defragment()
    }
    fn reorganize(&self) -> Result<()> {
        self.inner.reorganize()
    }
    fn wait_for_background_work(&self) -> Result<()> {
        self.inner.wait_for_background_work()
    }
    fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }
    fn statistics(&self) -> Option<String> {
        self.inner.statistics()
    }
    fn start_perf_context(&self, level: i32) -> bool {
        self.inner.start_perf_context(level)
    }
    fn perf_context(&self) -> Option<String> {
        self.inner.perf_context()
    }
}

/// `key=value` figures of an engine's statistics text, keyed
/// `section.key` (vmemkv's `defragment: cycles=3 moved_bytes=...` gives
/// `defragment.cycles`, `defragment.moved_bytes`).
pub fn parse_engine_text(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some((section, rest)) = line.split_once(": ") else {
            continue;
        };
        for tok in rest.split_whitespace() {
            if let Some((k, v)) = tok.split_once('=') {
                if let Ok(n) = v.parse::<u64>() {
                    out.insert(format!("{}.{k}", section.trim()), n);
                }
            }
        }
    }
    out
}

/// What the engine itself reports, in the units the stats block needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineFigures {
    /// Row name of the one "level" (vmemkv: `T2`).
    pub tier: &'static str,
    /// Files holding the data (vmemkv: T2 segments).
    pub files: u64,
    /// Their bytes (vmemkv: T2's total size).
    pub size_bytes: u64,
    /// Bytes background work read to rewrite (vmemkv: defragment's moves).
    pub compact_read_bytes: u64,
    /// Bytes background work rewrote (vmemkv: defragment's moves).
    pub compact_write_bytes: u64,
    /// Background rewrite jobs (vmemkv: defragment cycles).
    pub compactions: u64,
    /// Records background work moved (vmemkv: values put in key order).
    pub compaction_keys_in: u64,
    /// Wall time of that work, in microseconds (vmemkv: the time T2
    /// rewrites held their lock).
    pub compaction_micros: u64,
    /// CPU time of that work, in microseconds.
    pub compaction_cpu_micros: u64,
    /// Bytes background work could still reclaim (vmemkv: not exposed).
    pub pending_bytes: u64,
    /// Writes the engine slowed down (vmemkv: the write throttle).
    pub delayed_writes: u64,
    /// Time they slept, in microseconds.
    pub stall_micros: u64,
    /// WAL syncs (vmemkv: group-commit msync rounds).
    pub wal_syncs: u64,
    /// Whether sync writes share those syncs, one leader's round serving
    /// every writer waiting at the time (vmemkv), so that a round is a
    /// commit group; otherwise every write commits alone.
    pub syncs_group_writes: bool,
    /// Whether the engine has a write-ahead log at all.
    pub has_wal: bool,
}

impl EngineFigures {
    /// Reads the figures of `db` (0 where the engine has no equivalent).
    pub fn of(db: &dyn Db) -> Self {
        match db.name() {
            "vmemkv" => {
                let m = parse_engine_text(&db.statistics().unwrap_or_default());
                let g = |k: &str| m.get(k).copied().unwrap_or(0);
                let moved = g("defragment.moved_bytes");
                EngineFigures {
                    tier: "T2",
                    files: g("t2.segments"),
                    size_bytes: g("t2.total_bytes"),
                    compact_read_bytes: moved,
                    compact_write_bytes: moved,
                    compactions: g("defragment.cycles"),
                    compaction_keys_in: g("defragment.ordered_values"),
                    compaction_micros: g("defragment.busy_us"),
                    compaction_cpu_micros: g("defragment.cpu_us"),
                    // T2's total less its live bytes also counts the unwritten
                    // tail of the open segment, so it is not defragment's debt;
                    // the engine does not expose dead bytes alone.
                    pending_bytes: 0,
                    delayed_writes: g("write throttle.delayed_writes"),
                    stall_micros: g("write throttle.delay_us"),
                    wal_syncs: g("sync.rounds"),
                    syncs_group_writes: true,
                    has_wal: true,
                }
            }
            "lmdb" => EngineFigures {
                tier: "mdb",
                files: 1,
                size_bytes: db
                    .property("lmdb.disk_size")
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0),
                ..EngineFigures::default()
            },
            // One row for the whole tree: fjall's statistics give table
            // and compaction counts, not per-level figures.
            name @ ("fjall" | "fjall-blob") => {
                let m = parse_engine_text(&db.statistics().unwrap_or_default());
                let g = |k: &str| m.get(&format!("{name}.{k}")).copied().unwrap_or(0);
                EngineFigures {
                    tier: "LSM",
                    files: g("tables") + g("blob_files"),
                    size_bytes: g("disk_space"),
                    compactions: g("compactions_completed"),
                    has_wal: true,
                    ..EngineFigures::default()
                }
            }
            "sparkey" => {
                let m = parse_engine_text(&db.statistics().unwrap_or_default());
                let g = |k: &str| m.get(&format!("sparkey.{k}")).copied().unwrap_or(0);
                EngineFigures {
                    tier: "log",
                    files: 2,
                    size_bytes: g("log_bytes") + g("index_bytes"),
                    ..EngineFigures::default()
                }
            }
            _ => EngineFigures {
                tier: "L0",
                ..EngineFigures::default()
            },
        }
    }
}

/// Every cumulative figure of one dump, so the next can print intervals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Seconds since the database was opened.
    pub uptime_secs: f64,
    /// Write requests.
    pub writes: u64,
    /// Keys written.
    pub keys: u64,
    /// User key and value bytes written.
    pub ingest_bytes: u64,
    /// Write requests with the WAL on.
    pub wal_writes: u64,
    /// Their bytes.
    pub wal_bytes: u64,
    /// Write requests with `sync` on.
    pub sync_writes: u64,
    /// The engine's own figures.
    pub engine: EngineFigures,
}

impl Figures {
    /// The figures now, from the wrapper's counters and the engine.
    pub fn collect(c: &Counters, db: &dyn Db, uptime_secs: f64) -> Self {
        let engine = EngineFigures::of(db);
        let has_wal = engine.has_wal;
        Figures {
            uptime_secs,
            writes: c.get(Ctr::Writes),
            keys: c.get(Ctr::KeysWritten),
            ingest_bytes: c.get(Ctr::BytesWritten),
            wal_writes: if has_wal { c.get(Ctr::WalWrites) } else { 0 },
            wal_bytes: if has_wal { c.get(Ctr::WalBytes) } else { 0 },
            sync_writes: c.get(Ctr::SyncWrites),
            engine,
        }
    }

    /// Commit groups since open: RocksDB's `rocksdb.write.self`.
    pub fn commit_groups(&self) -> u64 {
        commit_groups(
            self.writes,
            self.sync_writes,
            self.engine.wal_syncs,
            self.engine.syncs_group_writes,
        )
    }
}

/// RocksDB's commit groups: one per leader that committed for itself and
/// the followers queued behind it, so writes ÷ groups is the mean group
/// size. vmemkv appends every record on its own, so a write without
/// `sync` is a group alone; sync writes share `msync` rounds, each a
/// group. Rounds also serve the engine's own syncs (open, flush,
/// checkpoint), which group no write: capping by the sync writes keeps
/// those from reading as groups when no writer waited, and the floor of
/// one covers a window whose sync writes were all served by a round
/// counted in the window before.
fn commit_groups(writes: u64, sync_writes: u64, syncs: u64, syncs_group_writes: bool) -> u64 {
    let sync_writes = sync_writes.min(writes);
    let synced = if syncs_group_writes && sync_writes > 0 {
        syncs.clamp(1, sync_writes)
    } else {
        sync_writes
    };
    writes - sync_writes + synced
}

const KB: f64 = 1024.0;
const MB: f64 = 1_048_576.0;
const GB: f64 = MB * 1024.0;

/// RocksDB's `NumberToHumanString`.
pub fn number_to_human(n: u64) -> String {
    if n < 10_000 {
        n.to_string()
    } else if n < 10_000_000 {
        format!("{}K", n / 1000)
    } else if n < 10_000_000_000 {
        format!("{}M", n / 1_000_000)
    } else {
        format!("{}G", n / 1_000_000_000)
    }
}

/// RocksDB's `BytesToHumanString`: `%.2f` in KB, MB, GB or TB.
pub fn bytes_to_human(bytes: u64) -> String {
    let names = ["KB", "MB", "GB", "TB"];
    let mut v = bytes as f64 / KB;
    let mut i = 0;
    while i < 3 && v >= 1024.0 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2} {}", names[i])
}

/// RocksDB's `AppendHumanMicros` with `fixed_format`: `HH:MM:SS.sss H:M:S`.
pub fn human_micros(us: u64) -> String {
    format!(
        "{:02}:{:02}:{:05.3} H:M:S",
        us / 1_000_000 / 3600,
        (us / 1_000_000 / 60) % 60,
        (us % 60_000_000) as f64 / 1e6
    )
}

struct Row {
    files: u64,
    size: u64,
    read: u64,
    write: u64,
    count: u64,
    keys_in: u64,
    w_amp: f64,
    micros: u64,
    cpu_micros: u64,
}

/// One compaction-table row, in RocksDB's `PrintLevelStats` layout without
/// the `WPreComp(GB)` column, which is the layout benchmark.sh's field
/// positions assume (`$15` Comp(sec), `$16` CompMergeCPU(sec), `$21`/`$22`
/// Rblob/Wblob).
fn level_row(name: &str, r: &Row) -> String {
    let zero = 0.0f64;
    let secs = r.micros as f64 / 1e6;
    // RocksDB's rates divide by the compaction time plus 1 us.
    let rate = |bytes: u64| bytes as f64 / MB / ((r.micros + 1) as f64 / 1e6);
    format!(
        "{:>4} {:>6}/{:<3} {:>10} {:5.1} {:8.1} {:7.1} {:8.1} {:9.1} {:8.1} {:9.1} {:5.1} {:8.1} {:8.1} {:9.2} {:17.2} {:9} {:8.3} {:>7} {:>6} {:9.1} {:9.1}\n",
        name,
        r.files,
        0,
        bytes_to_human(r.size),
        zero,
        r.read as f64 / GB,
        r.read as f64 / GB,
        zero,
        r.write as f64 / GB,
        r.write as f64 / GB,
        zero,
        r.w_amp,
        rate(r.read),
        rate(r.write),
        secs,
        r.cpu_micros as f64 / 1e6,
        r.count,
        if r.count == 0 { zero } else { secs / r.count as f64 },
        number_to_human(r.keys_in),
        number_to_human(0),
        zero,
        zero,
    )
}

fn level_header(cf: &str, group_by: &str) -> String {
    let h = [
        "Files",
        "Size",
        "Score",
        "Read(GB)",
        "Rn(GB)",
        "Rnp1(GB)",
        "Write(GB)",
        "Wnew(GB)",
        "Moved(GB)",
        "W-Amp",
        "Rd(MB/s)",
        "Wr(MB/s)",
        "Comp(sec)",
        "CompMergeCPU(sec)",
        "Comp(cnt)",
        "Avg(sec)",
        "KeyIn",
        "KeyDrop",
        "Rblob(GB)",
        "Wblob(GB)",
    ];
    let mut line = format!(
        "{group_by}    {}   {}     {} {}  {}",
        h[0], h[1], h[2], h[3], h[4]
    );
    for x in &h[5..] {
        line.push(' ');
        line.push_str(x);
    }
    format!(
        "\n** Compaction Stats [{cf}] **\n{line}\n{}\n",
        "-".repeat(line.len())
    )
}

/// The `stats` benchmark's text in RocksDB's `rocksdb.stats` layout: the
/// compaction table and column-family lines, then `** DB Stats **`.
/// `prev` is the previous dump (or the open), for the interval figures.
pub fn stats_block(cur: &Figures, prev: &Figures) -> String {
    let e = &cur.engine;
    let pe = &prev.engine;
    let interval = (cur.uptime_secs - prev.uptime_secs).max(0.0);
    let up = cur.uptime_secs.max(0.001);
    let iup = interval.max(0.001);
    // vmemkv's "flush": each user byte is appended once to T2's log, which
    // is also its table.
    let flush = cur.ingest_bytes;
    let iflush = cur.ingest_bytes - prev.ingest_bytes.min(cur.ingest_bytes);
    let icw = e.compact_write_bytes.saturating_sub(pe.compact_write_bytes);
    let icr = e.compact_read_bytes.saturating_sub(pe.compact_read_bytes);
    let mut s = level_header("default", "Level");
    let row = Row {
        files: e.files,
        size: e.size_bytes,
        read: e.compact_read_bytes,
        write: e.compact_write_bytes,
        count: e.compactions,
        keys_in: e.compaction_keys_in,
        w_amp: e.compact_write_bytes as f64 / (flush as f64).max(1.0),
        micros: e.compaction_micros,
        cpu_micros: e.compaction_cpu_micros,
    };
    s.push_str(&level_row(e.tier, &row));
    s.push_str(&level_row("Sum", &row));
    s.push_str(&level_row(
        "Int",
        &Row {
            files: 0,
            size: 0,
            read: icr,
            write: icw,
            count: e.compactions.saturating_sub(pe.compactions),
            keys_in: e.compaction_keys_in.saturating_sub(pe.compaction_keys_in),
            w_amp: icw as f64 / (iflush as f64 + 1.0),
            micros: e.compaction_micros.saturating_sub(pe.compaction_micros),
            cpu_micros: e
                .compaction_cpu_micros
                .saturating_sub(pe.compaction_cpu_micros),
        },
    ));
    let _ = write!(
        s,
        "\nBlob file count: 0, total size: 0.0 GB, garbage size: 0.0 GB, space amp: 0.0\n\n"
    );
    let _ = writeln!(
        s,
        "Uptime(secs): {:.1} total, {:.1} interval",
        cur.uptime_secs, interval
    );
    let _ = writeln!(
        s,
        "Flush(GB): cumulative {:.3}, interval {:.3}",
        flush as f64 / GB,
        iflush as f64 / GB
    );
    s.push_str("AddFile(GB): cumulative 0.000, interval 0.000\n");
    s.push_str("AddFile(Total Files): cumulative 0, interval 0\n");
    s.push_str("AddFile(L0 Files): cumulative 0, interval 0\n");
    s.push_str("AddFile(Keys): cumulative 0, interval 0\n");
    let _ = writeln!(
        s,
        "Cumulative compaction: {:.2} GB write, {:.2} MB/s write, {:.2} GB read, {:.2} MB/s read, {:.1} seconds",
        e.compact_write_bytes as f64 / GB,
        e.compact_write_bytes as f64 / MB / up,
        e.compact_read_bytes as f64 / GB,
        e.compact_read_bytes as f64 / MB / up,
        e.compaction_micros as f64 / 1e6
    );
    let _ = writeln!(
        s,
        "Interval compaction: {:.2} GB write, {:.2} MB/s write, {:.2} GB read, {:.2} MB/s read, {:.1} seconds",
        icw as f64 / GB,
        icw as f64 / MB / iup,
        icr as f64 / GB,
        icr as f64 / MB / iup,
        e.compaction_micros.saturating_sub(pe.compaction_micros) as f64 / 1e6
    );
    let _ = writeln!(s, "Estimated pending compaction bytes: {}", e.pending_bytes);
    let _ = writeln!(
        s,
        "Stalls(count): 0 level0_slowdown, 0 level0_slowdown_with_compaction, 0 level0_numfiles, 0 level0_numfiles_with_compaction, 0 stop for pending_compaction_bytes, {} slowdown for pending_compaction_bytes, 0 memtable_compaction, 0 memtable_slowdown, interval {} total count",
        e.delayed_writes,
        e.delayed_writes.saturating_sub(pe.delayed_writes)
    );

    // ** DB Stats **: RocksDB's DumpDBStats.
    let _ = write!(
        s,
        "\n** DB Stats **\nUptime(secs): {:.1} total, {:.1} interval\n",
        cur.uptime_secs, interval
    );
    db_stats_window(&mut s, Window::Cumulative, cur, prev);
    db_stats_window(&mut s, Window::Interval, cur, prev);
    s
}

/// The span a group of DB-stats lines covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// Since the database was opened.
    Cumulative,
    /// Since the previous dump.
    Interval,
}

/// RocksDB's writes, WAL and stall lines of `** DB Stats **` for `window`.
/// RocksDB prints the interval's ingest in MB and the cumulative one in
/// GB; the lines differ in nothing else.
fn db_stats_window(s: &mut String, window: Window, cur: &Figures, prev: &Figures) {
    let zero = Figures::default();
    let (label, base, ingest_unit, ingest_div) = match window {
        Window::Cumulative => ("Cumulative", &zero, "GB", GB),
        Window::Interval => ("Interval", prev, "MB", MB),
    };
    let (e, be) = (&cur.engine, &base.engine);
    let secs = (cur.uptime_secs - base.uptime_secs).max(0.001);
    let writes = cur.writes.saturating_sub(base.writes);
    let keys = cur.keys.saturating_sub(base.keys);
    let ingest = cur.ingest_bytes.saturating_sub(base.ingest_bytes);
    let syncs = e.wal_syncs.saturating_sub(be.wal_syncs);
    let groups = commit_groups(
        writes,
        cur.sync_writes.saturating_sub(base.sync_writes),
        syncs,
        e.syncs_group_writes,
    );
    let _ = writeln!(
        s,
        "{label} writes: {} writes, {} keys, {} commit groups, {:.1} writes per commit group, ingest: {:.2} {ingest_unit}, {:.2} MB/s",
        number_to_human(writes),
        number_to_human(keys),
        number_to_human(groups),
        writes as f64 / (groups as f64).max(1.0),
        ingest as f64 / ingest_div,
        ingest as f64 / MB / secs
    );
    let wal_writes = cur.wal_writes.saturating_sub(base.wal_writes);
    let wal_bytes = cur.wal_bytes.saturating_sub(base.wal_bytes);
    let _ = writeln!(
        s,
        "{label} WAL: {} writes, {} syncs, {:.2} writes per sync, written: {:.2} GB, {:.2} MB/s",
        number_to_human(wal_writes),
        number_to_human(syncs),
        wal_writes as f64 / (syncs as f64).max(1.0),
        wal_bytes as f64 / GB,
        wal_bytes as f64 / MB / secs
    );
    let stall = e.stall_micros.saturating_sub(be.stall_micros);
    let _ = writeln!(
        s,
        "{label} stall: {}, {:.1} percent",
        human_micros(stall),
        stall as f64 / 10000.0 / secs
    );
}

/// One ticker line of RocksDB's `Statistics::ToString`.
pub fn ticker_line(name: &str, count: u64) -> String {
    format!("{name} COUNT : {count}\n")
}

/// One histogram line of RocksDB's `Statistics::ToString`.
pub fn histogram_line(name: &str, h: &Histogram) -> String {
    format!(
        "{name} P50 : {:.6} P95 : {:.6} P99 : {:.6} P100 : {:.6} COUNT : {} SUM : {}\n",
        h.percentile(50.0),
        h.percentile(95.0),
        h.percentile(99.0),
        h.max() as f64,
        h.count(),
        h.sum()
    )
}

/// The RocksDB ticker names this port fills, each with its source.
/// README.md's mapping table is this list.
pub fn tickers(c: &Counters, f: &Figures) -> Vec<(&'static str, u64)> {
    let e = &f.engine;
    vec![
        ("rocksdb.number.keys.written", c.get(Ctr::KeysWritten)),
        ("rocksdb.number.keys.read", c.get(Ctr::Gets)),
        ("rocksdb.bytes.written", c.get(Ctr::BytesWritten)),
        ("rocksdb.bytes.read", c.get(Ctr::GetBytes)),
        ("rocksdb.number.db.seek", c.get(Ctr::Seeks)),
        ("rocksdb.number.db.next", c.get(Ctr::Nexts)),
        ("rocksdb.number.db.prev", c.get(Ctr::Prevs)),
        ("rocksdb.number.db.seek.found", c.get(Ctr::SeeksFound)),
        ("rocksdb.number.db.next.found", c.get(Ctr::NextsFound)),
        ("rocksdb.number.db.prev.found", c.get(Ctr::PrevsFound)),
        ("rocksdb.db.iter.bytes.read", c.get(Ctr::IterBytes)),
        ("rocksdb.stall.micros", e.stall_micros),
        ("rocksdb.number.multiget.get", c.get(Ctr::MultiGets)),
        (
            "rocksdb.number.multiget.keys.read",
            c.get(Ctr::MultiGetKeys),
        ),
        (
            "rocksdb.number.multiget.bytes.read",
            c.get(Ctr::MultiGetBytes),
        ),
        (
            "rocksdb.number.multiget.keys.found",
            c.get(Ctr::MultiGetFound),
        ),
        ("rocksdb.wal.synced", e.wal_syncs),
        ("rocksdb.wal.bytes", f.wal_bytes),
        ("rocksdb.write.self", f.commit_groups()),
        (
            "rocksdb.write.other",
            f.writes.saturating_sub(f.commit_groups()),
        ),
        ("rocksdb.write.wal", f.wal_writes),
        ("rocksdb.compact.read.bytes", e.compact_read_bytes),
        ("rocksdb.compact.write.bytes", e.compact_write_bytes),
        ("rocksdb.flush.write.bytes", f.ingest_bytes),
    ]
}

/// The RocksDB histogram names this port fills.
pub const HISTOGRAMS: [(&str, Lat); 4] = [
    ("rocksdb.db.get.micros", Lat::Get),
    ("rocksdb.db.write.micros", Lat::Write),
    ("rocksdb.db.multiget.micros", Lat::MultiGet),
    ("rocksdb.db.seek.micros", Lat::Seek),
];

/// `--statistics`' text: RocksDB's ticker lines, then its histogram lines,
/// then the engine's own statistics (`engine_text`) after a heading.
pub fn statistics_text(c: &Counters, f: &Figures, engine: &str, engine_text: &str) -> String {
    let mut s = String::new();
    for (name, v) in tickers(c, f) {
        s.push_str(&ticker_line(name, v));
    }
    for (name, l) in HISTOGRAMS {
        let h = c.latency(l).unwrap_or_default();
        s.push_str(&histogram_line(name, &h));
    }
    let _ = writeln!(s, "** {engine} statistics **");
    s.push_str(engine_text);
    if !engine_text.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// The git revision db_bench_port was built from (`unknown` outside a
/// git checkout).
pub const GIT_SHA: &str = env!("DB_BENCH_PORT_GIT_SHA");

/// The `LOG` lines RocksDB's `DumpRocksDBBuildVersion` writes, in its LOG
/// shape (`time thread-id message`), so that `grep "RocksDB version:" LOG
/// | awk '{print $5}'` reads the engine's version and `grep "Git sha" LOG |
/// awk '{print $5}'` the build's revision. `now` is RocksDB's timestamp,
/// `thread` its thread id.
pub fn log_header(now: &str, thread: u64, engine: &str, version: &str) -> String {
    format!(
        "{now} {thread:x} RocksDB version: {version} (engine {engine}; db_bench_port's line in RocksDB's LOG shape)\n\
         {now} {thread:x} Git sha {GIT_SHA} (db_bench_port build)\n\
         {now} {thread:x} Compile date: not recorded\n"
    )
}

/// `YYYY/MM/DD-HH:MM:SS.uuuuuu` in local time, as RocksDB's logger stamps.
pub fn log_timestamp() -> String {
    let us = crate::output::unix_micros();
    format!(
        "{}.{:06}",
        crate::output::time_to_string((us / 1_000_000) as i64),
        us % 1_000_000
    )
}

/// Appends [`log_header`] to `dir/LOG` (engines other than RocksDB, which
/// writes its own).
pub fn append_log_header(
    dir: &std::path::Path,
    engine: &str,
    version: &str,
) -> std::io::Result<()> {
    use std::io::Write as _;
    // SAFETY: pthread_self has no preconditions.
    let tid = unsafe { libc::pthread_self() } as u64;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join("LOG"))?;
    f.write_all(log_header(&log_timestamp(), tid, engine, version).as_bytes())
}

/// RocksDB's `rocksdb.stats` with two lines added for the benchmark.sh
/// that ships with it, which still reads the layout of older RocksDB:
/// - after each compaction table with a `WPreComp(GB)` column, its ` Sum`
///   row again without that column, so that the script's `$15`/`$16`
///   (`c_wsecs`/`c_csecs`) and `$21`/`$22` (blob GB) are Comp(sec),
///   CompMergeCPU(sec), Rblob and Wblob rather than the columns one to the
///   left (the script reads the last ` Sum` line);
/// - after the column family's `Write Stall (count):` line, which replaced
///   it in RocksDB 8, a `Stalls(count):` line with the same counts under
///   the old names (fields `$2 $6 $10 $14 $18 $20`, summed into `Nstall`).
///
/// RocksDB's own lines are unchanged; text without them comes back as is.
pub fn for_benchmark_sh(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 512);
    let mut precomp_at: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        let bare = line.trim_end();
        if bare.starts_with("Level ") {
            // Column of WPreComp(GB) in a row, whose Size is two fields.
            precomp_at = bare
                .split_whitespace()
                .position(|h| h == "WPreComp(GB)")
                .map(|i| i + 1);
            continue;
        }
        if !line.ends_with('\n') {
            out.push('\n');
        }
        if let (Some(at), true) = (precomp_at, bare.starts_with(" Sum ")) {
            let mut f: Vec<&str> = bare.split_whitespace().collect();
            if at < f.len() {
                f.remove(at);
                let _ = writeln!(
                    out,
                    " {}   (benchmark.sh's layout: the row without WPreComp(GB))",
                    f.join(" ")
                );
            }
            continue;
        }
        let Some(rest) = bare.strip_prefix("Write Stall (count): ") else {
            continue;
        };
        let counts: std::collections::BTreeMap<&str, u64> = rest
            .split(", ")
            .filter_map(|kv| kv.split_once(": "))
            .filter_map(|(k, v)| Some((k.trim(), v.trim().parse().ok()?)))
            .collect();
        if !counts.contains_key("l0-file-count-limit-delays") {
            continue; // the DB-wide line (write buffer manager), not the CF's
        }
        let g = |k: &str| counts.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "Stalls(count): {} level0_slowdown, {} level0_slowdown_with_compaction, {} level0_numfiles, {} level0_numfiles_with_compaction, {} stop for pending_compaction_bytes, {} slowdown for pending_compaction_bytes, {} memtable_compaction, {} memtable_slowdown, interval {} total count",
            g("l0-file-count-limit-delays"),
            g("cf-l0-file-count-limit-delays-with-ongoing-compaction"),
            g("l0-file-count-limit-stops"),
            g("cf-l0-file-count-limit-stops-with-ongoing-compaction"),
            g("pending-compaction-bytes-stops"),
            g("pending-compaction-bytes-delays"),
            g("memtable-limit-stops"),
            g("memtable-limit-delays"),
            g("total-delays") + g("total-stops"),
        );
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn human_formats_match_rocksdb() {
        assert_eq!(number_to_human(9999), "9999");
        assert_eq!(number_to_human(12_345), "12K");
        assert_eq!(number_to_human(12_345_678), "12M");
        assert_eq!(bytes_to_human(0), "0.00 KB");
        assert_eq!(bytes_to_human(64 << 20), "64.00 MB");
        assert_eq!(human_micros(0), "00:00:0.000 H:M:S");
        assert_eq!(human_micros(3_723_500_000), "01:02:3.500 H:M:S");
    }

    #[test]
    fn commit_groups_share_sync_rounds_only_where_the_engine_groups() {
        // 10 writes, 8 with sync, 2 rounds: 2 alone + 2 groups.
        assert_eq!(commit_groups(10, 8, 2, true), 4);
        // An engine whose syncs group nothing: every write alone.
        assert_eq!(commit_groups(10, 8, 2, false), 10);
        // More rounds than sync writes: the extra rounds grouped no write.
        assert_eq!(commit_groups(10, 8, 50, true), 10);
        // Sync writes whose round fell in the window before.
        assert_eq!(commit_groups(3, 3, 0, true), 1);
        assert_eq!(commit_groups(0, 0, 4, true), 0);
    }

    #[test]
    fn parses_vmemkv_statistics_text() {
        let m = parse_engine_text(
            "t2: segments=3 total_bytes=100 live_bytes=40\nwrite throttle: rate_limit=0 delayed_writes=2 delay_us=7\nbackground errors: count=0 last=none\n",
        );
        assert_eq!(m["t2.segments"], 3);
        assert_eq!(m["write throttle.delay_us"], 7);
        assert!(!m.contains_key("background errors.last"));
    }
}
