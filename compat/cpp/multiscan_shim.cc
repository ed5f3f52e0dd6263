// A C ABI over RocksDB's C++ `DB::NewMultiScan`, which RocksDB's C API (and
// hence the Rust `rocksdb` crate) does not expose.
//
// The Rust side hands us the `rocksdb_t*` of the `rocksdb` crate (feature
// `raw-ptr`); `rocksdb_t` is defined in RocksDB's db/c.cc as
// `struct rocksdb_t { DB* rep; };`, so its first field is the `DB*`.
//
// Every entry point catches every exception: nothing may unwind into Rust.
// Errors are reported through `vmk_status` with our own small code set, so
// the Rust side does not depend on RocksDB's enum numbering.

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rocksdb/comparator.h"
#include "rocksdb/db.h"
#include "rocksdb/multi_scan.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"

// Note on io_uring: RocksDB's PosixFileSystem enables io_uring (MultiRead,
// and ReadAsync for MultiScan's async path) only when the program defines
// the weak symbol `RocksDbIOUringEnable()` returning true. librocksdb-sys
// already defines it that way in its build_version.cc, so this shim must not.

extern "C" {

// Mirrors the layout of rocksdb/db/c.cc's `struct rocksdb_t`.
struct rocksdb_t {
  ROCKSDB_NAMESPACE::DB* rep;
};

// Mirrors rocksdb/db/c.cc's `struct rocksdb_snapshot_t`.
struct rocksdb_snapshot_t {
  const ROCKSDB_NAMESPACE::Snapshot* rep;
};

// Mirrors rocksdb/db/c.cc's `struct rocksdb_column_family_handle_t`.
struct rocksdb_column_family_handle_t {
  ROCKSDB_NAMESPACE::ColumnFamilyHandle* rep;
  bool immortal;
};

enum vmk_code : int {
  VMK_OK = 0,
  VMK_INVALID_ARGUMENT = 1,
  VMK_NOT_SUPPORTED = 2,
  VMK_CORRUPTION = 3,
  VMK_IO_ERROR = 4,
  VMK_BUSY = 5,
  VMK_INCOMPLETE = 6,
  VMK_PREFETCH_LIMIT_REACHED = 7,
  VMK_SHUTDOWN_IN_PROGRESS = 8,
  VMK_OTHER = 9,
};

struct vmk_status {
  int code;
  char msg[480];
};

// RocksDB's switch for io_uring (defined by librocksdb-sys).
bool RocksDbIOUringEnable();

unsigned char vmk_io_uring_enabled(void) {
  return RocksDbIOUringEnable() ? 1 : 0;
}

}  // extern "C"

namespace {

using ROCKSDB_NAMESPACE::MultiScan;
using ROCKSDB_NAMESPACE::MultiScanArgs;
using ROCKSDB_NAMESPACE::MultiScanException;
using ROCKSDB_NAMESPACE::Scan;
using ROCKSDB_NAMESPACE::Slice;
using ROCKSDB_NAMESPACE::Status;

void set_msg(vmk_status* st, int code, const char* msg) {
  if (st == nullptr) return;
  st->code = code;
  std::strncpy(st->msg, msg, sizeof(st->msg) - 1);
  st->msg[sizeof(st->msg) - 1] = '\0';
}

void set_status(vmk_status* st, const Status& s) {
  int code = VMK_OTHER;
  if (s.IsPrefetchLimitReached()) {
    code = VMK_PREFETCH_LIMIT_REACHED;
  } else {
    switch (s.code()) {
      case Status::kOk:
        code = VMK_OK;
        break;
      case Status::kInvalidArgument:
        code = VMK_INVALID_ARGUMENT;
        break;
      case Status::kNotSupported:
        code = VMK_NOT_SUPPORTED;
        break;
      case Status::kCorruption:
        code = VMK_CORRUPTION;
        break;
      case Status::kIOError:
        code = VMK_IO_ERROR;
        break;
      case Status::kBusy:
        code = VMK_BUSY;
        break;
      case Status::kIncomplete:
        code = VMK_INCOMPLETE;
        break;
      case Status::kShutdownInProgress:
        code = VMK_SHUTDOWN_IN_PROGRESS;
        break;
      default:
        code = VMK_OTHER;
        break;
    }
  }
  set_msg(st, code, s.ToString().c_str());
}

// Runs `f`, turning every exception into a status. Returns `fallback` on an
// exception.
template <typename R, typename F>
R guarded(vmk_status* st, R fallback, F&& f) {
  try {
    return f();
  } catch (MultiScanException& ex) {
    set_status(st, ex.status());
  } catch (std::bad_alloc&) {
    set_msg(st, VMK_OTHER, "out of memory in MultiScan shim");
  } catch (std::exception& ex) {
    set_msg(st, VMK_OTHER, ex.what());
  } catch (...) {
    set_msg(st, VMK_OTHER, "unknown C++ exception in MultiScan shim");
  }
  return fallback;
}

}  // namespace

// The state of one MultiScan: the range keys (MultiScanArgs holds Slices
// into them), RocksDB's MultiScan, and the two cursor objects it hands out.
struct vmk_multiscan {
  std::vector<std::string> keys;
  std::unique_ptr<MultiScan> ms;
  std::unique_ptr<MultiScan::MultiScanIterator> ranges;
  std::optional<Scan::ScanIterator> entries;
  bool ranges_done = false;
  bool entry_started = false;
  bool entry_valid = false;
  bool failed = false;
  vmk_status failure{};
};

