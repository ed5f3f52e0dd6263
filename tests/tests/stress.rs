//! Concurrency stress through the `Db` trait on vmemkv: 4 to 16 threads on
//! overlapping keys run get, put, delete, batches (with the odd range
//! delete), bounded iterators in both directions and MultiScans, while
//! another thread calls checkpoint, defragment and reorganize in a loop and
//! small segments and a small split threshold make rollovers, defragment
//! cycles and shard splits frequent.
//!
//! Every value encodes `(key, writer thread, per-thread counter)` and is
//! checked in full on every read, so a torn, foreign or misplaced value is
//! caught. Per-key histories (each thread's last operation with a global
//! ticket before and after it) decide, at stop-the-world checkpoints and
//! after a reopen at the end, which final values are possible.
//!
//! `VMEMKV_STRESS_SECS` (default 3) and `VMEMKV_STRESS_THREADS` (default 8).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vmemkv_compat::{
    Db, EngineKind, EngineOptions, Error, MultiScanArgs, ReadOptions, ScanRange, WriteBatch,
    WriteOptions,
};
use vmemkv_tests::model::{Fault, ModelDb};

const NKEYS: usize = 2048;

fn key(k: usize) -> Vec<u8> {
    format!("s{k:05}").into_bytes()
}

fn parse_key(b: &[u8]) -> Option<usize> {
    let d = b.strip_prefix(b"s")?;
    if d.len() != 5 || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(d).ok()?.parse().ok()
}

fn mix(k: usize, t: usize, c: u64) -> u64 {
    let mut x = (k as u64) << 48 ^ (t as u64) << 40 ^ c.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}

/// The value thread `t` writes to key `k` with counter `c`: 8 bytes
/// (inlined) a quarter of the time, else 16 B to 2 KB, sometimes 20 KB+
/// (read with `pread`).
fn encode(k: usize, t: usize, c: u64) -> Vec<u8> {
    let h = mix(k, t, c);
    if h.is_multiple_of(4) {
        let mut v = Vec::with_capacity(8);
        v.extend_from_slice(&(k as u16).to_le_bytes());
        v.push(t as u8);
        v.extend_from_slice(&c.to_le_bytes()[..5]);
        return v;
    }
    let fill = if h % 32 == 1 {
        20_000 + (h >> 8) as usize % 8000
    } else {
        (h >> 8) as usize % 2000
    };
    let mut v = Vec::with_capacity(16 + fill);
    v.extend_from_slice(&(k as u32).to_le_bytes());
    v.extend_from_slice(&(t as u32).to_le_bytes());
    v.extend_from_slice(&c.to_le_bytes());
    v.extend((0..fill).map(|i| (h as usize).wrapping_add(i * 131) as u8));
    v
}

/// `(thread, counter)` of a value read from key `k`, if it is exactly a
/// value some thread wrote (or could have written) to `k`.
fn decode(k: usize, v: &[u8]) -> Option<(usize, u64)> {
    let (kk, t, c) = if v.len() == 8 {
        let mut c = [0u8; 8];
        c[..5].copy_from_slice(&v[3..8]);
        (
            u16::from_le_bytes([v[0], v[1]]) as usize,
            v[2] as usize,
            u64::from_le_bytes(c),
        )
    } else {
        let u32_at = |i: usize| -> Option<usize> {
            Some(u32::from_le_bytes(v.get(i..i + 4)?.try_into().ok()?) as usize)
        };
        let c = u64::from_le_bytes(v.get(8..16)?.try_into().ok()?);
        (u32_at(0)?, u32_at(4)?, c)
    };
    (kk == k && encode(k, t, c) == v).then_some((t, c))
}

/// One thread's operation on a key, bracketed by global tickets.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: u64,
    end: u64,
    /// `Some(counter)` for a put, `None` for a delete.
    put: Option<u64>,
}

