//! The commit path: checks a write, pays the throttle, takes its locks,
//! appends one log record (or an unlogged region's slot) and applies it to
//! T1, visible to readers all at once (`docs/design.md` §2, §8).

use std::sync::atomic::Ordering;

use crate::apply;
use crate::batch::{WriteBatch, OP_DELETE, OP_PUT};
use crate::error::{Error, Result};
use crate::options::MAX_KEY_SIZE;
use crate::state::{key_too_large, value_too_large, Inner};
use crate::t2::packed;
use crate::t2::record::Kind;

/// Put bodies up to this size are assembled on the stack (`Inner::put`).
const SMALL_BODY: usize = 128;

/// Per-write options (RocksDB's `WriteOptions`).
///
/// * `sync = false`: the write is in the shared mapping when the call
///   returns, so it survives a process crash (SIGKILL), not a power loss.
/// * `sync = true`: the covering log range is `msync`ed before the call
///   returns (group commit).
/// * `disable_wal = true` (with `sync = false`): as in RocksDB, the write
///   may be lost in a crash until it is flushed. Puts so written are packed
///   into one record per 4 MiB of values, whose keys are written when the
///   record is sealed: when full, by [`crate::Db::flush`], a checkpoint, close, or
///   any logged write (`docs/design.md` §2). Deletes are logged as usual.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Durable before returning.
    pub sync: bool,
    /// See the type's docs.
    pub disable_wal: bool,
}

impl WriteOptions {
    /// `sync = true`.
    pub fn sync() -> Self {
        WriteOptions {
            sync: true,
            disable_wal: false,
        }
    }
}

/// Which locks a write takes (see `stripes`).
enum Keys<'a> {
    /// One key's stripe, gate shared.
    One(&'a [u8]),
    /// As `One`, for a delete of that key, which is not logged when T1
    /// holds no live version of it (see `Inner::elide_delete`).
    Delete(&'a [u8]),
    /// The stripes of a batch's keys, gate shared.
    Batch(&'a WriteBatch),
    /// The gate exclusively (range deletes): nothing else is in flight.
    All,
}

/// A write registered with T1's visibility watermark (see `Inner::begin_write`).
/// Dropped, it ends the registration; it never waits, because it is dropped
/// with the gate and stripes held, and an unlogged put that registered may be
/// waiting for the gate. The caller waits for visibility after releasing
/// them ([`Inner::visible_after`]).
struct WriteGuard<'a> {
    inner: &'a Inner,
    ticket: Option<crate::t1::WriteTicket>,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            let log = &self.inner.log;
            self.inner.t1.versions().end_write(t, || log.tail_lsn());
        }
    }
}

