//! Fault injection: damage one file of a closed database (truncation, bit
//! flips, a zeroed 4 KiB block, deletion), reopen it through the `Db` trait
//! and read everything back.
//!
//! Every case must end in one of three acceptable ways:
//! * a clean open with every key exactly as written;
//! * an open that lost data (keys missing or older than their last write),
//!   where every value still decodes to something written to that key;
//! * `Error::Corruption` (or `IoError`, for a missing file or a damaged
//!   reference to one) whose message names the file or the database
//!   directory.
//!
//! Anything else is a violation: a panic in any thread, a hang, a value that
//! was never written to its key, an iterator out of order or disagreeing with
//! point reads, or an error of another kind.
//!
//! Values come from [`crate::crash::encode_value`], so every read can be
//! traced back to the write that produced it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, Once};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vmemkv_compat::{Db, EngineKind, EngineOptions, Error, ReadOptions, WriteBatch, WriteOptions};

use crate::crash::{decode_value, encode_value, key_name};

/// A case running longer than this is a hang.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(20);

/// What is done to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Cut the file at a random offset.
    Truncate,
    /// Flip 1 to 3 random bits.
    BitFlip,
    /// Overwrite one aligned 4 KiB block with zeros.
    ZeroBlock,
    /// Delete the file.
    Missing,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 4] = [
        FaultKind::Truncate,
        FaultKind::BitFlip,
        FaultKind::ZeroBlock,
        FaultKind::Missing,
    ];
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::Truncate => "truncate",
            FaultKind::BitFlip => "bit-flip",
            FaultKind::ZeroBlock => "zero-4k",
            FaultKind::Missing => "missing",
        })
    }
}

/// One concrete fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `set_len(offset)`.
    Truncate(u64),
    /// Flip bit `.1` of the byte at `.0`, for each pair.
    BitFlip(Vec<(u64, u8)>),
    /// Zero `[offset, offset + 4096)` (clamped to the file).
    ZeroBlock(u64),
    /// Remove the file.
    Missing,
}

impl Fault {
    /// Its kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Truncate(_) => FaultKind::Truncate,
            Fault::BitFlip(_) => FaultKind::BitFlip,
            Fault::ZeroBlock(_) => FaultKind::ZeroBlock,
            Fault::Missing => FaultKind::Missing,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Truncate(o) => write!(f, "truncate at {o}"),
            Fault::BitFlip(v) => {
                let parts: Vec<String> = v.iter().map(|(o, b)| format!("{o}.{b}")).collect();
                write!(f, "flip bits {}", parts.join(","))
            }
            Fault::ZeroBlock(o) => write!(f, "zero 4 KiB at {o}"),
            Fault::Missing => f.write_str("delete"),
        }
    }
}

/// The kind of an engine file, from its name, for the outcome table.
pub fn file_kind(engine: EngineKind, name: &str) -> &'static str {
    match engine {
        EngineKind::Vmemkv => {
            if name.ends_with(".seg") {
                "segment"
            } else if name.starts_with("CHECKPOINT-") {
                "checkpoint"
            } else if name == "MANIFEST" {
                "manifest"
            } else if name == "LOCK" {
                "lock"
            } else if name == "LOGEND" {
                "log-end"
            } else if name == "APPMETA" {
                "app-meta"
            } else if name.starts_with("LOG") {
                "info-log"
            } else {
                "other"
            }
        }
        EngineKind::RocksDb | EngineKind::BlobDb => {
            if name.ends_with(".sst") {
                "sst"
            } else if name.ends_with(".log") {
                "wal"
            } else if name.ends_with(".blob") {
                "blob"
            } else if name.starts_with("MANIFEST-") {
                "manifest"
            } else if name == "CURRENT" {
                "current"
            } else if name.starts_with("OPTIONS-") {
                "options"
            } else if name == "LOCK" {
                "lock"
            } else if name.starts_with("LOG") {
                "info-log"
            } else {
                "other"
            }
        }
        EngineKind::Lmdb => match name {
            "data.mdb" => "data",
            "lock.mdb" => "lock",
            _ => "other",
        },
        EngineKind::Fjall | EngineKind::FjallBlob => {
            if name.ends_with(".jnl") {
                "journal"
            } else if name == "version" {
                "version"
            } else if name == "lock" || name == "LOCK" {
                "lock"
            } else {
                "other"
            }
        }
        EngineKind::Sparkey => match name {
            "data.spl" => "log",
            "data.spi" => "index",
            "LOCK" => "lock",
            _ => "other",
        },
        EngineKind::Null => match name {
            "LOCK" => "lock",
            _ => "other",
        },
    }
}

