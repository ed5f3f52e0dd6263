//! How far the acknowledged log reaches: the `LOGEND` file, and the count
//! of writes in flight that decides what it may claim.
//!
//! Recovery cannot tell an acknowledged record that was zeroed or cut off
//! from a write that never finished: both read back as a zero commit word.
//! `LOGEND` holds an LSN `E` below which every byte of the log is covered
//! by a complete, durable record (data, [`Kind::Pad`], or a seal), so
//! below `E` a zero word, a bad record or a missing segment is
//! `Corruption`, and only what lies at or after `E` may be treated as a
//! write in flight. It is stored after the data it covers is durable, at
//! every group-commit round, at open (after recovery) and at close.
//!
//! Layout (4096 bytes): two 64-byte slots at offsets 0 and 2048, written
//! alternately with `pwrite` + `fdatasync`, so that a torn write of one
//! slot leaves the other. A slot: `"VMKVEND1"`, generation (u64 LE), `E`
//! (u64 LE), the size of `E`'s segment (u64 LE), crc32c of those 32 bytes
//! (u32 LE), zeros. The valid slot with the higher generation wins.
//!
//! [`Kind::Pad`]: crate::t2::record::Kind::Pad

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};

use crate::files::LOGEND as NAME;
const MAGIC: &[u8; 8] = b"VMKVEND1";
const SLOTS: [u64; 2] = [0, 2048];
const FILE_LEN: u64 = 4096;
const SLOT_BODY: usize = 32;

/// What `LOGEND` claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// Every record below this LSN is complete and durable.
    pub lsn: u64,
    /// Size of the segment `lsn` points into, as it was created: a shorter
    /// file there was truncated.
    pub seg_size: u64,
}

/// The open `LOGEND` file.
pub struct DurableEnd {
    file: File,
    path: PathBuf,
    /// Generation and value of the last slot written.
    last: Mutex<(u64, End)>,
    /// `last.1.lsn`, readable without the mutex.
    lsn: AtomicU64,
}

fn encode(gen: u64, end: End) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&gen.to_le_bytes());
    b[16..24].copy_from_slice(&end.lsn.to_le_bytes());
    b[24..32].copy_from_slice(&end.seg_size.to_le_bytes());
    let crc = crate::crc::crc32c(&b[..SLOT_BODY]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Option<(u64, End)> {
    let u64_at =
        |i: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?)) };
    let crc = u32::from_le_bytes(b.get(32..36)?.try_into().ok()?);
    if b.get(0..8)? != MAGIC || crate::crc::crc32c(b.get(..SLOT_BODY)?) != crc {
        return None;
    }
    Some((
        u64_at(8)?,
        End {
            lsn: u64_at(16)?,
            seg_size: u64_at(24)?,
        },
    ))
}

impl DurableEnd {
    /// Creates `dir/LOGEND` for a new database (the caller fsyncs the
    /// directory).
    pub fn create(dir: &Path, end: End) -> Result<DurableEnd> {
        let path = dir.join(NAME);
        let file = crate::fsutil::open_file(
            &path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true),
            0,
            "log end",
        )?;
        file.set_len(FILE_LEN)
            .map_err(|e| Error::io(format!("sizing {}", path.display()), e))?;
        let d = DurableEnd {
            file,
            path,
            last: Mutex::new((0, end)),
            lsn: AtomicU64::new(0),
        };
        d.write_slot(1, end)?;
        *d.last.lock() = (1, end);
        d.lsn.store(end.lsn, Ordering::Release);
        Ok(d)
    }

    /// Opens `dir/LOGEND` and reads its claim; a file with no valid slot
    /// is `Corruption`.
    pub fn open(dir: &Path) -> Result<(DurableEnd, End)> {
        let path = dir.join(NAME);
        let file = crate::fsutil::open_file(
            &path,
            OpenOptions::new().read(true).write(true),
            0,
            "log end",
        )?;
        let mut best: Option<(u64, End)> = None;
        for at in SLOTS {
            let mut b = [0u8; 64];
            if file.read_exact_at(&mut b, at).is_err() {
                continue;
            }
            if let Some((g, e)) = decode(&b) {
                if best.is_none_or(|(bg, _)| g > bg) {
                    best = Some((g, e));
                }
            }
        }
        let Some((gen, end)) = best else {
            return Err(Error::Corruption(format!(
                "{}: no valid slot at offsets {} or {} (damaged or truncated); \
                 how far the acknowledged log reaches is unknown",
                path.display(),
                SLOTS[0],
                SLOTS[1]
            )));
        };
        Ok((
            DurableEnd {
                file,
                path,
                last: Mutex::new((gen, end)),
                lsn: AtomicU64::new(end.lsn),
            },
            end,
        ))
    }

    /// The LSN last stored.
    pub fn lsn(&self) -> u64 {
        self.lsn.load(Ordering::Acquire)
    }

    /// Stores `end` durably, unless it claims no more than what is stored.
    /// The caller has made everything below `end.lsn` durable first.
    pub fn store(&self, end: End) -> Result<()> {
        let mut last = self.last.lock();
        if end.lsn <= last.1.lsn {
            return Ok(());
        }
        let gen = last.0 + 1;
        self.write_slot(gen, end)?;
        *last = (gen, end);
        self.lsn.store(end.lsn, Ordering::Release);
        Ok(())
    }

    fn write_slot(&self, gen: u64, end: End) -> Result<()> {
        let at = SLOTS[(gen % 2) as usize];
        crate::failpoint::io_error("logend.write")
            .and_then(|()| self.file.write_all_at(&encode(gen, end), at))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| Error::io(format!("writing {} at offset {at}", self.path.display()), e))
    }
}

