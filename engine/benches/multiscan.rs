//! MultiScan benchmark with the shape of RocksDB PR 14100's db_bench run,
//! scaled down: `MS_KEYS` keys (default 1M) of 64 bytes with 512-byte
//! values, loaded in key order (`MS_ORDER=seq`) or random order
//! (`MS_ORDER=random`); each op is 15 ranges of 100 keys, 25,000 keys apart,
//! at a random start. Cold runs evict every segment from the page cache
//! (msync + MADV_DONTNEED + POSIX_FADV_DONTNEED) before each op, outside the
//! timed region. Threads: `MS_THREADS` (default "1,2"). Warm runs make the
//! whole data set resident and mapped once, then run `MS_WARM_OPS` ops per
//! mode (default 400). `MS_PHASES=cold,warm` selects phases.
//!
//! Run: `cargo bench -p vmemkv --bench multiscan` (env: MS_KEYS, MS_ORDER,
//! MS_OPS, MS_THREADS). The data is written with `Log::append` + T1 upserts
//! (the engine's write path) into a temporary directory under
//! `MS_DIR` (default /tmp).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use vmemkv::internals::Kind;
use vmemkv::internals::Log;
use vmemkv::internals::MapOpts;
use vmemkv::internals::{self as multiscan, residency};
use vmemkv::internals::{Entry, Locator, Payload, T1Config, T1};
use vmemkv::{BufferMode, MultiScanOptions, ScanRange};

const SEG: usize = 64 << 20;
const SCANS: u64 = 15;
const NEXTS: u64 = 100;
const STRIDE: u64 = 25_000;

struct Store {
    t1: T1,
    log: Log,
}

fn key(i: u64) -> Vec<u8> {
    let mut k = format!("{i:016}").into_bytes();
    k.resize(64, b'k');
    k
}

