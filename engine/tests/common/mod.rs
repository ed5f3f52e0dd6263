//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vmemkv::{Bounds, Db, Options};

/// Options for tests: small segments, no background thread unless asked.
pub fn opts() -> Options {
    Options::default().segment_size(1 << 20).background(false)
}

pub fn open(dir: &Path) -> Db {
    Db::open(dir, opts()).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
}

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// Every live entry, in order.
pub fn dump(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(Bounds::all());
    it.seek_to_first();
    let mut m = BTreeMap::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    if let Err(e) = it.status() {
        panic!("iterator error: {e}");
    }
    m
}

/// A deterministic value for key `i` and version `v`, of length `len`.
pub fn value(i: u64, v: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ v.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Puts keys `0..n`, each `value(i, v, len)`.
pub fn put_range(db: &Db, n: u64, v: u64, len: usize) {
    for i in 0..n {
        db.put(&key(i), &value(i, v, len))
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:015x}").into_bytes()
}

pub fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08x}.seg"))
}

/// Offsets of the valid-looking records of a segment file (walking the
/// headers from offset 0; each record is 48 + body, 16-aligned).
pub fn record_offsets(path: &Path) -> Vec<usize> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut off = 0;
    let mut out = Vec::new();
    while off + 48 <= b.len() {
        if b[off..off + 4] != *b"VMKV" {
            break;
        }
        let body =
            u32::from_le_bytes([b[off + 16], b[off + 17], b[off + 18], b[off + 19]]) as usize;
        // Seals (kind 3) and pads (kind 6) hold no data.
        if b[off + 4] == 3 || b[off + 4] == 6 {
            break;
        }
        out.push(off);
        off += (48 + body + 15) & !15;
    }
    out
}

pub fn flip_byte(path: &Path, off: usize) {
    let mut b = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    b[off] ^= 0x5a;
    std::fs::write(path, b).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

pub fn zero_range(path: &Path, off: usize, len: usize) {
    let mut b = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    b[off..off + len].fill(0);
    std::fs::write(path, b).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

pub fn info_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("LOG")).unwrap_or_default()
}

/// The whole log: segment files in id order, concatenated.
pub fn log_bytes(dir: &Path) -> Vec<u8> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    segs.iter()
        .flat_map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Rewrites `LOGEND` (design.md §11) to claim nothing was acknowledged
/// durable: the state a crash leaves before any sync, in which damage at
/// the end of the log is a write that never finished rather than a loss.
pub fn forget_log_end(dir: &Path, seg_size: u64) {
    let mut slot = [0u8; 64];
    slot[0..8].copy_from_slice(b"VMKVEND1");
    slot[8..16].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    slot[24..32].copy_from_slice(&seg_size.to_le_bytes());
    let crc = crc32c(&slot[..32]);
    slot[32..36].copy_from_slice(&crc.to_le_bytes());
    let mut file = vec![0u8; 4096];
    file[..64].copy_from_slice(&slot);
    std::fs::write(dir.join("LOGEND"), file).unwrap_or_else(|e| panic!("write LOGEND: {e}"));
}

/// crc32c (Castagnoli), bitwise: test code, independent of the engine's.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Asserts that opening `dir` fails with `Corruption` naming `file` and
/// the durable end (`LOGEND`): acknowledged data is gone.
pub fn assert_lost(dir: &Path, file: &str) {
    match Db::open(dir, opts()) {
        Err(vmemkv::Error::Corruption(m)) => {
            assert!(m.contains(file), "{m}");
        }
        other => panic!(
            "expected Corruption naming {file}, got {:?}",
            other.map(|_| ())
        ),
    }
}