/// Writers between reserving log space and finishing their record, in two
/// epochs. A group-commit leader flips the epoch and waits for the old one
/// to drain: every reservation made before the flip is then complete, and
/// every one made after lies at or beyond the leader's target (the log's
/// tail only grows), so nothing below the target is still in flight.
#[derive(Default)]
pub struct InFlight {
    epoch: AtomicU64,
    /// Per epoch; every writer enters one, so its slots are per thread
    /// (`crate::sharded`): a ticket leaves the slot it entered, so no slot
    /// drops below 0 and a sum that reads 0 saw no writer inside.
    count: [crate::sharded::Sharded; 2],
}

/// A writer's place in an epoch; leaving it on drop.
pub struct Ticket<'a> {
    count: &'a AtomicU64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl InFlight {
    /// Enters the current epoch before reserving space.
    pub fn enter(&self) -> Ticket<'_> {
        let e = self.epoch.load(Ordering::SeqCst);
        let count = self.count[(e & 1) as usize].mine();
        count.fetch_add(1, Ordering::SeqCst);
        Ticket { count }
    }

    /// Returns once every writer that entered before this call has left.
    pub fn drain(&self) {
        let e = self.epoch.fetch_add(1, Ordering::SeqCst);
        let old = &self.count[(e & 1) as usize];
        let mut spins = 0u32;
        while old.sum(Ordering::SeqCst) != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_valid_slot_wins_and_a_damaged_file_is_corruption() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let e = |lsn| End {
            lsn,
            seg_size: 1 << 20,
        };
        let d = DurableEnd::create(dir.path(), e(0)).unwrap_or_else(|e| panic!("{e}"));
        for lsn in [100, 200, 150] {
            d.store(e(lsn)).unwrap_or_else(|e| panic!("{e}"));
        }
        drop(d);
        let (_, got) = DurableEnd::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, e(200), "a smaller claim never replaces a larger one");
        // A torn newest slot leaves the older one.
        let path = dir.path().join(NAME);
        let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        bytes[SLOTS[1] as usize + 17] ^= 1;
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let (_, got) = DurableEnd::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, e(100));
        bytes[3] ^= 1;
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        match DurableEnd::open(dir.path()) {
            Err(Error::Corruption(m)) => assert!(m.contains("LOGEND"), "{m}"),
            other => panic!("expected Corruption, got {:?}", other.map(|x| x.1)),
        }
    }

    #[test]
    fn drain_waits_for_writers_that_entered_before_it() {
        let f = std::sync::Arc::new(InFlight::default());
        let t = f.enter();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = {
            let (f, done) = (f.clone(), done.clone());
            std::thread::spawn(move || {
                f.drain();
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "drained with a writer inside");
        let later = f.enter(); // a writer of the new epoch does not hold it up
        drop(t);
        h.join().unwrap_or_else(|_| panic!("drain thread panicked"));
        assert!(done.load(Ordering::SeqCst));
        drop(later);
    }
}
