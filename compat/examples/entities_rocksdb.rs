//! The `entities` example on the rocksdb crate (feature `rocksdb`):
//! `shared/entities.rs` with the crate in place of the facade.

// The workspace builds the crate with `multi-threaded-cf`, whose `DB`
// creates and drops families through `&self`; the shared body keeps the
// `mut` that the crate's default single-threaded `DB` needs.
#![allow(unused_mut)]

extern crate rocksdb;

/// The crate opens RocksDB; there is no engine to choose.
fn engine_options(_opts: &mut rocksdb::Options) {}

include!("shared/entities.rs");
