//! Moving live values to the log's tail, for defragment and the key-order
//! pass. Values are gathered into packed records (`t2/packed.rs`) of up to
//! [`PACK_MAX_BODY`] bytes, so moved values lie back to back without a
//! header and key between every two; T1 is pointed at a value's new copy
//! only once its record is in the log, and only if T1 still points where
//! the value was read (a concurrent overwrite wins).

use std::sync::Arc;

use super::DefragReport;
use crate::error::{Error, Result};
use crate::index::{Entry, Locator, Payload};
use crate::state::Inner;
use crate::t2::packed::{self, Builder};
use crate::t2::record::Kind;
use crate::t2::segment::Segment;

/// Largest packed body. Every record's directory (~150 KB for 1 MiB of
/// 512-byte values with 64-byte keys) sits between its values and the next
/// record's, so a scan crossing it issues a second read: with 1 MiB bodies
/// that was one 100-key range in twenty, 0.77 extra reads per op of the
/// issue #6 MultiScan shape; at 4 MiB it is one in eighty.
const PACK_MAX_BODY: usize = 4 << 20;
/// A record is cut to fit the active segment's tail rather than roll the
/// log over and leave the tail empty (half a 4 MiB record per 64 MiB
/// segment on average), unless less than this is left.
const MIN_FIT: usize = 64 << 10;

/// Gathers moved values and writes them as packed records.
pub(crate) struct Mover<'a> {
    inner: &'a Inner,
    packed: Builder,
    limit: usize,
    /// Body bytes the record being gathered may reach: `limit`, or less
    /// to fit the active segment's tail (set when the record starts).
    target: usize,
    /// The segment of the last value read, reused while values share one.
    seg: Option<Arc<Segment>>,
}

impl<'a> Mover<'a> {
    pub(crate) fn new(inner: &'a Inner) -> Mover<'a> {
        Mover {
            inner,
            packed: Builder::default(),
            limit: PACK_MAX_BODY.min(inner.log.max_body() / 8).max(1),
            target: 0,
            seg: None,
        }
    }

    /// Moves the value T1's entry `e` for `key` points at (`l`).
    pub(crate) fn move_indexed(
        &mut self,
        key: &[u8],
        l: Locator,
        e: Entry,
        rep: &mut DefragReport,
    ) -> Result<()> {
        if self.seg.as_ref().map(|s| s.id) != Some(l.segment) {
            self.seg = self.inner.log.segment(l.segment);
        }
        let Some(seg) = self.seg.clone() else {
            return Ok(());
        };
        match seg.bytes(l.offset as usize, l.len as usize) {
            Some(value) => self.push(key, value, &seg, l.offset as usize, e, rep),
            None => Ok(()),
        }
    }

    /// Moves `value`, found at `off` in `seg` by a walk of its records, if
    /// T1 still points there for `key`.
    pub(crate) fn move_if_live(
        &mut self,
        key: &[u8],
        value: &[u8],
        seg: &Segment,
        off: usize,
        rep: &mut DefragReport,
    ) -> Result<()> {
        match self.inner.t1.get(key) {
            Some(e) => self.push(key, value, seg, off, e, rep),
            None => Ok(()),
        }
    }

    fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        seg: &Segment,
        off: usize,
        e: Entry,
        rep: &mut DefragReport,
    ) -> Result<()> {
        let Payload::Stored(old) = e.payload else {
            return Ok(());
        };
        if old.segment != seg.id || old.offset as usize != off || old.len as usize != value.len() {
            return Ok(());
        }
        // Copying a damaged value would give it a fresh, valid checksum.
        let crc = crate::t2::value_crc::verify(seg, off, value)?;
        let more = packed::cost(key.len(), value.len());
        if !self.packed.is_empty() && self.packed.body_len() + more > self.target {
            self.flush(rep)?;
        }
        if self.packed.is_empty() {
            // Writers may take some of the tail meanwhile; the record then
            // rolls the log over, as it would have without the fit.
            let room = self.inner.log.room_for_body();
            self.target = if room >= MIN_FIT {
                self.limit.min(room)
            } else {
                self.limit
            };
        }
        self.packed.push(key, e.seq, old, crc, value);
        Ok(())
    }

    /// Writes what was gathered and points T1 at the new copies. Must run
    /// before the caller checkpoints: values still gathered have not moved.
    pub(crate) fn flush(&mut self, rep: &mut DefragReport) -> Result<()> {
        if self.packed.is_empty() {
            return Ok(());
        }
        let inner = self.inner;
        let b = &self.packed;
        // Under the gate: checkpoint_and_retire drains it to see every
        // segment's live bytes final.
        let _g = inner.gate.read();
        // Registered as a write while it appends, so that a write after it
        // in the log returns only once this record is complete: recovery
        // ends the log at the first hole past LOGEND, and no acknowledged
        // write may lie beyond one.
        let vs = inner.t1.versions();
        let ticket = vs.begin_write(|| inner.log.tail_lsn());
        let a = inner.log.append_with_crc(
            Kind::Packed,
            b.count(),
            Some(b.max_seq()),
            b.values().len() as u64,
            &[b.values(), b.dir()],
            b.body_crc(),
        );
        vs.end_write(ticket, || inner.log.tail_lsn());
        let a = a?;
        if inner.opts.sorted_run_bytes > 0 {
            let start = a.body_off as u32;
            let end = start + b.values().len() as u32;
            let record = crate::t2::record::record_len(b.values().len() + b.dir().len());
            inner.packed.add(a.seg.id, start, end, record as u64);
        }
        for e in packed::entries(b.count(), b.values().len(), b.dir()) {
            let e = e.map_err(|e| {
                Error::Corruption(format!("internal: a packed body built in memory has a {e}"))
            })?;
            crate::failpoint::hit("defragment.relocated");
            let new = e.located(a.seg.id, a.body_off);
            if crate::apply::relocate(&inner.t1, e.key, e.seq, e.old, new, &|id, d| {
                inner.adjust(id, d)
            }) {
                rep.moved_values += 1;
                rep.moved_bytes += (e.key.len() + e.old.len as usize) as u64;
            }
        }
        self.packed.clear();
        Ok(())
    }
}
