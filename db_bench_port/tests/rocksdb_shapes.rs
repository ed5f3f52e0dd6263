//! Golden tests for the lines RocksDB's scripts read: the `stats` block
//! (`tools/benchmark.sh`'s `summarize_result`), `--statistics`' `rocksdb.*`
//! lines and the `LOG` version lines. Each golden file is the exact text;
//! `DB_BENCH_BLESS=1` rewrites them. The field checks read the lines the
//! way benchmark.sh's `awk` does (whitespace fields, 1-based).

mod common;

use std::path::PathBuf;

use common::db_bench;
use db_bench_port::dbstats::{self, CountingDb, EngineFigures, Figures};
use db_bench_port::engines::harness_test::HarnessTestDb;
use regex::Regex;
use vmemkv_compat::{Db, ReadOptions, WriteBatch, WriteOptions};

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("DB_BENCH_BLESS").is_some() {
        std::fs::write(&path, actual).expect("bless");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (DB_BENCH_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, want, "golden {name} differs");
}

/// `$n` of awk: the n-th whitespace field, 1-based.
fn field(line: &str, n: usize) -> &str {
    line.split_whitespace().nth(n - 1).unwrap_or("")
}

fn last_line_starting<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .rfind(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starts with {prefix:?} in\n{text}"))
}

fn figures() -> (Figures, Figures) {
    let engine = EngineFigures {
        tier: "T2",
        files: 3,
        size_bytes: 201_326_592,
        compact_read_bytes: 10_737_418_240,
        compact_write_bytes: 10_737_418_240,
        compactions: 2,
        compaction_keys_in: 15_000,
        compaction_micros: 4_250_000,
        compaction_cpu_micros: 3_100_000,
        pending_bytes: 0,
        delayed_writes: 7,
        stall_micros: 1_500_000,
        wal_syncs: 12,
        syncs_group_writes: true,
        has_wal: true,
    };
    let cur = Figures {
        uptime_secs: 12.5,
        writes: 150_000,
        keys: 150_000,
        ingest_bytes: 21_474_836_480,
        wal_writes: 100_000,
        wal_bytes: 42_000_000,
        sync_writes: 100_000,
        engine: engine.clone(),
    };
    let prev = Figures {
        uptime_secs: 2.5,
        writes: 50_000,
        keys: 50_000,
        ingest_bytes: 21_000_000,
        wal_writes: 50_000,
        wal_bytes: 21_000_000,
        sync_writes: 50_000,
        engine: EngineFigures {
            compact_read_bytes: 0,
            compact_write_bytes: 0,
            compactions: 0,
            compaction_keys_in: 0,
            compaction_micros: 250_000,
            compaction_cpu_micros: 100_000,
            delayed_writes: 2,
            stall_micros: 500_000,
            wal_syncs: 2,
            ..engine
        },
    };
    (cur, prev)
}

