//! The benchmark bodies: what one thread does, with db_bench's semantics.
//!
//! Each body reuses its key, value and batch buffers across ops, so the
//! only per-op allocations are those the `Db` trait itself requires
//! (a boxed iterator per seek, a boxed MultiScan per multiscan, the result
//! vector of `multi_get`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use vmemkv_compat::{Db, MultiScanArgs, ReadOptions, ScanRange, WriteBatch, WriteOptions};

use crate::config::Config;
use crate::error::{BenchError, Result};
use crate::families::ColumnFamilies;
use crate::keys::{KeyGen, ValueGen, ValueSizeDist};
use crate::random::Random64;
use crate::ratelimit::RateLimiter;
use crate::stats::{Duration, OpType, PaddedCounter, Stats};
use crate::zipf::Zipf;

/// Per-benchmark parameters (db_bench's sanitised `num_`, `reads_`, ...).
#[derive(Debug, Clone)]
pub struct Params<'a> {
    /// All settings.
    pub cfg: &'a Config,
    /// `num_` (fillsync and fill100K divide it by 1000).
    pub num: i64,
    /// `FLAGS_num`: the keyspace keys are drawn from.
    pub flags_num: i64,
    /// `reads_`.
    pub reads: i64,
    /// `writes_`.
    pub writes: i64,
    /// `deletes_`.
    pub deletes: i64,
    /// `readwrites_`.
    pub readwrites: i64,
    /// Key encoding (readmissing uses one extra byte).
    pub keygen: KeyGen,
    /// `--batch_size`.
    pub entries_per_batch: i64,
    /// Value sizes (fill100K uses 100,000 bytes).
    pub value_dist: ValueSizeDist,
    /// Write options.
    pub wopts: WriteOptions,
    /// Read options.
    pub ropts: ReadOptions,
    /// Seed base.
    pub seed_base: u64,
    /// The open column families with `--num_column_families` > 1; `None`
    /// (the default) keeps every benchmark on the default family.
    pub families: Option<&'a ColumnFamilies>,
}

impl Params<'_> {
    fn duration<'s>(&self, shared: &'s Shared, seconds: u64, max_ops: i64) -> Duration<'s> {
        Duration::new(
            seconds,
            max_ops,
            self.cfg.ops_between_duration_checks,
            &shared.abort,
        )
    }

    fn value_gen(&self) -> ValueGen {
        ValueGen::new(
            self.cfg.compression_ratio,
            self.value_dist,
            self.cfg.same_value_percentage,
        )
    }

    fn fnum(&self) -> u64 {
        self.flags_num.max(1) as u64
    }

    /// db_bench's `GetRandomKey`.
    fn random_key(&self, rand: &mut Random64) -> u64 {
        let r = rand.next();
        let num = self.fnum();
        if self.cfg.read_random_exp_range == 0.0 {
            return r % num;
        }
        let big: u64 = 1 << 62;
        let order = -((r % big) as f64) / big as f64 * self.cfg.read_random_exp_range;
        let rand_num = (order.exp() * num as f64) as i64 as u64;
        rand_num.wrapping_mul(0x5bd1_e995) % num
    }

    fn scan_len(&self) -> i64 {
        if self.cfg.seek_nexts > 0 {
            self.cfg.seek_nexts
        } else {
            100
        }
    }
}

/// State shared by a benchmark's threads.
#[derive(Debug)]
pub struct Shared {
    /// Set when a thread failed: every loop stops at its next check.
    pub abort: AtomicBool,
    /// The first failure.
    pub fatal: Mutex<Option<BenchError>>,
    /// Threads finished.
    pub num_done: AtomicUsize,
    /// Threads started.
    pub total: usize,
    /// One ops counter per thread, for the reporter.
    pub counters: Vec<PaddedCounter>,
    /// `--benchmark_write_rate_limit` (bytes/s), shared by the writers.
    pub write_limiter: Option<RateLimiter>,
    /// `--benchmark_read_rate_limit` (ops/s), shared by the readers.
    pub read_limiter: Option<RateLimiter>,
}

impl Shared {
    /// State for `n` threads, without rate limits.
    pub fn new(n: usize) -> Self {
        Self::with_limits(n, 0, 0)
    }

    /// State for `n` threads with db_bench's benchmark rate limits
    /// (0 = unlimited).
    pub fn with_limits(n: usize, write_bytes_per_sec: u64, read_ops_per_sec: u64) -> Self {
        Shared {
            abort: AtomicBool::new(false),
            fatal: Mutex::new(None),
            num_done: AtomicUsize::new(0),
            total: n,
            counters: (0..n).map(|_| PaddedCounter::default()).collect(),
            write_limiter: RateLimiter::new(write_bytes_per_sec),
            read_limiter: RateLimiter::new(read_ops_per_sec),
        }
    }

    #[inline]
    fn limit_reads(&self, n: u64) {
        if let Some(l) = &self.read_limiter {
            l.request(n);
        }
    }

    /// Records a failure and stops the other threads.
    pub fn fail(&self, e: BenchError) {
        if let Ok(mut f) = self.fatal.lock() {
            if f.is_none() {
                *f = Some(e);
            }
        }
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Ops done by all threads so far.
    pub fn total_ops(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// One thread of a benchmark.
#[derive(Debug)]
pub struct ThreadState<'a> {
    /// 0..n-1.
    pub tid: usize,
    /// Seeded `seed_base + global thread number`, as db_bench does.
    pub rand: Random64,
    /// This thread's statistics.
    pub stats: Stats,
    /// Shared state.
    pub shared: &'a Shared,
}

impl ThreadState<'_> {
    /// Takes `bytes` from the shared write limiter (db_bench then restarts
    /// the op clock so the wait is not counted as latency).
    #[inline]
    fn limit_writes(&mut self, bytes: u64) {
        if let Some(l) = &self.shared.write_limiter {
            l.request(bytes);
            self.stats.reset_last_op_time();
        }
    }

    #[inline]
    fn finished(&mut self, n: i64, op: OpType) {
        self.stats
            .finished_ops(n.max(0) as u64, op, &self.shared.counters[self.tid]);
    }
}

/// A benchmark body.
pub type Method = fn(&Params, &dyn Db, &mut ThreadState) -> Result<()>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteMode {
    Sequential,
    Random,
    UniqueRandom,
}

struct KeySource {
    mode: WriteMode,
    num: u64,
    next: u64,
    values: Vec<u64>,
}

impl KeySource {
    fn new(mode: WriteMode, num: u64, seed: u64) -> Self {
        let mut values = Vec::new();
        if mode == WriteMode::UniqueRandom {
            // db_bench: RandomShuffle(values, (uint32_t)seed_base).
            values = (0..num).collect();
            crate::random::std_shuffle(&mut values, seed as u32);
        }
        KeySource {
            mode,
            num,
            next: 0,
            values,
        }
    }

