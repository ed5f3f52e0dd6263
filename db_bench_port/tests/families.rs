//! `--num_column_families`, `--num_hot_column_families` and
//! `--column_family_distribution`, end to end through the binary.

mod common;

use common::{db_bench, result_line, Run};
use vmemkv_compat::{Capability, EngineKind, EngineOptions};

/// `(found, read)` of a `(X of Y found)` message on `name`'s result line.
fn found(r: &Run, name: &str) -> (u64, u64) {
    let line = result_line(&r.stdout, name)
        .unwrap_or_else(|| panic!("no {name} result line\n{}", r.all()));
    let re = regex::Regex::new(r"\((\d+) of (\d+) found\)").expect("regex");
    let c = re
        .captures(line)
        .unwrap_or_else(|| panic!("no found count in {line:?}\n{}", r.all()));
    (c[1].parse().expect("found"), c[2].parse().expect("read"))
}

/// The `operations` figure of `name`'s result line.
fn operations(r: &Run, name: &str) -> u64 {
    let line = result_line(&r.stdout, name)
        .unwrap_or_else(|| panic!("no {name} result line\n{}", r.all()));
    let re = regex::Regex::new(r" (\d+) operations;").expect("regex");
    re.captures(line).expect("operations")[1]
        .parse()
        .expect("number")
}

fn run(engine: &str, db: &str, benchmarks: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        format!("--engine={engine}"),
        format!("--db={db}"),
        format!("--benchmarks={benchmarks}"),
        "--num=2000".to_string(),
        "--seed=7".to_string(),
        "--value_size=32".to_string(),
        "--key_size=16".to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    db_bench(&refs)
}

/// fillrandom then readrandom with 4 families finds exactly what the same
/// run finds with one: each read goes to the family its key was written
/// to. Then the families are on disk under db_bench's names (for an engine
/// that keeps them) and `default` holds only the keys whose number is a
/// multiple of 4.
fn reads_find_what_the_writes_wrote(engine: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = dir.path().join("one").display().to_string();
    let four = dir.path().join("four").display().to_string();
    let base = run(engine, &one, "fillrandom,readrandom", &[]);
    assert_eq!(base.code, 0, "{engine}: {}", base.all());
    let r = run(
        engine,
        &four,
        "fillrandom,readrandom",
        &["--num_column_families=4"],
    );
    assert_eq!(r.code, 0, "{engine}: {}", r.all());
    let (hit, read) = found(&r, "readrandom");
    assert_eq!(read, 2000, "{}", r.all());
    assert!(hit > 1000, "{engine}: most keys were written\n{}", r.all());
    assert_eq!(
        (hit, read),
        found(&base, "readrandom"),
        "{engine}: the families lose or misplace keys\n{}",
        r.all()
    );
}

