//! Damage campaign (docs/design.md §1, §4): four base databases, each
//! copied fresh per case, one file damaged, reopened and read back in full.
//!
//! Bases (four writer threads, `sync = true` for every write, values of
//! 0 B to 48 KiB including inline ones of at most 8 bytes, overwrites,
//! deletes and small batches; about 5 MB of log in 1 MiB segments):
//! `clean` and `clean-ckpt` (a checkpoint halfway) are closed cleanly;
//! `killed` (no background threads: the whole log from `00000000.seg`)
//! and `killed-busy` (background threads, sorted runs, frequent
//! checkpoints: packed records, snapshots, retired segments, a spare
//! segment) are SIGKILLed in a child process, and each case's open is their
//! first recovery.
//!
//! Damage: truncation at every 4 KiB boundary of the last two segments
//! holding data (sampled evenly below 10,000 cases), zeroed ranges (4 KiB
//! aligned, unaligned, and from a record boundary to the end of the data),
//! 1-3 flipped bits, truncation anywhere, deleted files, a segment copied
//! over the next or previous one or to a new id, two segments' names
//! swapped, and `LOGEND` replaced by its copy from halfway through the
//! writes or with its slots swapped; on segments, `LOGEND`, `MANIFEST`,
//! snapshot files, `LOG` and `LOCK`.
//!
//! Every case must end in one of two ways: every acknowledged write
//! (`sync = true`, returned `Ok`) reads back exactly, by `get` and by a full
//! iteration, with nothing else present (a write in flight at the kill may
//! be there or not, a batch whole or not at all), and so again after a
//! second open; or the open, or a read, fails with `Error::Corruption`
//! naming the damaged file (or the directory: column "dir-only"). A wrong
//! or missing value with no error is a silent loss; any other error, a
//! panic or a case running over 20 s fails the test too.
//!
//! `VMEMKV_DAMAGE_CASES` sets the number of cases (default 400),
//! `VMEMKV_DAMAGE_SEED` the seed (decimal or `0x` hex), `VMEMKV_DAMAGE_JOBS`
//! the cases run at once (default 1), `VMEMKV_DAMAGE_VERBOSE=1` prints
//! every case. The killed bases depend on where the kill lands, so a
//! failing case is rebuilt, damaged but never opened, under
//! `$TMPDIR/vmemkv-damage-failures/` and its path printed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use common::{key, opts, tmp, value};
use vmemkv::{Bounds, Db, Error, Options, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "VMEMKV_DAMAGE_CHILD";
const CHILD_BUSY_ENV: &str = "VMEMKV_DAMAGE_CHILD_BUSY";
const CASES_ENV: &str = "VMEMKV_DAMAGE_CASES";
const SEED_ENV: &str = "VMEMKV_DAMAGE_SEED";
const JOBS_ENV: &str = "VMEMKV_DAMAGE_JOBS";
/// `1`: print every case's outcome and error message.
const VERBOSE_ENV: &str = "VMEMKV_DAMAGE_VERBOSE";
const DEFAULT_CASES: usize = 400;
const DEFAULT_SEED: u64 = 0x00da_3a6e_5eed_0001;
/// At this many cases every 4 KiB truncation point is run, not a sample.
const ENUMERATE_ALL_AT: usize = 10_000;
const CASE_TIMEOUT: Duration = Duration::from_secs(20);

/// Writer threads; thread `t` owns the keys `t + THREADS * r`, so each
/// key's history is one thread's sequence of operations.
const THREADS: u64 = 4;
const KEYS_PER_THREAD: u64 = 250;
/// Operations per thread of a clean base: about 5 MB of log, five or six
/// 1 MiB segments.
const OPS_PER_THREAD: u64 = 450;
const PAGE: u64 = 4096;
const SEG_SIZE: u64 = 1 << 20;

fn sync() -> WriteOptions {
    WriteOptions::sync()
}

// ---------------------------------------------------------------------------
// Deterministic randomness and the workload.

/// SplitMix64: small, seedable, good enough to place damage.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c908)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// One write of an operation: a put (`Some`) or a delete (`None`).
type Write1 = (Vec<u8>, Option<Vec<u8>>);

fn value_len(r: &mut Rng) -> usize {
    (match r.below(100) {
        0..=14 => r.range(0, 8), // inline in T1
        15..=29 => r.range(9, 100),
        30..=84 => r.range(101, 2000),
        85..=96 => r.range(2001, 12_000),
        _ => r.range(16 << 10, 48 << 10), // read with pread
    }) as usize
}

/// Operation `i` of thread `t`: a single put or delete, or (8%) a batch
/// of 2-4 distinct keys of the thread.
fn op(seed: u64, t: u64, i: u64) -> Vec<Write1> {
    let mut r = Rng::new(seed ^ (t + 1).wrapping_mul(0xA076_1D64_78BD_642F) ^ (i << 20));
    let n = if r.below(100) < 8 { r.range(2, 4) } else { 1 };
    let first = r.below(KEYS_PER_THREAD);
    (0..n)
        .map(|j| {
            let id = t + THREADS * ((first + j * 7) % KEYS_PER_THREAD);
            if r.below(100) < 10 {
                (key(id), None)
            } else {
                let len = value_len(&mut r);
                (key(id), Some(value(id, (t << 56) | (i << 8) | j, len)))
            }
        })
        .collect()
}

fn apply(db: &Db, w: &[Write1]) -> vmemkv::Result<()> {
    match w {
        [(k, Some(v))] => db.put_opt(&sync(), k, v),
        [(k, None)] => db.delete_opt(&sync(), k),
        _ => {
            let mut b = WriteBatch::new();
            for (k, v) in w {
                match v {
                    Some(v) => b.put(k, v),
                    None => b.delete(k),
                }
            }
            db.write(&sync(), &b)
        }
    }
}

/// What a key may read back as.
#[derive(Debug, Clone, Default)]
struct Expect {
    /// The last acknowledged state (`None`: absent).
    acked: Option<Vec<u8>>,
    /// The state a write in flight at the kill would leave.
    alt: Option<Option<Vec<u8>>>,
}

impl Expect {
    /// `Some(false)`: the acknowledged state; `Some(true)`: the in-flight
    /// one; `None`: neither.
    fn allows(&self, got: &Option<Vec<u8>>) -> Option<bool> {
        if *got == self.acked {
            Some(false)
        } else if self.alt.as_ref() == Some(got) {
            Some(true)
        } else {
            None
        }
    }
}

/// The acknowledged state of a base.
#[derive(Clone)]
struct Model {
    keys: BTreeMap<Vec<u8>, Expect>,
    /// Keys of each in-flight batch: all in the new state or none.
    groups: Vec<Vec<Vec<u8>>>,
}

/// Thread `t` had `acks[t]` operations acknowledged; with `in_flight`, the
/// next one may or may not have landed.
fn model(seed: u64, acks: &[u64], in_flight: bool) -> Model {
    let mut keys: BTreeMap<Vec<u8>, Expect> = BTreeMap::new();
    let mut groups = Vec::new();
    for (t, &n) in acks.iter().enumerate() {
        for i in 0..n {
            for (k, v) in op(seed, t as u64, i) {
                keys.entry(k).or_default().acked = v;
            }
        }
        if in_flight {
            let w = op(seed, t as u64, n);
            if w.len() > 1 {
                groups.push(w.iter().map(|(k, _)| k.clone()).collect());
            }
            for (k, v) in w {
                keys.entry(k).or_default().alt = Some(v);
            }
        }
    }
    Model { keys, groups }
}

// ---------------------------------------------------------------------------
// Base databases.

struct Base {
    name: &'static str,
    dir: tempfile::TempDir,
    model: Model,
    /// `LOGEND` as it was about halfway through the writes.
    old_logend: Option<Vec<u8>>,
    /// A description for the report (acks, kill point).
    about: String,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{e}")) {
        let e = e.unwrap_or_else(|e| panic!("{e}"));
        std::fs::copy(e.path(), to.join(e.file_name()))
            .unwrap_or_else(|err| panic!("copy {}: {err}", e.path().display()));
    }
}

