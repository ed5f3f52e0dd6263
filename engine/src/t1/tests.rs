//! Unit, property and stress tests of T1 as a whole.
// `is_multiple_of` is newer than the workspace's rust-version (1.85).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::manual_is_multiple_of
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn cfg(split: usize, reorg: usize, background: bool) -> T1Config {
    T1Config {
        split_threshold: split,
        reorganize_threshold: reorg,
        bloom_bits_per_key: 10,
        background,
    }
}

fn inline(seq: u64, v: &[u8]) -> Entry {
    Entry {
        seq,
        payload: Payload::inline(v).unwrap(),
    }
}

fn stored(seq: u64, segment: u32) -> Entry {
    Entry {
        seq,
        payload: Payload::Stored(Locator {
            segment,
            offset: 16 * segment,
            len: 100,
        }),
    }
}

fn tomb(seq: u64) -> Entry {
    Entry {
        seq,
        payload: Payload::Tombstone,
    }
}

fn collect_fwd(t: &T1) -> Vec<(Vec<u8>, Entry)> {
    let mut c = t.cursor();
    let mut out = Vec::new();
    c.seek_to_first();
    while c.valid() {
        out.push((c.key().to_vec(), c.entry()));
        c.next();
    }
    out
}

fn collect_bwd(t: &T1) -> Vec<(Vec<u8>, Entry)> {
    let mut c = t.cursor();
    let mut out = Vec::new();
    c.seek_to_last();
    while c.valid() {
        out.push((c.key().to_vec(), c.entry()));
        c.prev();
    }
    out.reverse();
    out
}

#[test]
fn t1_is_send_sync_and_cursor_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<T1>();
    send::<Cursor<'static>>();
}

#[test]
fn upsert_resolves_by_seq_in_every_region() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    assert_eq!(t.upsert(b"a", inline(5, b"v5")), Upsert::Inserted);
    assert_eq!(t.upsert(b"a", inline(4, b"v4")), Upsert::Stale);
    assert_eq!(
        t.upsert(b"a", inline(5, b"w5")),
        Upsert::Replaced(inline(5, b"v5"))
    );
    assert_eq!(t.get(b"a"), Some(inline(5, b"w5")));
    t.reorganize_all();
    assert_eq!(t.stats().sorted_entries, 1);
    // The entry now lives in the sorted region only.
    assert_eq!(t.upsert(b"a", inline(3, b"v3")), Upsert::Stale);
    assert_eq!(t.get(b"a"), Some(inline(5, b"w5")));
    assert_eq!(
        t.upsert(b"a", stored(9, 1)),
        Upsert::Replaced(inline(5, b"w5"))
    );
    assert_eq!(t.upsert(b"a", tomb(10)), Upsert::Replaced(stored(9, 1)));
    assert_eq!(t.get(b"a"), None);
    assert_eq!(t.upsert(b"a", inline(11, b"x")), Upsert::Replaced(tomb(10)));
    assert_eq!(t.get(b"a"), Some(inline(11, b"x")));
    t.upsert(b"a", tomb(12));
    t.reorganize_all();
    // Tombstones are dropped by reorganize.
    assert_eq!(t.stats().sorted_entries, 0);
    assert_eq!(t.get(b"a"), None);
    assert_eq!(t.upsert(b"a", inline(13, b"y")), Upsert::Inserted);
    assert_eq!(t.get(b"missing"), None);
}

