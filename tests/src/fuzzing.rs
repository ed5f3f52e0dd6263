//! Differential fuzzing: an operation sequence decoded from raw bytes runs
//! against an engine and a `BTreeMap`, and every result is compared.
//!
//! The same driver backs the `cargo fuzz` target (`fuzz/`) and a bounded
//! proptest (`tests/tests/fuzz_proptest.rs`), so `cargo test` covers it.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::SeedableRng;
use vmemkv_compat::{
    Capability, Cf, Db, EngineKind, EngineOptions, Entries, Error, ReadOptions, WriteBatch,
    WriteOptions,
};

use crate::conformance::{check_iterator_walk, check_random_multiscan};
use crate::model;

/// Reads bytes from the fuzz input, yielding zeros once it runs out.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn key(&mut self) -> Vec<u8> {
        // The same 4-digit shape the conformance walkers use, so that their
        // random bounds land among these keys.
        let b = self.byte();
        let mut k = format!("k{:04}", b % 200).into_bytes();
        if b >= 200 {
            k.push(b); // binary tails, including 0xff
        }
        if b >= 240 {
            // A first byte of 0xff: where vmemkv's adapter keeps the other
            // families' keys, so `default`'s own keys there are escaped.
            k.insert(0, 0xFF);
        }
        k
    }

    fn value(&mut self) -> Vec<u8> {
        let b = self.byte();
        let len = match b >> 5 {
            0 => 0,
            1..=3 => (b & 7) as usize + 1,        // inline sizes
            4..=6 => 9 + (b as usize & 31) * 37,  // stored, up to ~1.2 KB
            _ => 4096 + (b as usize & 31) * 1024, // page-crossing
        };
        let fill = self.byte();
        (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
    }
}

fn maintenance(r: vmemkv_compat::Result<()>, what: &str) {
    match r {
        Ok(()) | Err(Error::NotSupported(_)) => {}
        Err(e) => panic!("{what} failed: {e}"),
    }
}

/// Engine options used by the fuzzer: small segments so that rollover and
/// defragment happen within a short input, and no background threads, so
/// that an input replays the same way every time (the input's own
/// checkpoint, defragment, reorganize and compact_range steps drive
/// maintenance).
pub fn fuzz_options(kind: EngineKind) -> EngineOptions {
    let opts = EngineOptions::default();
    match kind {
        EngineKind::Vmemkv => opts.set("segment_size", 1 << 20).set("background", false),
        _ => opts,
    }
}

/// Where each input's database goes: `VMEMKV_FUZZ_TMP`, else `/dev/shm`
/// when present (every input creates, syncs and reopens a database, which
/// on a disk costs far more than the operations themselves), else the
/// system temp directory.
fn scratch_root() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("VMEMKV_FUZZ_TMP") {
        return d.into();
    }
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The second family the fuzzer writes, where the engine has families:
/// its keys sort among `default`'s in some engines' layouts, so every
/// `default` read must step over them.
const FAMILY: &str = "second";

/// The fuzzer's second family in `db`, created on first use.
fn family(db: &dyn Db) -> Option<Cf> {
    if !db.capabilities().supports(Capability::ColumnFamilies) {
        return None;
    }
    db.cf_handle(FAMILY).or_else(|| {
        Some(
            db.create_cf(FAMILY)
                .unwrap_or_else(|e| panic!("create_cf: {e}")),
        )
    })
}

/// Every entry of `cf`.
fn scan(db: &dyn Db, ro: &ReadOptions, cf: Cf) -> Vec<(Vec<u8>, Vec<u8>)> {
    match db.iter_cf(ro, cf) {
        Ok(it) => Entries::from_first(it)
            .collect::<vmemkv_compat::Result<_>>()
            .unwrap_or_else(|e| panic!("scan: {e}")),
        Err(e) => panic!("iter: {e}"),
    }
}

