//! Turning [`EngineOptions`] into `rocksdb::Options`, with db_bench's flag
//! names as keys.
//!
//! Every key in [`ROCKSDB_OPTION_KEYS`] is a RocksDB `db_bench` flag whose
//! option the `rocksdb` crate can set; its value syntax is db_bench's
//! (gflags integers, doubles and booleans; `compression_type` as a name).
//! A test checks that the list and the parser agree key for key.

use std::str::FromStr;

use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, ChecksumType, CompactionPri, DBCompactionStyle,
    DBCompressionType, DataBlockIndexType, FifoCompactOptions, LruCacheOptions, Options,
    UniversalCompactOptions,
};

use crate::{EngineOptions, Error, OptionMap, Result};

pub use crate::engines::rocksdb_keys::ROCKSDB_OPTION_KEYS;

/// RocksDB's options plus the few settings the adapter applies itself.
pub(super) struct Parsed {
    /// The options to open the DB with (kept alive for `statistics()`).
    pub opts: Options,
    /// Whether `statistics` was enabled.
    pub statistics: bool,
}

/// Consumes options from an [`OptionMap`], remembering every key it asked
/// for so that a test can compare them with [`ROCKSDB_OPTION_KEYS`].
struct Taker {
    map: OptionMap,
    asked: Vec<&'static str>,
}

impl Taker {
    fn num<T: FromStr>(&mut self, key: &'static str) -> Result<Option<T>> {
        self.asked.push(key);
        self.map.take::<T>(key)
    }

    fn flag(&mut self, key: &'static str) -> Result<Option<bool>> {
        self.asked.push(key);
        self.map.take_bool(key)
    }

    fn text(&mut self, key: &'static str) -> Option<String> {
        self.asked.push(key);
        self.map.take_str(key)
    }
}

fn invalid(key: &str, value: &str, expected: &str) -> Error {
    Error::InvalidArgument(format!(
        "rocksdb option '{key}': invalid value '{value}'; expected {expected}"
    ))
}

/// Parses db_bench's `compression_type` spelling.
fn compression(key: &str, value: &str) -> Result<DBCompressionType> {
    let t = match value.trim().to_ascii_lowercase().as_str() {
        "none" | "no" | "knocompression" => DBCompressionType::None,
        "snappy" | "ksnappycompression" => DBCompressionType::Snappy,
        "lz4" | "klz4compression" => DBCompressionType::Lz4,
        "lz4hc" | "klz4hccompression" => DBCompressionType::Lz4hc,
        // benchmark.sh's default.
        "zstd" | "kzstd" | "kzstdcompression" => DBCompressionType::Zstd,
        "zlib" | "bzip2" | "xpress" => {
            return Err(Error::InvalidArgument(format!(
                "rocksdb option '{key}': compression '{value}' is not compiled into this build \
                 (the rocksdb crate is built with lz4, snappy and zstd only)"
            )))
        }
        _ => return Err(invalid(key, value, "none, snappy, lz4, lz4hc or zstd")),
    };
    Ok(t)
}

/// Builds RocksDB options: the rival defaults of the original benchmark,
/// then every db_bench flag present in `eo.extra`. `blob` selects the
/// integrated-BlobDB defaults.
pub(super) fn parse(eo: &EngineOptions, blob: bool) -> Result<Parsed> {
    let engine = if blob { "blobdb" } else { "rocksdb" };
    let mut t = Taker {
        map: OptionMap::new(engine, eo),
        asked: Vec::new(),
    };
    let parsed = apply(&mut t, eo, blob)?;
    t.map.finish()?;
    Ok(parsed)
}