    #[inline]
    fn next(&mut self, rand: &mut Random64) -> u64 {
        match self.mode {
            WriteMode::Sequential => {
                let v = self.next;
                self.next += 1;
                v
            }
            WriteMode::Random => rand.next() % self.num.max(1),
            WriteMode::UniqueRandom => {
                let v = self.values[(self.next % self.num.max(1)) as usize];
                self.next += 1;
                v
            }
        }
    }
}

/// Where the benchmarks that db_bench routes through `GetCfh` send a key:
/// db_bench's `FLAGS_num_column_families <= 1` test, decided once per
/// benchmark and compiled into its loop, so that the one-family path does
/// exactly what it did before families existed.
trait Route: Copy {
    /// Whether a fill moves through stages (hot families); the check costs
    /// a division per batch, so the one-family path leaves it out.
    const STAGED: bool;

    /// Reads `key` (key number `key_rand`) into `out`.
    fn get(
        self,
        db: &dyn Db,
        ro: &ReadOptions,
        key_rand: i64,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> vmemkv_compat::Result<bool>;

    /// Adds a put of `key` (key number `key_rand`) to `batch`.
    fn put(self, batch: &mut WriteBatch, key_rand: i64, key: &[u8], value: &[u8]);

    /// Creates the families of the fill's stage when it moves on.
    fn enter_stage(self, db: &dyn Db, stage: i64) -> Result<()>;

    /// The fill's ops per stage.
    fn ops_per_stage(self, max_ops: i64) -> i64;
}

/// One family: the plain calls.
#[derive(Clone, Copy)]
struct DefaultOnly;

impl Route for DefaultOnly {
    const STAGED: bool = false;

    #[inline(always)]
    fn get(
        self,
        db: &dyn Db,
        ro: &ReadOptions,
        _: i64,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> vmemkv_compat::Result<bool> {
        db.get_into(ro, key, out)
    }

    #[inline(always)]
    fn put(self, batch: &mut WriteBatch, _: i64, key: &[u8], value: &[u8]) {
        batch.put(key, value);
    }

    #[inline(always)]
    fn enter_stage(self, _: &dyn Db, _: i64) -> Result<()> {
        Ok(())
    }

    fn ops_per_stage(self, max_ops: i64) -> i64 {
        max_ops.max(1)
    }
}

impl Route for &ColumnFamilies {
    const STAGED: bool = true;

