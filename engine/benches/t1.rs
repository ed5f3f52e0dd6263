//! T1 benchmarks against `crossbeam_skiplist::SkipMap` holding the same keys.
//!
//! Sections: memory per key (counting allocator), interleaved quick ratios, criterion
//! groups `t1_get_hit`, `t1_get_miss`, `t1_scan100`, and a concurrency run (2 writers,
//! 1 reader, background reorganize/splits) with a writer-latency histogram.
//! Keys are db_bench's 16-byte keys: the index as 8 big-endian bytes, then "00000000".
//!
//! Without `--bench` (as under `cargo test --all-targets`) it runs a small smoke version.
//! Env: `T1_BENCH_KEYS` (default 1000000), `T1_BENCH_CONC_SECS` (default 4),
//! `T1_BENCH_SKIP_CRITERION=1` to run only the custom sections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use crossbeam_skiplist::SkipMap;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use vmemkv::internals::{Entry, Payload, T1Config, T1};

/// Counts live heap bytes so memory per key can be measured exactly.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's layout/pointer unchanged,
// so `System`'s guarantees carry over; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's (non-zero-size layout).
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` was allocated by `System` with layout `l` (via `alloc`/`realloc`).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: `p`/`l` come from a previous allocation of ours; `new` is the caller's.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_add(new, Ordering::Relaxed);
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn key(i: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k
}

fn entry(i: u64) -> Entry {
    Entry {
        seq: i + 1,
        payload: Payload::inline(&i.to_le_bytes()).unwrap(),
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn build_t1(order: &[u64], cfg: T1Config) -> T1 {
    let t = T1::new(cfg);
    for (n, &i) in order.iter().enumerate() {
        t.upsert(&key(i), entry(i));
        if n % 65_536 == 65_535 {
            t.maintain();
        }
    }
    t.maintain();
    t.reorganize_all();
    t
}

fn build_skipmap(order: &[u64]) -> SkipMap<Box<[u8]>, Entry> {
    let m = SkipMap::new();
    for &i in order {
        m.insert(Box::from(&key(i)[..]), entry(i));
    }
    m
}

fn bench_cfg() -> T1Config {
    T1Config {
        background: false,
        ..T1Config::default()
    }
}

/// ns per op of `f` over `probes`, best of a few short rounds.
fn time_per_op(probes: &[[u8; 16]], mut f: impl FnMut(&[u8])) -> f64 {
    let t = Instant::now();
    for p in probes {
        f(p);
    }
    t.elapsed().as_nanos() as f64 / probes.len() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn t1_scan(t: &T1, k: &[u8]) -> u64 {
    let mut c = t.cursor();
    c.seek(k);
    let mut s = 0u64;
    for _ in 0..100 {
        if !c.valid() {
            break;
        }
        s = s
            .wrapping_add(c.key()[7] as u64)
            .wrapping_add(c.entry().seq);
        c.next();
    }
    s
}

fn skip_scan(m: &SkipMap<Box<[u8]>, Entry>, k: &[u8]) -> u64 {
    let mut s = 0u64;
    for e in m
        .range::<[u8], _>((Bound::Included(k), Bound::Unbounded))
        .take(100)
    {
        s = s
            .wrapping_add(e.key()[7] as u64)
            .wrapping_add(e.value().seq);
    }
    s
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench`: do a smoke run.
    let bench = std::env::args().any(|a| a == "--bench");
    let n = env_usize("T1_BENCH_KEYS", if bench { 1_000_000 } else { 50_000 }) as u64;
    let mut rng = StdRng::seed_from_u64(42);
    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rng);

    // ---- memory per key ----
    let base = LIVE.load(Ordering::Relaxed);
    let t1 = build_t1(&order, bench_cfg());
    let t1_bytes = LIVE.load(Ordering::Relaxed) - base;
    let base = LIVE.load(Ordering::Relaxed);
    let sm = build_skipmap(&order);
    let sm_bytes = LIVE.load(Ordering::Relaxed) - base;
    let st = t1.stats();
    let t1_pk = t1_bytes as f64 / n as f64;
    println!(
        "memory: keys={n} t1={t1_bytes} B ({t1_pk:.2} B/key, stats say {:.2}) skipmap={sm_bytes} B ({:.2} B/key); shards={} target<=56 B/key: {}",
        st.memory_bytes as f64 / n as f64,
        sm_bytes as f64 / n as f64,
        st.shards,
        if t1_pk <= 56.0 { "MET" } else { "MISSED" }
    );
    assert!(t1_pk <= 56.0, "T1 uses {t1_pk:.2} B/key, over key+40");

    let hits: Vec<[u8; 16]> = (0..200_000).map(|_| key(rng.random_range(0..n))).collect();
    // Like db_bench's readmissing: absent keys that sort between present ones.
    let misses: Vec<[u8; 16]> = (0..200_000)
        .map(|_| {
            let mut k = key(rng.random_range(0..n));
            k[15] = b'1';
            k
        })
        .collect();
    let scans: Vec<[u8; 16]> = (0..20_000).map(|_| key(rng.random_range(0..n))).collect();
    for h in hits.iter().take(1000) {
        assert!(t1.get(h).is_some() && sm.get(&h[..]).is_some());
    }
    for m in misses.iter().take(1000) {
        assert!(t1.get(m).is_none() && sm.get(&m[..]).is_none());
    }
    assert_eq!(t1_scan(&t1, &scans[0]), skip_scan(&sm, &scans[0]));
    // Get must not allocate (this thread is the only one running now).
    let before = ALLOCS.load(Ordering::Relaxed);
    for k in hits.iter().chain(misses.iter()).take(100_000) {
        black_box(t1.get(k));
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    println!("allocations during 100000 gets: {allocs}");
    assert_eq!(allocs, 0, "T1::get allocated");

    // ---- interleaved quick ratios (median of 7 rounds) ----
    let mut r = [
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    ];
    for _ in 0..(if bench { 7 } else { 1 }) {
        r[0].push(time_per_op(&hits, |k| {
            black_box(t1.get(k));
        }));
        r[1].push(time_per_op(&hits, |k| {
            black_box(sm.get(k).map(|e| *e.value()));
        }));
        r[2].push(time_per_op(&misses, |k| {
            black_box(t1.get(k));
        }));
        r[3].push(time_per_op(&misses, |k| {
            black_box(sm.get(k).map(|e| *e.value()));
        }));
        r[4].push(time_per_op(&scans, |k| {
            black_box(t1_scan(&t1, k));
        }));
        r[5].push(time_per_op(&scans, |k| {
            black_box(skip_scan(&sm, k));
        }));
    }
    let m: Vec<f64> = r.into_iter().map(median).collect();
    let ratio = |a: f64, b: f64, target: f64| {
        let x = b / a;
        format!(
            "{x:.2}x (target {target}x: {})",
            if x >= target { "MET" } else { "MISSED" }
        )
    };
    println!(
        "quick ratios at {n} keys: get-hit t1 {:.0} ns vs skipmap {:.0} ns = {}",
        m[0],
        m[1],
        ratio(m[0], m[1], 1.5)
    );
    println!(
        "quick ratios at {n} keys: get-miss t1 {:.0} ns vs skipmap {:.0} ns = {}",
        m[2],
        m[3],
        ratio(m[2], m[3], 3.0)
    );
    println!(
        "quick ratios at {n} keys: scan100 t1 {:.0} ns vs skipmap {:.0} ns = {}",
        m[4],
        m[5],
        ratio(m[4], m[5], 3.0)
    );

    // ---- single-thread insert throughput (background maintenance on) ----
    {
        let m = order.len().min(1_000_000);
        let t0 = Instant::now();
        let t = T1::new(T1Config::default());
        for &i in &order[..m] {
            t.upsert(&key(i), entry(i));
        }
        let t1_ns = t0.elapsed().as_nanos() as f64 / m as f64;
        drop(t);
        let t0 = Instant::now();
        let sk = SkipMap::new();
        for &i in &order[..m] {
            sk.insert(Box::<[u8]>::from(&key(i)[..]), entry(i));
        }
        let sk_ns = t0.elapsed().as_nanos() as f64 / m as f64;
        drop(sk);
        println!(
            "insert {m} random keys: t1 {t1_ns:.0} ns/op vs skipmap {sk_ns:.0} ns/op = {:.2}x",
            sk_ns / t1_ns
        );
    }

    // ---- criterion ----
    if bench && std::env::var("T1_BENCH_SKIP_CRITERION").is_err() {
        let mut c = Criterion::default()
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .sample_size(20)
            .configure_from_args();
        let mut i = 0usize;
        let mut next = |v: &[[u8; 16]]| {
            i = (i + 1) % v.len();
            v[i]
        };
        {
            let mut g = c.benchmark_group(format!("t1_get_hit_{n}"));
            g.bench_function("t1", |b| b.iter(|| black_box(t1.get(&next(&hits)))));
            g.bench_function("skipmap", |b| {
                b.iter(|| black_box(sm.get(&next(&hits)[..]).map(|e| *e.value())))
            });
            g.finish();
        }
        {
            let mut g = c.benchmark_group(format!("t1_get_miss_{n}"));
            g.bench_function("t1", |b| b.iter(|| black_box(t1.get(&next(&misses)))));
            g.bench_function("skipmap", |b| {
                b.iter(|| black_box(sm.get(&next(&misses)[..]).map(|e| *e.value())))
            });
            g.finish();
        }
        {
            let mut g = c.benchmark_group(format!("t1_scan100_{n}"));
            g.bench_function("t1", |b| b.iter(|| black_box(t1_scan(&t1, &next(&scans)))));
            g.bench_function("skipmap", |b| {
                b.iter(|| black_box(skip_scan(&sm, &next(&scans))))
            });
            g.finish();
        }
        c.final_summary();
    }
    drop(sm);
    drop(t1);

    let secs = env_usize("T1_BENCH_CONC_SECS", if bench { 4 } else { 1 }) as u64;
    let split = if bench { 256 << 10 } else { 16 << 10 };
    concurrency(secs, split, bench, true);
    if bench {
        // Control: same load, no maintenance, to separate scheduler noise from pauses
        // caused by reorganize/split.
        concurrency(secs, split, false, false);
    }
}