struct Shared {
    db: Box<dyn Db>,
    clock: AtomicU64,
    stop: AtomicBool,
    /// Workers hold it shared per operation; the verifier takes it
    /// exclusively to see a quiescent database.
    world: RwLock<()>,
    /// `last[t][k]`: thread t's last completed operation on key k, plus the
    /// highest counter t has issued (for "was this ever written").
    last: Vec<Mutex<Vec<Option<Op>>>>,
    issued: Vec<AtomicU64>,
    ops: AtomicU64,
    reads_checked: AtomicU64,
}

fn fail(what: &str, e: Error) -> ! {
    panic!("{what}: {e}")
}

/// Checks a value read from key `k` during the run.
fn check_read(sh: &Shared, k: usize, v: &[u8], what: &str) {
    match decode(k, v) {
        Some((t, c)) if t < sh.issued.len() && c <= sh.issued[t].load(Ordering::Acquire) => {}
        _ => panic!(
            "{what}: key {k} returned {} bytes that no thread wrote to it: {:02x?}",
            v.len(),
            &v[..v.len().min(24)]
        ),
    }
    sh.reads_checked.fetch_add(1, Ordering::Relaxed);
}

fn pick(rng: &mut StdRng) -> usize {
    if rng.random_bool(0.5) {
        rng.random_range(0..64) // hot keys: many threads collide here
    } else {
        rng.random_range(0..NKEYS)
    }
}

fn worker(sh: &Shared, t: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let wo = WriteOptions::default();
    let ro = ReadOptions::default();
    let mut counter = 0u64;
    // Per key: the newest (thread, counter) this thread has seen, to catch
    // a read going back in time within one writer's sequence.
    let mut seen: BTreeMap<usize, (usize, u64)> = BTreeMap::new();
    let mut buf = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) {
        let _w = sh.world.read().unwrap_or_else(|e| e.into_inner());
        let record = |k: usize, op: Op| {
            let mut l = sh.last[t].lock().unwrap_or_else(|e| e.into_inner());
            l[k] = Some(op);
        };
        match rng.random_range(0..100) {
            0..=29 => {
                let k = pick(&mut rng);
                if sh
                    .db
                    .get_into(&ro, &key(k), &mut buf)
                    .unwrap_or_else(|e| fail("get", e))
                {
                    check_read(sh, k, &buf, "get");
                    if let Some((wt, c)) = decode(k, &buf) {
                        if let Some(&(pt, pc)) = seen.get(&k) {
                            assert!(
                                !(pt == wt && c < pc),
                                "get of key {k}: thread {wt}'s counter {c} after {pc} was seen"
                            );
                        }
                        seen.insert(k, (wt, c));
                    }
                }
            }
            30..=54 => {
                let k = pick(&mut rng);
                counter += 1;
                sh.issued[t].store(counter, Ordering::Release);
                let start = sh.clock.fetch_add(1, Ordering::SeqCst);
                sh.db
                    .put(&wo, &key(k), &encode(k, t, counter))
                    .unwrap_or_else(|e| fail("put", e));
                let end = sh.clock.fetch_add(1, Ordering::SeqCst);
                record(
                    k,
                    Op {
                        start,
                        end,
                        put: Some(counter),
                    },
                );
                // Read your own write: never an older value of this thread.
                if let Some(v) = sh.db.get(&ro, &key(k)).unwrap_or_else(|e| fail("get", e)) {
                    check_read(sh, k, &v, "read-own-write");
                    if let Some((wt, c)) = decode(k, &v) {
                        assert!(
                            !(wt == t && c < counter),
                            "key {k}: own write {counter} read back as {c}"
                        );
                    }
                }
            }
            55..=64 => {
                let k = pick(&mut rng);
                let start = sh.clock.fetch_add(1, Ordering::SeqCst);
                sh.db
                    .delete(&wo, &key(k))
                    .unwrap_or_else(|e| fail("delete", e));
                let end = sh.clock.fetch_add(1, Ordering::SeqCst);
                record(
                    k,
                    Op {
                        start,
                        end,
                        put: None,
                    },
                );
            }
            65..=79 => {
                let mut b = WriteBatch::new();
                let mut ops: BTreeMap<usize, Option<u64>> = BTreeMap::new();
                for _ in 0..rng.random_range(1..8) {
                    let k = pick(&mut rng);
                    if rng.random_bool(0.8) {
                        counter += 1;
                        ops.insert(k, Some(counter));
                    } else {
                        ops.insert(k, None);
                    }
                }
                for (&k, &p) in &ops {
                    match p {
                        Some(c) => b.put(&key(k), &encode(k, t, c)),
                        None => b.delete(&key(k)),
                    }
                }
                let range = rng.random_bool(0.03).then(|| {
                    let a = rng.random_range(64..NKEYS - 8);
                    (a, a + rng.random_range(1..8))
                });
                if let Some((a, z)) = range {
                    b.delete_range(&key(a), &key(z));
                    for k in a..z {
                        ops.insert(k, None);
                    }
                }
                sh.issued[t].store(counter, Ordering::Release);
                let start = sh.clock.fetch_add(1, Ordering::SeqCst);
                sh.db.write(&wo, &b).unwrap_or_else(|e| fail("write", e));
                let end = sh.clock.fetch_add(1, Ordering::SeqCst);
                for (&k, &put) in &ops {
                    record(k, Op { start, end, put });
                }
            }
            80..=91 => iterate(sh, &mut rng),
            _ => multiscan(sh, &mut rng),
        }
        sh.ops.fetch_add(1, Ordering::Relaxed);
    }
}