extern "C" {

// Creates a MultiScan over `n` ranges. `limits[i] == NULL` marks an
// unbounded range. `snapshot` (nullable) is the view to read; `cf`
// (nullable: the default family) the column family. Returns NULL and fills
// `st` on failure.
vmk_multiscan* vmk_multiscan_new(rocksdb_t* db,
                                 const rocksdb_snapshot_t* snapshot,
                                 const rocksdb_column_family_handle_t* cf,
                                 unsigned char fill_cache,
                                 unsigned char verify_checksums,
                                 unsigned char async_io, size_t readahead_size,
                                 size_t n, const char* const* starts,
                                 const size_t* start_lens,
                                 const char* const* limits,
                                 const size_t* limit_lens,
                                 unsigned char use_async_io,
                                 uint64_t io_coalesce_threshold,
                                 uint64_t max_prefetch_size, vmk_status* st) {
  set_msg(st, VMK_OK, "");
  if (db == nullptr || db->rep == nullptr) {
    set_msg(st, VMK_INVALID_ARGUMENT, "MultiScan: null DB handle");
    return nullptr;
  }
  return guarded<vmk_multiscan*>(st, nullptr, [&]() -> vmk_multiscan* {
    auto state = std::make_unique<vmk_multiscan>();
    // Reserve first: the Slices below point into these strings, so the
    // vector must never reallocate.
    state->keys.reserve(2 * n);
    MultiScanArgs args(ROCKSDB_NAMESPACE::BytewiseComparator());
    args.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      state->keys.emplace_back(starts[i], start_lens[i]);
      Slice start(state->keys.back());
      if (limits[i] != nullptr) {
        state->keys.emplace_back(limits[i], limit_lens[i]);
        args.insert(start, Slice(state->keys.back()));
      } else {
        args.insert(start);
      }
    }
    args.use_async_io = use_async_io != 0;
    args.io_coalesce_threshold = io_coalesce_threshold;
    args.max_prefetch_size = max_prefetch_size;

    ROCKSDB_NAMESPACE::ReadOptions ro;
    ro.fill_cache = fill_cache != 0;
    ro.verify_checksums = verify_checksums != 0;
    ro.async_io = async_io != 0;
    ro.readahead_size = readahead_size;
    if (snapshot != nullptr) {
      ro.snapshot = snapshot->rep;
    }

    ROCKSDB_NAMESPACE::DB* d = db->rep;
    ROCKSDB_NAMESPACE::ColumnFamilyHandle* family =
        (cf != nullptr && cf->rep != nullptr) ? cf->rep
                                              : d->DefaultColumnFamily();
    state->ms = d->NewMultiScan(ro, family, args);
    if (!state->ms) {
      set_msg(st, VMK_OTHER, "MultiScan: NewMultiScan returned null");
      return nullptr;
    }
    return state.release();
  });
}

// Moves to the next range: 1 = on a range, 0 = all ranges done, -1 = error.
int vmk_multiscan_next_range(vmk_multiscan* m, vmk_status* st) {
  set_msg(st, VMK_OK, "");
  if (m->failed) {
    *st = m->failure;
    return -1;
  }
  if (m->ranges_done) return 0;
  int r = guarded<int>(st, -1, [&]() -> int {
    m->entries.reset();
    m->entry_started = false;
    m->entry_valid = false;
    if (!m->ranges) {
      // begin() seeks the first range; its status errors throw.
      m->ranges.reset(new MultiScan::MultiScanIterator(m->ms->begin()));
    } else {
      ++(*m->ranges);
    }
    if (*m->ranges == nullptr) {
      m->ranges_done = true;
      return 0;
    }
    return 1;
  });
  if (r < 0) {
    m->failed = true;
    m->failure = *st;
  }
  return r;
}

// Moves to the next entry of the current range: 1 = on an entry, 0 = end of
// the range, -1 = error.
int vmk_multiscan_next_entry(vmk_multiscan* m, vmk_status* st) {
  set_msg(st, VMK_OK, "");
  if (m->failed) {
    *st = m->failure;
    return -1;
  }
  if (!m->ranges || m->ranges_done) return 0;
  int r = guarded<int>(st, -1, [&]() -> int {
    if (!m->entry_started) {
      m->entry_started = true;
      m->entries.emplace((**m->ranges).begin());
    } else if (m->entry_valid) {
      ++(*m->entries);
    } else {
      return 0;
    }
    m->entry_valid = (*m->entries != nullptr);
    return m->entry_valid ? 1 : 0;
  });
  if (r < 0) {
    m->failed = true;
    m->failure = *st;
    m->entry_valid = false;
  }
  return r;
}

// The current entry's key; empty when not on an entry. Valid until the next
// call that moves the scan.
void vmk_multiscan_key(const vmk_multiscan* m, const char** data, size_t* len) {
  *data = "";
  *len = 0;
  if (m->entry_valid && m->entries) {
    // operator* is non-const in RocksDB; it only returns the cached pair.
    auto& kv = **const_cast<std::optional<Scan::ScanIterator>&>(m->entries);
    *data = kv.first.data();
    *len = kv.first.size();
  }
}

// The current entry's value; see vmk_multiscan_key.
void vmk_multiscan_value(const vmk_multiscan* m, const char** data,
                         size_t* len) {
  *data = "";
  *len = 0;
  if (m->entry_valid && m->entries) {
    auto& kv = **const_cast<std::optional<Scan::ScanIterator>&>(m->entries);
    *data = kv.second.data();
    *len = kv.second.size();
  }
}

void vmk_multiscan_destroy(vmk_multiscan* m) {
  try {
    // Destroy in dependency order: the cursors refer into the MultiScan.
    m->entries.reset();
    m->ranges.reset();
    m->ms.reset();
    delete m;
  } catch (...) {
    // Destructors in RocksDB do not throw; nothing sensible to do here.
  }
}

}  // extern "C"
