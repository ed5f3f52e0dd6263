//! How the vmemkv adapter lays column families over the engine's one
//! ordered keyspace. `default` keeps its keys as they are; every other
//! family lives under one escape byte, `FF`, that `default` gives up by
//! storing its own keys that start with `FF` behind a second `FF`. The
//! catalog of families lives outside the keyspace, in the engine's
//! application metadata file (`APPMETA`).
//!
//! ```text
//! stored key                      value
//! user key (first byte < FF)      a value of `default`, stored as it is
//! [FF] user key (first byte FF)   a value of `default` whose key starts with FF
//! [FF, slot] user key             a value of the family in `slot` (1..=FE)
//!
//! APPMETA blob: b"families-2", then per family: slot (u8), name length
//! (u8), name (UTF-8)
//! ```
//!
//! One keyspace keeps a batch across families one engine batch (one log
//! record, atomic by the engine's own protocol) and a snapshot one engine
//! snapshot. `default` pays nothing per key: its keys reach the engine
//! without a copy, T1 holds the same bytes it would without families, and
//! a `default` cursor has the user's bounds only. The price is a *hole* in
//! `default`'s range, `[FF, FF FF)`, where the other families' keys sort:
//! a `default` cursor that lands in it steps over it with one seek (only
//! while some family exists), and a `default` range that spans it is cut
//! in two. Keys are at most two bytes longer than the user's.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// The `default` family's tag in the family table. It is not a stored
/// byte: `default`'s keys carry no slot.
pub(super) const DEFAULT_SLOT: u8 = 0xFF;
/// The escape byte: every stored key of another family starts with it,
/// and so does a `default` key that starts with it.
const ESC: u8 = 0xFF;
/// The smallest and largest slots another family may take.
pub(super) const SLOTS: std::ops::RangeInclusive<u8> = 1..=0xFE;
/// The catalog blob's first bytes.
pub(super) const CATALOG_MAGIC: &[u8] = b"families-2";
/// The catalog of the earlier layout, one slot byte before every key.
const CATALOG_V1: &[u8] = b"families-1";
/// The first stored key of the hole in `default`'s range.
pub(super) const HOLE_START: &[u8] = &[ESC];
/// The first stored key past the hole: `default`'s keys that start with
/// `FF`.
pub(super) const HOLE_END: &[u8] = &[ESC, ESC];
/// The extra bytes a stored key may carry.
pub(super) const OVERHEAD: usize = 2;

/// The bytes stored before `key` in the family `slot`.
#[inline]
fn head(slot: u8, key: &[u8]) -> &'static [u8] {
    const HEADS: [[u8; 2]; 256] = {
        let mut h = [[ESC, 0]; 256];
        let mut s = 0;
        while s < 256 {
            h[s][1] = s as u8;
            s += 1;
        }
        h
    };
    if slot != DEFAULT_SLOT {
        &HEADS[slot as usize]
    } else if key.first() == Some(&ESC) {
        &[ESC]
    } else {
        &[]
    }
}

/// Whether `key` is stored as it is.
#[inline]
pub(super) fn verbatim(slot: u8, key: &[u8]) -> bool {
    head(slot, key).is_empty()
}

/// The stored key of `key` in the family `slot`: `key` itself for most
/// of `default`'s keys, else a copy behind its head.
#[inline]
pub(super) fn encode(slot: u8, key: &[u8]) -> Cow<'_, [u8]> {
    match head(slot, key) {
        [] => Cow::Borrowed(key),
        h => Cow::Owned([h, key].concat()),
    }
}

/// `encode` into a reused buffer.
pub(super) fn encode_into(buf: &mut Vec<u8>, slot: u8, key: &[u8]) {
    buf.clear();
    buf.extend_from_slice(head(slot, key));
    buf.extend_from_slice(key);
}

/// The user key of a stored key of the family `slot`.
#[inline]
pub(super) fn user_key(slot: u8, stored: &[u8]) -> &[u8] {
    let skip = match (slot == DEFAULT_SLOT, stored.first()) {
        (true, Some(&ESC)) => 1,
        (true, _) => 0,
        (false, _) => 2,
    };
    stored.get(skip..).unwrap_or_default()
}

/// Whether a stored key is another family's, seen from `default`.
#[inline]
pub(super) fn in_hole(stored: &[u8]) -> bool {
    stored.first() == Some(&ESC) && stored.get(1) != Some(&ESC)
}

/// The stored bounds of a family's user bounds. Another family's cursor
/// never leaves its slot: a missing lower bound is the slot's first key
/// and a missing upper bound the next slot. `default`'s bounds are the
/// user's, encoded; its cursor steps over the hole itself.
pub(super) fn bounds(
    slot: u8,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let enc = |k: &[u8]| encode(slot, k).into_owned();
    if slot == DEFAULT_SLOT {
        return (lower.map(enc), upper.map(enc));
    }
    let lo = enc(lower.unwrap_or_default());
    let hi = upper.map_or_else(|| vec![ESC, slot + 1], enc);
    (Some(lo), Some(hi))
}

/// The stored range of a whole family, for `delete_range`.
pub(super) fn whole(slot: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![ESC, slot], vec![ESC, slot + 1])
}