/// All writes `sync = true`, four threads, then a clean close (drop).
/// With `checkpoint`, a checkpoint halfway, so `MANIFEST` and a snapshot
/// exist.
fn build_clean(name: &'static str, seed: u64, checkpoint: bool) -> Base {
    let dir = tmp();
    let db = open_with(dir.path(), opts());
    let run = |from: u64, to: u64| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let db = &db;
                s.spawn(move || {
                    for i in from..to {
                        apply(db, &op(seed, t, i))
                            .unwrap_or_else(|e| panic!("{name}: op {t}/{i}: {e}"));
                    }
                });
            }
        })
    };
    run(0, OPS_PER_THREAD / 2);
    let old_logend = std::fs::read(dir.path().join("LOGEND")).ok();
    if checkpoint {
        db.checkpoint()
            .unwrap_or_else(|e| panic!("{name}: checkpoint: {e}"));
    }
    run(OPS_PER_THREAD / 2, OPS_PER_THREAD);
    drop(db);
    let acks = vec![OPS_PER_THREAD; THREADS as usize];
    Base {
        name,
        dir,
        model: model(seed, &acks, false),
        old_logend,
        about: format!(
            "{} ops per thread, clean close{}",
            OPS_PER_THREAD,
            if checkpoint {
                ", checkpoint halfway"
            } else {
                ""
            }
        ),
    }
}

fn open_with(dir: &Path, o: Options) -> Db {
    Db::open(dir, o).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
}

/// Options of the killed child. Plain: no background threads, so the log
/// is every segment from `00000000.seg` on, replayed whole. `busy`:
/// background threads (a spare segment, early writeback, defragment),
/// sorted runs every 256 KiB and checkpoints every 2 MiB, so packed
/// records, snapshots and retired segments exist.
fn child_opts(busy: bool) -> Options {
    let o = Options::default().segment_size(SEG_SIZE as usize);
    if busy {
        o.checkpoint_interval_bytes(2 << 20)
            .maintenance_interval_ms(5)
            .sorted_run_bytes(256 << 10)
    } else {
        o.background(false)
    }
}

/// The child of [`build_killed`]: runs the workload with `sync = true` and
/// prints `ACK <thread> <op>` after each acknowledged operation.
#[test]
fn damage_campaign_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let seed = env_num(SEED_ENV).unwrap_or(DEFAULT_SEED);
    let busy = std::env::var(CHILD_BUSY_ENV).is_ok_and(|v| v == "1");
    let db = open_with(Path::new(&dir), child_opts(busy));
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let db = &db;
            s.spawn(move || {
                // Bounded, in case the parent never kills us.
                for i in 0..OPS_PER_THREAD * 4 {
                    if t0.elapsed() > Duration::from_secs(300) {
                        break;
                    }
                    apply(db, &op(seed, t, i)).unwrap_or_else(|e| panic!("child op {t}/{i}: {e}"));
                    let mut out = std::io::stdout().lock();
                    if writeln!(out, "ACK {t} {i}")
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        std::process::exit(1);
                    }
                }
            });
        }
    });
    std::process::exit(0);
}

