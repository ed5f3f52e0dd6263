//! The driver: opens the engine, prints the header, runs each benchmark of
//! `--benchmarks` with its threads, and reports as db_bench does.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Barrier;
use std::time::Instant;

use serde_json::{json, Map, Value};
use vmemkv_compat::{Db, EngineKind, EngineOptions, Error, ReadOptions, WriteOptions};

use crate::config::{Config, EngineChoice};
use crate::dbdir::{destroy_db, destroy_wal_dir, marker_path, RunLock};
use crate::dbstats::{self, Counters, CountingDb, Figures};
use crate::engines::harness_test::HarnessTestDb;
use crate::error::{BenchError, Result};
use crate::families::ColumnFamilies;
use crate::keys::{KeyGen, ValueSizeDist};
use crate::monitor::{run_injector, run_reporter, Injection, StopSignal, Timeline};
use crate::output;
use crate::stats::{CombinedStats, Stats, StatsConfig, Summary};
use crate::workloads::{self as w, Method, Params, Shared, ThreadState};

/// How one `--benchmarks` entry runs.
enum Plan {
    Threads { method: Method, fresh_db: bool },
    Main(fn(&mut Benchmark, &str) -> Result<()>),
    Skip(&'static str),
    Unknown,
}

/// The benchmark driver (db_bench's `Benchmark`).
pub struct Benchmark {
    cfg: Config,
    db: Option<Box<dyn Db>>,
    /// The families of `db` with `--num_column_families` > 1.
    families: Option<ColumnFamilies>,
    seed_base: u64,
    total_thread_count: u64,
    engine_version: String,
    results: Vec<Value>,
    skipped: Vec<Value>,
    maintenance: Vec<Value>,
    /// Seconds each engine open took (the first open, and one per
    /// `--use_existing_db=0` benchmark that recreates the database).
    open_seconds: Vec<f64>,
    started: String,
    run_lock: Option<RunLock>,
    /// The counting wrapper's counters, when it wraps the engine.
    counters: Option<std::sync::Arc<Counters>>,
    opened_at: Instant,
    /// The figures of the last `stats` dump (intervals start there).
    last_figures: Figures,
}

/// Bytes this process caused to be read from storage: `read_bytes` of
/// /proc/self/io counts every thread's page-cache misses, mmap faults and
/// readahead, an engine's background threads included, and nothing another
/// process read.
fn storage_read_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/self/io")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// The `--device_reads` line. Not `name : ...`: RocksDB's scripts take any
/// line that starts with the benchmark's name for its result.
fn device_reads_line(name: &str, bytes: Option<u64>, operations: u64) -> String {
    match bytes {
        Some(b) => format!(
            "Device reads {name} : {b} bytes, {:.1} bytes/op\n",
            b as f64 / operations.max(1) as f64
        ),
        None => format!("Device reads {name} : unknown (/proc/self/io unreadable)\n"),
    }
}

fn print_out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

fn hist_json(h: &crate::histogram::Histogram) -> Value {
    json!({
        "count": h.count(), "average": h.average(), "stddev": h.std_dev(),
        "min": h.min(), "median": h.median(), "max": h.max(),
        "p50": h.percentile(50.0), "p75": h.percentile(75.0), "p99": h.percentile(99.0),
        "p99.9": h.percentile(99.9), "p99.99": h.percentile(99.99),
    })
}

/// The key and value sizes the flags ask for, against the engine's limits,
/// before any workload allocates a buffer of that size.
fn check_limits(cfg: &Config, limits: &vmemkv_compat::Limits, engine: &str) -> Result<()> {
    let largest_value = match cfg.value_dist {
        crate::keys::ValueSizeDist::Fixed(v) => ("--value_size", v),
        crate::keys::ValueSizeDist::Uniform(_, hi) | crate::keys::ValueSizeDist::Normal(_, hi) => {
            ("--value_size_max", hi)
        }
    };
    for (flag, asked, max) in [
        ("--key_size", cfg.key_size, limits.max_key_size),
        (largest_value.0, largest_value.1, limits.max_value_size),
    ] {
        if let Some(max) = max.filter(|m| asked > *m) {
            return Err(BenchError::flag(
                flag.trim_start_matches('-'),
                format!("Invalid argument: {flag}={asked} exceeds {engine}'s limit of {max} bytes"),
            ));
        }
    }
    Ok(())
}

impl Benchmark {
    /// A driver for `cfg`; nothing is opened yet.
    pub fn new(cfg: Config) -> Self {
        Benchmark {
            cfg,
            db: None,
            families: None,
            seed_base: 0,
            total_thread_count: 0,
            engine_version: String::new(),
            results: Vec::new(),
            skipped: Vec::new(),
            maintenance: Vec::new(),
            open_seconds: Vec::new(),
            started: output::ctime(output::unix_secs()),
            run_lock: None,
            counters: None,
            opened_at: Instant::now(),
            last_figures: Figures::default(),
        }
    }