#[test]
fn stats_block_is_rocksdbs_and_benchmark_sh_reads_every_field() {
    let (cur, prev) = figures();
    let text = dbstats::stats_block(&cur, &prev);
    golden("stats_block.golden", &text);

    // summarize_result, field by field.
    assert_eq!(field(last_line_starting(&text, "Uptime(secs"), 2), "12.5");
    let stall = last_line_starting(&text, "Cumulative stall");
    assert_eq!(field(stall, 5), "12.0", "{stall}");
    let stalls = last_line_starting(&text, "Stalls(count):");
    let nstall: u64 = [2, 6, 10, 14, 18, 20]
        .iter()
        .map(|&i| field(stalls, i).parse::<u64>().expect(stalls))
        .sum();
    assert_eq!(nstall, 7);
    let writes = last_line_starting(&text, "Cumulative writes");
    let i = writes
        .split_whitespace()
        .position(|f| f == "ingest:")
        .expect("ingest:");
    assert_eq!(writes.split_whitespace().nth(i + 1), Some("20.00"));
    assert_eq!(writes.split_whitespace().nth(i + 2), Some("GB,"));
    let comp = last_line_starting(&text, "Cumulative compaction");
    assert_eq!((field(comp, 3), field(comp, 4)), ("10.00", "GB"));
    assert!(field(comp, 6).parse::<f64>().is_ok(), "{comp}");
    let flush = last_line_starting(&text, "Flush(GB)");
    assert_eq!(field(flush, 3), "20.000,");
    let sum = last_line_starting(&text, " Sum");
    assert_eq!(format!("{}{}", field(sum, 3), field(sum, 4)), "192.00MB");
    for i in [21, 22] {
        assert!(field(sum, i).parse::<f64>().is_ok(), "${i} of {sum}");
    }
    // c_wsecs and c_csecs: the rewrites' wall and CPU seconds; Avg(sec)
    // over 2 compactions; Rd(MB/s) = 10 GiB over 4.25 s.
    assert_eq!((field(sum, 15), field(sum, 16)), ("4.25", "3.10"), "{sum}");
    assert_eq!(
        (field(sum, 13), field(sum, 18)),
        ("2409.4", "2.125"),
        "{sum}"
    );
    let int = last_line_starting(&text, " Int");
    assert_eq!((field(int, 15), field(int, 16)), ("4.00", "3.00"), "{int}");
    assert_eq!(field(comp, 15), "4.2", "{comp}");
    let blob = last_line_starting(&text, "Blob file count:");
    assert_eq!(format!("{}{}", field(blob, 7), field(blob, 8)), "0.0GB,");

    // 50K writes without sync commit alone; 100K sync writes shared 12
    // msync rounds: 50,012 groups. The interval: 50K alone, 50K in 10.
    let cw = last_line_starting(&text, "Cumulative writes:");
    assert_eq!((field(cw, 7), field(cw, 10)), ("50K", "3.0"), "{cw}");
    let iw = last_line_starting(&text, "Interval writes:");
    assert_eq!((field(iw, 7), field(iw, 10)), ("50K", "2.0"), "{iw}");
}

/// A stand-in named `vmemkv` whose statistics text reports group-commit
/// rounds, so that the wrapper, the engine figures and the rendering are
/// checked together with grouping no real run can produce on demand.
struct GroupingEngine {
    inner: HarnessTestDb,
    stats: &'static str,
}

impl Db for GroupingEngine {
    fn name(&self) -> &'static str {
        "vmemkv"
    }
    fn limits(&self) -> vmemkv_compat::Limits {
        self.inner.limits()
    }
    fn get_into(
        &self,
        o: &ReadOptions,
        k: &[u8],
        out: &mut Vec<u8>,
    ) -> vmemkv_compat::Result<bool> {
        self.inner.get_into(o, k, out)
    }
    fn put(&self, o: &WriteOptions, k: &[u8], v: &[u8]) -> vmemkv_compat::Result<()> {
        self.inner.put(o, k, v)
    }
    fn delete(&self, o: &WriteOptions, k: &[u8]) -> vmemkv_compat::Result<()> {
        self.inner.delete(o, k)
    }
    fn write(&self, o: &WriteOptions, b: &WriteBatch) -> vmemkv_compat::Result<()> {
        self.inner.write(o, b)
    }
    fn iter<'a>(
        &'a self,
        o: &ReadOptions,
    ) -> vmemkv_compat::Result<Box<dyn vmemkv_compat::DbIterator + 'a>> {
        self.inner.iter(o)
    }
    fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }
    fn statistics(&self) -> Option<String> {
        Some(self.stats.to_string())
    }
}

