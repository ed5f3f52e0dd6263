//! Crash testing by power cuts: the writer runs on a [`CrashImage`], the
//! parent cuts power at a random moment (while pushing random ranges of the
//! database's files to the device, as the kernel's writeback would), mounts
//! the image as a reboot would, and checks the recovered database against an
//! operation log kept outside the file system under test.
//!
//! Acknowledgement depends on the mode: in `sync` mode every write returned
//! is durable; in `nosync` and `disable_wal` modes a write is durable once a
//! later `flush()` has returned. After a cut:
//! * every durable write is present, with its exact value (or a later one);
//! * no key holds a value never written to it;
//! * a batch is all or nothing;
//! * the state is that of a prefix of the issued order (point-in-time
//!   recovery). Counted apart, since not every engine promises it.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vmemkv_compat::{ReadOptions, WriteBatch};

use super::image::CrashImage;
use super::{decode_value, encode_value, key_name, tolerate, Config, Mode};

/// Op-log record tags; a record is little-endian `u64` words:
/// `tag, seq, n, n × (key << 1 | delete)`.
const BEGIN: u64 = 1;
const ACK: u64 = 2;
/// Every write up to `seq` is durable.
const DURABLE: u64 = 3;

/// The child's record of what it did, appended with one `write` per record
/// to a file outside the file system under test (it survives the cut).
struct OpLog(File);

impl OpLog {
    fn record(&mut self, tag: u64, seq: u64, entries: &[(usize, bool)]) -> Result<(), String> {
        let mut words = Vec::with_capacity(3 + entries.len());
        words.extend([tag, seq, entries.len() as u64]);
        words.extend(
            entries
                .iter()
                .map(|&(k, del)| (k as u64) << 1 | u64::from(del)),
        );
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.0.write_all(&bytes).map_err(|e| format!("op log: {e}"))
    }
}

/// One write of a cycle, in issue order.
#[derive(Debug, Clone)]
struct Op {
    seq: u64,
    entries: Vec<(usize, bool)>,
    acked: bool,
}

/// A cycle's op log, parsed.
#[derive(Debug, Default)]
struct Parsed {
    ops: Vec<Op>,
    /// Highest seq declared durable (0: none).
    durable: u64,
}

fn parse_log(bytes: &[u8]) -> Parsed {
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let mut p = Parsed::default();
    let mut i = 0;
    // A record cut short by the kill is ignored: its write was never issued.
    while let (Some(&tag), Some(&seq), Some(&n)) =
        (words.get(i), words.get(i + 1), words.get(i + 2))
    {
        let Some(body) = words.get(i + 3..i + 3 + n as usize) else {
            break;
        };
        match tag {
            BEGIN => p.ops.push(Op {
                seq,
                entries: body
                    .iter()
                    .map(|w| ((w >> 1) as usize, w & 1 == 1))
                    .collect(),
                acked: false,
            }),
            ACK => {
                if let Some(op) = p.ops.iter_mut().rev().find(|o| o.seq == seq) {
                    op.acked = true;
                }
            }
            DURABLE => p.durable = p.durable.max(seq),
            _ => break,
        }
        i += 3 + n as usize;
    }
    p
}

fn op_log_path(dir: &Path) -> PathBuf {
    dir.join("ops.log")
}

fn db_dir(dir: &Path) -> PathBuf {
    dir.join("ext4").join("db")
}

/// Settings only power cuts have.
#[derive(Debug, Clone, Copy)]
pub struct PowerCut {
    /// First seq the child issues (above every earlier cycle's).
    pub first_seq: u64,
    /// The meta-test's broken writer: declares every no-sync write durable
    /// as soon as it returns. The campaign must catch it.
    pub claim_durable: bool,
}