fn apply(t: &mut Taker, eo: &EngineOptions, blob: bool) -> Result<Parsed> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let cores = i32::try_from(cores).unwrap_or(i32::MAX);
    let mut o = Options::default();
    o.create_if_missing(eo.create_if_missing);
    o.set_error_if_exists(eo.error_if_exists);
    // Rival defaults (design brief section 1): no compression, 256 MiB write
    // buffers, leveled compaction, background jobs = cores.
    o.set_compression_type(DBCompressionType::None);
    o.set_write_buffer_size(256 << 20);
    o.set_compaction_style(DBCompactionStyle::Level);
    o.set_max_background_jobs(cores);
    if blob {
        o.set_enable_blob_files(true);
        o.set_min_blob_size(256);
        o.set_enable_blob_gc(true);
    }

    // Memtables.
    if let Some(v) = t.num::<usize>("write_buffer_size")? {
        o.set_write_buffer_size(v);
    }
    if let Some(v) = t.num::<i32>("max_write_buffer_number")? {
        o.set_max_write_buffer_number(v);
    }
    if let Some(v) = t.num::<i32>("min_write_buffer_number_to_merge")? {
        o.set_min_write_buffer_number_to_merge(v);
    }
    if let Some(v) = t.num::<i64>("max_write_buffer_size_to_maintain")? {
        o.set_max_write_buffer_size_to_maintain(v);
    }
    if let Some(v) = t.num::<usize>("db_write_buffer_size")? {
        o.set_db_write_buffer_size(v);
    }
    if let Some(v) = t.num::<usize>("arena_block_size")? {
        o.set_arena_block_size(v);
    }
    if let Some(v) = t.num::<f64>("memtable_bloom_size_ratio")? {
        o.set_memtable_prefix_bloom_ratio(v);
    }
    if let Some(v) = t.flag("memtable_whole_key_filtering")? {
        o.set_memtable_whole_key_filtering(v);
    }
    if let Some(v) = t.flag("allow_concurrent_memtable_write")? {
        o.set_allow_concurrent_memtable_write(v);
    }
    if let Some(v) = t.flag("enable_write_thread_adaptive_yield")? {
        o.set_enable_write_thread_adaptive_yield(v);
    }
    if let Some(v) = t.flag("enable_pipelined_write")? {
        o.set_enable_pipelined_write(v);
    }
    if let Some(v) = t.flag("unordered_write")? {
        o.set_unordered_write(v);
    }
    if let Some(v) = t.flag("inplace_update_support")? {
        o.set_inplace_update_support(v);
    }
    if let Some(v) = t.num::<usize>("inplace_update_num_locks")? {
        o.set_inplace_update_locks(v);
    }
    if let Some(v) = t.num::<usize>("max_successive_merges")? {
        o.set_max_successive_merges(v);
    }

    // Compaction.
    if let Some(v) = t.num::<i32>("compaction_style")? {
        let style = match v {
            0 => DBCompactionStyle::Level,
            1 => DBCompactionStyle::Universal,
            2 => DBCompactionStyle::Fifo,
            _ => {
                return Err(invalid(
                    "compaction_style",
                    &v.to_string(),
                    "0 (level), 1 (universal) or 2 (fifo)",
                ))
            }
        };
        o.set_compaction_style(style);
    }
    if let Some(v) = t.num::<i32>("compaction_pri")? {
        let pri = match v {
            0 => CompactionPri::ByCompensatedSize,
            1 => CompactionPri::OldestLargestSeqFirst,
            2 => CompactionPri::OldestSmallestSeqFirst,
            3 => CompactionPri::MinOverlappingRatio,
            4 => CompactionPri::RoundRobin,
            _ => return Err(invalid("compaction_pri", &v.to_string(), "0..=4")),
        };
        o.set_compaction_pri(pri);
    }
    if let Some(v) = t.num::<i32>("num_levels")? {
        o.set_num_levels(v);
    }
    if let Some(v) = t.num::<u64>("target_file_size_base")? {
        o.set_target_file_size_base(v);
    }
    if let Some(v) = t.num::<i32>("target_file_size_multiplier")? {
        o.set_target_file_size_multiplier(v);
    }
    if let Some(v) = t.num::<u64>("max_bytes_for_level_base")? {
        o.set_max_bytes_for_level_base(v);
    }
    if let Some(v) = t.num::<f64>("max_bytes_for_level_multiplier")? {
        o.set_max_bytes_for_level_multiplier(v);
    }
    if let Some(v) = t.flag("level_compaction_dynamic_level_bytes")? {
        o.set_level_compaction_dynamic_level_bytes(v);
    }
    if let Some(v) = t.flag("disable_auto_compactions")? {
        o.set_disable_auto_compactions(v);
    }
    let l0_compact = t.num::<i32>("level0_file_num_compaction_trigger")?;
    let l0_slow = t.num::<i32>("level0_slowdown_writes_trigger")?;
    let l0_stop = t.num::<i32>("level0_stop_writes_trigger")?;
    if let (Some(slow), Some(stop)) = (l0_slow, l0_stop) {
        if slow > stop {
            return Err(Error::InvalidArgument(format!(
                "rocksdb options conflict: level0_slowdown_writes_trigger ({slow}) exceeds \
                 level0_stop_writes_trigger ({stop})"
            )));
        }
    }
    if let Some(v) = l0_compact {
        o.set_level_zero_file_num_compaction_trigger(v);
    }
    if let Some(v) = l0_slow {
        o.set_level_zero_slowdown_writes_trigger(v);
    }
    if let Some(v) = l0_stop {
        o.set_level_zero_stop_writes_trigger(v);
    }
    if let Some(v) = t.num::<u64>("max_compaction_bytes")? {
        o.set_max_compaction_bytes(v);
    }
    if let Some(v) = t.num::<usize>("soft_pending_compaction_bytes_limit")? {
        o.set_soft_pending_compaction_bytes_limit(v);
    }
    if let Some(v) = t.num::<usize>("hard_pending_compaction_bytes_limit")? {
        o.set_hard_pending_compaction_bytes_limit(v);
    }
    if let Some(v) = t.num::<u64>("periodic_compaction_seconds")? {
        o.set_periodic_compaction_seconds(v);
    }
    if let Some(v) = t.num::<usize>("compaction_readahead_size")? {
        o.set_compaction_readahead_size(v);
    }
    if let Some(v) = t.num::<u32>("subcompactions")? {
        o.set_max_subcompactions(v);
    }
    let mut uco: Option<UniversalCompactOptions> = None;
    if let Some(v) = t.num::<i32>("universal_size_ratio")? {
        uco.get_or_insert_with(Default::default).set_size_ratio(v);
    }
    if let Some(v) = t.num::<i32>("universal_min_merge_width")? {
        uco.get_or_insert_with(Default::default)
            .set_min_merge_width(v);
    }
    if let Some(v) = t.num::<i32>("universal_max_merge_width")? {
        uco.get_or_insert_with(Default::default)
            .set_max_merge_width(v);
    }
    if let Some(v) = t.num::<i32>("universal_max_size_amplification_percent")? {
        uco.get_or_insert_with(Default::default)
            .set_max_size_amplification_percent(v);
    }
    if let Some(v) = t.num::<i32>("universal_compression_size_percent")? {
        uco.get_or_insert_with(Default::default)
            .set_compression_size_percent(v);
    }
    if let Some(u) = &uco {
        o.set_universal_compaction_options(u);
    }
    if let Some(mb) = t.num::<u64>("fifo_compaction_max_table_files_size_mb")? {
        let mut f = FifoCompactOptions::default();
        f.set_max_table_files_size(mb.saturating_mul(1 << 20));
        o.set_fifo_compaction_options(&f);
    }

    // Background work.
    if let Some(v) = t.num::<i32>("max_background_jobs")? {
        o.set_max_background_jobs(v);
    }
    #[allow(deprecated)]
    if let Some(v) = t.num::<i32>("max_background_compactions")? {
        o.set_max_background_compactions(v);
    }
    #[allow(deprecated)]
    if let Some(v) = t.num::<i32>("max_background_flushes")? {
        o.set_max_background_flushes(v);
    }
    let rate = t.num::<i64>("rate_limiter_bytes_per_sec")?;
    let auto_tuned = t.flag("rate_limiter_auto_tuned")?.unwrap_or(false);
    if let Some(rate) = rate.filter(|r| *r > 0) {
        // db_bench's refill period and fairness.
        if auto_tuned {
            o.set_auto_tuned_ratelimiter(rate, 100_000, 10);
        } else {
            o.set_ratelimiter(rate, 100_000, 10);
        }
    }

    // Compression.
    if let Some(v) = t.text("compression_type") {
        o.set_compression_type(compression("compression_type", &v)?);
    }
    let level = t.num::<i32>("compression_level")?;
    let dict = t.num::<i32>("compression_max_dict_bytes")?;
    if level.is_some() || dict.is_some() {
        // -14 and 0 are RocksDB's defaults for window bits and strategy;
        // 32767 is its "default level" sentinel.
        o.set_compression_options(-14, level.unwrap_or(32767), 0, dict.unwrap_or(0));
    }
    if let Some(v) = t.num::<i32>("min_level_to_compress")? {
        o.set_min_level_to_compress(v);
    }
    if let Some(v) = t.text("wal_compression") {
        o.set_wal_compression_type(compression("wal_compression", &v)?);
    }

    // Block-based table.
    let mut bbo = BlockBasedOptions::default();
    let cache_size = t.num::<i64>("cache_size")?;
    let shard_bits = t.num::<i32>("cache_numshardbits")?;
    match cache_size {
        // db_bench: a non-positive cache size means no block cache.
        Some(n) if n <= 0 => bbo.disable_cache(),
        Some(n) => {
            let mut lru = LruCacheOptions::default();
            lru.set_capacity(usize::try_from(n).unwrap_or(usize::MAX));
            if let Some(bits) = shard_bits {
                lru.set_num_shard_bits(bits);
            }
            bbo.set_block_cache(&Cache::new_lru_cache_opts(&lru));
        }
        None => {
            if let Some(bits) = shard_bits {
                // Default capacity (32 MiB, RocksDB's and db_bench's), with
                // the requested sharding.
                let mut lru = LruCacheOptions::default();
                lru.set_capacity(32 << 20);
                lru.set_num_shard_bits(bits);
                bbo.set_block_cache(&Cache::new_lru_cache_opts(&lru));
            }
        }
    }
    if let Some(n) = t.num::<i64>("row_cache_size")? {
        if n > 0 {
            o.set_row_cache(&Cache::new_lru_cache(
                usize::try_from(n).unwrap_or(usize::MAX),
            ));
        }
    }
    let bloom_bits = t.num::<f64>("bloom_bits")?;
    let ribbon = t.flag("use_ribbon_filter")?.unwrap_or(false);
    if let Some(bits) = bloom_bits.filter(|b| *b > 0.0) {
        if ribbon {
            bbo.set_ribbon_filter(bits);
        } else {
            bbo.set_bloom_filter(bits, false);
        }
    }
    if let Some(v) = t.flag("optimize_filters_for_memory")? {
        bbo.set_optimize_filters_for_memory(v);
    }
    if let Some(v) = t.flag("optimize_filters_for_hits")? {
        o.set_optimize_filters_for_hits(v);
    }
    if let Some(v) = t.num::<usize>("block_size")? {
        bbo.set_block_size(v);
    }
    if let Some(v) = t.num::<i32>("block_restart_interval")? {
        bbo.set_block_restart_interval(v);
    }
    if let Some(v) = t.num::<i32>("index_block_restart_interval")? {
        bbo.set_index_block_restart_interval(v);
    }
    if let Some(v) = t.num::<i32>("format_version")? {
        bbo.set_format_version(v);
    }
    if let Some(v) = t.num::<usize>("metadata_block_size")? {
        bbo.set_metadata_block_size(v);
    }
    if t.flag("partition_index_and_filters")? == Some(true) {
        bbo.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
        bbo.set_partition_filters(true);
    }
    if let Some(v) = t.flag("cache_index_and_filter_blocks")? {
        bbo.set_cache_index_and_filter_blocks(v);
    }
    if let Some(v) = t.flag("pin_l0_filter_and_index_blocks_in_cache")? {
        bbo.set_pin_l0_filter_and_index_blocks_in_cache(v);
    }
    if let Some(v) = t.flag("pin_top_level_index_and_filter")? {
        bbo.set_pin_top_level_index_and_filter(v);
    }
    if let Some(v) = t.text("checksum_type") {
        let c = match v.trim().to_ascii_lowercase().as_str() {
            "knochecksum" | "none" => ChecksumType::NoChecksum,
            "kcrc32c" | "crc32c" => ChecksumType::CRC32c,
            "kxxhash" | "xxhash" => ChecksumType::XXHash,
            "kxxhash64" | "xxhash64" => ChecksumType::XXHash64,
            "kxxh3" | "xxh3" => ChecksumType::XXH3,
            _ => {
                return Err(invalid(
                    "checksum_type",
                    &v,
                    "kNoChecksum, kCRC32c, kxxHash, kxxHash64 or kXXH3",
                ))
            }
        };
        bbo.set_checksum_type(c);
    }
    if let Some(v) = t.text("data_block_index_type") {
        let d = match v.trim().to_ascii_lowercase().as_str() {
            "binary_search" | "0" => DataBlockIndexType::BinarySearch,
            "binary_search_and_hash" | "1" => DataBlockIndexType::BinaryAndHash,
            _ => {
                return Err(invalid(
                    "data_block_index_type",
                    &v,
                    "binary_search or binary_search_and_hash",
                ))
            }
        };
        bbo.set_data_block_index_type(d);
    }
    if let Some(v) = t.num::<f64>("data_block_hash_table_util_ratio")? {
        bbo.set_data_block_hash_ratio(v);
    }
    o.set_block_based_table_factory(&bbo);

    // Files and I/O.
    if let Some(v) = t.flag("use_direct_reads")? {
        o.set_use_direct_reads(v);
    }
    if let Some(v) = t.flag("use_direct_io_for_flush_and_compaction")? {
        o.set_use_direct_io_for_flush_and_compaction(v);
    }
    if let Some(v) = t.flag("mmap_read")? {
        o.set_allow_mmap_reads(v);
    }
    if let Some(v) = t.flag("mmap_write")? {
        o.set_allow_mmap_writes(v);
    }
    if let Some(v) = t.flag("advise_random_on_open")? {
        o.set_advise_random_on_open(v);
    }
    if let Some(v) = t.num::<i32>("open_files")? {
        o.set_max_open_files(v);
    }
    if let Some(v) = t.num::<i32>("file_opening_threads")? {
        o.set_max_file_opening_threads(v);
    }
    if let Some(v) = t.num::<i32>("table_cache_numshardbits")? {
        o.set_table_cache_num_shard_bits(v);
    }
    if let Some(v) = t.num::<u64>("bytes_per_sync")? {
        o.set_bytes_per_sync(v);
    }
    if let Some(v) = t.num::<u64>("wal_bytes_per_sync")? {
        o.set_wal_bytes_per_sync(v);
    }
    if let Some(v) = t.flag("use_fsync")? {
        o.set_use_fsync(v);
    }
    if let Some(v) = t.num::<u64>("writable_file_max_buffer_size")? {
        o.set_writable_file_max_buffer_size(v);
    }
    // db_bench's --io_uring_enabled defines RocksDbIOUringEnable(); in this
    // build librocksdb-sys defines it as `true`, so only `true` can be honoured.
    if t.flag("io_uring_enabled")? == Some(false) {
        return Err(Error::NotSupported(
            "rocksdb option 'io_uring_enabled=false': librocksdb-sys hard-wires \
             RocksDbIOUringEnable() to true, so io_uring cannot be switched off"
                .into(),
        ));
    }

    // WAL and logs.
    if let Some(v) = t.text("wal_dir") {
        if v.contains('\0') {
            return Err(invalid("wal_dir", &v, "a path without NUL bytes"));
        }
        if !v.is_empty() {
            o.set_wal_dir(v);
        }
    }
    if let Some(v) = t.num::<u64>("max_total_wal_size")? {
        o.set_max_total_wal_size(v);
    }
    if let Some(v) = t.flag("manual_wal_flush")? {
        o.set_manual_wal_flush(v);
    }
    if let Some(v) = t.num::<usize>("recycle_log_file_num")? {
        o.set_recycle_log_file_num(v);
    }
    if let Some(v) = t.num::<usize>("keep_log_file_num")? {
        o.set_keep_log_file_num(v);
    }
    if let Some(v) = t.num::<usize>("max_log_file_size")? {
        o.set_max_log_file_size(v);
    }
    if let Some(v) = t.num::<usize>("log_file_time_to_roll")? {
        o.set_log_file_time_to_roll(v);
    }
    if let Some(v) = t.num::<u64>("delete_obsolete_files_period_micros")? {
        o.set_delete_obsolete_files_period_micros(v);
    }
    if let Some(v) = t.num::<usize>("max_manifest_file_size")? {
        o.set_max_manifest_file_size(v);
    }
    if let Some(v) = t.flag("paranoid_checks")? {
        o.set_paranoid_checks(v);
    }

    // Statistics.
    let statistics = t.flag("statistics")?.unwrap_or(false);
    if statistics {
        o.enable_statistics();
    }
    if let Some(v) = t.num::<i64>("stats_level")? {
        use rocksdb::statistics::StatsLevel;
        let level = match v {
            0 => StatsLevel::DisableAll,
            1 | 2 => StatsLevel::ExceptHistogramOrTimers,
            3 => StatsLevel::ExceptTimers,
            4 => StatsLevel::ExceptDetailedTimers,
            5 => StatsLevel::ExceptTimeForMutex,
            6 => StatsLevel::All,
            _ => return Err(invalid("stats_level", &v.to_string(), "0..=6")),
        };
        o.set_statistics_level(level);
    }
    if let Some(v) = t.num::<u32>("stats_dump_period_sec")? {
        o.set_stats_dump_period_sec(v);
    }
    if let Some(v) = t.num::<u32>("stats_persist_period_sec")? {
        o.set_stats_persist_period_sec(v);
    }
    if let Some(v) = t.flag("report_bg_io_stats")? {
        o.set_report_bg_io_stats(v);
    }
    if let Some(v) = t.flag("dump_malloc_stats")? {
        o.set_dump_malloc_stats(v);
    }

    // Misc.
    if let Some(v) = t.num::<u64>("max_sequential_skip_in_iterations")? {
        o.set_max_sequential_skip_in_iterations(v);
    }
    if let Some(v) = t.flag("use_adaptive_mutex")? {
        o.set_use_adaptive_mutex(v);
    }
    if let Some(v) = t.flag("avoid_unnecessary_blocking_io")? {
        o.set_avoid_unnecessary_blocking_io(v);
    }
    if let Some(v) = t.num::<f64>("experimental_mempurge_threshold")? {
        o.set_experimental_mempurge_threshold(v);
    }

    // Integrated BlobDB.
    if let Some(v) = t.flag("enable_blob_files")? {
        if blob && !v {
            return Err(Error::InvalidArgument(
                "blobdb options conflict: enable_blob_files=false contradicts the blobdb engine \
                 (use --engine=rocksdb instead)"
                    .into(),
            ));
        }
        o.set_enable_blob_files(v);
    }
    if let Some(v) = t.num::<u64>("min_blob_size")? {
        o.set_min_blob_size(v);
    }
    if let Some(v) = t.num::<u64>("blob_file_size")? {
        o.set_blob_file_size(v);
    }
    if let Some(v) = t.text("blob_compression_type") {
        o.set_blob_compression_type(compression("blob_compression_type", &v)?);
    }
    if let Some(v) = t.flag("enable_blob_garbage_collection")? {
        o.set_enable_blob_gc(v);
    }
    if let Some(v) = t.num::<f64>("blob_garbage_collection_age_cutoff")? {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid(
                "blob_garbage_collection_age_cutoff",
                &v.to_string(),
                "a fraction in [0, 1]",
            ));
        }
        o.set_blob_gc_age_cutoff(v);
    }
    if let Some(v) = t.num::<f64>("blob_garbage_collection_force_threshold")? {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid(
                "blob_garbage_collection_force_threshold",
                &v.to_string(),
                "a fraction in [0, 1]",
            ));
        }
        o.set_blob_gc_force_threshold(v);
    }
    if let Some(v) = t.num::<u64>("blob_compaction_readahead_size")? {
        o.set_blob_compaction_readahead_size(v);
    }
    if let Some(n) = t.num::<i64>("blob_cache_size")? {
        if n > 0 {
            o.set_blob_cache(&Cache::new_lru_cache(
                usize::try_from(n).unwrap_or(usize::MAX),
            ));
        }
    }

    Ok(Parsed {
        opts: o,
        statistics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value each key accepts, for the key-coverage test.
    fn sample(key: &str) -> &'static str {
        match key {
            "compression_type" | "wal_compression" | "blob_compression_type" => "none",
            "checksum_type" => "kCRC32c",
            "data_block_index_type" => "binary_search",
            "wal_dir" => "",
            "compaction_style" | "compaction_pri" => "0",
            "level0_slowdown_writes_trigger" | "level0_stop_writes_trigger" => "20",
            _ => "1",
        }
    }

    #[test]
    fn key_list_matches_parser() {
        let mut t = Taker {
            map: OptionMap::new("rocksdb", &EngineOptions::default()),
            asked: Vec::new(),
        };
        assert!(apply(&mut t, &EngineOptions::default(), false).is_ok());
        let mut asked = t.asked.clone();
        asked.sort_unstable();
        let mut listed = ROCKSDB_OPTION_KEYS.to_vec();
        listed.sort_unstable();
        let dup = listed.windows(2).find(|w| w[0] == w[1]);
        assert_eq!(dup, None, "duplicate key in ROCKSDB_OPTION_KEYS");
        assert_eq!(asked, listed);
    }

    #[test]
    fn every_listed_key_is_accepted() {
        for key in ROCKSDB_OPTION_KEYS {
            let eo = EngineOptions::default().set(*key, sample(key));
            if let Err(e) = parse(&eo, false) {
                panic!("key {key} rejected: {e}");
            }
        }
    }

    #[test]
    fn unknown_and_malformed_options_name_the_option() {
        let eo = EngineOptions::default().set("no_such_flag", "1");
        let err = parse(&eo, false).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("no_such_flag")),
            "{err:?}"
        );
        let eo = EngineOptions::default().set("write_buffer_size", "lots");
        let err = parse(&eo, false).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("write_buffer_size") && e.contains("lots")),
            "{err:?}"
        );
        let eo = EngineOptions::default().set("statistics", "maybe");
        assert!(matches!(parse(&eo, false), Err(Error::InvalidArgument(_))));
        let zstd = EngineOptions::default().set("compression_type", "zstd");
        assert!(parse(&zstd, false).is_ok(), "zstd is compiled in");
        let eo = EngineOptions::default().set("compression_type", "zlib");
        let err = parse(&eo, false).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("not compiled")),
            "{err:?}"
        );
    }

    #[test]
    fn conflicting_options_are_rejected() {
        let eo = EngineOptions::default()
            .set("level0_slowdown_writes_trigger", 40)
            .set("level0_stop_writes_trigger", 30);
        let err = parse(&eo, false).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("conflict")),
            "{err:?}"
        );
        let eo = EngineOptions::default().set("enable_blob_files", "false");
        assert!(parse(&eo, true).is_err());
        assert!(parse(&eo, false).is_ok());
        let eo = EngineOptions::default().set("blob_garbage_collection_age_cutoff", "1.5");
        assert!(parse(&eo, true).is_err());
    }
}