/// Runs the workload in a child process and SIGKILLs it once `target`
/// operations were acknowledged (all threads together). The directory is
/// left exactly as the kill left it: each case's open is the first
/// recovery.
fn build_killed(name: &'static str, seed: u64, busy: bool, target: u64) -> Base {
    let dir = tmp();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "damage_campaign_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .env(SEED_ENV, seed.to_string())
        .env(CHILD_BUSY_ENV, if busy { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            match l {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let mut acks = vec![0u64; THREADS as usize];
    let on_line = |l: &str, acks: &mut Vec<u64>| {
        // The first one follows the harness's "test ... " on its line.
        let mut p = l[l.find("ACK ").unwrap_or(0)..].split_whitespace();
        if p.next() == Some("ACK") {
            let t: usize = p.next().and_then(|x| x.parse().ok()).unwrap_or(usize::MAX);
            let i: u64 = p.next().and_then(|x| x.parse().ok()).unwrap_or(u64::MAX);
            assert!(
                t < acks.len() && i == acks[t],
                "{name}: unexpected line {l:?}"
            );
            acks[t] += 1;
        }
    };
    let t0 = Instant::now();
    let mut old_logend = None;
    let mut finished = false;
    while acks.iter().sum::<u64>() < target {
        if t0.elapsed() > Duration::from_secs(180) {
            break;
        }
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => on_line(&l, &mut acks),
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                finished = true;
                break;
            }
        }
        if old_logend.is_none() && acks.iter().sum::<u64>() >= target / 2 {
            old_logend = std::fs::read(dir.path().join("LOGEND")).ok();
        }
    }
    let _ = child.kill(); // SIGKILL
    let status = child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    // Lines written before the kill are acknowledged too.
    for l in rx.iter() {
        on_line(&l, &mut acks);
    }
    let _ = reader.join();
    let total: u64 = acks.iter().sum();
    assert!(
        total >= target / 2,
        "{name}: the child acknowledged only {total} of {target} operations ({status})"
    );
    Base {
        name,
        dir,
        model: model(seed, &acks, true),
        old_logend,
        about: format!(
            "SIGKILL after {total} acknowledged ops ({acks:?} per thread{}), {:.1} s",
            if finished { ", child finished" } else { "" },
            t0.elapsed().as_secs_f64()
        ),
    }
}

// ---------------------------------------------------------------------------
// Files of a base and the damage done to them.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FileKind {
    SegLast,
    SegPrev,
    SegOlder,
    SegEmpty,
    LogEnd,
    Manifest,
    Snapshot,
    InfoLog,
    Lock,
    Segments,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::SegLast => "segment, last with data",
            FileKind::SegPrev => "segment, second-last with data",
            FileKind::SegOlder => "segment, older",
            FileKind::SegEmpty => "segment, empty (spare)",
            FileKind::LogEnd => "LOGEND",
            FileKind::Manifest => "MANIFEST",
            FileKind::Snapshot => "CHECKPOINT-*.t1",
            FileKind::InfoLog => "LOG",
            FileKind::Lock => "LOCK",
            FileKind::Segments => "two segments",
        })
    }
}

struct FileInfo {
    name: String,
    kind: FileKind,
    len: u64,
    /// Just past the last non-zero byte.
    nonzero_end: u64,
    /// Segments: offsets of the records walked from 0 (pads and the seal
    /// included), and the end of the last record holding data.
    records: Vec<u64>,
    data_end: u64,
    seg_id: Option<u32>,
}

fn seg_name(id: u32) -> String {
    format!("{id:08x}.seg")
}

fn seg_id(name: &str) -> Option<u32> {
    let hex = name.strip_suffix(".seg")?;
    if hex.len() != 8 {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// Walks record headers from offset 0 (stops at a hole, garbage or a seal).
fn walk_records(b: &[u8]) -> (Vec<u64>, u64) {
    let mut off = 0usize;
    let mut out = Vec::new();
    let mut data_end = 0;
    while off + 48 <= b.len() && &b[off..off + 4] == b"VMKV" {
        out.push(off as u64);
        let kind = b[off + 4];
        if kind == 3 {
            break;
        }
        let body =
            u32::from_le_bytes([b[off + 16], b[off + 17], b[off + 18], b[off + 19]]) as usize;
        off += (48 + body + 15) & !15;
        if kind != 6 {
            data_end = off as u64;
        }
    }
    (out, data_end)
}

fn survey(dir: &Path) -> Vec<FileInfo> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{e}")) {
        let e = e.unwrap_or_else(|e| panic!("{e}"));
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") {
            continue; // removed by the open before anything reads it
        }
        let b = std::fs::read(e.path()).unwrap_or_else(|e| panic!("{e}"));
        let nonzero_end = b.iter().rposition(|&x| x != 0).map_or(0, |p| p as u64 + 1);
        let id = seg_id(&name);
        let (records, data_end) = if id.is_some() {
            walk_records(&b)
        } else {
            (Vec::new(), nonzero_end)
        };
        let kind = if id.is_some() {
            FileKind::SegOlder
        } else if name == "LOGEND" {
            FileKind::LogEnd
        } else if name == "MANIFEST" {
            FileKind::Manifest
        } else if name.starts_with("CHECKPOINT-") {
            FileKind::Snapshot
        } else if name == "LOCK" {
            FileKind::Lock
        } else if name.starts_with("LOG") {
            FileKind::InfoLog
        } else {
            panic!("unexpected file {name} in a base")
        };
        files.push(FileInfo {
            name,
            kind,
            len: b.len() as u64,
            nonzero_end,
            records,
            data_end,
            seg_id: id,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    // The last two segments holding anything; empty ones after them are
    // spares.
    let mut with_data: Vec<usize> = (0..files.len())
        .filter(|&i| files[i].seg_id.is_some() && files[i].nonzero_end > 0)
        .collect();
    with_data.sort_by_key(|&i| files[i].seg_id);
    let last_data = with_data.last().map(|&i| files[i].seg_id);
    for f in files.iter_mut() {
        if f.seg_id.is_some() && f.nonzero_end == 0 && f.seg_id > last_data.flatten() {
            f.kind = FileKind::SegEmpty;
        }
    }
    if let Some(&i) = with_data.last() {
        files[i].kind = FileKind::SegLast;
    }
    if with_data.len() >= 2 {
        files[with_data[with_data.len() - 2]].kind = FileKind::SegPrev;
    }
    files
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DamageKind {
    Truncate4k,
    TruncateAny,
    ZeroAligned,
    ZeroUnaligned,
    ZeroToEnd,
    BitFlip,
    Delete,
    DupOverNext,
    DupOverPrev,
    DupNewId,
    Swap,
    LogEndOld,
    LogEndSlotsSwapped,
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DamageKind::Truncate4k => "truncate at 4 KiB boundary",
            DamageKind::TruncateAny => "truncate anywhere",
            DamageKind::ZeroAligned => "zero, 4 KiB aligned",
            DamageKind::ZeroUnaligned => "zero, unaligned",
            DamageKind::ZeroToEnd => "zero record..end of data",
            DamageKind::BitFlip => "bit flips (1-3)",
            DamageKind::Delete => "delete file",
            DamageKind::DupOverNext => "segment copied over next",
            DamageKind::DupOverPrev => "segment copied over prev",
            DamageKind::DupNewId => "segment copied to new id",
            DamageKind::Swap => "two segments swapped",
            DamageKind::LogEndOld => "LOGEND from halfway",
            DamageKind::LogEndSlotsSwapped => "LOGEND slots swapped",
        })
    }
}

