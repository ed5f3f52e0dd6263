//! Crash testing by killing: a child process writes through the `Db` trait
//! while recording every operation in an [`expected::Expected`] file; the
//! parent SIGKILLs it at a random moment, reopens the database and checks
//! every key against what was acknowledged or in flight.
//!
//! [`powercut`] does the same with power cuts instead of kills: the database
//! lives on a [`image::CrashImage`], whose clone keeps only what reached the
//! device.
//!
//! Works for any engine in the registry, so vmemkv and its rivals are held to
//! the same standard.

pub mod expected;
pub mod image;
pub mod powercut;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vmemkv_compat::{Db, EngineKind, EngineOptions, Error, ReadOptions, WriteBatch, WriteOptions};

use expected::{Expected, State};

/// Which durability promise a run checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `sync=true`: every acknowledged write survives.
    Sync,
    /// `sync=false`: a process crash loses nothing (page cache survives).
    NoSync,
    /// `disable_wal`: writes may be lost, but every key holds a value once
    /// written to it, and batches are all or nothing.
    DisableWal,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Sync, Mode::NoSync, Mode::DisableWal];

    fn write_options(self) -> WriteOptions {
        WriteOptions {
            sync: self == Mode::Sync,
            disable_wal: self == Mode::DisableWal,
        }
    }

    /// Whether acknowledged writes must all survive.
    pub fn keeps_acknowledged(self) -> bool {
        self != Mode::DisableWal
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Sync => "sync",
            Mode::NoSync => "nosync",
            Mode::DisableWal => "disable_wal",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "sync" => Ok(Mode::Sync),
            "nosync" => Ok(Mode::NoSync),
            "disable_wal" => Ok(Mode::DisableWal),
            _ => Err(format!("unknown mode '{s}' (sync, nosync, disable_wal)")),
        }
    }
}

/// The key for index `k`.
pub fn key_name(k: usize) -> Vec<u8> {
    format!("key{k:08}").into_bytes()
}

fn parse_key(key: &[u8]) -> Option<usize> {
    let digits = key.strip_prefix(b"key")?;
    if digits.len() != 8 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn mix(k: usize, seq: u64) -> u64 {
    let mut x = (k as u64) ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}

/// The value written to key `k` by the operation with sequence `seq`:
/// self-describing, so a reader can tell which write it came from and
/// whether it is intact. Sizes span inline (8 B) and stored values.
pub fn encode_value(k: usize, seq: u64) -> Vec<u8> {
    let h = mix(k, seq);
    if h.is_multiple_of(4) {
        let mut v = Vec::with_capacity(8);
        v.extend_from_slice(&(k as u32).to_le_bytes());
        v.extend_from_slice(&(seq as u32).to_le_bytes());
        return v;
    }
    let filler = match h % 16 {
        0 => 20_000 + (h >> 8) as usize % 20_000,
        _ => (h >> 8) as usize % 3000,
    };
    let mut v = Vec::with_capacity(16 + filler);
    v.extend_from_slice(&(k as u64).to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend((0..filler).map(|i| (h as usize).wrapping_add(i * 131) as u8));
    v
}

/// The sequence number of the write that produced `value` for key `k`, or
/// `None` if the bytes are not exactly such a value.
pub fn decode_value(k: usize, value: &[u8]) -> Option<u64> {
    let seq = if value.len() == 8 {
        let kk = u32::from_le_bytes(value[..4].try_into().ok()?);
        if kk as usize != k {
            return None;
        }
        u32::from_le_bytes(value[4..8].try_into().ok()?) as u64
    } else {
        let kk = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
        if kk as usize != k {
            return None;
        }
        u64::from_le_bytes(value.get(8..16)?.try_into().ok()?)
    };
    (encode_value(k, seq) == value).then_some(seq)
}

/// Settings of one crash run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Engine under test.
    pub engine: EngineKind,
    /// Durability mode.
    pub mode: Mode,
    /// Kill/reopen cycles.
    pub cycles: usize,
    /// Keys in the key space.
    pub nkeys: usize,
    /// RNG seed.
    pub seed: u64,
    /// Working directory (database and expected-state file).
    pub dir: PathBuf,
    /// Range of the child's lifetime before the kill.
    pub kill_after_ms: (u64, u64),
    /// Engine-specific options for the child and the verifier.
    pub options: EngineOptions,
    /// vmemkv failpoints (`vmemkv::failpoint::NAMES`): each cycle arms one,
    /// round-robin, at a random hit count, so the child kills itself inside
    /// that maintenance phase (if it gets there before the random kill).
    pub failpoints: Vec<String>,
    /// Percentage of the child's operations that are maintenance calls
    /// (checkpoint, defragment, reorganize).
    pub maintenance_pct: u32,
}

/// What a run found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Cycles completed.
    pub cycles: usize,
    /// Keys checked over all cycles.
    pub keys_checked: u64,
    /// Cycles where the child was killed while a batch was in flight.
    pub batches_in_flight: u64,
    /// Writes the child acknowledged (from sequence numbers issued).
    pub seqs_issued: u64,
    /// Every violation, described.
    pub violations: Vec<String>,
    /// Cycles that ended at an armed failpoint, per failpoint.
    pub failpoint_kills: std::collections::BTreeMap<String, u64>,
}

