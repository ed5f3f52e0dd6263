//! SIGKILL a child process mid-write, reopen, and check every acknowledged
//! `sync = true` write and the all-or-nothing property of batches.
//!
//! The test binary re-runs itself as the child (env `VMEMKV_CRASH_CHILD`).

mod common;

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use vmemkv::{Db, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "VMEMKV_CRASH_CHILD";
const BATCH_KEYS: u64 = 8;

fn batch_key(b: u64, j: u64) -> Vec<u8> {
    format!("batch{b:08}-{j}").into_bytes()
}

/// Re-runs this test binary as the child of test `test`, with `env` set to
/// the database directory; returns it and its stdout's lines.
fn spawn_self(
    test: &str,
    env: &str,
    dir: &std::path::Path,
) -> (Child, Lines<BufReader<ChildStdout>>) {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut c = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = c.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    (c, BufReader::new(stdout).lines())
}

/// Small segments, frequent checkpoints, and sorted runs (and their
/// merges) moving values while the kill lands.
fn busy_opts() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .checkpoint_interval_bytes(2 << 20)
        .maintenance_interval_ms(5)
        .sorted_run_bytes(256 << 10)
}

/// The child: three writer threads; prints `ACK <thread> <i>` after each
/// acknowledged sync write (single puts for thread 0 and 1, batches for 2).
fn child(dir: &str) -> ! {
    let db = Arc::new(Db::open(dir, busy_opts()).unwrap_or_else(|e| panic!("child open: {e}")));
    let mut hs = Vec::new();
    for t in 0..3u64 {
        let db = db.clone();
        hs.push(std::thread::spawn(move || {
            let mut i = 0u64;
            loop {
                if t < 2 {
                    let k = key(t << 40 | i);
                    let v = value(t << 40 | i, 0, ((i * 37) % 3000) as usize);
                    db.put_opt(&WriteOptions::sync(), &k, &v)
                        .unwrap_or_else(|e| panic!("child put: {e}"));
                    // Unsynced traffic in between; not checked.
                    db.put(&key(9 << 40 | i), &v)
                        .unwrap_or_else(|e| panic!("{e}"));
                } else {
                    let mut b = WriteBatch::new();
                    for j in 0..BATCH_KEYS {
                        b.put(&batch_key(i, j), &value(i, j, 200 + (j as usize) * 100));
                    }
                    db.write(&WriteOptions::sync(), &b)
                        .unwrap_or_else(|e| panic!("child batch: {e}"));
                }
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "ACK {t} {i}");
                let _ = out.flush();
                i += 1;
            }
        }));
    }
    for h in hs {
        let _ = h.join();
    }
    std::process::exit(0)
}

#[test]
fn sigkill_mid_write_loses_no_acknowledged_sync_write() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let dir = tmp();
    for round in 0..3u32 {
        let (mut c, mut lines) = spawn_self(
            "sigkill_mid_write_loses_no_acknowledged_sync_write",
            CHILD_ENV,
            dir.path(),
        );
        let mut acked: [Vec<u64>; 3] = Default::default();
        let t0 = Instant::now();
        let kill_after = Duration::from_millis(300 + 250 * u64::from(round));
        // Kill after `kill_after`, but not before the child has acknowledged
        // enough writes to check (a loaded machine makes fsyncs slow).
        let enough = |a: &[Vec<u64>; 3]| a.iter().map(Vec::len).sum::<usize>() > 20;
        // The last round also waits for a sorted run to be under way, which
        // a slow disk may not reach in the time given.
        let sorting = || round < 2 || info_log(dir.path()).contains("sorted run: sorting");
        while (t0.elapsed() < kill_after || !enough(&acked) || !sorting())
            && t0.elapsed() < Duration::from_secs(60)
        {
            match lines.next() {
                Some(Ok(l)) => {
                    let mut p = l.split_whitespace();
                    if p.next() == Some("ACK") {
                        let t: usize = p.next().and_then(|x| x.parse().ok()).unwrap_or(9);
                        let i: u64 = p.next().and_then(|x| x.parse().ok()).unwrap_or(0);
                        if t < 3 {
                            acked[t].push(i);
                        }
                    }
                }
                _ => break,
            }
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGKILL) };
        let _ = c.wait();
        let total: usize = acked.iter().map(Vec::len).sum();
        assert!(
            total > 20,
            "round {round}: the child acknowledged only {total} writes"
        );

        let db = Db::open(
            dir.path(),
            Options::default().segment_size(1 << 20).background(false),
        )
        .unwrap_or_else(|e| panic!("round {round}: reopen after SIGKILL: {e}"));
        for t in 0..2u64 {
            for &i in &acked[t as usize] {
                let got = db.get(&key(t << 40 | i)).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    got,
                    Some(value(t << 40 | i, 0, ((i * 37) % 3000) as usize)),
                    "round {round}: acknowledged write {t}/{i} lost"
                );
            }
        }
        for &i in &acked[2] {
            for j in 0..BATCH_KEYS {
                assert_eq!(
                    db.get(&batch_key(i, j)).ok().flatten(),
                    Some(value(i, j, 200 + (j as usize) * 100)),
                    "round {round}: acknowledged batch {i} key {j} lost"
                );
            }
        }
        // Batches are all or nothing, acknowledged or not.
        let mut i = 0;
        loop {
            let present: Vec<bool> = (0..BATCH_KEYS)
                .map(|j| db.get(&batch_key(i, j)).ok().flatten().is_some())
                .collect();
            if present.iter().all(|p| !p) {
                break;
            }
            assert!(
                present.iter().all(|p| *p),
                "round {round}: batch {i} is partial: {present:?}"
            );
            i += 1;
        }
        drop(db);
    }
    let log = info_log(dir.path());
    for l in log.lines().filter(|l| l.contains("recovery")) {
        eprintln!("{l}");
    }
    assert!(log.matches("recovery: replayed").count() >= 6, "{log}");
    assert!(
        log.contains("sorted run: sorting"),
        "no sorted run was under way in any round: {log}"
    );
}

