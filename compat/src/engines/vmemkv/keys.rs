//! How the vmemkv adapter lays column families over the engine's one
//! ordered keyspace: every stored key starts with one byte, the family's
//! slot; the catalog of families lives outside the keyspace, in the
//! engine's application metadata file (`APPMETA`).
//!
//! ```text
//! stored key                      value
//! [slot] user key                 a value of the family in `slot` (1..=0xFE)
//! [0xFF] user key                 a value of `default`
//!
//! APPMETA blob: b"families-1", then per family: slot (u8), name length
//! (u8), name (UTF-8)
//! ```
//!
//! One keyspace keeps a batch across families one engine batch (one log
//! record, atomic by the engine's own protocol) and a snapshot one engine
//! snapshot. `default` sits at the top, so its cursors need only a lower
//! bound, and the engine's cursor steps forward with no bound compare
//! (`Iter::toward_bound_ok`). T1 stores each sorted region's common key
//! prefix once, so the byte that all of a region's keys share costs its
//! search nothing; that is also why the catalog is not kept under a slot of
//! its own: its keys would share a region with `default`'s first keys and
//! leave that region no common prefix.

use crate::error::{Error, Result};

/// The slot of the `default` family.
pub(super) const DEFAULT_SLOT: u8 = 0xFF;
/// The smallest and largest slots another family may take.
pub(super) const SLOTS: std::ops::RangeInclusive<u8> = 1..=0xFE;
/// The catalog blob's first bytes.
pub(super) const CATALOG_MAGIC: &[u8] = b"families-1";

/// Keys up to this length are prefixed on the stack.
const INLINE: usize = 128;

/// A user key with its slot byte in front, on the stack when short.
pub(super) struct Prefixed {
    inline: [u8; INLINE],
    len: usize,
    heap: Vec<u8>,
}

impl Prefixed {
    /// `[slot] ++ key`.
    #[inline]
    pub(super) fn new(slot: u8, key: &[u8]) -> Prefixed {
        let mut p = Prefixed {
            inline: [0; INLINE],
            len: key.len() + 1,
            heap: Vec::new(),
        };
        if p.len <= INLINE {
            p.inline[0] = slot;
            p.inline[1..p.len].copy_from_slice(key);
        } else {
            p.heap = prefixed(slot, key);
        }
        p
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[u8] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

/// `[slot] ++ key`, allocated.
pub(super) fn prefixed(slot: u8, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(key.len() + 1);
    v.push(slot);
    v.extend_from_slice(key);
    v
}

/// `prefixed` into a reused buffer.
pub(super) fn prefix_into(buf: &mut Vec<u8>, slot: u8, key: &[u8]) {
    buf.clear();
    buf.push(slot);
    buf.extend_from_slice(key);
}

/// The stored bounds of a family's user bounds: a missing lower bound is
/// the family's first key and a missing upper bound the next slot (none
/// for the top slot), so a cursor never leaves its family.
pub(super) fn bounds(
    slot: u8,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let lo = prefixed(slot, lower.unwrap_or_default());
    let hi = match (upper, slot.checked_add(1)) {
        (Some(u), _) => Some(prefixed(slot, u)),
        (None, next) => next.map(|n| vec![n]),
    };
    (lo, hi)
}

/// The stored range of a whole family, for `delete_range`.
pub(super) fn whole(slot: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![slot], vec![slot + 1])
}

/// The user key of a stored key of a family (the slot byte dropped).
#[inline]
pub(super) fn user_key(stored: &[u8]) -> &[u8] {
    stored.get(1..).unwrap_or_default()
}

/// Encodes the catalog: every family but `default`, with its slot.
pub(super) fn encode_catalog(families: &[(String, u8)]) -> Vec<u8> {
    let mut out = CATALOG_MAGIC.to_vec();
    for (name, slot) in families {
        out.push(*slot);
        // `check_family_name` keeps names within 255 bytes.
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
    }
    out
}

/// Decodes the catalog, naming the file and offset of what is malformed
/// (it is read from disk).
pub(super) fn decode_catalog(path: &str, blob: &[u8]) -> Result<Vec<(String, u8)>> {
    let bad = |off: usize, what: &str| {
        Error::Corruption(format!(
            "{path}/APPMETA: column family catalog {what} at offset {off}"
        ))
    };
    let mut rest = blob
        .strip_prefix(CATALOG_MAGIC)
        .ok_or_else(|| bad(0, "lacks its header"))?;
    let mut out: Vec<(String, u8)> = Vec::new();
    while let [slot, len, tail @ ..] = rest {
        let off = blob.len() - rest.len();
        let name = tail
            .get(..*len as usize)
            .ok_or_else(|| bad(off, "ends inside a name"))?;
        let name =
            std::str::from_utf8(name).map_err(|_| bad(off, "holds a name that is not UTF-8"))?;
        if !SLOTS.contains(slot) || out.iter().any(|(n, s)| s == slot || n == name) {
            return Err(bad(off, "repeats a family or holds an invalid slot"));
        }
        out.push((name.to_string(), *slot));
        rest = &tail[*len as usize..];
    }
    if !rest.is_empty() {
        return Err(bad(blob.len() - rest.len(), "ends inside an entry"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_short_and_long_keys_alike() {
        let long = vec![9u8; 500];
        for key in [&b""[..], b"abc", &long] {
            let p = Prefixed::new(7, key);
            assert_eq!(p.as_slice(), prefixed(7, key).as_slice());
            assert_eq!(user_key(p.as_slice()), key);
        }
        let mut buf = Vec::new();
        prefix_into(&mut buf, 3, b"xy");
        assert_eq!(buf, b"\x03xy");
    }

    #[test]
    fn bounds_keep_a_cursor_in_its_family() {
        assert_eq!(bounds(DEFAULT_SLOT, None, None), (vec![0xFF], None));
        assert_eq!(
            bounds(0xFE, Some(b"a"), None),
            (vec![0xFE, b'a'], Some(vec![0xFF]))
        );
        assert_eq!(bounds(2, None, Some(b"z")), (vec![2], Some(vec![2, b'z'])));
        assert_eq!(*SLOTS.start(), 1);
    }

    #[test]
    fn the_catalog_round_trips_and_damage_is_corruption() {
        let fams = vec![("users".to_string(), 1), ("x".repeat(255), 0xFE)];
        let blob = encode_catalog(&fams);
        assert_eq!(decode_catalog("db", &blob).ok(), Some(fams.clone()));
        assert_eq!(decode_catalog("db", CATALOG_MAGIC).ok(), Some(vec![]));
        let dup = encode_catalog(&[("a".into(), 1), ("b".into(), 1)]);
        let bad_slot = encode_catalog(&[("a".into(), DEFAULT_SLOT)]);
        for b in [
            &blob[..blob.len() - 1],
            &blob[1..],
            &dup,
            &bad_slot,
            b"families-1\x01",
        ] {
            assert!(
                matches!(decode_catalog("db", b), Err(Error::Corruption(m)) if m.contains("db/APPMETA"))
            );
        }
    }
}
