//! The `snapshot_export` example on the facade: `shared/snapshot_export.rs` with the one
//! `use` line below. The engine comes from `VMEMKV_ENGINE` (vmemkv by
//! default); the database goes to the first argument or a temporary
//! directory. `snapshot_export_rocksdb.rs` runs the same body on the rocksdb crate.

use vmemkv_compat::rocksdb_api as rocksdb;

/// The one line the rocksdb crate does not have: the engine.
fn engine_options(opts: &mut rocksdb::Options) {
    let engine = std::env::var("VMEMKV_ENGINE").unwrap_or_else(|_| "vmemkv".into());
    opts.set_engine(engine.parse().expect("VMEMKV_ENGINE names an engine"));
}

include!("shared/snapshot_export.rs");
