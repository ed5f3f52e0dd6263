//! The benchmark matrix: scenarios, workloads, engines and thread counts,
//! scaled from the original VMemKV report to a given machine.

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// About two minutes: proves the pipeline, numbers are not meaningful.
    Smoke,
    /// Sized for a 2-core, 24 GiB machine: 3 s windows, several hours in
    /// all, run in parts with `--budget` and `--resume`.
    Full,
}

impl std::str::FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> Result<Scale, String> {
        match s {
            "smoke" => Ok(Scale::Smoke),
            "full" => Ok(Scale::Full),
            _ => Err(format!("--scale: expected smoke or full, got '{s}'")),
        }
    }
}

/// One data set: a value size, a key count and a memory regime.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Short name, e.g. `1KB-LTM`.
    pub name: &'static str,
    /// Value size in bytes.
    pub value_size: usize,
    /// Keys loaded.
    pub keys: u64,
    /// Memory limit for larger-than-memory runs; `None` runs in memory.
    pub mem_limit: Option<u64>,
    /// How this was scaled from the original, for the report.
    pub scaling: &'static str,
}

impl Scenario {
    /// Whether the scenario needs a memory cgroup.
    pub fn is_ltm(&self) -> bool {
        self.mem_limit.is_some()
    }
}

/// One workload: a db_bench benchmark with its flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Display name, as in the original report.
    pub name: &'static str,
    /// The db_bench benchmark to run.
    pub bench: &'static str,
    /// Extra db_bench flags.
    pub flags: &'static [&'static str],
    /// Run against a fresh, empty database instead of the loaded corpus.
    pub fresh_db: bool,
    /// Drop the page cache before each run of this workload.
    pub cold: bool,
    /// Record the per-second timeline (YCSB-E).
    pub timeline: bool,
    /// Run the benchmark once, uncounted, in the same process before the
    /// measured run (`--benchmarks=b,b`; the last result counts), so page
    /// faults and first-read checksums fall outside the measured window.
    /// Off where a second pass would measure something else: Insert and
    /// Delete would find their keys already written or deleted, and a cold
    /// MultiScan would find the cache warm.
    pub warmup: bool,
    /// Changes the database: runs on a fresh copy of the loaded corpus, so
    /// that no run inherits another's writes.
    pub writes: bool,
}

/// The workloads in run order: reads, then writes (each write cell runs on
/// its own copy of the corpus, so the order no longer carries state).
pub fn workloads() -> Vec<Workload> {
    let w = |name, bench, flags| Workload {
        name,
        bench,
        flags,
        fresh_db: false,
        cold: false,
        timeline: false,
        warmup: true,
        writes: false,
    };
    vec![
        w("Get Hit (Zipf)", "gethit_zipf", &[]),
        w("Get Hit (Uniform)", "gethit_uniform", &[]),
        w("Get Miss", "getmiss_zipf", &[]),
        w("Scan 100 (Zipf)", "scan_zipf", &["--seek_nexts=100"]),
        w("Scan 100 (Uniform)", "scan_uniform", &["--seek_nexts=100"]),
        Workload {
            cold: true,
            warmup: false,
            ..w(
                "MultiScan async (cold)",
                "multiscan",
                &[
                    "--multiscan_use_async_io=1",
                    "--multiscan_size=15",
                    "--seek_nexts=100",
                ],
            )
        },
        Workload {
            cold: true,
            warmup: false,
            ..w(
                "MultiScan sync (cold)",
                "multiscan",
                &[
                    "--multiscan_use_async_io=0",
                    "--multiscan_size=15",
                    "--seek_nexts=100",
                ],
            )
        },
        Workload {
            writes: true,
            ..w("Update (Zipf)", "update_zipf", &[])
        },
        Workload {
            timeline: true,
            writes: true,
            ..w("YCSB-E", "ycsb_e", &["--seek_nexts=100"])
        },
        Workload {
            fresh_db: true,
            writes: true,
            warmup: false,
            ..w("Insert", "insert", &[])
        },
        Workload {
            writes: true,
            warmup: false,
            ..w("Delete", "delete", &[])
        },
    ]
}