#[derive(Debug, Clone)]
enum Damage {
    Truncate {
        file: String,
        len: u64,
    },
    Zero {
        file: String,
        off: u64,
        len: u64,
    },
    Flip {
        file: String,
        bits: Vec<(u64, u8)>,
    },
    Delete {
        file: String,
    },
    /// Copy `from` to `to` (replacing `to` if it exists).
    Copy {
        from: String,
        to: String,
    },
    Swap {
        a: String,
        b: String,
    },
    /// Replace the file's content.
    Replace {
        file: String,
        bytes: Vec<u8>,
    },
}

impl Damage {
    /// The files it touched: a Corruption must name one of them.
    fn files(&self) -> Vec<&str> {
        match self {
            Damage::Truncate { file, .. }
            | Damage::Zero { file, .. }
            | Damage::Flip { file, .. }
            | Damage::Delete { file }
            | Damage::Replace { file, .. } => vec![file],
            Damage::Copy { from, to } => vec![from, to],
            Damage::Swap { a, b } => vec![a, b],
        }
    }

    fn apply(&self, dir: &Path) -> std::io::Result<()> {
        let rw = |f: &str| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join(f))
        };
        match self {
            Damage::Truncate { file, len } => rw(file)?.set_len(*len),
            Damage::Zero { file, off, len } => {
                let f = rw(file)?;
                let flen = f.metadata()?.len();
                let n = (*len).min(flen.saturating_sub(*off));
                f.write_all_at(&vec![0u8; n as usize], *off)
            }
            Damage::Flip { file, bits } => {
                let f = rw(file)?;
                for &(off, bit) in bits {
                    let mut b = [0u8; 1];
                    f.read_exact_at(&mut b, off)?;
                    b[0] ^= 1 << (bit & 7);
                    f.write_all_at(&b, off)?;
                }
                Ok(())
            }
            Damage::Delete { file } => std::fs::remove_file(dir.join(file)),
            Damage::Copy { from, to } => {
                let _ = std::fs::remove_file(dir.join(to));
                std::fs::copy(dir.join(from), dir.join(to)).map(drop)
            }
            Damage::Swap { a, b } => {
                let t = dir.join("swap.partial");
                std::fs::rename(dir.join(a), &t)?;
                std::fs::rename(dir.join(b), dir.join(a))?;
                std::fs::rename(&t, dir.join(b))
            }
            Damage::Replace { file, bytes } => std::fs::write(dir.join(file), bytes),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Truncate { file, len } => write!(f, "truncate {file} to {len}"),
            Damage::Zero { file, off, len } => {
                write!(f, "zero {file} [{off}, {}) ({len} bytes)", off + len)
            }
            Damage::Flip { file, bits } => {
                let b: Vec<String> = bits.iter().map(|(o, b)| format!("{o}.{b}")).collect();
                write!(f, "flip {file} bits {}", b.join(","))
            }
            Damage::Delete { file } => write!(f, "delete {file}"),
            Damage::Copy { from, to } => write!(f, "copy {from} to {to}"),
            Damage::Swap { a, b } => write!(f, "swap {a} and {b}"),
            Damage::Replace { file, bytes } => {
                write!(f, "replace {file} ({} bytes)", bytes.len())
            }
        }
    }
}

struct Case {
    base: usize,
    kind: DamageKind,
    file_kind: FileKind,
    damage: Damage,
}

/// The enumerated 4 KiB truncations of the last two segments with data;
/// every `stride`-th when sampling.
fn truncations(base: usize, files: &[FileInfo], stride: u64, out: &mut Vec<Case>) {
    for f in files {
        if !matches!(f.kind, FileKind::SegLast | FileKind::SegPrev) {
            continue;
        }
        let pages = f.len / PAGE;
        // Offset the sample by the file's kind so the two segments are cut
        // at different places.
        let phase = if f.kind == FileKind::SegLast {
            0
        } else {
            stride / 2
        };
        let mut p = phase;
        while p < pages {
            out.push(Case {
                base,
                kind: DamageKind::Truncate4k,
                file_kind: f.kind,
                damage: Damage::Truncate {
                    file: f.name.clone(),
                    len: p * PAGE,
                },
            });
            p += stride.max(1);
        }
    }
}

/// Deletions, duplicates, swaps and stale `LOGEND`s: every one there is.
fn structural(base: usize, b: &Base, files: &[FileInfo], out: &mut Vec<Case>) {
    let push = |out: &mut Vec<Case>, kind, file_kind, damage| {
        out.push(Case {
            base,
            kind,
            file_kind,
            damage,
        })
    };
    for f in files {
        push(
            out,
            DamageKind::Delete,
            f.kind,
            Damage::Delete {
                file: f.name.clone(),
            },
        );
    }
    let segs: Vec<&FileInfo> = files.iter().filter(|f| f.seg_id.is_some()).collect();
    let max_id = segs.iter().filter_map(|f| f.seg_id).max().unwrap_or(0);
    for w in segs.windows(2) {
        push(
            out,
            DamageKind::DupOverNext,
            w[1].kind,
            Damage::Copy {
                from: w[0].name.clone(),
                to: w[1].name.clone(),
            },
        );
        push(
            out,
            DamageKind::DupOverPrev,
            w[0].kind,
            Damage::Copy {
                from: w[1].name.clone(),
                to: w[0].name.clone(),
            },
        );
        push(
            out,
            DamageKind::Swap,
            FileKind::Segments,
            Damage::Swap {
                a: w[0].name.clone(),
                b: w[1].name.clone(),
            },
        );
    }
    if segs.len() > 2 {
        push(
            out,
            DamageKind::Swap,
            FileKind::Segments,
            Damage::Swap {
                a: segs[0].name.clone(),
                b: segs[segs.len() - 1].name.clone(),
            },
        );
    }
    for f in &segs {
        push(
            out,
            DamageKind::DupNewId,
            f.kind,
            Damage::Copy {
                from: f.name.clone(),
                to: seg_name(max_id + 1),
            },
        );
    }
    if let Some(old) = &b.old_logend {
        push(
            out,
            DamageKind::LogEndOld,
            FileKind::LogEnd,
            Damage::Replace {
                file: "LOGEND".into(),
                bytes: old.clone(),
            },
        );
    }
    if let Some(le) = files.iter().find(|f| f.kind == FileKind::LogEnd) {
        let mut bytes = std::fs::read(b.dir.path().join(&le.name)).unwrap_or_default();
        if bytes.len() >= 4096 {
            let (s0, s1) = bytes.split_at_mut(2048);
            s0[..64].swap_with_slice(&mut s1[..64]);
            push(
                out,
                DamageKind::LogEndSlotsSwapped,
                FileKind::LogEnd,
                Damage::Replace {
                    file: le.name.clone(),
                    bytes,
                },
            );
        }
    }
}