const CLOSE_CHILD_ENV: &str = "VMEMKV_CRASH_CLOSE_CHILD";
const CLOSE_KEYS: u64 = 40_000;

fn close_value(i: u64, round: u64) -> Vec<u8> {
    value(i, round, 100 + ((i * 37) % 400) as usize)
}

/// The close child: writes every key in a scrambled order (version
/// `round`), prints `CLOSING`, drops the database (the close sorts the
/// tail and checkpoints) and prints `CLOSED`. With `run_bytes` under the
/// load's ~17 MB of log, runs come due while it writes, and the close
/// usually finds one of them under way.
fn close_child(dir: &str, round: u64, run_bytes: u64) -> ! {
    let opts = Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5)
        .checkpoint_interval_bytes(8 << 20)
        .sorted_run_bytes(run_bytes)
        .order_idle_ms(0);
    let db = Db::open(dir, opts).unwrap_or_else(|e| panic!("close child open: {e}"));
    for n in 0..CLOSE_KEYS {
        let i = (n * 7919) % CLOSE_KEYS;
        db.put(&key(i), &close_value(i, round))
            .unwrap_or_else(|e| panic!("close child put: {e}"));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "CLOSING");
    let _ = out.flush();
    drop(db);
    let _ = writeln!(out, "CLOSED");
    let _ = out.flush();
    std::process::exit(0)
}

/// When a close child is killed: some time after it says it closes, or
/// after `LOG` shows the close reached a given step, so that kills land
/// inside that step however long stopping the background threads takes.
#[derive(Debug, Clone, Copy)]
enum Kill {
    AfterClosing(u64),
    AfterMark(u64),
    Never,
}

/// Runs one close child per kill in `kills` on one directory (each round
/// reopens what the last one left) and checks that every key is at its
/// round's version. `mark` is the `LOG` text of the step `AfterMark`
/// waits for; a close that never reaches it within a second is left to
/// finish. Returns the closes killed, those killed after `mark` (before
/// they finished), and the `LOG`.
fn close_rounds(test: &str, run_bytes: u64, mark: &str, kills: &[Kill]) -> (u32, u32, String) {
    let dir = tmp();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let (mut cut_short, mut after_mark) = (0, 0);
    let marks = || info_log(dir.path()).matches(mark).count();
    for (round, kill) in kills.iter().enumerate() {
        let seen = marks();
        let mut c = Command::new(&exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(CLOSE_CHILD_ENV, dir.path())
            .env("VMEMKV_CRASH_CLOSE_ROUND", round.to_string())
            .env("VMEMKV_CRASH_CLOSE_RUN_BYTES", run_bytes.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let stdout = c.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        // libtest's "test ... " may precede the child's first line.
        let closing = lines.any(|l| l.is_ok_and(|l| l.ends_with("CLOSING")));
        assert!(closing, "round {round}: the child never reached its close");
        let delay = match kill {
            Kill::AfterClosing(ms) => Some(*ms),
            Kill::AfterMark(ms) => {
                let t0 = Instant::now();
                while marks() == seen && t0.elapsed() < Duration::from_secs(1) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                (marks() > seen).then_some(*ms)
            }
            Kill::Never => None,
        };
        let marked = matches!(kill, Kill::AfterMark(_)) && delay.is_some();
        if let Some(ms) = delay {
            std::thread::sleep(Duration::from_millis(ms));
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGKILL) };
        }
        let _ = c.wait();
        let closed = lines.any(|l| l.is_ok_and(|l| l.ends_with("CLOSED")));
        assert!(closed || delay.is_some(), "round {round}: the close failed");
        if !closed {
            cut_short += 1;
            after_mark += u32::from(marked);
        }

        // Every write preceded the close, and a killed process loses
        // nothing the page cache holds: all of this round must be there.
        let db = Db::open(
            dir.path(),
            Options::default().segment_size(1 << 20).background(false),
        )
        .unwrap_or_else(|e| panic!("round {round}: reopen after SIGKILL in close: {e}"));
        for i in 0..CLOSE_KEYS {
            assert_eq!(
                db.get(&key(i)).unwrap_or_else(|e| panic!("{e}")),
                Some(close_value(i, round as u64)),
                "round {round} ({kill:?}): key {i}"
            );
        }
        assert_eq!(dump(&db).len() as u64, CLOSE_KEYS, "round {round}");
    }
    let log = info_log(dir.path());
    for l in log
        .lines()
        .filter(|l| l.contains("sorted run") || l.contains("replayed") || l.contains("close"))
    {
        eprintln!("{l}");
    }
    eprintln!(
        "{cut_short} of {} closes were cut short, {after_mark} after \"{mark}\"",
        kills.len()
    );
    (cut_short, after_mark, log)
}

