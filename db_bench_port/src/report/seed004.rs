//! Seed 004's benchmark as db_bench lines: the HaloDB playground's
//! `FILL_SEQUENCE` of 1M keys, then `READ_RANDOM` of 20M reads on 8
//! threads, run on every engine in one run, interleaved, with medians.
//!
//! The seed is silent on sizes; its benchmark tool (`BenchmarkTool.java` of
//! koron/java-halodb-playground) writes 8-byte big-endian integer keys,
//! which is what db_bench's `--key_size=8` generates, and 1,024-byte
//! values. Its reads are uniform over the keys, as `readrandom`'s.
//!
//! Times, per engine and round:
//! * fill: `fillseq` plus a `flush` in the same process, so every engine
//!   has its data written out and readable (Sparkey builds its hash index
//!   there; RocksDB and fjall write their memtables);
//! * open: the engine's open of the filled database in the read process
//!   (`open_seconds` of db_bench's `--json` file), page cache warm, as the
//!   seed's READ_RANDOM ran right after its fill;
//! * reads/s: `readrandom` with `--threads=8`, 2.5M reads per thread.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::matrix::{Scale, Variant};
use super::runner;
use super::stats;

/// The scenario name `--scenarios=` selects this section by.
pub const SCENARIO: &str = "seed-004";

/// Read threads, as the seed.
pub const THREADS: usize = 8;

/// The seed's figures on its own machine: `(engine, reads/s, fill time)`.
pub const SEED: &[(&str, f64, &str)] = &[
    ("Sparkey", 4_000_000.0, "2-3 s"),
    ("LMDB", 1_666_666.0, "6 s"),
    ("HaloDB", 540_540.0, "15 s"),
];

/// The seed's LMDB reads/s, the yardstick its ratios are taken against.
const SEED_LMDB_READS: f64 = 1_666_666.0;

/// `(keys, reads per thread, rounds)` at a scale.
pub fn sizes(scale: Scale) -> (u64, u64, usize) {
    match scale {
        Scale::Smoke => (2_000, 2_000, 1),
        // 8 x 2.5M = the seed's 20M reads.
        Scale::Full => (1_000_000, 2_500_000, 3),
    }
}

/// The engines measured: the full vmemkv configuration and every rival.
pub fn variants(all: &[Variant]) -> Vec<Variant> {
    // Not the null engine: its reads find nothing, and its figures
    // would be read as a rival's beside the seed's.
    all.iter()
        .filter(|v| v.all_threads && v.engine != super::matrix::CEILING_ENGINE)
        .cloned()
        .collect()
}

/// Runs in this section, for the progress total (a fill and a read each).
pub fn run_count(scale: Scale, variants: &[Variant]) -> usize {
    sizes(scale).2 * variants.len() * 2
}

/// One engine's fill and reads in one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeedRun {
    /// Engine variant label.
    pub variant: String,
    /// `--engine=` value.
    pub engine: String,
    /// Whether the variant is vmemkv.
    pub is_vmemkv: bool,
    /// Round index.
    pub rep: usize,
    /// Keys filled.
    pub keys: u64,
    /// `readrandom` reads per thread.
    #[serde(default)]
    pub reads_per_thread: u64,
    /// `ok` or `failed`.
    pub status: String,
    /// `fillseq` plus `flush`, seconds.
    pub fill_secs: Option<f64>,
    /// The read process's open of the filled database, seconds.
    pub open_secs: Option<f64>,
    /// `readrandom` throughput over all threads.
    pub reads_per_sec: Option<f64>,
    /// Why the round failed.
    pub note: Option<String>,
}

fn json_of(path: &Path) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn seconds_of(doc: &Value, list: &str, name: &str) -> Option<f64> {
    doc[list]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)?
        .get("seconds")?
        .as_f64()
}

