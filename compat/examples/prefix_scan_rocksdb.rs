//! The `prefix_scan` example on the rocksdb crate (feature `rocksdb`):
//! `shared/prefix_scan.rs` with the crate in place of the facade.

extern crate rocksdb;

/// The crate opens RocksDB; there is no engine to choose.
fn engine_options(_opts: &mut rocksdb::Options) {}

include!("shared/prefix_scan.rs");
