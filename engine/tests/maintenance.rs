//! Checkpoint, defragment and reorganize while writers run, checked against
//! a model; then the same after a reopen.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use vmemkv::{Db, Options, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Writer `t` owns keys `i` with `i % 2 == t`, so its model is exact.
fn writer(db: &Db, t: u64, ops: u64) -> Model {
    let mut m = Model::new();
    let mut x = 0x1234_5678_9abc_def0u64 ^ t;
    for n in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % 1500) * 2 + t;
        let k = key(i);
        match x % 10 {
            0 => {
                db.delete(&k).unwrap_or_else(|e| panic!("delete: {e}"));
                m.remove(&k);
            }
            1 => {
                let mut b = WriteBatch::new();
                let k2 = key(i + 2);
                let v = value(i, n, 50);
                b.put(&k, &v);
                b.delete(&k2);
                db.write(&WriteOptions::default(), &b)
                    .unwrap_or_else(|e| panic!("batch: {e}"));
                m.insert(k, v);
                m.remove(&k2);
            }
            _ => {
                let v = value(i, n, (x % 1800) as usize);
                db.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
                m.insert(k, v);
            }
        }
    }
    m
}

#[test]
fn maintenance_under_concurrent_writers_matches_model_index_walk() {
    maintenance_run(opts().defrag_index_walk(Some(true)));
}

#[test]
fn maintenance_under_concurrent_writers_matches_model_segment_walk() {
    maintenance_run(opts().defrag_index_walk(Some(false)));
}

/// The same with the background thread sorting runs of 256 KiB (and
/// merging them, most times) under the writers, beside the explicit
/// maintenance.
#[test]
fn maintenance_under_concurrent_writers_matches_model_with_sorted_runs() {
    let o = opts()
        .background(true)
        .maintenance_interval_ms(2)
        .sorted_run_bytes(256 << 10);
    let dir = maintenance_run(o);
    let log = info_log(dir.path());
    assert!(log.contains("sorted run: sorted"), "{log}");
}

fn maintenance_run(o: Options) -> tempfile::TempDir {
    let dir = tmp();
    let db = Arc::new(Db::open(dir.path(), o).unwrap_or_else(|e| panic!("{e}")));
    let stop = Arc::new(AtomicBool::new(false));
    let maint = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut cycles = 0u32;
            while !stop.load(Ordering::Relaxed) || cycles < 3 {
                db.checkpoint()
                    .unwrap_or_else(|e| panic!("checkpoint: {e}"));
                db.defragment()
                    .unwrap_or_else(|e| panic!("defragment: {e}"));
                db.reorganize()
                    .unwrap_or_else(|e| panic!("reorganize: {e}"));
                cycles += 1;
            }
            cycles
        })
    };
    let reader = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in (0..3000u64).step_by(7) {
                    db.get_into(&key(i), &mut buf)
                        .unwrap_or_else(|e| panic!("get: {e}"));
                }
                let d = dump(&db);
                assert!(d.len() <= 3002);
                n += 1;
            }
            n
        })
    };
    let ws: Vec<_> = (0..2u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || writer(&db, t, 40_000))
        })
        .collect();
    let mut model = Model::new();
    for w in ws {
        model.extend(w.join().unwrap_or_else(|_| panic!("writer panicked")));
    }
    stop.store(true, Ordering::Relaxed);
    let cycles = maint
        .join()
        .unwrap_or_else(|_| panic!("maintenance panicked"));
    let scans = reader.join().unwrap_or_else(|_| panic!("reader panicked"));
    assert!(cycles >= 3 && scans >= 1);
    assert_eq!(dump(&db), model, "live state differs from the model");
    let s = db.statistics();
    eprintln!("after the concurrent run:\n{s}");
    assert!(s.defrag_cycles >= 3, "{s:?}");
    assert!(
        s.defrag_moved_bytes > 0,
        "defragment never moved a value: {s:?}"
    );
    assert!(
        s.defrag_retired_segments > 0,
        "defragment never freed a segment: {s:?}"
    );
    let live_in_model: u64 = model
        .iter()
        .filter(|(_, v)| v.len() > 8)
        .map(|(k, v)| (k.len() + v.len() + vmemkv::ENTRY_OVERHEAD) as u64)
        .sum();
    assert_eq!(
        s.t2_live_bytes, live_in_model,
        "live-byte accounting drifted"
    );
    drop(db);
    let db = open(dir.path());
    assert_eq!(
        dump(&db),
        model,
        "state after reopen differs from the model"
    );
    db.defragment().unwrap_or_else(|e| panic!("{e}"));
    let s = db.statistics();
    assert!(
        s.t2_total_bytes <= 2 * s.t2_live_bytes + 3 * (1 << 20),
        "space not reclaimed: {s:?}"
    );
    drop(db);
    let db = open(dir.path());
    assert_eq!(dump(&db), model, "state after defragment + reopen differs");
    drop(db);
    dir
}

