//! Typed settings built once from the parsed flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use vmemkv_compat::EngineKind;

use crate::error::{BenchError, Result};
use crate::families::CfConfig;
use crate::flags::{classify, is_forwarded_to_rocksdb, FlagClass, Flags};
use crate::keys::ValueSizeDist;

/// Which engine a run talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// An engine behind `vmemkv_compat::open`.
    Compat(EngineKind),
    /// The in-process map used only to measure harness overhead.
    HarnessTest,
}

impl EngineChoice {
    /// Parses `--engine` (or `DB_BENCH_ENGINE`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "harness_test" | "harness-test" => Ok(EngineChoice::HarnessTest),
            other => other
                .parse::<EngineKind>()
                .map(EngineChoice::Compat)
                .map_err(|e| BenchError::flag("engine", e.to_string())),
        }
    }

    /// The engine's name as the user spells it.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Compat(k) => k.as_str(),
            EngineChoice::HarnessTest => "harness_test",
        }
    }

    /// Whether RocksDB tuning flags apply.
    pub fn is_rocksdb(self) -> bool {
        matches!(
            self,
            EngineChoice::Compat(EngineKind::RocksDb) | EngineChoice::Compat(EngineKind::BlobDb)
        )
    }
}

/// Maintenance calls injected during a benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// `Db::checkpoint`.
    Checkpoint,
    /// `Db::defragment`.
    Defragment,
    /// `Db::reorganize`.
    Reorganize,
    /// `Db::flush` (RocksDB's memtable flush: its counterpart of a checkpoint).
    Flush,
    /// `Db::compact_range` over the whole key space (RocksDB's counterpart of
    /// defragment and reorganize together).
    Compact,
}

impl Maintenance {
    /// The call's name.
    pub fn name(self) -> &'static str {
        match self {
            Maintenance::Checkpoint => "checkpoint",
            Maintenance::Defragment => "defragment",
            Maintenance::Reorganize => "reorganize",
            Maintenance::Flush => "flush",
            Maintenance::Compact => "compact_range",
        }
    }
}

