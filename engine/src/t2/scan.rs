//! Reading records back: validation of one record, search for the next
//! valid one, and the recovery scan with its two outcomes past the damage:
//! below `LOGEND` corruption reported, past it the log ended there
//! (point-in-time recovery).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::t2::record::{align_up, lsn, record_len, Header, Kind, ALIGN, HEADER_LEN, MAGIC};
use crate::t2::segment::Segment;

/// A valid record found in a segment.
#[derive(Debug, Clone, Copy)]
pub struct Found {
    /// Decoded header.
    pub header: Header,
    /// Offset of the header.
    pub off: usize,
    /// On-disk length including padding.
    pub len: usize,
}

/// Validates the record at `off`: header checksum, self-identifying LSN,
/// bounds, body checksum.
pub fn validate_at(seg: &Segment, off: usize) -> Option<Found> {
    let h = Header::decode(seg.bytes(off, HEADER_LEN)?)?;
    if h.lsn != lsn(seg.id, u32::try_from(off).ok()?) {
        return None;
    }
    let body = seg.bytes(off + HEADER_LEN, h.body_len as usize)?;
    if h.kind != Kind::Pad && crate::crc::crc32c(body) != h.body_crc {
        return None;
    }
    if h.kind == Kind::Relocation && h.count_or_key_len > h.body_len {
        return None;
    }
    if matches!(h.kind, Kind::Packed | Kind::PackedPuts) && h.extra > u64::from(h.body_len) {
        return None;
    }
    Some(Found {
        header: h,
        off,
        len: record_len(h.body_len as usize),
    })
}

/// The body of a validated record.
pub fn body<'a>(seg: &'a Segment, f: &Found) -> &'a [u8] {
    seg.bytes(f.off + HEADER_LEN, f.header.body_len as usize)
        .unwrap_or_default()
}

/// The first valid record at or after `from`.
pub fn find_next_valid(seg: &Segment, from: usize) -> Option<Found> {
    let mut off = align_up(from);
    while off + HEADER_LEN <= seg.size() {
        let w = Header::commit_word_of(seg.bytes(off, 8)?);
        if w as u32 == MAGIC {
            if let Some(f) = validate_at(seg, off) {
                return Some(f);
            }
        }
        off += ALIGN;
    }
    None
}

/// Iterates the valid records of a sealed or quiescent segment from `from`,
/// skipping holes (zero commit words) and stopping at the first invalid
/// non-zero record. Used by defragment, which only reads what recovery or
/// the running log already proved valid.
pub fn records(seg: &Segment, from: usize) -> impl Iterator<Item = Found> + '_ {
    let mut off = from;
    std::iter::from_fn(move || {
        let end = seg.used();
        if off + HEADER_LEN > end {
            return None;
        }
        let f = match validate_at(seg, off) {
            Some(f) => f,
            None => {
                let w = Header::commit_word_of(seg.bytes(off, 8)?);
                if w != 0 {
                    return None;
                }
                let f = find_next_valid(seg, off + ALIGN)?;
                if f.off >= end {
                    return None;
                }
                f
            }
        };
        off = f.off + f.len;
        Some(f)
    })
}

/// The recovery scan asks for this much of the log ahead of where it
/// reads, in one advice per half of it.
const REPLAY_AHEAD: usize = 8 << 20;

/// What the recovery scan did, for the info log.
#[derive(Debug, Default, Clone)]
pub struct ScanReport {
    /// Records applied.
    pub records: u64,
    /// Bytes of records applied.
    pub bytes: u64,
    /// Where the log was ended past `LOGEND`: (segment, offset, bytes
    /// cleared, why).
    pub truncated: Option<(u32, usize, usize, Ended)>,
    /// Segments after the end of the recovered log, to be removed.
    pub removed_segments: Vec<u32>,
    /// LSN just past the last valid record.
    pub end: u64,
}

