//! vmemkv against RocksDB through the trait: the same random operation
//! sequence on both, comparing every read, every iterator step and every
//! MultiScan result. RocksDB is the reference for iterator and MultiScan
//! semantics; intentional differences are documented on the trait.
//!
//! The same sequence also runs vmemkv against fjall, fjall-blob and Sparkey
//! (with their features). Sparkey has no ordered iteration: its run
//! compares reads, multi_gets and batches only, and prints
//! "not applicable" for the iterator and MultiScan steps.
#![cfg(any(feature = "rocksdb", feature = "fjall", feature = "sparkey"))]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vmemkv_compat::{
    collect_multi_scan, open, Db, DbIterator, EngineKind, EngineOptions, MultiScanArgs,
    ReadOptions, ScanRange, WriteBatch, WriteOptions,
};

fn key(rng: &mut StdRng) -> Vec<u8> {
    let i: u32 = rng.random_range(0..300);
    let mut k = format!("k{i:04}").into_bytes();
    if i.is_multiple_of(11) {
        k.push(0xff);
    }
    k
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.random_range(0..6) {
        0 => 0,
        1 | 2 => rng.random_range(1..=8),
        3 | 4 => rng.random_range(9..1500),
        _ => rng.random_range(1500..20_000),
    };
    let b: u8 = rng.random();
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

fn state(it: &dyn DbIterator) -> Option<(Vec<u8>, Vec<u8>)> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

fn walk(a: &dyn Db, b: &dyn Db, rng: &mut StdRng, step: usize) {
    let lo = format!("k{:04}", rng.random_range(0..300)).into_bytes();
    let hi = format!("k{:04}", rng.random_range(0..320)).into_bytes();
    let (lower, upper) = match rng.random_range(0..4) {
        0 => (None, None),
        1 => (Some(lo), None),
        2 => (None, Some(hi)),
        _ => (Some(lo.clone().min(hi.clone())), Some(lo.max(hi))),
    };
    let ro = ReadOptions::default().with_bounds(lower.as_deref(), upper.as_deref());
    let mut ia = a.iter(&ro).expect("vmemkv iter");
    let mut ib = b.iter(&ro).expect("rocksdb iter");
    let target = format!("k{:04}", rng.random_range(0..300)).into_bytes();
    match rng.random_range(0..4) {
        0 => {
            ia.seek_to_first();
            ib.seek_to_first();
        }
        1 => {
            ia.seek_to_last();
            ib.seek_to_last();
        }
        2 => {
            ia.seek(&target);
            ib.seek(&target);
        }
        _ => {
            ia.seek_for_prev(&target);
            ib.seek_for_prev(&target);
        }
    }
    for move_no in 0..rng.random_range(1..30) {
        assert_eq!(
            state(ia.as_ref()),
            state(ib.as_ref()),
            "step {step} move {move_no}: iterators differ (bounds {lower:?}..{upper:?})"
        );
        if !ib.valid() {
            break;
        }
        if rng.random_bool(0.6) {
            ia.next();
            ib.next();
        } else {
            ia.prev();
            ib.prev();
        }
    }
    ia.status().expect("vmemkv iterator status");
    ib.status().expect("rocksdb iterator status");
}

fn multiscan(a: &dyn Db, b: &dyn Db, rng: &mut StdRng, step: usize) {
    // Sorted, disjoint ranges: the shape RocksDB's native MultiScan takes.
    let mut start = rng.random_range(0..50u32);
    let mut ranges = Vec::new();
    for _ in 0..rng.random_range(1..6) {
        let s = format!("k{start:04}").into_bytes();
        let len = rng.random_range(1..40);
        if rng.random_bool(0.15) {
            ranges.push(ScanRange::unbounded(&s));
            break;
        }
        ranges.push(ScanRange::new(
            &s,
            format!("k{:04}", start + len).as_bytes(),
        ));
        start += len + rng.random_range(0..40);
    }
    let args = MultiScanArgs {
        ranges,
        use_async_io: rng.random_bool(0.5),
        ..MultiScanArgs::default()
    };
    let ro = ReadOptions::default();
    let ra = collect_multi_scan(
        a.multi_scan(&ro, &args)
            .expect("vmemkv multi_scan")
            .as_mut(),
    )
    .expect("vmemkv multiscan results");
    let rb = collect_multi_scan(
        b.multi_scan(&ro, &args)
            .expect("rocksdb multi_scan")
            .as_mut(),
    )
    .expect("rocksdb multiscan results");
    assert!(
        ra == rb,
        "step {step}: multiscan results differ for {:?}",
        args.ranges
    );
}

#[cfg(feature = "rocksdb")]
#[test]
fn vmemkv_and_rocksdb_agree_on_a_random_sequence() {
    agree(EngineKind::RocksDb);
}

#[cfg(feature = "fjall")]
#[test]
fn vmemkv_and_fjall_agree_on_a_random_sequence() {
    agree(EngineKind::Fjall);
}

#[cfg(feature = "fjall")]
#[test]
fn vmemkv_and_fjall_blob_agree_on_a_random_sequence() {
    agree(EngineKind::FjallBlob);
}

#[cfg(feature = "sparkey")]
#[test]
fn vmemkv_and_sparkey_agree_on_a_random_sequence() {
    agree(EngineKind::Sparkey);
}

/// vmemkv against `other` on one random sequence (the messages say
/// "rocksdb" for the reference side, whichever engine it is).
fn agree(other: EngineKind) {
    let da = tempfile::tempdir().expect("tempdir");
    let db_dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions::default();
    let a = open(EngineKind::Vmemkv, &da.path().join("db"), &opts).expect("open vmemkv");
    let b = open(other, &db_dir.path().join("db"), &opts).expect("open the other engine");
    let (a, b) = (a.as_ref(), b.as_ref());
    let ordered = !vmemkv_tests::conformance::not_applicable(
        b,
        vmemkv_compat::Capability::OrderedIteration,
        "cross_engine: iterator walks",
    );
    let scans = !vmemkv_tests::conformance::not_applicable(
        b,
        vmemkv_compat::Capability::MultiScan,
        "cross_engine: multi_scans",
    );
    let wo = WriteOptions::default();
    let ro = ReadOptions::default();
    let mut rng = StdRng::seed_from_u64(20261130);
    for step in 0..6000 {
        match rng.random_range(0..100) {
            0..=39 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                a.put(&wo, &k, &v).expect("vmemkv put");
                b.put(&wo, &k, &v).expect("rocksdb put");
            }
            40..=49 => {
                let k = key(&mut rng);
                a.delete(&wo, &k).expect("vmemkv delete");
                b.delete(&wo, &k).expect("rocksdb delete");
            }
            50..=57 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.random_range(1..8) {
                    match rng.random_range(0..8) {
                        0..=4 => batch.put(&key(&mut rng), &value(&mut rng)),
                        5 | 6 => batch.delete(&key(&mut rng)),
                        _ => {
                            let (x, y) = (key(&mut rng), key(&mut rng));
                            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
                            batch.delete_range(&lo, &hi);
                        }
                    }
                }
                a.write(&wo, &batch).expect("vmemkv write");
                b.write(&wo, &batch).expect("rocksdb write");
            }
            58..=74 => {
                let k = key(&mut rng);
                assert_eq!(
                    a.get(&ro, &k).expect("vmemkv get"),
                    b.get(&ro, &k).expect("rocksdb get"),
                    "step {step}: get {k:?}"
                );
            }
            75..=79 => {
                let keys: Vec<Vec<u8>> = (0..rng.random_range(1..10))
                    .map(|_| key(&mut rng))
                    .collect();
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let ga: Vec<_> = a
                    .multi_get(&ro, &refs)
                    .into_iter()
                    .map(|r| r.expect("vmemkv multi_get"))
                    .collect();
                let gb: Vec<_> = b
                    .multi_get(&ro, &refs)
                    .into_iter()
                    .map(|r| r.expect("rocksdb multi_get"))
                    .collect();
                assert_eq!(ga, gb, "step {step}: multi_get");
            }
            80..=91 if ordered => walk(a, b, &mut rng, step),
            92.. if scans => multiscan(a, b, &mut rng, step),
            _ => {
                let k = key(&mut rng);
                assert_eq!(
                    a.get(&ro, &k).expect("vmemkv get"),
                    b.get(&ro, &k).expect("other get"),
                    "step {step}: get {k:?} (in place of a scan)"
                );
            }
        }
    }
}
