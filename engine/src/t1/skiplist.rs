//! The append region's skip list: insert-only, arena-backed, lock-free.
//!
//! An append map only ever gains keys (a replaced key's slot is updated in
//! place) and is freed whole, once its shard has merged it and no reader
//! holds the state that lists it. So its nodes need no reclamation (no
//! epochs, no reference counts), a node, its tower and its key are one bump
//! allocation in an arena (no `malloc` per key), and an upsert searches
//! once: the search that finds a key absent leaves its *splice* (each
//! level's predecessor and successor), and the insert links the new node
//! there, walking again only at a level where another writer linked a node
//! in between (its compare-and-swap failed). Keys compare eight bytes at a
//! time ([`cmp_keys`]) instead of through `memcmp`.
//!
//! All `unsafe` of the append region is here: node layout, the arena, and
//! dereferencing the list's pointers.

use std::alloc::Layout;
use std::cell::RefCell;
use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::append::Slot;
use super::bloom::hash_key;
use super::entry::Rec;

/// Tallest tower. With a branching factor of 4 this indexes 4^12 keys with
/// no loss; an append map is merged long before that.
const MAX_HEIGHT: usize = 12;

/// Bytewise order of two keys, eight bytes per step (the same order as
/// `<[u8]>::cmp`). Short keys are the common case, where a `memcmp` call costs
/// more than the comparison.
#[inline]
pub(crate) fn cmp_keys(a: &[u8], b: &[u8]) -> Cmp {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while let (Some((xa, xr)), Some((ya, yr))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        let (p, q) = (u64::from_be_bytes(*xa), u64::from_be_bytes(*ya));
        if p != q {
            return p.cmp(&q);
        }
        (x, y) = (xr, yr);
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// A node's fixed part. Its tower (`height` next pointers) and then its key
/// follow it in the same allocation ([`node_layout`]).
#[repr(C)]
struct Node {
    slot: Slot,
    key_len: u32,
    height: u32,
}

const TOWER_OFF: usize = std::mem::size_of::<Node>();

fn node_size(height: usize, key_len: usize) -> usize {
    (TOWER_OFF + height * std::mem::size_of::<AtomicPtr<Node>>() + key_len).next_multiple_of(8)
}

impl Node {
    #[inline]
    fn tower(&self) -> &[AtomicPtr<Node>] {
        // SAFETY: every `Node` is created by `SkipList::insert` in an arena block of
        // `node_size(height, key_len)` bytes, 8-aligned, whose `height` pointers after
        // the fixed part were initialised before the node was published; the block
        // lives as long as the list, which outlives `&self`.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Node as *const u8).add(TOWER_OFF) as *const AtomicPtr<Node>,
                self.height as usize,
            )
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        // SAFETY: as in `tower`: the key's `key_len` bytes follow the tower in the
        // node's block, written before publication and never changed after.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Node as *const u8)
                    .add(TOWER_OFF + self.height as usize * std::mem::size_of::<AtomicPtr<Node>>()),
                self.key_len as usize,
            )
        }
    }

    #[inline]
    fn next(&self, level: usize) -> *mut Node {
        self.tower()[level].load(Ordering::Acquire)
    }
}

/// A chunk of the arena: this header, then `cap` bytes handed out by bumping `pos`.
#[repr(C, align(64))]
struct Chunk {
    pos: AtomicUsize,
    cap: usize,
    /// The previous chunk (for the drop), fixed when the chunk is created.
    older: *mut Chunk,
}

const CHUNK_HDR: usize = std::mem::size_of::<Chunk>();
const FIRST_CHUNK: usize = 4 << 10;
const MAX_CHUNK: usize = 1 << 20;

fn chunk_layout(cap: usize) -> Layout {
    // `CHUNK_HDR + cap` never nears isize::MAX: cap is at most MAX_CHUNK or one
    // node of a key of at most 4 GiB.
    Layout::from_size_align(CHUNK_HDR + cap, 64).unwrap_or_else(|_| std::process::abort())
}

/// Bump allocation in chunks that live until the arena drops. Lock-free except
/// when a chunk fills up.
struct Arena {
    cur: AtomicPtr<Chunk>,
    /// Serializes chunk creation; guards the list of chunks through `cur`'s `older`.
    grow: Mutex<()>,
    /// The newest chunk ever created (cur, or a dedicated one for a large node).
    all: AtomicPtr<Chunk>,
    bytes: AtomicUsize,
}

