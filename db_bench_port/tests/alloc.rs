//! The hot path allocates nothing per op: readrandom's allocation count
//! does not grow with the number of ops.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use db_bench_port::config::Config;
use db_bench_port::engines::harness_test::HarnessTestDb;
use db_bench_port::flags::Flags;
use db_bench_port::keys::KeyGen;
use db_bench_port::random::Random64;
use db_bench_port::stats::{Stats, StatsConfig};
use db_bench_port::workloads::{self, Method, Params, Shared, ThreadState};
use vmemkv_compat::{Db, ReadOptions, WriteOptions};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_for(cfg: &Config, db: &dyn Db, method: Method, reads: i64) -> u64 {
    let p = Params {
        cfg,
        num: cfg.num,
        flags_num: cfg.num,
        reads,
        writes: reads,
        deletes: reads,
        readwrites: reads,
        keygen: KeyGen::new(cfg.key_size),
        entries_per_batch: 1,
        value_dist: cfg.value_dist,
        wopts: WriteOptions::default(),
        ropts: ReadOptions::default(),
        seed_base: 1,
        families: None,
    };
    let shared = Shared::new(1);
    let scfg = StatsConfig {
        histogram: cfg.histogram,
        progress_reports: false,
        stats_interval: 0,
        stats_interval_seconds: 0,
        slow_usecs: u64::MAX,
    };
    let mut t = ThreadState {
        tid: 0,
        rand: Random64::new(1),
        stats: Stats::new(scfg, 0),
        shared: &shared,
    };
    let before = ALLOCS.load(Ordering::Relaxed);
    method(&p, db, &mut t).expect("workload");
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn readrandom_and_fill_do_not_allocate_per_op() {
    let flags = Flags::from_args(&["--num=1000", "--histogram"]).expect("flags");
    let cfg = Config::from_flags(flags, None).expect("config");
    let db = HarnessTestDb::new();
    // Fill first so every read finds a value (put into existing keys reuses them).
    allocations_for(&cfg, &db, workloads::write_seq, 1000);
    for (name, method) in [
        ("readrandom", workloads::read_random as Method),
        ("overwrite", workloads::write_random as Method),
        (
            "readrandomwriterandom",
            workloads::read_random_write_random as Method,
        ),
    ] {
        let small = allocations_for(&cfg, &db, method, 1_000);
        let large = allocations_for(&cfg, &db, method, 50_000);
        assert!(
            large <= small + 8,
            "{name}: {small} allocations for 1000 ops but {large} for 50000"
        );
    }
}