    fn open(&mut self) -> Result<()> {
        self.families = None;
        self.db = None;
        let db: Box<dyn Db> = match self.cfg.engine {
            EngineChoice::HarnessTest => Box::new(
                HarnessTestDb::with_options(&self.cfg.extra)
                    .map_err(|e| BenchError::engine("open error", e))?,
            ),
            EngineChoice::Compat(kind) => {
                let path = &self.cfg.db;
                // As db_bench: --use_existing_db opens without creating.
                let create = !self.cfg.use_existing_db;
                if create {
                    std::fs::create_dir_all(path)
                        .map_err(|e| BenchError::io("open error: cannot create", path, e))?;
                }
                let marker = marker_path(path);
                if let Ok(prev) = std::fs::read_to_string(&marker) {
                    let prev = prev.trim();
                    if !prev.is_empty() && prev != kind.as_str() {
                        eprintln!(
                            "WARNING: {} was written by engine {prev}, now opened with {}",
                            path.display(),
                            kind.as_str()
                        );
                    }
                }
                let opts = EngineOptions {
                    create_if_missing: create,
                    error_if_exists: false,
                    extra: self.cfg.extra.clone(),
                };
                let t0 = Instant::now();
                let db = vmemkv_compat::open(kind, path, &opts)
                    .map_err(|e| BenchError::engine("open error", e))?;
                self.open_seconds.push(t0.elapsed().as_secs_f64());
                if create && !marker.exists() {
                    std::fs::write(&marker, format!("{}\n", kind.as_str()))
                        .map_err(|e| BenchError::io("cannot write", &marker, e))?;
                }
                db
            }
        };
        self.engine_version = db
            .property(&format!("{}.version", db.name()))
            .or_else(|| db.property("version"))
            .unwrap_or_else(|| match self.cfg.engine {
                EngineChoice::Compat(EngineKind::Vmemkv) | EngineChoice::HarnessTest => {
                    env!("CARGO_PKG_VERSION").to_string()
                }
                _ => "unknown".to_string(),
            });
        check_limits(&self.cfg, &db.limits(), db.name())?;
        let db = if self.counting() {
            let w = CountingDb::new(db, self.cfg.statistics);
            self.counters = Some(w.counters());
            Box::new(w) as Box<dyn Db>
        } else {
            self.counters = None;
            db
        };
        if let EngineChoice::Compat(kind) = self.cfg.engine {
            if !self.cfg.engine.is_rocksdb() {
                // RocksDB writes these lines itself; scripts read them.
                if let Err(e) =
                    dbstats::append_log_header(&self.cfg.db, kind.as_str(), &self.engine_version)
                {
                    eprintln!(
                        "WARNING: cannot write the version lines to {}/LOG: {e}",
                        self.cfg.db.display()
                    );
                }
            }
        }
        // Before any benchmark: an engine without families is refused here,
        // naming the flag and the engine's reason.
        self.families = match &self.cfg.families {
            Some(c) => Some(ColumnFamilies::open(db.as_ref(), c)?),
            None => None,
        };
        self.opened_at = Instant::now();
        self.last_figures = Figures::default();
        self.db = Some(db);
        Ok(())
    }

    /// Whether the engine is wrapped in [`CountingDb`]: for the RocksDB-
    /// shaped `stats` block and `--statistics` lines of other engines
    /// (RocksDB prints its own).
    fn counting(&self) -> bool {
        !self.cfg.engine.is_rocksdb()
            && (self.cfg.statistics || self.cfg.benchmarks.iter().any(|b| b == "stats"))
    }

    fn destroy(&mut self) -> Result<()> {
        self.families = None;
        self.db = None;
        if self.cfg.engine == EngineChoice::HarnessTest {
            return Ok(());
        }
        destroy_db(&self.cfg.db)?;
        let wal = self.cfg.flags.str("wal_dir");
        if self.cfg.engine.is_rocksdb()
            && !wal.is_empty()
            && Path::new(&wal) != self.cfg.db.as_path()
        {
            destroy_wal_dir(Path::new(&wal))?;
        }
        Ok(())
    }

    /// Runs everything; on `Err` the caller prints the message and exits 1.
    pub fn run(&mut self) -> Result<()> {
        let r = self.run_inner();
        if let Err(e) = &r {
            self.write_json(Some(&e.to_string()));
        }
        r
    }