impl Arena {
    fn new() -> Arena {
        Arena {
            cur: AtomicPtr::new(ptr::null_mut()),
            grow: Mutex::new(()),
            all: AtomicPtr::new(ptr::null_mut()),
            bytes: AtomicUsize::new(0),
        }
    }

    /// `size` bytes (a multiple of 8), 8-aligned, valid until the arena drops.
    fn alloc(&self, size: usize) -> *mut u8 {
        loop {
            let c = self.cur.load(Ordering::Acquire);
            if !c.is_null() {
                // SAFETY: a chunk pointer stored in `cur` stays valid until the arena drops.
                let ch = unsafe { &*c };
                let at = ch.pos.fetch_add(size, Ordering::Relaxed);
                if at + size <= ch.cap {
                    // SAFETY: [at, at + size) lies inside the chunk's data and no other
                    // caller got an overlapping range from the fetch_add.
                    return unsafe { (c as *mut u8).add(CHUNK_HDR + at) };
                }
            }
            let _g = self.grow.lock();
            if self.cur.load(Ordering::Acquire) != c {
                continue;
            }
            let total = self.bytes.load(Ordering::Relaxed);
            let cap = (total.max(FIRST_CHUNK / 2) * 2).min(MAX_CHUNK);
            if size > cap / 4 {
                // A large node gets a chunk of its own; `cur` keeps its free space.
                return self.new_chunk(size, size, false);
            }
            return self.new_chunk(cap, size, true);
        }
    }

    /// A chunk of `cap` bytes whose first `used` bytes are the caller's. Called
    /// with `grow` held.
    fn new_chunk(&self, cap: usize, used: usize, make_current: bool) -> *mut u8 {
        let layout = chunk_layout(cap);
        // SAFETY: the layout has a non-zero size (it includes the header).
        let c = unsafe { std::alloc::alloc(layout) } as *mut Chunk;
        if c.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `c` is a fresh allocation of at least `size_of::<Chunk>()` bytes,
        // aligned for `Chunk`.
        unsafe {
            c.write(Chunk {
                pos: AtomicUsize::new(used),
                cap,
                older: self.all.load(Ordering::Relaxed),
            })
        };
        self.all.store(c, Ordering::Relaxed);
        self.bytes.fetch_add(layout.size(), Ordering::Relaxed);
        if make_current {
            self.cur.store(c, Ordering::Release);
        }
        // SAFETY: the data starts right after the header, inside the allocation.
        unsafe { (c as *mut u8).add(CHUNK_HDR) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut c = *self.all.get_mut();
        while !c.is_null() {
            // SAFETY: every chunk on the `older` chain was allocated by `new_chunk`
            // with `chunk_layout(cap)` and is freed exactly once, here; nothing can
            // reference it any more (`&mut self`).
            unsafe {
                let older = (*c).older;
                std::alloc::dealloc(c as *mut u8, chunk_layout((*c).cap));
                c = older;
            }
        }
    }
}

/// Entries from which a list keeps a [`HashIndex`]: below, its search is a
/// few cached levels and a table would cost more memory than it saves time.
const INDEX_FROM: usize = 4096;
/// Slots a lookup or an add probes before it gives up.
const INDEX_PROBES: usize = 8;
/// Node addresses fit in the low 48 bits of a slot; the high 16 hold a tag of
/// the key's hash, so a probe reads a node only on a likely match.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// A hash table from keys to the nodes that hold them, for an upsert of a
/// key the map already holds (a hot key: one slot and one node read, not a
/// search down every level; reads search, see [`SkipList::get`]). It is a
/// cache, not the truth: a key is added when a search finds it (not when it
/// is linked), it may be missing (found before the table, or its probes were
/// full), and a miss falls back to the search. Nodes are never freed before
/// the list, so a slot never goes stale.
struct HashIndex {
    slots: Box<[AtomicU64]>,
    mask: usize,
}

impl HashIndex {
    fn new(cap: usize) -> HashIndex {
        let cap = cap.next_power_of_two();
        HashIndex {
            slots: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            mask: cap - 1,
        }
    }

    fn find(&self, key: &[u8], h: u64) -> *mut Node {
        let tag = h >> ADDR_BITS;
        let mut i = h as usize & self.mask;
        for _ in 0..INDEX_PROBES {
            let v = self.slots[i].load(Ordering::Acquire);
            if v == 0 {
                break;
            }
            if v >> ADDR_BITS == tag {
                let n = (v & ADDR_MASK) as *mut Node;
                // SAFETY: slots hold only published nodes of the list that owns
                // this table, valid while it is.
                if unsafe { (*n).key() } == key {
                    return n;
                }
            }
            i = (i + 1) & self.mask;
        }
        ptr::null_mut()
    }