/// The child's loop: random writes, flushes and maintenance until killed.
pub fn run_child(cfg: &Config, pc: PowerCut) -> Result<(), String> {
    let log_path = op_log_path(&cfg.dir);
    let mut log = OpLog(
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?,
    );
    let db = vmemkv_compat::open(cfg.engine, &db_dir(&cfg.dir), &cfg.options)
        .map_err(|e| format!("child open: {e}"))?;
    let wo = cfg.mode.write_options();
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let pick = super::key_picker(cfg.nkeys);
    let every_ack_durable = cfg.mode == Mode::Sync || pc.claim_durable;
    // One flush per 20, 200 or 2,000 operations on average: short unsynced
    // tails check durability closely, long ones give writeback the room
    // to leave holes and test the prefix property.
    let flush_per_10k = [500, 50, 5][rng.random_range(0..3)];
    let mut seq = pc.first_seq;
    loop {
        if !every_ack_durable && rng.random_range(0..10_000) < flush_per_10k {
            db.flush().map_err(|e| format!("flush: {e}"))?;
            log.record(DURABLE, seq - 1, &[])?;
            continue;
        }
        let roll = rng.random_range(0..100);
        if roll < cfg.maintenance_pct {
            match rng.random_range(0..4) {
                0 => tolerate(db.checkpoint(), "checkpoint")?,
                1 => tolerate(db.defragment(), "defragment")?,
                2 => tolerate(db.compact_range(None, None), "compact_range")?,
                _ => tolerate(db.reorganize(), "reorganize")?,
            }
            continue;
        }
        let mut entries = Vec::new();
        let mut batch = WriteBatch::new();
        match rng.random_range(0..85) {
            0..=49 => entries.push((pick(&mut rng), false)),
            50..=64 => entries.push((pick(&mut rng), true)),
            _ => {
                let mut keys: Vec<usize> = (0..rng.random_range(2..12))
                    .map(|_| pick(&mut rng))
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                for k in keys {
                    let del = rng.random_bool(0.2);
                    if del {
                        batch.delete(&key_name(k));
                    } else {
                        batch.put(&key_name(k), &encode_value(k, seq));
                    }
                    entries.push((k, del));
                }
            }
        }
        log.record(BEGIN, seq, &entries)?;
        let r = match entries.as_slice() {
            [(k, false)] if batch.is_empty() => db.put(&wo, &key_name(*k), &encode_value(*k, seq)),
            [(k, true)] if batch.is_empty() => db.delete(&wo, &key_name(*k)),
            _ => db.write(&wo, &batch),
        };
        r.map_err(|e| format!("write seq {seq}: {e}"))?;
        log.record(ACK, seq, &[])?;
        if every_ack_durable {
            log.record(DURABLE, seq, &[])?;
        }
        seq += 1;
    }
}

/// What a power-cut run found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Cuts made and verified.
    pub cycles: usize,
    /// Keys checked over all cycles.
    pub keys_checked: u64,
    /// Writes issued and acknowledged (returned Ok).
    pub writes_acked: u64,
    /// Acknowledged writes declared durable before their cut.
    pub writes_durable: u64,
    /// Acknowledged writes absent after their cut (allowed when not
    /// durable): shows the cuts drop what never reached the device.
    pub acked_lost: u64,
    /// Ranges pushed to the device during the runs.
    pub writebacks: u64,
    /// vmemkv recoveries whose `LOG` reports the log ended at a hole, a
    /// torn record or a missing seal past `LOGEND`: how often the cuts left
    /// the log's end ragged.
    pub ragged_ends: u64,
    /// Lost durable writes, foreign values, torn batches, failed opens.
    pub violations: Vec<String>,
    /// States no prefix of the issued order explains.
    pub not_prefix: Vec<String>,
    /// Mounts still busy after the engine's handle was dropped.
    pub lazy_unmounts: Vec<String>,
}

/// A key's state before and after the cycle's writes: the seq of the put
/// it holds, or `None` when absent.
type KeyState = Option<u64>;

/// The seqs `P` for which "every write up to `P` applied, none after"
/// gives `observed`, as disjoint half-open intervals.
fn feasible(base: KeyState, history: &[(u64, bool)], observed: KeyState) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut state = base;
    let mut start = 0;
    for &(seq, del) in history {
        if state == observed {
            out.push((start, seq));
        }
        state = (!del).then_some(seq);
        start = seq;
    }
    if state == observed {
        out.push((start, u64::MAX));
    }
    out
}

/// The last run of seqs at or above `from` lying in every key's set, as a
/// half-open interval: the prefixes of the issued order that explain the
/// recovered state. `None` when no prefix does.
fn common_prefix(sets: &[Vec<(u64, u64)>], from: u64) -> Option<(u64, u64)> {
    if sets.is_empty() {
        return Some((from, u64::MAX));
    }
    let mut events: Vec<(u64, i64)> = Vec::new();
    for set in sets {
        for &(a, b) in set {
            let a = a.max(from);
            if a < b {
                events.push((a, 1));
                events.push((b, -1));
            }
        }
    }
    // Ends sort before starts at one seq: the intervals are half-open.
    events.sort_unstable();
    let full = sets.len() as i64;
    let mut depth = 0;
    let mut found = None;
    for (at, d) in events {
        if depth == full {
            found = Some((found.map_or(at, |(a, _)| a), at));
        }
        depth += d;
        if depth == full {
            found = Some((at, at));
        }
    }
    found
}