    // db_bench seeds the family with the key's number, so a read of the
    // key finds the family its write used.
    #[inline]
    fn get(
        self,
        db: &dyn Db,
        ro: &ReadOptions,
        key_rand: i64,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> vmemkv_compat::Result<bool> {
        db.get_cf_into(ro, self.get_cfh(key_rand), key, out)
    }

    #[inline]
    fn put(self, batch: &mut WriteBatch, key_rand: i64, key: &[u8], value: &[u8]) {
        batch.put_cf(self.get_cfh(key_rand), key, value);
    }

    fn enter_stage(self, db: &dyn Db, stage: i64) -> Result<()> {
        self.create_new_cf(db, stage)
    }

    fn ops_per_stage(self, max_ops: i64) -> i64 {
        self.config().ops_per_stage(max_ops)
    }
}

fn do_write(p: &Params, db: &dyn Db, t: &mut ThreadState, mode: WriteMode) -> Result<()> {
    match p.families {
        None => do_write_in(p, db, t, mode, DefaultOnly),
        Some(f) => do_write_in(p, db, t, mode, f),
    }
}

// Each instance its own function, as `do_write` was before families: the
// one-family fill compiles to the code it had then.
#[inline(never)]
fn do_write_in<R: Route>(
    p: &Params,
    db: &dyn Db,
    t: &mut ThreadState,
    mode: WriteMode,
    route: R,
) -> Result<()> {
    let seconds = if mode == WriteMode::Random {
        p.cfg.duration
    } else {
        0
    };
    let num_ops = if p.writes == 0 { p.num } else { p.writes };
    let mut duration = p.duration(t.shared, seconds, num_ops);
    // db_bench's stages: with hot families, each 1/(N/H) of the fill
    // creates the next H families and writes to them.
    let ops_per_stage = route.ops_per_stage(num_ops);
    let mut stage = 0i64;
    let mut keys = KeySource::new(mode, p.num.max(0) as u64, p.seed_base);
    if p.num != p.flags_num {
        t.stats.add_message(&format!("({} ops)", p.num));
    }
    let mut gen = p.value_gen();
    let mut batch = WriteBatch::with_capacity(
        (p.entries_per_batch.max(1) as usize) * (p.keygen.key_size + p.cfg.value_size + 16),
    );
    let mut key = p.keygen.buffer();
    let mut bytes = 0u64;
    let fnum = p.fnum();
    while p.num != 0 && !duration.done(p.entries_per_batch) {
        if R::STAGED {
            let now = duration.stage(ops_per_stage);
            if now != stage {
                stage = now;
                route.enter_stage(db, stage)?;
            }
        }
        if mode != WriteMode::Sequential {
            // db_bench draws a DB index per batch even with one DB.
            let _ = t.rand.next();
        }
        batch.clear();
        let mut batch_bytes = 0u64;
        for _ in 0..p.entries_per_batch {
            let k = keys.next(&mut t.rand);
            p.keygen.fill(&mut key, k, fnum);
            let val = gen.generate_sized();
            route.put(&mut batch, k as i64, &key, val);
            batch_bytes += (val.len() + key.len()) as u64;
        }
        bytes += batch_bytes;
        t.limit_writes(batch_bytes);
        db.write(&p.wopts, &batch)
            .map_err(|e| BenchError::engine("put error", e))?;
        t.finished(p.entries_per_batch, OpType::Write);
    }
    t.stats.add_bytes(bytes);
    Ok(())
}

/// fillseq.
pub fn write_seq(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    do_write(p, db, t, WriteMode::Sequential)
}

/// fillrandom, overwrite, fillsync, fill100K.
pub fn write_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    do_write(p, db, t, WriteMode::Random)
}

/// filluniquerandom.
pub fn write_unique_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    do_write(p, db, t, WriteMode::UniqueRandom)
}

/// readseq: one iterator from the first key, `reads` entries.
pub fn read_sequential(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut it = db
        .iter(&p.ropts)
        .map_err(|e| BenchError::engine("NewIterator failed", e))?;
    let mut i = 0i64;
    let mut bytes = 0u64;
    it.seek_to_first();
    while i < p.reads && it.valid() {
        bytes += (it.key().len() + it.value().len()) as u64;
        t.finished(1, OpType::Read);
        i += 1;
        if i % 1024 == 1023 {
            t.shared.limit_reads(1024);
        }
        it.next();
    }
    it.status()
        .map_err(|e| BenchError::engine("Iterator error", e))?;
    t.stats.add_bytes(bytes);
    Ok(())
}

/// readreverse: one iterator from the last key backwards.
pub fn read_reverse(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut it = db
        .iter(&p.ropts)
        .map_err(|e| BenchError::engine("NewIterator failed", e))?;
    let mut i = 0i64;
    let mut bytes = 0u64;
    it.seek_to_last();
    while i < p.reads && it.valid() {
        bytes += (it.key().len() + it.value().len()) as u64;
        t.finished(1, OpType::Read);
        i += 1;
        if i % 1024 == 1023 {
            t.shared.limit_reads(1024);
        }
        it.prev();
    }
    it.status()
        .map_err(|e| BenchError::engine("Iterator error", e))?;
    t.stats.add_bytes(bytes);
    Ok(())
}

/// readrandom and readmissing (db_bench's `ReadRandom`).
pub fn read_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    match p.families {
        None => read_random_in(p, db, t, DefaultOnly),
        Some(f) => read_random_in(p, db, t, f),
    }
}

fn read_random_in(p: &Params, db: &dyn Db, t: &mut ThreadState, route: impl Route) -> Result<()> {
    let mut read = 0u64;
    let mut found = 0u64;
    let mut bytes = 0u64;
    let mut key = p.keygen.buffer();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let stride = p.cfg.multiread_stride;
    let mut num_keys = 0i64;
    let mut key_rand = 0i64;
    let fnum = p.fnum();
    while !duration.done(1) {
        // SelectDBWithCfh draws one number per op even with one DB.
        let _ = t.rand.next();
        if p.entries_per_batch > 1 && stride != 0 {
            num_keys += 1;
            if num_keys == p.entries_per_batch {
                num_keys = 0;
                key_rand = p.random_key(&mut t.rand) as i64;
                if key_rand + (p.entries_per_batch - 1) * stride >= p.flags_num {
                    key_rand = p.flags_num - p.entries_per_batch * stride;
                }
            } else {
                key_rand += stride;
            }
        } else {
            key_rand = p.random_key(&mut t.rand) as i64;
        }
        p.keygen.fill(&mut key, key_rand.max(0) as u64, fnum);
        read += 1;
        match route.get(db, &p.ropts, key_rand, &key, &mut value) {
            Ok(true) => {
                found += 1;
                bytes += (key.len() + value.len()) as u64;
            }
            Ok(false) => {}
            Err(e) => return Err(BenchError::engine("Get returned an error", e)),
        }
        if read % 256 == 255 {
            t.shared.limit_reads(256);
        }
        t.finished(1, OpType::Read);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("({found} of {read} found)\n"));
    Ok(())
}

/// readhot: LevelDB's benchmark of that name: random reads from the first
/// 1% of the keyspace (RocksDB's db_bench has no readhot).
pub fn read_hot(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let range = ((p.flags_num + 99) / 100).max(1) as u64;
    let mut read = 0u64;
    let mut found = 0u64;
    let mut bytes = 0u64;
    let mut key = p.keygen.buffer();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let fnum = p.fnum();
    while !duration.done(1) {
        let k = t.rand.next() % range;
        p.keygen.fill(&mut key, k, fnum);
        read += 1;
        match db.get_into(&p.ropts, &key, &mut value) {
            Ok(true) => {
                found += 1;
                bytes += (key.len() + value.len()) as u64;
            }
            Ok(false) => {}
            Err(e) => return Err(BenchError::engine("Get returned an error", e)),
        }
        t.finished(1, OpType::Read);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// multireadrandom: `batch_size` keys per `multi_get`.
pub fn multi_read_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let n = p.entries_per_batch.max(1) as usize;
    let mut keys: Vec<Vec<u8>> = (0..n).map(|_| p.keygen.buffer()).collect();
    let mut read = 0u64;
    let mut found = 0u64;
    let mut bytes = 0u64;
    let mut num_multireads = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let stride = p.cfg.multiread_stride;
    let fnum = p.fnum();
    while !duration.done(p.entries_per_batch) {
        let _ = t.rand.next();
        if stride != 0 {
            let mut k = p.random_key(&mut t.rand) as i64;
            if k + (n as i64 - 1) * stride >= p.flags_num {
                k = p.flags_num - n as i64 * stride;
            }
            for key in keys.iter_mut() {
                p.keygen.fill(key, k.max(0) as u64, fnum);
                k += stride;
            }
        } else {
            for key in keys.iter_mut() {
                let k = p.random_key(&mut t.rand);
                p.keygen.fill(key, k, fnum);
            }
        }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let results = db.multi_get(&p.ropts, &refs);
        read += n as u64;
        for (k, r) in keys.iter().zip(results) {
            match r {
                Ok(Some(v)) => {
                    found += 1;
                    bytes += (k.len() + v.len()) as u64;
                }
                Ok(None) => {}
                Err(e) => return Err(BenchError::engine("MultiGet returned an error", e)),
            }
        }
        num_multireads += 1;
        if num_multireads % 256 == 255 {
            t.shared.limit_reads(256 * n as u64);
        }
        t.finished(p.entries_per_batch, OpType::Read);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// seekrandom: a new iterator per op, Seek, then `seek_nexts` Next calls.
pub fn seek_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut read = 0u64;
    let mut found = 0u64;
    let mut bytes = 0u64;
    let mut key = p.keygen.buffer();
    let mut bound = p.keygen.buffer();
    let mut value_buffer = [0u8; 256];
    let mut ro = p.ropts.clone();
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let fnum = p.fnum();
    let reverse = p.cfg.reverse_iterator;
    while !duration.done(1) {
        let seek_pos = (t.rand.next() % fnum) as i64;
        p.keygen.fill(&mut key, seek_pos as u64, fnum);
        if p.cfg.max_scan_distance != 0 {
            if reverse {
                let lo = (seek_pos - p.cfg.max_scan_distance).max(0) as u64;
                p.keygen.fill(&mut bound, lo, fnum);
                ro.iterate_lower_bound = Some(bound.clone());
            } else {
                let hi = p.flags_num.min(seek_pos + p.cfg.max_scan_distance) as u64;
                p.keygen.fill(&mut bound, hi, fnum);
                ro.iterate_upper_bound = Some(bound.clone());
            }
        }
        let mut it = db
            .iter(&ro)
            .map_err(|e| BenchError::engine("NewIterator failed", e))?;
        it.seek(&key);
        read += 1;
        if it.valid() && it.key() == key.as_slice() {
            found += 1;
        }
        let mut j = 0;
        while j < p.cfg.seek_nexts && it.valid() {
            let v = it.value();
            let n = v.len().min(value_buffer.len());
            value_buffer[..n].copy_from_slice(&v[..n]);
            bytes += (it.key().len() + v.len()) as u64;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
            j += 1;
        }
        if p.cfg.seek_nexts_to_delete > 0 && it.valid() {
            let mut j = 0;
            while j < p.cfg.seek_nexts_to_delete && it.valid() {
                if let Err(e) = db.delete(&WriteOptions::default(), it.key()) {
                    eprintln!("Delete failed: {e}");
                }
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
                j += 1;
            }
        }
        it.status()
            .map_err(|e| BenchError::engine("Iterator error", e))?;
        if read % 256 == 255 {
            t.shared.limit_reads(256);
        }
        t.finished(1, OpType::Seek);
    }
    std::hint::black_box(&value_buffer);
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("({found} of {read} found)\n"));
    Ok(())
}

fn do_delete(p: &Params, db: &dyn Db, t: &mut ThreadState, seq: bool) -> Result<()> {
    let mut batch =
        WriteBatch::with_capacity(p.entries_per_batch.max(1) as usize * (p.keygen.key_size + 8));
    let mut duration = p.duration(t.shared, if seq { 0 } else { p.cfg.duration }, p.deletes);
    let mut i = 0i64;
    let mut key = p.keygen.buffer();
    let fnum = p.fnum();
    while !duration.done(p.entries_per_batch) {
        let _ = t.rand.next();
        batch.clear();
        for j in 0..p.entries_per_batch {
            let k = if seq {
                (i + j) as u64
            } else {
                t.rand.next() % fnum
            };
            p.keygen.fill(&mut key, k, fnum);
            batch.delete(&key);
        }
        db.write(&p.wopts, &batch)
            .map_err(|e| BenchError::engine("del error", e))?;
        t.finished(p.entries_per_batch, OpType::Delete);
        i += p.entries_per_batch;
    }
    Ok(())
}

/// deleteseq.
pub fn delete_seq(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    do_delete(p, db, t, true)
}

/// deleterandom.
pub fn delete_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    do_delete(p, db, t, false)
}

/// The background writer of readwhilewriting: puts random keys until the
/// readers finish; excluded from the merged result.
fn bg_writer(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut gen = p.value_gen();
    let mut bytes = 0u64;
    t.stats.set_exclude_from_merge();
    let mut key = p.keygen.buffer();
    let mut written = 0i64;
    let mut hint_printed = false;
    let keyspace = if p.cfg.bgwriter_num > 0 {
        p.cfg.bgwriter_num as u64
    } else {
        p.fnum()
    };
    loop {
        let _ = t.rand.next();
        if p.cfg.finish_after_writes && written == p.writes {
            eprintln!("Exiting the writer after {written} writes...");
            break;
        }
        if t.shared.num_done.load(Ordering::Acquire) + 1 >= t.shared.total {
            if p.cfg.finish_after_writes {
                if !hint_printed {
                    eprintln!(
                        "Reads are finished. Have {} more writes to do",
                        p.writes - written
                    );
                    hint_printed = true;
                }
            } else {
                break;
            }
        }
        if t.shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let k = t.rand.next() % keyspace;
        p.keygen.fill(&mut key, k, keyspace);
        let val = gen.generate_sized();
        db.put(&p.wopts, &key, val)
            .map_err(|e| BenchError::engine("put or merge error", e))?;
        let n = (key.len() + val.len()) as u64;
        bytes += n;
        written += 1;
        t.finished(1, OpType::Write);
        t.limit_writes(n);
    }
    t.stats.add_bytes(bytes);
    Ok(())
}

/// readwhilewriting: thread 0 writes, the others run readrandom.
pub fn read_while_writing(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    if t.tid > 0 {
        read_random(p, db, t)
    } else {
        bg_writer(p, db, t)
    }
}

/// seekrandomwhilewriting: thread 0 writes, the others run seekrandom.
pub fn seek_random_while_writing(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    if t.tid > 0 {
        seek_random(p, db, t)
    } else {
        bg_writer(p, db, t)
    }
}

/// readrandomwriterandom: `--readwritepercent` reads, the rest puts.
pub fn read_random_write_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut gen = p.value_gen();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let mut found = 0u64;
    let mut get_weight = 0;
    let mut put_weight = 0;
    let mut reads_done = 0u64;
    let mut writes_done = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.readwrites);
    let mut key = p.keygen.buffer();
    let fnum = p.fnum();
    while !duration.done(1) {
        let _ = t.rand.next();
        let k = t.rand.next() % fnum;
        p.keygen.fill(&mut key, k, fnum);
        if get_weight == 0 && put_weight == 0 {
            get_weight = p.cfg.readwritepercent;
            put_weight = 100 - get_weight;
        }
        if get_weight > 0 {
            match db.get_into(&p.ropts, &key, &mut value) {
                Ok(true) => found += 1,
                Ok(false) => {}
                Err(e) => return Err(BenchError::engine("get error", e)),
            }
            get_weight -= 1;
            reads_done += 1;
            t.finished(1, OpType::Read);
        } else if put_weight > 0 {
            db.put(&p.wopts, &key, gen.generate_sized())
                .map_err(|e| BenchError::engine("put error", e))?;
            put_weight -= 1;
            writes_done += 1;
            t.finished(1, OpType::Write);
        }
    }
    t.stats.add_message(&format!(
        "( reads:{reads_done} writes:{writes_done} total:{} found:{found})",
        p.readwrites
    ));
    Ok(())
}