#[test]
fn background_thread_checkpoints_and_reclaims() {
    let dir = tmp();
    let opts = Options::default()
        .segment_size(1 << 20)
        .checkpoint_interval_bytes(1 << 20)
        .maintenance_interval_ms(5);
    let db = Db::open(dir.path(), opts.clone()).unwrap_or_else(|e| panic!("{e}"));
    for round in 0..20u64 {
        for i in 0..500u64 {
            db.put(&key(i), &value(i, round, 1000))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Give the maintenance thread a moment to catch up.
    let t0 = std::time::Instant::now();
    while db.statistics().t2_total_bytes > 4 * (1 << 20) && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let s = db.statistics();
    assert!(s.checkpoints > 0, "{s:?}");
    assert!(s.t2_total_bytes <= 4 * (1 << 20), "{s:?}");
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..500u64 {
        assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 19, 1000)));
    }
}

/// Overwrites 4,000 keys of 1 KB (4 MB live: more than the two segments
/// below which nothing is throttled) in a loop until `until` holds or
/// 10 s pass; returns the longest single put.
fn overwrite_until(db: &Db, until: impl Fn(&vmemkv::Statistics) -> bool) -> std::time::Duration {
    let t0 = std::time::Instant::now();
    let mut longest = std::time::Duration::ZERO;
    let mut n = 0u64;
    while t0.elapsed().as_secs() < 10 {
        for i in 0..4000u64 {
            let t = std::time::Instant::now();
            db.put(&key(i), &value(i, n, 1000))
                .unwrap_or_else(|e| panic!("{e}"));
            longest = longest.max(t.elapsed());
        }
        n += 1;
        if until(&db.statistics()) {
            break;
        }
    }
    longest
}

#[test]
fn writes_are_throttled_past_the_space_limit_but_never_stall() {
    let dir = tmp();
    // A limit T2 can never meet (its active and spare segments alone exceed
    // 1.01x the live bytes): the throttle must engage and stay on.
    let opts = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(10)
        .max_space_amplification(1.01);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    let longest = overwrite_until(&db, |s| s.delayed_writes > 100);
    let s = db.statistics();
    assert!(s.write_rate_limit > 0, "throttle never engaged: {s:?}");
    assert!(s.delayed_writes > 100, "{s:?}");
    // A throttled write sleeps at most 50 ms. The longest put's wall time
    // also holds rollovers and fsyncs, which a loaded machine stretches,
    // so it is bounded far below a stall (the limit is never met, so a
    // write stop would last the whole run) but far above 50 ms.
    assert!(
        s.write_delay_us <= s.delayed_writes * 50_000,
        "throttled writes slept {} us in {} delays: {s:?}",
        s.write_delay_us,
        s.delayed_writes
    );
    assert!(longest < std::time::Duration::from_secs(2), "{longest:?}");
    // The data is intact.
    for i in 0..4000u64 {
        let v = db.get(&key(i)).ok().flatten().unwrap_or_default();
        assert_eq!(v.len(), 1000);
    }
    let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap_or_default();
    assert!(log.contains("write throttle: on"), "LOG does not record it");
}

#[test]
fn no_throttle_when_disabled() {
    let dir = tmp();
    let opts = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(10)
        .max_space_amplification(0.0);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    let t0 = std::time::Instant::now();
    overwrite_until(&db, |_| t0.elapsed().as_millis() > 1500);
    let s = db.statistics();
    assert_eq!((s.write_rate_limit, s.delayed_writes), (0, 0), "{s:?}");
}

#[test]
fn compact_range_rewrites_values_in_key_order() {
    let dir = tmp();
    let db = open(dir.path());
    // 3,000 keys of 300 B written in a scrambled order, half overwritten.
    let mut model = Model::new();
    for round in 0..2u64 {
        for n in 0..3000u64 {
            let i = (n * 7919) % 3000;
            if round == 1 && i % 2 == 0 {
                continue;
            }
            let v = value(i, round, 300);
            db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
            model.insert(key(i), v);
        }
    }
    let before = db.statistics();
    assert_eq!(
        (before.rewrite_us, before.rewrite_cpu_us),
        (0, 0),
        "{before:?}"
    );
    // A bounded range first: nothing outside it moves.
    let part = db
        .compact_range(Some(&key(1000)), Some(&key(1100)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        part.moved_values > 0 && part.moved_values <= 100,
        "{part:?}"
    );
    let full = db
        .compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        full.moved_values > 2500,
        "scrambled values were not moved: {full:?}"
    );
    assert!(
        !full.retired_segments.is_empty() && full.reclaimed_bytes > 0,
        "emptied segments were not retired: {full:?}"
    );
    // Now in key order: a second pass finds every value in place.
    let again = db
        .compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.moved_values, 0, "still out of order: {again:?}");
    // The rewrites' time is counted (db_bench's Comp(sec) and
    // CompMergeCPU(sec)): moving 2,500+ values takes some CPU, and a
    // rewrite's CPU time cannot exceed the wall time it held the lock.
    let after = db.statistics();
    assert!(
        after.rewrite_us > 0 && after.rewrite_cpu_us > 0,
        "{after:?}"
    );
    assert!(after.rewrite_cpu_us <= after.rewrite_us + 1000, "{after:?}");
    assert!(after
        .to_string()
        .contains(&format!("busy_us={}", after.rewrite_us)));
    assert_eq!(dump(&db), model);
    drop(db);
    let db = open(dir.path());
    assert_eq!(dump(&db), model, "after reopen");
}

