//! SIGKILL a child process mid-write, reopen, and check every acknowledged
//! `sync = true` write and the all-or-nothing property of batches.
//!
//! The test binary re-runs itself as the child (env `VMEMKV_CRASH_CHILD`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use vmemkv::{Db, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "VMEMKV_CRASH_CHILD";
const BATCH_KEYS: u64 = 8;

fn batch_key(b: u64, j: u64) -> Vec<u8> {
    format!("batch{b:08}-{j}").into_bytes()
}

/// The child: three writer threads; prints `ACK <thread> <i>` after each
/// acknowledged sync write (single puts for thread 0 and 1, batches for 2).
fn child(dir: &str) -> ! {
    let opts = Options::default()
        .segment_size(1 << 20)
        .checkpoint_interval_bytes(2 << 20)
        .maintenance_interval_ms(5)
        // Sorted runs and their merges move values while the kill lands.
        .sorted_run_bytes(256 << 10);
    let db = Arc::new(Db::open(dir, opts).unwrap_or_else(|e| panic!("child open: {e}")));
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
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    for round in 0..3u32 {
        let mut c = Command::new(&exe)
            .args([
                "--exact",
                "sigkill_mid_write_loses_no_acknowledged_sync_write",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let stdout = c.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut acked: [Vec<u64>; 3] = Default::default();
        let mut lines = BufReader::new(stdout).lines();
        let t0 = Instant::now();
        let kill_after = Duration::from_millis(300 + 250 * u64::from(round));
        // Kill after `kill_after`, but not before the child has acknowledged
        // enough writes to check (a loaded machine makes fsyncs slow).
        let enough = |a: &[Vec<u64>; 3]| a.iter().map(Vec::len).sum::<usize>() > 20;
        while (t0.elapsed() < kill_after || !enough(&acked))
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