/// updaterandom: read-modify-write of random keys.
pub fn update_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut gen = p.value_gen();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let mut found = 0u64;
    let mut bytes = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.readwrites);
    let mut key = p.keygen.buffer();
    let fnum = p.fnum();
    while !duration.done(1) {
        let _ = t.rand.next();
        let k = t.rand.next() % fnum;
        p.keygen.fill(&mut key, k, fnum);
        match db.get_into(&p.ropts, &key, &mut value) {
            Ok(true) => {
                found += 1;
                bytes += (key.len() + value.len()) as u64;
            }
            Ok(false) => {}
            Err(e) => return Err(BenchError::engine("Get returned an error", e)),
        }
        t.limit_writes((key.len() + value.len()) as u64);
        let val = gen.generate_sized();
        db.put(&p.wopts, &key, val)
            .map_err(|e| BenchError::engine("put error", e))?;
        bytes += (key.len() + val.len()) as u64;
        t.finished(1, OpType::Update);
    }
    t.stats.add_bytes(bytes);
    t.stats
        .add_message(&format!("( updates:{} found:{found})", p.readwrites));
    Ok(())
}

fn pareto_cdf_inversion(u: f64, theta: f64, k: f64, sigma: f64) -> i64 {
    let r = if k == 0.0 {
        theta - sigma * u.ln()
    } else {
        theta + sigma * (u.powf(-k) - 1.0) / k
    };
    r.ceil() as i64
}