/// Runs [`close_rounds`] series, up to 3, until `hit(cut_short,
/// after_mark, log)` accepts one. Every round of every series checks that
/// no write was lost; whether a kill lands inside the phase under test is
/// up to the scheduler (other tests run beside these), so a series that
/// missed it is run again rather than failed.
fn close_rounds_until(
    test: &str,
    run_bytes: u64,
    mark: &str,
    kills: &[Kill],
    hit: impl Fn(u32, u32, &str) -> bool,
    missed: &str,
) {
    let mut logs = String::new();
    for _ in 0..3 {
        let (cut_short, after_mark, log) = close_rounds(test, run_bytes, mark, kills);
        if hit(cut_short, after_mark, &log) {
            return;
        }
        logs += &log;
    }
    panic!("{missed} in 3 series of {} rounds: {logs}", kills.len());
}

/// A child started by [`close_rounds`] runs [`close_child`] instead.
fn maybe_close_child() {
    if let (Ok(dir), Ok(round), Ok(run)) = (
        std::env::var(CLOSE_CHILD_ENV),
        std::env::var("VMEMKV_CRASH_CLOSE_ROUND"),
        std::env::var("VMEMKV_CRASH_CLOSE_RUN_BYTES"),
    ) {
        close_child(
            &dir,
            round.parse().unwrap_or(0),
            run.parse().unwrap_or(64 << 20),
        );
    }
}

#[test]
fn sigkill_during_close_loses_no_write() {
    maybe_close_child();
    // No run comes due during the load; the close sorts it all. The last
    // close is left to finish.
    let kills = [
        Kill::AfterClosing(0),
        Kill::AfterClosing(5),
        Kill::AfterMark(0),
        Kill::AfterMark(2),
        Kill::AfterMark(10),
        Kill::AfterMark(30),
        Kill::AfterMark(100),
        Kill::AfterClosing(400),
        Kill::Never,
    ];
    // No run comes due while a child writes: every sort is a close's. A
    // series hits when some close was killed inside its sort and another
    // finished one.
    close_rounds_until(
        "sigkill_during_close_loses_no_write",
        64 << 20,
        "sorted run: sorting",
        &kills,
        |cut_short, _, log| {
            let (began, ended) = (
                log.matches("sorted run: sorting").count(),
                log.matches("sorted run: sorted").count(),
            );
            cut_short > 0 && began > ended && ended >= 1
        },
        "no close was killed inside its sort",
    );
}

/// Kills while a close moves again what a sort it cut short had moved
/// (runs come due during the load, so one is usually under way at close).
#[test]
fn sigkill_while_a_close_redoes_a_cut_short_sort_loses_no_write() {
    maybe_close_child();
    // The move takes tens of milliseconds here: kills come soon after it
    // begins.
    let kills = [
        Kill::AfterMark(0),
        Kill::AfterMark(1),
        Kill::AfterMark(3),
        Kill::AfterMark(0),
        Kill::AfterMark(10),
        Kill::AfterMark(0),
        Kill::AfterMark(2),
        Kill::AfterMark(0),
        Kill::AfterMark(5),
        Kill::AfterMark(0),
        Kill::Never,
    ];
    close_rounds_until(
        "sigkill_while_a_close_redoes_a_cut_short_sort_loses_no_write",
        4 << 20,
        "close moves again",
        &kills,
        |_, after_mark, _| after_mark > 0,
        "no close was killed while it moved a cut-short sort's values again",
    );
}

