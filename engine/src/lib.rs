//! vmemkv: keys in RAM (T1), values in mmap-backed segment files (T2).
#![deny(clippy::unwrap_used)]

pub mod t1;