fn db_path(dir: &Path) -> PathBuf {
    dir.join("db")
}

fn expected_path(dir: &Path) -> PathBuf {
    dir.join("expected.state")
}

/// Half of the picks from a hot 5% of the keys, so that overwrites and
/// batches meet the same keys often.
fn key_picker(nkeys: usize) -> impl Fn(&mut StdRng) -> usize {
    let hot = (nkeys / 20).max(1);
    move |rng| {
        if rng.random_bool(0.5) {
            rng.random_range(0..hot)
        } else {
            rng.random_range(0..nkeys)
        }
    }
}

/// The child's loop: random operations until killed.
pub fn run_child(cfg: &Config) -> Result<(), String> {
    let exp = Expected::open(&expected_path(&cfg.dir), cfg.nkeys).map_err(|e| e.to_string())?;
    let db = vmemkv_compat::open(cfg.engine, &db_path(&cfg.dir), &cfg.options)
        .map_err(|e| format!("child open: {e}"))?;
    let wo = cfg.mode.write_options();
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let pick = key_picker(cfg.nkeys);
    let mut buf = Vec::new();
    loop {
        if rng.random_range(0..100) < cfg.maintenance_pct {
            match rng.random_range(0..3) {
                0 => tolerate(db.checkpoint(), "checkpoint")?,
                1 => tolerate(db.defragment(), "defragment")?,
                _ => tolerate(db.reorganize(), "reorganize")?,
            }
            continue;
        }
        match rng.random_range(0..97) {
            0..=49 => {
                let k = pick(&mut rng);
                let s = State::put(exp.next_seq());
                exp.begin(k, s);
                db.put(&wo, &key_name(k), &encode_value(k, s.seq()))
                    .map_err(|e| format!("put: {e}"))?;
                exp.commit(k, s);
            }
            50..=64 => {
                let k = pick(&mut rng);
                let s = State::delete(exp.next_seq());
                exp.begin(k, s);
                db.delete(&wo, &key_name(k))
                    .map_err(|e| format!("delete: {e}"))?;
                exp.commit(k, s);
            }
            65..=84 => {
                let seq = exp.next_seq();
                let n = rng.random_range(2..12);
                let mut keys: Vec<usize> = (0..n).map(|_| pick(&mut rng)).collect();
                keys.sort_unstable();
                keys.dedup();
                let mut batch = WriteBatch::new();
                let mut states = Vec::with_capacity(keys.len());
                for &k in &keys {
                    let s = if rng.random_bool(0.2) {
                        batch.delete(&key_name(k));
                        State::delete(seq)
                    } else {
                        batch.put(&key_name(k), &encode_value(k, seq));
                        State::put(seq)
                    };
                    exp.begin(k, s);
                    states.push(s);
                }
                exp.begin_batch(seq, &keys);
                db.write(&wo, &batch).map_err(|e| format!("write: {e}"))?;
                for (&k, &s) in keys.iter().zip(&states) {
                    exp.commit(k, s);
                }
                exp.end_batch();
            }
            85..=96 => {
                // Read-your-writes inside the child.
                let k = pick(&mut rng);
                let found = db
                    .get_into(&ReadOptions::default(), &key_name(k), &mut buf)
                    .map_err(|e| format!("get: {e}"))?;
                let acked = exp.acked(k);
                let ok = if found {
                    !acked.allows_absent() && decode_value(k, &buf) == Some(acked.seq())
                } else {
                    acked.allows_absent()
                };
                if !ok {
                    return Err(format!(
                        "read-your-writes violated on key {k}: expected {acked:?}, found {}",
                        if found {
                            "a different value"
                        } else {
                            "nothing"
                        }
                    ));
                }
            }
            _ => unreachable!("range 0..97"),
        }
    }
}