    fn run_inner(&mut self) -> Result<()> {
        if self.cfg.seed == 0 {
            self.seed_base = output::unix_micros();
            print_out(&format!(
                "Set seed to {} because --seed was 0\n",
                self.seed_base
            ));
        } else {
            self.seed_base = self.cfg.seed;
        }
        for wmsg in &self.cfg.warnings {
            eprintln!("WARNING: {wmsg}");
        }
        // Before anything touches the directory: a run that cannot open its
        // engine must not destroy the database it would have replaced.
        if let EngineChoice::Compat(kind) = self.cfg.engine {
            if !kind.is_compiled_in() {
                return Err(BenchError::engine(
                    "open error",
                    Error::NotSupported(format!(
                        "--engine={kind} is not compiled into this build; rebuild with `--features {}`",
                        kind.cargo_feature().unwrap_or("rivals")
                    )),
                ));
            }
        }
        if self.cfg.engine != EngineChoice::HarnessTest {
            self.run_lock = Some(RunLock::acquire(&self.cfg.db)?);
        }
        if !self.cfg.use_existing_db {
            self.destroy()?;
        }
        self.open()?;
        eprint!(
            "{}",
            output::environment_text(self.cfg.engine, &self.engine_version)
        );
        print_out(&output::header_text(
            &self.cfg,
            self.cfg.num,
            self.cfg.keys_per_prefix,
        ));
        let names = self.cfg.benchmarks.clone();
        for entry in names {
            self.run_entry(&entry)?;
        }
        if self.cfg.statistics {
            let own = self
                .db
                .as_ref()
                .and_then(|d| d.statistics())
                .unwrap_or_else(|| "(the engine reports no statistics)".to_string());
            let text = match (&self.counters, self.db.as_deref()) {
                (Some(c), Some(db)) => {
                    let f = Figures::collect(c, db, self.opened_at.elapsed().as_secs_f64());
                    dbstats::statistics_text(c, &f, db.name(), &own)
                }
                _ => own,
            };
            print_out(&format!("STATISTICS:\n{text}\n"));
        }
        self.write_json(None);
        Ok(())
    }

    fn params(&self, name: &str) -> (Params<'_>, usize) {
        let cfg = &self.cfg;
        let mut p = Params {
            cfg,
            num: cfg.num,
            flags_num: cfg.num,
            reads: if cfg.reads < 0 { cfg.num } else { cfg.reads },
            writes: if cfg.writes < 0 { cfg.num } else { cfg.writes },
            deletes: if cfg.deletes < 0 {
                cfg.num
            } else {
                cfg.deletes
            },
            readwrites: if cfg.writes < 0 && cfg.reads < 0 {
                cfg.num
            } else {
                cfg.writes.max(cfg.reads)
            },
            keygen: KeyGen {
                key_size: cfg.key_size,
                prefix_size: cfg.prefix_size,
                keys_per_prefix: cfg.keys_per_prefix,
            },
            entries_per_batch: cfg.batch_size,
            value_dist: cfg.value_dist,
            wopts: WriteOptions {
                sync: cfg.sync,
                disable_wal: cfg.disable_wal,
            },
            ropts: ReadOptions {
                verify_checksums: cfg.verify_checksum,
                async_io: cfg.async_io,
                readahead_size: cfg.readahead_size,
                ..ReadOptions::default()
            },
            seed_base: self.seed_base,
            families: self.families.as_ref(),
        };
        let mut threads = cfg.threads;
        match name {
            "fillsync" => {
                p.num /= 1000;
                p.wopts.sync = true;
            }
            "fill100K" => {
                p.num /= 1000;
                p.value_dist = ValueSizeDist::Fixed(100 * 1000);
            }
            "fillbatch" => p.entries_per_batch = 1000,
            "readmissing" => p.keygen.key_size += 1,
            "readrandomsmall" => p.reads /= 1000,
            "readtocache" => {
                threads = 1;
                p.reads = p.num;
            }
            "filluniquerandom" if threads > 1 => {
                eprint!("filluniquerandom and fillanddeleteuniquerandom multithreaded not supported, use 1 thread");
                threads = 1;
            }
            "readwhilewriting"
            | "seekrandomwhilewriting"
            | "multireadwhilewriting"
            | "newiteratorwhilewriting"
            | "readwhilescanning" => threads += 1,
            _ => {}
        }
        (p, threads)
    }

