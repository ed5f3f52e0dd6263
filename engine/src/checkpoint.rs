//! Checkpoint files: the T1 snapshot (`CHECKPOINT-<id>.t1`) and the
//! `MANIFEST` that names it and the LSN it covers. Layouts are in
//! `docs/design.md`.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::fsutil::{create_file, sync_dir, write_atomic};
use crate::index::{Entry, Locator, Payload, T1};

const SNAP_MAGIC: &[u8; 8] = b"VMKVSNP1";
const SNAP_END: &[u8; 8] = b"VMKVEND1";
const MANIFEST_MAGIC: &str = "vmemkv-manifest 1";
const TAG_INLINE: u8 = 1;
const TAG_STORED: u8 = 2;

/// What the MANIFEST records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Checkpoint number (increasing).
    pub id: u64,
    /// Every record below this LSN is reflected in the snapshot.
    pub lsn: u64,
    /// Snapshot file name.
    pub snapshot: String,
    /// Snapshot length in bytes.
    pub snapshot_bytes: u64,
    /// crc32c of the snapshot's bytes before its trailing crc and magic.
    pub snapshot_crc: u32,
}

impl Manifest {
    fn body(&self) -> String {
        format!(
            "{MANIFEST_MAGIC}\ncheckpoint_id={}\nlsn={:016x}\nsnapshot={}\nsnapshot_bytes={}\nsnapshot_crc={:08x}\n",
            self.id, self.lsn, self.snapshot, self.snapshot_bytes, self.snapshot_crc
        )
    }

    /// Writes `dir/MANIFEST` atomically.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let body = self.body();
        let text = format!("{body}crc={:08x}\n", crate::crc::crc32c(body.as_bytes()));
        write_atomic(dir, crate::files::MANIFEST, text.as_bytes())
    }

    /// Reads and checks `dir/MANIFEST`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(crate::files::MANIFEST);
        let text = crate::fsutil::read_file(&path, "manifest")?;
        let bad = |what: &str| Error::Corruption(format!("{}: {what}", path.display()));
        let text = std::str::from_utf8(&text).map_err(|_| bad("not UTF-8"))?;
        let crc_at = text.rfind("crc=").ok_or_else(|| bad("no crc line"))?;
        let (body, crc_line) = text.split_at(crc_at);
        let want = u32::from_str_radix(crc_line.trim_start_matches("crc=").trim(), 16)
            .map_err(|_| bad("malformed crc line"))?;
        if crate::crc::crc32c(body.as_bytes()) != want {
            return Err(bad("checksum mismatch"));
        }
        let mut lines = body.lines();
        if lines.next() != Some(MANIFEST_MAGIC) {
            return Err(bad("unknown format line"));
        }
        let mut field = |name: &str| -> Result<String> {
            let line = lines
                .next()
                .ok_or_else(|| bad(&format!("missing {name}")))?;
            line.strip_prefix(name)
                .and_then(|r| r.strip_prefix('='))
                .map(str::to_owned)
                .ok_or_else(|| bad(&format!("expected {name}, found '{line}'")))
        };
        let id = field("checkpoint_id")?;
        let lsn = field("lsn")?;
        let snapshot = field("snapshot")?;
        let bytes = field("snapshot_bytes")?;
        let crc = field("snapshot_crc")?;
        Ok(Manifest {
            id: id.parse().map_err(|_| bad("malformed checkpoint_id"))?,
            lsn: u64::from_str_radix(&lsn, 16).map_err(|_| bad("malformed lsn"))?,
            snapshot,
            snapshot_bytes: bytes.parse().map_err(|_| bad("malformed snapshot_bytes"))?,
            snapshot_crc: u32::from_str_radix(&crc, 16)
                .map_err(|_| bad("malformed snapshot_crc"))?,
        })
    }
}

/// A writer that checksums what it writes.
struct CrcWriter<W: Write> {
    inner: W,
    crc: u32,
    bytes: u64,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc = crate::crc::crc32c_append(self.crc, b);
        self.bytes += b.len() as u64;
        self.inner.write_all(b)
    }
}