/// Checks the recovered database against the cycle's log; returns the
/// observed state, the base of the next cycle.
fn verify(
    cfg: &Config,
    base: &[KeyState],
    parsed: &Parsed,
    cycle: usize,
    report: &mut Report,
) -> Option<Vec<KeyState>> {
    let mut violation = |msg: String| report.violations.push(format!("cycle {cycle}: {msg}"));
    let db = match vmemkv_compat::open(cfg.engine, &db_dir(&cfg.dir), &cfg.options) {
        Ok(db) => db,
        Err(e) => {
            violation(format!("open after the power cut failed: {e}"));
            return None;
        }
    };
    let mut history: Vec<Vec<(u64, bool)>> = vec![Vec::new(); cfg.nkeys];
    for op in &parsed.ops {
        for &(k, del) in &op.entries {
            if let Some(h) = history.get_mut(k) {
                h.push((op.seq, del));
            }
        }
    }
    let d = parsed.durable;
    let mut observed = Vec::with_capacity(cfg.nkeys);
    let mut sets = Vec::new();
    let mut set_of = vec![usize::MAX; cfg.nkeys];
    let mut buf = Vec::new();
    for k in 0..cfg.nkeys {
        let found = match db.get_into(&ReadOptions::default(), &key_name(k), &mut buf) {
            Ok(f) => f,
            Err(e) => {
                violation(format!("get key {k}: {e}"));
                observed.push(base[k]);
                continue;
            }
        };
        let seen: KeyState = if found {
            match decode_value(k, &buf) {
                Some(s) => Some(s),
                None => {
                    violation(format!(
                        "key {k}: a value of {} bytes never written to it",
                        buf.len()
                    ));
                    observed.push(base[k]);
                    continue;
                }
            }
        } else {
            None
        };
        observed.push(seen);
        let set = feasible(base[k], &history[k], seen);
        let show = |s: KeyState| s.map_or("nothing".to_string(), |s| format!("seq {s}"));
        if set.is_empty() {
            violation(format!(
                "key {k}: found {}, which no write of this cycle or before left there",
                show(seen)
            ));
        } else if set.iter().all(|&(_, b)| b <= d) {
            let last_durable = history[k].iter().rev().find(|&&(s, _)| s <= d);
            violation(format!(
                "key {k}: lost a durable write: found {}, durable up to seq {d}, last durable write {last_durable:?} (mode {})",
                show(seen),
                cfg.mode
            ));
        } else if !history[k].is_empty() {
            set_of[k] = sets.len();
            sets.push(set);
        }
    }
    report.keys_checked += cfg.nkeys as u64;

    // A batch is torn when one key holds exactly its put and another a
    // state older than it (a newer write on a key proves nothing of the
    // batch, and neither does an absent key for a delete).
    for op in parsed.ops.iter().filter(|o| o.entries.len() > 1) {
        let (mut shown, mut missed) = (0, 0);
        for &(k, del) in &op.entries {
            if !del && observed.get(k) == Some(&Some(op.seq)) {
                shown += 1;
            } else if sets.get(set_of[k]).is_some_and(|set| {
                set.iter()
                    .filter(|&&(_, b)| b > d)
                    .all(|&(_, b)| b <= op.seq)
            }) {
                missed += 1;
            }
        }
        if shown > 0 && missed > 0 {
            violation(format!(
                "batch seq {} half applied: {shown} keys hold its value, {missed} keys an older state",
                op.seq
            ));
        }
    }
    let prefix = common_prefix(&sets, d);
    let recovery = (cfg.engine == vmemkv_compat::EngineKind::Vmemkv).then(|| {
        let log = std::fs::read_to_string(db_dir(&cfg.dir).join("LOG")).unwrap_or_default();
        // This recovery's lines: those after the last open (each line is
        // a timestamp, a space, the event).
        let lines: Vec<&str> = log.lines().collect();
        let from = lines
            .iter()
            .rposition(|l| {
                l.split_once(' ')
                    .is_some_and(|(_, e)| e.starts_with("open "))
            })
            .unwrap_or(0);
        let this: Vec<&str> = lines[from..]
            .iter()
            .copied()
            .filter(|l| l.contains("recovery: ") && !l.contains("replayed"))
            .collect();
        this.join(" | ")
    });
    if let Some(r) = &recovery {
        report.ragged_ends += u64::from(r.contains("the log ends there"));
    }
    if prefix.is_none() {
        report.not_prefix.push(format!(
            "cycle {cycle}: no prefix of the issued order (durable up to seq {d}) gives the recovered state of {} written keys; recovery: {}",
            sets.len(),
            recovery.as_deref().unwrap_or("-")
        ));
    }
    for op in parsed.ops.iter().filter(|o| o.acked) {
        report.writes_acked += 1;
        report.writes_durable += u64::from(op.seq <= d);
        // Lost at the cut: beyond the longest prefix the state allows.
        report.acked_lost += u64::from(prefix.is_some_and(|(_, end)| op.seq >= end));
    }
    let present: Vec<bool> = observed.iter().map(Option::is_some).collect();
    super::check_iteration(db.as_ref(), &present, &mut violation);
    Some(observed)
}

