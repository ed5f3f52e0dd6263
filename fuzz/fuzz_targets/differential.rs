//! Differential fuzzing of vmemkv against a BTreeMap model: put, delete,
//! batch, get, bounded iteration with direction changes, multi_scan,
//! checkpoint, defragment, reorganize, compact_range and reopen.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vmemkv_tests::fuzzing::run(vmemkv_compat::EngineKind::Vmemkv, data);
});