/// Scans `segs` (contiguous ids, ascending) from offset `start` of the
/// first, calling `apply` on every valid record in log order. Sets each
/// segment's tail. Below `durable` (`LOGEND`'s claim) every byte must be
/// covered by a valid record: a zero word, a bad record or a missing seal
/// there is `Corruption`. At or after it, the first hole, invalid record or
/// missing seal ends the log, whatever lies after it (cleared, later
/// segments reported for removal): the state recovered is a prefix of the
/// log, as after a power cut only a prefix is known to have been written.
pub fn recover(
    segs: &[Arc<Segment>],
    start: usize,
    durable: u64,
    mut apply: impl FnMut(&Segment, &Found, &[u8]) -> Result<()>,
) -> Result<ScanReport> {
    let mut rep = ScanReport::default();
    let Some(first) = segs.first() else {
        return Ok(rep);
    };
    rep.end = lsn(first.id, start as u32);
    let acked = |seg: &Segment, off: usize| lsn(seg.id, off as u32) < durable;
    let lost = |seg: &Segment, off: usize, what: &str| {
        let (ds, doff) = crate::t2::record::split_lsn(durable);
        Error::Corruption(format!(
            "{} offset {off}: {what}, below the durable end of the log \
             ({} offset {doff}, from LOGEND): acknowledged writes there are lost",
            seg.path.display(),
            crate::files::segment(ds)
        ))
    };
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let mut off = if i == 0 { start } else { 0 };
        let mut data_end = off;
        let mut advised = off;
        let mut sealed = false;
        while off + HEADER_LEN <= seg.size() {
            if off + REPLAY_AHEAD / 2 >= advised {
                // Mappings are MADV_RANDOM, so without this every page of
                // the replayed log was one synchronous 4 KiB read: a cold
                // open replaying 174 MB took 3.5-4.2 s against 0.2 s warm.
                seg.will_need(advised, REPLAY_AHEAD);
                advised += REPLAY_AHEAD;
            }
            if let Some(f) = validate_at(seg, off) {
                match f.header.kind {
                    Kind::Seal if last => {
                        let next = seg
                            .path
                            .with_file_name(crate::files::segment(f.header.extra as u32));
                        return Err(Error::Corruption(format!(
                            "{} offset {off}: sealed at a rollover to {}, which is missing; \
                             the writes logged there are lost",
                            seg.path.display(),
                            next.display()
                        )));
                    }
                    Kind::Seal => {
                        sealed = true;
                        break;
                    }
                    Kind::Pad => {}
                    _ => {
                        apply(seg, &f, body(seg, &f))?;
                        rep.records += 1;
                        rep.bytes += f.len as u64;
                    }
                }
                off += f.len;
                data_end = off;
                continue;
            }
            let word = seg
                .bytes(off, 8)
                .map(Header::commit_word_of)
                .unwrap_or_default();
            if word == 0 {
                match find_next_valid(seg, off + ALIGN) {
                    Some(f) => {
                        let gap = f.off - off;
                        // Less than a header before the seal: the end of
                        // a segment no record fitted.
                        if f.header.kind == Kind::Seal && gap < HEADER_LEN {
                            off = f.off;
                            continue;
                        }
                        if acked(seg, off) {
                            return Err(lost(seg, off, &format!("{gap} zeroed bytes")));
                        }
                        // Past LOGEND, a hole ends the log (point-in-time
                        // recovery): after a kill it is a write in flight,
                        // and no acknowledged write lies beyond one (a
                        // write returns once every earlier record is
                        // complete); after a power cut it is a page that
                        // never reached the disk, and the records after
                        // it must go too, or the state is no prefix.
                        return truncate_at(segs, i, off, rep, Ended::Hole);
                    }
                    None => break,
                }
            }
            // A committed-looking but invalid record: below LOGEND, lost
            // acknowledged writes; past it, a record torn by a crash (its
            // commit word reached the disk, not all of its body), which ends
            // the log whatever follows, as a hole does.
            if acked(seg, off) {
                return Err(lost(
                    seg,
                    off,
                    "invalid record (bad checksum, header or LSN)",
                ));
            }
            return truncate_at(segs, i, off, rep, Ended::Torn);
        }
        if last || !sealed {
            // Zeros shorter than a header before the seal slot are the end
            // of a segment no record fitted, not a lost record.
            let seal_at = crate::t2::record::seal_offset(seg.size());
            let reach = if seal_at.saturating_sub(data_end) < HEADER_LEN {
                seal_at.max(data_end)
            } else {
                data_end
            };
            if acked(seg, reach) {
                let what = if last {
                    "the log ends here".to_string()
                } else {
                    format!(
                        "no seal at offset {} (segment truncated or zeroed)",
                        crate::t2::record::seal_offset(seg.size())
                    )
                };
                return Err(lost(seg, data_end, &what));
            }
            if !last {
                // The seal never reached the disk (a power cut after a
                // rollover): the log ends here, and a later segment's
                // records, past LOGEND too, go with it.
                return truncate_at(segs, i, data_end, rep, Ended::Unsealed);
            }
            // Garbage of writes that never committed must not survive under
            // new records, or a later scan would mistake it for corruption.
            if data_end < seg.size() {
                seg.zero_range(data_end, seg.size() - data_end)?;
            }
            seg.tail
                .store(data_end as u64, std::sync::atomic::Ordering::Release);
            rep.end = lsn(seg.id, data_end as u32);
        } else {
            seg.tail
                .store(seg.size() as u64, std::sync::atomic::Ordering::Release);
        }
    }
    Ok(rep)
}

/// Why the recovered log ends before the data on disk does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// A zero commit word with records after it.
    Hole,
    /// An invalid record with a commit word.
    Torn,
    /// A segment without its seal, later segments present.
    Unsealed,
}

impl Ended {
    /// For the info log.
    pub fn describe(self) -> &'static str {
        match self {
            Ended::Hole => "hole (a write in flight, or pages a power cut lost)",
            Ended::Torn => "torn tail",
            Ended::Unsealed => "missing seal",
        }
    }
}

/// Ends the log at `off` of `segs[i]`: clears the rest of that segment and
/// reports the later ones for removal.
fn truncate_at(
    segs: &[Arc<Segment>],
    i: usize,
    off: usize,
    mut rep: ScanReport,
    why: Ended,
) -> Result<ScanReport> {
    let seg = &segs[i];
    if off < seg.size() {
        rep.truncated = Some((seg.id, off, seg.size() - off, why));
        seg.zero_range(off, seg.size() - off)?;
    }
    seg.tail
        .store(off as u64, std::sync::atomic::Ordering::Release);
    rep.end = lsn(seg.id, off as u32);
    rep.removed_segments = segs[i + 1..].iter().map(|s| s.id).collect();
    Ok(rep)
}