/// Where random damage lands: mostly inside the bytes that matter (the
/// records of a segment, LOGEND's slots), sometimes anywhere in the file.
fn offset_in(r: &mut Rng, f: &FileInfo) -> u64 {
    if f.kind == FileKind::LogEnd && r.below(10) < 8 {
        return r.pick(&[0u64, 2048]) + r.below(40);
    }
    let hot = f.nonzero_end.max(f.data_end).min(f.len);
    if hot > 0 && r.below(10) < 8 {
        r.below(hot)
    } else {
        r.below(f.len)
    }
}

/// One random case on file `f` of kind `kind`.
fn random_damage(r: &mut Rng, kind: DamageKind, f: &FileInfo) -> Damage {
    let file = f.name.clone();
    match kind {
        DamageKind::TruncateAny => Damage::Truncate {
            file,
            len: r.below(f.len),
        },
        DamageKind::ZeroAligned => {
            let off = offset_in(r, f) & !(PAGE - 1);
            Damage::Zero {
                file,
                off,
                len: PAGE * r.range(1, 4),
            }
        }
        DamageKind::ZeroUnaligned => {
            let off = offset_in(r, f);
            let len = if r.below(2) == 0 {
                r.range(1, 64)
            } else {
                r.range(65, 9000)
            };
            Damage::Zero { file, off, len }
        }
        DamageKind::ZeroToEnd => {
            // Segments: from a record boundary to the end of the last data
            // record, or (1 in 4) to the end of the file, seal included.
            let (off, end) = if f.records.is_empty() {
                let off = r.below(f.len);
                (off, f.len)
            } else {
                let starts: Vec<u64> = f
                    .records
                    .iter()
                    .copied()
                    .filter(|&o| o < f.data_end)
                    .collect();
                let off = if starts.is_empty() {
                    f.data_end
                } else if r.below(4) == 0 {
                    // Favour the end of the log, where in-flight and
                    // acknowledged writes meet.
                    starts[starts.len() - 1 - r.below(starts.len().min(8) as u64) as usize]
                } else {
                    *r.pick(&starts)
                };
                let end = if r.below(4) == 0 { f.len } else { f.data_end };
                (off, end.max(off + 16))
            };
            Damage::Zero {
                file,
                off,
                len: end - off,
            }
        }
        DamageKind::BitFlip => {
            let n = r.range(1, 3);
            let first = offset_in(r, f);
            let bits = (0..n)
                .map(|i| {
                    let off = if i == 0 {
                        first
                    } else if r.below(2) == 0 {
                        // A burst near the first.
                        (first + r.below(128)).min(f.len - 1)
                    } else {
                        offset_in(r, f)
                    };
                    (off, r.below(8) as u8)
                })
                .collect();
            Damage::Flip { file, bits }
        }
        _ => unreachable!("not a random kind: {kind:?}"),
    }
}

const RANDOM_KINDS: [DamageKind; 6] = [
    DamageKind::ZeroAligned,
    DamageKind::ZeroUnaligned,
    DamageKind::ZeroToEnd,
    DamageKind::BitFlip,
    DamageKind::BitFlip,
    DamageKind::TruncateAny,
];

/// A file to damage at random, weighted towards the end of the log.
fn pick_file<'a>(r: &mut Rng, files: &'a [FileInfo]) -> &'a FileInfo {
    let weight = |k: FileKind| -> u64 {
        match k {
            FileKind::SegLast => 30,
            FileKind::SegPrev => 25,
            FileKind::SegOlder => 20,
            FileKind::SegEmpty => 3,
            FileKind::LogEnd => 12,
            FileKind::Manifest => 4,
            FileKind::Snapshot => 5,
            FileKind::InfoLog => 2,
            FileKind::Lock | FileKind::Segments => 0,
        }
    };
    // A kind's weight is shared among its files.
    let mut per_kind: BTreeMap<FileKind, u64> = BTreeMap::new();
    for f in files.iter().filter(|f| f.len > 0) {
        *per_kind.entry(f.kind).or_default() += 1;
    }
    let total: u64 = per_kind.keys().map(|&k| weight(k)).sum();
    let mut x = r.below(total);
    let kind = per_kind
        .keys()
        .copied()
        .find(|&k| {
            if x < weight(k) {
                true
            } else {
                x -= weight(k);
                false
            }
        })
        .unwrap_or(FileKind::SegLast);
    let of_kind: Vec<&FileInfo> = files
        .iter()
        .filter(|f| f.kind == kind && f.len > 0)
        .collect();
    of_kind[r.below(of_kind.len() as u64) as usize]
}

// ---------------------------------------------------------------------------
// Running a case.

#[derive(Debug, Clone)]
enum Outcome {
    Recovered,
    /// Corruption; `true` when it names a damaged file, `false` when only
    /// the directory.
    Corruption(bool),
    Other(String),
    Silent(String),
    Panic(String),
    Hang,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Recovered => f.write_str("recovered"),
            Outcome::Corruption(true) => f.write_str("Corruption naming the file"),
            Outcome::Corruption(false) => f.write_str("Corruption naming the directory"),
            Outcome::Other(m) => write!(f, "other error: {m}"),
            Outcome::Silent(m) => write!(f, "SILENT LOSS: {m}"),
            Outcome::Panic(m) => write!(f, "panic: {m}"),
            Outcome::Hang => write!(f, "hang: no result in {CASE_TIMEOUT:?}"),
        }
    }
}

/// What the reads found.
struct Findings {
    wrong: Vec<String>,
    corruption: Option<String>,
    other: Option<String>,
}

fn shorten(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => format!("{} bytes {:02x?}", v.len(), &v[..v.len().min(8)]),
    }
}

