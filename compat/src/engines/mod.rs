//! One adapter per engine. Each maps the [`crate::Db`] trait onto the
//! engine's own API and documents what concurrent readers can see.

#[cfg(any(feature = "fjall", feature = "sparkey"))]
mod collapse;
#[cfg(feature = "fjall")]
pub mod fjall;
#[cfg(feature = "lmdb")]
pub mod lmdb;
pub mod null;
mod open_dir;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod rocksdb_keys;
#[cfg(feature = "sparkey")]
pub mod sparkey;
#[cfg(feature = "vmemkv")]
pub mod vmemkv;