#[test]
fn commit_groups_are_sync_rounds_for_sync_writes_and_one_per_other_write() {
    // 6 sync writes served by 2 rounds, 2 writes without sync: 4 groups.
    let db = CountingDb::new(
        Box::new(GroupingEngine {
            inner: HarnessTestDb::new(),
            stats: "sync: rounds=2 waiters=6\n",
        }),
        false,
    );
    let counters = db.counters();
    for i in 0..6u8 {
        db.put(&WriteOptions::sync(), &[b'k', i], b"v")
            .expect("put");
    }
    let mut b = WriteBatch::new();
    b.put(b"x", b"1");
    b.put(b"y", b"2");
    db.write(&WriteOptions::default(), &b).expect("write");
    db.delete(&WriteOptions::default(), b"x").expect("delete");
    let f = Figures::collect(&counters, &db, 1.0);
    assert_eq!((f.writes, f.sync_writes, f.commit_groups()), (8, 6, 4));
    let text = dbstats::stats_block(&f, &Figures::default());
    let cw = last_line_starting(&text, "Cumulative writes:");
    assert!(
        cw.starts_with(
            "Cumulative writes: 8 writes, 9 keys, 4 commit groups, 2.0 writes per commit group,"
        ),
        "{cw}"
    );
    let ticks = dbstats::tickers(&counters, &f);
    let tick = |n: &str| ticks.iter().find(|(k, _)| *k == n).map(|t| t.1);
    assert_eq!(tick("rocksdb.write.self"), Some(4));
    assert_eq!(tick("rocksdb.write.other"), Some(4));

    // Rounds beyond the sync writes (the engine's own flushes and
    // checkpoints) group no write.
    let db = CountingDb::new(
        Box::new(GroupingEngine {
            inner: HarnessTestDb::new(),
            stats: "sync: rounds=9 waiters=10\n",
        }),
        false,
    );
    let counters = db.counters();
    db.put(&WriteOptions::sync(), b"k", b"v").expect("put");
    db.put(&WriteOptions::default(), b"j", b"v").expect("put");
    let f = Figures::collect(&counters, &db, 1.0);
    assert_eq!(f.commit_groups(), 2);
}