fn iterate(sh: &Shared, rng: &mut StdRng) {
    let a = rng.random_range(0..NKEYS);
    let z = (a + rng.random_range(1..400)).min(NKEYS + 1);
    let ro = ReadOptions::default().with_bounds(Some(&key(a)), Some(&key(z)));
    let mut it = sh.db.iter(&ro).unwrap_or_else(|e| fail("iter", e));
    let forward = rng.random_bool(0.7);
    if forward {
        it.seek_to_first();
    } else {
        it.seek_to_last();
    }
    let mut prev: Option<Vec<u8>> = None;
    let mut n = 0;
    while it.valid() && n < 500 {
        let kb = it.key().to_vec();
        let k = parse_key(&kb).unwrap_or_else(|| panic!("iterator: foreign key {kb:02x?}"));
        assert!((a..z).contains(&k), "iterator: key {k} outside [{a}, {z})");
        if let Some(p) = &prev {
            let ordered = if forward { *p < kb } else { *p > kb };
            assert!(
                ordered,
                "iterator ({}): {} then {}: out of order or duplicate",
                if forward { "forward" } else { "backward" },
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(&kb)
            );
        }
        check_read(sh, k, it.value(), "iterator");
        prev = Some(kb);
        n += 1;
        if forward {
            it.next();
        } else {
            it.prev();
        }
    }
    it.status().unwrap_or_else(|e| fail("iterator status", e));
}

fn multiscan(sh: &Shared, rng: &mut StdRng) {
    let mut starts: Vec<usize> = (0..rng.random_range(1..6))
        .map(|_| rng.random_range(0..NKEYS))
        .collect();
    starts.sort_unstable();
    let ranges: Vec<(usize, usize)> = starts
        .iter()
        .map(|&s| (s, s + rng.random_range(1..64)))
        .collect();
    let args = MultiScanArgs::new(
        ranges
            .iter()
            .map(|&(s, e)| ScanRange::new(&key(s), &key(e)))
            .collect(),
    );
    let mut ms = sh
        .db
        .multi_scan(&ReadOptions::default(), &args)
        .unwrap_or_else(|e| fail("multi_scan", e));
    let mut r = 0;
    while ms.next_range().unwrap_or_else(|e| fail("next_range", e)) {
        let (s, e) = ranges[ms.range_index()];
        let mut prev: Option<Vec<u8>> = None;
        while ms.next_entry().unwrap_or_else(|e| fail("next_entry", e)) {
            let kb = ms.key().to_vec();
            let k = parse_key(&kb).unwrap_or_else(|| panic!("multiscan: foreign key {kb:02x?}"));
            assert!((s..e).contains(&k), "multiscan: key {k} outside [{s}, {e})");
            assert!(
                prev.as_ref().is_none_or(|p| *p < kb),
                "multiscan range {r}: keys out of order or duplicated at {k}"
            );
            check_read(sh, k, ms.value(), "multiscan");
            prev = Some(kb);
        }
        r += 1;
    }
    assert_eq!(
        r,
        ranges.len(),
        "multiscan returned {r} of {} ranges",
        ranges.len()
    );
}