/// Every setting a run needs, typed.
#[derive(Debug, Clone)]
pub struct Config {
    /// The parsed flags (for JSON and for anything not typed here).
    pub flags: Flags,
    /// Engine.
    pub engine: EngineChoice,
    /// `--benchmarks`, split.
    pub benchmarks: Vec<String>,
    /// `--num`.
    pub num: i64,
    /// `--reads`.
    pub reads: i64,
    /// `--writes`.
    pub writes: i64,
    /// `--deletes`.
    pub deletes: i64,
    /// `--threads`.
    pub threads: usize,
    /// `--duration` seconds (0: op counts decide).
    pub duration: u64,
    /// `--key_size`.
    pub key_size: usize,
    /// `--value_size`.
    pub value_size: usize,
    /// Value size distribution.
    pub value_dist: ValueSizeDist,
    /// `--compression_ratio`.
    pub compression_ratio: f64,
    /// `--same_value_percentage`.
    pub same_value_percentage: i32,
    /// `--batch_size`.
    pub batch_size: i64,
    /// `--seed` (0 = derive from the clock).
    pub seed: u64,
    /// `--db`.
    pub db: PathBuf,
    /// `--use_existing_db` (or `--readonly`).
    pub use_existing_db: bool,
    /// `--sync`.
    pub sync: bool,
    /// `--disable_wal`.
    pub disable_wal: bool,
    /// `--histogram`.
    pub histogram: bool,
    /// `--statistics`.
    pub statistics: bool,
    /// `--report_file`.
    pub report_file: String,
    /// `--report_interval_seconds`.
    pub report_interval_seconds: u64,
    /// `--stats_interval` (ops).
    pub stats_interval: u64,
    /// `--stats_interval_seconds`.
    pub stats_interval_seconds: u64,
    /// `--progress_reports`.
    pub progress_reports: bool,
    /// `--slow_usecs`.
    pub slow_usecs: u64,
    /// `--ops_between_duration_checks`.
    pub ops_between_duration_checks: i64,
    /// `--readwritepercent`.
    pub readwritepercent: i32,
    /// `--seek_nexts`.
    pub seek_nexts: i64,
    /// `--seek_nexts_to_delete`.
    pub seek_nexts_to_delete: i64,
    /// `--reverse_iterator`.
    pub reverse_iterator: bool,
    /// `--max_scan_distance`.
    pub max_scan_distance: i64,
    /// `--multiscan_size`.
    pub multiscan_size: i64,
    /// `--multiscan_stride`.
    pub multiscan_stride: i64,
    /// `--multiscan_use_async_io`.
    pub multiscan_use_async_io: bool,
    /// `--multiscan_coalesce_threshold`.
    pub multiscan_coalesce_threshold: u64,
    /// `--multiscan_max_prefetch_size`.
    pub multiscan_max_prefetch_size: u64,
    /// `--use_multiscan` (multiscanrandom).
    pub use_multiscan: bool,
    /// `--prefix_size`.
    pub prefix_size: usize,
    /// `--keys_per_prefix`.
    pub keys_per_prefix: u64,
    /// `--verify_checksum`.
    pub verify_checksum: bool,
    /// `--readahead_size`.
    pub readahead_size: usize,
    /// `--async_io`.
    pub async_io: bool,
    /// `--multiread_stride`.
    pub multiread_stride: i64,
    /// `--read_random_exp_range`.
    pub read_random_exp_range: f64,
    /// `--finish_after_writes`.
    pub finish_after_writes: bool,
    /// `--bgwriter_num`.
    pub bgwriter_num: i64,
    /// `--perf_level` (printed only).
    pub perf_level: i64,
    /// `--confidence_interval_only`.
    pub confidence_interval_only: bool,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--zipf_alpha`.
    pub zipf_alpha: f64,
    /// `--timeline`.
    pub timeline: bool,
    /// `--device_reads`.
    pub device_reads: bool,
    /// Injected maintenance calls: (second, call), sorted.
    pub injections: Vec<(f64, Maintenance)>,
    /// `EngineOptions::extra` for the chosen engine.
    pub extra: BTreeMap<String, String>,
    /// One line per explicitly set flag that cannot be honoured.
    pub warnings: Vec<String>,
    /// `--num_column_families` and its companions; `None` for one family.
    pub families: Option<CfConfig>,
}

fn parse_secs(flag: &str, v: &str) -> Result<Vec<f64>> {
    v.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| BenchError::flag(flag, format!("ERROR: illegal value '{v}' specified for string flag '{flag}' (expected comma-separated seconds)")))
        })
        .collect()
}

/// Largest `--value_size` (and `_min`/`_max`) accepted before the engine's
/// own limit is known: every engine's value length fits in 32 bits.
pub const MAX_VALUE_SIZE_FLAG: i64 = u32::MAX as i64;

/// A value-size flag: negative or beyond [`MAX_VALUE_SIZE_FLAG`] is an error
/// naming the flag, where db_bench would wrap or allocate without bound.
fn size_flag(flags: &Flags, name: &str) -> Result<usize> {
    let v = flags.i64(name);
    if !(0..=MAX_VALUE_SIZE_FLAG).contains(&v) {
        return Err(BenchError::flag(
            name,
            format!(
                "ERROR: --{name}={v} is out of range: sizes are 0 to {MAX_VALUE_SIZE_FLAG} bytes"
            ),
        ));
    }
    Ok(v as usize)
}

impl Config {
    /// Builds the typed settings; `env_engine` is `DB_BENCH_ENGINE`.
    pub fn from_flags(flags: Flags, env_engine: Option<&str>) -> Result<Config> {
        let engine_text = if flags.is_set("engine") {
            flags.str("engine")
        } else {
            env_engine
                .filter(|s| !s.trim().is_empty())
                .map_or_else(|| flags.str("engine"), str::to_string)
        };
        let engine = EngineChoice::parse(&engine_text)?;
        let size = |name: &str| size_flag(&flags, name);
        let value_size = size("value_size")?;
        let value_dist = match flags.str("value_size_distribution_type").as_str() {
            kind @ ("uniform" | "normal") => {
                let (lo, hi) = (size("value_size_min")?, size("value_size_max")?);
                if lo > hi {
                    return Err(BenchError::flag(
                        "value_size_min",
                        format!(
                            "ERROR: --value_size_min ({lo}) is larger than --value_size_max ({hi})"
                        ),
                    ));
                }
                if kind == "uniform" {
                    ValueSizeDist::Uniform(lo, hi)
                } else {
                    ValueSizeDist::Normal(lo, hi)
                }
            }
            _ => ValueSizeDist::Fixed(value_size),
        };
        let mut db = flags.str("db");
        if db.is_empty() {
            let base = std::env::var("TEST_TMPDIR")
                .ok()
                .filter(|s| !s.is_empty())
                // SAFETY: geteuid has no preconditions and cannot fail.
                .unwrap_or_else(|| format!("/tmp/rocksdbtest-{}", unsafe { libc::geteuid() }));
            db = format!("{base}/dbbench");
        }
        let threads = flags.i64("threads");
        if threads < 1 {
            return Err(BenchError::flag(
                "threads",
                format!("ERROR: --threads must be at least 1 (got {threads})"),
            ));
        }
        let key_size = flags.i64("key_size");
        if key_size < 1 {
            return Err(BenchError::flag(
                "key_size",
                format!("ERROR: --key_size must be at least 1 (got {key_size})"),
            ));
        }
        size_flag(&flags, "key_size")?;
        let mut injections = Vec::new();
        for (flag, what) in [
            ("inject_checkpoint_at", Maintenance::Checkpoint),
            ("inject_defragment_at", Maintenance::Defragment),
            ("inject_reorganize_at", Maintenance::Reorganize),
            ("inject_flush_at", Maintenance::Flush),
            ("inject_compact_at", Maintenance::Compact),
        ] {
            for s in parse_secs(flag, &flags.str(flag))? {
                injections.push((s, what));
            }
        }
        injections.sort_by(|a, b| a.0.total_cmp(&b.0));

        let (extra, mut warnings) = engine_extra(&flags, engine)?;
        let benchmarks: Vec<String> = flags
            .str("benchmarks")
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        if flags.bool("reverse_iterator") && benchmarks.iter().any(|b| b.starts_with("multiscan")) {
            warnings.push(
                "--reverse_iterator cannot be honoured for multiscan: the Db trait's MultiScanArgs has no reverse scans"
                    .to_string(),
            );
        }
        let families = CfConfig::from_flags(&flags)?;
        let json = Some(flags.str("json"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        Ok(Config {
            engine,
            benchmarks,
            num: flags.i64("num"),
            reads: flags.i64("reads"),
            writes: flags.i64("writes"),
            deletes: flags.i64("deletes"),
            threads: threads as usize,
            duration: flags.i64("duration").max(0) as u64,
            key_size: key_size as usize,
            value_size,
            value_dist,
            compression_ratio: flags.f64("compression_ratio"),
            same_value_percentage: flags.i64("same_value_percentage") as i32,
            batch_size: flags.i64("batch_size").max(1),
            seed: flags.i64("seed") as u64,
            db: PathBuf::from(db),
            use_existing_db: flags.bool("use_existing_db") || flags.bool("readonly"),
            sync: flags.bool("sync"),
            disable_wal: flags.bool("disable_wal"),
            histogram: flags.bool("histogram"),
            statistics: flags.bool("statistics"),
            report_file: flags.str("report_file"),
            report_interval_seconds: flags.i64("report_interval_seconds").max(0) as u64,
            stats_interval: if flags.i64("stats_interval_seconds") > 0 {
                1000
            } else {
                flags.i64("stats_interval").max(0) as u64
            },
            stats_interval_seconds: flags.i64("stats_interval_seconds").max(0) as u64,
            progress_reports: flags.bool("progress_reports"),
            slow_usecs: flags.u64("slow_usecs"),
            ops_between_duration_checks: flags.i64("ops_between_duration_checks").max(1),
            readwritepercent: flags.i64("readwritepercent") as i32,
            seek_nexts: flags.i64("seek_nexts"),
            seek_nexts_to_delete: flags.i64("seek_nexts_to_delete"),
            reverse_iterator: flags.bool("reverse_iterator"),
            max_scan_distance: flags.i64("max_scan_distance"),
            multiscan_size: flags.i64("multiscan_size"),
            multiscan_stride: flags.i64("multiscan_stride"),
            multiscan_use_async_io: flags.bool("multiscan_use_async_io"),
            multiscan_coalesce_threshold: flags.u64("multiscan_coalesce_threshold"),
            multiscan_max_prefetch_size: flags.u64("multiscan_max_prefetch_size"),
            use_multiscan: flags.bool("use_multiscan"),
            prefix_size: flags.i64("prefix_size").max(0) as usize,
            keys_per_prefix: flags.i64("keys_per_prefix").max(0) as u64,
            verify_checksum: flags.bool("verify_checksum"),
            readahead_size: flags.i64("readahead_size").max(0) as usize,
            async_io: flags.bool("async_io"),
            multiread_stride: flags.i64("multiread_stride"),
            read_random_exp_range: flags.f64("read_random_exp_range"),
            finish_after_writes: flags.bool("finish_after_writes"),
            bgwriter_num: flags.i64("bgwriter_num"),
            perf_level: flags.i64("perf_level"),
            confidence_interval_only: flags.bool("confidence_interval_only"),
            json,
            zipf_alpha: flags.f64("zipf_alpha"),
            timeline: flags.bool("timeline"),
            device_reads: flags.bool("device_reads"),
            injections,
            extra,
            warnings,
            families,
            flags,
        })
    }
}

fn parse_kv_list(flag: &str, text: &str, out: &mut BTreeMap<String, String>) -> Result<()> {
    for item in text.split(',').filter(|s| !s.trim().is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(|| {
            BenchError::flag(flag, format!("ERROR: illegal value '{text}' specified for string flag '{flag}' (expected k=v,k2=v2)"))
        })?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(())
}

/// Routes explicitly set flags into `EngineOptions::extra` for the engine
/// and collects a warning for each one that cannot be honoured.
/// One warning for each flag RocksDB's scripts pass that the engine cannot
/// honour: a compression the engine does not do, a separate WAL directory
/// it has no WAL for, a perf context the Db trait does not expose.
pub fn unhonoured_flags(flags: &Flags, engine: EngineChoice) -> Vec<String> {
    let mut w = Vec::new();
    let explicit = |n: &str| {
        flags
            .explicit()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.to_string())
    };
    if !engine.is_rocksdb() {
        if let Some(v) = explicit("compression_type") {
            if !v.eq_ignore_ascii_case("none") {
                w.push(format!(
                    "--compression_type={v} cannot be honoured for engine {}: it does not compress; values are stored as written",
                    engine.name()
                ));
            }
        }
        if let Some(v) = explicit("wal_dir").filter(|v| !v.is_empty()) {
            let same = std::fs::canonicalize(&v)
                .ok()
                .is_some_and(|a| std::fs::canonicalize(flags.str("db")).ok() == Some(a))
                || v == flags.str("db");
            if !same {
                let why = match engine {
                    EngineChoice::Compat(EngineKind::Vmemkv) => {
                        "its log is its data (T2's segments), kept in --db"
                    }
                    EngineChoice::Compat(EngineKind::Lmdb) => "LMDB has no write-ahead log",
                    _ => "the engine has no separate write-ahead log",
                };
                w.push(format!(
                    "--wal_dir={v} cannot be honoured for engine {}: {why}; nothing is written there",
                    engine.name()
                ));
            }
        }
    }
    let perf = flags.i64("perf_level");
    // RocksDB keeps a per-thread perf context; the others do not.
    if perf > 1 && !engine.is_rocksdb() {
        w.push(format!(
            "--perf_level={perf} cannot be honoured for engine {}: the engine keeps no per-thread perf context, so no PERF_CONTEXT block is printed",
            engine.name()
        ));
    }
    w
}

fn engine_extra(
    flags: &Flags,
    engine: EngineChoice,
) -> Result<(BTreeMap<String, String>, Vec<String>)> {
    let mut extra = BTreeMap::new();
    let mut warnings = Vec::new();
    for (name, value) in flags.explicit() {
        match classify(name) {
            FlagClass::Generic => {
                // e.g. --statistics must also switch RocksDB's statistics on.
                if engine.is_rocksdb() && is_forwarded_to_rocksdb(name) {
                    extra.insert(name.to_string(), value.to_string());
                }
            }
            FlagClass::Port => match name {
                "vmemkv_bloom" | "vmemkv_inline" | "vmemkv_prefetch" | "vmemkv_prefault" => {
                    // The engine calls its page-prefetch ablation `prefault`.
                    let key = match name {
                        "vmemkv_bloom" => "bloom",
                        "vmemkv_inline" => "inline",
                        _ => "prefault",
                    };
                    if engine == EngineChoice::Compat(EngineKind::Vmemkv) {
                        extra.insert(key.to_string(), value.to_string());
                    } else {
                        warnings.push(format!(
                            "--{name} is a vmemkv option and has no effect on engine {}",
                            engine.name()
                        ));
                    }
                }
                "engine_options" => parse_kv_list(name, value, &mut extra)?,
                _ => {}
            },
            FlagClass::RocksDbTuning => {
                if engine.is_rocksdb() {
                    if is_forwarded_to_rocksdb(name) {
                        extra.insert(name.to_string(), value.to_string());
                    } else {
                        warnings.push(format!(
                            "--{name}={value} cannot be honoured for engine {}: the RocksDB adapter does not take this option",
                            engine.name()
                        ));
                    }
                }
                // For vmemkv, lmdb and harness_test a RocksDB tuning flag
                // has no meaning: accepted quietly (listed in --help).
            }
            FlagClass::Unsupported(why) => {
                if flags.differs_from_default(name) {
                    warnings.push(format!(
                        "--{name}={value} cannot be honoured for engine {}: {why}",
                        engine.name()
                    ));
                }
            }
        }
    }
    warnings.extend(unhonoured_flags(flags, engine));
    // RocksDB's switch for background compaction also stops vmemkv's
    // background key-order pass (its layout rewrite), so a script that
    // measures with it off (the MultiScan runs do) measures the same thing
    // on both. An explicit `order_idle_ms` engine option wins.
    if engine == EngineChoice::Compat(EngineKind::Vmemkv)
        && flags
            .explicit()
            .any(|(n, _)| n == "disable_auto_compactions")
        && flags.bool("disable_auto_compactions")
    {
        extra
            .entry("order_idle_ms".to_string())
            .or_insert_with(|| "0".to_string());
    }
    // RocksDB's direct-read switch picks where vmemkv's async MultiScan
    // reads values (O_DIRECT into its own buffers, or the page cache), so
    // `--use_direct_reads=1` compares direct reads with direct reads.
    if engine == EngineChoice::Compat(EngineKind::Vmemkv) {
        if let Some((_, v)) = flags.explicit().find(|(n, _)| *n == "use_direct_reads") {
            extra
                .entry("use_direct_reads".to_string())
                .or_insert_with(|| v.to_string());
        }
    }
    Ok((extra, warnings))
}
