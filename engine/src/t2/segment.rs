//! One segment file of the value log, mapped `MAP_SHARED`.
//!
//! This is the only module that touches the mapping through raw pointers.
//! The invariants that make it sound:
//! * the mapping lives as long as the `Segment` (callers hold `Arc<Segment>`,
//!   so a segment retired by defragment stays mapped until its last reader
//!   drops it; the file may already be unlinked);
//! * a writer writes only inside the range it reserved with `fetch_add` on
//!   `tail`, so no two writers touch the same bytes;
//! * readers read only records that were published (committed and indexed),
//!   and published records are never modified again, except by recovery
//!   before any reader exists.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};
use crate::t2::record::{Header, HEADER_LEN};

/// Records of at least this many bytes (header included) are written with
/// `pwrite`, smaller ones through the mapping (see
/// `Segment::write_record`). With writers faulting their pages in inside
/// the window other writers wait on, through the mapping was 25% slower at
/// 400-byte values than `pwrite` (the threshold was 256); with the pages
/// faulted in ahead, outside it (`Segment::populate_ahead`), it is faster
/// up to several KiB: 1 KB `insert` 1.30x, 512-byte `fillseq` 1.2x,
/// `disable_wal` `fillseq` 1.29x (docs/performance.md). Larger records
/// would fault their own pages in; `pwrite` copies them without that.
pub const PWRITE_MIN_RECORD: usize = 8 << 10;

/// Whether a record or value of `len` bytes is stored through the mapping
/// (else with `pwrite`): the one rule [`Segment::write_record`] and
/// [`Segment::write_at`] follow, and that tells their callers whether to
/// call [`Segment::populate_ahead`] after.
pub fn through_mapping(len: usize) -> bool {
    len < PWRITE_MIN_RECORD
}

/// How far past a record stored through the mapping its segment's pages are
/// faulted in ahead ([`Segment::populate_ahead`]).
const POPULATE_AHEAD: usize = 64 << 10;

/// The page granularity of buffered writes (see `Segment::pwrite_record`).
const PAGE_SIZE: usize = 4096;

thread_local! {
    /// A record's bytes after its commit word, gathered for one `pwrite`.
    static RECORD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How segments are mapped (ablation switches).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapOpts {
    /// Fault every page in when mapping (`MAP_POPULATE`).
    pub prefault: bool,
    /// `MADV_RANDOM`: no readahead around faults (for random point reads
    /// of small values on data larger than memory).
    pub random: bool,
}

/// `O_DIRECT` alignments probed: a sector, then a page.
const DIRECT_ALIGN_MIN: usize = 512;
const DIRECT_ALIGN_MAX: usize = 4096;

/// A mapped segment file.
pub struct Segment {
    /// Segment id (its LSNs are `id << 32 | offset`).
    pub id: u32,
    /// Path of the file, for error messages.
    pub path: PathBuf,
    file: File,
    map: MmapRaw,
    size: usize,
    /// Reservation cursor: the next free offset. May run past `size` when
    /// writers race at a rollover; `used()` clamps it.
    pub(crate) tail: AtomicU64,
    /// Bytes of keys and values of entries that T1 still points at here.
    pub(crate) live: AtomicI64,
    /// A second descriptor opened with `O_DIRECT` on first use (MultiScan's
    /// direct reads), with the offset alignment its reads need; `None`
    /// when the filesystem refuses it.
    direct: std::sync::OnceLock<Option<(File, usize)>>,
    /// Pages MultiScans read recently (their admission to the page cache).
    scan_marks: std::sync::OnceLock<super::marks::PageMarks>,
    /// Values checked since their pages were last read from the file.
    verified: std::sync::OnceLock<super::value_crc::Verified>,
    /// End of the pages [`Segment::populate_ahead`] has faulted in writable
    /// (`usize::MAX`: the kernel refused, stop asking).
    populated: AtomicUsize,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("id", &self.id)
            .field("size", &self.size)
            .finish()
    }
}