/// Checks a quiescent database against the histories: each key must hold
/// the result of an operation that no other operation on it definitely
/// followed (by tickets), or be absent if that operation was a delete.
fn verify_quiescent(sh: &Shared, db: &dyn Db, what: &str) -> usize {
    let ro = ReadOptions::default();
    let lasts: Vec<Vec<Option<Op>>> = sh
        .last
        .iter()
        .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .collect();
    let mut present = 0;
    let mut from_get = BTreeMap::new();
    for k in 0..NKEYS {
        let cands: Vec<(usize, Op)> = lasts
            .iter()
            .enumerate()
            .filter_map(|(t, l)| Some((t, l[k]?)))
            .collect();
        let latest_start = cands.iter().map(|(_, o)| o.start).max();
        // Operations not definitely followed by another.
        let maximal: Vec<&(usize, Op)> = cands
            .iter()
            .filter(|(_, o)| latest_start.is_none_or(|ls| ls < o.end))
            .collect();
        let got = db
            .get(&ro, &key(k))
            .unwrap_or_else(|e| fail(&format!("{what}: get"), e));
        match &got {
            None => assert!(
                cands.is_empty() || maximal.iter().any(|(_, o)| o.put.is_none()),
                "{what}: key {k} is absent, but its last operations were {maximal:?}"
            ),
            Some(v) => {
                let (t, c) =
                    decode(k, v).unwrap_or_else(|| panic!("{what}: key {k} holds a foreign value"));
                assert!(
                    maximal.iter().any(|&&(mt, o)| mt == t && o.put == Some(c)),
                    "{what}: key {k} holds thread {t}'s write {c}, but its last operations were {maximal:?}"
                );
                present += 1;
                from_get.insert(key(k), v.clone());
            }
        }
    }
    // A full scan agrees with the point reads.
    let it = db.iter(&ro).unwrap_or_else(|e| fail("iter", e));
    let all: Vec<(Vec<u8>, Vec<u8>)> = vmemkv_compat::Entries::from_first(it)
        .collect::<vmemkv_compat::Result<_>>()
        .unwrap_or_else(|e| fail(&format!("{what}: scan"), e));
    assert!(
        all.iter().map(|(k, v)| (k, v)).eq(from_get.iter()),
        "{what}: a full scan differs from point reads ({} vs {} keys)",
        all.len(),
        from_get.len()
    );
    present
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a run did.
struct Summary {
    ops: u64,
    present: usize,
}

fn maint(r: vmemkv_compat::Result<()>, what: &str) {
    match r {
        Ok(()) | Err(Error::NotSupported(_)) => {}
        Err(e) => fail(what, e),
    }
}

/// Runs the stress for `dur` with `threads` workers on the database that
/// `open` opens (called again for the final reopen check).
fn run_stress(open: &dyn Fn() -> Box<dyn Db>, dur: Duration, threads: usize) -> Summary {
    let db = open();
    let sh = Arc::new(Shared {
        db,
        clock: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        world: RwLock::new(()),
        last: (0..threads)
            .map(|_| Mutex::new(vec![None; NKEYS]))
            .collect(),
        issued: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        ops: AtomicU64::new(0),
        reads_checked: AtomicU64::new(0),
    });
    let t0 = Instant::now();
    let maint_rounds = AtomicU64::new(0);
    let mut quiescent_checks = 0;
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let sh = &sh;
            handles.push(s.spawn(move || worker(sh, t, 0xabc0 + t as u64)));
        }
        let maint_thread = s.spawn(|| {
            while !sh.stop.load(Ordering::Relaxed) {
                maint(sh.db.checkpoint(), "checkpoint");
                maint(sh.db.defragment(), "defragment");
                maint(sh.db.reorganize(), "reorganize");
                maint_rounds.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let deadline = t0 + dur;
        let mut result = Ok(());
        while Instant::now() < deadline && !handles.iter().any(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(700).min(dur));
            let _g = sh.world.write().unwrap_or_else(|e| e.into_inner());
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                verify_quiescent(&sh, sh.db.as_ref(), "stop-the-world check")
            }));
            if let Err(p) = r {
                result = Err(p);
                break;
            }
            quiescent_checks += 1;
        }
        sh.stop.store(true, Ordering::Relaxed);
        for h in handles {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        if let Err(p) = maint_thread.join() {
            std::panic::resume_unwind(p);
        }
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    });
    let elapsed = t0.elapsed();
    let present = verify_quiescent(&sh, sh.db.as_ref(), "final check");
    let stats = sh.db.statistics().unwrap_or_default();
    let Ok(sh) = Arc::try_unwrap(sh) else {
        panic!("shared state still referenced")
    };
    let Shared {
        db,
        last,
        issued,
        ops,
        reads_checked,
        ..
    } = sh;
    drop(db);
    let sh2 = Shared {
        db: open(),
        clock: AtomicU64::new(0),
        stop: AtomicBool::new(true),
        world: RwLock::new(()),
        last,
        issued,
        ops: AtomicU64::new(0),
        reads_checked: AtomicU64::new(0),
    };
    let after = verify_quiescent(&sh2, sh2.db.as_ref(), "after reopen");
    assert_eq!(after, present);
    let ops = ops.load(Ordering::Relaxed);
    println!(
        "stress: {threads} threads, {:.1} s, {ops} ops ({:.0} ops/s), {} reads checked, \
         {} maintenance rounds (checkpoint+defragment+reorganize), {quiescent_checks} stop-the-world checks, \
         {present} keys at the end, verified again after reopen",
        elapsed.as_secs_f64(),
        ops as f64 / elapsed.as_secs_f64(),
        reads_checked.load(Ordering::Relaxed),
        maint_rounds.load(Ordering::Relaxed),
    );
    println!("engine statistics: {stats}");
    Summary { ops, present }
}