    fn plan(name: &str) -> Plan {
        let t = |method: Method, fresh_db: bool| Plan::Threads { method, fresh_db };
        match name {
            "fillseq" | "fillbatch" => t(w::write_seq, true),
            "fillrandom" | "fillsync" | "fill100K" => t(w::write_random, true),
            "filluniquerandom" => t(w::write_unique_random, true),
            "overwrite" => t(w::write_random, false),
            "readseq" | "readtocache" => t(w::read_sequential, false),
            "readreverse" => t(w::read_reverse, false),
            "readrandom" | "readmissing" | "readrandomsmall" => t(w::read_random, false),
            "readhot" => t(w::read_hot, false),
            "multireadrandom" => t(w::multi_read_random, false),
            "multiscan" => t(w::multi_scan, false),
            "multiscanrandom" => t(w::multi_scan_random, false),
            "seekrandom" => t(w::seek_random, false),
            "seekrandomwhilewriting" => t(w::seek_random_while_writing, false),
            "deleteseq" => t(w::delete_seq, false),
            "deleterandom" => t(w::delete_random, false),
            "readwhilewriting" => t(w::read_while_writing, false),
            "readrandomwriterandom" => t(w::read_random_write_random, false),
            "updaterandom" => t(w::update_random, false),
            "mixgraph" => t(w::mix_graph, false),
            "compact" => Plan::Main(Benchmark::compact),
            "newiterator" => t(w::new_iterator, false),
            "newiteratorwhilewriting" => t(w::new_iterator_while_writing, false),
            "multireadwhilewriting" => t(w::multi_read_while_writing, false),
            "readwhilescanning" => t(w::read_while_scanning, false),
            "readrandomfast" => t(w::read_random_fast, false),
            "insert" => t(w::vm_insert, false),
            "update_zipf" => t(w::vm_update_zipf, false),
            "delete" => t(w::vm_delete, false),
            "getmiss_zipf" => t(w::vm_getmiss_zipf, false),
            "gethit_zipf" => t(w::vm_gethit_zipf, false),
            "gethit_uniform" => t(w::vm_gethit_uniform, false),
            "scan_zipf" => t(w::vm_scan_zipf, false),
            "scan_uniform" => t(w::vm_scan_uniform, false),
            "ycsb_e" => t(w::vm_ycsb_e, false),
            "stats" => Plan::Main(|b, _| b.print_stats()),
            "levelstats" => Plan::Main(|b, _| b.print_property("levelstats")),
            "sstables" => Plan::Main(|b, _| b.print_property("sstables")),
            "flush" => Plan::Main(Benchmark::flush),
            "compactall" => Plan::Main(Benchmark::compact_all),
            "waitforcompaction" => Plan::Main(Benchmark::wait_for_compaction),
            "fillseqdeterministic" | "filluniquerandomdeterministic" | "compact0" | "compact1" => {
                Plan::Skip("needs control over LSM levels, which the Db trait does not expose")
            }
            "readwhilemerging"
            | "seekrandomwhilemerging"
            | "readrandommergerandom"
            | "mergerandom"
            | "getmergeoperands"
            | "readrandomoperands"
            | "appendrandom"
            | "xorupdaterandom" => Plan::Skip("the Db trait has no merge operator"),
            "readrandomentity" | "multireadentity" | "fillembeddedentity" | "fillembeddedblob" => {
                Plan::Skip("the Db trait has no wide-column entities")
            }
            "randomtransaction" => Plan::Skip("the Db trait has no transactions"),
            "crc32c" | "xxhash" | "xxhash64" | "xxh3" | "compress" | "compressreject"
            | "uncompress" | "acquireload" => {
                Plan::Skip("a RocksDB micro-benchmark of its own utilities, not of an engine")
            }
            "readrandomcoroutine" | "multireadrandomcoroutine" => {
                Plan::Skip("RocksDB's coroutine (folly) read API has no Db-trait equivalent")
            }
            "readtorowcache" => Plan::Skip("RocksDB's row cache has no Db-trait equivalent"),
            "randomwithverify" => Plan::Skip(
                "its consistency check needs snapshots, which the Db trait does not expose",
            ),
            "approximatesizerandom" | "approximatememtablestats" => {
                Plan::Skip("the Db trait has no size-approximation API")
            }
            "fillseekseq" | "randomreplacekeys" | "timeseries" | "fillanddeleteuniquerandom" => {
                Plan::Skip("not ported yet")
            }
            "ingestexternalfile"
            | "backup"
            | "restore"
            | "openandcompact"
            | "replay"
            | "verify"
            | "verifychecksum"
            | "verifyfilechecksums"
            | "stats_history"
            | "block_cache_entry_stats"
            | "cache_report_problems"
            | "memstats"
            | "resetstats"
            | "heapprofile" => Plan::Skip("a RocksDB-specific facility"),
            _ => Plan::Unknown,
        }
    }

