//! Applying log records to T1 — shared by the write path and recovery, so
//! that replay does exactly what the original write did — and the live-byte
//! accounting that drives defragment.

use crate::batch::{BatchIter, BatchOp, MalformedBatch};
use crate::error::{Error, Result};
use crate::index::{Entry, Locator, Payload, Upsert, T1};
use crate::stats::live_cost;
use crate::t2::record::{Header, HEADER_LEN};

/// Adjusts the live-byte counter of a segment.
pub(crate) type Adjust<'a> = &'a dyn Fn(u32, i64);

fn account(res: Upsert, key_len: usize, new: Option<(u32, usize)>, adjust: Adjust<'_>) {
    let added = |adjust: Adjust<'_>| {
        if let Some((seg, vlen)) = new {
            adjust(seg, live_cost(key_len, vlen));
        }
    };
    match res {
        Upsert::Stale => {}
        Upsert::Inserted | Upsert::Added => added(adjust),
        Upsert::Replaced(old) => {
            added(adjust);
            if let Payload::Stored(l) = old.payload {
                adjust(l.segment, -live_cost(key_len, l.len as usize));
            }
        }
    }
}

/// Who applies a record, which decides whether T1 must check it against
/// the versions below its append region (`T1::upsert_ordered`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Applier {
    /// A writer holding the stripes of its keys (or the gate exclusively):
    /// its seq is above every version of them in T1.
    Writer,
    /// Recovery's replay: a checkpoint may hold newer versions.
    Replay,
}

/// Upserts one entry and accounts for it.
pub(crate) fn upsert(
    t1: &T1,
    key: &[u8],
    seq: u64,
    payload: Payload,
    by: Applier,
    adjust: Adjust<'_>,
) -> Upsert {
    let new = match payload {
        Payload::Stored(l) => Some((l.segment, l.len as usize)),
        _ => None,
    };
    let entry = Entry { seq, payload };
    let r = match by {
        Applier::Writer => t1.upsert_ordered(key, entry),
        Applier::Replay => t1.upsert(key, entry),
    };
    account(r, key.len(), new, adjust);
    r
}

/// The payload of a put whose value bytes lie at `value_off` in `segment`.
pub(crate) fn put_payload(inline: bool, segment: u32, value_off: usize, value: &[u8]) -> Payload {
    if inline {
        if let Some(p) = Payload::inline(value) {
            return p;
        }
    }
    Payload::Stored(Locator {
        segment,
        offset: value_off as u32,
        len: value.len() as u32,
    })
}

/// Tombstones every live key in `[begin, end)` with `seq`. The caller holds
/// the writer gate exclusively at run time, so no older write can be
/// published after this and survive (replay would not let it).
pub(crate) fn delete_range(
    t1: &T1,
    begin: &[u8],
    end: &[u8],
    seq: u64,
    by: Applier,
    adjust: Adjust<'_>,
) {
    if begin >= end {
        return;
    }
    let mut keys = Vec::new();
    let mut c = t1.cursor();
    c.seek(begin);
    while c.valid() && c.key() < end {
        keys.push(c.key().to_vec());
        c.next();
    }
    drop(c);
    for k in keys {
        upsert(t1, &k, seq, Payload::Tombstone, by, adjust);
    }
}

/// Where a batch body lies in the log, and its seq.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyAt {
    pub segment: u32,
    /// Offset of the body in the segment.
    pub off: usize,
    pub seq: u64,
}

/// Applies a batch body that lies at `at`.
pub(crate) fn apply_batch(
    t1: &T1,
    inline: bool,
    at: BodyAt,
    body: &[u8],
    by: Applier,
    adjust: Adjust<'_>,
) -> std::result::Result<(), MalformedBatch> {
    let BodyAt {
        segment,
        off: body_off,
        seq,
    } = at;
    for op in BatchIter::over(body) {
        match op? {
            BatchOp::Put {
                key,
                value,
                value_offset,
            } => {
                let p = put_payload(inline, segment, body_off + value_offset, value);
                upsert(t1, key, seq, p, by, adjust);
            }
            BatchOp::Delete { key } => {
                upsert(t1, key, seq, Payload::Tombstone, by, adjust);
            }
            BatchOp::DeleteRange { begin, end } => delete_range(t1, begin, end, seq, by, adjust),
        }
    }
    Ok(())
}

/// The old locator a relocation record moved away from.
pub(crate) fn relocation_old(h: &Header) -> Locator {
    Locator {
        segment: (h.extra >> 32) as u32,
        offset: h.extra as u32,
        len: h
            .body_len
            .saturating_sub(h.count_or_key_len)
            .saturating_sub(crate::t2::value_crc::VALUE_CRC_LEN as u32),
    }
}

/// Points `key` (version `seq`) at its moved copy `new` if T1 still holds
/// it at `old`, moving its live bytes along; a write since (or, on replay,
/// a later record) makes it a no-op. Returns whether it moved.
pub(crate) fn relocate(
    t1: &T1,
    key: &[u8],
    seq: u64,
    old: Locator,
    new: Locator,
    adjust: Adjust<'_>,
) -> bool {
    let moved = t1.relocate(key, seq, old, new);
    if moved {
        let cost = live_cost(key.len(), old.len as usize);
        adjust(old.segment, -cost);
        adjust(new.segment, cost);
    }
    moved
}

/// Replays one record found by recovery.
pub(crate) fn replay_record(
    t1: &T1,
    inline: bool,
    seg: &crate::t2::segment::Segment,
    off: usize,
    h: &Header,
    body: &[u8],
    adjust: Adjust<'_>,
) -> Result<()> {
    let body_off = off + HEADER_LEN;
    let (seg_id, seg_path) = (seg.id, &seg.path);
    let directory = || {
        crate::t2::packed::of_record(h, body)
            .map(move |e| e.map_err(|e| Error::in_record(seg_path, off, e)))
    };
    match h.kind {
        crate::t2::record::Kind::Batch => {
            let at = BodyAt {
                segment: seg_id,
                off: body_off,
                seq: h.seq,
            };
            apply_batch(t1, inline, at, body, Applier::Replay, adjust)
                .map_err(|e| Error::in_record(seg_path, off, e))
        }
        crate::t2::record::Kind::Relocation => {
            let kl = h.count_or_key_len as usize;
            let key = body.get(..kl).unwrap_or_default();
            let old = relocation_old(h);
            let new = Locator {
                segment: seg_id,
                offset: (body_off + kl + crate::t2::value_crc::VALUE_CRC_LEN) as u32,
                len: old.len,
            };
            relocate(t1, key, h.seq, old, new, adjust);
            Ok(())
        }
        crate::t2::record::Kind::Packed => {
            for e in directory() {
                let e = e?;
                relocate(t1, e.key, e.seq, e.old, e.located(seg_id, body_off), adjust);
            }
            Ok(())
        }
        crate::t2::record::Kind::PackedPuts => {
            for e in directory() {
                let e = e?;
                let value = body
                    .get(e.value_off..e.value_off + e.old.len as usize)
                    .unwrap_or_default();
                let p = put_payload(inline, seg_id, body_off + e.value_off, value);
                upsert(t1, e.key, e.seq, p, Applier::Replay, adjust);
            }
            Ok(())
        }
        crate::t2::record::Kind::Seal | crate::t2::record::Kind::Pad => Ok(()),
    }
}