/// Runs the operations encoded in `data` against `kind` and the model,
/// panicking on the first difference.
pub fn run(kind: EngineKind, data: &[u8]) {
    let dir = match tempfile::Builder::new()
        .prefix("fuzz-")
        .tempdir_in(scratch_root())
    {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let path = dir.path().join("db");
    let opts = fuzz_options(kind);
    let open = || match vmemkv_compat::open(kind, &path, &opts) {
        Ok(db) => db,
        Err(e) => panic!("open: {e}"),
    };
    let mut db: Box<dyn Db> = open();
    let mut cf = family(db.as_ref());
    let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut second: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut input = Input { data, pos: 0 };
    // Each reopen toggles `disable_wal`, so both write paths (vmemkv packs
    // unlogged puts into regions sealed later) meet every other operation;
    // a clean close keeps unlogged writes in every engine.
    let mut wo = WriteOptions::default();
    let ro = ReadOptions::default();
    let mut step = 0usize;
    while !input.done() && step < 4096 {
        step += 1;
        match input.byte() % 16 {
            0..=4 => {
                let (k, v) = (input.key(), input.value());
                if let Err(e) = db.put(&wo, &k, &v) {
                    panic!("step {step}: put {k:?}: {e}");
                }
                oracle.insert(k, v);
            }
            5 | 6 => {
                let k = input.key();
                if let Err(e) = db.delete(&wo, &k) {
                    panic!("step {step}: delete {k:?}: {e}");
                }
                oracle.remove(&k);
            }
            7 => {
                let mut b = WriteBatch::new();
                for _ in 0..(input.byte() % 6 + 1) {
                    // Some of the batch goes to the second family.
                    let to = match (input.byte() % 4, cf) {
                        (0, Some(c)) => c,
                        _ => Cf::DEFAULT,
                    };
                    match input.byte() % 5 {
                        0..=2 => {
                            let (k, v) = (input.key(), input.value());
                            b.put_cf(to, &k, &v);
                        }
                        3 => b.delete_cf(to, &input.key()),
                        _ => {
                            let (a, c) = (input.key(), input.key());
                            let (lo, hi) = if a <= c { (a, c) } else { (c, a) };
                            b.delete_range_cf(to, &lo, &hi);
                        }
                    }
                }
                if let Err(e) = db.write(&wo, &b) {
                    panic!("step {step}: write batch: {e}");
                }
                for op in &b {
                    let map = if op.cf().is_default() {
                        &mut oracle
                    } else {
                        &mut second
                    };
                    model::apply(map, op);
                }
            }
            8 | 9 => {
                let k = input.key();
                let got = db
                    .get(&ro, &k)
                    .unwrap_or_else(|e| panic!("step {step}: get: {e}"));
                assert_eq!(
                    got.as_deref(),
                    oracle.get(&k).map(Vec::as_slice),
                    "step {step}: get {k:?}"
                );
            }
            10 => {
                let mut rng =
                    StdRng::seed_from_u64(u64::from(input.byte()) << 8 | u64::from(input.byte()));
                check_iterator_walk(db.as_ref(), &oracle, &mut rng, &format!("fuzz step {step}"));
            }
            11 => {
                let mut rng =
                    StdRng::seed_from_u64(u64::from(input.byte()) << 8 | u64::from(input.byte()));
                check_random_multiscan(
                    db.as_ref(),
                    &oracle,
                    &mut rng,
                    &format!("fuzz step {step}"),
                );
            }
            12 => maintenance(db.checkpoint(), "checkpoint"),
            13 => maintenance(db.defragment(), "defragment"),
            14 => match input.byte() % 3 {
                0 => maintenance(db.reorganize(), "reorganize"),
                // compact_range rewrites values into packed records; a
                // whole-keyspace one packs everything once.
                1 => maintenance(db.compact_range(None, None), "compact_range"),
                _ => {
                    let (a, c) = (input.key(), input.key());
                    let (lo, hi) = if a <= c { (a, c) } else { (c, a) };
                    maintenance(db.compact_range(Some(&lo), Some(&hi)), "compact_range");
                }
            },
            _ => {
                drop(db);
                db = open();
                cf = family(db.as_ref());
                wo.disable_wal = !wo.disable_wal;
            }
        }
    }
    if let Some(c) = cf {
        assert!(
            scan(db.as_ref(), &ro, c)
                .iter()
                .map(|(k, v)| (k, v))
                .eq(second.iter()),
            "final state of the second family differs from the model"
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = match db.iter(&ro) {
        Ok(it) => Entries::from_first(it)
            .collect::<vmemkv_compat::Result<_>>()
            .unwrap_or_else(|e| panic!("final scan: {e}")),
        Err(e) => panic!("final iter: {e}"),
    };
    assert!(
        all.iter().map(|(k, v)| (k, v)).eq(oracle.iter()),
        "final state differs from the model"
    );
}