fn power_cdf_inversion(u: f64, a: f64, b: f64) -> i64 {
    (u / a).powf(1.0 / b).ceil() as i64
}

/// mixgraph, simplified: Get/Put/Seek chosen by `--mix_*_ratio`, keys
/// uniform (or power-distributed with `--key_dist_a/b`), Put sizes and
/// scan lengths from db_bench's Pareto models. Key-range (prefix) modelling
/// and sine-shaped rates are not ported.
pub fn mix_graph(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    match p.families {
        None => mix_graph_in(p, db, t, DefaultOnly),
        Some(f) => mix_graph_in(p, db, t, f),
    }
}

fn mix_graph_in(p: &Params, db: &dyn Db, t: &mut ThreadState, route: impl Route) -> Result<()> {
    let cfg = p.cfg;
    let (mut gets, mut puts, mut seeks) = (0u64, 0u64, 0u64);
    let (mut get_found, mut seek_found, mut bytes) = (0u64, 0u64, 0u64);
    let (mut total_scan, mut total_val) = (0f64, 0f64);
    let value_max = (1i64 << 20).min(cfg.flags.i64("mix_max_value_size")).max(1);
    let scan_len_max = cfg.flags.i64("mix_max_scan_len").max(1);
    let ratios = [
        cfg.flags.f64("mix_get_ratio"),
        cfg.flags.f64("mix_put_ratio"),
        cfg.flags.f64("mix_seek_ratio"),
    ];
    let sum: f64 = ratios.iter().sum();
    let mut bounds = [0i64; 3];
    let mut range = 0i64;
    for (i, r) in ratios.iter().enumerate() {
        range += (1000.0 * (r / sum)).ceil() as i64;
        bounds[i] = range;
    }
    let range = range.max(1);
    let (ka, kb) = (cfg.flags.f64("key_dist_a"), cfg.flags.f64("key_dist_b"));
    let random_model = ka == 0.0 || kb == 0.0;
    let mut gen = p.value_gen();
    let mut key = p.keygen.buffer();
    let mut value = Vec::with_capacity(cfg.value_size.max(16));
    let mut value_buffer = vec![0u8; 1 << 20];
    let fnum = p.fnum();
    let mut duration = p.duration(t.shared, cfg.duration, p.reads);
    while !duration.done(1) {
        let _ = t.rand.next();
        let ini_rand = p.random_key(&mut t.rand) as i64;
        let rand_v = ini_rand % fnum as i64;
        let u = rand_v as f64 / fnum as f64;
        let key_rand = if random_model {
            ini_rand as u64
        } else {
            let seed = power_cdf_inversion(u, ka, kb);
            Random64::new(seed as u64).next() % fnum
        };
        p.keygen.fill(&mut key, key_rand, fnum);
        let pos = rand_v.abs() % range;
        let qtype = bounds.iter().position(|b| pos < *b).unwrap_or(0);
        match qtype {
            0 => {
                gets += 1;
                // Only mixgraph's Gets go to the key's family in db_bench;
                // its Puts and Seeks use default.
                match route.get(db, &p.ropts, key_rand as i64, &key, &mut value) {
                    Ok(true) => {
                        get_found += 1;
                        bytes += (key.len() + value.len()) as u64;
                    }
                    Ok(false) => {}
                    Err(e) => return Err(BenchError::engine("Get returned an error", e)),
                }
                t.finished(1, OpType::Read);
            }
            1 => {
                puts += 1;
                let mut vs = pareto_cdf_inversion(
                    u,
                    cfg.flags.f64("value_theta"),
                    cfg.flags.f64("value_k"),
                    cfg.flags.f64("value_sigma"),
                );
                if vs < 10 {
                    vs = 10;
                } else if vs > value_max {
                    vs %= value_max;
                }
                total_val += vs as f64;
                db.put(&p.wopts, &key, gen.generate(vs as usize))
                    .map_err(|e| BenchError::engine("put error", e))?;
                t.finished(1, OpType::Write);
            }
            _ => {
                let mut it = db
                    .iter(&p.ropts)
                    .map_err(|e| BenchError::engine("NewIterator failed", e))?;
                it.seek(&key);
                seeks += 1;
                if it.valid() && it.key() == key.as_slice() {
                    seek_found += 1;
                }
                let scan_length = pareto_cdf_inversion(
                    u,
                    cfg.flags.f64("iter_theta"),
                    cfg.flags.f64("iter_k"),
                    cfg.flags.f64("iter_sigma"),
                ) % scan_len_max;
                let mut j = 0;
                while j < scan_length && it.valid() {
                    let v = it.value();
                    let n = v.len().min(value_buffer.len());
                    value_buffer[..n].copy_from_slice(&v[..n]);
                    bytes += (it.key().len() + v.len()) as u64;
                    it.next();
                    total_scan += 1.0;
                    j += 1;
                }
                it.status()
                    .map_err(|e| BenchError::engine("Iterator error", e))?;
                t.finished(1, OpType::Seek);
            }
        }
    }
    std::hint::black_box(&value_buffer);
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!(
        "( Gets:{gets} Puts:{puts} Seek:{seeks}, reads {} in {} found, avg size: {:.1} value, {:.1} scan)\n",
        get_found + seek_found,
        gets + seeks,
        total_val / puts as f64,
        total_scan / seeks as f64
    ));
    Ok(())
}