impl Inner {
    /// Sets `key` to `value`.
    pub(crate) fn put(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(key)?;
        self.check_value(value)?;
        if self.unlogged_wanted(wo) && self.write_unlogged(&[(key, value)])? {
            return Ok(());
        }
        let mut h = [0u8; 9];
        h[0] = OP_PUT;
        h[1..5].copy_from_slice(&(key.len() as u32).to_le_bytes());
        h[5..9].copy_from_slice(&(value.len() as u32).to_le_bytes());
        let value_crc = crate::crc::crc32c(value);
        let crc = value_crc.to_le_bytes();
        // A small body is laid out here whole: one part to store, one
        // checksum pass, and T1 parses it from this buffer instead of from
        // the log's mapping (`commit`).
        let mut small = [0u8; SMALL_BODY];
        let len = h.len() + key.len() + crc.len() + value.len();
        if let Some(body) = small.get_mut(..len) {
            let mut at = 0;
            for p in [&h[..], key, &crc, value] {
                body[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            let body_crc = crate::crc::crc32c(body);
            return self.commit(wo, &[body], Some(body_crc), 1, Keys::One(key));
        }
        let body_crc = crate::t2::value_crc::body_crc(&[&h, key, &crc], value, value_crc);
        self.commit(
            wo,
            &[&h, key, &crc, value],
            Some(body_crc),
            1,
            Keys::One(key),
        )
    }

    /// Removes `key`.
    pub(crate) fn delete(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        self.check_key(key)?;
        let mut h = [0u8; 5];
        h[0] = OP_DELETE;
        h[1..5].copy_from_slice(&(key.len() as u32).to_le_bytes());
        self.commit(wo, &[&h, key], None, 1, Keys::Delete(key))
    }

    /// Applies `batch` atomically.
    pub(crate) fn write(&self, wo: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        if batch.max_key > MAX_KEY_SIZE {
            return Err(key_too_large(batch.max_key));
        }
        if batch.max_value > self.max_value {
            return Err(value_too_large(batch.max_value, self.max_value));
        }
        if !batch.has_range && self.unlogged_wanted(wo) {
            let puts = || {
                batch.iter().map_while(|op| match op {
                    Ok(crate::batch::BatchOp::Put { key, value, .. }) => Some((key, value)),
                    _ => None,
                })
            };
            if batch.count == 1 {
                if let Some(put) = puts().next() {
                    if self.write_unlogged(&[put])? {
                        return Ok(());
                    }
                }
            } else {
                let puts: Vec<(&[u8], &[u8])> = puts().collect();
                if puts.len() == batch.count as usize && self.write_unlogged(&puts)? {
                    return Ok(());
                }
            }
        }
        let keys = if batch.has_range {
            Keys::All
        } else {
            Keys::Batch(batch)
        };
        self.commit(wo, &[&batch.rep], None, batch.count, keys)
    }

    /// Makes every write so far durable, `disable_wal` puts included: their
    /// open region is sealed first.
    pub(crate) fn flush(&self) -> Result<()> {
        self.unlogged.seal(self)?;
        self.log.sync_to(self.log.tail_lsn())
    }

    /// Whether a write with `wo` goes into a region of unlogged puts.
    /// A sync write is logged: it asks for durability now.
    fn unlogged_wanted(&self, wo: &WriteOptions) -> bool {
        wo.disable_wal && !wo.sync && self.unlogged.wants()
    }

    /// `puts` as unlogged puts (`unlogged.rs`). The throttle is paid
    /// before the stripes are taken, as in `commit`.
    /// Returns false, having written nothing, when a snapshot is held: an
    /// unlogged put's seq comes from a region reserved earlier and could land
    /// below the snapshot's (`Versions::unlogged_enter`); the caller then
    /// takes the logged path.
    fn write_unlogged(&self, puts: &[(&[u8], &[u8])]) -> Result<bool> {
        if let Some(e) = self.bg_errors.take() {
            return Err(e);
        }
        let vs = self.t1.versions();
        if !vs.unlogged_enter() {
            return Ok(false);
        }
        let r = self.write_unlogged_entered(puts);
        vs.unlogged_leave();
        r.map(|()| true)
    }

    fn write_unlogged_entered(&self, puts: &[(&[u8], &[u8])]) -> Result<()> {
        self.throttle.pay(
            puts.iter()
                .map(|(k, v)| packed::cost(k.len(), v.len()))
                .sum(),
        );
        let seq = {
            let _stripes = self.stripes.many(puts.iter().map(|p| p.0));
            let _visible = self.begin_write();
            self.unlogged.write(self, puts)?
        };
        self.visible_after(seq);
        self.counters.writes.add(1);
        Ok(())
    }

    /// Appends one batch record and applies it to T1.
    /// `body_crc`: the crc32c of `parts` when the caller already has it.
    fn commit(
        &self,
        wo: &WriteOptions,
        parts: &[&[u8]],
        body_crc: Option<u32>,
        count: u32,
        keys: Keys<'_>,
    ) -> Result<()> {
        // A background failure nobody has heard of fails this write, which
        // is not applied (as RocksDB reports a background error).
        if let Some(e) = self.bg_errors.take() {
            return Err(e);
        }
        self.throttle.pay(parts.iter().map(|p| p.len()).sum());
        // `Err`: a delete that needed no record, with the seq of the
        // tombstone it found, if any (`elide_delete`).
        let done = 'locked: {
            let (_one, _many, _shared, _excl);
            match keys {
                Keys::One(k) | Keys::Delete(k) => {
                    _one = self.stripes.one(k);
                    _shared = self.gate.read();
                }
                Keys::Batch(b) => {
                    _many = self.stripes.many(b.iter().filter_map(|op| match op {
                        Ok(crate::batch::BatchOp::Put { key, .. })
                        | Ok(crate::batch::BatchOp::Delete { key }) => Some(key),
                        _ => None,
                    }));
                    _shared = self.gate.read();
                }
                Keys::All => _excl = self.gate.write(),
            }
            if let Keys::Delete(k) = keys {
                if let Some(tombstone) = self.elide_delete(wo, k) {
                    break 'locked Err(tombstone);
                }
            }
            self.unlogged
                .before_logged(self, wo.disable_wal && !wo.sync)?;
            // Readers see the batch once all of it is in T1 (design.md §8.1).
            let _visible = self.begin_write();
            let a = match body_crc {
                Some(c) => self
                    .log
                    .append_with_crc(Kind::Batch, count, None, 0, parts, c)?,
                None => self.log.append(Kind::Batch, count, None, 0, parts)?,
            };
            // A one-part body (every `write(batch)`) is parsed from the
            // caller's buffer: the same bytes, without reading the record
            // back through the mapping, which for a pwritten record costs a
            // page fault per new page.
            let body: &[u8] = match parts {
                [one] => one,
                _ => a
                    .seg
                    .bytes(a.body_off, parts.iter().map(|p| p.len()).sum())
                    .unwrap_or_default(),
            };
            let seg = &a.seg;
            let adjust = |id: u32, d: i64| {
                if id == seg.id {
                    seg.live.fetch_add(d, Ordering::Relaxed);
                } else {
                    self.adjust(id, d);
                }
            };
            apply::apply_batch(
                &self.t1,
                self.opts.inline_values,
                apply::BodyAt {
                    segment: a.seg.id,
                    off: a.body_off,
                    seq: a.lsn,
                },
                body,
                apply::Applier::Writer,
                &adjust,
            )
            .map_err(|e| Error::InvalidArgument(format!("write batch: {e}")))?;
            Ok((a.lsn, a.end_lsn, a.seg))
        };
        let (seq, end, seg) = match done {
            Ok(logged) => logged,
            Err(tombstone) => {
                if let Some(seq) = tombstone {
                    self.visible_after(seq);
                }
                self.counters.deletes_elided.add(1);
                return Ok(());
            }
        };
        self.visible_after(seq);
        if crate::t2::segment::through_mapping((end - seq) as usize) {
            // Outside the window other writers wait on (design.md §2).
            seg.populate_ahead(end as u32 as usize);
        }
        self.counters.writes.add(1);
        if wo.sync {
            self.log.sync_to(end)?;
        }
        Ok(())
    }

    /// With `key`'s stripe held: `Some` when a delete of `key` needs no
    /// record, because T1 holds no live version of it: `Some(None)` when it
    /// holds none at all, `Some(Some(seq))` for a tombstone, whose seq the
    /// caller waits to see visible, so that its own reads find the key
    /// gone. No write to the
    /// key is in flight (the stripe), so the delete changes nothing any
    /// reader or recovery could see: after a crash the log holds the
    /// earlier tombstone whenever it holds any write made after this call
    /// (a prefix, design.md §2). LMDB's delete of an absent key writes
    /// nothing either; a `sync` delete is logged all the same, since it
    /// promises that the removal is durable when it returns.
    fn elide_delete(&self, wo: &WriteOptions, key: &[u8]) -> Option<Option<u64>> {
        if wo.sync {
            return None;
        }
        match self.t1.get_entry(key) {
            None => Some(None),
            Some(e) if matches!(e.payload, crate::t1::Payload::Tombstone) => Some(Some(e.seq)),
            Some(_) => None,
        }
    }

    /// Registers a write with T1's visibility watermark until dropped.
    fn begin_write(&self) -> WriteGuard<'_> {
        let vs = self.t1.versions();
        WriteGuard {
            inner: self,
            ticket: Some(vs.begin_write(|| self.log.tail_lsn())),
        }
    }

    /// Read your writes: returns once the write with `seq` is visible, i.e.
    /// once the writes begun before it are applied too (a T1 insert each).
    /// Called with no lock held.
    fn visible_after(&self, seq: u64) {
        self.t1.versions().wait_visible(seq);
    }
}