    fn add(&self, h: u64, n: *mut Node) {
        let addr = n as u64;
        if addr & !ADDR_MASK != 0 {
            return;
        }
        let v = (h >> ADDR_BITS) << ADDR_BITS | addr;
        let mut i = h as usize & self.mask;
        for _ in 0..INDEX_PROBES {
            match self.slots[i].compare_exchange(0, v, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return,
                Err(cur) if cur == v => return,
                Err(_) => i = (i + 1) & self.mask,
            }
        }
    }
}

thread_local! {
    /// This thread's recent hash-index hits minus misses, in
    /// `[-PROBE_SCORE_MAX, PROBE_SCORE_MAX]`, and a count of skipped probes.
    static PROBES: std::cell::Cell<(i32, u32)> = const { std::cell::Cell::new((0, 0)) };
}
const PROBE_SCORE_MAX: i32 = 16;

/// Whether to probe the hash index before searching: while this thread's
/// probes mostly miss (it writes keys the region does not hold yet, as a
/// random load does) a probe is a cache miss for nothing, so only one in 16
/// is made, to notice when hits come back.
fn probe_worthwhile() -> bool {
    PROBES.with(|c| {
        let (score, skipped) = c.get();
        if score > -PROBE_SCORE_MAX / 2 || skipped >= 15 {
            c.set((score, 0));
            true
        } else {
            c.set((score, skipped + 1));
            false
        }
    })
}

fn probe_outcome(hit: bool) {
    PROBES.with(|c| {
        let (score, skipped) = c.get();
        let score = if hit { score + 1 } else { score - 1 };
        c.set((score.clamp(-PROBE_SCORE_MAX, PROBE_SCORE_MAX), skipped));
    })
}

/// A tower height: 1 plus one per pair of trailing zero bits of a random word,
/// so each level holds a quarter of the one below.
fn random_height() -> usize {
    thread_local! {
        static RNG: std::cell::Cell<u64> = std::cell::Cell::new({
            let local = 0u8;
            (&local as *const u8 as u64) ^ 0x9e37_79b9_7f4a_7c15
        });
    }
    let r = RNG.with(|c| {
        // xorshift64*
        let mut x = c.get() | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    });
    (1 + r.trailing_zeros() as usize / 2).min(MAX_HEIGHT)
}

/// Where a key sits in the list: per level, the last node before it (null for
/// the head) and the first node at or after it.
pub(crate) struct Splice {
    prev: [*mut Node; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
    /// The [`SkipList::id`] of the list the pointers belong to; 0 for none.
    list: usize,
}

impl Splice {
    const EMPTY: Splice = Splice {
        prev: [ptr::null_mut(); MAX_HEIGHT],
        next: [ptr::null_mut(); MAX_HEIGHT],
        list: 0,
    };
}

/// Levels a hinted seek climbs looking for one whose splice still brackets
/// the key, and the nodes it walks there, before it searches from the top
/// instead: a writer's next key near its last one is found in a few steps,
/// and any other key costs a handful of compares of cached nodes.
const HINT_LEVELS: usize = 2;
const HINT_STEPS: usize = 16;

/// Ids of lists, never reused, so a splice left in a thread's hint is only
/// ever read against the list it was taken from.
static NEXT_LIST_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's last splice: writers that insert keys in order (a load,
    /// a sequential insert) start each search where their last one ended,
    /// as RocksDB's memtable reuses its splice.
    static HINT: RefCell<Splice> = const { RefCell::new(Splice::EMPTY) };
}

/// An entry of the list, borrowed from it.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'a> {
    node: &'a Node,
}

impl<'a> Entry<'a> {
    #[inline]
    pub fn key(&self) -> &'a [u8] {
        self.node.key()
    }

    #[inline]
    pub fn value(&self) -> &'a Slot {
        &self.node.slot
    }

    /// The next entry in key order.
    #[inline]
    pub fn next(&self) -> Option<Entry<'a>> {
        // SAFETY: a published node pointer stays valid as long as the list, and
        // `'a` borrows the list.
        unsafe { self.node.next(0).as_ref() }.map(|node| Entry { node })
    }
}

