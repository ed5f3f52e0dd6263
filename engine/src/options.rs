//! Open options, with a builder.

use crate::error::{Error, Result};

/// Largest accepted key: 64 KiB - 1 bytes.
pub const MAX_KEY_SIZE: usize = 65_535;
/// Upper bound of the largest accepted value (the effective limit is also
/// at most a quarter of the segment size; see [`Options::max_value_size`]).
pub const MAX_VALUE_SIZE: usize = 16 << 20;
/// Smallest accepted segment size.
pub const MIN_SEGMENT_SIZE: usize = 1 << 20;
/// Largest accepted segment size (offsets are 32-bit).
pub const MAX_SEGMENT_SIZE: usize = 1 << 30;

/// Options for [`crate::Db::open`]. Build with the chained setters:
///
/// ```
/// let opts = vmemkv::Options::default()
///     .segment_size(8 << 20)
///     .bloom(false)
///     .background(false);
/// assert_eq!(opts.segment_size, 8 << 20);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the database if the directory holds none (default true).
    pub create_if_missing: bool,
    /// Fail if a database already exists (default false).
    pub error_if_exists: bool,
    /// Size of each T2 segment file (default 64 MiB; 1 MiB..1 GiB, a
    /// multiple of 4 KiB). Files are preallocated with `fallocate`.
    pub segment_size: usize,
    /// Take a checkpoint automatically after this many log bytes since the
    /// last one, and at least twice the last snapshot's size (a checkpoint
    /// rewrites all of T1; default 256 MiB; 0 disables the automatic
    /// trigger). Close also checkpoints once a quarter of this is pending
    /// (and an eighth of the snapshot), so the next open replays nothing.
    pub checkpoint_interval_bytes: u64,
    /// Keep Bloom filters in T1's sorted regions (ablation switch).
    pub bloom: bool,
    /// Keep values of at most 8 bytes inside T1 entries (ablation switch);
    /// when off they are read from T2 like any other value.
    pub inline_values: bool,
    /// Pre-fault segment mappings (`MAP_POPULATE`) when they are mapped
    /// (ablation switch). New segments never are (they hold nothing to
    /// read, and populating them slowed every write into them); segments
    /// that exist at open only when together they take at most half of the memory budget
    /// (`MemAvailable`, capped by the memory cgroup's limit), since
    /// populating a larger-than-memory log would read it all and thrash.
    pub prefault: bool,
    /// `MADV_RANDOM` on segment mappings (default true): a page fault reads
    /// only the faulting page, not a readahead window. Without it, random
    /// gets on data larger than memory thrash: measured under a 256 MiB
    /// cgroup with a 500 MB corpus of 1 KB values, 279 gets/s with default
    /// readahead against 11,500 with `MADV_RANDOM` (`benches/engine_cold.rs`).
    pub random_access: bool,
    /// `get` copies values of at least this many bytes with `pread`
    /// instead of through the mapping (default 16 KiB; `usize::MAX` =
    /// never). One syscall and one I/O per value instead of a page fault
    /// per 4 KiB: 64 KiB values under the same cgroup went from 800 gets/s
    /// (mapping, `MADV_RANDOM`) to 4,500 (`pread`).
    pub pread_min_bytes: usize,
    /// Run the maintenance thread (checkpoint, defragment) and T1's own
    /// background work (default true).
    pub background: bool,
    /// A sealed segment is a defragment candidate once this fraction of
    /// its bytes is garbage (default 0.5).
    pub defrag_garbage_ratio: f64,
    /// Live bytes relocated per maintenance cycle (defragment, a step of
    /// the key-order pass or of a merge; default 256 MiB), each cycle
    /// ending with a checkpoint; at most an eighth of the live bytes. A
    /// cycle moves up to twice the T1 snapshot instead when that is more
    /// (a large index), within a quarter of the live bytes, so that the
    /// checkpoints stay under half of the bytes moved.
    pub defrag_max_bytes_per_cycle: u64,
    /// How defragment finds live values: `Some(true)` walks T1 once,
    /// `Some(false)` walks each candidate segment's records (a T1 lookup per
    /// record), `None` (default) picks the cheaper by estimate.
    pub defrag_index_walk: Option<bool>,
    /// T1 shard split threshold in entries (0 = T1's default).
    pub split_threshold: usize,
    /// How often the maintenance thread looks for work, in milliseconds.
    pub maintenance_interval_ms: u64,
    /// Nice value (0..=19) of maintenance work, background or explicit,
    /// so that it yields CPU to foreground writers (default 10; 0 runs
    /// explicit calls on the caller's thread).
    pub maintenance_nice: i32,
    /// Writes are delayed (RocksDB's delayed write rate) once T2 exceeds
    /// 80% of this multiple of the live bytes, so that defragment keeps
    /// space under it (default 2.0; 0 = never delay writes). Needs
    /// `background`.
    pub max_space_amplification: f64,
    /// Once no write has arrived for this long, the maintenance thread
    /// rewrites key ranges whose values are mostly not packed in key order
    /// (a random-order load, or a key-order load as written, with a record
    /// header and the key between every two values) in key order, packed,
    /// in bounded steps that stop when writes resume, so later scans read
    /// contiguous extents of values only (default 1000; 0 = never; needs
    /// `background`). `Db::compact_range` does the same on demand.
    pub order_idle_ms: u64,
    /// Each time writers have appended this many bytes since the last
    /// sorted run, the maintenance thread rewrites the values they wrote in
    /// key order as a new run, and merges runs of one level eight at a
    /// time, so that scans of data still being written read one extent
    /// per run rather than a page per value (module
    /// `maintenance::runs`; default 512 MiB; 0 = never; needs
    /// `background`). Values already in key order stay where they are.
    pub sorted_run_bytes: u64,
    /// Close sorts the values written since the last run began into one
    /// last run when they are at least an eighth of `sorted_run_bytes`
    /// (RocksDB flushes its memtables at close), and finishes a tail sort
    /// that the close cut short, so that a load scanned after a reopen
    /// reads one extent per run (default true). Close then takes about as long as
    /// one run's sort: seconds for 512 MiB.
    pub sort_tail_at_close: bool,
    /// Once no write has arrived for this long (and the key-order pass has
    /// nothing to do), the maintenance thread merges T1's append regions
    /// into its sorted regions, so that iterators and MultiScans over a
    /// quiet database step through sorted arrays (default 1000; 0 =
    /// never; needs `background`). A database just opened counts as
    /// quiet, so what recovery replayed is merged at once unless writes
    /// begin. Unlike `order_idle_ms` it moves no value and writes nothing
    /// to disk.
    pub merge_idle_ms: u64,
    /// Where an async MultiScan reads values that are not in the page
    /// cache (RocksDB's `use_direct_reads`): `Some(true)` with `O_DIRECT`
    /// into buffers the scan owns, `Some(false)` into the page cache,
    /// `None` (default) direct the first time, and through the page cache
    /// for bytes read again recently while the value log fits in half of
    /// the memory the page cache can use (see
    /// [`crate::multiscan::BufferMode::Auto`]). A scan's own
    /// `MultiScanOptions::buffer_mode` wins over it.
    pub use_direct_reads: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            segment_size: 64 << 20,
            checkpoint_interval_bytes: 256 << 20,
            bloom: true,
            inline_values: true,
            prefault: false,
            random_access: true,
            pread_min_bytes: 16 << 10,
            background: true,
            defrag_garbage_ratio: 0.5,
            defrag_max_bytes_per_cycle: 256 << 20,
            defrag_index_walk: None,
            split_threshold: 0,
            maintenance_interval_ms: 100,
            maintenance_nice: 10,
            max_space_amplification: 2.0,
            order_idle_ms: 1000,
            sorted_run_bytes: 512 << 20,
            sort_tail_at_close: true,
            merge_idle_ms: 1000,
            use_direct_reads: None,
        }
    }
}

