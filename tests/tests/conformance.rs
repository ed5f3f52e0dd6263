//! Runs every conformance case against every engine compiled in, and
//! against the model oracle. Rival engines join with `--features rivals`.
//! The null engine is deliberately left out (see [`SUITES`]).

use vmemkv_compat::EngineKind;
use vmemkv_tests::conformance::{self, Harness};
use vmemkv_tests::model::Fault;

/// The engines with a suite below, compiled in or not. `null` is not one:
/// it stores nothing by design (writes are dropped, reads find nothing),
/// so every read-back case would fail; it exists to measure db_bench's
/// own ceiling, and its own tests (`compat/src/engines/null.rs`) check
/// that it keeps nothing. Its capabilities say so
/// (`Capabilities::discards_writes`).
const SUITES: &[EngineKind] = &[
    EngineKind::Vmemkv,
    EngineKind::RocksDb,
    EngineKind::BlobDb,
    EngineKind::Lmdb,
    EngineKind::Fjall,
    EngineKind::FjallBlob,
    EngineKind::Sparkey,
];

/// Every engine that stores data has a suite, and the null engine has
/// none: a new engine cannot be added to the registry and skip the suite.
#[test]
fn every_engine_but_null_has_a_suite() {
    for kind in EngineKind::ALL {
        assert_eq!(
            SUITES.contains(&kind),
            kind != EngineKind::Null,
            "{kind}: a suite belongs to every engine that stores data, and only to them"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let null =
        vmemkv_compat::open(EngineKind::Null, dir.path(), &Default::default()).expect("open null");
    assert!(null.capabilities().discards_writes().is_some());
}

macro_rules! suite {
    ($engine:ident, $harness:expr) => {
        suite!($engine, $harness, snapshots: {});
    };
    ($engine:ident, $harness:expr, snapshots: {$(#[$gap:meta])*}) => {
        mod $engine {
            use super::*;
            fn h() -> Harness {
                $harness
            }
            #[test]
            fn point_operations() {
                conformance::point_operations(&h());
            }
            #[test]
            fn keys_and_values() {
                conformance::keys_and_values(&h());
            }
            #[test]
            fn write_batch() {
                conformance::write_batch(&h());
            }
            #[test]
            fn iterators() {
                conformance::iterators(&h());
            }
            #[test]
            fn multi_get() {
                conformance::multi_get(&h());
            }
            #[test]
            fn multi_scan() {
                conformance::multi_scan(&h());
            }
            #[test]
            fn persistence() {
                conformance::persistence(&h());
            }
            #[test]
            fn locking() {
                conformance::locking(&h());
            }
            #[test]
            fn maintenance() {
                conformance::maintenance(&h());
            }
            #[test]
            fn differential() {
                conformance::differential(&h());
            }
            #[test]
            $(#[$gap])*
            fn snapshots() {
                conformance::snapshots(&h());
            }
            #[test]
            fn families_default() {
                conformance::families_default(&h());
            }
            #[test]
            fn families_isolation() {
                conformance::families_isolation(&h());
            }
            #[test]
            fn families_batches() {
                conformance::families_batches(&h());
            }
            #[test]
            fn families_drop() {
                conformance::families_drop(&h());
            }
            #[test]
            fn families_snapshots() {
                conformance::families_snapshots(&h());
            }
            #[test]
            fn families_reopen() {
                conformance::families_reopen(&h());
            }
            #[test]
            fn families_ranges() {
                conformance::families_ranges(&h());
            }
            #[test]
            fn families_errors() {
                conformance::families_errors(&h());
            }
        }
    };
}

suite!(model, Harness::model(Fault::None));
suite!(vmemkv, Harness::engine(vmemkv_compat::EngineKind::Vmemkv));
#[cfg(feature = "rocksdb")]
suite!(rocksdb, Harness::engine(vmemkv_compat::EngineKind::RocksDb));
#[cfg(feature = "rocksdb")]
suite!(blobdb, Harness::engine(vmemkv_compat::EngineKind::BlobDb));
#[cfg(feature = "lmdb")]
suite!(lmdb, Harness::engine(vmemkv_compat::EngineKind::Lmdb));
#[cfg(feature = "fjall")]
suite!(fjall, Harness::engine(vmemkv_compat::EngineKind::Fjall));
#[cfg(feature = "fjall")]
suite!(
    fjall_blob,
    Harness::engine(vmemkv_compat::EngineKind::FjallBlob)
);
// Sparkey runs every group; the ones that need key order or families
// beyond `default` print "not applicable: <group> on sparkey: <why>" and
// check only that the engine refuses them with NotSupported
// (families_default still checks its default family).
#[cfg(feature = "sparkey")]
suite!(sparkey, Harness::engine(vmemkv_compat::EngineKind::Sparkey));