/// A stored `default` range `[lo, hi)` (`hi` `None`: to the end) without
/// the hole: the range itself, or its parts below and above the hole.
/// Neither end may lie in the hole, which `encode` guarantees.
pub(super) fn around_hole(
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
    let spans = lo.as_slice() < HOLE_START && hi.as_deref().is_none_or(|h| h > HOLE_START);
    let (first, second) = if spans {
        let above = hi.as_deref().is_none_or(|h| h > HOLE_END);
        (
            (lo, Some(HOLE_START.to_vec())),
            above.then(|| (HOLE_END.to_vec(), hi)),
        )
    } else {
        ((lo, hi), None)
    };
    std::iter::once(first).chain(second)
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
    if blob.starts_with(CATALOG_V1) {
        return Err(Error::NotSupported(format!(
            "{path}/APPMETA: the database uses the earlier column family layout \
             ({CATALOG_V1:?}: a slot byte before every key, default's too); this \
             version reads {CATALOG_MAGIC:?} only. Export it with the version that wrote it"
        )));
    }
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
    fn default_keys_stay_as_they_are_unless_they_start_with_the_escape() {
        let long = vec![9u8; 500];
        for key in [&b""[..], b"abc", &long, b"\xFE\xFF"] {
            assert!(matches!(encode(DEFAULT_SLOT, key), Cow::Borrowed(k) if k == key));
            assert_eq!(user_key(DEFAULT_SLOT, key), key);
        }
        for key in [&b"\xFF"[..], b"\xFF\x00", b"\xFF\xFFz"] {
            let stored = encode(DEFAULT_SLOT, key);
            assert_eq!(stored[0], ESC);
            assert_eq!(&stored[1..], key);
            assert!(!in_hole(&stored) && stored.as_ref() >= HOLE_END);
            assert_eq!(user_key(DEFAULT_SLOT, &stored), key);
        }
        for slot in [1, 0x80, 0xFE] {
            for key in [&b""[..], b"k", b"\xFF"] {
                let stored = encode(slot, key);
                assert_eq!(&stored[..2], &[ESC, slot]);
                assert!(in_hole(&stored));
                assert_eq!(user_key(slot, &stored), key);
                let mut buf = vec![1, 2, 3];
                encode_into(&mut buf, slot, key);
                assert_eq!(buf, stored.as_ref());
            }
        }
    }

    #[test]
    fn encoding_keeps_each_familys_order_and_its_own_range() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\x00",
            b"a",
            b"\xFE\xFF",
            b"\xFF",
            b"\xFF\x00",
            b"\xFF\xFF",
        ];
        for slot in [DEFAULT_SLOT, 1, 0xFE] {
            let stored: Vec<_> = keys.iter().map(|k| encode(slot, k).into_owned()).collect();
            assert!(stored.windows(2).all(|w| w[0] < w[1]), "slot {slot}");
            let (lo, hi) = bounds(slot, None, None);
            for s in &stored {
                assert!(lo.as_ref().is_none_or(|l| l <= s) && hi.as_ref().is_none_or(|h| s < h));
            }
        }
        assert_eq!(bounds(DEFAULT_SLOT, None, None), (None, None));
        assert_eq!(
            bounds(0xFE, Some(b"a"), None),
            (Some(vec![ESC, 0xFE, b'a']), Some(HOLE_END.to_vec()))
        );
        assert_eq!(
            bounds(2, None, Some(b"z")),
            (Some(vec![ESC, 2]), Some(vec![ESC, 2, b'z']))
        );
        assert_eq!(whole(1), (vec![ESC, 1], vec![ESC, 2]));
    }

    #[test]
    fn a_default_range_is_cut_around_the_hole() {
        let cut = |lo: &[u8], hi: Option<&[u8]>| -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
            around_hole(lo.to_vec(), hi.map(<[u8]>::to_vec)).collect()
        };
        let r = |lo: &[u8], hi: Option<&[u8]>| (lo.to_vec(), hi.map(<[u8]>::to_vec));
        assert_eq!(cut(b"a", Some(b"b")), vec![r(b"a", Some(b"b"))]);
        assert_eq!(
            cut(b"a", None),
            vec![r(b"a", Some(HOLE_START)), r(HOLE_END, None)]
        );
        assert_eq!(cut(b"a", Some(HOLE_END)), vec![r(b"a", Some(HOLE_START))]);
        assert_eq!(
            cut(b"a", Some(b"\xFF\xFFz")),
            vec![r(b"a", Some(HOLE_START)), r(HOLE_END, Some(b"\xFF\xFFz"))]
        );
        assert_eq!(cut(HOLE_END, None), vec![r(HOLE_END, None)]);
        assert_eq!(cut(b"b", Some(b"a")), vec![r(b"b", Some(b"a"))]);
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
            b"families-2\x01",
        ] {
            assert!(
                matches!(decode_catalog("db", b), Err(Error::Corruption(m)) if m.contains("db/APPMETA"))
            );
        }
        assert!(matches!(
            decode_catalog("db", b"families-1"),
            Err(Error::NotSupported(m)) if m.contains("db/APPMETA") && m.contains("earlier")
        ));
    }
}