    fn run_entry(&mut self, entry: &str) -> Result<()> {
        let mut name = entry.to_string();
        let mut repeat = 1usize;
        let mut warmup = 0usize;
        let bad = || {
            BenchError::flag(
                "benchmarks",
                format!("unknown benchmark arguments '{entry}'"),
            )
        };
        if name.ends_with(']') {
            let Some(open) = name.find('[') else {
                eprintln!("unknown benchmark arguments '{name}'");
                return Err(bad());
            };
            let args = name[open + 1..name.len() - 1].to_string();
            name.truncate(open);
            for a in args.split('-').filter(|a| !a.is_empty()) {
                if let Some(n) = a.strip_prefix('X') {
                    repeat = n.parse().map_err(|_| bad())?;
                } else if let Some(n) = a.strip_prefix('W') {
                    warmup = n.parse().map_err(|_| bad())?;
                }
            }
        }
        if name.is_empty() {
            return Ok(());
        }
        match Self::plan(&name) {
            Plan::Unknown => Err(BenchError::flag(
                "benchmarks",
                format!("unknown benchmark '{name}'"),
            )),
            Plan::Skip(why) => {
                print_out(&format!(
                    "Skipped benchmark {name}: not supported by db_bench_port: {why}\n"
                ));
                self.skipped.push(json!({"name": name, "reason": why}));
                Ok(())
            }
            Plan::Main(f) => f(self, &name),
            Plan::Threads { method, fresh_db } => {
                if fresh_db {
                    if self.cfg.use_existing_db {
                        print_out(&format!(
                            "{name:<12} : skipped (--use_existing_db is true)\n"
                        ));
                        return Ok(());
                    }
                    self.destroy()?;
                    self.open()?;
                }
                if let Some(why) = crate::engines::capability_skip::unsupported(self.db()?, &name) {
                    print_out(&format!("Skipped benchmark {name}: {why}\n"));
                    self.skipped.push(json!({"name": name, "reason": why}));
                    return Ok(());
                }
                self.pre_messages(&name);
                print_out(&format!("DB path: [{}]\n", self.cfg.db.display()));
                if warmup > 0 {
                    print_out(&format!("Warming up benchmark by running {warmup} times\n"));
                }
                for _ in 0..warmup {
                    self.run_benchmark(&name, method, true)?;
                }
                if repeat > 1 {
                    print_out(&format!("Running benchmark for {repeat} times\n"));
                }
                let mut combined = CombinedStats::default();
                for _ in 0..repeat {
                    let s = self.run_benchmark(&name, method, false)?;
                    combined.add(&s);
                    if let Some(line) = combined.report(&name, self.cfg.confidence_interval_only) {
                        print_out(&line);
                    }
                }
                if repeat > 1 {
                    if let Some(text) = combined.report_final(&name) {
                        print_out(&text);
                    }
                }
                Ok(())
            }
        }
    }

    fn pre_messages(&self, name: &str) {
        let c = &self.cfg;
        match name {
            "multiscan" => {
                eprintln!("multiscan_stride = {}", c.multiscan_stride);
                eprintln!("multiscan_size = {}", c.multiscan_size);
                eprintln!("seek_nexts = {}", c.seek_nexts);
                eprintln!(
                    "multiscan_max_prefetch_size = {}",
                    c.multiscan_max_prefetch_size
                );
                eprintln!("multiscan_use_async_io = {}", c.multiscan_use_async_io);
                eprintln!("reverse_iterator = {}", c.reverse_iterator);
            }
            "multiscanrandom" => {
                let max_range_keys =
                    ((1i64 << 20) / (c.key_size + c.value_size).max(1) as i64).max(1);
                eprintln!("multiscanrandom: batch_size=1..64, max_range_keys={max_range_keys}");
                eprintln!(
                    "multiscan_max_prefetch_size = {}",
                    c.multiscan_max_prefetch_size
                );
                eprintln!("multiscan_use_async_io = {}", c.multiscan_use_async_io);
                eprintln!("use_multiscan = {}", c.use_multiscan);
                eprintln!("reverse_iterator = {}", c.reverse_iterator);
            }
            "multireadrandom" | "multireadwhilewriting" => {
                eprintln!("entries_per_batch = {}", c.batch_size)
            }
            "readrandom" if c.multiread_stride != 0 => {
                eprintln!("entries_per_batch = {}", c.batch_size)
            }
            _ => {}
        }
    }

    fn db(&self) -> Result<&dyn Db> {
        self.db
            .as_deref()
            .ok_or_else(|| BenchError::Invariant("internal error: no database is open".into()))
    }