/// Reads one byte of every 4 KiB page of a value. A scan's value slice may
/// point into a memory map (LMDB, vmemkv) that has not been read yet; a
/// benchmark that only takes its length would let zero-copy engines skip the
/// I/O that copying engines (RocksDB) have already paid. One byte per page
/// forces the same reads for all at a negligible CPU cost.
fn touch_value(v: &[u8]) -> u8 {
    let mut x = v.last().copied().unwrap_or(0);
    for b in v.iter().step_by(4096) {
        x ^= *b;
    }
    x
}

fn drain_multiscan(db: &dyn Db, ro: &ReadOptions, args: &MultiScanArgs) -> Result<i64> {
    let mut ms = db
        .multi_scan(ro, args)
        .map_err(|e| BenchError::engine("MultiScan error", e))?;
    let mut keys = 0i64;
    while ms
        .next_range()
        .map_err(|e| BenchError::engine("MultiScan error", e))?
    {
        while ms
            .next_entry()
            .map_err(|e| BenchError::engine("MultiScan error", e))?
        {
            std::hint::black_box(touch_value(ms.value()));
            keys += 1;
        }
    }
    Ok(keys)
}

fn multiscan_args(p: &Params) -> MultiScanArgs {
    MultiScanArgs {
        ranges: Vec::with_capacity(p.cfg.multiscan_size.max(1) as usize),
        use_async_io: p.cfg.multiscan_use_async_io,
        io_coalesce_threshold: p.cfg.multiscan_coalesce_threshold,
        max_prefetch_size: p.cfg.multiscan_max_prefetch_size,
    }
}

/// multiscan: one op is one MultiScan of `--multiscan_size` ranges of
/// `seek_nexts` keys (50 if 0), `--multiscan_stride` keys apart, starting
/// uniformly in `[0, num - (scan+stride)*size)`. Without `--duration` the
/// run stops after about `--reads` keys scanned.
pub fn multi_scan(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let scan_size = if p.cfg.seek_nexts != 0 {
        p.cfg.seek_nexts
    } else {
        50
    };
    let size = p.cfg.multiscan_size.max(1);
    let stride = p.cfg.multiscan_stride;
    let span = (scan_size + stride) * size;
    let range = (p.flags_num - span).max(1) as u64;
    let fnum = p.fnum();
    let mut args = multiscan_args(p);
    let mut multiscans = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let mut num_keys = 1i64;
    while !duration.done(num_keys) {
        let _ = t.rand.next();
        let mut start = t.rand.uniform(range);
        args.ranges.clear();
        for _ in 0..size {
            args.ranges.push(ScanRange::new(
                &p.keygen.key(start, fnum),
                &p.keygen.key(start + scan_size as u64, fnum),
            ));
            start += (scan_size + stride) as u64;
        }
        let keys = drain_multiscan(db, &p.ropts, &args)?;
        num_keys = keys.max(1);
        t.shared.limit_reads(1);
        t.finished(1, OpType::MultiScan);
        multiscans += 1;
    }
    t.stats.add_message(&format!("(multiscans:{multiscans})"));
    Ok(())
}