#[test]
fn tombstone_horizon_keeps_recent_deletes() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    t.set_tombstone_horizon(10);
    t.upsert(b"old", inline(1, b"a"));
    t.upsert(b"old", tomb(5));
    t.upsert(b"new", inline(2, b"b"));
    t.upsert(b"new", tomb(12));
    t.reorganize_all();
    // seq 5 <= horizon: dropped; seq 12 > horizon: kept, still hides the key.
    assert_eq!(t.get_entry(b"old"), None);
    assert_eq!(t.get_entry(b"new"), Some(tomb(12)));
    assert_eq!(t.get(b"new"), None);
    assert_eq!(t.stats().sorted_entries, 1);
    assert!(collect_fwd(&t).is_empty() && collect_bwd(&t).is_empty());
    // A late write older than the kept delete is stale.
    assert_eq!(t.upsert(b"new", inline(11, b"late")), Upsert::Stale);
    assert_eq!(
        t.upsert(b"new", inline(13, b"c")),
        Upsert::Replaced(tomb(12))
    );
    t.set_tombstone_horizon(u64::MAX);
    t.upsert(b"new", tomb(14));
    t.reorganize_all();
    assert_eq!(t.stats().sorted_entries, 0);
}

#[test]
fn relocate_checks_seq_and_locator() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    let loc = |s| Locator {
        segment: s,
        offset: 16 * s,
        len: 100,
    };
    t.upsert(b"k", stored(7, 1));
    assert!(!t.relocate(b"k", 6, loc(1), loc(2)));
    assert!(!t.relocate(b"k", 7, loc(3), loc(2)));
    assert!(t.relocate(b"k", 7, loc(1), loc(2)));
    assert_eq!(t.get(b"k"), Some(stored(7, 2)));
    t.reorganize_all();
    // Relocating an entry held by the sorted region writes a same-seq copy on top.
    assert!(t.relocate(b"k", 7, loc(2), loc(4)));
    assert_eq!(t.get(b"k"), Some(stored(7, 4)));
    assert!(!t.relocate(b"absent", 7, loc(2), loc(4)));
    t.upsert(b"k", stored(8, 5));
    assert!(!t.relocate(b"k", 7, loc(4), loc(6)));
    assert_eq!(t.get(b"k"), Some(stored(8, 5)));
}

#[test]
fn cursor_merges_regions_and_shards_both_directions() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    for i in 0..300u64 {
        t.upsert(format!("k{i:04}").as_bytes(), inline(i, b"s"));
    }
    t.reorganize_all();
    assert!(t.force_split(b"k0100", true));
    assert!(t.force_split(b"k0000", false));
    assert_eq!(t.stats().shards, 3);
    // Overwrite some, delete some, add new keys into active maps.
    for i in (0..300u64).step_by(3) {
        t.upsert(format!("k{i:04}").as_bytes(), inline(1000 + i, b"a"));
    }
    for i in (1..300u64).step_by(5) {
        t.upsert(format!("k{i:04}").as_bytes(), tomb(2000 + i));
    }
    for i in 300..320u64 {
        t.upsert(format!("k{i:04}").as_bytes(), inline(3000 + i, b"n"));
    }
    let mut model = BTreeMap::new();
    for i in 0..320u64 {
        let k = format!("k{i:04}").into_bytes();
        if i < 300 && i % 5 == 1 {
            continue;
        }
        let e = if i >= 300 {
            inline(3000 + i, b"n")
        } else if i % 3 == 0 {
            inline(1000 + i, b"a")
        } else {
            inline(i, b"s")
        };
        model.insert(k, e);
    }
    let expect: Vec<_> = model.iter().map(|(k, e)| (k.clone(), *e)).collect();
    assert_eq!(collect_fwd(&t), expect);
    assert_eq!(collect_bwd(&t), expect);
    // Direction changes across a shard boundary.
    let mut c = t.cursor();
    c.seek(b"k0100");
    assert_eq!(c.key(), b"k0100");
    c.prev();
    assert_eq!(c.key(), b"k0099");
    c.prev();
    assert_eq!(c.key(), b"k0098");
    c.next();
    c.next();
    assert_eq!(c.key(), b"k0100");
    c.seek_for_prev(b"k0101"); // deleted: lands on k0100
    assert_eq!(c.key(), b"k0100");
    c.seek(b"k0101");
    assert_eq!(c.key(), b"k0102");
    c.seek(b"z");
    assert!(!c.valid());
    assert_eq!(c.key(), b"");
    assert_eq!(c.entry(), Entry::INVALID);
    c.seek_for_prev(b"a");
    assert!(!c.valid());
    t.reorganize_all();
    assert_eq!(collect_fwd(&t), expect);
    assert_eq!(collect_bwd(&t), expect);
}

