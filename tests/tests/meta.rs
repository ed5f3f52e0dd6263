//! The suite must notice a broken engine: each deliberate defect in the
//! model has to make at least one conformance case fail.

use std::panic::{catch_unwind, AssertUnwindSafe};

use vmemkv_tests::conformance::{Harness, ALL_CASES};
use vmemkv_tests::model::Fault;

fn failing_cases(fault: Fault) -> Vec<&'static str> {
    ALL_CASES
        .iter()
        .filter(|(_, case)| {
            catch_unwind(AssertUnwindSafe(|| case(&Harness::model(fault)))).is_err()
        })
        .map(|(name, _)| *name)
        .collect()
}

#[test]
fn the_correct_model_passes_every_case() {
    assert_eq!(failing_cases(Fault::None), Vec::<&str>::new());
}

#[test]
fn every_deliberate_defect_is_caught() {
    let faults = [
        (Fault::DeleteIgnored, "point_operations"),
        (Fault::IterDropsLast, "iterators"),
        (Fault::SeekForPrevIsSeek, "iterators"),
        (Fault::BatchTruncated, "write_batch"),
        (Fault::LosesDataOnReopen, "persistence"),
        (Fault::EmptyValueMissing, "keys_and_values"),
        (Fault::SnapshotReadsLive, "snapshots"),
        (Fault::BatchTorn, "snapshots"),
    ];
    for (fault, must_catch) in faults {
        let failed = failing_cases(fault);
        assert!(
            failed.contains(&must_catch),
            "{fault:?} was not caught by {must_catch}; failing cases: {failed:?}"
        );
        assert!(
            failed.contains(&"differential")
                || matches!(
                    fault,
                    Fault::EmptyValueMissing
                        | Fault::SeekForPrevIsSeek
                        | Fault::SnapshotReadsLive
                        | Fault::BatchTorn
                ),
            "{fault:?} should also trip the differential test; failing cases: {failed:?}"
        );
    }
}