/// multiscanrandom: 1–64 random non-overlapping ranges of up to 1 MiB of
/// data each, via MultiScan (`--use_multiscan`, default) or one iterator.
pub fn multi_scan_random(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let per_key = (p.cfg.key_size + p.cfg.value_size).max(1) as i64;
    let max_range_keys = ((1i64 << 20) / per_key).max(1) as u64;
    let fnum = p.fnum();
    let mut args = multiscan_args(p);
    let mut multiscans = 0u64;
    let mut rows = 0u64;
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(64);
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(64);
    let mut skey = p.keygen.buffer();
    let mut ekey = p.keygen.buffer();
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let mut num_keys = 1i64;
    while !duration.done(num_keys) {
        let _ = t.rand.next();
        let batch = 1 + t.rand.uniform(64);
        ranges.clear();
        for _ in 0..batch {
            let size = 1 + t.rand.uniform(max_range_keys);
            let max_start = fnum.saturating_sub(size);
            let start = t.rand.uniform(max_start + 1);
            ranges.push((start, size));
        }
        ranges.sort_by_key(|r| r.0);
        merged.clear();
        for &(s, n) in &ranges {
            match merged.last() {
                None => merged.push((s, n)),
                Some(&(ps, pn)) => {
                    let prev_end = ps + pn;
                    if s >= prev_end {
                        merged.push((s, n));
                    } else if s + n > prev_end {
                        merged.push((prev_end, s + n - prev_end));
                    }
                }
            }
        }
        let mut keys = 0i64;
        if p.cfg.use_multiscan {
            args.ranges.clear();
            for &(s, n) in &merged {
                args.ranges.push(ScanRange::new(
                    &p.keygen.key(s, fnum),
                    &p.keygen.key(s + n, fnum),
                ));
            }
            keys = drain_multiscan(db, &p.ropts, &args)?;
        } else {
            let mut it = db
                .iter(&p.ropts)
                .map_err(|e| BenchError::engine("NewIterator failed", e))?;
            for &(s, n) in &merged {
                p.keygen.fill(&mut skey, s, fnum);
                p.keygen.fill(&mut ekey, s + n, fnum);
                it.seek(&skey);
                while it.valid() && it.key() < ekey.as_slice() {
                    keys += 1;
                    it.next();
                }
                it.status()
                    .map_err(|e| BenchError::engine("Iterator error", e))?;
            }
        }
        num_keys = keys.max(1);
        rows += keys as u64;
        t.shared.limit_reads(1);
        t.finished(1, OpType::MultiScan);
        multiscans += 1;
    }
    let per = rows.checked_div(multiscans).unwrap_or(0);
    t.stats.add_message(&format!(
        "(multiscans:{multiscans} rows_scanned:{rows} rows_per_multiscan:{per} max_range_keys:{max_range_keys})"
    ));
    Ok(())
}

// ---- The original VMemKV benchmark's workloads ----

fn zipf_for(p: &Params) -> Zipf {
    Zipf::new(p.fnum(), p.cfg.zipf_alpha)
}

/// insert: each thread puts fresh keys `tid, tid+T, tid+2T, ...` (T =
/// threads), so together they fill `[0, N)`; `--duration` or `--writes`
/// (per thread) bounds the run.
pub fn vm_insert(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    insert_from(p, db, t, 0)
}

fn insert_from(p: &Params, db: &dyn Db, t: &mut ThreadState, base: u64) -> Result<()> {
    let threads = t.shared.total as u64;
    let mut gen = p.value_gen();
    let mut key = p.keygen.buffer();
    let mut next = base + t.tid as u64;
    let mut bytes = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.writes);
    let fnum = p.fnum();
    let mut inserted = 0u64;
    while !duration.done(1) {
        p.keygen.fill(&mut key, next, fnum);
        let val = gen.generate_sized();
        db.put(&p.wopts, &key, val)
            .map_err(|e| BenchError::engine("put error", e))?;
        bytes += (key.len() + val.len()) as u64;
        next += threads;
        inserted += 1;
        t.finished(1, OpType::Write);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("(inserted:{inserted})"));
    Ok(())
}

/// update_zipf: puts to Zipf-chosen existing keys.
pub fn vm_update_zipf(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let z = zipf_for(p);
    let mut gen = p.value_gen();
    let mut key = p.keygen.buffer();
    let mut bytes = 0u64;
    let mut duration = p.duration(t.shared, p.cfg.duration, p.writes);
    let fnum = p.fnum();
    while !duration.done(1) {
        let k = z.key(&mut t.rand);
        p.keygen.fill(&mut key, k, fnum);
        let val = gen.generate_sized();
        db.put(&p.wopts, &key, val)
            .map_err(|e| BenchError::engine("put error", e))?;
        bytes += (key.len() + val.len()) as u64;
        t.finished(1, OpType::Write);
    }
    t.stats.add_bytes(bytes);
    Ok(())
}

