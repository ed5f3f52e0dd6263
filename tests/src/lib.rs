//! Cross-crate tests for vmemkv.
//!
//! * [`conformance`]: the properties every engine behind `vmemkv_compat::Db`
//!   must satisfy, written once and run against each engine compiled in.
//! * [`model`]: the `BTreeMap` oracle those properties are checked against.
//! * [`crash`]: the kill-and-verify crash harness (binary `crash_test`).
//! * [`fuzzing`]: the differential driver behind `fuzz/` and its proptest.
#![deny(clippy::unwrap_used)]

pub mod conformance;
pub mod crash;
pub mod faults;
pub mod fuzzing;
pub mod model;