/// The scenarios at a scale.
pub fn scenarios(scale: Scale) -> Vec<Scenario> {
    const MIB: u64 = 1 << 20;
    match scale {
        Scale::Smoke => vec![
            Scenario {
                name: "8B-mem",
                value_size: 8,
                keys: 20_000,
                mem_limit: None,
                scaling: "smoke: 20k keys",
            },
            Scenario {
                name: "1KB-mem",
                value_size: 1024,
                keys: 5_000,
                mem_limit: None,
                scaling: "smoke: 5k keys",
            },
            Scenario {
                name: "1KB-LTM",
                value_size: 1024,
                keys: 20_000,
                mem_limit: Some(256 * MIB),
                scaling: "smoke: 20 MiB corpus, 256 MiB cgroup (pipeline check only, not larger than memory)",
            },
            Scenario {
                name: "64KB-LTM",
                value_size: 65536,
                keys: 400,
                // A 15 x 100-key MultiScan of 64 KiB values prefetches ~96 MB
                // per op (max_prefetch_size = 0 is unlimited, as in RocksDB),
                // so the cgroup must hold that much.
                mem_limit: Some(256 * MIB),
                scaling: "smoke: 25 MiB corpus, 256 MiB cgroup (pipeline check only, not larger than memory)",
            },
        ],
        Scale::Full => vec![
            Scenario {
                name: "8B-mem",
                value_size: 8,
                keys: 4_000_000,
                mem_limit: None,
                scaling: "original 20M keys; 4M here (2 cores, bounded load time)",
            },
            Scenario {
                name: "1KB-mem",
                value_size: 1024,
                keys: 1_000_000,
                mem_limit: None,
                scaling: "original 8M keys (8 GiB); 1M keys (1 GiB) here",
            },
            Scenario {
                name: "1KB-LTM",
                value_size: 1024,
                keys: 3_000_000,
                mem_limit: Some(384 * MIB),
                scaling: "original 8x a 1 GiB cgroup; here 3 GiB corpus in a 384 MiB cgroup (8x)",
            },
            Scenario {
                name: "64KB-LTM",
                value_size: 65536,
                keys: 48_000,
                mem_limit: Some(384 * MIB),
                scaling: "original 8x a 1 GiB cgroup; here 3 GiB corpus in a 384 MiB cgroup (8x)",
            },
        ],
    }
}

/// An engine configuration under test.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Label in tables and charts.
    pub label: &'static str,
    /// `--engine=` value.
    pub engine: &'static str,
    /// Extra db_bench flags (ablation switches, rival settings).
    pub flags: &'static [&'static str],
    /// Whether this is a vmemkv variant (the rest are rivals).
    pub is_vmemkv: bool,
    /// Run at every thread count; ablation variants run at the maximum only,
    /// which is where the winner table compares.
    pub all_threads: bool,
}

/// vmemkv's ablation variants (as the original: Baseline, +BF, +Inline,
/// +Prefault/prefetch) and the rivals. All vmemkv variants share a corpus.
/// The smoke scale keeps only the full vmemkv configuration.
pub fn variants(scale: Scale, with_rivals: bool) -> Vec<Variant> {
    let mut v = vec![
        Variant {
            label: "vmemkv-Baseline",
            engine: "vmemkv",
            flags: &[
                "--vmemkv_bloom=0",
                "--vmemkv_inline=0",
                "--vmemkv_prefault=0",
            ],
            is_vmemkv: true,
            all_threads: false,
        },
        Variant {
            label: "vmemkv+BF",
            engine: "vmemkv",
            flags: &[
                "--vmemkv_bloom=1",
                "--vmemkv_inline=0",
                "--vmemkv_prefault=0",
            ],
            is_vmemkv: true,
            all_threads: false,
        },
        Variant {
            label: "vmemkv+Inline",
            engine: "vmemkv",
            flags: &[
                "--vmemkv_bloom=1",
                "--vmemkv_inline=1",
                "--vmemkv_prefault=0",
            ],
            is_vmemkv: true,
            all_threads: false,
        },
        Variant {
            label: "vmemkv+Prefault",
            engine: "vmemkv",
            flags: &[
                "--vmemkv_bloom=1",
                "--vmemkv_inline=1",
                "--vmemkv_prefault=1",
            ],
            is_vmemkv: true,
            all_threads: true,
        },
    ];
    if scale == Scale::Smoke {
        v.retain(|x| x.all_threads);
    }
    if with_rivals {
        v.push(Variant {
            label: "RocksDB",
            engine: "rocksdb",
            flags: &[],
            is_vmemkv: false,
            all_threads: true,
        });
        v.push(Variant {
            label: "RocksDB-BlobDB",
            engine: "blobdb",
            flags: &[],
            is_vmemkv: false,
            all_threads: true,
        });
        v.push(Variant {
            label: "LMDB",
            engine: "lmdb",
            flags: &[],
            is_vmemkv: false,
            all_threads: true,
        });
        for (label, engine) in [
            ("fjall", "fjall"),
            ("fjall-blob", "fjall-blob"),
            ("Sparkey", "sparkey"),
        ] {
            v.push(Variant {
                label,
                engine,
                flags: &[],
                is_vmemkv: false,
                all_threads: true,
            });
        }
    }
    // The harness's own ceiling: the same db_bench lines against an engine
    // that stores nothing. Not a rival: the winner table leaves it out,
    // and a cell near it measures db_bench rather than the engine.
    v.push(Variant {
        label: CEILING_LABEL,
        engine: CEILING_ENGINE,
        flags: &[],
        is_vmemkv: false,
        all_threads: true,
    });
    v
}