/// The same after reopening: `--use_existing_db` finds the families an
/// earlier run created (every adapter opens all existing families), and
/// `readseq`, which db_bench runs on `default` alone, sees only the keys
/// `k % 4 == 0` of a fillseq.
fn families_survive_reopen(engine: EngineKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    let r = run(
        engine.as_str(),
        &db,
        "fillseq",
        &["--num_column_families=4"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    let r = run(
        engine.as_str(),
        &db,
        "readrandom,readseq",
        &["--num_column_families=4", "--use_existing_db=1"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(found(&r, "readrandom"), (2000, 2000), "{}", r.all());
    assert_eq!(operations(&r, "readseq"), 500, "{}", r.all());
    let opened = vmemkv_compat::open(
        engine,
        dir.path().join("db").as_path(),
        &EngineOptions::default(),
    )
    .expect("reopen");
    assert_eq!(
        opened.cf_names(),
        vec![
            "column_family_name_000001",
            "column_family_name_000002",
            "column_family_name_000003",
            "default"
        ]
    );
}

#[test]
fn the_harness_map_finds_what_was_written_in_every_family() {
    reads_find_what_the_writes_wrote("harness_test");
}

#[test]
fn readseq_reads_default_only_as_db_bench_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    let r = run(
        "harness_test",
        &db,
        "fillseq,readseq,readrandom",
        &["--num_column_families=4"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    // Keys 0..2000 land in family k % 4; default is family 0.
    assert_eq!(operations(&r, "readseq"), 500, "{}", r.all());
    assert_eq!(found(&r, "readrandom"), (2000, 2000), "{}", r.all());
    let r = run("harness_test", &db, "fillseq,readseq", &[]);
    assert_eq!(operations(&r, "readseq"), 2000, "{}", r.all());
}

#[test]
fn hot_families_are_created_stage_by_stage_and_reads_go_to_the_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    let r = run(
        "harness_test",
        &db,
        "fillseq,readseq,readrandom",
        &["--num_column_families=4", "--num_hot_column_families=2"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    // Two stages of 1000 ops; the stage moves on as the 1000th op starts
    // (db_bench counts the op before the check), so keys 0..998 go to
    // default and family 1, keys 999.. to families 2 and 3. Default keeps
    // the even keys of the first stage.
    assert_eq!(operations(&r, "readseq"), 500, "{}", r.all());
    // Reads go to the hot families (2 and 3): only second-stage keys.
    let (hit, read) = found(&r, "readrandom");
    assert_eq!(read, 2000);
    assert!((800..1200).contains(&hit), "{}", r.all());

    // A distribution sends every key to the first hot family.
    let r = run(
        "harness_test",
        &db,
        "fillseq,readseq",
        &[
            "--num_column_families=3",
            "--column_family_distribution=100,0,0",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(operations(&r, "readseq"), 2000, "{}", r.all());
}

#[test]
fn the_null_engine_takes_families_and_finds_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    let r = run(
        "null",
        &db,
        "fillrandom,readrandom,mixgraph",
        &["--num_column_families=4", "--num_hot_column_families=2"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(found(&r, "readrandom"), (0, 2000), "{}", r.all());
    assert!(result_line(&r.stdout, "mixgraph").is_some(), "{}", r.all());
}

#[test]
fn a_bad_distribution_is_refused_before_the_database_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = path.display().to_string();
    for (flags, says) in [
        (
            [
                "--num_column_families=4",
                "--column_family_distribution=50,50",
            ],
            "got 2 column_family_distribution items; expected 4",
        ),
        (
            [
                "--num_column_families=2",
                "--column_family_distribution=50,40",
            ],
            "column_family_distribution items must sum to 100",
        ),
        (
            [
                "--num_column_families=2",
                "--column_family_distribution=50,fifty",
            ],
            "illegal value '50,fifty' specified for string flag 'column_family_distribution'",
        ),
    ] {
        let r = run("null", &db, "fillrandom", &flags);
        assert_eq!(r.code, 1, "{}", r.all());
        assert!(r.stderr.contains(says), "{says}\n{}", r.all());
        assert!(!path.exists(), "{}", r.all());
    }
}

#[test]
fn one_family_is_today_s_run() {
    // Explicitly 1: no family is created, no warning, same results.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    let a = run("harness_test", &db, "fillrandom,readrandom", &[]);
    let b = run(
        "harness_test",
        &db,
        "fillrandom,readrandom",
        &["--num_column_families=1", "--column_family_distribution=1"],
    );
    assert_eq!(a.code, 0, "{}", a.all());
    assert_eq!(b.code, 0, "{}", b.all());
    assert_eq!(found(&a, "readrandom"), found(&b, "readrandom"));
    assert!(!b.stderr.contains("WARNING"), "{}", b.all());
}

#[test]
fn help_documents_the_family_flags_as_honoured() {
    let r = db_bench(&["--help"]);
    let honoured = r
        .stdout
        .split("db_bench flags honoured for every engine:")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("honoured section");
    for flag in [
        "-num_column_families (db_bench semantics: with N > 1",
        "-num_hot_column_families (",
        "-column_family_distribution (",
    ] {
        assert!(honoured.contains(flag), "{flag}\n{honoured}");
    }
}

/// Every compiled-in engine that keeps data and says it has families.
fn engines_with_families() -> Vec<EngineKind> {
    EngineKind::compiled_in()
        .into_iter()
        .filter(|&k| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = vmemkv_compat::open(k, &dir.path().join("db"), &EngineOptions::default())
                .unwrap_or_else(|e| panic!("open {k}: {e}"));
            let caps = db.capabilities();
            caps.supports(Capability::ColumnFamilies) && caps.discards_writes().is_none()
        })
        .collect()
}

#[test]
fn every_engine_with_families_finds_what_was_written() {
    let engines = engines_with_families();
    assert!(!engines.is_empty());
    for k in engines {
        reads_find_what_the_writes_wrote(k.as_str());
        families_survive_reopen(k);
    }
}

#[test]
fn an_engine_without_families_is_refused_with_its_reason() {
    for k in EngineKind::compiled_in() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = vmemkv_compat::open(k, &dir.path().join("probe"), &EngineOptions::default())
            .unwrap_or_else(|e| panic!("open {k}: {e}"));
        let Some(why) = db.capabilities().why_not(Capability::ColumnFamilies) else {
            continue;
        };
        drop(db);
        let path = dir.path().join("db").display().to_string();
        let r = run(
            k.as_str(),
            &path,
            "fillrandom,readrandom",
            &["--num_column_families=2"],
        );
        assert_eq!(r.code, 1, "{k}: {}", r.all());
        assert!(
            r.stderr.contains(&format!(
                "--num_column_families=2 cannot be honoured for engine {k}: {why}"
            )),
            "{k}: {}",
            r.all()
        );
        assert!(
            result_line(&r.stdout, "fillrandom").is_none(),
            "{}",
            r.all()
        );
    }
}
