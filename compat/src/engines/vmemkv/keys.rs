//! How the vmemkv adapter lays column families over the engine's one
//! ordered keyspace: every stored key starts with one byte, the family's
//! slot, and the adapter's own records sit under slot 0.
//!
//! ```text
//! stored key                      value
//! [0x00] b"cf:" name              [slot]: the family catalog
//! [0x00] b"format"                b"families-1": the layout marker
//! [slot] user key                 a value of the family in `slot` (1..=0xFE)
//! [0xFF] user key                 a value of `default`
//! ```
//!
//! One keyspace keeps a batch across families one engine batch (one log
//! record, atomic by the engine's own protocol) and a snapshot one engine
//! snapshot. `default` sits at the top, so its cursors need only a lower
//! bound, and the engine's cursor steps forward with no bound compare
//! (`Iter::toward_bound_ok`). The byte costs one key byte per entry; T1
//! stores each sorted region's common prefix once, so a byte shared by a
//! region's keys costs nothing in its search.

use crate::error::{Error, Result};

/// The slot of the `default` family.
pub(super) const DEFAULT_SLOT: u8 = 0xFF;
/// The smallest and largest slots another family may take.
pub(super) const SLOTS: std::ops::RangeInclusive<u8> = 1..=0xFE;
/// The layout marker's key; a database without it holds no adapter data.
pub(super) const FORMAT_KEY: &[u8] = b"\x00format";
/// The layout marker's value.
pub(super) const FORMAT_VALUE: &[u8] = b"families-1";
/// The catalog's key prefix; a catalog key is this, then the family name.
pub(super) const CATALOG_PREFIX: &[u8] = b"\x00cf:";
/// The first key past the catalog.
pub(super) const CATALOG_END: &[u8] = b"\x00cf;";

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

/// The catalog key of family `name`.
pub(super) fn catalog_key(name: &str) -> Vec<u8> {
    let mut k = CATALOG_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// Decodes one catalog entry into the family's name and slot, naming the
/// entry when it is malformed (the catalog is read from disk).
pub(super) fn catalog_entry(path: &str, key: &[u8], value: &[u8]) -> Result<(String, u8)> {
    let bad = |what: &str| {
        Error::Corruption(format!(
            "{path}: column family catalog entry {key:?} {what}"
        ))
    };
    let name = key
        .strip_prefix(CATALOG_PREFIX)
        .ok_or_else(|| bad("lies outside the catalog"))?;
    let name = std::str::from_utf8(name).map_err(|_| bad("has a name that is not UTF-8"))?;
    match value {
        [slot] if SLOTS.contains(slot) => Ok((name.to_string(), *slot)),
        _ => Err(bad("holds no valid slot")),
    }
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
        assert!(CATALOG_PREFIX < CATALOG_END && FORMAT_KEY > CATALOG_END);
        // The adapter's own records sit below every family.
        assert_eq!((FORMAT_KEY[0], CATALOG_PREFIX[0]), (0, 0));
        assert_eq!(*SLOTS.start(), 1);
    }

    #[test]
    fn malformed_catalog_entries_are_corruption() {
        let k = catalog_key("users");
        assert_eq!(
            catalog_entry("db", &k, &[3]).ok(),
            Some(("users".into(), 3))
        );
        for v in [&[][..], &[0], &[DEFAULT_SLOT], &[1, 2]] {
            assert!(
                matches!(catalog_entry("db", &k, v), Err(Error::Corruption(m)) if m.contains("db"))
            );
        }
        assert!(catalog_entry("db", b"\x00cf:\xFF", &[1]).is_err());
    }
}