impl Segment {
    /// Creates a new zero-filled segment and makes its size durable.
    ///
    /// The file is built as `NNNNNNNN.seg.tmp` (sized, allocated, fsynced)
    /// and only then given its name with a hard link, which never replaces
    /// an existing file: a kill at any point leaves either no segment or a
    /// complete one, never a short file that would fail the next open
    /// (`*.tmp` files are removed on open). Callers fsync the directory.
    pub fn create(dir: &Path, id: u32, size: usize, mo: MapOpts) -> Result<Segment> {
        let path = dir.join(crate::files::segment(id));
        let tmp = dir.join(format!(
            "{}{}",
            crate::files::segment(id),
            crate::files::TMP_SUFFIX
        ));
        let _ = std::fs::remove_file(&tmp);
        let built = Self::build(&tmp, size);
        let linked = built.and_then(|file| {
            crate::failpoint::hit("segment.built");
            std::fs::hard_link(&tmp, &path)
                .map_err(|e| Error::io(format!("creating segment {}", path.display()), e))?;
            Ok(file)
        });
        let _ = std::fs::remove_file(&tmp);
        // Never populated: a new segment holds no data to read yet, and
        // populating it caches the unwritten file as large folios, so that
        // each later `pwrite` walks every buffer head of its folio in
        // `ext4_block_write_begin` and `block_commit_write` (37% of a
        // prefaulted `fillseq`'s samples; 1M x 1 KiB: 0.23M ops/s against
        // 0.45M unpopulated, docs/performance.md).
        let mo = MapOpts {
            prefault: false,
            ..mo
        };
        Self::map(id, path, linked?, size, mo)
    }