/// Applies `fault` to the file at `path`.
pub fn inject(path: &Path, fault: &Fault) -> std::io::Result<()> {
    match fault {
        Fault::Missing => std::fs::remove_file(path),
        Fault::Truncate(off) => OpenOptions::new().write(true).open(path)?.set_len(*off),
        Fault::BitFlip(bits) => {
            let mut f = OpenOptions::new().read(true).write(true).open(path)?;
            for &(off, bit) in bits {
                let mut b = [0u8; 1];
                f.seek(SeekFrom::Start(off))?;
                f.read_exact(&mut b)?;
                b[0] ^= 1 << (bit & 7);
                f.seek(SeekFrom::Start(off))?;
                f.write_all(&b)?;
            }
            f.sync_all()
        }
        Fault::ZeroBlock(off) => {
            let mut f = OpenOptions::new().write(true).open(path)?;
            let len = f.metadata()?.len();
            let n = 4096u64.min(len.saturating_sub(*off)) as usize;
            f.seek(SeekFrom::Start(*off))?;
            f.write_all(&vec![0u8; n])?;
            f.sync_all()
        }
    }
}

/// Length of the file and the offset just past its last non-zero byte
/// (segments are preallocated, so most of a file may be zeros that no
/// fault there could matter to).
fn lengths(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    // Scan backwards in chunks: files may be large and sparse (LMDB).
    let mut end = len;
    let mut buf = vec![0u8; 1 << 16];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.read_exact_at(chunk, start)?;
        if let Some(p) = chunk.iter().rposition(|&b| b != 0) {
            return Ok((len, start + p as u64 + 1));
        }
        end = start;
    }
    Ok((len, 0))
}

/// A random fault of `kind` for a file of `len` bytes whose data ends at
/// `data_len`; offsets fall inside the data four times out of five.
pub fn random_fault(kind: FaultKind, len: u64, data_len: u64, rng: &mut StdRng) -> Fault {
    let off = |rng: &mut StdRng| {
        let hi = if data_len > 0 && rng.random_bool(0.8) {
            data_len
        } else {
            len
        };
        if hi == 0 {
            0
        } else {
            rng.random_range(0..hi)
        }
    };
    match kind {
        FaultKind::Truncate => Fault::Truncate(off(rng)),
        FaultKind::BitFlip if len == 0 => Fault::BitFlip(Vec::new()),
        FaultKind::BitFlip => {
            let n = rng.random_range(1..=3);
            Fault::BitFlip(
                (0..n)
                    .map(|_| (off(rng), rng.random_range(0..8u8)))
                    .collect(),
            )
        }
        FaultKind::ZeroBlock => Fault::ZeroBlock(off(rng) / 4096 * 4096),
        FaultKind::Missing => Fault::Missing,
    }
}

fn parse_key(key: &[u8]) -> Option<usize> {
    let digits = key.strip_prefix(b"key")?;
    if digits.len() != 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Everything a template database was given: per key, every sequence
/// written to it and the final one.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Size of the key space (`key_name(0..nkeys)`).
    pub nkeys: usize,
    /// Every sequence ever written to each key.
    pub written: Vec<BTreeSet<u64>>,
    /// Each key's final value's sequence (`None`: deleted or never set).
    pub latest: Vec<Option<u64>>,
}

/// What the template does besides writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// Only writes: recovery replays the whole log.
    None,
    /// A checkpoint after 60 % of the writes.
    Checkpoint,
    /// A checkpoint, then a defragment cycle, then more writes.
    CheckpointDefragment,
}