    fn run_benchmark(&mut self, name: &str, method: Method, warmup: bool) -> Result<Summary> {
        let (params, n) = self.params(name);
        let first_seed = self.seed_base.wrapping_add(self.total_thread_count + 1);
        let db = self.db()?;
        let scfg = StatsConfig {
            histogram: self.cfg.histogram,
            progress_reports: self.cfg.progress_reports,
            stats_interval: self.cfg.stats_interval,
            stats_interval_seconds: self.cfg.stats_interval_seconds,
            slow_usecs: self.cfg.slow_usecs,
        };
        let shared = Shared::with_limits(
            n,
            self.cfg.flags.u64("benchmark_write_rate_limit"),
            self.cfg.flags.u64("benchmark_read_rate_limit"),
        );
        let barrier = Barrier::new(n + 1);
        let stop = StopSignal::default();
        let timeline_on = self.cfg.timeline || name == "ycsb_e";
        let report = (self.cfg.report_interval_seconds > 0).then_some((
            self.cfg.report_file.as_str(),
            self.cfg.report_interval_seconds,
        ));
        let injections = &self.cfg.injections;
        let perf_level = self.cfg.perf_level as i32;
        let read_before = storage_read_bytes();
        let (stats, timeline, injected, panicked) = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (shared, barrier, params) = (&shared, &barrier, &params);
                    s.spawn(move || {
                        let mut ts = ThreadState {
                            tid: i,
                            rand: crate::random::Random64::new(first_seed.wrapping_add(i as u64)),
                            stats: Stats::new(scfg, i),
                            shared,
                        };
                        barrier.wait();
                        // db_bench's ThreadBody: SetPerfLevel before the
                        // timer starts, PERF_CONTEXT added before it stops.
                        let perf = perf_level > 1 && db.start_perf_context(perf_level);
                        ts.stats.start();
                        if let Err(e) = method(params, db, &mut ts) {
                            shared.fail(e);
                        }
                        if let Some(text) = perf.then(|| db.perf_context()).flatten() {
                            ts.stats.add_message(&format!("PERF_CONTEXT:\n{text}"));
                        }
                        ts.stats.stop();
                        shared.num_done.fetch_add(1, Ordering::Release);
                        ts.stats
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            let (shared, stop) = (&shared, &stop);
            let reporter = (timeline_on || report.is_some())
                .then(|| s.spawn(move || run_reporter(shared, stop, start, timeline_on, report)));
            let injector = (!injections.is_empty())
                .then(|| s.spawn(move || run_injector(db, shared, stop, start, injections)));
            let mut stats = Vec::with_capacity(n);
            let mut panicked = false;
            for h in handles {
                match h.join() {
                    Ok(st) => stats.push(st),
                    Err(_) => panicked = true,
                }
            }
            let ended_secs = start.elapsed().as_secs_f64();
            stop.stop();
            let timeline = reporter.and_then(|h| h.join().ok()).unwrap_or_default();
            let injected = injector.and_then(|h| h.join().ok()).unwrap_or_default();
            (stats, timeline, (injected, ended_secs), panicked)
        });
        let (injected, ended_secs) = injected;
        let device_read_bytes = read_before
            .zip(storage_read_bytes())
            .map(|(a, b)| b.saturating_sub(a));
        self.total_thread_count += n as u64;
        if panicked {
            let e = BenchError::Invariant("a benchmark thread panicked".into());
            return Err(during(name, e));
        }
        if let Some(e) = shared.fatal.lock().ok().and_then(|mut f| f.take()) {
            eprintln!("{e}");
            return Err(during(name, e));
        }
        let merged = Stats::merge_all(&stats)
            .ok_or_else(|| BenchError::Invariant(format!("no thread statistics for {name}")))?;
        let summary = merged.summary(name);
        crate::stats::end_progress_line();
        print_out(&summary.report_text());
        if let Some(e) = &timeline.report_error {
            eprintln!("{e}");
        }
        if timeline_on {
            print_out(&timeline_text(name, &timeline));
        }
        if self.cfg.device_reads {
            print_out(&device_reads_line(
                name,
                device_read_bytes,
                summary.operations,
            ));
        }
        let mut failed = None;
        for inj in &injected {
            if !inj.ran {
                print_out(&format!(
                    "inject {} at {:.3} s: not run (the benchmark ended first)\n",
                    inj.what.name(),
                    inj.at_secs
                ));
                continue;
            }
            let status = inj
                .error
                .as_ref()
                .map_or_else(|| "OK".to_string(), ToString::to_string);
            // Operations stop when the benchmark does: a call that outlasts
            // it is rated over the time both ran, not its whole duration.
            let overlap = inj.took_secs.min(ended_secs - inj.started_secs).max(0.0);
            let rate = if overlap > 0.0 {
                inj.ops_during as f64 / overlap
            } else {
                0.0
            };
            print_out(&format!(
                "inject {} at {:.3} s: started {:.3} s, took {:.3} ms, status {status}, {} ops during it ({rate:.0} ops/sec)\n",
                inj.what.name(),
                inj.at_secs,
                inj.started_secs,
                inj.took_secs * 1e3,
                inj.ops_during
            ));
            if let Some(e) = &inj.error {
                failed.get_or_insert_with(|| {
                    BenchError::engine(format!("{} failed", inj.what.name()), e.clone())
                });
            }
        }
        self.record(&summary, n, warmup, &timeline, &injected, device_read_bytes);
        if let Some(e) = failed {
            eprintln!("{e}");
            return Err(during(name, e));
        }
        Ok(summary)
    }