/// Runs the section in `work_dir`, interleaving the engines within each
/// round.
pub fn run(
    db_bench: &Path,
    scale: Scale,
    work_dir: &Path,
    variants: &[Variant],
    mut tick: impl FnMut(&str),
) -> Vec<SeedRun> {
    let (keys, reads, reps) = sizes(scale);
    let dir = work_dir.join(SCENARIO);
    let mut out = Vec::new();
    for rep in 0..reps {
        for v in variants {
            let db = dir.join(v.engine);
            let json = dir.join(format!("{}.json", v.engine));
            let args = |extra: &[String]| {
                let mut a = vec![
                    format!("--engine={}", v.engine),
                    format!("--db={}", db.display()),
                    format!("--num={keys}"),
                    "--key_size=8".into(),
                    "--value_size=1024".into(),
                    "--compression_ratio=1".into(),
                    "--compression_type=none".into(),
                    format!("--json={}", json.display()),
                ];
                a.extend(v.flags.iter().map(|s| s.to_string()));
                a.extend(extra.iter().cloned());
                a
            };
            let mut r = SeedRun {
                variant: v.label.into(),
                engine: v.engine.into(),
                is_vmemkv: v.is_vmemkv,
                rep,
                keys,
                reads_per_thread: reads,
                status: "failed".into(),
                fill_secs: None,
                open_secs: None,
                reads_per_sec: None,
                note: None,
            };
            tick(&format!(
                "{SCENARIO} | fill | {} | rep {}",
                v.label,
                rep + 1
            ));
            let _ = fs::remove_dir_all(&db);
            let _ = fs::create_dir_all(&dir);
            let _ = fs::remove_file(&json);
            let o = runner::run_db_bench(
                db_bench,
                &args(&[
                    "--benchmarks=fillseq,flush".into(),
                    "--use_existing_db=0".into(),
                ]),
                None,
            );
            let doc = json_of(&json);
            r.fill_secs = doc.as_ref().and_then(|d| {
                Some(seconds_of(d, "results", "fillseq")? + seconds_of(d, "maintenance", "flush")?)
            });
            tick(&format!(
                "{SCENARIO} | read | {} | rep {}",
                v.label,
                rep + 1
            ));
            if o.error.is_some() || r.fill_secs.is_none() {
                r.note = Some(o.error.unwrap_or_else(|| "no fillseq or flush time".into()));
                out.push(r);
                continue;
            }
            let _ = fs::remove_file(&json);
            let o = runner::run_db_bench(
                db_bench,
                &args(&[
                    "--benchmarks=readrandom".into(),
                    "--use_existing_db=1".into(),
                    format!("--threads={THREADS}"),
                    format!("--reads={reads}"),
                ]),
                None,
            );
            r.open_secs = json_of(&json).and_then(|d| d["open_seconds"][0].as_f64());
            r.reads_per_sec = o.results.last().map(|l| l.ops_per_sec);
            match (&o.error, r.reads_per_sec, r.open_secs) {
                (None, Some(_), Some(_)) => r.status = "ok".into(),
                (e, _, _) => r.note = Some(e.clone().unwrap_or_else(|| "no readrandom".into())),
            }
            out.push(r);
        }
    }
    let _ = fs::remove_dir_all(&dir);
    out
}

/// One engine's medians over its rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Engine variant label.
    pub variant: String,
    /// Whether it is vmemkv.
    pub is_vmemkv: bool,
    /// Median reads/s.
    pub reads_per_sec: Option<f64>,
    /// Median fill seconds.
    pub fill_secs: Option<f64>,
    /// Median open seconds.
    pub open_secs: Option<f64>,
    /// Rounds that failed.
    pub failed: usize,
}

/// Medians per engine, in run order.
pub fn rows(runs: &[SeedRun]) -> Vec<Row> {
    let mut order: Vec<&str> = Vec::new();
    for r in runs {
        if !order.contains(&r.variant.as_str()) {
            order.push(&r.variant);
        }
    }
    order
        .into_iter()
        .map(|v| {
            let mine: Vec<&SeedRun> = runs.iter().filter(|r| r.variant == v).collect();
            let med = |f: fn(&SeedRun) -> Option<f64>| {
                let xs: Vec<f64> = mine
                    .iter()
                    .filter(|r| r.status == "ok")
                    .filter_map(|r| f(r))
                    .collect();
                stats::median(&xs)
            };
            Row {
                variant: v.to_string(),
                is_vmemkv: mine.iter().any(|r| r.is_vmemkv),
                reads_per_sec: med(|r| r.reads_per_sec),
                fill_secs: med(|r| r.fill_secs),
                open_secs: med(|r| r.open_secs),
                failed: mine.iter().filter(|r| r.status != "ok").count(),
            }
        })
        .collect()
}

fn seed_of(variant: &str) -> Option<&'static (&'static str, f64, &'static str)> {
    SEED.iter().find(|(name, _, _)| *name == variant)
}

fn ratio_text(x: Option<f64>, lmdb: Option<f64>) -> String {
    match (x, lmdb) {
        (Some(x), Some(l)) if l > 0.0 => format!("{:.2}x", x / l),
        _ => "-".into(),
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "failed".into(), f)
}

