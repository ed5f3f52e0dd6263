//! The key-order pass: values of a random-order load are rewritten in key
//! order once writes go quiet (or on `wait_for_compaction`), a key-order
//! load is packed once and its sparse overwrites are left alone, runs do
//! not copy key-order writes, and nothing moves while
//! writes keep coming or when the pass is off. Each case checks the data
//! against a model, and after a reopen.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use vmemkv::{Db, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const N: u64 = 20_000;

/// Background threads on (checkpoint, defragment: they may move values
/// too) unless `idle_ms` is `None`; the key-order pass after `idle_ms`.
fn open_with(dir: &std::path::Path, idle_ms: Option<u64>) -> Db {
    let o = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(10)
        .background(idle_ms.is_some())
        .order_idle_ms(idle_ms.unwrap_or(0));
    Db::open(dir, o).unwrap_or_else(|e| panic!("open: {e}"))
}

/// `N` keys of 200 B written in a scrambled key order.
fn scrambled_load(db: &Db) -> Model {
    let mut m = Model::new();
    for n in 0..N {
        let i = (n * 7919) % N;
        let v = value(i, 0, 200);
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
        m.insert(key(i), v);
    }
    m
}

/// Values `compact_range` would still move: the layout's disorder.
fn still_scattered(db: &Db) -> u64 {
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"))
        .moved_values
}

fn check(db: Db, dir: &std::path::Path, model: &Model) {
    assert_eq!(&dump(&db), model);
    drop(db);
    let db = open(dir);
    assert_eq!(&dump(&db), model, "after reopen");
}

#[test]
fn a_random_load_is_put_in_key_order_once_writes_go_quiet() {
    let dir = tmp();
    let db = open_with(dir.path(), Some(200));
    let model = scrambled_load(&db);
    let t0 = Instant::now();
    while db.statistics().ordered_values < N * 9 / 10 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the background pass did not order the load: {:?}",
            db.statistics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = still_scattered(&db);
    assert!(left < N / 50, "{left} values still out of key order");
    assert!(info_log(dir.path()).contains("key order (background)"));
    check(db, dir.path(), &model);
}

#[test]
fn wait_for_compaction_orders_a_random_load_and_then_moves_nothing() {
    let dir = tmp();
    let db = open_with(dir.path(), None);
    let model = scrambled_load(&db);
    let r = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert!(r.moved_values > N * 9 / 10, "{r:?}");
    assert!(
        !r.retired_segments.is_empty(),
        "emptied segments stay: {r:?}"
    );
    let again = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.moved_values, 0, "{again:?}");
    assert!(still_scattered(&db) < N / 50);
    check(db, dir.path(), &model);
}

/// `N` keys of 200 B written in key order.
fn key_order_load(db: &Db) -> Model {
    let mut m = Model::new();
    for i in 0..N {
        let v = value(i, 0, 200);
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
        m.insert(key(i), v);
    }
    m
}

/// A key-order load as written has a record header and the key between
/// every two values; the pass packs it once (RocksDB's compaction rewrites
/// its flushes too). Sparse overwrites of the packed load are then left
/// in place: each is one scattered value in a window of packed ones, not
/// worth a copy.
#[test]
fn a_key_order_load_is_packed_once_and_sparse_overwrites_are_left_in_place() {
    let dir = tmp();
    let db = open_with(dir.path(), None);
    let mut model = key_order_load(&db);
    assert!(back_to_back(dir.path(), 200) < N / 50, "written packed?");
    let r = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert!(r.moved_values >= N - 1, "{r:?}");
    let adjacent = back_to_back(dir.path(), 200);
    assert!(
        adjacent >= N - N / 50,
        "only {adjacent} of {N} values follow the previous key's directly"
    );
    let again = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.moved_values, 0, "{again:?}");
    // 2% of the keys rewritten at random.
    for n in 0..N / 50 {
        let i = (n * 7919 + 13) % N;
        let v = value(i, 1, 200);
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
        model.insert(key(i), v);
    }
    let r = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.moved_values, 0, "{r:?}");
    // compact_range, asked explicitly, does move them.
    assert!(still_scattered(&db) >= N / 60);
    check(db, dir.path(), &model);
}

