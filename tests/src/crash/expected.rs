//! The expected-state file, kept like db_stress's: a shared mapping that the
//! child updates around every operation, so that after a SIGKILL the parent
//! knows what was acknowledged and what was in flight.
//!
//! Page-cache contents survive SIGKILL, so the mapping needs no fsync: the
//! file only has to outlive the child process, not the machine.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

const MAGIC: u64 = 0x5653_4b56_4352_5348; // "VSKVCRSH"
const HEADER_WORDS: usize = 512; // 4 KiB header
/// Most keys one in-flight batch may touch (header space).
pub const MAX_BATCH: usize = 256;

// Header word indices.
const W_MAGIC: usize = 0;
const W_NKEYS: usize = 1;
const W_NEXT_SEQ: usize = 2;
const W_BATCH_SEQ: usize = 3; // 0 = no batch in flight
const W_BATCH_LEN: usize = 4;
const W_BATCH_KEYS: usize = 8; // MAX_BATCH words

/// A key's state word: 0 = never written; otherwise `seq << 1 | deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State(pub u64);

impl State {
    /// Never written.
    pub const NONE: State = State(0);

    /// A put with this sequence number.
    pub fn put(seq: u64) -> State {
        State(seq << 1)
    }

    /// A delete with this sequence number.
    pub fn delete(seq: u64) -> State {
        State((seq << 1) | 1)
    }

    /// Whether anything was recorded.
    pub fn is_set(self) -> bool {
        self.0 != 0
    }

    /// Whether the recorded operation removes the key.
    pub fn is_delete(self) -> bool {
        self.0 & 1 == 1
    }

    /// The sequence number recorded.
    pub fn seq(self) -> u64 {
        self.0 >> 1
    }

    /// Whether a reader may find the key absent in this state.
    pub fn allows_absent(self) -> bool {
        !self.is_set() || self.is_delete()
    }
}

/// The shared expected-state table.
pub struct Expected {
    map: MmapMut,
    nkeys: usize,
}

impl Expected {
    /// Opens or creates the file for `nkeys` keys.
    pub fn open(path: &Path, nkeys: usize) -> std::io::Result<Expected> {
        let len = ((HEADER_WORDS + 2 * nkeys) * 8) as u64;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.len() != len {
            file.set_len(len)?;
        }
        // SAFETY: the file is private to the crash harness (a temporary
        // directory it created); only the parent and its one child map it,
        // never at the same time as a writer, and every access goes through
        // the `AtomicU64` view below, so no torn or aliased plain accesses
        // occur while the mapping lives.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let e = Expected { map, nkeys };
        if e.word(W_MAGIC).load(Ordering::Relaxed) != MAGIC {
            for i in 0..HEADER_WORDS + 2 * nkeys {
                e.word(i).store(0, Ordering::Relaxed);
            }
            e.word(W_NKEYS).store(nkeys as u64, Ordering::Relaxed);
            e.word(W_NEXT_SEQ).store(1, Ordering::Relaxed);
            e.word(W_MAGIC).store(MAGIC, Ordering::Release);
        } else if e.word(W_NKEYS).load(Ordering::Relaxed) != nkeys as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: made for a different key count", path.display()),
            ));
        }
        Ok(e)
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        let words = self.map.len() / 8;
        let i = i.min(words.saturating_sub(1));
        let ptr = self.map.as_ptr() as *const AtomicU64;
        // SAFETY: the mapping is page-aligned and `i` is clamped to its
        // length in 8-byte words, so the pointer is in bounds and aligned;
        // AtomicU64 has the same layout as u64 and every access is atomic.
        unsafe { &*ptr.add(i) }
    }

    /// Number of keys tracked.
    pub fn nkeys(&self) -> usize {
        self.nkeys
    }

    /// Takes the next sequence number (unique across cycles).
    pub fn next_seq(&self) -> u64 {
        self.word(W_NEXT_SEQ).fetch_add(1, Ordering::AcqRel)
    }

    /// The next sequence number, without taking it.
    pub fn peek_seq(&self) -> u64 {
        self.word(W_NEXT_SEQ).load(Ordering::Acquire)
    }

    /// The last acknowledged state of key `k`.
    pub fn acked(&self, k: usize) -> State {
        State(self.word(HEADER_WORDS + 2 * k).load(Ordering::Acquire))
    }

    /// The in-flight state of key `k`, if an operation on it was under way.
    pub fn pending(&self, k: usize) -> State {
        State(self.word(HEADER_WORDS + 2 * k + 1).load(Ordering::Acquire))
    }

    /// Records that an operation on `k` is about to be issued.
    pub fn begin(&self, k: usize, s: State) {
        self.word(HEADER_WORDS + 2 * k + 1)
            .store(s.0, Ordering::Release);
    }

    /// Records that the operation on `k` was acknowledged.
    pub fn commit(&self, k: usize, s: State) {
        self.word(HEADER_WORDS + 2 * k)
            .store(s.0, Ordering::Release);
        self.word(HEADER_WORDS + 2 * k + 1)
            .store(0, Ordering::Release);
    }

    /// Sets a key's state after verification, clearing anything pending.
    pub fn resolve(&self, k: usize, s: State) {
        self.commit(k, s);
    }

    /// Records the keys of a batch about to be written.
    pub fn begin_batch(&self, seq: u64, keys: &[usize]) {
        let n = keys.len().min(MAX_BATCH);
        for (i, &k) in keys.iter().take(n).enumerate() {
            self.word(W_BATCH_KEYS + i)
                .store(k as u64, Ordering::Relaxed);
        }
        self.word(W_BATCH_LEN).store(n as u64, Ordering::Relaxed);
        self.word(W_BATCH_SEQ).store(seq, Ordering::Release);
    }

    /// Clears the in-flight batch record.
    pub fn end_batch(&self) {
        self.word(W_BATCH_SEQ).store(0, Ordering::Release);
    }

    /// The in-flight batch at the time of the crash: its sequence number and
    /// keys.
    pub fn batch_in_flight(&self) -> Option<(u64, Vec<usize>)> {
        let seq = self.word(W_BATCH_SEQ).load(Ordering::Acquire);
        if seq == 0 {
            return None;
        }
        let n = (self.word(W_BATCH_LEN).load(Ordering::Relaxed) as usize).min(MAX_BATCH);
        let keys = (0..n)
            .map(|i| self.word(W_BATCH_KEYS + i).load(Ordering::Relaxed) as usize)
            .collect();
        Some((seq, keys))
    }
}