/// A key-order load is rewritten once, packed (no header or key between
/// values); values already packed in key order then stay where they are.
#[test]
fn compact_range_packs_a_key_order_load_once() {
    let dir = tmp();
    let db = open(dir.path());
    put_range(&db, 3000, 0, 300);
    let r = db
        .compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.moved_values, 3000, "{r:?}");
    let again = db
        .compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(again.moved_values < 50, "{again:?}");
    for i in (0..3000u64).step_by(97) {
        assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 0, 300)));
    }
}

#[test]
fn a_pure_insert_of_small_values_is_neither_throttled_nor_defragmented() {
    // Record headers are ~40% of a 100-byte value's record; they are not
    // garbage, so nothing may take them for space amplification.
    let dir = tmp();
    let opts = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(10);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..60_000u64 {
        db.put(&key(i), &value(i, 0, 100))
            .unwrap_or_else(|e| panic!("{e}"));
        if i % 10_000 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let s = db.statistics();
    assert!(s.t2_segments >= 8, "{s:?}");
    assert_eq!(
        (s.write_rate_limit, s.delayed_writes, s.defrag_moved_bytes),
        (0, 0, 0),
        "{s:?}"
    );
}

/// Options for the quiet-time merge tests: background maintenance every
/// 5 ms, no key-order pass.
fn merge_opts(idle_ms: u64) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5)
        .order_idle_ms(0)
        .merge_idle_ms(idle_ms)
}

fn merges(db: &Db) -> u64 {
    db.statistics().t1_reorganizes
}

/// Waits up to 10 s for `n` T1 merges; whether they came.
fn wait_for_merges(db: &Db, n: u64) -> bool {
    let t0 = std::time::Instant::now();
    while merges(db) < n && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    merges(db) >= n
}

/// A database whose writes went quiet for `merge_idle_ms` has its T1
/// append regions merged in the background, once per quiet period; with
/// 0 they stay (below the 64K-entry threshold nothing else merges them).
#[test]
fn a_quiet_database_merges_its_append_regions_once_per_quiet_period() {
    for idle in [50u64, 0] {
        let dir = tmp();
        let db = Db::open(dir.path(), merge_opts(idle)).unwrap_or_else(|e| panic!("{e}"));
        put_range(&db, 2000, 0, 100);
        if idle == 0 {
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert_eq!(merges(&db), 0, "merge_idle_ms=0 never merges");
            continue;
        }
        wait_for_merges(&db, 1);
        // A stall of the load itself (50 ms on a loaded machine) was a
        // quiet period too: count once the merges have held still a while.
        let mut first = merges(&db);
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let now = merges(&db);
            if now == first {
                break;
            }
            first = now;
        }
        assert!(first >= 1, "no merge after the writes went quiet");
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(merges(&db), first, "merged again with no new write");
        db.put(&key(5), &value(5, 1, 100))
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for_merges(&db, first + 1);
        assert!(merges(&db) > first, "a new write, a new quiet period");
        for i in 0..2000u64 {
            let want = value(i, u64::from(i == 5), 100);
            assert_eq!(db.get(&key(i)).ok().flatten(), Some(want), "key {i}");
        }
    }
}

/// An opened database counts as quiet: what recovery replayed into T1's
/// append regions is merged at the first maintenance tick, without
/// waiting out `merge_idle_ms`.
#[test]
fn a_reopened_database_merges_what_recovery_replayed_at_once() {
    let dir = tmp();
    put_range(&open(dir.path()), 2000, 0, 100);
    let db = Db::open(dir.path(), merge_opts(60_000)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        wait_for_merges(&db, 1),
        "no merge long before merge_idle_ms: {:?}",
        db.statistics()
    );
    for i in 0..2000u64 {
        assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 0, 100)));
    }
}