/// Reads every model key with `get` and the whole database with an
/// iterator.
fn read_back(db: &Db, m: &Model) -> Findings {
    let mut f = Findings {
        wrong: Vec::new(),
        corruption: None,
        other: None,
    };
    let note = |f: &mut Findings, e: Error, what: &str| match e {
        Error::Corruption(msg) => {
            f.corruption.get_or_insert(format!("{what}: {msg}"));
        }
        e => {
            f.other.get_or_insert(format!("{what}: {e}"));
        }
    };
    let mut got: BTreeMap<&[u8], Option<Vec<u8>>> = BTreeMap::new();
    let mut took_alt: BTreeMap<&[u8], bool> = BTreeMap::new();
    for (k, exp) in &m.keys {
        match db.get(k) {
            Ok(v) => {
                match exp.allows(&v) {
                    Some(alt) => {
                        took_alt.insert(k.as_slice(), alt);
                    }
                    None => f.wrong.push(format!(
                        "get {}: {} (acknowledged: {}{})",
                        String::from_utf8_lossy(k),
                        shorten(&v),
                        shorten(&exp.acked),
                        exp.alt
                            .as_ref()
                            .map(|a| format!(", in flight: {}", shorten(a)))
                            .unwrap_or_default()
                    )),
                }
                got.insert(k.as_slice(), v);
            }
            Err(e) => note(&mut f, e, &format!("get {}", String::from_utf8_lossy(k))),
        }
    }
    // A batch in flight lands whole or not at all.
    for g in &m.groups {
        let states: BTreeSet<bool> = g
            .iter()
            .filter(|k| {
                let e = &m.keys[*k];
                e.alt.as_ref() != Some(&e.acked)
            })
            .filter_map(|k| took_alt.get(k.as_slice()).copied())
            .collect();
        if states.len() > 1 {
            f.wrong.push(format!(
                "in-flight batch over {} keys landed in part",
                g.len()
            ));
        }
    }
    let mut it = db.iter(Bounds::all());
    it.seek_to_first();
    let mut seen = BTreeSet::new();
    let mut prev: Option<Vec<u8>> = None;
    while it.valid() {
        let k = it.key().to_vec();
        let v = Some(it.value().to_vec());
        if prev.as_ref().is_some_and(|p| *p >= k) {
            f.wrong.push(format!(
                "iterator out of order at {}",
                String::from_utf8_lossy(&k)
            ));
        }
        match m.keys.get(&k) {
            None => f.wrong.push(format!(
                "iterator: unexpected key {}",
                String::from_utf8_lossy(&k)
            )),
            Some(exp) => {
                if exp.allows(&v).is_none() {
                    f.wrong.push(format!(
                        "iterator {}: {} (acknowledged: {})",
                        String::from_utf8_lossy(&k),
                        shorten(&v),
                        shorten(&exp.acked)
                    ));
                } else if got.get(k.as_slice()).is_some_and(|g| *g != v) {
                    f.wrong.push(format!(
                        "iterator {} disagrees with get",
                        String::from_utf8_lossy(&k)
                    ));
                }
            }
        }
        seen.insert(k.clone());
        prev = Some(k);
        it.next();
    }
    match it.status() {
        Err(e) => note(&mut f, e, "iterator"),
        Ok(()) => {
            // A complete iteration must have found every present key.
            for (k, v) in &got {
                if v.is_some() && !seen.contains(*k) {
                    f.wrong
                        .push(format!("iterator missed {}", String::from_utf8_lossy(k)));
                }
            }
        }
    }
    f
}

/// Whether `msg` names file `name` (as a whole name: "LOG" is not named
/// by "LOGEND").
fn names_file(msg: &str, name: &str) -> bool {
    msg.match_indices(name).any(|(i, _)| {
        let before = msg[..i].chars().next_back();
        let after = msg[i + name.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

fn classify_err(e: &Error, names: &[&str], dir: &Path) -> Outcome {
    match e {
        Error::Corruption(m) => {
            if names.iter().any(|n| names_file(m, n)) {
                Outcome::Corruption(true)
            } else if m.contains(&dir.display().to_string()) {
                Outcome::Corruption(false)
            } else {
                Outcome::Other(format!("Corruption naming neither file nor directory: {m}"))
            }
        }
        e => Outcome::Other(e.to_string()),
    }
}

fn check_once(dir: &Path, m: &Model, names: &[&str]) -> (Outcome, Option<String>) {
    let db = match Db::open(dir, opts()) {
        Ok(db) => db,
        Err(e) => return (classify_err(&e, names, dir), Some(format!("open: {e}"))),
    };
    let f = read_back(&db, m);
    drop(db);
    if !f.wrong.is_empty() {
        let mut s = format!(
            "{} wrong: {}",
            f.wrong.len(),
            f.wrong[..f.wrong.len().min(5)].join("; ")
        );
        if let Some(c) = &f.corruption {
            s.push_str(&format!(" (other reads reported {c})"));
        }
        return (Outcome::Silent(s), None);
    }
    if let Some(c) = f.corruption {
        // Reads report Corruption through `Error::Corruption(msg)`; the
        // message was prefixed with what was read.
        let e = Error::Corruption(c.clone());
        return (classify_err(&e, names, dir), Some(c));
    }
    if let Some(o) = f.other {
        return (Outcome::Other(o.clone()), Some(o));
    }
    (Outcome::Recovered, None)
}

/// Opens the damaged copy and reads everything; after a clean recovery,
/// opens it once more (recovery's repairs must themselves recover).
fn check(dir: &Path, m: &Model, names: &[&str]) -> (Outcome, Option<String>) {
    let first = check_once(dir, m, names);
    if !matches!(first.0, Outcome::Recovered) {
        return first;
    }
    match check_once(dir, m, names) {
        (Outcome::Recovered, _) => first,
        (Outcome::Silent(s), _) => (Outcome::Silent(format!("second open: {s}")), None),
        (_, msg) => {
            let msg = msg.unwrap_or_default();
            (
                Outcome::Other(format!("second open after a clean recovery: {msg}")),
                Some(msg),
            )
        }
    }
}

fn run_case(base: &'static Base, case: &Case, dir: &Path) -> (Outcome, Option<String>) {
    let _ = std::fs::remove_dir_all(dir);
    copy_dir(base.dir.path(), dir);
    if let Err(e) = case.damage.apply(dir) {
        panic!("applying {}: {e}", case.damage);
    }
    let (tx, rx) = mpsc::channel();
    let d = dir.to_path_buf();
    let m = &base.model;
    let names: Vec<String> = case.damage.files().iter().map(|s| s.to_string()).collect();
    // A hung case thread is left behind (and fails the campaign); the
    // bases are `'static` so that it can never outlive its model.
    let h = std::thread::spawn(move || {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&d, m, &names)));
        let _ = tx.send(match r {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                (Outcome::Panic(msg), None)
            }
        });
    });
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok((o, msg)) => {
            let _ = h.join();
            let _ = std::fs::remove_dir_all(dir);
            (o, msg)
        }
        Err(_) => (Outcome::Hang, None),
    }
}

