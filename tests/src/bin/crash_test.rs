//! Kill-and-verify crash harness for any engine behind `vmemkv_compat::Db`.
//!
//! ```text
//! crash_test run --engine vmemkv --mode all --cycles 1000 [--keys 2000] [--seed N]
//!                [--dir DIR] [--kill-ms MIN:MAX] [--option key=value]...
//!                [--failpoints all|name,name] [--maintenance-pct N]
//!                [--power-cut 1 [--claim-durable 1]]
//! ```
//! `--power-cut 1` cuts power instead of killing (root; see
//! `vmemkv_tests::crash::powercut`): the database lives on ext4 on a loop
//! device whose crash image is cloned at the cut, and the verifier checks
//! durable writes, foreign values, batches and the prefix property.
//! `--claim-durable 1` is the meta-test's broken writer, which declares
//! no-sync writes durable as they return: the campaign must fail.
//! `--failpoints` (vmemkv) arms one maintenance failpoint per cycle, so that
//! kills land inside checkpoint, defragment, retire, rollover, reorganize
//! and split phases, not only between calls; it raises the share of
//! maintenance calls to 10% unless `--maintenance-pct` says otherwise.
//! Each cycle spawns `crash_test child`, lets it write for a random time,
//! SIGKILLs it, reopens the database and verifies it against the expected
//! state. Prints one summary line per mode and exits 1 on any violation.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vmemkv_compat::EngineOptions;
use vmemkv_tests::crash::{powercut, run_child, run_parent, Config, Mode};