fn tolerate(r: vmemkv_compat::Result<()>, what: &str) -> Result<(), String> {
    match r {
        Ok(()) | Err(Error::NotSupported(_)) => Ok(()),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

fn mark_path(dir: &Path) -> PathBuf {
    dir.join("failpoint.mark")
}

/// `exe role --engine ... --option ...`: a child process of this campaign
/// for `cycle`, stdout discarded and stderr kept for its last words.
fn child_command(exe: &Path, cfg: &Config, cycle: usize, role: &str) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg(role)
        .arg("--engine")
        .arg(cfg.engine.as_str())
        .arg("--mode")
        .arg(cfg.mode.to_string())
        .arg("--keys")
        .arg(cfg.nkeys.to_string())
        .arg("--seed")
        .arg((cfg.seed.wrapping_add(cycle as u64 * 7919)).to_string())
        .arg("--dir")
        .arg(&cfg.dir)
        .arg("--maintenance-pct")
        .arg(cfg.maintenance_pct.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in &cfg.options.extra {
        cmd.arg("--option").arg(format!("{k}={v}"));
    }
    cmd
}

fn spawn_child(
    exe: &Path,
    cfg: &Config,
    cycle: usize,
    failpoint: Option<&str>,
) -> std::io::Result<Child> {
    let mut cmd = child_command(exe, cfg, cycle, "child");
    if let Some(fp) = failpoint {
        cmd.env("VMEMKV_FAILPOINTS", fp)
            .env("VMEMKV_FAILPOINT_MARK", mark_path(&cfg.dir));
    }
    cmd.spawn()
}

/// The violation of a child that ended before it was killed, with what it
/// wrote to stderr.
fn exited_by_itself(cycle: usize, child: &mut Child, status: std::process::ExitStatus) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    format!(
        "cycle {cycle}: child exited by itself ({status}): {}",
        err.trim()
    )
}

fn sigkill(child: &mut Child) {
    // SAFETY: plain libc call on a pid this process spawned and has not yet
    // reaped, so the pid cannot have been reused.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
    }
}