fn tolerate(r: vmemkv_compat::Result<()>, what: &str) -> Result<(), String> {
    match r {
        Ok(()) | Err(Error::NotSupported(_)) => Ok(()),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// Writes a template database at `path` (puts, overwrites, deletes and
/// batches over `nkeys` keys) and closes it.
pub fn build_template(
    engine: EngineKind,
    path: &Path,
    opts: &EngineOptions,
    nkeys: usize,
    nops: usize,
    maint: Maintenance,
    seed: u64,
) -> Result<Workload, String> {
    let db = vmemkv_compat::open(engine, path, opts).map_err(|e| format!("open: {e}"))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = Workload {
        nkeys,
        written: vec![BTreeSet::new(); nkeys],
        latest: vec![None; nkeys],
    };
    let wo = WriteOptions::default();
    let mut seq = 0u64;
    for i in 0..nops {
        if i == nops * 3 / 5 && maint != Maintenance::None {
            tolerate(db.checkpoint(), "checkpoint")?;
            if maint == Maintenance::CheckpointDefragment {
                tolerate(db.defragment(), "defragment")?;
            }
        }
        seq += 1;
        let k = rng.random_range(0..nkeys);
        match rng.random_range(0..100) {
            0..=59 => {
                db.put(&wo, &key_name(k), &encode_value(k, seq))
                    .map_err(|e| format!("put: {e}"))?;
                w.written[k].insert(seq);
                w.latest[k] = Some(seq);
            }
            60..=74 => {
                db.delete(&wo, &key_name(k))
                    .map_err(|e| format!("delete: {e}"))?;
                w.latest[k] = None;
            }
            _ => {
                let mut b = WriteBatch::new();
                let mut ops = BTreeMap::new();
                for _ in 0..rng.random_range(2..7) {
                    ops.insert(rng.random_range(0..nkeys), rng.random_bool(0.8));
                }
                for (&k, &put) in &ops {
                    if put {
                        b.put(&key_name(k), &encode_value(k, seq));
                    } else {
                        b.delete(&key_name(k));
                    }
                }
                db.write(&wo, &b).map_err(|e| format!("write: {e}"))?;
                for (&k, &put) in &ops {
                    if put {
                        w.written[k].insert(seq);
                        w.latest[k] = Some(seq);
                    } else {
                        w.latest[k] = None;
                    }
                }
            }
        }
    }
    tolerate(db.flush(), "flush")?;
    drop(db);
    Ok(w)
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every key exactly as written.
    Clean,
    /// Data lost: keys missing (`lost`) or holding an older value (`stale`);
    /// `reported` says whether the engine's info log mentions the loss.
    Loss {
        /// Keys whose last value is gone.
        lost: usize,
        /// Keys holding an earlier value than their last write.
        stale: usize,
        /// The info log names the loss (vmemkv: a hole, a torn tail, an
        /// unusable checkpoint).
        reported: bool,
    },
    /// A `Corruption` or `IoError` naming the file or the directory.
    Error(String),
    /// Not acceptable; the description says why.
    Violation(String),
}

/// Column of the outcome table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// [`Outcome::Clean`].
    Clean,
    /// [`Outcome::Loss`] with `reported`.
    LossReported,
    /// [`Outcome::Loss`] without `reported`.
    LossSilent,
    /// [`Outcome::Error`].
    CorruptionError,
    /// [`Outcome::Violation`].
    Violation,
}

impl Outcome {
    /// The table column.
    pub fn class(&self) -> Class {
        match self {
            Outcome::Clean => Class::Clean,
            Outcome::Loss { reported: true, .. } => Class::LossReported,
            Outcome::Loss { .. } => Class::LossSilent,
            Outcome::Error(_) => Class::CorruptionError,
            Outcome::Violation(_) => Class::Violation,
        }
    }
}

enum Fail {
    Error(Error),
    Violation(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Error(e)
    }
}

/// Checks one read of key `k` against the workload; `Ok(true)` if it is
/// the key's last write, `Ok(false)` if it is an earlier one.
fn check_value(w: &Workload, k: usize, v: &[u8], how: &str) -> Result<bool, Fail> {
    let seq = decode_value(k, v).filter(|s| w.written.get(k).is_some_and(|ws| ws.contains(s)));
    match seq {
        Some(s) => Ok(w.latest[k] == Some(s)),
        None => Err(Fail::Violation(format!(
            "{how} of {} returned a value never written to it ({} bytes, starting {:02x?})",
            String::from_utf8_lossy(&key_name(k)),
            v.len(),
            &v[..v.len().min(16)]
        ))),
    }
}

/// Reads every key (and a few never written) and iterates the whole
/// database; returns `(lost, stale)`.
fn read_everything(db: &dyn Db, w: &Workload) -> Result<(usize, usize), Fail> {
    let ro = ReadOptions::default();
    let (mut lost, mut stale) = (0, 0);
    let mut present = BTreeMap::new();
    let mut buf = Vec::new();
    for k in 0..w.nkeys + 8 {
        if db.get_into(&ro, &key_name(k), &mut buf)? {
            if k >= w.nkeys || w.written[k].is_empty() {
                return Err(Fail::Violation(format!(
                    "get of never-written key {} found {} bytes",
                    String::from_utf8_lossy(&key_name(k)),
                    buf.len()
                )));
            }
            if !check_value(w, k, &buf, "get")? {
                stale += 1;
            }
            present.insert(k, buf.clone());
        } else if w.latest.get(k).is_some_and(Option::is_some) {
            lost += 1;
        }
    }
    let mut it = db.iter(&ro)?;
    it.seek_to_first();
    let mut prev: Option<Vec<u8>> = None;
    let mut seen = 0usize;
    while it.valid() {
        let key = it.key();
        if prev.as_deref().is_some_and(|p| p >= key) {
            return Err(Fail::Violation(format!(
                "iterator went from {:?} to {:?}: not strictly increasing",
                prev.as_deref().map(String::from_utf8_lossy),
                String::from_utf8_lossy(key)
            )));
        }
        let Some(k) = parse_key(key).filter(|&k| k < w.nkeys) else {
            return Err(Fail::Violation(format!(
                "iterator returned a key never written: {:02x?}",
                &key[..key.len().min(32)]
            )));
        };
        check_value(w, k, it.value(), "iterator")?;
        if present.get(&k).map(Vec::as_slice) != Some(it.value()) {
            return Err(Fail::Violation(format!(
                "iterator and get disagree on {}",
                String::from_utf8_lossy(key)
            )));
        }
        seen += 1;
        prev = Some(key.to_vec());
        it.next();
    }
    it.status()?;
    if seen != present.len() {
        return Err(Fail::Violation(format!(
            "iterator returned {seen} keys, point reads found {}",
            present.len()
        )));
    }
    Ok((lost, stale))
}

/// Whether the engine's info log, since its last open, mentions a loss.
fn loss_reported(engine: EngineKind, db_dir: &Path) -> bool {
    let (file, marker, phrases): (&str, &str, &[&str]) = match engine {
        EngineKind::Vmemkv => (
            "LOG",
            " open ",
            &["skipped", "the log ends there", "unusable", "removed"],
        ),
        EngineKind::RocksDb | EngineKind::BlobDb => (
            "LOG",
            "",
            &["Corruption", "corrupt", "dropping", "Skipping"],
        ),
        // No info log to read.
        EngineKind::Lmdb
        | EngineKind::Fjall
        | EngineKind::FjallBlob
        | EngineKind::Sparkey
        | EngineKind::Null => return false,
    };
    let Ok(text) = std::fs::read_to_string(db_dir.join(file)) else {
        return false;
    };
    let since = text.rfind(marker).map_or(&text[..], |i| &text[i..]);
    phrases.iter().any(|p| since.contains(p))
}

static PANICS: AtomicU64 = AtomicU64::new(0);
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());
static HOOK: Once = Once::new();