fn usage() -> ExitCode {
    eprintln!(
        "usage: crash_test run|child --engine E --mode sync|nosync|disable_wal|all \
         [--cycles N] [--keys N] [--seed N] [--dir DIR] [--kill-ms MIN:MAX] [--option k=v]... \
         [--failpoints all|a,b] [--maintenance-pct N] [--power-cut 1 [--claim-durable 1]]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(role) = args.first().cloned() else {
        return usage();
    };
    let mut engine = "vmemkv".to_string();
    let mut mode = "all".to_string();
    let mut cycles = 50usize;
    let mut nkeys = 2000usize;
    let mut seed = 1u64;
    let mut dir: Option<PathBuf> = None;
    let mut kill = (30u64, 400u64);
    let mut options = EngineOptions::default();
    let mut failpoints: Vec<String> = Vec::new();
    let mut maintenance_pct: Option<u32> = None;
    let mut power_cut = false;
    let mut claim_durable = false;
    let mut first_seq = 1u64;
    let mut it = args.iter().skip(1);
    while let Some(flag) = it.next() {
        let Some(val) = it.next() else {
            eprintln!("crash_test: flag {flag} needs a value");
            return usage();
        };
        let bad = |what: &str| {
            eprintln!("crash_test: bad value '{val}' for {what}");
            ExitCode::from(2)
        };
        match flag.as_str() {
            "--engine" => engine = val.clone(),
            "--mode" => mode = val.clone(),
            "--cycles" => match val.parse() {
                Ok(v) => cycles = v,
                Err(_) => return bad("--cycles"),
            },
            "--keys" => match val.parse() {
                Ok(v) => nkeys = v,
                Err(_) => return bad("--keys"),
            },
            "--seed" => match val.parse() {
                Ok(v) => seed = v,
                Err(_) => return bad("--seed"),
            },
            "--dir" => dir = Some(PathBuf::from(val)),
            "--kill-ms" => {
                let parsed = val
                    .split_once(':')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                match parsed {
                    Some((a, b)) if a <= b => kill = (a, b),
                    _ => return bad("--kill-ms"),
                }
            }
            "--failpoints" => {
                failpoints = if val == "all" {
                    vmemkv::failpoint::NAMES
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                } else {
                    val.split(',').map(str::to_string).collect()
                };
                if let Some(bad_fp) = failpoints
                    .iter()
                    .find(|f| !vmemkv::failpoint::NAMES.contains(&f.as_str()))
                {
                    eprintln!(
                        "crash_test: unknown failpoint '{bad_fp}' (known: {})",
                        vmemkv::failpoint::NAMES.join(", ")
                    );
                    return ExitCode::from(2);
                }
            }
            "--maintenance-pct" => match val.parse::<u32>() {
                Ok(v) if v <= 100 => maintenance_pct = Some(v),
                _ => return bad("--maintenance-pct"),
            },
            "--power-cut" => match val.as_str() {
                "0" | "1" => power_cut = val == "1",
                _ => return bad("--power-cut (0 or 1)"),
            },
            "--claim-durable" => match val.as_str() {
                "0" | "1" => claim_durable = val == "1",
                _ => return bad("--claim-durable (0 or 1)"),
            },
            "--first-seq" => match val.parse() {
                Ok(v) if v > 0 => first_seq = v,
                _ => return bad("--first-seq"),
            },
            "--option" => match val.split_once('=') {
                Some((k, v)) => options = options.set(k, v),
                None => return bad("--option"),
            },
            _ => {
                eprintln!("crash_test: unknown flag {flag}");
                return usage();
            }
        }
    }
    let engine = match engine.parse() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("crash_test: {e}");
            return ExitCode::from(2);
        }
    };
    let modes: Vec<Mode> = if mode == "all" {
        Mode::ALL.to_vec()
    } else {
        match mode.parse() {
            Ok(m) => vec![m],
            Err(e) => {
                eprintln!("crash_test: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let maintenance_pct = maintenance_pct.unwrap_or(if failpoints.is_empty() { 3 } else { 10 });
    let tmp;
    let base = match dir {
        Some(d) => d,
        // Power cuts put their images in memory when they can: a sync
        // write's flush then costs no disk round trip.
        None => match tempfile::Builder::new().prefix("crash_test-").tempdir_in(
            if power_cut && Path::new("/dev/shm").is_dir() {
                PathBuf::from("/dev/shm")
            } else {
                std::env::temp_dir()
            },
        ) {
            Ok(t) => {
                tmp = t;
                tmp.path().to_path_buf()
            }
            Err(e) => {
                eprintln!("crash_test: temporary directory: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match role.as_str() {
        "child" | "power-child" => {
            let cfg = Config {
                engine,
                mode: modes[0],
                cycles,
                nkeys,
                seed,
                dir: base,
                kill_after_ms: kill,
                options,
                failpoints,
                maintenance_pct,
            };
            let r = if role == "child" {
                run_child(&cfg)
            } else {
                let pc = powercut::PowerCut {
                    first_seq,
                    claim_durable,
                };
                powercut::run_child(&cfg, pc)
            };
            match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("crash_test child: {e}");
                    ExitCode::from(3)
                }
            }
        }
        "run" => {
            let exe = match std::env::current_exe() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("crash_test: cannot find own executable: {e}");
                    return ExitCode::from(2);
                }
            };
            let mut failed = false;
            for m in modes {
                let cfg = Config {
                    engine,
                    mode: m,
                    cycles,
                    nkeys,
                    seed,
                    dir: base.join(format!("{engine}-{m}")),
                    kill_after_ms: kill,
                    options: options.clone(),
                    failpoints: failpoints.clone(),
                    maintenance_pct,
                };
                let started = std::time::Instant::now();
                failed |= if power_cut {
                    report_power_cuts(
                        &cfg,
                        powercut::run_parent(&exe, &cfg, claim_durable),
                        started,
                    )
                } else {
                    report_kills(&cfg, run_parent(&exe, &cfg), started)
                };
            }
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        _ => usage(),
    }
}

/// Prints a kill run's summary; true when it failed.
fn report_kills(
    cfg: &Config,
    r: Result<vmemkv_tests::crash::Report, String>,
    started: std::time::Instant,
) -> bool {
    let (engine, m) = (cfg.engine, cfg.mode);
    match r {
        Ok(r) => {
            println!(
                "crash_test engine={engine} mode={m} cycles={} keys_checked={} \
                 batches_in_flight_at_kill={} writes_issued={} violations={} secs={:.1}",
                r.cycles,
                r.keys_checked,
                r.batches_in_flight,
                r.seqs_issued,
                r.violations.len(),
                started.elapsed().as_secs_f64()
            );
            if !r.failpoint_kills.is_empty() {
                let fp: Vec<String> = r
                    .failpoint_kills
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                println!("  failpoint kills: {}", fp.join(" "));
            }
            for v in r.violations.iter().take(20) {
                println!("  VIOLATION {v}");
            }
            !r.violations.is_empty()
        }
        Err(e) => {
            println!("crash_test engine={engine} mode={m}: harness error: {e}");
            true
        }
    }
}

/// Prints a power-cut run's summary; true when it failed. States that no
/// prefix explains are a failure for vmemkv, which promises point-in-time
/// recovery (design.md §2), and a finding for the rivals.
fn report_power_cuts(
    cfg: &Config,
    r: Result<powercut::Report, String>,
    started: std::time::Instant,
) -> bool {
    let (engine, m) = (cfg.engine, cfg.mode);
    match r {
        Ok(r) => {
            println!(
                "power_cut engine={engine} mode={m} cycles={} keys_checked={} writes_acked={} \
                 writes_durable={} acked_lost_at_cut={} writebacks={} ragged_ends={} violations={} not_prefix={} secs={:.1}",
                r.cycles,
                r.keys_checked,
                r.writes_acked,
                r.writes_durable,
                r.acked_lost,
                r.writebacks,
                r.ragged_ends,
                r.violations.len(),
                r.not_prefix.len(),
                started.elapsed().as_secs_f64()
            );
            for v in r.violations.iter().take(20) {
                println!("  VIOLATION {v}");
            }
            for v in r.not_prefix.iter().take(5) {
                println!("  NOT A PREFIX {v}");
            }
            for v in r.lazy_unmounts.iter().take(3) {
                println!("  BUSY AFTER CLOSE {v}");
            }
            !r.violations.is_empty()
                || (engine == vmemkv_compat::EngineKind::Vmemkv && !r.not_prefix.is_empty())
        }
        Err(e) => {
            println!("power_cut engine={engine} mode={m}: harness error: {e}");
            true
        }
    }
}