#[test]
fn automatic_checkpoints_wait_for_twice_the_snapshot_in_log() {
    let dir = tmp();
    // Only the automatic trigger checkpoints: no defragment, runs or
    // key-order pass.
    let opts = Options::default()
        .segment_size(1 << 20)
        .checkpoint_interval_bytes(64 << 10)
        .maintenance_interval_ms(1)
        .defrag_garbage_ratio(1.0)
        .max_space_amplification(0.0)
        .sorted_run_bytes(0)
        .order_idle_ms(0);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    let (keys, len) = (20_000u64, 100usize);
    put_range(&db, keys, 0, len);
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    let s0 = db.statistics();
    let snapshot = s0.checkpoint_last_bytes;
    // Each key is in the snapshot.
    assert!(snapshot >= keys * key(0).len() as u64, "{s0:?}");
    // Rounds of 2,000 overwrites with a pause after each, so that the
    // maintenance thread keeps up with a 64 KiB trigger (one checkpoint a
    // round) but not with the snapshot rule (one every few rounds).
    let (rounds, per) = (100u64, 2_000u64);
    for r in 0..rounds {
        for j in 0..per {
            let i = (r * per + j) % keys;
            db.put(&key(i), &value(i, r + 1, len))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let s = db.statistics();
    let automatic = s.checkpoints - s0.checkpoints;
    // A put's record is its key, value, headers and checksums: under 256 B.
    let log = rounds * per * 256;
    assert!(
        automatic <= log / (2 * snapshot) + 1,
        "{automatic} checkpoints for at most {log} bytes of log with a {snapshot}-byte snapshot"
    );
    assert!(automatic >= 1, "{s:?}");
    drop(db);
    let db = open(dir.path());
    for i in (0..keys).step_by(997) {
        let last = (rounds * per - 1 - i) / keys * keys + i;
        assert_eq!(
            db.get(&key(i)).ok().flatten(),
            Some(value(i, last / per + 1, len))
        );
    }
}

/// A maintenance step ends with a checkpoint, which rewrites all of T1; so
/// a step moves up to twice the snapshot (within a quarter of the live
/// bytes) rather than `defrag_max_bytes_per_cycle` when the index is large
/// against that cap. 200-byte keys make the snapshot about half of the
/// live bytes, and a 1 MiB cap then means a quarter of them per step.
#[test]
fn maintenance_steps_grow_with_the_snapshot() {
    let dir = tmp();
    let opts = Options::default()
        .segment_size(1 << 20)
        .defrag_max_bytes_per_cycle(1 << 20)
        .background(false);
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("{e}"));
    let (keys, len) = (60_000u64, 200usize);
    let long = |i: u64| {
        let mut k = key(i);
        k.resize(200, b'-');
        k
    };
    for i in 0..keys {
        db.put(&long(i), &value(i, 0, len))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    let s0 = db.statistics();
    assert!(s0.checkpoint_last_bytes >= keys * 200, "{s0:?}");
    // The key-order pass packs the load: every value moves.
    let r = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert!(r.moved_values >= keys - 1, "{r:?}");
    let steps = db.statistics().checkpoints - s0.checkpoints;
    // ~28 MB live: four steps of a quarter (five with rounding). With
    // 1 MiB steps it takes 15: a step stops only between windows of 4096
    // values (1.6 MB here).
    assert!((2..=5).contains(&steps), "{steps} steps: {r:?}");
    for i in 0..keys {
        assert_eq!(
            db.get(&long(i)).ok().flatten(),
            Some(value(i, 0, len)),
            "key {i}"
        );
    }
}

/// Waits (up to 5 s) until segment `id`'s file exists.
fn wait_for_segment(dir: &std::path::Path, id: u32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !seg_path(dir, id).exists() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

#[test]
fn two_spare_segments_are_kept_ready_and_removed_at_close() {
    let dir = tmp();
    let o = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5);
    let db = Db::open(dir.path(), o.clone()).unwrap_or_else(|e| panic!("{e}"));
    // Segment 0 is active: 1 and 2 are made ahead of need, and no third.
    assert!(wait_for_segment(dir.path(), 2), "spares 1 and 2 never made");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!seg_path(dir.path(), 3).exists(), "more than two spares");
    // ~1.2 MB: the log rolls over into spare 1; spare 3 follows.
    put_range(&db, 400, 0, 3000);
    assert!(wait_for_segment(dir.path(), 3), "spare 3 never made");
    drop(db);
    assert!(
        seg_path(dir.path(), 1).exists(),
        "the active segment removed"
    );
    for id in [2, 3] {
        assert!(
            !seg_path(dir.path(), id).exists(),
            "spare {id} left at close"
        );
    }
    let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..400 {
        let got = db.get(&key(i)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got.as_deref(),
            Some(value(i, 0, 3000).as_slice()),
            "key {i}"
        );
    }
}