/// The `--engine=` of the ceiling variant.
pub const CEILING_ENGINE: &str = "null";

/// The ceiling variant's label.
pub const CEILING_LABEL: &str = "null-ceiling";

/// Thread counts per cell at a scale. Smoke runs one count: it proves the
/// pipeline, not the scaling.
pub fn threads(scale: Scale) -> Vec<usize> {
    match scale {
        Scale::Smoke => vec![2],
        Scale::Full => vec![1, 2, 4],
    }
}

/// The shortest measured window the report counts as steady state, in
/// seconds. With 1 s cells the page faults of a fresh open and each value's
/// first-read checksum fell inside the window and decided cells (issue 50);
/// a run shorter than this is reported as such ([`short_window_note`]).
pub const MEASURED_SECS: u64 = 3;

/// Seconds per run in memory, seconds per run larger than memory, and
/// repeats per cell at a scale. Timeline workloads (YCSB-E) run
/// [`TIMELINE_SECS`] at the maximum thread count.
///
/// The full scale measures [`MEASURED_SECS`] in every scenario, after a
/// warm-up of the same length for the workloads that have one. That is
/// about three times the machine time of the 1 s / 2 s matrix without
/// warm-ups (99 minutes on 2 cores), so a full run is made in parts with
/// `--budget` and `--resume`.
pub fn timing(scale: Scale) -> (u64, u64, usize) {
    match scale {
        // 0 s: smoke runs are bounded by operation count instead
        // (SMOKE_OPS), so the whole matrix takes about two minutes.
        Scale::Smoke => (0, 0, 1),
        Scale::Full => (MEASURED_SECS, MEASURED_SECS, 3),
    }
}

/// What the report says of a run whose windows are shorter than
/// [`MEASURED_SECS`] (`None` when both are long enough): its figures
/// include start-up effects and are not steady-state measurements.
pub fn short_window_note(run_secs: u64, ltm_run_secs: u64) -> Option<String> {
    let shortest = run_secs.min(ltm_run_secs);
    if shortest >= MEASURED_SECS {
        return None;
    }
    let what = if shortest == 0 {
        "runs bounded by operation count".to_string()
    } else {
        format!("runs of {shortest} s")
    };
    Some(format!(
        "**Short windows**: this scale has {what}, below the {MEASURED_SECS} s the full scale measures; its figures include start-up effects (page faults, first reads) and show the pipeline works, not how the engines compare."
    ))
}

/// Duration of timeline runs, at the maximum thread count.
pub const TIMELINE_SECS: u64 = 8;

/// Operations per run when the run length is 0 s (smoke scale).
pub const SMOKE_OPS: u64 = 2000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_scale_measures_at_least_the_steady_state_window() {
        let (mem, ltm, repeats) = timing(Scale::Full);
        assert!(mem >= MEASURED_SECS && ltm >= MEASURED_SECS && repeats >= 3);
        assert_eq!(short_window_note(mem, ltm), None);
    }

    #[test]
    fn a_shorter_window_is_named_in_the_report() {
        let (mem, ltm, _) = timing(Scale::Smoke);
        let smoke = short_window_note(mem, ltm).unwrap_or_default();
        assert!(smoke.contains("bounded by operation count"), "{smoke}");
        let one = short_window_note(1, 2).unwrap_or_default();
        assert!(one.contains("runs of 1 s") && one.contains("3 s"), "{one}");
    }
}