#[test]
fn maintain_splits_and_keeps_every_key() {
    let t = T1::new(cfg(1000, 200, false));
    let events = Arc::new(AtomicUsize::new(0));
    let ev = events.clone();
    t.set_listener(Box::new(move |e| {
        if matches!(e, T1Event::Split { .. }) {
            ev.fetch_add(1, Ordering::Relaxed);
        }
    }));
    for i in 0..10_000u64 {
        t.upsert(
            format!("key{:08}", i * 7919 % 10_000).as_bytes(),
            inline(i, b"v"),
        );
        if i % 500 == 0 {
            t.maintain();
        }
    }
    t.maintain();
    let s = t.stats();
    assert!(s.shards >= 8, "{s:?}");
    assert!(s.splits >= 7);
    assert!(s.reorganizes > 0);
    assert_eq!(events.load(Ordering::Relaxed) as u64, s.splits);
    for i in 0..10_000u64 {
        assert!(t.get(format!("key{i:08}").as_bytes()).is_some(), "{i}");
    }
    assert_eq!(collect_fwd(&t).len(), 10_000);
    assert_eq!(collect_bwd(&t).len(), 10_000);
}

/// The shard holding `key`: its sorted region's address and key count.
fn sorted_of(t: &T1, key: &[u8]) -> (*const Sorted, usize) {
    let dir = t.inner.dir.load();
    let st = dir.shard_for(key).unwrap().state.load();
    (Arc::as_ptr(&st.sorted), st.sorted_count())
}

#[test]
fn keys_past_the_end_split_off_instead_of_rebuilding_the_shard() {
    // split_threshold / 8 = 1000: a shard appends by splitting from 1000 keys.
    let t = T1::new(cfg(8000, 500, false));
    let key = |i: u64| format!("key{i:08}").into_bytes();
    for i in 0..1000 {
        t.upsert(&key(i), inline(i + 1, b"v"));
    }
    t.maintain();
    let (before, n) = sorted_of(&t, &key(0));
    assert_eq!(n, 1000);
    for i in 1000..1600 {
        t.upsert(&key(i), inline(i + 1, b"v"));
    }
    t.maintain();
    // The old keys' sorted region is the same one, not a copy; the new
    // keys have a shard of their own, built from them alone.
    assert_eq!(sorted_of(&t, &key(0)), (before, 1000));
    assert_eq!(sorted_of(&t, &key(999)), (before, 1000));
    assert_eq!(sorted_of(&t, &key(1000)).1, 600);
    assert_eq!(t.stats().shards, 2);
    // Under 1000 keys the right shard merges as before (1100 keys); then an
    // append region that also rewrites a key below the end merges too.
    for i in 1600..2100 {
        t.upsert(&key(i), inline(i + 1, b"v"));
    }
    t.maintain();
    assert_eq!(sorted_of(&t, &key(1000)).1, 1100);
    for i in 2100..2200 {
        t.upsert(&key(i), inline(i + 1, b"v"));
    }
    t.upsert(&key(1050), inline(5000, b"w"));
    t.reorganize_all();
    assert_eq!(sorted_of(&t, &key(1000)).1, 1200);
    assert_eq!(t.stats().shards, 2);
    assert_eq!(t.get(&key(1050)), Some(inline(5000, b"w")));
    for i in 0..2200 {
        assert!(t.get(&key(i)).is_some(), "{i}");
    }
    let all = collect_fwd(&t);
    assert_eq!(all.len(), 2200);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(collect_bwd(&t), all);
}