/// How long an open and its checks may take before the run counts a hang.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(120);

impl Report {
    fn merge(&mut self, r: Report) {
        self.keys_checked += r.keys_checked;
        self.writes_acked += r.writes_acked;
        self.writes_durable += r.writes_durable;
        self.acked_lost += r.acked_lost;
        self.ragged_ends += r.ragged_ends;
        self.violations.extend(r.violations);
        self.not_prefix.extend(r.not_prefix);
    }
}

/// [`verify`] on a thread of its own, so that an engine whose open never
/// returns is reported as a hang (and ends the run) instead of stalling
/// the campaign; the stuck thread dies with the process.
fn verify_in_time(
    cfg: &Config,
    base: &[KeyState],
    parsed: Parsed,
    cycle: usize,
    report: &mut Report,
) -> Option<Vec<KeyState>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (c, b) = (cfg.clone(), base.to_vec());
    std::thread::spawn(move || {
        let mut r = Report::default();
        let next = verify(&c, &b, &parsed, cycle, &mut r);
        let _ = tx.send((r, next));
    });
    match rx.recv_timeout(VERIFY_TIMEOUT) {
        Ok((r, next)) => {
            report.merge(r);
            next
        }
        Err(_) => {
            report.violations.push(format!(
                "cycle {cycle}: the open and checks after the power cut did not finish in {} s (a hang)",
                VERIFY_TIMEOUT.as_secs()
            ));
            None
        }
    }
}

fn spawn_child(
    exe: &Path,
    cfg: &Config,
    cycle: usize,
    pc: PowerCut,
) -> std::io::Result<std::process::Child> {
    let mut cmd = super::child_command(exe, cfg, cycle, "power-child");
    cmd.arg("--first-seq").arg(pc.first_seq.to_string());
    if pc.claim_durable {
        cmd.arg("--claim-durable").arg("1");
    }
    cmd.spawn()
}