/// Runs `cfg.cycles` kill/reopen/verify cycles, spawning `exe child ...`.
pub fn run_parent(exe: &Path, cfg: &Config) -> Result<Report, String> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let exp = Expected::open(&expected_path(&cfg.dir), cfg.nkeys).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0xc0ffee);
    let mut report = Report::default();
    for cycle in 0..cfg.cycles {
        let seq_at_spawn = exp.peek_seq();
        let failpoint = (!cfg.failpoints.is_empty()).then(|| {
            let name = &cfg.failpoints[cycle % cfg.failpoints.len()];
            // Relocations come by the hundred per cycle; the other points
            // are hit a few times per child at most.
            let n = if name.contains("relocated") {
                rng.random_range(1..=200)
            } else {
                rng.random_range(1..=3)
            };
            format!("{name}@{n}")
        });
        let _ = std::fs::remove_file(mark_path(&cfg.dir));
        let mut child = spawn_child(exe, cfg, cycle, failpoint.as_deref())
            .map_err(|e| format!("spawn: {e}"))?;
        // The kill window starts once the child is writing, so that every
        // cycle kills mid-workload rather than during open.
        let mut exited_early = None;
        let open_deadline = Instant::now() + Duration::from_secs(30);
        while exp.peek_seq() <= seq_at_spawn + 1 && Instant::now() < open_deadline {
            if let Ok(Some(status)) = child.try_wait() {
                exited_early = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let wait = rng.random_range(cfg.kill_after_ms.0..=cfg.kill_after_ms.1);
        let deadline = Instant::now() + Duration::from_millis(wait);
        while exited_early.is_none() && Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                exited_early = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(status) = exited_early {
            use std::os::unix::process::ExitStatusExt;
            let fired = std::fs::read_to_string(mark_path(&cfg.dir)).ok();
            if let (Some(libc::SIGKILL), Some(name)) = (status.signal(), fired) {
                *report
                    .failpoint_kills
                    .entry(name.trim().to_string())
                    .or_default() += 1;
                verify_cycle(cfg, &exp, cycle, &mut report);
                report.cycles += 1;
                continue;
            }
            report
                .violations
                .push(exited_by_itself(cycle, &mut child, status));
            report.cycles += 1;
            continue;
        }
        sigkill(&mut child);
        let _ = child.wait();
        verify_cycle(cfg, &exp, cycle, &mut report);
        report.cycles += 1;
    }
    report.seqs_issued = exp.peek_seq();
    Ok(report)
}

/// Reopens the database after a kill and checks every key.
fn verify_cycle(cfg: &Config, exp: &Expected, cycle: usize, report: &mut Report) {
    let mut violation = |msg: String| report.violations.push(format!("cycle {cycle}: {msg}"));
    let db = match vmemkv_compat::open(cfg.engine, &db_path(&cfg.dir), &cfg.options) {
        Ok(db) => db,
        Err(e) => {
            violation(format!("reopen after SIGKILL failed: {e}"));
            return;
        }
    };
    let issued = exp.peek_seq();
    let mut observed = vec![State::NONE; cfg.nkeys];
    let mut buf = Vec::new();
    for (k, slot) in observed.iter_mut().enumerate() {
        let (acked, pending) = (exp.acked(k), exp.pending(k));
        let found = match db.get_into(&ReadOptions::default(), &key_name(k), &mut buf) {
            Ok(f) => f,
            Err(e) => {
                violation(format!("get key {k}: {e}"));
                continue;
            }
        };
        let seq = if found {
            match decode_value(k, &buf) {
                Some(s) => Some(s),
                None => {
                    violation(format!(
                        "key {k}: value of {} bytes was never written to it",
                        buf.len()
                    ));
                    continue;
                }
            }
        } else {
            None
        };
        *slot = match seq {
            Some(s) => State::put(s),
            None if acked.is_delete() => acked,
            None => State::NONE,
        };
        let ok = if cfg.mode.keeps_acknowledged() {
            match seq {
                Some(s) => {
                    (acked.is_set() && !acked.is_delete() && acked.seq() == s)
                        || (pending.is_set() && !pending.is_delete() && pending.seq() == s)
                }
                None => acked.allows_absent() || (pending.is_set() && pending.is_delete()),
            }
        } else {
            seq.is_none_or(|s| s < issued.max(1) && s <= acked.seq().max(pending.seq()))
        };
        if !ok {
            violation(format!(
                "key {k}: found {}, acknowledged {acked:?}, in flight {pending:?} (mode {})",
                seq.map_or("nothing".to_string(), |s| format!("seq {s}")),
                cfg.mode
            ));
        }
    }
    report.keys_checked += cfg.nkeys as u64;

    if let Some((bseq, keys)) = exp.batch_in_flight() {
        report.batches_in_flight += 1;
        // Count keys showing the batch's write, among those where the batch's
        // outcome is distinguishable from the state before it.
        let mut applied = 0;
        let mut distinguishable = 0;
        for &k in &keys {
            if k >= cfg.nkeys {
                continue;
            }
            // The batch's op on k: still pending, or already acknowledged
            // if the kill landed while the child was recording the acks.
            let (p, a) = (exp.pending(k), exp.acked(k));
            let (op, before) = if p.is_set() {
                (p, Some(a))
            } else if a.is_set() && a.seq() == bseq {
                (a, None)
            } else {
                continue;
            };
            if op.seq() != bseq {
                continue;
            }
            let o = observed[k];
            if op.is_delete() {
                // Absent proves the delete applied only when earlier
                // acknowledged writes cannot be lost; with the WAL off, an
                // absent key may be a lost put instead.
                if !cfg.mode.keeps_acknowledged() || before.is_some_and(State::allows_absent) {
                    continue;
                }
                distinguishable += 1;
                applied += usize::from(!o.is_set() || o.is_delete());
            } else {
                distinguishable += 1;
                applied += usize::from(o.is_set() && !o.is_delete() && o.seq() == bseq);
            }
        }
        if applied != 0 && applied != distinguishable {
            violation(format!(
                "batch seq {bseq} half applied: {applied} of {distinguishable} keys show it"
            ));
        }
    }

    let present: Vec<bool> = observed
        .iter()
        .map(|s| s.is_set() && !s.is_delete())
        .collect();
    check_iteration(db.as_ref(), &present, &mut violation);
    drop(db);
    for (k, s) in observed.into_iter().enumerate() {
        exp.resolve(k, s);
    }
    exp.end_batch();
}

/// Nothing that was never written may appear, and the iterator agrees with
/// point reads: `present[k]` is whether a point read found key `k`. Engines
/// without iterators (Sparkey's hash index) say so rather than skip it
/// silently.
fn check_iteration(db: &dyn Db, present: &[bool], violation: &mut impl FnMut(String)) {
    let iterable = !crate::conformance::not_applicable(
        db,
        vmemkv_compat::Capability::OrderedIteration,
        "crash verify: iterator against point reads",
    );
    if !iterable {
        return;
    }
    let mut it = match db.iter(&ReadOptions::default()) {
        Ok(it) => it,
        Err(e) => return violation(format!("iter: {e}")),
    };
    it.seek_to_first();
    let mut seen = 0usize;
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        match parse_key(it.key()) {
            Some(k) if k < present.len() => {
                if !present[k] {
                    violation(format!("iterator shows key {k}, point read did not"));
                }
            }
            _ => violation(format!(
                "iterator shows a key never written: {:?}",
                it.key()
            )),
        }
        if last.as_deref().is_some_and(|l| l >= it.key()) {
            violation("iterator out of order".into());
        }
        last = Some(it.key().to_vec());
        seen += 1;
        it.next();
    }
    if let Err(e) = it.status() {
        violation(format!("iterator: {e}"));
    }
    let expected = present.iter().filter(|&&p| p).count();
    if seen != expected {
        violation(format!(
            "iterator saw {seen} keys, point reads found {expected}"
        ));
    }
}