/// Installs (once) a panic hook that counts panics in every thread, so a
/// panic in an engine's background thread is caught too.
pub fn install_panic_counter() {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Test threads are named after their test; their assertion
            // failures are not engine panics. Engine threads are unnamed or
            // named `vmemkv-*`; cases run on `fault-case`.
            let name = std::thread::current().name().map(str::to_owned);
            let engine_side = name
                .as_deref()
                .is_none_or(|n| n == "fault-case" || n.starts_with("vmemkv"));
            if !engine_side {
                prev(info);
                return;
            }
            PANICS.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut m) = LAST_PANIC.lock() {
                *m = info.to_string();
            }
            prev(info);
        }));
    });
}

/// Panics seen so far in any thread, and the last one's message.
pub fn panics() -> (u64, String) {
    let msg = LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default();
    (PANICS.load(Ordering::SeqCst), msg)
}

/// Copies every regular file of `from` into `to` (created).
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for ent in std::fs::read_dir(from)? {
        let ent = ent?;
        if ent.file_type()?.is_file() {
            std::fs::copy(ent.path(), to.join(ent.file_name()))?;
        }
    }
    Ok(())
}

/// Opens the damaged database at `db_dir` and reads everything.
fn open_and_check(
    engine: EngineKind,
    db_dir: &Path,
    opts: &EngineOptions,
    w: &Workload,
    file: &str,
) -> Outcome {
    let names_file = |m: &str| m.contains(file) || m.contains(&*db_dir.to_string_lossy());
    let judge = |e: Error| match e {
        Error::Corruption(m) if names_file(&m) => Outcome::Error(format!("Corruption: {m}")),
        // A deleted file, or a damaged pointer to one (RocksDB's CURRENT
        // naming a MANIFEST that does not exist), is an I/O error.
        Error::IoError(m) if names_file(&m) => Outcome::Error(format!("IoError: {m}")),
        other => Outcome::Violation(format!(
            "error that is not Corruption/IoError naming the file: {other}"
        )),
    };
    let db = match vmemkv_compat::open(engine, db_dir, opts) {
        Ok(db) => db,
        Err(e) => return judge(e),
    };
    let res = read_everything(db.as_ref(), w);
    drop(db);
    match res {
        Ok((0, 0)) => Outcome::Clean,
        Ok((lost, stale)) => Outcome::Loss {
            lost,
            stale,
            reported: loss_reported(engine, db_dir),
        },
        Err(Fail::Error(e)) => judge(e),
        Err(Fail::Violation(m)) => Outcome::Violation(m),
    }
}