/// The insert-only skip list of an append map.
pub(crate) struct SkipList {
    id: usize,
    head: [AtomicPtr<Node>; MAX_HEIGHT],
    /// The tallest tower linked so far: searches start there.
    height: AtomicUsize,
    len: AtomicUsize,
    arena: Arena,
    /// The current [`HashIndex`], null until the list holds [`INDEX_FROM`]
    /// entries; replaced by a larger one when `len` reaches `index_at`.
    /// Every table lives in `indexes` until the list drops.
    index: AtomicPtr<HashIndex>,
    index_at: AtomicUsize,
    // Boxed: `index` points at a table, which must not move when the vector grows.
    #[allow(clippy::vec_box)]
    indexes: Mutex<Vec<Box<HashIndex>>>,
}

impl SkipList {
    pub fn new() -> SkipList {
        SkipList {
            id: NEXT_LIST_ID.fetch_add(1, Ordering::Relaxed),
            head: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            arena: Arena::new(),
            index: AtomicPtr::new(ptr::null_mut()),
            index_at: AtomicUsize::new(INDEX_FROM),
            indexes: Mutex::new(Vec::new()),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head[0].load(Ordering::Acquire).is_null()
    }

    /// Bytes held by the arena and the hash indexes.
    pub fn heap_bytes(&self) -> usize {
        let index: usize = self
            .indexes
            .lock()
            .iter()
            .map(|ix| ix.slots.len() * 8)
            .sum();
        self.arena.bytes.load(Ordering::Relaxed) + index
    }

    /// The link after `n` at `level`; `n` null is the head.
    #[inline]
    fn link(&self, n: *mut Node, level: usize) -> &AtomicPtr<Node> {
        // SAFETY: a non-null `n` is a node of this list, valid while `self` is.
        match unsafe { n.as_ref() } {
            Some(node) => &node.tower()[level],
            None => &self.head[level],
        }
    }

    /// Walks `level` from `from` (null: the head) while the next node's key is
    /// below `key` (`or_equal`: at or below). Returns the last node passed and
    /// the one it stopped at.
    #[inline]
    fn walk(
        &self,
        mut from: *mut Node,
        level: usize,
        key: &[u8],
        or_equal: bool,
        known_stop: *mut Node,
    ) -> (*mut Node, *mut Node) {
        loop {
            let n = self.link(from, level).load(Ordering::Acquire);
            // A node that already stopped the walk one level up stops it here too.
            if n.is_null() || n == known_stop {
                return (from, n);
            }
            // SAFETY: a published node pointer is valid while the list is.
            let c = cmp_keys(unsafe { (*n).key() }, key);
            if c == Cmp::Less || (or_equal && c == Cmp::Equal) {
                from = n;
            } else {
                return (from, n);
            }
        }
    }

    /// Finds `key`, leaving in `sp` where it goes. A splice last used on this
    /// list is a hint: the search starts at its lowest level that still
    /// brackets `key`.
    #[inline]
    pub fn seek<'a>(&'a self, key: &[u8], sp: &mut Splice) -> Option<Entry<'a>> {
        let (stop, learn) = match self.seek_hinted(key, sp) {
            Some(stop) => (stop, None),
            None => {
                // SAFETY: an index pointer is one of `indexes`, alive while the list is.
                let index = unsafe { self.index.load(Ordering::Acquire).as_ref() };
                let h = index.map(|ix| (ix, hash_key(key)));
                if let Some((ix, h)) = h.filter(|_| probe_worthwhile()) {
                    let n = ix.find(key, h);
                    probe_outcome(!n.is_null());
                    // SAFETY: a published node pointer is valid while the list is.
                    if let Some(node) = unsafe { n.as_ref() } {
                        return Some(Entry { node });
                    }
                }
                (self.seek_from_top(key, sp), h)
            }
        };
        let e = self.entry_of(stop, key)?;
        if let Some((ix, h)) = learn {
            ix.add(h, stop);
        }
        Some(e)
    }

    /// The entry at `stop`, where a search for `key` ended, if it holds `key`.
    #[inline]
    fn entry_of(&self, stop: *mut Node, key: &[u8]) -> Option<Entry<'_>> {
        // SAFETY: a published node pointer is valid while the list is.
        let node = unsafe { stop.as_ref() }?;
        (node.key() == key).then_some(Entry { node })
    }

    fn seek_from_top(&self, key: &[u8], sp: &mut Splice) -> *mut Node {
        let top = self.height.load(Ordering::Relaxed);
        sp.prev[top..].fill(ptr::null_mut());
        sp.next[top..].fill(ptr::null_mut());
        let (mut x, mut stop) = (ptr::null_mut(), ptr::null_mut());
        for l in (0..top).rev() {
            (x, stop) = self.walk(x, l, key, false, stop);
            sp.prev[l] = x;
            sp.next[l] = stop;
        }
        sp.list = self.id;
        stop
    }

    /// The search from `sp`'s lowest level (of the first [`HINT_LEVELS`])
    /// whose predecessor sorts before `key` and whose successor after it,
    /// walking at most [`HINT_STEPS`] nodes there (nodes linked since may lie
    /// between). `None` when no level qualifies: search from the top.
    ///
    /// The levels above keep their nodes: a splice's predecessors are in
    /// key order from the top level down, and its successors the other way,
    /// so if one level brackets `key` every level above does too. A node
    /// linked there since is passed by [`SkipList::insert`]'s walk, as for
    /// any splice a concurrent writer made stale.
    fn seek_hinted(&self, key: &[u8], sp: &mut Splice) -> Option<*mut Node> {
        if sp.list != self.id {
            return None;
        }
        let below = |n: *mut Node| {
            // SAFETY: `sp.list` is this list's id and ids are never reused, so
            // `n` is a node of this list, valid while it is.
            unsafe { n.as_ref() }.is_some_and(|n| cmp_keys(n.key(), key) == Cmp::Less)
        };
        let above = |n: *mut Node| {
            // SAFETY: as in `below`.
            unsafe { n.as_ref() }.is_none_or(|n| cmp_keys(n.key(), key) == Cmp::Greater)
        };
        // A head predecessor is no hint: its level may have filled since.
        let level = (0..HINT_LEVELS).find(|&l| below(sp.prev[l]) && above(sp.next[l]))?;
        let mut x = sp.prev[level];
        // The first node at or past `key` (null: the end), if within reach.
        let mut stop = (0..HINT_STEPS).find_map(|_| {
            let n = self.link(x, level).load(Ordering::Acquire);
            if below(n) {
                x = n;
                None
            } else {
                Some(n)
            }
        })?;
        (sp.prev[level], sp.next[level]) = (x, stop);
        for l in (0..level).rev() {
            (x, stop) = self.walk(x, l, key, false, stop);
            sp.prev[l] = x;
            sp.next[l] = stop;
        }
        Some(stop)
    }

    /// A splice to pass to [`SkipList::seek`], with no hint.
    pub fn splice() -> Splice {
        Splice::EMPTY
    }

    /// Runs `f` with this thread's splice, which holds where its last search
    /// of any list ended ([`SkipList::seek`] uses it only on that list). A
    /// nested call gets a splice with no hint.
    pub fn with_hint<R>(f: impl FnOnce(&mut Splice) -> R) -> R {
        HINT.with(|h| match h.try_borrow_mut() {
            Ok(mut sp) => f(&mut sp),
            Err(_) => f(&mut Self::splice()),
        })
    }

    /// The entry for `key`, by a search alone: most reads ask for keys the
    /// region lacks, which the hash index cannot rule out (it is a cache), so
    /// a probe would add a miss to their search.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Entry<'_>> {
        self.entry_of(self.seek_from_top(key, &mut Self::splice()), key)
    }

    /// Links a node for `key` holding `rec` at `sp`, left by a [`SkipList::seek`]
    /// that found `key` absent. Returns the entry for `key` and whether it is the new
    /// one: false if another writer linked `key` meanwhile (the new node is then
    /// abandoned in the arena, unreachable).
    pub fn insert(&self, key: &[u8], rec: Rec, sp: &mut Splice) -> (Entry<'_>, bool) {
        let h = random_height();
        if sp.list != self.id {
            // Not a splice of this list's seek: find one.
            if let Some(e) = self.entry_of(self.seek_from_top(key, sp), key) {
                return (e, false);
            }
        }
        let key_len = u32::try_from(key.len()).unwrap_or(u32::MAX);
        let node = self.arena.alloc(node_size(h, key_len as usize)) as *mut Node;
        // SAFETY: `node` is a fresh, 8-aligned arena block of node_size(h, key_len)
        // bytes: the fixed part, `h` tower pointers, then the key. All are written
        // here, before the node is published by the Release CAS below.
        let n: &Node = unsafe {
            node.write(Node {
                slot: Slot::new(rec),
                key_len,
                height: h as u32,
            });
            let tower = (node as *mut u8).add(TOWER_OFF) as *mut AtomicPtr<Node>;
            for l in 0..h {
                tower.add(l).write(AtomicPtr::new(ptr::null_mut()));
            }
            ptr::copy_nonoverlapping(key.as_ptr(), (tower.add(h)) as *mut u8, key_len as usize);
            &*node
        };
        // Levels above the seek's top have the head and null in `sp`: if another
        // writer has raised the list since, the CAS fails and the walk below
        // starts from the head.
        for l in 0..h {
            loop {
                let (p, s) = (sp.prev[l], sp.next[l]);
                if l == 0 {
                    // SAFETY: a published node pointer is valid while the list is.
                    if let Some(e) = unsafe { s.as_ref() } {
                        if e.key() == key {
                            return (Entry { node: e }, false);
                        }
                    }
                }
                n.tower()[l].store(s, Ordering::Relaxed);
                if self
                    .link(p, l)
                    .compare_exchange(s, node, Ordering::Release, Ordering::Acquire)
                    .is_ok()
                {
                    break;
                }
                // Another writer linked a node after `p`: walk on from `p`, which
                // still sorts before `key`.
                (sp.prev[l], sp.next[l]) = self.walk(p, l, key, false, ptr::null_mut());
            }
        }
        // The next key this thread inserts is likely just after this one.
        sp.prev[..h].fill(node);
        // Rarely taller than the list: a load, not a write to the shared line.
        if h > self.height.load(Ordering::Relaxed) {
            self.height.fetch_max(h, Ordering::Relaxed);
        }
        // A new key is not added to the hash index: a key written once (a
        // load) would cost a miss on a random slot for nothing; a search that
        // finds the key again adds it.
        let len = self.len.fetch_add(1, Ordering::Relaxed) + 1;
        // `len` values are unique, so one writer grows the index.
        if len == self.index_at.load(Ordering::Relaxed) {
            // A new table starts empty and relearns the hot keys, so the first
            // one is sized for a whole append region (64k entries by default)
            // at half load; a region that outgrows it gets one 8x its size.
            let cap = if len == INDEX_FROM { len * 32 } else { len * 8 };
            let ix = Box::new(HashIndex::new(cap));
            self.index_at.store(cap / 2, Ordering::Relaxed);
            let p = &*ix as *const HashIndex as *mut HashIndex;
            self.indexes.lock().push(ix);
            self.index.store(p, Ordering::Release);
        }
        (Entry { node: n }, true)
    }

    fn first_node(&self, key: Option<(&[u8], bool)>) -> Option<Entry<'_>> {
        let Some((key, or_equal)) = key else {
            // SAFETY: a published node pointer is valid while the list is.
            return unsafe { self.head[0].load(Ordering::Acquire).as_ref() }
                .map(|node| Entry { node });
        };
        let (mut x, mut stop) = (ptr::null_mut(), ptr::null_mut());
        for l in (0..self.height.load(Ordering::Relaxed)).rev() {
            (x, stop) = self.walk(x, l, key, or_equal, stop);
        }
        // SAFETY: a published node pointer is valid while the list is.
        unsafe { stop.as_ref() }.map(|node| Entry { node })
    }

    /// The first entry at or after (`Included`) or after (`Excluded`) the bound.
    pub fn lower_bound(&self, b: Bound<&[u8]>) -> Option<Entry<'_>> {
        match b {
            Bound::Included(k) => self.first_node(Some((k, false))),
            Bound::Excluded(k) => self.first_node(Some((k, true))),
            Bound::Unbounded => self.first_node(None),
        }
    }

    /// The last entry at or before (`Included`) or before (`Excluded`) the bound.
    pub fn upper_bound(&self, b: Bound<&[u8]>) -> Option<Entry<'_>> {
        let mut x = ptr::null_mut();
        for l in (0..self.height.load(Ordering::Relaxed)).rev() {
            x = match b {
                Bound::Included(k) => self.walk(x, l, k, true, ptr::null_mut()).0,
                Bound::Excluded(k) => self.walk(x, l, k, false, ptr::null_mut()).0,
                Bound::Unbounded => loop {
                    let n = self.link(x, l).load(Ordering::Acquire);
                    if n.is_null() {
                        break x;
                    }
                    x = n;
                },
            };
        }
        // SAFETY: a published node pointer is valid while the list is.
        unsafe { x.as_ref() }.map(|node| Entry { node })
    }

    /// The last entry.
    pub fn back(&self) -> Option<Entry<'_>> {
        self.upper_bound(Bound::Unbounded)
    }

    /// Entries in `range`, in key order.
    pub fn range<'a>(&'a self, range: (Bound<&[u8]>, Bound<&'a [u8]>)) -> Range<'a> {
        Range {
            cur: self.lower_bound(range.0),
            hi: range.1,
        }
    }

    /// Every entry, in key order.
    #[cfg(test)]
    pub fn iter(&self) -> Range<'_> {
        self.range((Bound::Unbounded, Bound::Unbounded))
    }
}