/// Result of writing a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotInfo {
    /// File length.
    pub bytes: u64,
    /// Checksum recorded in the manifest.
    pub crc: u32,
    /// Entries written.
    pub entries: u64,
}

/// Writes every live T1 entry to `dir/name` (temp file, fsync, rename,
/// directory fsync). Concurrent writers may run: entries newer than `lsn`
/// may or may not be included, which replay from `lsn` resolves by seq.
pub fn write_snapshot(dir: &Path, name: &str, lsn: u64, t1: &T1) -> Result<SnapshotInfo> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let io = |e| Error::io(format!("writing snapshot {}", tmp.display()), e);
    let file = create_file(&tmp)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: 0,
        bytes: 0,
    };
    w.put(SNAP_MAGIC).map_err(io)?;
    w.put(&lsn.to_le_bytes()).map_err(io)?;
    let mut entries = 0u64;
    let mut cur = t1.cursor();
    cur.seek_to_first();
    while cur.valid() {
        let key = cur.key();
        let e = cur.entry();
        let mut rec = [0u8; 32];
        let n = match e.payload {
            Payload::Inline { len, bytes } => {
                rec[0] = TAG_INLINE;
                rec[1] = len;
                rec[2..10].copy_from_slice(&bytes);
                10
            }
            Payload::Stored(l) => {
                rec[0] = TAG_STORED;
                rec[1..5].copy_from_slice(&l.segment.to_le_bytes());
                rec[5..9].copy_from_slice(&l.offset.to_le_bytes());
                rec[9..13].copy_from_slice(&l.len.to_le_bytes());
                13
            }
            Payload::Tombstone => {
                cur.next();
                continue;
            }
        };
        w.put(&(key.len() as u32).to_le_bytes()).map_err(io)?;
        w.put(key).map_err(io)?;
        w.put(&e.seq.to_le_bytes()).map_err(io)?;
        w.put(&rec[..n]).map_err(io)?;
        entries += 1;
        cur.next();
    }
    w.put(&entries.to_le_bytes()).map_err(io)?;
    let crc = w.crc;
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes()).map_err(io)?;
    inner.write_all(SNAP_END).map_err(io)?;
    let file = inner.into_inner().map_err(|e| io(e.into_error()))?;
    crate::failpoint::io_error("snapshot.sync")
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, &dst).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", tmp.display(), dst.display()),
            e,
        )
    })?;
    sync_dir(dir)?;
    Ok(SnapshotInfo {
        bytes: w.bytes + 12,
        crc,
        entries,
    })
}

struct CrcReader<R: Read> {
    inner: R,
    crc: u32,
    pos: u64,
}

impl<R: Read> CrcReader<R> {
    fn take(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_exact(buf)?;
        self.crc = crate::crc::crc32c_append(self.crc, buf);
        self.pos += buf.len() as u64;
        Ok(())
    }
}