#[test]
fn statistics_lines_are_rocksdbs_tickers_then_histograms_then_the_engines() {
    let db = CountingDb::new(Box::new(HarnessTestDb::new()), true);
    let counters = db.counters();
    let w = WriteOptions::default();
    let r = ReadOptions::default();
    db.put(&w, b"k1", b"value1").expect("put");
    db.put(&WriteOptions::sync(), b"k2", b"v2").expect("put");
    let mut b = WriteBatch::new();
    b.put(b"k3", b"v3");
    b.delete(b"k1");
    db.write(&w, &b).expect("write");
    assert!(db.get(&r, b"k2").expect("get").is_some());
    assert!(db.get(&r, b"nope").expect("get").is_none());
    {
        let mut it = db.iter(&r).expect("iter");
        it.seek(b"k");
        it.next();
        it.next();
    }
    let f = Figures::collect(&counters, &db, 1.0);
    let text = dbstats::statistics_text(&counters, &f, db.name(), "own: x=1\n");
    let ticker = Regex::new(r"^rocksdb\.[a-z0-9._]+ COUNT : \d+$").expect("re");
    let hist = Regex::new(
        r"^rocksdb\.[a-z0-9._]+ P50 : \d+\.\d{6} P95 : \d+\.\d{6} P99 : \d+\.\d{6} P100 : \d+\.\d{6} COUNT : \d+ SUM : \d+$",
    )
    .expect("re");
    let lines: Vec<&str> = text.lines().collect();
    let n_tickers = dbstats::tickers(&counters, &f).len();
    let n_hists = dbstats::HISTOGRAMS.len();
    for l in &lines[..n_tickers] {
        assert!(ticker.is_match(l), "{l}");
    }
    for l in &lines[n_tickers..n_tickers + n_hists] {
        assert!(hist.is_match(l), "{l}");
    }
    assert_eq!(
        &lines[n_tickers + n_hists..],
        &["** harness_test statistics **", "own: x=1"]
    );
    // The counts, which are exact; the times are not, so the golden text
    // holds the ticker lines and the histograms' names and counts.
    let mut stable = String::new();
    for l in &lines[..n_tickers] {
        stable.push_str(l);
        stable.push('\n');
    }
    for l in &lines[n_tickers..n_tickers + n_hists] {
        let count = l
            .split(" COUNT : ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("");
        stable.push_str(&format!("{} COUNT : {count}\n", field(l, 1)));
    }
    golden("statistics_lines.golden", &stable);
}

#[test]
fn log_lines_give_benchmark_sh_its_version_and_git_hash() {
    let text = dbstats::log_header(
        "2026/12/03-07:10:58.393351",
        0x7f2c757d4c80,
        "vmemkv",
        "0.1.0",
    )
    .replace(dbstats::GIT_SHA, "GITSHA");
    golden("log_header.golden", &text);
    // benchmark.sh: grep "RocksDB version:" LOG | head -1 | awk '{print $5}'
    let v = text
        .lines()
        .find(|l| l.contains("RocksDB version:"))
        .expect("version");
    assert_eq!(field(v, 5), "0.1.0");
    // grep "Git sha" LOG | head -1 | awk '{print substr($5, 1, 10)}'
    let g = text.lines().find(|l| l.contains("Git sha")).expect("sha");
    assert_eq!(field(g, 5), "GITSHA");
}

#[test]
fn a_run_writes_log_lines_stats_statistics_and_one_warning_per_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let wal = dir.path().join("wal");
    let r = db_bench(&[
        "--engine=vmemkv",
        "--benchmarks=fillseq,readrandom,seekrandom,stats",
        "--num=3000",
        "--seed=1",
        "--statistics=1",
        "--compression_type=zstd",
        "--perf_level=2",
        &format!("--wal_dir={}", wal.display()),
        &format!("--db={}", db.display()),
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    // The header's first line (warnings come before it, as in db_bench).
    let lines: Vec<&str> = r.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("RocksDB:"))
        .expect("a RocksDB: line");
    assert!(lines[at + 1].starts_with("Date:       "), "{}", r.all());
    let first = lines[at];
    assert!(
        Regex::new(r"^RocksDB:    version \S+ \(engine vmemkv; db_bench_port \S+\)$")
            .expect("re")
            .is_match(first),
        "{first}"
    );
    for flag in ["--compression_type=zstd", "--perf_level=2", "--wal_dir="] {
        let n = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("WARNING: ") && l.contains(flag))
            .count();
        assert_eq!(n, 1, "one warning for {flag}\n{}", r.all());
    }
    assert!(!wal.exists(), "nothing is written to --wal_dir");
    let log = std::fs::read_to_string(db.join("LOG")).expect("LOG");
    let v = log
        .lines()
        .find(|l| l.contains("RocksDB version:"))
        .expect("version line");
    assert!(!field(v, 5).is_empty(), "{v}");
    let g = log
        .lines()
        .find(|l| l.contains("Git sha"))
        .expect("sha line");
    assert_eq!(field(g, 5), dbstats::GIT_SHA);

    let out = &r.stdout;
    let writes = last_line_starting(out, "Cumulative writes");
    assert!(
        writes.starts_with(
            "Cumulative writes: 3000 writes, 3000 keys, 3000 commit groups, 1.0 writes per commit group,"
        ),
        "{writes}"
    );
    assert!(out.contains("\n Sum "), "{out}");
    assert!(out.contains("\n** vmemkv stats **\n"), "{out}");
    let get = last_line_starting(out, "rocksdb.number.keys.read COUNT : ");
    assert_eq!(get, "rocksdb.number.keys.read COUNT : 3000");
    let seek = last_line_starting(out, "rocksdb.db.seek.micros ");
    assert!(seek.contains(" COUNT : 3000 "), "{seek}");
    assert!(out.contains("** vmemkv statistics **\nt1: "), "{out}");
}