// ---------------------------------------------------------------------------
// The campaign.

#[derive(Default, Clone, Copy)]
struct Row {
    recovered: u64,
    corruption: u64,
    dir_only: u64,
    other: u64,
    silent: u64,
    panic_hang: u64,
}

impl Row {
    fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Recovered => self.recovered += 1,
            Outcome::Corruption(named) => {
                self.corruption += 1;
                if !named {
                    self.dir_only += 1;
                }
            }
            Outcome::Other(_) => self.other += 1,
            Outcome::Silent(_) => self.silent += 1,
            Outcome::Panic(_) | Outcome::Hang => self.panic_hang += 1,
        }
    }

    fn total(&self) -> u64 {
        self.recovered + self.corruption + self.other + self.silent + self.panic_hang
    }

    fn merge(&mut self, o: &Row) {
        self.recovered += o.recovered;
        self.corruption += o.corruption;
        self.dir_only += o.dir_only;
        self.other += o.other;
        self.silent += o.silent;
        self.panic_hang += o.panic_hang;
    }
}

fn print_table<K: fmt::Display>(title: &str, rows: &BTreeMap<K, Row>) -> Row {
    println!();
    println!(
        "{title:<52} {:>6} {:>9} {:>10} {:>8} {:>7} {:>7} {:>10}",
        "cases", "recovered", "Corruption", "dir-only", "other", "silent", "panic/hang"
    );
    let mut sum = Row::default();
    for (k, r) in rows {
        println!(
            "{:<52} {:>6} {:>9} {:>10} {:>8} {:>7} {:>7} {:>10}",
            k.to_string(),
            r.total(),
            r.recovered,
            r.corruption,
            r.dir_only,
            r.other,
            r.silent,
            r.panic_hang
        );
        sum.merge(r);
    }
    println!(
        "{:<52} {:>6} {:>9} {:>10} {:>8} {:>7} {:>7} {:>10}",
        "TOTAL",
        sum.total(),
        sum.recovered,
        sum.corruption,
        sum.dir_only,
        sum.other,
        sum.silent,
        sum.panic_hang
    );
    sum
}

/// A number from the environment, decimal or `0x` hex.
fn env_num(name: &str) -> Option<u64> {
    let s = std::env::var(name).ok()?;
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Removes the bases' directories when the campaign ends, however it ends.
struct Cleanup(&'static [Base]);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for b in self.0 {
            let _ = std::fs::remove_dir_all(b.dir.path());
        }
    }
}

/// Rebuilds a failing case, damaged but not opened, where it survives the
/// test, and returns its path.
fn keep_failure(base: &Base, case: &Case, n: usize, seed: u64) -> PathBuf {
    let dst = std::env::temp_dir()
        .join("vmemkv-damage-failures")
        .join(format!("seed-{seed:x}-case-{n}-{}", base.name));
    let _ = std::fs::remove_dir_all(&dst);
    copy_dir(base.dir.path(), &dst);
    let _ = case.damage.apply(&dst);
    dst
}