macro_rules! setter {
    ($(#[$m:meta])* $name:ident: $t:ty) => {
        $(#[$m])*
        pub fn $name(mut self, v: $t) -> Self {
            self.$name = v;
            self
        }
    };
}

impl Options {
    setter!(/// Sets `create_if_missing`.
        create_if_missing: bool);
    setter!(/// Sets `error_if_exists`.
        error_if_exists: bool);
    setter!(/// Sets `segment_size`.
        segment_size: usize);
    setter!(/// Sets `checkpoint_interval_bytes`.
        checkpoint_interval_bytes: u64);
    setter!(/// Sets `bloom`.
        bloom: bool);
    setter!(/// Sets `inline_values`.
        inline_values: bool);
    setter!(/// Sets `prefault`.
        prefault: bool);
    setter!(/// Sets `random_access`.
        random_access: bool);
    setter!(/// Sets `pread_min_bytes`.
        pread_min_bytes: usize);
    setter!(/// Sets `background`.
        background: bool);
    setter!(/// Sets `max_space_amplification`.
        max_space_amplification: f64);
    setter!(/// Sets `defrag_garbage_ratio`.
        defrag_garbage_ratio: f64);
    setter!(/// Sets `defrag_max_bytes_per_cycle`.
        defrag_max_bytes_per_cycle: u64);
    setter!(/// Sets `defrag_index_walk`.
        defrag_index_walk: Option<bool>);
    setter!(/// Sets `split_threshold`.
        split_threshold: usize);
    setter!(/// Sets `maintenance_interval_ms`.
        maintenance_interval_ms: u64);
    setter!(/// Sets `maintenance_nice`.
        maintenance_nice: i32);
    setter!(/// Sets `order_idle_ms`.
        order_idle_ms: u64);
    setter!(/// Sets `sorted_run_bytes`.
        sorted_run_bytes: u64);
    setter!(/// Sets `sort_tail_at_close`.
        sort_tail_at_close: bool);
    setter!(/// Sets `merge_idle_ms`.
        merge_idle_ms: u64);
    setter!(/// Sets `use_direct_reads`.
        use_direct_reads: Option<bool>);

    /// The largest value accepted with these options:
    /// `min(16 MiB, segment_size / 4)`.
    pub fn max_value_size(&self) -> usize {
        MAX_VALUE_SIZE.min(self.segment_size / 4)
    }

    /// Checks the options, naming the one at fault.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_SEGMENT_SIZE..=MAX_SEGMENT_SIZE).contains(&self.segment_size)
            || !self.segment_size.is_multiple_of(4096)
        {
            return Err(Error::InvalidArgument(format!(
                "option segment_size = {}: must be a multiple of 4096 between {MIN_SEGMENT_SIZE} and {MAX_SEGMENT_SIZE}",
                self.segment_size
            )));
        }
        let amp = self.max_space_amplification;
        if !(amp == 0.0 || amp.is_finite() && amp > 1.0) {
            return Err(Error::InvalidArgument(format!(
                "option max_space_amplification = {amp}: must be 0 (no write throttling) or a finite value above 1"
            )));
        }
        if !(self.defrag_garbage_ratio > 0.0 && self.defrag_garbage_ratio <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "option defrag_garbage_ratio = {}: must be in (0, 1]",
                self.defrag_garbage_ratio
            )));
        }
        if !(0..=19).contains(&self.maintenance_nice) {
            return Err(Error::InvalidArgument(format!(
                "option maintenance_nice = {}: must be in 0..=19",
                self.maintenance_nice
            )));
        }
        if self.maintenance_interval_ms == 0 {
            return Err(Error::InvalidArgument(
                "option maintenance_interval_ms must be at least 1".into(),
            ));
        }
        Ok(())
    }
}