fn env<T: std::str::FromStr>(name: &str, d: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn rng(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn load(dir: &std::path::Path, n: u64, random: bool) -> Store {
    let mo = MapOpts {
        prefault: false,
        random: true,
    };
    let log = Log::create(dir, SEG, mo).unwrap_or_else(|e| panic!("{e}"));
    let t1 = T1::new(T1Config {
        background: false,
        ..T1Config::default()
    });
    let mut order: Vec<u64> = (0..n).collect();
    if random {
        let mut s = 0x1234_5678_9abc_def1u64;
        for i in (1..order.len()).rev() {
            let j = (rng(&mut s) % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
    }
    let mut v = vec![0u8; 512];
    let mut s = 42u64;
    for &i in &order {
        for c in v.chunks_mut(8) {
            let r = rng(&mut s).to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
        let k = key(i);
        let a = log
            .append(
                Kind::Batch,
                1,
                None,
                0,
                &[&k, &crc32c::crc32c(&v).to_le_bytes(), &v],
            )
            .unwrap_or_else(|e| panic!("{e}"));
        t1.upsert(
            &k,
            Entry {
                seq: a.lsn,
                payload: Payload::Stored(Locator {
                    segment: a.seg.id,
                    offset: (a.body_off + k.len() + 4) as u32,
                    len: v.len() as u32,
                }),
            },
        );
    }
    t1.reorganize_all();
    Store { t1, log }
}

static READS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn op(st: &Store, n: u64, seed: &mut u64, async_io: bool, mode: BufferMode) -> usize {
    let span = (SCANS - 1) * STRIDE + NEXTS;
    let base = rng(seed) % n.saturating_sub(span).max(1);
    let ranges = (0..SCANS)
        .map(|i| {
            let s = base + i * STRIDE;
            ScanRange::new(&key(s), &key(s + NEXTS))
        })
        .collect();
    let args = MultiScanOptions {
        buffer_mode: mode,
        ..MultiScanOptions::with_async_io(ranges, async_io)
    };
    let mut ms = multiscan::multi_scan(&st.t1, &st.log, &args).unwrap_or_else(|e| panic!("{e}"));
    // Consume like a reader would: copy every value out (this is what
    // touches the mapping on the synchronous path).
    let mut copy = Vec::with_capacity(1024);
    let mut bytes = 0;
    while ms.next_range().unwrap_or_else(|e| panic!("{e}")) {
        while ms.next_entry().unwrap_or_else(|e| panic!("{e}")) {
            copy.clear();
            copy.extend_from_slice(ms.value());
            bytes += ms.key().len() + std::hint::black_box(&copy).len();
        }
    }
    READS.fetch_add(ms.stats().reads, std::sync::atomic::Ordering::Relaxed);
    bytes
}

/// Makes the whole data set resident and mapped (a warm cache).
fn warm_all(st: &Store) {
    let mut sum = 0u64;
    for s in st.log.segments() {
        let used = s.used();
        for off in (0..used).step_by(4096) {
            sum += u64::from(s.bytes(off, 1).map_or(0, |b| b[0]));
        }
    }
    std::hint::black_box(sum);
}

// Distinct symbols per mode, so that `valgrind --tool=callgrind` separates
// their instruction counts in the warm-interleaved phase.
#[inline(never)]
fn op_sync(st: &Store, n: u64, seed: &mut u64) -> usize {
    op(st, n, seed, false, BufferMode::Owned)
}

#[inline(never)]
fn op_owned(st: &Store, n: u64, seed: &mut u64) -> usize {
    op(st, n, seed, true, BufferMode::Owned)
}

#[inline(never)]
fn op_pagecache(st: &Store, n: u64, seed: &mut u64) -> usize {
    op(st, n, seed, true, BufferMode::PageCache)
}

#[inline(never)]
fn op_direct(st: &Store, n: u64, seed: &mut u64) -> usize {
    op(st, n, seed, true, BufferMode::Direct)
}

fn evict(st: &Store) {
    for s in st.log.segments() {
        residency::evict(&s).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// (reads completed, sectors read) of the busiest disk.
fn disk() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    s.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (r, sec) = (f.get(3)?.parse().ok()?, f.get(5)?.parse().ok()?);
            Some((r, sec))
        })
        .max_by_key(|x: &(u64, u64)| x.1)
        .unwrap_or((0, 0))
}

struct Run {
    ops: u64,
    busy: Duration,
    reads: u64,
    sectors: u64,
}

/// `ops` rounds; each round every thread runs one op; cold rounds evict
/// first (untimed). Timing covers only the ops of a round.
fn measure(
    st: &Arc<Store>,
    n: u64,
    threads: usize,
    rounds: u64,
    cold: bool,
    a: bool,
    mode: BufferMode,
) -> Run {
    let bar = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (st, bar) = (st.clone(), bar.clone());
            std::thread::spawn(move || {
                let mut seed = 0x9E37_79B9 + t as u64 * 7919 + rounds;
                for _ in 0..rounds {
                    bar.wait();
                    op(&st, n, &mut seed, a, mode);
                    bar.wait();
                }
            })
        })
        .collect();
    let mut busy = Duration::ZERO;
    let (mut reads, mut sectors) = (0, 0);
    for _ in 0..rounds {
        if cold {
            evict(st);
        }
        let d0 = disk();
        let t0 = Instant::now();
        bar.wait();
        bar.wait();
        busy += t0.elapsed();
        let d1 = disk();
        reads += d1.0 - d0.0;
        sectors += d1.1 - d0.1;
    }
    for h in hs {
        h.join().unwrap_or_else(|_| panic!("bench thread panicked"));
    }
    Run {
        ops: rounds * threads as u64,
        busy,
        reads,
        sectors,
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Warm cache: each thread runs the modes round-robin, op by op, on the
/// same ranges, timing each op by wall clock and by thread CPU time (the
/// latter is immune to other processes taking the CPU).
fn warm_interleaved(
    st: &Arc<Store>,
    n: u64,
    threads: usize,
    rounds: u64,
    modes: &[(&str, bool, BufferMode)],
) {
    let modes: Vec<(bool, BufferMode)> = modes.iter().map(|m| (m.1, m.2)).collect();
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (st, modes) = (st.clone(), modes.clone());
            std::thread::spawn(move || {
                let mut acc = vec![(Duration::ZERO, Duration::ZERO, 0u64); modes.len()];
                let mut seed = 0x51ED_2701 + t as u64;
                for r in 0..rounds {
                    let s0 = seed;
                    // Rotate which mode goes first: the first one pays for
                    // any page the kernel evicted meanwhile.
                    for k in 0..modes.len() {
                        let i = (k + r as usize) % modes.len();
                        let (a, m) = modes[i];
                        seed = s0;
                        let (w, c) = (Instant::now(), thread_cpu());
                        let r0 = READS.load(std::sync::atomic::Ordering::Relaxed);
                        match (a, m) {
                            (false, _) => op_sync(&st, n, &mut seed),
                            (true, BufferMode::Owned) => op_owned(&st, n, &mut seed),
                            (true, BufferMode::PageCache | BufferMode::Auto) => {
                                op_pagecache(&st, n, &mut seed)
                            }
                            (true, BufferMode::Direct) => op_direct(&st, n, &mut seed),
                        };
                        acc[i].0 += w.elapsed();
                        acc[i].1 += thread_cpu().saturating_sub(c);
                        acc[i].2 += READS.load(std::sync::atomic::Ordering::Relaxed) - r0;
                    }
                }
                acc
            })
        })
        .collect();
    let mut tot = vec![(Duration::ZERO, Duration::ZERO, 0u64); modes.len()];
    for h in hs {
        for (i, a) in h
            .join()
            .unwrap_or_else(|_| panic!("bench thread panicked"))
            .iter()
            .enumerate()
        {
            tot[i].0 += a.0;
            tot[i].1 += a.1;
            tot[i].2 += a.2;
        }
    }
    tot
        .iter()
        .enumerate()
        .for_each(|(i, &(w, c, reads))| {
            let ops = (rounds * threads as u64) as f64;
            let us = |d: Duration| d.as_secs_f64() * 1e6 / ops;
            println!(
                "threads={threads} warm-interleaved mode {i}: {:8.1} us/op wall, {:8.1} us/op cpu (x{:.3} / x{:.3} of mode 0), {:.2} io_uring reads/op",
                us(w),
                us(c),
                w.as_secs_f64() / tot[0].0.as_secs_f64(),
                c.as_secs_f64() / tot[0].1.as_secs_f64(),
                reads as f64 / ops
            );
        });
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("multiscan: bench");
        return;
    }
    let n: u64 = env("MS_KEYS", 1_000_000);
    let random = env("MS_ORDER", "seq".to_string()) == "random";
    let rounds: u64 = env("MS_OPS", 40);
    let threads: Vec<usize> = env("MS_THREADS", "1,2".to_string())
        .split(',')
        .filter_map(|t| t.parse().ok())
        .collect();
    let root = env("MS_DIR", "/tmp".to_string());
    let dir = tempfile::tempdir_in(root).unwrap_or_else(|e| panic!("{e}"));
    let t0 = Instant::now();
    let st = Arc::new(load(dir.path(), n, random));
    println!(
        "loaded {n} keys ({}) in {:.1}s, {} segments",
        if random { "random order" } else { "key order" },
        t0.elapsed().as_secs_f64(),
        st.log.segments().len()
    );
    st.log
        .sync_to(st.log.tail_lsn())
        .unwrap_or_else(|e| panic!("{e}"));
    let modes = [
        ("sync", false, BufferMode::Owned),
        ("async-owned", true, BufferMode::Owned),
        ("async-pagecache", true, BufferMode::PageCache),
        ("async-direct", true, BufferMode::Direct),
    ];
    let warm_rounds: u64 = env("MS_WARM_OPS", 400);
    let phases = env("MS_PHASES", "cold,warm".to_string());
    if phases.contains("interleaved") {
        warm_all(&st);
        for &th in &threads {
            warm_interleaved(&st, n, th, warm_rounds, &modes);
        }
    }
    for &th in &threads {
        for cold in [true, false] {
            if !phases.contains(if cold { "cold" } else { "warm" }) {
                continue;
            }
            let rounds = if cold { rounds } else { warm_rounds };
            // Interleave modes in 4 slices so that drift hits all alike.
            let mut acc: Vec<(u64, Duration, u64, u64)> =
                vec![(0, Duration::ZERO, 0, 0); modes.len()];
            for _slice in 0..4 {
                for (i, &(_, a, m)) in modes.iter().enumerate() {
                    if !cold && _slice == 0 && i == 0 {
                        warm_all(&st);
                    }
                    let r = measure(&st, n, th, rounds.div_ceil(4), cold, a, m);
                    acc[i].0 += r.ops;
                    acc[i].1 += r.busy;
                    acc[i].2 += r.reads;
                    acc[i].3 += r.sectors;
                }
            }
            let base = acc[0].0 as f64 / acc[0].1.as_secs_f64();
            for (i, &(name, _, _)) in modes.iter().enumerate() {
                let (ops, busy, reads, sectors) = acc[i];
                let s = busy.as_secs_f64();
                let ops_s = ops as f64 / s;
                println!(
                    "threads={th} {} {name:16} {:9.1} ops/s  x{:.2} vs sync  disk: {:7.0} read IOPS {:7.1} MiB/s ({} reads, {:.1} MiB)",
                    if cold { "cold" } else { "warm" },
                    ops_s,
                    ops_s / base,
                    reads as f64 / s,
                    sectors as f64 * 512.0 / s / 1048576.0,
                    reads,
                    sectors as f64 * 512.0 / 1048576.0
                );
            }
        }
    }
}