#[test]
fn memory_per_key_after_reorganize_is_within_budget() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    let n = 200_000u64;
    for i in 0..n {
        t.upsert(
            format!("k{:015x}", i * 2_654_435_761 % (1 << 40)).as_bytes(),
            inline(i, b"12345678"),
        );
    }
    t.reorganize_all();
    let s = t.stats();
    let per_key = s.memory_bytes as f64 / n as f64;
    assert!(per_key <= 16.0 + 40.0, "{per_key} B/key");
}

#[test]
fn bloom_filters_misses_and_counts_false_positives() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    for i in 0..50_000u64 {
        t.upsert(format!("k{i:015x}").as_bytes(), inline(i, b"v"));
    }
    t.reorganize_all();
    for i in 50_000..150_000u64 {
        assert_eq!(t.get(format!("k{i:015x}").as_bytes()), None);
    }
    let fp = t.stats().bloom_false_positives;
    assert!(fp > 0 && fp < 3_000, "false positives {fp}");
    // Disabled filter: no probes, still correct.
    let t = T1::new(T1Config {
        bloom_bits_per_key: 0,
        ..cfg(1 << 20, 1 << 20, false)
    });
    t.upsert(b"a", inline(1, b"v"));
    t.reorganize_all();
    assert_eq!(t.get(b"b"), None);
    assert!(t.get(b"a").is_some());
    assert_eq!(t.stats().bloom_false_positives, 0);
}