/// Log-linear latency histogram: 8 sub-buckets per power of two, in nanoseconds.
struct Hist {
    b: Vec<AtomicU64>,
}

impl Hist {
    fn new() -> Hist {
        Hist {
            b: (0..64 * 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    fn idx(ns: u64) -> usize {
        if ns < 8 {
            return ns as usize;
        }
        let p = 63 - ns.leading_zeros() as usize;
        let sub = ((ns >> (p - 3)) & 7) as usize;
        p * 8 + sub
    }
    fn lower(i: usize) -> u64 {
        if i < 8 {
            return i as u64;
        }
        let (p, sub) = (i / 8, i % 8);
        (1u64 << p) + ((sub as u64) << (p - 3))
    }
    fn record(&self, ns: u64) {
        self.b[Self::idx(ns)].fetch_add(1, Ordering::Relaxed);
    }
    fn total(&self) -> u64 {
        self.b.iter().map(|x| x.load(Ordering::Relaxed)).sum()
    }
    fn quantile(&self, q: f64) -> u64 {
        let total = self.total();
        let want = ((total as f64) * q).ceil() as u64;
        let mut acc = 0;
        for (i, x) in self.b.iter().enumerate() {
            acc += x.load(Ordering::Relaxed);
            if acc >= want {
                return Self::lower(i + 1);
            }
        }
        u64::MAX
    }
}

/// 2 writers insert random keys, 1 reader checks previously written keys, background
/// maintenance reorganizes and splits. Records every upsert's latency.
/// `assert_pause`: enforce the p99.9 target (only meaningful in an optimized build).
/// `maintenance == false` is the control run: no background thread, no splits.
fn concurrency(secs: u64, split_threshold: usize, assert_pause: bool, maintenance: bool) {
    let t = Arc::new(T1::new(T1Config {
        split_threshold: if maintenance {
            split_threshold
        } else {
            usize::MAX
        },
        reorganize_threshold: if maintenance {
            split_threshold / 8
        } else {
            usize::MAX
        },
        bloom_bits_per_key: 10,
        background: maintenance,
    }));
    let hist = Arc::new(Hist::new());
    let stop = Arc::new(AtomicBool::new(false));
    let seq = Arc::new(AtomicU64::new(1));
    let written: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut ws = Vec::new();
    for w in 0..2u64 {
        let (t, hist, stop, seq, written) = (
            t.clone(),
            hist.clone(),
            stop.clone(),
            seq.clone(),
            written.clone(),
        );
        ws.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(w);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Random keys; writer w owns keys with low bit w, numbered by i so the
                // reader can regenerate them.
                let k = key(scramble(i) << 1 | w);
                let s = seq.fetch_add(1, Ordering::Relaxed);
                let t0 = Instant::now();
                let r = t.upsert(&k, entry(s));
                hist.record(t0.elapsed().as_nanos() as u64);
                assert!(!matches!(r, vmemkv::internals::Upsert::Stale));
                i += 1;
                written[w as usize].store(i, Ordering::Release);
                if rng.random_range(0..1_000_000) == 0 {
                    std::thread::yield_now();
                }
            }
            i
        }));
    }
    let reader = {
        let (t, stop, written) = (t.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(99);
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let w = rng.random_range(0..2u64);
                let done = written[w as usize].load(Ordering::Acquire);
                if done == 0 {
                    continue;
                }
                let i = rng.random_range(0..done);
                assert!(
                    t.get(&key(scramble(i) << 1 | w)).is_some(),
                    "reader saw key {i} of writer {w} missing"
                );
                checks += 1;
            }
            checks
        })
    };
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let inserted: u64 = ws.into_iter().map(|h| h.join().unwrap()).sum();
    let checks = reader.join().unwrap();
    let s = t.stats();
    println!(
        "concurrency{}: {secs}s, split_threshold={split_threshold}, {inserted} upserts ({:.0}/s), {checks} reader checks, shards={} splits={} reorganizes={} max_split_pause={:?} max_drain={:?} writer_waits={} max_writer_wait={:?} max_reorganize={:?}",
        if maintenance { "" } else { " (control, no maintenance)" },
        inserted as f64 / secs as f64,
        s.shards,
        s.splits,
        s.reorganizes,
        s.max_split_pause,
        s.max_drain,
        s.writer_waits,
        s.max_writer_wait,
        s.max_reorganize
    );
    let (p50, p99, p999, p9999) = (
        hist.quantile(0.5),
        hist.quantile(0.99),
        hist.quantile(0.999),
        hist.quantile(0.9999),
    );
    let max = hist
        .b
        .iter()
        .rposition(|x| x.load(Ordering::Relaxed) > 0)
        .map_or(0, |i| Hist::lower(i + 1));
    println!(
        "writer latency: p50<{p50} ns p99<{p99} ns p99.9<{p999} ns p99.99<{p9999} ns max<{max} ns; p99.9 target <5 ms: {}",
        if p999 < 5_000_000 { "MET" } else { "MISSED" }
    );
    println!("writer latency histogram (bucket lower bound ns: count):");
    let mut line = String::new();
    for (i, x) in hist.b.iter().enumerate() {
        let c = x.load(Ordering::Relaxed);
        if c > 0 {
            line.push_str(&format!(" {}:{}", Hist::lower(i), c));
        }
    }
    println!("{line}");
    if maintenance {
        assert!(s.splits > 0, "concurrency run produced no split");
    }
    if assert_pause {
        assert!(p999 < 5_000_000, "writer p99.9 {p999} ns");
    }
}

/// A bijection on u64 so writers insert keys in random order.
fn scramble(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x & ((1 << 62) - 1)
}
