//! Point reads: T1 names the value's place, T2's mapping (or a `pread`,
//! for large values) supplies its bytes, checked against their stored
//! checksum.

use crate::error::{Error, Result};
use crate::index::Payload;
use crate::state::Inner;

impl Inner {
    /// Reads `key` as of `at` (a registered seq), or as of now.
    pub(crate) fn get_into(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
        verify: bool,
        at: Option<u64>,
    ) -> Result<bool> {
        out.clear();
        // A value relocated by defragment may have its old segment retired
        // between the index lookup and the read; the retry then finds the
        // new location. Two misses in a row cannot be a race.
        for _ in 0..3 {
            let e = match at {
                Some(at) => self.t1.get_at(key, at),
                None => self.t1.get_visible(key),
            };
            let Some(e) = e else {
                return Ok(false);
            };
            match e.payload {
                Payload::Inline { .. } => {
                    out.extend_from_slice(e.payload.inline_bytes().unwrap_or_default());
                    return Ok(true);
                }
                Payload::Tombstone => return Ok(false),
                Payload::Stored(l) => {
                    let (off, len) = (l.offset as usize, l.len as usize);
                    let pread = len >= self.opts.pread_min_bytes;
                    let res = self.log.with_segment(l.segment, |seg| {
                        if pread {
                            seg.pread_into(off, len, out)?;
                            if verify {
                                if let Err(e) = crate::t2::value_crc::verify(seg, off, out) {
                                    out.clear();
                                    return Err(e);
                                }
                            }
                            return Ok(());
                        }
                        let b = seg.bytes(off, len).ok_or_else(|| {
                            Error::Corruption(format!(
                                "{} offset {off} (+{len}): value lies outside the file",
                                seg.path.display()
                            ))
                        })?;
                        if verify {
                            let once = self.log.verify_once();
                            crate::t2::value_crc::verify_mapped(seg, off, b, once)?;
                        }
                        out.extend_from_slice(b);
                        Ok(())
                    });
                    match res {
                        Some(r) => return r.map(|()| true),
                        // Relocated and retired meanwhile: look up again.
                        None => continue,
                    }
                }
            }
        }
        Err(Error::Corruption(format!(
            "the index points at a removed segment for a key of {} bytes",
            key.len()
        )))
    }
}