#[test]
fn background_thread_reorganizes_and_stops_on_drop() {
    let t = T1::new(cfg(2_000, 100, true));
    for i in 0..20_000u64 {
        t.upsert(format!("k{i:08}").as_bytes(), inline(i, b"v"));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while t.stats().splits == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let s = t.stats();
    assert!(s.reorganizes > 0 && s.splits > 0, "{s:?}");
    for i in 0..20_000u64 {
        assert_eq!(t.get(format!("k{i:08}").as_bytes()), Some(inline(i, b"v")));
    }
    drop(t);
}

// ---------- property test against BTreeMap ----------

#[derive(Clone, Debug)]
enum Op {
    Put(usize, u8),
    Del(usize),
    Reorganize,
    Maintain,
    Split(usize, bool),
    /// Split without merging the halves: they share the frozen map and sorted region.
    SplitShared(usize),
    /// Freeze the shard's append region without merging it.
    Freeze(usize),
    /// Keep tombstones newer than `seq - h` from now on (`h == 0`: drop all).
    Horizon(u64),
    Walk(usize, Vec<bool>),
}

fn freeze_shard_of(t: &T1, key: &[u8]) {
    let _g = t.inner.maint.lock();
    let dir = t.inner.dir.load_full();
    if let Some(sh) = dir.shard_for(key) {
        t.inner.freeze(sh);
    }
}

fn split_shared(t: &T1, key: &[u8]) {
    let _g = t.inner.maint.lock();
    let dir = t.inner.dir.load_full();
    if let Some(sh) = dir.shard_for(key) {
        t.inner.split_shard_opt(sh, None, false);
    }
}

fn universe() -> Vec<Vec<u8>> {
    let mut u: Vec<Vec<u8>> = vec![b"".to_vec(), b"\0".to_vec(), b"a".to_vec(), b"a\0".to_vec()];
    for i in 0..36u32 {
        u.push(format!("k{:02}", i).into_bytes());
        u.push(format!("k{:02}-long-suffix-{}", i, i % 3).into_bytes());
    }
    u.push(vec![0xff; 3]);
    u
}

fn op() -> impl Strategy<Value = Op> {
    let n = universe().len();
    prop_oneof![
        8 => (0..n, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => (0..n).prop_map(Op::Del),
        1 => Just(Op::Reorganize),
        1 => Just(Op::Maintain),
        1 => (0..n, any::<bool>()).prop_map(|(k, b)| Op::Split(k, b)),
        1 => (0..n).prop_map(Op::SplitShared),
        2 => (0..n).prop_map(Op::Freeze),
        1 => (0u64..20).prop_map(Op::Horizon),
        2 => (0..n, proptest::collection::vec(any::<bool>(), 1..12)).prop_map(|(k, w)| Op::Walk(k, w)),
    ]
}

fn check_walk(t: &T1, model: &BTreeMap<Vec<u8>, Entry>, start: &[u8], moves: &[bool]) {
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut c = t.cursor();
    c.seek(start);
    let mut pos = keys.partition_point(|k| k.as_slice() < start) as isize;
    for &fwd in moves {
        let valid = pos >= 0 && (pos as usize) < keys.len();
        assert_eq!(c.valid(), valid, "start {start:?} pos {pos}");
        if !valid {
            break;
        }
        let k = keys[pos as usize];
        assert_eq!(c.key(), k.as_slice());
        assert_eq!(c.entry(), model[k]);
        if fwd {
            c.next();
            pos += 1;
        } else {
            c.prev();
            pos -= 1;
        }
    }
    c.seek_for_prev(start);
    let p = keys.partition_point(|k| k.as_slice() <= start);
    match p.checked_sub(1) {
        Some(i) => assert_eq!(c.key(), keys[i].as_slice()),
        None => assert!(!c.valid()),
    }
}

proptest! {
    // PROPTEST_CASES overrides the default of 128 cases.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]
    #[test]
    fn t1_matches_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
        let u = universe();
        let t = T1::new(cfg(12, 6, false));
        let mut model: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
        let mut seq = 0u64;
        for op in ops {
            seq += 1;
            match op {
                Op::Put(k, v) => {
                    let e = if v % 4 == 0 { stored(seq, u32::from(v)) } else { inline(seq, &[v; 3][..usize::from(v % 4)]) };
                    let r = t.upsert(&u[k], e);
                    match model.insert(u[k].clone(), e) {
                        Some(old) => prop_assert_eq!(r, Upsert::Replaced(old)),
                        None => {
                            let ok = matches!(r, Upsert::Inserted | Upsert::Replaced(Entry { payload: Payload::Tombstone, .. }));
                            prop_assert!(ok, "unexpected {:?}", r);
                        }
                    }
                }
                Op::Del(k) => {
                    t.upsert(&u[k], tomb(seq));
                    model.remove(&u[k]);
                }
                Op::Horizon(h) => t.set_tombstone_horizon(if h == 0 { u64::MAX } else { seq.saturating_sub(h) }),
                Op::Reorganize => t.reorganize_all(),
                Op::Maintain => t.maintain(),
                Op::Split(k, at) => { t.force_split(&u[k], at); }
                Op::SplitShared(k) => split_shared(&t, &u[k]),
                Op::Freeze(k) => freeze_shard_of(&t, &u[k]),
                Op::Walk(k, moves) => check_walk(&t, &model, &u[k], &moves),
            }
            for k in &u {
                prop_assert_eq!(t.get(k), model.get(k).copied(), "key {:?}", k);
            }
            let expect: Vec<_> = model.iter().map(|(k, e)| (k.clone(), *e)).collect();
            prop_assert_eq!(&collect_fwd(&t), &expect);
            prop_assert_eq!(&collect_bwd(&t), &expect);
        }
    }
}

// ---------- multi-threaded stress ----------

#[test]
fn stress_writers_readers_with_splits_and_reorganizes() {
    const WRITERS: usize = 2;
    // T1_STRESS_ROUNDS lengthens the run for race hunting (default 3).
    let rounds: u64 = std::env::var("T1_STRESS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    const KEYS: usize = 6_000;
    let t = Arc::new(T1::new(cfg(1_500, 300, true)));
    let seq = Arc::new(AtomicU64::new(1));
    let progress: Arc<Vec<AtomicUsize>> =
        Arc::new((0..WRITERS).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let key = |w: usize, i: usize| format!("w{w}-{:08}", (i * 7919) % KEYS).into_bytes();
    let del_key = |w: usize, i: usize| format!("d{w}-{i:08}").into_bytes();

    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let (t, seq, progress) = (t.clone(), seq.clone(), progress.clone());
        handles.push(std::thread::spawn(move || {
            for round in 0..rounds {
                for i in 0..KEYS {
                    let s = seq.fetch_add(1, Ordering::Relaxed);
                    let v = (round * 1_000_000 + i as u64).to_le_bytes();
                    let r = t.upsert(
                        &key(w, i),
                        Entry {
                            seq: s,
                            payload: Payload::inline(&v).unwrap(),
                        },
                    );
                    assert_ne!(r, Upsert::Stale);
                    if round == 0 {
                        progress[w].store(i + 1, Ordering::Release);
                    }
                    // Churn on a separate key set that readers do not check.
                    let s = seq.fetch_add(1, Ordering::Relaxed);
                    let p = if i % 2 == 0 {
                        Payload::Tombstone
                    } else {
                        Payload::inline(b"x").unwrap()
                    };
                    t.upsert(&del_key(w, i % 500), Entry { seq: s, payload: p });
                }
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2 {
        let (t, progress, stop) = (t.clone(), progress.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ r;
            let mut checks = 0u64;
            // At least one check, however late this thread starts.
            while !stop.load(Ordering::Acquire) || checks == 0 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let w = (rng % WRITERS as u64) as usize;
                let done = progress[w].load(Ordering::Acquire);
                if done == 0 {
                    continue;
                }
                let i = (rng >> 20) as usize % done;
                assert!(
                    t.get(&key(w, i)).is_some(),
                    "key {i} of writer {w} went missing"
                );
                checks += 1;
                if checks % 64 == 0 {
                    // A scan of writer w's keys must contain every key published before it.
                    let expect: std::collections::BTreeSet<Vec<u8>> =
                        (0..done).map(|i| key(w, i)).collect();
                    let prefix = format!("w{w}-").into_bytes();
                    let mut c = t.cursor();
                    let mut seen = 0usize;
                    let mut last: Option<Vec<u8>> = None;
                    if checks % 128 == 0 {
                        c.seek(&prefix);
                        while c.valid() && c.key().starts_with(&prefix) {
                            if let Some(l) = &last {
                                assert!(l.as_slice() < c.key(), "order");
                            }
                            if expect.contains(c.key()) {
                                seen += 1;
                            }
                            last = Some(c.key().to_vec());
                            c.next();
                        }
                    } else {
                        let mut end = prefix.clone();
                        end.push(0xff);
                        c.seek_for_prev(&end);
                        while c.valid() && c.key().starts_with(&prefix) {
                            if let Some(l) = &last {
                                assert!(l.as_slice() > c.key(), "order");
                            }
                            if expect.contains(c.key()) {
                                seen += 1;
                            }
                            last = Some(c.key().to_vec());
                            c.prev();
                        }
                    }
                    assert_eq!(seen, expect.len(), "scan skipped keys of writer {w}");
                }
            }
            checks
        }));
    }
    let maint = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(3));
                n += 1;
                if n % 5 == 0 {
                    t.reorganize_all();
                } else {
                    t.force_split(
                        format!("w{}-{:08}", n % 2, (n as usize * 131) % KEYS).as_bytes(),
                        false,
                    );
                }
            }
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    maint.join().unwrap();
    let s = t.stats();
    assert!(s.splits > 0 && s.reorganizes > 0, "{s:?}");
    for w in 0..WRITERS {
        for i in 0..KEYS {
            let v = ((rounds - 1) * 1_000_000 + i as u64).to_le_bytes();
            assert_eq!(
                t.get(&key(w, i)).map(|e| e.payload),
                Payload::inline(&v),
                "writer {w} key {i}"
            );
        }
    }
    let all = collect_fwd(&t);
    assert_eq!(
        all.iter().filter(|(k, _)| k[0] == b'w').count(),
        WRITERS * KEYS
    );
    assert!(all.windows(2).all(|p| p[0].0 < p[1].0));
}

#[test]
fn concurrent_same_key_writers_resolve_by_seq() {
    let t = Arc::new(T1::new(cfg(1 << 20, 50, true)));
    let seq = Arc::new(AtomicU64::new(1));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (t, seq) = (t.clone(), seq.clone());
            std::thread::spawn(move || {
                let mut max = [0u64; 8];
                for i in 0..20_000u64 {
                    let s = seq.fetch_add(1, Ordering::Relaxed);
                    max[(i % 8) as usize] = s;
                    t.upsert(
                        format!("hot{}", i % 8).as_bytes(),
                        Entry {
                            seq: s,
                            payload: Payload::inline(&s.to_le_bytes()).unwrap(),
                        },
                    );
                    if i % 1000 == 0 {
                        t.reorganize_all();
                    }
                }
                max
            })
        })
        .collect();
    let maxes: Vec<[u64; 8]> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    // Each hot key must hold the highest seq ever written to it.
    for (k, (a, b)) in maxes[0].iter().zip(maxes[1].iter()).enumerate() {
        let e = t.get(format!("hot{k}").as_bytes()).unwrap();
        assert_eq!(e.seq, *a.max(b));
        assert_eq!(e.payload.inline_bytes(), Some(&e.seq.to_le_bytes()[..]));
    }
}