#[test]
fn nothing_is_ordered_while_writes_keep_coming_or_when_off() {
    let dir = tmp();
    // Quiet means 1 s without a write: a rollover's fsync on a loaded
    // machine has stalled a put past 300 ms.
    let db = open_with(dir.path(), Some(1000));
    let mut model = Model::new();
    // Writes every few milliseconds for 1.5 s: never 1 s of quiet.
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_millis(1500) {
        for _ in 0..100 {
            let i = (n * 7919) % N;
            let v = value(i, n, 200);
            db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
            model.insert(key(i), v);
            n += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(db.statistics().ordered_values, 0);
    drop(db);
    // Off: quiet for 1 s, still nothing moves.
    let db = open_with(dir.path(), Some(0));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(db.statistics().ordered_values, 0);
    assert!(still_scattered(&db) > 1000, "the load was not scattered");
    check(db, dir.path(), &model);
}

/// How many keys `i` in `2..N` have their `len`-byte value stored directly
/// after key `i - 1`'s, 4 bytes (the value checksum) apart, in the newest
/// copy of the log (see [`gaps`]).
fn back_to_back(dir: &std::path::Path, len: usize) -> u64 {
    N - 2 - gaps(dir, len, N).len() as u64
}

/// Where key `i`'s `len`-byte value (`i` in `2..n`) is not stored directly
/// after key `i - 1`'s, the bytes between the two, in the newest copy of
/// the log: segment files in id order, the walk starting at the last copy
/// of key 1's value (key 0's is all zeros, like unused space).
fn gaps(dir: &std::path::Path, len: usize, n: u64) -> Vec<usize> {
    let log = log_bytes(dir);
    let first = value(1, 0, len);
    let mut pos = log
        .windows(len)
        .rposition(|w| w == first)
        .unwrap_or_else(|| panic!("key 1's value is not in the log"));
    let mut gaps = Vec::new();
    for i in 2..n {
        let v = value(i, 0, len);
        let next = pos + len + 4;
        if log.get(next..next + len) == Some(&v[..]) {
            pos = next;
        } else {
            let from = pos + len;
            let gap = log[from..]
                .windows(len)
                .position(|w| w == v)
                .unwrap_or_else(|| panic!("key {i}'s value is not after key {}'s", i - 1));
            gaps.push(gap);
            pos = from + gap;
        }
    }
    gaps
}

/// Packed records are large (a scan crossing one's directory reads in two
/// pieces) and the last one of a segment is cut to fit its tail, instead
/// of rolling the log over and leaving up to a record's bytes unused.
#[test]
fn packed_records_are_large_and_fill_each_segment() {
    const KEYS: u64 = 100_000;
    const LEN: usize = 400;
    let dir = tmp();
    // 16 MiB segments: records of up to 2 MiB (an eighth of a segment).
    let o = Options::default()
        .segment_size(16 << 20)
        .background(false)
        .order_idle_ms(0);
    let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("open: {e}"));
    let mut model = Model::new();
    for i in 0..KEYS {
        let v = value(i, 0, LEN);
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
        model.insert(key(i), v);
    }
    let r = db.wait_for_compaction().unwrap_or_else(|e| panic!("{e}"));
    assert!(r.moved_values >= KEYS - 1, "{r:?}");
    let gaps = gaps(dir.path(), LEN, KEYS);
    // ~41 MB packed: ~20 records of 2 MiB and 2 segment ends; 1 MiB
    // records would leave ~40 gaps.
    let packed = KEYS as usize * (LEN + 4);
    assert!(
        gaps.len() <= packed / (2 << 20) + 4,
        "{} gaps between consecutive values: {gaps:?}",
        gaps.len()
    );
    // A full record's directory is ~190 KB (5,190 x 36 bytes); at a
    // segment's end, a cut record's directory, headers, a seal and under
    // 64 KiB of unused tail. A record that rolled the log over would leave
    // up to 2 MiB.
    let widest = gaps.iter().max().copied().unwrap_or(0);
    assert!(widest < 256 << 10, "a gap of {widest} bytes: {gaps:?}");
    check(db, dir.path(), &model);
}

/// Moved values are packed: each directly after the previous key's, with
/// only its checksum between, where a record per value would put a header
/// and the key there (a fifth of the bytes of a 512-byte value).
#[test]
fn values_moved_into_key_order_lie_back_to_back() {
    let dir = tmp();
    let db = open_with(dir.path(), None);
    let model = scrambled_load(&db);
    assert!(still_scattered(&db) > N * 9 / 10);
    let adjacent = back_to_back(dir.path(), 200);
    assert!(
        adjacent >= N - N / 50,
        "only {adjacent} of {N} values follow the previous key's directly"
    );
    assert!(still_scattered(&db) < N / 50);
    check(db, dir.path(), &model);
}

/// A process killed while `compact_range` writes packed records: the
/// records it wrote are replayed on open (T1 points at the packed copies,
/// so a second pass finds them in order) and nothing is lost.
#[cfg(feature = "failpoints")]
#[test]
fn packed_moves_survive_a_kill_before_their_checkpoint() {
    const CHILD: &str = "VMEMKV_KEY_ORDER_CHILD";
    if let Some(d) = std::env::var_os(CHILD) {
        let db = open_with(std::path::Path::new(&d), None);
        scrambled_load(&db);
        let _ = db.compact_range(None, None);
        panic!("the failpoint did not fire");
    }
    let dir = tmp();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let status = std::process::Command::new(exe)
        .args([
            "--exact",
            "packed_moves_survive_a_kill_before_their_checkpoint",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .env(
            "VMEMKV_FAILPOINTS",
            format!("defragment.relocated@{}", N * 3 / 4),
        )
        .status()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let model: Model = (0..N).map(|i| (key(i), value(i, 0, 200))).collect();
    let db = open_with(dir.path(), None);
    assert_eq!(dump(&db), model);
    let moved = still_scattered(&db);
    assert!(
        moved < N / 3,
        "{moved} values moved again: the packed records were not replayed"
    );
    check(db, dir.path(), &model);
}

/// The scrambled load in `pieces` pieces with sorted runs every
/// `run_bytes` (0 = none) and the quiet-time pass off. A piece holds more
/// than `run_bytes` of log, and the next starts once its run is sorted
/// (the maintenance thread would otherwise fold a fast load into a few
/// large runs).
fn load_in_runs(dir: &std::path::Path, run_bytes: u64, pieces: u64) -> (Db, Model) {
    let o = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5)
        .order_idle_ms(0)
        .sorted_run_bytes(run_bytes);
    let db = Db::open(dir, o).unwrap_or_else(|e| panic!("open: {e}"));
    let mut m = Model::new();
    let sorted = || info_log(dir).matches("sorted run: sorted").count() as u64;
    for p in 0..pieces {
        for n in p * N / pieces..(p + 1) * N / pieces {
            let i = (n * 7919) % N;
            let v = value(i, 0, 200);
            db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
            m.insert(key(i), v);
        }
        let t0 = Instant::now();
        while run_bytes > 0 && sorted() <= p {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "piece {p} of {pieces} was not sorted: {:?}\n{}",
                db.statistics(),
                info_log(dir)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    (db, m)
}

/// Reads a cold async MultiScan of 20 ranges of 100 keys issues, checking
/// its results against the model.
fn cold_scan_reads(db: &Db, model: &Model) -> u64 {
    use vmemkv::{BufferMode, MultiScanOptions, ScanRange};
    db.evict_page_cache().unwrap_or_else(|e| panic!("{e}"));
    let ranges: Vec<ScanRange> = (0..20u64)
        .map(|r| ScanRange::new(&key(r * 900), &key(r * 900 + 100)))
        .collect();
    let args = MultiScanOptions {
        buffer_mode: BufferMode::Direct,
        ..MultiScanOptions::with_async_io(ranges.clone(), true)
    };
    let mut ms = db.multi_scan(&args).unwrap_or_else(|e| panic!("{e}"));
    for r in &ranges {
        assert!(ms.next_range().unwrap_or_else(|e| panic!("{e}")));
        let lo = r.start.clone().unwrap_or_default();
        let hi = r.limit.clone().unwrap_or_default();
        for (k, v) in model.range(lo..hi) {
            assert!(ms.next_entry().unwrap_or_else(|e| panic!("{e}")));
            assert_eq!((ms.key(), ms.value()), (&k[..], &v[..]));
        }
        assert!(!ms.next_entry().unwrap_or_else(|e| panic!("{e}")));
    }
    ms.stats().reads
}

/// A database that sorts its tail into runs of `run_bytes` as it is
/// written, and not at close.
fn open_for_runs(dir: &std::path::Path, run_bytes: u64) -> Db {
    let o = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5)
        .order_idle_ms(0)
        .sort_tail_at_close(false)
        .sorted_run_bytes(run_bytes);
    Db::open(dir, o).unwrap_or_else(|e| panic!("open: {e}"))
}

/// The LOG lines of the sorted runs made so far.
fn sorted_run_lines(dir: &std::path::Path) -> Vec<String> {
    info_log(dir)
        .lines()
        .filter(|l| l.contains("sorted run: sorted"))
        .map(str::to_owned)
        .collect()
}

/// Waits, up to a minute, for the first sorted run.
fn await_a_sorted_run(db: &Db, dir: &std::path::Path) {
    let t0 = Instant::now();
    while sorted_run_lines(dir).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no runs: {:?}\n{}",
            db.statistics(),
            info_log(dir)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sorted runs leave key-order writes where they are: copying them while
/// they are written would double a `fillseq`'s writes, and the quiet-time
/// pass packs them later in one go.
#[test]
fn runs_do_not_copy_a_key_order_load() {
    let dir = tmp();
    let db = open_for_runs(dir.path(), 1 << 20);
    let model = key_order_load(&db);
    // Usually several runs; one when the maintenance thread (niced) was
    // starved through the load and its first run took the whole tail.
    await_a_sorted_run(&db, dir.path());
    assert_eq!(db.statistics().ordered_values, 0, "{:?}", db.statistics());
    assert!(back_to_back(dir.path(), 200) < N / 50);
    check(db, dir.path(), &model);
}

/// Four writers loading keys in order, each its own stride of the key
/// space and each at its own point in it (db_bench's `insert` at 4
/// threads): in key order, values alternate between four ascending runs,
/// each with a few records of the others in its gaps. Sorted runs leave
/// them where they are and count them as several runs. The writes are
/// interleaved by hand, so that the layout does not depend on scheduling.
#[test]
fn runs_do_not_copy_the_interleaved_key_order_writes_of_several_writers() {
    const W: u64 = 4;
    let dir = tmp();
    let db = open_for_runs(dir.path(), 2 << 20);
    let mut model = Model::new();
    let per = N / W;
    for step in 0..per {
        for w in 0..W {
            // Writer w is a quarter of its stride ahead of writer w - 1.
            let i = w + W * ((step + w * per / W) % per);
            let v = value(i, 0, 200);
            db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
            model.insert(key(i), v);
        }
    }
    let runs = || sorted_run_lines(dir.path());
    await_a_sorted_run(&db, dir.path());
    let stats = db.statistics();
    // A writer's run breaks where it wraps around and at segment ends;
    // what moves is the pieces too short to keep.
    assert!(stats.ordered_values < N / 20, "{stats:?}\n{:?}", runs());
    // A sort that starts while the load is under way sees only where the
    // writers' strides overlap so far: two runs or more side by side.
    assert!(
        runs()
            .iter()
            .any(|l| l.contains("key-order runs left in place")),
        "{:?}",
        runs()
    );
    assert!(stats.sorted_runs >= 2, "{stats:?}");
    check(db, dir.path(), &model);
}

#[test]
fn a_random_load_is_sorted_into_runs_while_it_is_written() {
    let dir = tmp();
    // ~5.4 MB of log in five runs.
    let (db, model) = load_in_runs(dir.path(), 1 << 20, 5);
    let sorted = || info_log(dir.path()).matches("sorted run: sorted").count() as u64;
    let before = sorted();
    let stats = db.statistics();
    let after = sorted();
    assert!(stats.ordered_values >= N / 2, "{stats:?}");
    // At least five runs of level 0, none merged; what is left is at most
    // about the last piece, ~1.1 MB of log.
    assert!(
        before >= 5 && (before..=after).contains(&stats.sorted_runs),
        "{before}..={after} runs in LOG: {stats:?}"
    );
    assert!(stats.unsorted_bytes < 2 << 20, "{stats:?}");
    let with_runs = cold_scan_reads(&db, &model);
    check(db, dir.path(), &model);

    let plain = tmp();
    let (db, model) = load_in_runs(plain.path(), 0, 1);
    let stats = db.statistics();
    assert_eq!(
        (
            stats.ordered_values,
            stats.sorted_runs,
            stats.unsorted_bytes
        ),
        (0, 0, 0)
    );
    let without = cold_scan_reads(&db, &model);
    // One read per run and range, plus the tail's values, against about
    // one per value.
    assert!(
        with_runs * 3 < without,
        "{with_runs} reads with sorted runs, {without} without"
    );
    check(db, plain.path(), &model);
}

#[test]
fn sorted_runs_of_one_level_are_merged() {
    let dir = tmp();
    // ~5.4 MB of log in twenty runs: each eight of level 0 merge into one.
    let (db, model) = load_in_runs(dir.path(), 256 << 10, 20);
    let log = info_log(dir.path());
    assert!(log.contains("into a level-1 run"), "{log}");
    check(db, dir.path(), &model);
}

#[test]
fn close_logs_what_no_run_took() {
    let dir = tmp();
    let o = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5)
        .sorted_run_bytes(1 << 30);
    let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("open: {e}"));
    let model = scrambled_load(&db);
    let stats = db.statistics();
    assert_eq!(stats.sorted_runs, 0, "{stats:?}");
    // Every value written went to the log: 200 bytes and more each.
    assert!(stats.unsorted_bytes >= N * 200, "{stats:?}");
    drop(db);
    let log = info_log(dir.path());
    let line = log
        .lines()
        .find(|l| l.contains("sorted run: close leaves"))
        .unwrap_or_else(|| panic!("{log}"));
    let bytes: u64 = line
        .split("close leaves ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    // Every value written went to the log: 200 bytes and more each.
    assert!(bytes >= N * 200, "{line}");
    check(open(dir.path()), dir.path(), &model);
}

#[test]
fn close_sorts_the_tail_into_a_run() {
    // The load (~5.4 MB of log) is under one run, so only the close sorts.
    let reads = |sort: bool| {
        let dir = tmp();
        let o = Options::default()
            .segment_size(1 << 20)
            .maintenance_interval_ms(5)
            .order_idle_ms(0)
            .sorted_run_bytes(16 << 20)
            .sort_tail_at_close(sort);
        let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("open: {e}"));
        let model = scrambled_load(&db);
        drop(db);
        let log = info_log(dir.path());
        assert_eq!(log.contains("sorted run: sorted"), sort, "{log}");
        assert_eq!(log.contains("sorted run: close leaves"), !sort, "{log}");
        let db = open_with(dir.path(), None);
        let reads = cold_scan_reads(&db, &model);
        check(db, dir.path(), &model);
        reads
    };
    let (sorted, unsorted) = (reads(true), reads(false));
    // About one read per range against one per value.
    assert!(
        sorted * 10 < unsorted,
        "{sorted} reads after a close that sorted, {unsorted} after one that did not"
    );
}

/// A close that cuts a tail sort short moves what the sort had moved below
/// the key where it stopped again, with what writers put behind it, so
/// the load ends in one more run, not two (the second a small one that
/// every range below that key would read as an extent of its own).
#[test]
fn a_close_that_cuts_a_sort_short_still_makes_one_run() {
    let mut cut = 0;
    for attempt in 0..6 {
        let dir = tmp();
        let o = Options::default()
            .segment_size(1 << 20)
            .maintenance_interval_ms(1)
            .order_idle_ms(0)
            .sorted_run_bytes(4 << 20);
        let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("open: {e}"));
        let n = 3 * N;
        let mut model = Model::new();
        let sorts = || info_log(dir.path()).matches("sorted run: sorting").count();
        // Scrambled writes until the second sort has begun, then a few
        // more (some land behind its walk), then the close.
        let mut i = 0u64;
        let mut extra: Option<u64> = None;
        while i < 4 * n && extra.is_none_or(|e| e > 0) {
            let k = (i * 7919) % n;
            let v = value(k, i, 200);
            db.put(&key(k), &v).unwrap_or_else(|e| panic!("{e}"));
            model.insert(key(k), v);
            i += 1;
            extra = match extra {
                Some(e) => Some(e - 1),
                None if i.is_multiple_of(256) && sorts() >= 2 => Some(2000),
                None => None,
            };
        }
        drop(db);
        let log = info_log(dir.path());
        let Some((_, after)) = log.split_once("close moves again") else {
            continue;
        };
        cut += 1;
        assert_eq!(
            (
                after.matches("sorted run: sorted").count(),
                after.matches("sorted run: sorting").count(),
                after.contains("close leaves"),
            ),
            (1, 0, false),
            "attempt {attempt}:\n{log}"
        );
        let db = open(dir.path());
        assert_eq!(dump(&db), model, "attempt {attempt}");
    }
    assert!(cut > 0, "no close cut a sort short in 6 attempts");
}
