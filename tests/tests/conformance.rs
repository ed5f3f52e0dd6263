//! Runs every conformance case against every engine compiled in, and
//! against the model oracle. Rival engines join with `--features rivals`.

use vmemkv_tests::conformance::{self, Harness};
use vmemkv_tests::model::Fault;

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
// Sparkey runs every group; the ones that need key order print
// "not applicable: <group> on sparkey: <why>" and check only that the
// engine refuses them with NotSupported.
#[cfg(feature = "sparkey")]
suite!(sparkey, Harness::engine(vmemkv_compat::EngineKind::Sparkey));