const UNLOGGED_CHILD_ENV: &str = "VMEMKV_CRASH_UNLOGGED_CHILD";

fn unlogged_value(i: u64) -> Vec<u8> {
    value(i, 7, 50 + ((i * 37) % 700) as usize)
}

fn logged_key(i: u64) -> Vec<u8> {
    format!("L{i:015x}").into_bytes()
}

/// The unlogged child: `disable_wal` puts of keys 0, 1, ... in order, with
/// maintenance moving values meanwhile. It prints `DURABLE i` once every
/// put up to `i` must survive a crash: after a `flush` (every 1000th put),
/// and after a logged put (every 777th), which seals the region before it.
fn unlogged_child(dir: &str) -> ! {
    let db = Db::open(dir, busy_opts()).unwrap_or_else(|e| panic!("unlogged child open: {e}"));
    let wo = WriteOptions {
        sync: false,
        disable_wal: true,
    };
    for i in 0.. {
        db.put_opt(&wo, &key(i), &unlogged_value(i))
            .unwrap_or_else(|e| panic!("unlogged child put: {e}"));
        // Both can fall on one i (222999 is both): the parent expects a
        // logged put at every multiple of 777, so neither may skip the other.
        let flushed = i % 1000 == 999;
        let logged = i % 777 == 0;
        if flushed {
            db.flush().unwrap_or_else(|e| panic!("flush: {e}"));
        }
        if logged {
            db.put(&logged_key(i), b"logged")
                .unwrap_or_else(|e| panic!("logged put: {e}"));
        }
        if flushed || logged {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "DURABLE {i}");
            let _ = out.flush();
        }
    }
    std::process::exit(0)
}

#[test]
fn sigkill_keeps_every_flushed_unlogged_put_and_a_prefix_of_the_rest() {
    if let Ok(dir) = std::env::var(UNLOGGED_CHILD_ENV) {
        unlogged_child(&dir);
    }
    let mut lost_some = 0;
    for (round, ms) in [150u64, 400, 650, 900].into_iter().enumerate() {
        let dir = tmp();
        let (mut c, mut lines) = spawn_self(
            "sigkill_keeps_every_flushed_unlogged_put_and_a_prefix_of_the_rest",
            UNLOGGED_CHILD_ENV,
            dir.path(),
        );
        let t0 = Instant::now();
        let mut durable: Option<u64> = None;
        while (t0.elapsed() < Duration::from_millis(ms) || durable.is_none_or(|d| d < 3000))
            && t0.elapsed() < Duration::from_secs(60)
        {
            match lines.next() {
                Some(Ok(l)) => {
                    if let Some(i) = l.strip_prefix("DURABLE ") {
                        durable = i.trim().parse().ok().or(durable);
                    }
                }
                _ => break,
            }
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGKILL) };
        let _ = c.wait();
        let durable = durable.unwrap_or_else(|| panic!("round {round}: nothing was durable"));

        let db = Db::open(
            dir.path(),
            Options::default().segment_size(1 << 20).background(false),
        )
        .unwrap_or_else(|e| panic!("round {round}: reopen after SIGKILL: {e}"));
        let all = dump(&db);
        let kept: Vec<u64> = all
            .keys()
            .filter(|k| k.first() == Some(&b'k'))
            .map(|k| {
                let s = std::str::from_utf8(&k[1..]).unwrap_or_else(|e| panic!("{e}"));
                u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        // A prefix of the puts survives, at least up to the last durable
        // point, each with its value.
        let n = kept.len() as u64;
        assert!(
            kept.iter().copied().eq(0..n),
            "round {round}: the puts kept are not a prefix"
        );
        assert!(
            n > durable,
            "round {round}: put {durable} was durable, {n} kept"
        );
        for (i, k) in kept.iter().enumerate().step_by(7) {
            assert_eq!(all.get(&key(*k)), Some(&unlogged_value(i as u64)));
        }
        // A logged put kept means the region before it was sealed.
        for k in all.keys().filter(|k| k.first() == Some(&b'L')) {
            let s = std::str::from_utf8(&k[1..]).unwrap_or_else(|e| panic!("{e}"));
            let i = u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{e}"));
            assert!(i < n, "round {round}: logged put {i} kept, puts kept {n}");
        }
        let last_logged = durable - durable % 777;
        if last_logged > 0 {
            assert!(
                all.contains_key(&logged_key(last_logged)),
                "round {round}: logged put {last_logged} was durable and is gone"
            );
        }
        eprintln!("round {round}: durable through {durable}, {n} puts kept");
        lost_some += u32::from(n > durable + 1);
    }
    eprintln!("{lost_some} of 4 rounds ended with unflushed puts that were kept");
}
