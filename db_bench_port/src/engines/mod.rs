//! Engines that live inside the port, and what the port asks of engines.
//! [`harness_test`] is an in-process map used to measure the harness's own
//! overhead; it is not a storage engine and persists nothing.
//! [`capability_skip`] names the benchmarks an engine cannot run.

pub mod capability_skip;
pub mod harness_test;
