//! The fuzz target's driver as a bounded proptest, so `cargo test` runs the
//! differential fuzzer on every change. `PROPTEST_CASES` raises the count.

use proptest::prelude::*;
use vmemkv_compat::EngineKind;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn vmemkv_matches_the_model(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        vmemkv_tests::fuzzing::run(EngineKind::Vmemkv, &data);
    }
}

/// The committed seed corpus replays cleanly.
#[test]
fn seed_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/differential");
    let mut n = 0;
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let data = std::fs::read(e.path()).expect("read corpus file");
            vmemkv_tests::fuzzing::run(EngineKind::Vmemkv, &data);
            n += 1;
        }
    }
    assert!(n > 0, "no seed corpus at {}", dir.display());
}