#[test]
fn damage_campaign() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let t0 = Instant::now();
    let budget = env_num(CASES_ENV).map_or(DEFAULT_CASES, |n| n as usize);
    let seed = env_num(SEED_ENV).unwrap_or(DEFAULT_SEED);
    let jobs = env_num(JOBS_ENV).map_or(1, |n| n as usize).max(1);
    let verbose = env_num(VERBOSE_ENV).is_some_and(|v| v != 0);
    println!(
        "damage campaign: seed {seed:#x} ({SEED_ENV}), {budget} cases ({CASES_ENV}), {jobs} jobs"
    );

    // The bases: two clean ones built here while the two killed ones run
    // in child processes.
    let target = THREADS * OPS_PER_THREAD;
    let mut r = Rng::new(seed);
    let kill_a = target * r.range(80, 100) / 100;
    let kill_b = target * r.range(80, 100) / 100;
    let bases: Vec<Base> = std::thread::scope(|s| {
        let a = s.spawn(|| build_killed("killed", seed, false, kill_a));
        let b = s.spawn(|| build_killed("killed-busy", seed, true, kill_b));
        let c = build_clean("clean", seed, false);
        let d = build_clean("clean-ckpt", seed, true);
        let a = a.join().unwrap_or_else(|_| panic!("building killed"));
        let b = b.join().unwrap_or_else(|_| panic!("building killed-busy"));
        vec![c, d, a, b]
    });
    // Case threads borrow the models; a hung one may outlive this
    // function, so the bases are never dropped (`Cleanup` removes their
    // directories).
    let bases: &'static [Base] = Vec::leak(bases);
    let _cleanup = Cleanup(bases);
    let built = t0.elapsed();
    let surveys: Vec<Vec<FileInfo>> = bases.iter().map(|b| survey(b.dir.path())).collect();
    for (b, files) in bases.iter().zip(&surveys) {
        let segs: Vec<String> = files
            .iter()
            .filter(|f| f.seg_id.is_some())
            .map(|f| format!("{} ({}, data to {})", f.name, f.kind, f.data_end))
            .collect();
        let others: Vec<&str> = files
            .iter()
            .filter(|f| f.seg_id.is_none())
            .map(|f| f.name.as_str())
            .collect();
        println!(
            "base {:<12} {}; {} keys in the model; segments [{}]; files {:?}",
            b.name,
            b.about,
            b.model.keys.len(),
            segs.join(", "),
            others
        );
    }
    println!("bases built in {:.1} s", built.as_secs_f64());

    let work = tmp();
    // Each base, undamaged, recovers everything.
    for (i, b) in bases.iter().enumerate() {
        let d = work.path().join(format!("pristine-{i}"));
        copy_dir(b.dir.path(), &d);
        let (o, msg) = check(&d, &b.model, &[]);
        assert!(
            matches!(o, Outcome::Recovered),
            "base {} undamaged: {o:?} {msg:?}",
            b.name
        );
        // The oracle itself: a model missing one present key, or with
        // another value for it, must make the same directory a silent loss.
        let Some((k, _)) = b
            .model
            .keys
            .iter()
            .find(|(_, e)| e.acked.is_some() && e.alt.is_none())
        else {
            panic!("base {}: no acknowledged key", b.name)
        };
        let mut other_value = b.model.clone();
        if let Some(e) = other_value.keys.get_mut(k) {
            e.acked = Some(b"never written".to_vec());
        }
        let mut missing_key = b.model.clone();
        missing_key.keys.remove(k);
        for (what, m) in [("value", &other_value), ("key", &missing_key)] {
            let (o, _) = check_once(&d, m, &[]);
            assert!(
                matches!(o, Outcome::Silent(_)),
                "base {}: a model with another {what} for {} went unnoticed: {o}",
                b.name,
                String::from_utf8_lossy(k)
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    // Cases: truncations (all, or an even sample), the structural ones,
    // then random damage up to the budget.
    let mut cases = Vec::new();
    let pages: u64 = surveys
        .iter()
        .flatten()
        .filter(|f| matches!(f.kind, FileKind::SegLast | FileKind::SegPrev))
        .map(|f| f.len / PAGE)
        .sum();
    let stride = if budget >= ENUMERATE_ALL_AT {
        1
    } else {
        // About a fifth of the budget, at least one cut per 64 KiB.
        (pages / (budget as u64 / 5).max(1)).clamp(1, 16)
    };
    for (i, files) in surveys.iter().enumerate() {
        truncations(i, files, stride, &mut cases);
    }
    for (i, (b, files)) in bases.iter().zip(&surveys).enumerate() {
        structural(i, b, files, &mut cases);
    }
    let mut k = 0usize;
    while cases.len() < budget {
        let bi = k % bases.len();
        let kind = RANDOM_KINDS[(k / bases.len()) % RANDOM_KINDS.len()];
        k += 1;
        let f = pick_file(&mut r, &surveys[bi]);
        cases.push(Case {
            base: bi,
            kind,
            file_kind: f.kind,
            damage: random_damage(&mut r, kind, f),
        });
    }
    println!(
        "{} cases: {} truncations at 4 KiB boundaries (every {} page{}), the rest structural and random",
        cases.len(),
        cases
            .iter()
            .filter(|c| c.kind == DamageKind::Truncate4k)
            .count(),
        stride,
        if stride == 1 { "" } else { "s" }
    );

    // Run them.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; cases.len()]);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for j in 0..jobs {
            let (next, results, failures, cases, work) =
                (&next, &results, &failures, &cases, &work);
            s.spawn(move || loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= cases.len() {
                    break;
                }
                let c = &cases[n];
                let b = &bases[c.base];
                let d = work.path().join(format!("case-{j}-{n}"));
                let (o, msg) = run_case(b, c, &d);
                if verbose {
                    println!(
                        "case {n} {} | {} | {} | {} | {o} | {}",
                        b.name,
                        c.kind,
                        c.file_kind,
                        c.damage,
                        msg.as_deref().unwrap_or("")
                    );
                }
                if !matches!(o, Outcome::Recovered | Outcome::Corruption(_)) {
                    let kept = keep_failure(b, c, n, seed);
                    let line = format!(
                        "FAIL case {n} base {} ({}), {}: {}: {o} [{}]; damaged copy kept in {}",
                        b.name,
                        c.kind,
                        c.file_kind,
                        c.damage,
                        msg.unwrap_or_default(),
                        kept.display()
                    );
                    println!("{line}");
                    failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(line);
                }
                let done = {
                    let mut r = results.lock().unwrap_or_else(|e| e.into_inner());
                    r[n] = Some(o);
                    r.iter().filter(|x| x.is_some()).count()
                };
                if done % 500 == 0 {
                    println!(
                        "  {done}/{} cases, {:.0} s",
                        cases.len(),
                        t0.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });

    // Tables.
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut by_kind: BTreeMap<String, Row> = BTreeMap::new();
    let mut by_file: BTreeMap<String, Row> = BTreeMap::new();
    let mut by_base: BTreeMap<String, Row> = BTreeMap::new();
    for (c, r) in cases.iter().zip(&results) {
        let Some(o) = r else { continue };
        let b = bases[c.base].name;
        by_kind
            .entry(format!("{b:<12} {}", c.kind))
            .or_default()
            .add(o);
        by_file
            .entry(format!("{b:<12} {}", c.file_kind))
            .or_default()
            .add(o);
        by_base.entry(b.to_string()).or_default().add(o);
    }
    let sum = print_table("base x damage", &by_kind);
    print_table("base x file kind", &by_file);
    print_table("base", &by_base);
    println!(
        "\nseed {seed:#x}: {} cases in {:.1} s (bases {:.1} s); dir-only = Corruption naming the directory, not the damaged file",
        sum.total(),
        t0.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    assert!(
        sum.silent == 0 && sum.other == 0 && sum.panic_hang == 0,
        "{} silent losses, {} other errors, {} panics/hangs (seed {seed:#x}):\n{}",
        sum.silent,
        sum.other,
        sum.panic_hang,
        failures.join("\n")
    );
}

/// design.md §4 step 2: a snapshot that cannot be loaded, when segments
/// were retired so that no full replay is possible, is `Corruption` naming
/// the file, a missing one included (it was an `IoError` once).
#[test]
fn a_missing_snapshot_with_retired_segments_is_corruption() {
    let dir = tmp();
    {
        let db = open_with(dir.path(), opts());
        for round in 0..3u64 {
            for i in 0..1500u64 {
                db.put_opt(&sync(), &key(i), &value(i, round, 700))
                    .unwrap_or_else(|e| panic!("put: {e}"));
            }
        }
        db.defragment()
            .unwrap_or_else(|e| panic!("defragment: {e}"));
    }
    assert!(
        !dir.path().join(seg_name(0)).exists(),
        "defragment retired no segment; the case needs a gap before the log"
    );
    let snap: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("CHECKPOINT-"))
        .collect();
    assert_eq!(snap.len(), 1, "{snap:?}");
    std::fs::remove_file(dir.path().join(&snap[0])).unwrap_or_else(|e| panic!("{e}"));
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption(m)) => assert!(m.contains(&snap[0]), "{m}"),
        other => panic!(
            "expected Corruption naming {}, got {:?}",
            snap[0],
            other.err()
        ),
    }
}