    fn record(
        &mut self,
        s: &Summary,
        threads: usize,
        warmup: bool,
        timeline: &Timeline,
        injected: &[Injection],
        device_read_bytes: Option<u64>,
    ) {
        let mut hists = Map::new();
        for (op, h) in &s.histograms {
            hists.insert(op.label().to_string(), hist_json(h));
        }
        self.results.push(json!({
            "name": s.name,
            "warmup": warmup,
            "threads": threads,
            "micros_per_op": s.micros_per_op,
            "ops_per_sec": s.ops_per_sec,
            "seconds": s.elapsed_seconds,
            "operations": s.operations,
            "bytes": s.bytes,
            "device_read_bytes": device_read_bytes,
            "mb_per_sec": s.mb_per_sec,
            "message": s.message.trim_end(),
            "result_line": s.report_text().lines().next().unwrap_or(""),
            "histograms": hists,
            "timeline": timeline.per_second.iter().map(|(t, o)| json!([t, o])).collect::<Vec<_>>(),
            "injections": injected.iter().map(|i| json!({
                "call": i.what.name(), "at_secs": i.at_secs, "started_secs": i.started_secs,
                "took_secs": i.took_secs, "ops_during": i.ops_during,
                "error": i.error.as_ref().map(ToString::to_string), "ran": i.ran,
            })).collect::<Vec<_>>(),
        }));
    }

    fn not_supported_or_fatal(&mut self, name: &str, e: Error, what: &str) -> Result<()> {
        if let Error::NotSupported(m) = &e {
            // Not `name : ...`: RocksDB's scripts take any line that
            // starts with the benchmark's name for its result.
            print_out(&format!("Skipped benchmark {name}: {m}\n"));
            self.skipped.push(json!({"name": name, "reason": m}));
            Ok(())
        } else {
            let e = BenchError::engine(format!("{what} failed"), e);
            eprintln!("{e}");
            Err(e)
        }
    }

    fn print_property(&mut self, suffix: &str) -> Result<()> {
        let db = self.db()?;
        let mut text = db
            .property(&format!("{}.{suffix}", db.name()))
            .or_else(|| db.property(&format!("rocksdb.{suffix}")))
            .unwrap_or_else(|| "(failed)".to_string());
        if suffix == "stats" {
            text = dbstats::for_benchmark_sh(&text);
        }
        print_out(&format!("\n{text}\n"));
        self.maintenance
            .push(json!({"name": suffix, "output": text}));
        Ok(())
    }

    /// `stats`: RocksDB's own `rocksdb.stats`, or for other engines the
    /// same block filled from the engine's figures, then its own text.
    fn print_stats(&mut self) -> Result<()> {
        let Some(c) = self.counters.clone() else {
            return self.print_property("stats");
        };
        let db = self.db()?;
        let cur = Figures::collect(&c, db, self.opened_at.elapsed().as_secs_f64());
        let mut text = dbstats::stats_block(&cur, &self.last_figures);
        let own = db
            .property(&format!("{}.stats", db.name()))
            .or_else(|| db.statistics())
            .unwrap_or_else(|| "(failed)".to_string());
        text.push_str(&format!("\n** {} stats **\n{own}", db.name()));
        self.last_figures = cur;
        print_out(&format!("\n{text}\n"));
        self.maintenance
            .push(json!({"name": "stats", "output": text}));
        Ok(())
    }

    fn flush(&mut self, name: &str) -> Result<()> {
        let t0 = Instant::now();
        match self.db()?.flush() {
            Ok(()) => {
                print_out("flush memtable\n");
                self.maintenance
                    .push(json!({"name": name, "seconds": t0.elapsed().as_secs_f64()}));
                Ok(())
            }
            Err(e) => self.not_supported_or_fatal(name, e, "Flush"),
        }
    }