/// Loads a snapshot named by `m` into `t1` (which must be empty: the
/// entries are bulk-loaded into sorted regions), calling `on_entry` for each
/// entry (the caller accounts live bytes and checks locators). Any mismatch
/// is a `Corruption` naming the file and offset.
pub fn load_snapshot(
    dir: &Path,
    m: &Manifest,
    t1: &T1,
    mut on_entry: impl FnMut(&[u8], &Entry) -> Result<()>,
) -> Result<u64> {
    let path = dir.join(&m.snapshot);
    // The MANIFEST promises this file: its absence is damage, not an I/O
    // failure (design.md §4 step 2).
    if let Err(e) = std::fs::symlink_metadata(&path) {
        if e.kind() == std::io::ErrorKind::NotFound {
            return Err(Error::Corruption(format!(
                "{}: the snapshot the MANIFEST names is missing",
                path.display()
            )));
        }
    }
    let f = crate::fsutil::open_file(&path, std::fs::OpenOptions::new().read(true), 0, "snapshot")?;
    let len = f
        .metadata()
        .map_err(|e| Error::io(format!("stat of {}", path.display()), e))?
        .len();
    let corrupt = |off: u64, what: &str| {
        Error::Corruption(format!("{} offset {off}: {what}", path.display()))
    };
    if len != m.snapshot_bytes {
        return Err(corrupt(
            len,
            &format!("file is {len} bytes, MANIFEST says {}", m.snapshot_bytes),
        ));
    }
    if len < 36 {
        return Err(corrupt(0, "too short for a snapshot"));
    }
    let body_end = len - 20; // entries end where the count field starts
    let mut r = CrcReader {
        inner: BufReader::with_capacity(1 << 20, f),
        crc: 0,
        pos: 0,
    };
    let trunc = |pos: u64| move |_e: std::io::Error| corrupt(pos, "unexpected end of file");
    let mut head = [0u8; 16];
    r.take(&mut head).map_err(trunc(0))?;
    if &head[..8] != SNAP_MAGIC {
        return Err(corrupt(0, "bad magic"));
    }
    let mut lsn8 = [0u8; 8];
    lsn8.copy_from_slice(&head[8..16]);
    if u64::from_le_bytes(lsn8) != m.lsn {
        return Err(corrupt(8, "LSN differs from the MANIFEST's"));
    }
    let mut entries = 0u64;
    let mut key = Vec::new();
    // Entries arrive in key order: build T1's sorted regions directly.
    let mut loader = t1.bulk_loader();
    while r.pos < body_end {
        let at = r.pos;
        let mut b4 = [0u8; 4];
        r.take(&mut b4).map_err(trunc(at))?;
        let kl = u32::from_le_bytes(b4) as usize;
        if kl > crate::options::MAX_KEY_SIZE || at + 4 + kl as u64 > body_end {
            return Err(corrupt(at, &format!("key length {kl} out of range")));
        }
        key.resize(kl, 0);
        r.take(&mut key).map_err(trunc(at))?;
        let mut b9 = [0u8; 9];
        r.take(&mut b9).map_err(trunc(at))?;
        let mut s8 = [0u8; 8];
        s8.copy_from_slice(&b9[..8]);
        let seq = u64::from_le_bytes(s8);
        let payload = match b9[8] {
            TAG_INLINE => {
                let mut b = [0u8; 9];
                r.take(&mut b).map_err(trunc(at))?;
                if b[0] as usize > crate::index::INLINE_MAX {
                    return Err(corrupt(at, "inline length out of range"));
                }
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&b[1..9]);
                Payload::Inline { len: b[0], bytes }
            }
            TAG_STORED => {
                let mut b = [0u8; 12];
                r.take(&mut b).map_err(trunc(at))?;
                let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                Payload::Stored(Locator {
                    segment: u(0),
                    offset: u(4),
                    len: u(8),
                })
            }
            t => return Err(corrupt(at, &format!("unknown payload tag {t}"))),
        };
        let e = Entry { seq, payload };
        on_entry(&key, &e)?;
        loader
            .push(&key, &e)
            .map_err(|_| corrupt(at, "key not above the previous one (entries out of order)"))?;
        entries += 1;
    }
    let mut count = [0u8; 8];
    r.take(&mut count).map_err(trunc(body_end))?;
    let crc = r.crc;
    let mut tail = [0u8; 12];
    r.inner.read_exact(&mut tail).map_err(trunc(body_end + 8))?;
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if crc != stored || stored != m.snapshot_crc {
        return Err(corrupt(body_end + 8, "checksum mismatch"));
    }
    if &tail[4..12] != SNAP_END || u64::from_le_bytes(count) != entries {
        return Err(corrupt(body_end, "bad trailer"));
    }
    // Published only once the whole file checked out; on any error above the
    // caller discards this T1 anyway.
    loader.finish();
    Ok(entries)
}
