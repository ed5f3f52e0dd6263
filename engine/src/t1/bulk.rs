//! Bulk loading: builds sorted regions straight from entries that arrive in
//! key order (a checkpoint snapshot), instead of inserting them one by one
//! into append regions and merging later.
//!
//! Recovery is the user: a snapshot of N keys costs N skip-list inserts plus
//! the merges they trigger when upserted, against one sequential append into
//! an arena per shard here.

use std::sync::Arc;

use super::append::AppendMap;
use super::entry::{Entry, Rec};
use super::shard::{Directory, Shard, ShardState};
use super::sorted::{Sorted, SortedBuilder};
use super::T1;

/// Keys that arrived out of order: the snapshot is not what it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder;

/// Accumulates entries in strictly increasing key order; [`BulkLoader::finish`]
/// publishes them. Only for an empty [`T1`] that nobody else uses yet.
pub struct BulkLoader<'a> {
    t1: &'a T1,
    /// Entries per shard: half the split threshold, so the loaded shards
    /// have room to grow before they split.
    per_shard: usize,
    done: Vec<(Box<[u8]>, Sorted)>,
    cur: Option<(Box<[u8]>, SortedBuilder)>,
    cur_len: usize,
    last: Vec<u8>,
    pushed: u64,
}

impl T1 {
    /// Starts a bulk load (see the module docs).
    pub fn bulk_loader(&self) -> BulkLoader<'_> {
        BulkLoader {
            per_shard: (self.inner.cfg.split_threshold / 2).max(1),
            t1: self,
            done: Vec::new(),
            cur: None,
            cur_len: 0,
            last: Vec::new(),
            pushed: 0,
        }
    }
}

impl BulkLoader<'_> {
    /// Adds one entry; keys must be strictly increasing.
    pub fn push(&mut self, key: &[u8], entry: &Entry) -> Result<(), OutOfOrder> {
        if self.pushed > 0 && key <= self.last.as_slice() {
            return Err(OutOfOrder);
        }
        self.pushed += 1;
        self.last.clear();
        self.last.extend_from_slice(key);
        if self.cur_len == self.per_shard {
            self.seal_current();
        }
        let per_shard = self.per_shard;
        let (_, b) = self.cur.get_or_insert_with(|| {
            (
                key.into(),
                SortedBuilder::new(per_shard, per_shard.saturating_mul(key.len().max(8))),
            )
        });
        b.push(key, Rec::encode(entry));
        self.cur_len += 1;
        Ok(())
    }

    fn seal_current(&mut self) {
        if let Some((lo, b)) = self.cur.take() {
            let bits = self.t1.inner.cfg.bloom_bits_per_key;
            self.done.push((lo, b.finish(bits)));
        }
        self.cur_len = 0;
    }

    #[cfg(any(test, feature = "internals"))]
    /// Entries pushed so far.
    pub fn len(&self) -> u64 {
        self.pushed
    }

    #[cfg(any(test, feature = "internals"))]
    /// True if nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Publishes the loaded shards, replacing the (empty) directory. The
    /// first shard starts at the empty key, as the directory requires.
    pub fn finish(mut self) {
        self.seal_current();
        if self.done.is_empty() {
            return;
        }
        let los: Vec<Box<[u8]>> = self
            .done
            .iter()
            .enumerate()
            .map(|(i, (lo, _))| if i == 0 { Box::default() } else { lo.clone() })
            .collect();
        let shards = self
            .done
            .drain(..)
            .enumerate()
            .map(|(i, (_, sorted))| {
                let lo = los[i].clone();
                let hi = los.get(i + 1).cloned();
                let st = ShardState::new(
                    Arc::new(AppendMap::new()),
                    None,
                    Arc::new(sorted),
                    &lo,
                    hi.as_deref(),
                );
                Arc::new(Shard::new(lo, hi, st))
            })
            .collect();
        let _g = self.t1.inner.maint.lock();
        self.t1.inner.dir.store(Arc::new(Directory { shards }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::t1::{Locator, Payload, T1Config};

    fn cfg(split: usize) -> T1Config {
        T1Config {
            split_threshold: split,
            background: false,
            ..T1Config::default()
        }
    }

    fn entry(i: u64) -> Entry {
        Entry {
            seq: i + 1,
            payload: Payload::Stored(Locator {
                segment: 0,
                offset: i as u32 * 16,
                len: 10,
            }),
        }
    }

    #[test]
    fn loads_into_several_shards_that_read_and_write_like_upserted_ones() {
        let t1 = T1::new(cfg(64));
        let mut l = t1.bulk_loader();
        for i in 0..1000u64 {
            assert_eq!(l.push(format!("k{i:05}").as_bytes(), &entry(i)), Ok(()));
        }
        assert_eq!(l.len(), 1000);
        l.finish();
        assert!(t1.stats().shards >= 1000 / 32);
        for i in 0..1000u64 {
            assert_eq!(t1.get(format!("k{i:05}").as_bytes()), Some(entry(i)), "{i}");
        }
        assert_eq!(t1.get(b"k"), None);
        assert_eq!(t1.get(b"a"), None);
        assert_eq!(t1.get(b"z"), None);
        // Cursor order across shard boundaries.
        let mut c = t1.cursor();
        c.seek_to_first();
        let mut n = 0u64;
        while c.valid() {
            assert_eq!(c.key(), format!("k{n:05}").as_bytes());
            n += 1;
            c.next();
        }
        assert_eq!(n, 1000);
        // Newer writes land on top; keys before the first loaded key go to
        // the first shard.
        let newer = Entry {
            seq: 5000,
            payload: Payload::Tombstone,
        };
        t1.upsert(b"k00500", newer);
        t1.upsert(b"a", entry(7));
        assert_eq!(t1.get(b"k00500"), None);
        assert_eq!(t1.get(b"a"), Some(entry(7)));
        t1.reorganize_all();
        t1.maintain();
        assert_eq!(t1.get(b"k00499"), Some(entry(499)));
    }

    #[test]
    fn rejects_keys_out_of_order_and_loads_nothing_when_empty() {
        let t1 = T1::new(cfg(64));
        let mut l = t1.bulk_loader();
        assert_eq!(l.push(b"b", &entry(1)), Ok(()));
        assert_eq!(l.push(b"b", &entry(2)), Err(OutOfOrder));
        assert_eq!(l.push(b"a", &entry(2)), Err(OutOfOrder));
        let t2 = T1::new(cfg(64));
        let l2 = t2.bulk_loader();
        assert!(l2.is_empty());
        l2.finish();
        assert!(t2.is_empty());
        t2.upsert(b"x", entry(1));
        assert_eq!(t2.get(b"x"), Some(entry(1)));
    }
}