    /// Creates `tmp` with `size` allocated bytes, fsynced.
    fn build(tmp: &Path, size: usize) -> Result<File> {
        let file = crate::fsutil::open_file(
            tmp,
            OpenOptions::new().read(true).write(true).create_new(true),
            0,
            "segment",
        )?;
        crate::failpoint::io_error("segment.create")
            .and_then(|()| file.set_len(size as u64))
            .map_err(|e| Error::io(format!("sizing segment {}", tmp.display()), e))?;
        // Allocate the blocks now: a write through a shared mapping into a
        // hole on a full disk is a SIGBUS, while this fails with ENOSPC as
        // a typed error. Filesystems without fallocate keep a sparse file.
        // SAFETY: plain syscall on an fd we own; no memory is passed.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            let failed = |e| {
                Error::io(
                    format!("allocating {size} bytes for segment {}", tmp.display()),
                    e,
                )
            };
            if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(failed(err));
            }
            // No fallocate: writing the zeros allocates the blocks.
            static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
            let mut at = 0;
            while at < size {
                let n = ZEROS.len().min(size - at);
                file.write_all_at(&ZEROS[..n], at as u64).map_err(failed)?;
                at += n;
            }
        }
        file.sync_all()
            .map_err(|e| Error::io(format!("syncing segment {}", tmp.display()), e))?;
        Ok(file)
    }

    /// Opens an existing segment.
    pub fn open(path: &Path, id: u32, mo: MapOpts) -> Result<Segment> {
        let file = crate::fsutil::open_file(
            path,
            OpenOptions::new().read(true).write(true),
            0,
            "segment",
        )?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("stat of segment {}", path.display()), e))?
            .len();
        // Segments are created at a multiple of 4 KiB (the option is
        // validated), so any other size is a truncation, which would
        // otherwise pass as a log that simply ends early.
        if len < 4096 || len > u64::from(u32::MAX) || len % 4096 != 0 {
            return Err(Error::Corruption(format!(
                "segment {} has size {len}, not a multiple of 4096 between 4 KiB and 4 GiB (truncated?)",
                path.display()
            )));
        }
        Self::map(id, path.to_path_buf(), file, len as usize, mo)
    }

    fn map(id: u32, path: PathBuf, file: File, size: usize, opts: MapOpts) -> Result<Segment> {
        let mut mo = MmapOptions::new();
        mo.len(size);
        if opts.prefault {
            mo.populate();
        }
        let map = mo
            .map_raw(&file)
            .map_err(|e| Error::io(format!("mapping segment {}", path.display()), e))?;
        if opts.random {
            map.advise(memmap2::Advice::Random)
                .map_err(|e| Error::io(format!("madvise of segment {}", path.display()), e))?;
        }
        // `POSIX_FADV_RANDOM`, as RocksDB's `advise_random_on_open`: the
        // buffered reads of this descriptor (MultiScan's owned-buffer
        // extents, `get`'s `pread` of large values) each name exactly the
        // bytes wanted, and kernel readahead past them read neighbours a
        // strided scan never uses. It also raced with the planner: pages of
        // a later range, read ahead by the io-wq worker of an earlier one,
        // were found resident and served through the mapping, not a buffer.
        // Faults on the mapping and `WILLNEED` advice are not affected.
        // SAFETY: plain syscall on a descriptor this segment owns; no memory
        // is passed. It is advice: a refusal costs only the readahead.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        Ok(Segment {
            id,
            path,
            file,
            map,
            size,
            tail: AtomicU64::new(0),
            live: AtomicI64::new(0),
            populated: AtomicUsize::new(0),
            direct: std::sync::OnceLock::new(),
            scan_marks: std::sync::OnceLock::new(),
            verified: std::sync::OnceLock::new(),
        })
    }

    /// The pages of this segment MultiScans read recently, allocated on
    /// first use.
    /// Which values were checked (`value_crc::Verified`), allocated on
    /// first use: 128 KiB for a 64 MiB segment.
    pub(crate) fn verified(&self) -> &super::value_crc::Verified {
        self.verified
            .get_or_init(|| super::value_crc::Verified::new(self.size))
    }

    /// Forgets which values were checked: their pages leave memory.
    pub(crate) fn forget_verified(&self) {
        if let Some(v) = self.verified.get() {
            v.forget();
        }
    }

    pub(crate) fn scan_marks(&self, now: u64) -> &super::marks::PageMarks {
        self.scan_marks
            .get_or_init(|| super::marks::PageMarks::new(self.size, now))
    }

    /// File size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes reserved so far, clamped to the file size.
    pub fn used(&self) -> usize {
        (self.tail.load(Ordering::Acquire) as usize).min(self.size)
    }

    /// A read-only `O_DIRECT` descriptor of this segment, opened on first
    /// use; `None` when the filesystem does not support direct I/O.
    pub(crate) fn direct_file(&self) -> Option<&File> {
        self.direct().map(|(f, _)| f)
    }

    /// The offset and length alignment of `direct_file` reads:
    /// 512 where the device's logical blocks allow it, else a page.
    pub fn direct_align(&self) -> usize {
        self.direct().map_or(DIRECT_ALIGN_MAX, |&(_, a)| a)
    }

    fn direct(&self) -> Option<&(File, usize)> {
        self.direct
            .get_or_init(|| {
                let f = crate::fsutil::open_file(
                    &self.path,
                    OpenOptions::new().read(true),
                    libc::O_DIRECT,
                    "segment",
                )
                .ok()?;
                // One probe read instead of statx(STATX_DIOALIGN), which
                // the libc crate does not expose for glibc: a misaligned
                // O_DIRECT read fails with EINVAL.
                let mut buf = vec![0u8; 2 * DIRECT_ALIGN_MAX];
                let at = buf.as_ptr().align_offset(DIRECT_ALIGN_MAX);
                let probe = buf.get_mut(at..at + DIRECT_ALIGN_MIN);
                let small = probe.is_some_and(|b| f.read_at(b, DIRECT_ALIGN_MIN as u64).is_ok());
                let align = if small {
                    DIRECT_ALIGN_MIN
                } else {
                    DIRECT_ALIGN_MAX
                };
                Some((f, align))
            })
            .as_ref()
    }

    /// The underlying file (for `pread`, `fadvise`, io_uring).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Bytes `[off, off+len)` of the mapping, or `None` if out of range.
    ///
    /// Callers read only published records or, during recovery, a log no
    /// one is writing (see the module invariants).
    pub fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        if end > self.size {
            return None;
        }
        // SAFETY: [off, end) lies inside the live mapping (checked above),
        // which outlives `&self`; the bytes read are immutable under the
        // module invariants, so no write races with this shared borrow.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) })
    }

    /// Writes a record into a range the caller reserved, body and header
    /// first, the commit word last: a crash at any point before that leaves
    /// a zero commit word, which recovery treats as "never written".
    ///
    /// Records of [`PWRITE_MIN_RECORD`] bytes or more go through the file
    /// (two `pwrite`s: everything after the commit word, then the commit
    /// word), smaller ones through the mapping. Pages written through a
    /// shared mapping are write-protected again at every writeback (a
    /// TLB-shootdown IPI per 4 KiB page) and must be faulted in writable
    /// first; the writers do that ahead of themselves
    /// ([`Self::populate_ahead`]), and the IPIs cost less than a syscall per
    /// record, whose ext4 inode lock queues every writer on the one active
    /// file. Pages only ever written with `pwrite` stay mapped read-only.
    /// Readers see the bytes through the mapping either way (one page
    /// cache).
    ///
    /// Returns `Ok(false)` (writing nothing) if the range is misaligned or
    /// out of the file, which the log never asks for.
    pub(crate) fn write_record(
        &self,
        off: usize,
        header: &Header,
        parts: &[&[u8]],
    ) -> Result<bool> {
        let body_len: usize = parts.iter().map(|p| p.len()).sum();
        if !off.is_multiple_of(8) || off + HEADER_LEN + body_len > self.size {
            return Ok(false);
        }
        // Either path may fail in tests (a store through the mapping would
        // fail with SIGBUS, not an error, but the caller's handling is the same).
        crate::failpoint::io_error("segment.write").map_err(|e| self.write_error(off, e))?;
        if !through_mapping(HEADER_LEN + body_len) {
            self.pwrite_record(off, HEADER_LEN + body_len, header, parts)?;
        } else {
            self.store_record(off, header, parts);
        }
        Ok(true)
    }

    /// [`Self::write_record`] through the file (`len`: the whole record,
    /// header included). A record inside one page
    /// goes out in one `pwrite`, commit word included: a buffered write
    /// copies each page (folio) whole under its lock and checks for a
    /// fatal signal only between pages, so a writer killed mid-call leaves
    /// the page's record entirely written or not at all. A record crossing
    /// a page boundary could be cut between pages, so it is written in two
    /// calls, the commit word last. (Power loss is the checksums' and
    /// `msync`'s business either way, as for writes through the mapping.)
    fn pwrite_record(
        &self,
        off: usize,
        len: usize,
        header: &Header,
        parts: &[&[u8]],
    ) -> Result<()> {
        let hdr = header.encode();
        let one_page = off / PAGE_SIZE == (off + len - 1) / PAGE_SIZE;
        // Where the first call starts: with the commit word, or after it.
        let from = if one_page { 0 } else { 8 };
        let io = |e| self.write_error(off, e);
        self.pwrite_parts(off + from, hdr.get(from..).unwrap_or_default(), parts)
            .map_err(io)?;
        if one_page {
            return Ok(());
        }
        self.file
            .write_all_at(&header.commit_word().to_le_bytes(), off as u64)
            .map_err(io)
    }

    /// Copies `parts` to `pos..` through the mapping, for a range already
    /// checked to lie inside the file and reserved by this writer.
    fn store_parts(&self, mut pos: usize, parts: &[&[u8]]) {
        let base = self.map.as_mut_ptr();
        for p in parts {
            // SAFETY: [pos, pos+len) lies inside the range the caller
            // checked to be inside the mapping, which the caller reserved
            // exclusively; `p` is a distinct heap/user buffer, so no
            // overlap.
            unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), base.add(pos), p.len()) };
            pos += p.len();
        }
    }

    /// Writes `parts` at `off`, inside a stretch the caller reserved and
    /// whose header it writes last (`unlogged.rs`): with one `pwrite` from
    /// [`PWRITE_MIN_RECORD`] bytes on, as [`Self::write_record`] does and
    /// for the same reason, else through the mapping. Returns `Ok(false)`
    /// (writing nothing) if the range is out of the file.
    pub(crate) fn write_at(&self, off: usize, parts: &[&[u8]]) -> Result<bool> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if off.checked_add(len).is_none_or(|end| end > self.size) {
            return Ok(false);
        }
        let io = |e| self.write_error(off, e);
        crate::failpoint::io_error("segment.write").map_err(io)?;
        if through_mapping(len) {
            self.store_parts(off, parts);
            return Ok(true);
        }
        self.pwrite_parts(off, &[], parts).map_err(io)?;
        Ok(true)
    }

    /// The error of a failed write at `off`.
    fn write_error(&self, off: usize, e: std::io::Error) -> Error {
        Error::io(
            format!("writing {} at offset {off}", self.path.display()),
            e,
        )
    }

    /// One `pwrite` of `head` followed by `parts` at `off`.
    fn pwrite_parts(&self, off: usize, head: &[u8], parts: &[&[u8]]) -> std::io::Result<()> {
        RECORD.with(|b| {
            let mut b = b.borrow_mut();
            b.clear();
            b.extend_from_slice(head);
            for p in parts {
                b.extend_from_slice(p);
            }
            let r = self.file.write_all_at(&b, off as u64);
            // Keep a small buffer, not the largest record ever written.
            if b.capacity() > 1 << 20 {
                *b = Vec::new();
            }
            r
        })
    }

    /// [`Self::write_record`] through the mapping, for a range already
    /// checked to be 8-aligned and inside the file.
    fn store_record(&self, off: usize, header: &Header, parts: &[&[u8]]) {
        let hdr = header.encode();
        let base = self.map.as_mut_ptr();
        self.store_parts(off + HEADER_LEN, parts);
        // SAFETY: bytes [off+8, off+48) are inside the reserved range.
        unsafe {
            std::ptr::copy_nonoverlapping(hdr.as_ptr().add(8), base.add(off + 8), HEADER_LEN - 8)
        };
        // SAFETY: `off` is 8-aligned and the mapping is page-aligned, so the
        // pointer is valid and aligned for an AtomicU64 for the mapping's
        // lifetime; only this writer stores to it.
        let word = unsafe { AtomicU64::from_ptr(base.add(off).cast::<u64>()) };
        word.store(header.commit_word(), Ordering::Release);
    }

    /// Copies `[off, off+len)` into `out` with `pread` instead of through
    /// the mapping: no page-table work and one I/O for a non-resident
    /// range. The page cache is shared with the mapping, so both see the
    /// same bytes.
    pub fn pread_into(&self, off: usize, len: usize, out: &mut Vec<u8>) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if off.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(Error::Corruption(format!(
                "{} offset {off} (+{len}): value lies outside the file",
                self.path.display()
            )));
        }
        let start = out.len();
        out.resize(start + len, 0);
        self.file
            .read_exact_at(&mut out[start..], off as u64)
            .map_err(|e| {
                Error::io(
                    format!("pread of {} at offset {off}", self.path.display()),
                    e,
                )
            })
    }

    /// Asks the kernel to bring a new segment's pages into the page cache
    /// (`MADV_WILLNEED` over the whole file: readahead; the file's blocks
    /// are unwritten, so the pages are zeroed, nothing is read from disk,
    /// and nothing is mapped). A `pwrite` of a partial page into a page
    /// not yet cached has the kernel zero the rest of the page first, in
    /// the writer's call: 18.6% of all CPU samples of a `fillseq` of
    /// 512-byte values. The thread that prepares the spare segment calls
    /// this, so the writer only copies into the pages it cached. Advisory.
    ///
    /// The kernel reads at most the file's readahead window per call
    /// (`read_ahead_kb`: 8 MiB here), so this caches the start of a 64 MiB
    /// segment, not all of it. Advising it all in 128 KiB chunks was
    /// measured (git `f60b806`, 2026-12-01): the zeroing moved to this thread at twice the
    /// CPU (2.9 s against 1.5 s in the writer for a 3M `fillseq`, perf), and
    /// on two busy cores `fillseq` did not change (median 588k against
    /// 590k ops/s, 4 interleaved rounds).
    pub fn cache_ahead(&self) {
        self.will_need(0, self.size);
    }

    /// After a record stored through the mapping that ends at `end`: when
    /// the pages faulted in ahead of the writers run out within half of
    /// [`POPULATE_AHEAD`], faults the next ones in writable
    /// (`MADV_POPULATE_WRITE`). A writer storing into a page that is not
    /// mapped writable yet faults (the page is read or zeroed, and ext4's
    /// `page_mkwrite` runs) inside its registered window, where every later
    /// writer waits for it: 15% of an 8-byte `insert`'s samples. Called
    /// with no lock held; one caller at a time wins the range. Records
    /// written with `pwrite` never call it, so their pages stay mapped
    /// read-only (§2 of design.md). Advisory: a failure stops the advice.
    pub fn populate_ahead(&self, end: usize) {
        let have = self.populated.load(Ordering::Relaxed);
        if end + POPULATE_AHEAD / 2 <= have || have == usize::MAX {
            return;
        }
        let from = have.max(end.next_multiple_of(PAGE_SIZE));
        let to = (end + POPULATE_AHEAD)
            .next_multiple_of(PAGE_SIZE)
            .min(self.size);
        if to <= from
            || self
                .populated
                .compare_exchange(have, to, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if self
            .map
            .advise_range(memmap2::Advice::PopulateWrite, from, to - from)
            .is_err()
        {
            self.populated.store(usize::MAX, Ordering::Relaxed);
        }
    }

    /// Asks the kernel to start reading `[off, off+len)` into the page cache
    /// (`MADV_WILLNEED`; clamped to the file). Advisory: a failure only
    /// loses the head start, so it is ignored.
    pub fn will_need(&self, off: usize, len: usize) {
        let off = off.min(self.size);
        let len = len.min(self.size - off);
        if len > 0 {
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, off, len);
        }
    }

    /// `msync`s `[off, off+len)` (clamped to the file).
    pub fn flush_range(&self, off: usize, len: usize) -> Result<()> {
        let off = off.min(self.size);
        let len = len.min(self.size - off);
        if len == 0 {
            return Ok(());
        }
        crate::failpoint::io_error("segment.msync")
            .and_then(|()| self.map.flush_range(off, len))
            .map_err(|e| Error::io(format!("msync of {}", self.path.display()), e))
    }

    /// Starts asynchronous writeback of the whole file (no waiting), so a
    /// later `msync` by a checkpoint or sync writer finds little to do.
    ///
    /// The segment's page-table entries are dropped first: writeback
    /// write-protects every page mapped writable, one TLB-shootdown IPI per
    /// 4 KiB page (10% of a 1 KB `insert`'s samples), while dropping them
    /// is one flush for the whole range. Readers fault the pages back in
    /// (read-only, 16 per fault) from the page cache, which keeps them.
    pub fn start_writeback(&self) {
        // SAFETY: the mapping is shared and file-backed, so MADV_DONTNEED
        // drops only page-table entries: a dirty entry's page is marked
        // dirty in the page cache, and any later access, a writer's store
        // still in flight included, faults the same page back in. No byte
        // any reader or writer sees changes, and the range stays mapped.
        // Advisory: on failure writeback simply write-protects each page.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, self.size)
        };
        // SAFETY: plain syscall on an fd we own; no memory is passed.
        // Failure only loses the head start, so the result is ignored.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    /// Makes `[off, off+len)` read back as zeros, keeping its blocks
    /// allocated: `FALLOC_FL_ZERO_RANGE`, or where that is not supported
    /// (tmpfs) a `pwrite` of zeros over the pages that are not zero
    /// already. Never a hole punch: a hole in a mapped file is a SIGBUS at
    /// the next store through the mapping once the disk is full.
    pub(crate) fn zero_range(&self, off: usize, len: usize) -> Result<()> {
        let len = len.min(self.size.saturating_sub(off));
        if len == 0 {
            return Ok(());
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: plain syscall on an fd we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        let err = |e| {
            Error::io(
                format!("zeroing offset {off} (+{len}) of {}", self.path.display()),
                e,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err(e));
        }
        const CHUNK: usize = 64 << 10;
        static ZEROS: [u8; CHUNK] = [0; CHUNK];
        let mut buf = vec![0u8; CHUNK];
        let mut at = off;
        while at < off + len {
            let n = CHUNK.min(off + len - at);
            self.file
                .read_exact_at(&mut buf[..n], at as u64)
                .map_err(err)?;
            if buf[..n].iter().any(|&b| b != 0) {
                self.file
                    .write_all_at(&ZEROS[..n], at as u64)
                    .map_err(err)?;
            }
            at += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::t2::record::{lsn, Kind};

    #[test]
    fn write_then_read_back_and_punch() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let seg = Segment::create(dir.path(), 1, 1 << 16, MapOpts::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let h = Header {
            kind: Kind::Batch,
            count_or_key_len: 1,
            body_len: 5,
            body_crc: crate::crc::crc32c(b"hello"),
            lsn: lsn(1, 64),
            seq: lsn(1, 64),
            extra: 0,
        };
        assert!(matches!(
            seg.write_record(64, &h, &[b"hel", b"lo"]),
            Ok(true)
        ));
        assert!(matches!(seg.write_record(65, &h, &[b"x"]), Ok(false)));
        let b = seg.bytes(64, HEADER_LEN + 5).unwrap_or_default();
        assert_eq!(Header::decode(b), Some(h));
        assert_eq!(&b[HEADER_LEN..], b"hello");
        seg.zero_range(0, 4096).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Header::commit_word_of(seg.bytes(64, 8).unwrap_or_default()),
            0
        );
        assert!(seg.bytes(1 << 16, 1).is_none());
    }

    #[test]
    fn small_and_large_records_read_back_the_same_through_the_mapping() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let seg = Segment::create(dir.path(), 2, 1 << 16, MapOpts::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut off = 0;
        // Below, at and above the pwrite threshold.
        for body_len in [
            8,
            PWRITE_MIN_RECORD - HEADER_LEN - 1,
            PWRITE_MIN_RECORD - HEADER_LEN,
            3000,
        ] {
            let body: Vec<u8> = (0..body_len).map(|i| (i * 7 + body_len) as u8).collect();
            let (a, b) = body.split_at(body_len / 3);
            let h = Header {
                kind: Kind::Batch,
                count_or_key_len: 1,
                body_len: body_len as u32,
                body_crc: crate::crc::crc32c(&body),
                lsn: lsn(2, off as u32),
                seq: lsn(2, off as u32),
                extra: 0,
            };
            assert!(matches!(seg.write_record(off, &h, &[a, b]), Ok(true)));
            let got = seg.bytes(off, HEADER_LEN + body_len).unwrap_or_default();
            assert_eq!(Header::decode(got), Some(h), "body of {body_len}");
            assert_eq!(got.get(HEADER_LEN..), Some(&body[..]), "body of {body_len}");
            assert!(crate::t2::scan::validate_at(&seg, off).is_some());
            off = crate::t2::record::align_up(off + HEADER_LEN + body_len);
        }
    }
}