/// The section as Markdown: a table with the seed's column beside each
/// engine's medians, then the targets' verdicts.
pub fn table_md(runs: &[SeedRun]) -> String {
    use std::fmt::Write as _;
    if runs.is_empty() {
        return String::new();
    }
    let rows = rows(runs);
    let lmdb = rows.iter().find(|r| r.variant == "LMDB");
    let (l_reads, l_fill, l_open) = (
        lmdb.and_then(|r| r.reads_per_sec),
        lmdb.and_then(|r| r.fill_secs),
        lmdb.and_then(|r| r.open_secs),
    );
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| engine | reads/s | reads/s vs LMDB | seed: reads/s vs LMDB | fill (s) | fill time vs LMDB | seed: fill | open (s) | open time vs LMDB |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let seed = seed_of(&r.variant);
        let _ = writeln!(
            s,
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.variant,
            if r.failed > 0 {
                format!(" ({} rounds failed)", r.failed)
            } else {
                String::new()
            },
            opt(r.reads_per_sec, |x| format!("{:.0}", x)),
            ratio_text(r.reads_per_sec, l_reads),
            seed.map_or("-".into(), |(_, x, _)| format!(
                "{:.2}x",
                x / SEED_LMDB_READS
            )),
            opt(r.fill_secs, |x| format!("{x:.2}")),
            ratio_text(r.fill_secs, l_fill),
            seed.map_or("-", |(_, _, f)| f),
            opt(r.open_secs, |x| format!("{x:.3}")),
            ratio_text(r.open_secs, l_open),
        );
    }
    for (name, reads, fill) in SEED {
        if !rows.iter().any(|r| r.variant == *name) {
            let _ = writeln!(
                s,
                "| {name} (not run: Java, not reachable from this machine's registries) | - | - | {:.2}x | - | - | {fill} | - | - |",
                reads / SEED_LMDB_READS
            );
        }
    }
    let _ = writeln!(s);
    let vm = rows.iter().find(|r| r.is_vmemkv);
    let rivals: Vec<&Row> = rows.iter().filter(|r| !r.is_vmemkv).collect();
    if let Some(vm) = vm {
        let sparkey = rows.iter().find(|r| r.variant == "Sparkey");
        if let (Some(v), Some(sp)) = (vm.reads_per_sec, sparkey.and_then(|r| r.reads_per_sec)) {
            let _ = writeln!(
                s,
                "- Reads: vmemkv {:.2}x Sparkey (target: faster than Sparkey) — {}.",
                v / sp,
                if v > sp { "met" } else { "missed" }
            );
        }
        let fastest_fill = rivals
            .iter()
            .filter_map(|r| r.fill_secs.map(|f| (r.variant.as_str(), f)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(v), Some((name, f))) = (vm.fill_secs, fastest_fill) {
            let _ = writeln!(
                s,
                "- Fill: vmemkv {v:.2} s, fastest rival {name} {f:.2} s (target: faster than every rival) — {}.",
                if v < f { "met" } else { "missed" }
            );
        }
        if let Some(o) = vm.open_secs {
            let _ = writeln!(
                s,
                "- Open of the 1M-key database: vmemkv {o:.3} s (target: under 0.5 s) — {}.",
                if o < 0.5 { "met" } else { "missed" }
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &str, vm: bool, rep: usize, reads: f64, fill: f64, open: f64) -> SeedRun {
        SeedRun {
            variant: variant.into(),
            engine: variant.to_lowercase(),
            is_vmemkv: vm,
            rep,
            keys: 1_000_000,
            reads_per_thread: 2_500_000,
            status: "ok".into(),
            fill_secs: Some(fill),
            open_secs: Some(open),
            reads_per_sec: Some(reads),
            note: None,
        }
    }

    #[test]
    fn medians_ratios_to_lmdb_and_verdicts() {
        let mut runs = Vec::new();
        for (rep, k) in [1.0, 3.0, 2.0].into_iter().enumerate() {
            runs.push(run("vmemkv+Prefault", true, rep, 4e6 * k, 1.0 * k, 0.1 * k));
            runs.push(run("LMDB", false, rep, 1e6 * k, 4.0 * k, 0.01 * k));
            runs.push(run("Sparkey", false, rep, 5e6 * k, 3.0 * k, 0.02 * k));
        }
        let rows = rows(&runs);
        assert_eq!(rows[0].reads_per_sec, Some(8e6));
        assert_eq!(rows[0].fill_secs, Some(2.0));
        let md = table_md(&runs);
        // vmemkv reads 8M/s against LMDB's 2M/s: 4.00x; the seed's
        // Sparkey is 2.40x its LMDB.
        assert!(md.contains("| vmemkv+Prefault | 8000000 | 4.00x | - | 2.00 | 0.25x |"));
        assert!(md.contains("| Sparkey | 10000000 | 5.00x | 2.40x |"));
        assert!(md.contains("HaloDB (not run"));
        assert!(md.contains("vmemkv 0.80x Sparkey (target: faster than Sparkey) — missed"));
        assert!(md.contains("fastest rival Sparkey 6.00 s (target: faster than every rival) — met"));
        assert!(md.contains("vmemkv 0.200 s (target: under 0.5 s) — met"));
    }

    #[test]
    fn a_failed_round_is_counted_and_left_out_of_the_medians() {
        let mut runs = vec![run("LMDB", false, 0, 1e6, 4.0, 0.01)];
        let mut bad = run("LMDB", false, 1, 9e9, 0.0, 0.0);
        bad.status = "failed".into();
        runs.push(bad);
        let rows = rows(&runs);
        assert_eq!(rows[0].reads_per_sec, Some(1e6));
        assert_eq!(rows[0].failed, 1);
        assert!(table_md(&runs).contains("| LMDB (1 rounds failed) |"));
    }
}
