//! One adapter per engine. Each maps the [`crate::Db`] trait onto the
//! engine's own API and documents what concurrent readers can see.

#[cfg(feature = "lmdb")]
pub mod lmdb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod rocksdb_keys;
pub mod vmemkv;
