//! Engines that live inside the port. Only [`harness_test`] exists: an
//! in-process map used to measure the harness's own overhead. It is not a
//! storage engine and persists nothing.

pub mod harness_test;
