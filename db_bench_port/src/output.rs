//! The header db_bench prints before the benchmarks, and time formatting.

use std::fmt::Write as _;

use crate::config::{Config, EngineChoice};
use vmemkv_compat::EngineKind;

/// Seconds since the Unix epoch.
pub fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Microseconds since the Unix epoch (db_bench's clock for `--seed=0`).
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn local_tm(secs: i64) -> Option<libc::tm> {
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to live, properly aligned locals.
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    (!r.is_null()).then_some(tm)
}

/// RocksDB's `SystemClock::TimeToString`: `YYYY/MM/DD-HH:MM:SS` local time.
pub fn time_to_string(secs: i64) -> String {
    match local_tm(secs) {
        Some(tm) => format!(
            "{:04}/{:02}/{:02}-{:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        ),
        None => secs.to_string(),
    }
}

/// `ctime(3)` text, e.g. `Tue Nov 11 13:26:29 2025` (no newline).
pub fn ctime(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    match local_tm(secs) {
        Some(tm) => format!(
            "{} {} {:2} {:02}:{:02}:{:02} {}",
            DAYS[tm.tm_wday.clamp(0, 6) as usize],
            MONTHS[tm.tm_mon.clamp(0, 11) as usize],
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec,
            tm.tm_year + 1900
        ),
        None => secs.to_string(),
    }
}

/// CPU count, model and cache size from `/proc/cpuinfo`, as db_bench reads them.
pub fn cpu_info() -> Option<(usize, String, String)> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut n = 0;
    let mut model = String::new();
    let mut cache = String::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "model name" => {
                n += 1;
                model = v.trim().to_string();
            }
            "cache size" => cache = v.trim().to_string(),
            _ => {}
        }
    }
    Some((n, model, cache))
}

/// The label that replaces `RocksDB:` in the version line.
pub fn engine_label(engine: EngineChoice) -> &'static str {
    match engine {
        EngineChoice::Compat(EngineKind::Vmemkv) => "vmemkv",
        EngineChoice::Compat(EngineKind::RocksDb) => "RocksDB",
        EngineChoice::Compat(EngineKind::BlobDb) => "RocksDB-BlobDB",
        EngineChoice::Compat(EngineKind::Lmdb) => "LMDB",
        EngineChoice::Compat(EngineKind::Fjall) => "fjall",
        EngineChoice::Compat(EngineKind::FjallBlob) => "fjall-blob",
        EngineChoice::Compat(EngineKind::Sparkey) => "Sparkey",
        EngineChoice::Compat(EngineKind::Null) => "null",
        EngineChoice::HarnessTest => "harness_test",
    }
}

/// The stderr part of the header: engine and version, Date, CPU, CPUCache.
///
/// The first line keeps db_bench's `RocksDB:    version X` shape (parsers
/// take the third field for the version) with the engine's version as X;
/// the engine and the port's git revision are named after it.
pub fn environment_text(engine: EngineChoice, version: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "RocksDB:    version {version} (engine {}; db_bench_port {})",
        engine_label(engine),
        crate::dbstats::GIT_SHA
    );
    let _ = writeln!(s, "Date:       {}", ctime(unix_secs()));
    if let Some((n, model, cache)) = cpu_info() {
        let _ = writeln!(s, "CPU:        {n} * {model}");
        let _ = writeln!(s, "CPUCache:   {cache}");
    }
    s
}

/// The stdout part of the header, up to and including the dashed line.
pub fn header_text(cfg: &Config, num: i64, keys_per_prefix: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
        cfg.key_size
    );
    let avg_value = match cfg.value_dist {
        crate::keys::ValueSizeDist::Fixed(v) => {
            let _ = writeln!(
                s,
                "Values:     {} bytes each ({} bytes after compression)",
                v,
                (v as f64 * cfg.compression_ratio + 0.5) as i64
            );
            v
        }
        crate::keys::ValueSizeDist::Uniform(lo, hi)
        | crate::keys::ValueSizeDist::Normal(lo, hi) => {
            let avg = (lo + hi) / 2;
            let _ = writeln!(
                s,
                "Values:     {} avg bytes each ({} bytes after compression)",
                avg,
                (avg as f64 * cfg.compression_ratio + 0.5) as i64
            );
            let _ = writeln!(
                s,
                "Values Distribution: {} (min: {lo}, max: {hi})",
                cfg.flags.str("value_size_distribution_type")
            );
            avg
        }
    };
    let _ = writeln!(s, "Entries:    {num}");
    let _ = writeln!(s, "Prefix:    {} bytes", cfg.prefix_size);
    let _ = writeln!(s, "Keys per prefix:    {keys_per_prefix}");
    let _ = writeln!(
        s,
        "RawSize:    {:.1} MB (estimated)",
        ((cfg.key_size + avg_value) as i64 * num) as f64 / 1_048_576.0
    );
    let _ = writeln!(
        s,
        "FileSize:   {:.1} MB (estimated)",
        ((cfg.key_size as f64 + avg_value as f64 * cfg.compression_ratio) * num as f64)
            / 1_048_576.0
    );
    let _ = writeln!(
        s,
        "Write rate: {} bytes/second",
        cfg.flags.u64("benchmark_write_rate_limit")
    );
    let _ = writeln!(
        s,
        "Read rate: {} ops/second",
        cfg.flags.u64("benchmark_read_rate_limit")
    );
    let compression = if cfg.engine.is_rocksdb() {
        compression_name(&cfg.flags.str("compression_type"))
    } else {
        "NoCompression".to_string()
    };
    let _ = writeln!(s, "Compression: {compression}");
    let _ = writeln!(
        s,
        "Compression sampling rate: {}",
        cfg.flags.i64("sample_for_compression")
    );
    let memtable = if cfg.engine.is_rocksdb() {
        "SkipListFactory"
    } else {
        "none (not an LSM engine)"
    };
    let _ = writeln!(s, "Memtablerep: {memtable}");
    let _ = writeln!(s, "Perf Level: {}", cfg.perf_level);
    if cfg!(debug_assertions) {
        s.push_str("WARNING: Assertions are enabled; benchmarks unnecessarily slow\n");
    }
    s.push_str("------------------------------------------------\n");
    s
}

/// RocksDB's `CompressionTypeToString` for the `--compression_type` names.
pub fn compression_name(flag: &str) -> String {
    match flag.to_ascii_lowercase().as_str() {
        "none" => "NoCompression",
        "snappy" => "Snappy",
        "zlib" => "Zlib",
        "bzip2" => "BZip2",
        "lz4" => "LZ4",
        "lz4hc" => "LZ4HC",
        "xpress" => "Xpress",
        "zstd" => "ZSTD",
        other => return other.to_string(),
    }
    .to_string()
}
