//! Puts made with `disable_wal`. RocksDB keeps them in its memtable, to be
//! lost in a crash until a flush. vmemkv packs them: the values go back to
//! back into a stretch of the log reserved ahead (a *region*), their keys
//! into a directory kept in memory, written with the record's header when
//! the region is sealed ([`Kind::PackedPuts`], a packed record's layout).
//! A key-order load thus lands as the key-order pass would have left it,
//! 516 bytes of log per 512-byte value instead of 640, and is written once.
//!
//! Visibility is unchanged: a value is in the mapping and in T1 when its
//! put returns. Durability is RocksDB's for unlogged writes: until its
//! region is sealed, a put is lost in a crash (recovery finds a zero commit
//! word: a hole, or the end of the log). A region is sealed when full, by
//! [`crate::Db::flush`], by every checkpoint, at close, and by any logged
//! write. A batch goes into one region whole, so a crash keeps all of it or
//! none.
//!
//! Ordering: T1 keeps the highest seq of a key, and an unlogged put's seq
//! is its value's position in the region, which was reserved before the
//! put. A logged write reserved while a region is open would get a higher
//! seq than unlogged puts made after it, which would then lose to it. So a
//! logged write seals the open region first, holding the writer gate
//! shared, and a region is opened only with the gate held exclusively: no
//! logged writer is then between its check and its reservation.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::index::Locator;
use crate::state::unlogged::{Region, Unlogged, MIN_REGION, REGION};
use crate::state::Inner;
use crate::t2::packed::{self, Directory};
use crate::t2::record::{lsn, record_len, Header, Kind, HEADER_LEN};

impl Unlogged {
    /// A logged write is about to reserve space; the caller holds the
    /// writer gate (see the module docs). `unlogged`: it was asked for
    /// without the WAL (and logged because no region is open), so it does
    /// not break the streak.
    pub(crate) fn before_logged(&self, inner: &Inner, unlogged: bool) -> Result<()> {
        if !unlogged && self.streak.load(Ordering::Relaxed) != 0 {
            self.streak.store(0, Ordering::Relaxed);
        }
        if self.open.load(Ordering::Acquire) {
            self.seal(inner)?;
        }
        Ok(())
    }

    /// Seals the open region, if any.
    pub(crate) fn seal(&self, inner: &Inner) -> Result<()> {
        self.seal_locked(inner, &mut self.cur.lock())
    }