/// One injected case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Template index (for the report).
    pub template: usize,
    /// File damaged.
    pub file: String,
    /// Its kind.
    pub file_kind: &'static str,
    /// The fault.
    pub fault: Fault,
}

/// Copies the template, injects the fault, then opens and reads the copy on
/// its own thread under `catch_unwind`, giving up after [`CASE_TIMEOUT`].
pub fn run_case(
    engine: EngineKind,
    template: &Path,
    work: &Path,
    opts: &EngineOptions,
    w: &Workload,
    case: &Case,
) -> Outcome {
    install_panic_counter();
    let _ = std::fs::remove_dir_all(work);
    if let Err(e) = copy_dir(template, work) {
        return Outcome::Violation(format!("harness: copying the template: {e}"));
    }
    if let Err(e) = inject(&work.join(&case.file), &case.fault) {
        return Outcome::Violation(format!("harness: injecting {}: {e}", case.fault));
    }
    let (before, _) = panics();
    let (tx, rx) = mpsc::channel();
    let (dir, opts, w, file) = (
        work.to_path_buf(),
        opts.clone(),
        w.clone(),
        case.file.clone(),
    );
    let spawned = std::thread::Builder::new()
        .name("fault-case".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                open_and_check(engine, &dir, &opts, &w, &file)
            }));
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Outcome::Violation(format!("harness: spawning the case thread: {e}"));
    }
    let out = match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(o)) => o,
        Ok(Err(_)) => Outcome::Violation(format!("panic: {}", panics().1)),
        Err(_) => Outcome::Violation(format!("hang: no result after {CASE_TIMEOUT:?}")),
    };
    let (after, msg) = panics();
    if after != before && !matches!(out, Outcome::Violation(_)) {
        return Outcome::Violation(format!("panic in another thread: {msg}"));
    }
    let _ = std::fs::remove_dir_all(work);
    out
}

/// Outcome counts per (file kind, fault kind).
#[derive(Debug, Default, Clone)]
pub struct Table {
    /// Engine name.
    pub engine: String,
    /// Counts per row and class.
    pub rows: BTreeMap<(String, FaultKind), BTreeMap<Class, u64>>,
    /// Keys lost (missing or stale) over all loss cases.
    pub lost_keys: u64,
    /// Corruption errors whose message carries no offset.
    pub errors_without_offset: u64,
    /// Every violation, with its case.
    pub violations: Vec<String>,
    /// A few example errors per file kind, for the report.
    pub examples: BTreeMap<String, String>,
}

impl Table {
    /// Records one case.
    pub fn add(&mut self, case: &Case, out: &Outcome) {
        *self
            .rows
            .entry((case.file_kind.to_string(), case.fault.kind()))
            .or_default()
            .entry(out.class())
            .or_default() += 1;
        match out {
            Outcome::Loss { lost, stale, .. } => self.lost_keys += (lost + stale) as u64,
            Outcome::Error(m) => {
                if case.fault != Fault::Missing && !m.contains("offset") {
                    self.errors_without_offset += 1;
                }
                self.examples
                    .entry(format!("{} {}", case.file_kind, case.fault.kind()))
                    .or_insert_with(|| m.clone());
            }
            Outcome::Violation(m) => self.violations.push(format!(
                "template {} file {} ({}): {m}",
                case.template, case.file, case.fault
            )),
            Outcome::Clean => {}
        }
    }

    /// Total cases.
    pub fn total(&self) -> u64 {
        self.rows.values().flat_map(|r| r.values()).sum()
    }