/// delete: each thread deletes distinct existing keys `tid, tid+T, ...`.
pub fn vm_delete(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let threads = t.shared.total as u64;
    let mut key = p.keygen.buffer();
    let mut next = t.tid as u64;
    let per_thread = (p.deletes.max(0) as u64).div_ceil(threads) as i64;
    let mut duration = p.duration(t.shared, p.cfg.duration, per_thread);
    let fnum = p.fnum();
    while !duration.done(1) {
        p.keygen.fill(&mut key, next % fnum, fnum);
        db.delete(&p.wopts, &key)
            .map_err(|e| BenchError::engine("del error", e))?;
        next += threads;
        t.finished(1, OpType::Delete);
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyDist {
    Zipf,
    Uniform,
    ZipfMissing,
}

fn vm_get(p: &Params, db: &dyn Db, t: &mut ThreadState, dist: KeyDist) -> Result<()> {
    let z = zipf_for(p);
    let mut key = p.keygen.buffer();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let (mut read, mut found, mut bytes) = (0u64, 0u64, 0u64);
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let fnum = p.fnum();
    while !duration.done(1) {
        let k = match dist {
            KeyDist::Zipf => z.key(&mut t.rand),
            KeyDist::Uniform => t.rand.next() % fnum,
            // Ids past --num were never written by the fill benchmarks.
            KeyDist::ZipfMissing => fnum + z.key(&mut t.rand),
        };
        p.keygen.fill(&mut key, k, fnum);
        read += 1;
        match db.get_into(&p.ropts, &key, &mut value) {
            Ok(true) => {
                found += 1;
                bytes += (key.len() + value.len()) as u64;
            }
            Ok(false) => {}
            Err(e) => return Err(BenchError::engine("Get returned an error", e)),
        }
        t.finished(1, OpType::Read);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// getmiss_zipf: Gets of keys that do not exist (ids past `--num`).
pub fn vm_getmiss_zipf(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    vm_get(p, db, t, KeyDist::ZipfMissing)
}

/// gethit_zipf: Gets of Zipf-chosen existing keys.
pub fn vm_gethit_zipf(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    vm_get(p, db, t, KeyDist::Zipf)
}

/// gethit_uniform: Gets of uniformly chosen existing keys.
pub fn vm_gethit_uniform(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    vm_get(p, db, t, KeyDist::Uniform)
}

fn scan_once(p: &Params, db: &dyn Db, start: &[u8], len: i64) -> Result<(u64, u64)> {
    let mut it = db
        .iter(&p.ropts)
        .map_err(|e| BenchError::engine("NewIterator failed", e))?;
    it.seek(start);
    let (mut n, mut bytes) = (0u64, 0u64);
    while (n as i64) < len && it.valid() {
        bytes += (it.key().len() + it.value().len()) as u64;
        std::hint::black_box(touch_value(it.value()));
        n += 1;
        it.next();
    }
    it.status()
        .map_err(|e| BenchError::engine("Iterator error", e))?;
    Ok((n, bytes))
}

fn vm_scan(p: &Params, db: &dyn Db, t: &mut ThreadState, zipf: bool) -> Result<()> {
    let z = zipf_for(p);
    let len = p.scan_len();
    let mut key = p.keygen.buffer();
    let (mut scans, mut keys, mut bytes) = (0u64, 0u64, 0u64);
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let fnum = p.fnum();
    while !duration.done(1) {
        let k = if zipf {
            z.key(&mut t.rand)
        } else {
            t.rand.next() % fnum
        };
        p.keygen.fill(&mut key, k, fnum);
        let (n, b) = scan_once(p, db, &key, len)?;
        scans += 1;
        keys += n;
        bytes += b;
        t.finished(1, OpType::Seek);
    }
    t.stats.add_bytes(bytes);
    t.stats.add_message(&format!("(scans:{scans} keys:{keys})"));
    Ok(())
}

/// scan_zipf: scans of `seek_nexts` (100 if 0) keys from a Zipf start.
pub fn vm_scan_zipf(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    vm_scan(p, db, t, true)
}

/// scan_uniform: scans of `seek_nexts` (100 if 0) keys from a uniform start.
pub fn vm_scan_uniform(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    vm_scan(p, db, t, false)
}

/// ycsb_e: 95% scans of `seek_nexts` (100 if 0) keys from a Zipf start, 5%
/// inserts of new keys (ids from `--num` upward, strided by thread).
pub fn vm_ycsb_e(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let z = zipf_for(p);
    let len = p.scan_len();
    let threads = t.shared.total as u64;
    let mut gen = p.value_gen();
    let mut key = p.keygen.buffer();
    let mut next_insert = p.fnum() + t.tid as u64;
    let (mut scans, mut inserts, mut bytes) = (0u64, 0u64, 0u64);
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    let fnum = p.fnum();
    while !duration.done(1) {
        if t.rand.uniform(100) < 95 {
            let k = z.key(&mut t.rand);
            p.keygen.fill(&mut key, k, fnum);
            let (_, b) = scan_once(p, db, &key, len)?;
            bytes += b;
            scans += 1;
            t.finished(1, OpType::Seek);
        } else {
            p.keygen.fill(&mut key, next_insert, fnum);
            let val = gen.generate_sized();
            db.put(&p.wopts, &key, val)
                .map_err(|e| BenchError::engine("put error", e))?;
            bytes += (key.len() + val.len()) as u64;
            next_insert += threads;
            inserts += 1;
            t.finished(1, OpType::Write);
        }
    }
    t.stats.add_bytes(bytes);
    t.stats
        .add_message(&format!("(scans:{scans} inserts:{inserts})"));
    Ok(())
}

/// readrandomfast: batches of 100 Gets over the next power of two ≥ num
/// (keys past num do not exist), as db_bench does.
pub fn read_random_fast(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let (mut read, mut found, mut nonexist) = (0u64, 0u64, 0u64);
    let mut key = p.keygen.buffer();
    let mut value = Vec::with_capacity(p.cfg.value_size.max(16));
    let num = p.fnum();
    let pot = num.next_power_of_two();
    let _ = t.rand.next();
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    loop {
        for _ in 0..100 {
            let k = t.rand.next() & (pot - 1);
            p.keygen.fill(&mut key, k, num);
            read += 1;
            match db.get_into(&p.ropts, &key, &mut value) {
                Ok(true) => found += 1,
                Ok(false) => {}
                Err(e) => return Err(BenchError::engine("Get returned an error", e)),
            }
            if k >= num {
                nonexist += 1;
            }
        }
        t.finished(100, OpType::Read);
        if duration.done(100) {
            break;
        }
    }
    t.stats.add_message(&format!(
        "({found} of {read} found, issued {nonexist} non-exist keys)\n"
    ));
    Ok(())
}

/// The background scanner of readwhilescanning: walks the whole keyspace
/// with one iterator, wrapping around, until it has done `reads` steps.
fn bg_scan(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut it = db
        .iter(&p.ropts)
        .map_err(|e| BenchError::engine("NewIterator failed", e))?;
    eprintln!("num reads to do {}", p.reads);
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    while !duration.done(1) {
        if !it.valid() {
            it.status()
                .map_err(|e| BenchError::engine("Iterator error", e))?;
            it.seek_to_first();
        } else {
            it.next();
        }
        t.finished(1, OpType::Seek);
    }
    Ok(())
}

/// readwhilescanning: thread 0 scans, the others run readrandom.
pub fn read_while_scanning(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    if t.tid > 0 {
        read_random(p, db, t)
    } else {
        bg_scan(p, db, t)
    }
}

/// multireadwhilewriting: thread 0 writes, the others run multireadrandom.
pub fn multi_read_while_writing(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    if t.tid > 0 {
        multi_read_random(p, db, t)
    } else {
        bg_writer(p, db, t)
    }
}

/// newiterator: creates and drops an iterator per op.
pub fn new_iterator(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    let mut duration = p.duration(t.shared, p.cfg.duration, p.reads);
    while !duration.done(1) {
        let _ = t.rand.next();
        let it = db
            .iter(&p.ropts)
            .map_err(|e| BenchError::engine("NewIterator failed", e))?;
        drop(it);
        t.finished(1, OpType::Others);
    }
    Ok(())
}

/// newiteratorwhilewriting: thread 0 writes, the others run newiterator.
pub fn new_iterator_while_writing(p: &Params, db: &dyn Db, t: &mut ThreadState) -> Result<()> {
    if t.tid > 0 {
        new_iterator(p, db, t)
    } else {
        bg_writer(p, db, t)
    }
}