#[test]
fn vmemkv_concurrency_stress() {
    let secs = env_or("VMEMKV_STRESS_SECS", 3);
    let threads = env_or("VMEMKV_STRESS_THREADS", 8).clamp(4, 16) as usize;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let opts = EngineOptions::default()
        .set("segment_size", 1 << 20)
        .set("split_threshold", 64)
        .set("defrag_garbage_ratio", 0.2)
        .set("checkpoint_interval_bytes", 4 << 20)
        .set("maintenance_interval_ms", 5);
    let open = || {
        vmemkv_compat::open(EngineKind::Vmemkv, dir.path(), &opts)
            .unwrap_or_else(|e| fail("open", e))
    };
    let s = run_stress(&open, Duration::from_secs(secs), threads);
    assert!(s.ops > 1000, "only {} operations ran", s.ops);
    assert!(s.present > 0);
}

/// The checker has teeth: the correct model passes, and models that
/// ignore deletes or truncate batches are caught.
#[test]
fn stress_checker_catches_defective_models() {
    let run = |fault: Fault| {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join(format!("{fault:?}"));
        let open = || {
            ModelDb::open(&path, &EngineOptions::default(), fault)
                .unwrap_or_else(|e| fail("open model", e))
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_stress(&open, Duration::from_millis(800), 4)
        }))
        .is_ok()
    };
    assert!(
        run(Fault::None),
        "the correct model failed the stress checks"
    );
    assert!(!run(Fault::DeleteIgnored), "ignored deletes went unnoticed");
    assert!(
        !run(Fault::BatchTruncated),
        "truncated batches went unnoticed"
    );
}