#[test]
fn a_large_shard_merges_at_an_eighth_of_its_sorted_region() {
    // Small shards merge at the threshold, large ones at an eighth.
    assert!(!merge_due(0, 0, 0), "an empty append region is never due");
    assert!(merge_due(1, 0, 0));
    assert!(!merge_due(65_535, 100_000, 65_536));
    assert!(merge_due(65_536, 100_000, 65_536));
    assert!(!merge_due(65_536, 1 << 20, 65_536));
    assert!(!merge_due((1 << 17) - 1, 1 << 20, 65_536));
    assert!(merge_due(1 << 17, 1 << 20, 65_536));
}

#[test]
fn an_ordered_write_reads_below_only_while_a_stored_value_may_be_there() {
    let t = T1::new(cfg(1 << 20, 1 << 20, false));
    // Only inline values below: the write is added without a read.
    t.upsert(b"a", inline(1, b"v1"));
    t.upsert(b"b", inline(2, b"v2"));
    t.reorganize_all();
    assert_eq!(t.upsert_ordered(b"a", inline(3, b"v3")), Upsert::Added);
    assert_eq!(t.get(b"a"), Some(inline(3, b"v3")));
    // In the append region the slot is read as before.
    assert_eq!(
        t.upsert_ordered(b"a", inline(4, b"v4")),
        Upsert::Replaced(inline(3, b"v3"))
    );
    // A stored value in the frozen map: its bytes must be freed, so the
    // write reads below again.
    t.upsert(b"c", stored(5, 7));
    freeze_shard_of(&t, b"c");
    assert_eq!(
        t.upsert_ordered(b"c", inline(6, b"v6")),
        Upsert::Replaced(stored(5, 7))
    );
    // And in the sorted region, after the merge.
    t.upsert(b"d", stored(7, 8));
    t.reorganize_all();
    assert_eq!(
        t.upsert_ordered(b"d", tomb(8)),
        Upsert::Replaced(stored(7, 8))
    );
    assert_eq!(t.get(b"d"), None);
    // Replay is not ordered: an older record loses to what is there.
    assert_eq!(t.upsert(b"b", inline(1, b"old")), Upsert::Stale);
    assert_eq!(t.get(b"b"), Some(inline(2, b"v2")));
}