/// `--perf_level=2` on RocksDB is honoured as db_bench honours it: no
/// warning, and the result line carries RocksDB's own `PERF_CONTEXT:`
/// block, whose counters moved (a readrandom compares user keys).
#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_prints_its_perf_context_at_perf_level_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = db_bench(&[
        "--engine=rocksdb",
        "--benchmarks=fillseq,readrandom",
        "--num=2000",
        "--seed=1",
        "--compression_type=none",
        "--perf_level=2",
        &format!("--db={}", dir.path().join("db").display()),
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let out = r.all();
    assert!(!out.contains("WARNING: --perf_level"), "{out}");
    let at = out
        .find("readrandom   :")
        .unwrap_or_else(|| panic!("no readrandom line\n{out}"));
    let block = &out[at..];
    let perf = block
        .find("PERF_CONTEXT:\n")
        .unwrap_or_else(|| panic!("no PERF_CONTEXT after readrandom\n{out}"));
    let cmp = Regex::new(r"user_key_comparison_count = (\d+)").expect("re");
    let n: u64 = cmp
        .captures(&block[perf..])
        .and_then(|c| c[1].parse().ok())
        .unwrap_or_else(|| panic!("no user_key_comparison_count\n{out}"));
    assert!(n > 0, "{out}");
}

/// RocksDB 11's stats have a `WPreComp(GB)` column and a `Write Stall
/// (count):` line; the benchmark.sh it ships reads the older layout. The
/// port adds a ` Sum` row without that column and a `Stalls(count):` line
/// from the same counts, and leaves RocksDB's lines as they are.
#[test]
fn rocksdbs_stats_gain_the_lines_its_benchmark_sh_reads() {
    let text = "Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) WPreComp(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)\n\
        ---\n\
        \x20 L0      0/0      0.00 KB   0.0      0.0     0.0      0.0       0.0       0.0      0.0       0.0   1.0      0.0    300.3      0.01              0.02         1    0.008     20K      0       0.3       0.4\n\
        \x20Sum      1/0      2.33 MB   0.0      0.0     0.0      0.0       0.0       0.0      0.0       0.0   1.0      0.0    300.3      0.01              0.02         1    0.008     20K      0       0.3       0.4\n\
        \x20Int      0/0      0.00 KB   0.0      0.0     0.0      0.0       0.0       0.0      0.0       0.0   1.0      0.0    300.3      0.01              0.02         1    0.008     20K      0       0.3       0.4\n\
        Cumulative stall: 00:00:0.000 H:M:S, 0.0 percent\n\
        Write Stall (count): cf-l0-file-count-limit-delays-with-ongoing-compaction: 1, cf-l0-file-count-limit-stops-with-ongoing-compaction: 2, l0-file-count-limit-delays: 3, l0-file-count-limit-stops: 4, memtable-limit-delays: 5, memtable-limit-stops: 6, pending-compaction-bytes-delays: 7, pending-compaction-bytes-stops: 8, total-delays: 15, total-stops: 18\n\
        Write Stall (count): write-buffer-manager-limit-stops: 9\n";
    let out = dbstats::for_benchmark_sh(text);
    // RocksDB's own lines all stay, in order.
    let mut kept = out.lines();
    for l in text.lines() {
        assert!(kept.any(|k| k == l), "{l:?} lost\n{out}");
    }
    // benchmark.sh: the last ` Sum` line's $15 $16 $21 $22.
    let sum = last_line_starting(&out, " Sum");
    assert_eq!(
        [15, 16, 21, 22].map(|i| field(sum, i)),
        ["0.01", "0.02", "0.3", "0.4"],
        "{sum}"
    );
    assert_eq!(format!("{}{}", field(sum, 3), field(sum, 4)), "2.33MB");
    let stalls: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Stalls(count):"))
        .collect();
    assert_eq!(stalls.len(), 1, "{out}");
    let s = stalls[0];
    // benchmark.sh's Nstall: $2 + $6 + $10 + $14 + $18 + $20.
    let f: Vec<u64> = [2, 6, 10, 14, 18, 20]
        .iter()
        .map(|&i| field(s, i).parse().expect(s))
        .collect();
    assert_eq!(f, [3, 4, 8, 7, 6, 5], "{s}");
    assert_eq!((field(s, 4), field(s, 8)), ("1", "2"), "{s}");
    assert_eq!(
        dbstats::for_benchmark_sh("no stalls here\n"),
        "no stalls here\n"
    );
}