/// Pushes random ranges of the database's files to the device until
/// `stop`, as the kernel's writeback would at any moment: dirty pages reach
/// the device in no particular order.
fn writeback(db: &Path, stop: &AtomicBool, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pushed = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(rng.random_range(1..15)));
        let Ok(dir) = std::fs::read_dir(db) else {
            continue;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = dir
            .filter_map(|e| {
                let e = e.ok()?;
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .filter(|f| f.1 > 0)
            .collect();
        // Mostly the newest large file, where the unsynced tail of a log
        // lies (small files such as a log-end marker change as often):
        // pages pushed there ahead of earlier ones leave the holes and torn
        // records a recovery must not build on.
        files.sort();
        let large: Vec<&(std::time::SystemTime, u64, PathBuf)> =
            files.iter().filter(|f| f.1 >= 1 << 20).collect();
        let pick = match rng.random_range(0..10) {
            0..=5 => large.last().copied(),
            6 | 7 => files.last(),
            _ => files.get(rng.random_range(0..files.len().max(1))),
        };
        let Some((_, len, path)) = pick else {
            continue;
        };
        let len = *len;
        let Ok(f) = File::open(path) else {
            continue;
        };
        let off = rng.random_range(0..len) & !4095;
        let n = 4096u64 << rng.random_range(0..8);
        use std::os::fd::AsRawFd;
        // SAFETY: `f` is open for the whole call; sync_file_range only
        // starts writeback of the range and touches no memory of ours.
        let r = unsafe {
            libc::sync_file_range(
                f.as_raw_fd(),
                off as libc::off64_t,
                n as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        pushed += u64::from(r == 0);
    }
    pushed
}

/// Runs `cfg.cycles` power cuts, spawning `exe power-child ...`, on a fresh
/// crash image under `cfg.dir`.
pub fn run_parent(exe: &Path, cfg: &Config, claim_durable: bool) -> Result<Report, String> {
    if let Some(why) = super::image::unavailable() {
        return Err(why);
    }
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let mut image = CrashImage::create(&cfg.dir)?;
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x0901_7c07);
    let mut report = Report::default();
    let mut base: Vec<KeyState> = vec![None; cfg.nkeys];
    let mut first_seq = 1;
    for cycle in 0..cfg.cycles {
        let log_path = op_log_path(&cfg.dir);
        File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let pc = PowerCut {
            first_seq,
            claim_durable,
        };
        let mut child = spawn_child(exe, cfg, cycle, pc).map_err(|e| format!("spawn: {e}"))?;
        let stop = AtomicBool::new(false);
        let wb_seed: u64 = rng.random();
        let wait = rng.random_range(cfg.kill_after_ms.0..=cfg.kill_after_ms.1);
        let (status, pushed) = std::thread::scope(|s| {
            let flusher = s.spawn(|| writeback(&db_dir(&cfg.dir), &stop, wb_seed));
            // The window starts once the child writes, so that every cut
            // lands mid-workload rather than during open.
            let started = Instant::now();
            let mut exited = false;
            while std::fs::metadata(&log_path).map_or(0, |m| m.len()) == 0
                && started.elapsed() < Duration::from_secs(30)
            {
                if let Ok(Some(_)) = child.try_wait() {
                    exited = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if !exited {
                std::thread::sleep(Duration::from_millis(wait));
            }
            let status = image.cut(&mut child);
            stop.store(true, Ordering::Relaxed);
            (status, flusher.join().unwrap_or(0))
        });
        report.writebacks += pushed;
        let status = status?;
        image.reboot()?;
        if let Some(status) = status {
            report
                .violations
                .push(super::exited_by_itself(cycle, &mut child, status));
        }
        let mut bytes = Vec::new();
        File::open(&log_path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let parsed = parse_log(&bytes);
        first_seq = parsed.ops.last().map_or(first_seq, |o| o.seq + 1);
        report.cycles += 1;
        match verify_in_time(cfg, &base, parsed, cycle, &mut report) {
            Some(next) => base = next,
            // The image cannot be opened: later cycles would only repeat it.
            None => break,
        }
    }
    report.lazy_unmounts = image.lazy_unmounts().to_vec();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_sets_follow_the_history() {
        let h = [(5, false), (9, true), (12, false)];
        assert_eq!(feasible(None, &h, None), vec![(0, 5), (9, 12)]);
        assert_eq!(feasible(None, &h, Some(5)), vec![(5, 9)]);
        assert_eq!(feasible(None, &h, Some(12)), vec![(12, u64::MAX)]);
        assert_eq!(feasible(Some(3), &h, Some(3)), vec![(0, 5)]);
        assert!(feasible(None, &h, Some(7)).is_empty(), "never written");
    }

    #[test]
    fn a_common_prefix_is_found_or_refused() {
        let a = vec![(0, 5), (9, 12)];
        let b = vec![(5, 9)];
        let c = vec![(10, u64::MAX)];
        assert_eq!(common_prefix(&[a.clone(), b.clone()], 0), None);
        assert_eq!(common_prefix(&[a.clone(), c.clone()], 0), Some((10, 12)));
        assert_eq!(common_prefix(&[a, c], 12), None, "below the durable point");
        assert_eq!(common_prefix(&[b], 0), Some((5, 9)));
        assert_eq!(common_prefix(&[], 4), Some((4, u64::MAX)));
    }

    #[test]
    fn the_log_parses_and_drops_a_torn_record() {
        let mut bytes = Vec::new();
        for w in [
            BEGIN,
            7,
            2,
            3 << 1,
            4 << 1 | 1,
            ACK,
            7,
            0,
            DURABLE,
            7,
            0,
            BEGIN,
            8,
            1,
        ] {
            bytes.extend(u64::to_le_bytes(w));
        }
        let p = parse_log(&bytes);
        assert_eq!(p.ops.len(), 1);
        assert_eq!(p.ops[0].entries, vec![(3, false), (4, true)]);
        assert!(p.ops[0].acked);
        assert_eq!(p.durable, 7);
    }
}