    /// [`Self::seal`] with the region's mutex held. A seal that fails
    /// (EIO) leaves the region open, so the next one (a flush, a
    /// checkpoint, close) tries again: its puts were acknowledged, and a
    /// later `flush` returning `Ok` must mean they are durable.
    fn seal_locked(&self, inner: &Inner, cur: &mut Option<Region>) -> Result<()> {
        let Some(r) = cur.as_mut() else {
            return Ok(());
        };
        seal_region(inner, r)?;
        *cur = None;
        self.open.store(false, Ordering::Release);
        self.sealed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `puts` into the open region (opening one when there is none
    /// or the batch does not fit) and publishes them to T1. The caller
    /// holds the stripes of their keys, not the writer gate.
    /// Returns the highest seq it gave a put.
    pub(crate) fn write(&self, inner: &Inner, puts: &[(&[u8], &[u8])]) -> Result<u64> {
        let need: usize = puts
            .iter()
            .map(|(k, v)| packed::cost(k.len(), v.len()))
            .sum();
        let mut gate = inner.gate.read();
        loop {
            let mut cur = self.cur.lock();
            if let Some(r) = cur.as_mut() {
                if r.fits(need) {
                    let seg = r.seg.clone();
                    // Every value first, the directory after: a failed
                    // write leaves no entry of the batch behind.
                    let start = r.next_value();
                    let mut at = start;
                    let mut crcs = Vec::with_capacity(puts.len());
                    for (_, v) in puts {
                        let crc = crate::crc::crc32c(v);
                        if let Err(e) = seg.write_at(at, &[&crc.to_le_bytes(), v]) {
                            // Zero what may have landed, so the directory
                            // and the padding after it stay well formed.
                            let end = at + crate::t2::value_crc::VALUE_CRC_LEN + v.len();
                            let zeros = vec![0u8; end - start];
                            let _ = seg.write_at(start, &[&zeros]);
                            return Err(e);
                        }
                        crcs.push((crc, at));
                        at += crate::t2::value_crc::VALUE_CRC_LEN + v.len();
                    }
                    for ((k, v), &(crc, at)) in puts.iter().zip(&crcs) {
                        // Zero old locator: nothing moved.
                        let none = Locator {
                            segment: 0,
                            offset: 0,
                            len: 0,
                        };
                        r.dir.push(k, lsn(seg.id, at as u32), none, crc, v.len());
                    }
                    drop(cur);
                    let crc_len = crate::t2::value_crc::VALUE_CRC_LEN;
                    if puts
                        .iter()
                        .any(|(_, v)| crate::t2::segment::through_mapping(crc_len + v.len()))
                    {
                        // Some stored through the mapping: fault the next pages
                        // in now, outside the region's lock (design.md §2).
                        seg.populate_ahead(at);
                    }
                    let adjust = |id: u32, d: i64| {
                        if id == seg.id {
                            seg.live.fetch_add(d, Ordering::Relaxed);
                        } else {
                            inner.adjust(id, d);
                        }
                    };
                    let mut last = 0;
                    for ((k, v), &(_, at)) in puts.iter().zip(&crcs) {
                        last = lsn(seg.id, at as u32);
                        let value_off = at + crate::t2::value_crc::VALUE_CRC_LEN;
                        let p = crate::apply::put_payload(
                            inner.opts.inline_values,
                            seg.id,
                            value_off,
                            v,
                        );
                        crate::apply::upsert(
                            &inner.t1,
                            k,
                            lsn(seg.id, at as u32),
                            p,
                            crate::apply::Applier::Writer,
                            &adjust,
                        );
                    }
                    return Ok(last);
                }
                self.seal_locked(inner, &mut cur)?;
            }
            drop(cur);
            drop(gate);
            let w = inner.gate.write();
            {
                let mut cur = self.cur.lock();
                if cur.is_none() {
                    let min = record_len(need).max(MIN_REGION);
                    let (seg, off, len) = inner.log.reserve(min, REGION.max(min))?;
                    *cur = Some(Region {
                        seg,
                        off,
                        end: off + len,
                        dir: Directory::default(),
                    });
                    self.open.store(true, Ordering::Release);
                }
            }
            gate = w.downgrade();
        }
    }
}

/// Writes the region's directory and header. The unused end of the
/// reservation is given back to the log when nothing was reserved after
/// it, else it becomes zero padding inside the body. Safe to call again
/// after a failure: both writes land at the same offsets, and a
/// reservation already given back is not counted as padding.
fn seal_region(inner: &Inner, r: &mut Region) -> Result<()> {
    inner.log.check_poison()?;
    let sealed = write_seal(inner, r);
    if sealed.is_ok() {
        inner.log.reservation_done();
    }
    inner.log.poison_on(sealed)
}

fn write_seal(inner: &Inner, r: &mut Region) -> Result<()> {
    let seg = r.seg.clone();
    let dir_at = r.next_value();
    seg.write_at(dir_at, &[r.dir.bytes()])?;
    let exact = r.off + record_len(r.dir.body_len());
    let body_len = if inner.log.give_back(&seg, exact, r.end) {
        r.end = exact;
        r.dir.body_len()
    } else {
        r.end - r.off - HEADER_LEN
    };
    let mut body_crc = r.dir.body_crc();
    let mut pad = body_len - r.dir.body_len();
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    while pad > 0 {
        let n = pad.min(ZEROS.len());
        body_crc = crate::crc::crc32c_append(body_crc, &ZEROS[..n]);
        pad -= n;
    }
    let at = lsn(seg.id, r.off as u32);
    let header = Header {
        kind: Kind::PackedPuts,
        count_or_key_len: r.dir.count(),
        body_len: body_len as u32,
        body_crc,
        lsn: at,
        seq: r.dir.max_seq().max(at),
        extra: r.dir.values_len() as u64,
    };
    if !seg.write_record(r.off, &header, &[])? {
        return Err(crate::Error::InvalidArgument(format!(
            "internal: no room for a header at offset {} of {}",
            r.off,
            seg.path.display()
        )));
    }
    Ok(())
}
