//! Per-key write ordering. T1 drops tombstones when it reorganizes, so two
//! writes to one key must reach T1 in seq (log) order; otherwise an older
//! put published after a newer delete (and a reorganize in between) would
//! come back. A writer holds its keys' stripes from LSN reservation until
//! T1 is updated. Stripes are locked in index order, so batches cannot
//! deadlock.

use parking_lot::{Mutex, MutexGuard};

const STRIPES: usize = 4096;

/// A fixed array of stripe locks.
pub(crate) struct Stripes {
    locks: Box<[Mutex<()>]>,
}

fn stripe_of(key: &[u8]) -> usize {
    // Eight bytes per multiply: byte-at-a-time FNV-1a over a 16-byte key
    // was a dependent chain of 16 multiplies, a tenth of `commit`'s own
    // samples.
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut words = key.chunks_exact(8);
    let mut h = (key.len() as u64).wrapping_mul(K);
    for w in &mut words {
        let w: [u8; 8] = w.try_into().unwrap_or_default();
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    let rest = words.remainder();
    last[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    (h ^ (h >> 32)) as usize % STRIPES
}

impl Stripes {
    pub(crate) fn new() -> Self {
        Stripes {
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Locks the stripe of one key.
    pub(crate) fn one(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        self.locks[stripe_of(key)].lock()
    }

    /// Locks the stripes of many keys, in stripe order.
    pub(crate) fn many<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) -> Held<'_> {
        let mut bits = [0u64; STRIPES / 64];
        let (mut first, mut several) = (None, false);
        for k in keys {
            let s = stripe_of(k);
            bits[s / 64] |= 1 << (s % 64);
            match first {
                None => first = Some(s),
                Some(f) => several |= f != s,
            }
        }
        // A batch of one key (every db_bench write goes through a batch)
        // need not walk the bitmap nor allocate.
        if !several {
            return match first {
                Some(s) => Held::One(self.locks[s].lock()),
                None => Held::Many(Vec::new()),
            };
        }
        let mut guards = Vec::new();
        for (w, &word) in bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                let b = m.trailing_zeros() as usize;
                guards.push(self.locks[w * 64 + b].lock());
                m &= m - 1;
            }
        }
        Held::Many(guards)
    }
}

/// Stripe locks held by one write; released on drop.
pub(crate) enum Held<'a> {
    One(#[allow(dead_code)] MutexGuard<'a, ()>),
    Many(#[allow(dead_code)] Vec<MutexGuard<'a, ()>>),
}