    /// Total cases in `class`.
    pub fn count(&self, class: Class) -> u64 {
        self.rows.values().filter_map(|r| r.get(&class)).sum()
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fault injection on {}: {} cases, {} keys lost over all loss cases",
            self.engine,
            self.total(),
            self.lost_keys
        )?;
        writeln!(
            f,
            "| file kind | fault | clean | loss (reported) | loss (silent) | corruption error | violation |"
        )?;
        writeln!(f, "|---|---|---:|---:|---:|---:|---:|")?;
        for ((fk, fault), r) in &self.rows {
            let c = |cl| r.get(&cl).copied().unwrap_or(0);
            writeln!(
                f,
                "| {fk} | {fault} | {} | {} | {} | {} | {} |",
                c(Class::Clean),
                c(Class::LossReported),
                c(Class::LossSilent),
                c(Class::CorruptionError),
                c(Class::Violation)
            )?;
        }
        writeln!(
            f,
            "| **total** | | {} | {} | {} | {} | {} |",
            self.count(Class::Clean),
            self.count(Class::LossReported),
            self.count(Class::LossSilent),
            self.count(Class::CorruptionError),
            self.count(Class::Violation)
        )?;
        writeln!(
            f,
            "errors without an offset (fault not a deletion): {}",
            self.errors_without_offset
        )?;
        for (k, m) in &self.examples {
            writeln!(f, "example [{k}]: {m}")?;
        }
        for v in self.violations.iter().take(20) {
            writeln!(f, "VIOLATION: {v}")?;
        }
        if self.violations.len() > 20 {
            writeln!(f, "... and {} more violations", self.violations.len() - 20)?;
        }
        Ok(())
    }
}

/// A fault campaign: templates built once, then `cases` faults spread evenly
/// over file kinds and fault kinds.
pub struct Campaign {
    /// Engine under test.
    pub engine: EngineKind,
    /// Options for every open.
    pub opts: EngineOptions,
    /// Keys in each template.
    pub nkeys: usize,
    /// Operations per template.
    pub nops: usize,
    /// Cases to run.
    pub cases: usize,
    /// RNG seed.
    pub seed: u64,
    /// Scratch directory (templates and case copies).
    pub dir: PathBuf,
}

impl Campaign {
    /// Runs the campaign and returns its table.
    pub fn run(&self) -> Result<Table, String> {
        let templates = [
            Maintenance::None,
            Maintenance::Checkpoint,
            Maintenance::CheckpointDefragment,
        ];
        let mut built = Vec::new();
        for (i, &m) in templates.iter().enumerate() {
            let p = self.dir.join(format!("template{i}"));
            let w = build_template(
                self.engine,
                &p,
                &self.opts,
                self.nkeys,
                self.nops,
                m,
                self.seed.wrapping_add(i as u64),
            )?;
            // (kind, name) of every file the engine wrote, grouped by kind.
            let mut by_kind: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
            for ent in std::fs::read_dir(&p).map_err(|e| format!("listing {}: {e}", p.display()))? {
                let ent = ent.map_err(|e| format!("listing {}: {e}", p.display()))?;
                let name = ent.file_name().to_string_lossy().into_owned();
                if ent.file_type().map(|t| t.is_file()).unwrap_or(false) {
                    by_kind
                        .entry(file_kind(self.engine, &name))
                        .or_default()
                        .push(name);
                }
            }
            built.push((p, w, by_kind));
        }
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut table = Table {
            engine: self.engine.to_string(),
            ..Table::default()
        };
        for i in 0..self.cases {
            // A fresh path per case: a hung case keeps its copy open.
            let work = self.dir.join(format!("case{i}"));
            let t = i % built.len();
            let (tpath, w, by_kind) = &built[t];
            let kinds: Vec<&&'static str> = by_kind.keys().collect();
            let fault_kind = FaultKind::ALL[(i / built.len()) % FaultKind::ALL.len()];
            let fk = *kinds[(i / (built.len() * FaultKind::ALL.len())) % kinds.len()];
            let files = &by_kind[fk];
            let file = files[rng.random_range(0..files.len())].clone();
            let (len, data_len) = lengths(&tpath.join(&file))
                .map_err(|e| format!("reading {}: {e}", tpath.join(&file).display()))?;
            let case = Case {
                template: t,
                file,
                file_kind: fk,
                fault: random_fault(fault_kind, len, data_len, &mut rng),
            };
            let out = run_case(self.engine, tpath, &work, &self.opts, w, &case);
            table.add(&case, &out);
        }
        Ok(table)
    }
}