/// Iterator of [`SkipList::range`].
pub(crate) struct Range<'a> {
    cur: Option<Entry<'a>>,
    hi: Bound<&'a [u8]>,
}

impl<'a> Iterator for Range<'a> {
    type Item = Entry<'a>;

    #[inline]
    fn next(&mut self) -> Option<Entry<'a>> {
        let e = self.cur?;
        let inside = match self.hi {
            Bound::Included(h) => cmp_keys(e.key(), h) != Cmp::Greater,
            Bound::Excluded(h) => cmp_keys(e.key(), h) == Cmp::Less,
            Bound::Unbounded => true,
        };
        if !inside {
            self.cur = None;
            return None;
        }
        self.cur = e.next();
        Some(e)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn rec(seq: u64) -> Rec {
        Rec { seq, a: 0, b: 0 }
    }

    /// An insert through this thread's hint, as the shards' writers do.
    fn put(l: &SkipList, k: &[u8], seq: u64) -> bool {
        SkipList::with_hint(|sp| l.seek(k, sp).is_none() && l.insert(k, rec(seq), sp).1)
    }

    #[test]
    fn cmp_keys_is_bytewise_order() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0, 0], vec![255]];
        let mut x = 7u64;
        for _ in 0..400 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (x >> 59) as usize;
            keys.push((0..len).map(|i| (x >> (i % 8 * 4)) as u8 & 3).collect());
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_keys(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn matches_a_btreeset_in_every_query() {
        let l = SkipList::new();
        let mut model = BTreeSet::new();
        let mut x = 1u64;
        for i in 0..3000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k: Vec<u8> = (x >> 40).to_be_bytes()[5..].to_vec();
            let k = if i % 7 == 0 { k[..1].to_vec() } else { k };
            assert_eq!(put(&l, &k, i), model.insert(k.clone()));
        }
        assert_eq!(l.len(), model.len());
        let all: Vec<Vec<u8>> = l.iter().map(|e| e.key().to_vec()).collect();
        assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
        for q in [
            &[][..],
            &[0],
            &[0x80, 0],
            &[0xff, 0xff, 0xff, 0xff],
            &[0x40],
        ] {
            let q = q.to_vec();
            let ge = model.range(q.clone()..).next();
            let gt = model
                .range((Bound::Excluded(q.clone()), Bound::Unbounded))
                .next();
            let le = model.range(..=q.clone()).next_back();
            let lt = model.range(..q.clone()).next_back();
            let key = |e: Option<Entry<'_>>| e.map(|e| e.key().to_vec());
            assert_eq!(key(l.lower_bound(Bound::Included(&q))).as_ref(), ge);
            assert_eq!(key(l.lower_bound(Bound::Excluded(&q))).as_ref(), gt);
            assert_eq!(key(l.upper_bound(Bound::Included(&q))).as_ref(), le);
            assert_eq!(key(l.upper_bound(Bound::Excluded(&q))).as_ref(), lt);
            if q.as_slice() >= &[0xc0][..] {
                continue;
            }
            let r: Vec<Vec<u8>> = l
                .range((Bound::Included(&q), Bound::Excluded(&[0xc0][..])))
                .map(|e| e.key().to_vec())
                .collect();
            let m: Vec<Vec<u8>> = model
                .range::<Vec<u8>, _>((Bound::Included(q.clone()), Bound::Excluded(vec![0xc0])))
                .cloned()
                .collect();
            assert_eq!(r, m);
        }
        assert_eq!(key_of(l.back()), model.iter().next_back().cloned());
        assert!(l.heap_bytes() >= l.len() * 64);
    }

    fn key_of(e: Option<Entry<'_>>) -> Option<Vec<u8>> {
        e.map(|e| e.key().to_vec())
    }

    #[test]
    fn a_key_larger_than_a_chunk_gets_its_own() {
        let l = SkipList::new();
        let big = vec![7u8; 3 * MAX_CHUNK];
        assert!(put(&l, b"a", 1));
        assert!(put(&l, &big, 2));
        assert!(put(&l, b"z", 3));
        assert_eq!(l.get(&big).unwrap().key(), &big[..]);
        assert_eq!(l.iter().count(), 3);
    }

    /// Two writers, each reusing its own splice as a hint (one ascending run
    /// of keys, one jumping around, then runs that cross), insert and seek
    /// interleaved: every key is found or linked in place, as a model says.
    #[test]
    fn reused_splices_find_and_link_like_fresh_ones() {
        let l = SkipList::new();
        let (mut a, mut b) = (SkipList::splice(), SkipList::splice());
        let mut model = BTreeSet::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..30_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ka = (if i < 20_000 { i * 3 } else { 90_000 - i }).to_be_bytes();
            let kb = (x % 100_000).to_be_bytes();
            for (k, sp) in [(ka, &mut a), (kb, &mut b)] {
                let found = l.seek(&k, sp).map(|e| e.key().to_vec());
                assert_eq!(found.is_some(), model.contains(k.as_slice()), "{i}");
                if found.is_none() {
                    assert!(l.insert(&k, rec(i), sp).1);
                    model.insert(k.to_vec());
                }
            }
        }
        let all: Vec<Vec<u8>> = l.iter().map(|e| e.key().to_vec()).collect();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        // A splice of another list is no hint for this one.
        let other = SkipList::new();
        assert!(other.seek(&5u64.to_be_bytes(), &mut a).is_none());
        assert!(other.insert(&5u64.to_be_bytes(), rec(1), &mut a).1);
        assert_eq!(other.iter().count(), 1);
    }

    /// Keys linked before the hash index existed, keys learned by a search,
    /// keys added on insert and absent keys: every seek answers as the list.
    #[test]
    fn the_hash_index_answers_as_the_search_does() {
        let l = SkipList::new();
        let key = |i: u64| (i * 7919 % 100_003).to_be_bytes();
        let n = INDEX_FROM as u64 * 3;
        for i in 0..n {
            assert!(put(&l, &key(i), i));
        }
        assert!(
            !l.index.load(Ordering::Acquire).is_null(),
            "no index at {n} keys"
        );
        for round in 0..2 {
            for i in 0..n {
                let mut sp = SkipList::splice();
                let e = l.seek(&key(i), &mut sp).expect("present");
                assert_eq!((e.key(), e.value().read().seq), (&key(i)[..], i), "{round}");
            }
            for i in n..n + 1000 {
                assert!(l.get(&key(i)).is_none());
            }
        }
        assert!(l.heap_bytes() >= (INDEX_FROM * 32 * 8));
    }

    #[test]
    fn a_stale_splice_still_links_in_order() {
        let l = SkipList::new();
        let mut sp = SkipList::splice();
        assert!(l.seek(b"m", &mut sp).is_none());
        // Other writers link keys around "m" after its seek.
        for k in [&b"a"[..], b"n", b"l", b"z", b"m0"] {
            assert!(put(&l, k, 1));
        }
        assert!(l.insert(b"m", rec(2), &mut sp).1);
        let all: Vec<&[u8]> = l.iter().map(|e| e.key()).collect();
        assert_eq!(all, [&b"a"[..], b"l", b"m", b"m0", b"n", b"z"]);
        // A second insert of "m" from a splice taken before it finds the first one.
        let mut sp = SkipList::splice();
        let l2 = SkipList::new();
        assert!(l2.seek(b"m", &mut sp).is_none());
        assert!(put(&l2, b"m", 5));
        let (e, new) = l2.insert(b"m", rec(6), &mut sp);
        assert!(!new);
        assert_eq!(e.value().read().seq, 5);
        assert_eq!(l2.len(), 1);
    }

    #[test]
    fn concurrent_inserts_keep_every_key_once_in_order() {
        let l = Arc::new(SkipList::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut won = 0usize;
                    for i in 0..20_000u64 {
                        // Threads overlap on half of the keys.
                        let k = if i % 2 == 0 { i } else { (1 << 32) + i * 4 + t };
                        won += usize::from(put(&l, &k.to_be_bytes(), i));
                    }
                    won
                })
            })
            .collect();
        let won: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let keys: Vec<&[u8]> = l.iter().map(|e| e.key()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(keys.len(), 10_000 + 4 * 10_000);
        assert_eq!(won, keys.len());
        assert_eq!(l.len(), keys.len());
    }
}
