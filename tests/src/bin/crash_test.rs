//! Kill-and-verify crash harness for any engine behind `vmemkv_compat::Db`.
//!
//! ```text
//! crash_test run --engine vmemkv --mode all --cycles 1000 [--keys 2000] [--seed N]
//!                [--dir DIR] [--kill-ms MIN:MAX] [--option key=value]...
//!                [--failpoints all|name,name] [--maintenance-pct N]
//! ```
//! `--failpoints` (vmemkv) arms one maintenance failpoint per cycle, so that
//! kills land inside checkpoint, defragment, retire, rollover, reorganize
//! and split phases, not only between calls; it raises the share of
//! maintenance calls to 10% unless `--maintenance-pct` says otherwise.
//! Each cycle spawns `crash_test child`, lets it write for a random time,
//! SIGKILLs it, reopens the database and verifies it against the expected
//! state. Prints one summary line per mode and exits 1 on any violation.

use std::path::PathBuf;
use std::process::ExitCode;

use vmemkv_compat::EngineOptions;
use vmemkv_tests::crash::{run_child, run_parent, Config, Mode};

fn usage() -> ExitCode {
    eprintln!(
        "usage: crash_test run|child --engine E --mode sync|nosync|disable_wal|all \
         [--cycles N] [--keys N] [--seed N] [--dir DIR] [--kill-ms MIN:MAX] [--option k=v]... \
         [--failpoints all|a,b] [--maintenance-pct N]"
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
        None => match tempfile::Builder::new().prefix("crash_test-").tempdir() {
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
        "child" => {
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
            match run_child(&cfg) {
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
                match run_parent(&exe, &cfg) {
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
                        failed |= !r.violations.is_empty();
                    }
                    Err(e) => {
                        println!("crash_test engine={engine} mode={m}: harness error: {e}");
                        failed = true;
                    }
                }
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