    /// compact: db_bench runs CompactRange as a one-op benchmark with a
    /// result line; an engine without compaction prints a skip line.
    fn compact(&mut self, name: &str) -> Result<()> {
        print_out(&format!("DB path: [{}]\n", self.cfg.db.display()));
        let t0 = Instant::now();
        match self.db()?.compact_range(None, None) {
            Ok(()) => {
                let secs = t0.elapsed().as_secs_f64();
                let s = Summary {
                    name: name.to_string(),
                    micros_per_op: secs * 1e6,
                    ops_per_sec: 1.0 / secs,
                    elapsed_seconds: secs,
                    operations: 1,
                    bytes: 0,
                    mb_per_sec: None,
                    message: String::new(),
                    histograms: Vec::new(),
                };
                print_out(&s.report_text());
                self.record(&s, 1, false, &Timeline::default(), &[], None);
                Ok(())
            }
            Err(e) => self.not_supported_or_fatal(name, e, "CompactRange"),
        }
    }

    fn compact_all(&mut self, name: &str) -> Result<()> {
        let t0 = Instant::now();
        match self.db()?.compact_range(None, None) {
            Ok(()) => {
                self.maintenance
                    .push(json!({"name": name, "seconds": t0.elapsed().as_secs_f64()}));
                Ok(())
            }
            Err(e) => self.not_supported_or_fatal(name, e, "CompactRange"),
        }
    }

    fn wait_for_compaction(&mut self, name: &str) -> Result<()> {
        if self.cfg.engine.is_rocksdb() {
            // As db_bench: give background threads a chance to wake.
            std::thread::sleep(std::time::Duration::from_secs(5));
        }
        let path = self.cfg.db.display().to_string();
        print_out(&format!("waitforcompaction({path}): started\n"));
        let t0 = Instant::now();
        let r = self.db()?.wait_for_background_work();
        let status = match &r {
            Ok(()) => "OK".to_string(),
            Err(e) => e.to_string(),
        };
        print_out(&format!(
            "waitforcompaction({path}): finished with status ({status})\n"
        ));
        self.maintenance
            .push(json!({"name": name, "seconds": t0.elapsed().as_secs_f64(), "status": status}));
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.not_supported_or_fatal(name, e, "WaitForCompact"),
        }
    }

    fn write_json(&self, error: Option<&str>) {
        let Some(path) = &self.cfg.json else {
            return;
        };
        let c = &self.cfg;
        let mut flags = Map::new();
        for (k, v) in c.flags.explicit() {
            flags.insert(k.to_string(), Value::String(v.to_string()));
        }
        let doc = json!({
            "tool": "db_bench_port",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "engine": c.engine.name(),
            "engine_version": self.engine_version,
            "date": self.started,
            "db": c.db.display().to_string(),
            "seed_base": self.seed_base,
            "settings": {
                "benchmarks": c.benchmarks, "num": c.num, "reads": c.reads, "writes": c.writes,
                "deletes": c.deletes, "threads": c.threads, "duration": c.duration,
                "key_size": c.key_size, "value_size": c.value_size,
                "value_size_distribution": format!("{:?}", c.value_dist),
                "compression_ratio": c.compression_ratio, "batch_size": c.batch_size,
                "use_existing_db": c.use_existing_db, "sync": c.sync, "disable_wal": c.disable_wal,
                "histogram": c.histogram, "statistics": c.statistics,
                "readwritepercent": c.readwritepercent, "seek_nexts": c.seek_nexts,
                "multiscan_size": c.multiscan_size, "multiscan_stride": c.multiscan_stride,
                "multiscan_use_async_io": c.multiscan_use_async_io,
                "multiscan_coalesce_threshold": c.multiscan_coalesce_threshold,
                "zipf_alpha": c.zipf_alpha,
                "injections": c.injections.iter().map(|(t, m)| json!([t, m.name()])).collect::<Vec<_>>(),
                "engine_options": c.extra,
                "explicit_flags": flags,
                "warnings": c.warnings,
            },
            "results": self.results,
            "skipped": self.skipped,
            "maintenance": self.maintenance,
            "open_seconds": self.open_seconds,
            "statistics": if c.statistics { self.db.as_ref().and_then(|d| d.statistics()) } else { None },
            "error": error,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("cannot write --json file {}: {e}", path.display());
        }
    }
}

/// `e`, which ended benchmark `name`.
fn during(name: &str, e: BenchError) -> BenchError {
    BenchError::Benchmark {
        name: name.to_string(),
        source: Box::new(e),
    }
}

fn timeline_text(name: &str, t: &Timeline) -> String {
    let mut s = format!("Per-second timeline for {name} (secs_elapsed,interval_qps):\n");
    for (sec, ops) in &t.per_second {
        s.push_str(&format!("{sec},{ops}\n"));
    }
    s
}
