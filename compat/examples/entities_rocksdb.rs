//! The `entities` example on the rocksdb crate (feature `rocksdb`):
//! `shared/entities.rs` with the crate in place of the facade.

extern crate rocksdb;

/// The crate opens RocksDB; there is no engine to choose.
fn engine_options(_opts: &mut rocksdb::Options) {}

include!("shared/entities.rs");
