//! The suite must notice a broken engine: each deliberate defect in the
//! model has to make at least one conformance case fail.

use std::panic::{catch_unwind, AssertUnwindSafe};

use vmemkv_tests::conformance::{Case, Harness, ALL_CASES};
use vmemkv_tests::model::Fault;

fn failing<'a>(cases: impl Iterator<Item = &'a Case>, fault: Fault) -> Vec<&'static str> {
    cases
        .filter(|(_, case)| {
            catch_unwind(AssertUnwindSafe(|| case(&Harness::model(fault)))).is_err()
        })
        .map(|(name, _)| *name)
        .collect()
}

fn failing_cases(fault: Fault) -> Vec<&'static str> {
    failing(ALL_CASES.iter(), fault)
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

/// Runs the column-family group (the `families_*` cases) on the model
/// broken by `fault` and asserts that `must_catch` fails.
fn family_group_catches(fault: Fault, must_catch: &str) {
    let group: Vec<&Case> = ALL_CASES
        .iter()
        .filter(|(name, _)| name.starts_with("families_"))
        .collect();
    assert!(
        group.iter().any(|(name, _)| *name == must_catch),
        "{must_catch} is not a case of the family group"
    );
    let failed = failing(group.into_iter(), fault);
    assert!(
        failed.contains(&must_catch),
        "{fault:?} was not caught by {must_catch}; failing family cases: {failed:?}"
    );
}

#[test]
fn families_sharing_one_map_are_caught() {
    family_group_catches(Fault::FamiliesShareOneMap, "families_isolation");
}

#[test]
fn a_drop_that_keeps_the_data_is_caught() {
    family_group_catches(Fault::DropKeepsData, "families_drop");
}

#[test]
fn a_cross_family_batch_applied_family_by_family_is_caught() {
    family_group_catches(Fault::CrossFamilyBatchTorn, "families_batches");
}

#[test]
fn a_snapshot_of_the_default_family_only_is_caught() {
    family_group_catches(Fault::SnapshotCoversDefaultOnly, "families_snapshots");
}

#[test]
fn families_forgotten_on_reopen_are_caught() {
    family_group_catches(Fault::FamiliesForgottenOnReopen, "families_reopen");
}

#[test]
fn a_delete_range_across_every_family_is_caught() {
    family_group_catches(Fault::DeleteRangeAllFamilies, "families_ranges");
}