/// Opens the database once more, e.g. to check a final state; exposed for
/// tests.
pub fn open_db(cfg: &Config) -> vmemkv_compat::Result<Box<dyn Db>> {
    vmemkv_compat::open(cfg.engine, &db_path(&cfg.dir), &cfg.options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_reject_foreign_bytes() {
        for k in [0usize, 1, 77, 99_999] {
            for seq in [1u64, 2, 3, 1000, 123_456] {
                let v = encode_value(k, seq);
                assert_eq!(decode_value(k, &v), Some(seq));
                assert_eq!(decode_value(k + 1, &v), None, "value of another key");
                let mut torn = v.clone();
                if let Some(b) = torn.last_mut() {
                    *b ^= 1;
                }
                assert_eq!(decode_value(k, &torn), None, "torn value");
            }
        }
        assert!(
            (1..200u64).any(|s| encode_value(3, s).len() == 8),
            "inline sizes occur"
        );
        assert!(
            (1..200u64).any(|s| encode_value(3, s).len() > 1000),
            "large sizes occur"
        );
    }

    #[test]
    fn key_names_parse_back() {
        assert_eq!(parse_key(&key_name(42)), Some(42));
        assert_eq!(parse_key(b"key42"), None);
        assert_eq!(parse_key(b"other"), None);
    }
}
