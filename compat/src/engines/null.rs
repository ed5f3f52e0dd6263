//! The null engine: stores nothing.
//!
//! Every write succeeds and is dropped, every read finds nothing, every
//! cursor is empty and a MultiScan returns each of its ranges empty. It
//! exists so that db_bench can measure itself: the rate a benchmark
//! reaches against `--engine=null` is the harness's own ceiling (key
//! generation, the rate limiter, the histogram, the dispatch through the
//! trait), and a cell near that ceiling measures db_bench, not the engine.
//!
//! It still creates its directory and holds the directory's `LOCK`, as
//! every adapter does, so that db_bench's destroy and its refusal of a
//! database open elsewhere behave exactly as with a real engine.
//!
//! Because it keeps nothing, it is not run by the conformance suite in
//! `tests/` (every read-back case would fail by design); the tests below
//! check that it drops everything and still validates its arguments.
//!
//! # Options
//! None: any `EngineOptions::extra` entry is an `InvalidArgument`.

use std::path::Path;

use crate::lock::DirLock;

use crate::capabilities::Capabilities;
use crate::db::{check_sizes, Db};
use crate::error::Result;
use crate::iter::{DbIterator, NeverValid};
use crate::multiscan::{IterMultiScan, MultiScan, MultiScanArgs};
use crate::options::{EngineOptions, Limits, OptionMap, ReadOptions, WriteOptions};
use crate::{Cf, Families, Snapshot, WriteBatch};

/// The engine's name.
const NAME: &str = "null";

/// What [`Capabilities::discards_writes`] says of it.
pub const DISCARDS: &str = "null: stores nothing (every write is dropped, every read finds nothing); it measures the harness, not an engine";

/// Opens the null engine at `path` (creating the directory and its `LOCK`).
pub fn open(path: &Path, opts: &EngineOptions) -> Result<Box<dyn Db>> {
    OptionMap::new(NAME, opts).finish()?;
    let exists = path.join("LOCK").exists();
    let lock = super::open_dir::prepare(NAME, path, exists, opts)?;
    Ok(Box::new(NullDb {
        _lock: lock,
        families: Families::new(NAME, ()),
    }))
}

/// The adapter: a directory lock and the names of its families (kept in
/// memory only, so that db_bench's `--num_column_families` runs here too).
pub struct NullDb {
    _lock: DirLock,
    families: Families<()>,
}

impl NullDb {
    fn owner(&self) -> usize {
        self as *const NullDb as usize
    }

    /// Checks that a snapshot named in `ro` is this database's, as every
    /// engine does, so a misuse is reported here too.
    fn check_snapshot(&self, ro: &ReadOptions) -> Result<()> {
        if let Some(s) = &ro.snapshot {
            s.downcast::<()>(NAME, self.owner())?;
        }
        Ok(())
    }

    fn check_cf(&self, cf: Cf) -> Result<()> {
        if cf.is_default() {
            return Ok(());
        }
        self.families.get(cf)
    }
}

impl Db for NullDb {
    fn name(&self) -> &'static str {
        NAME
    }

    /// vmemkv's limits, so a run that a real engine would refuse for its
    /// sizes is refused here too rather than measured.
    fn limits(&self) -> Limits {
        Limits {
            max_key_size: Some(u16::MAX as usize),
            max_value_size: Some(16 << 20),
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::all().discarding_writes(DISCARDS)
    }

    fn get_into(&self, opts: &ReadOptions, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.get_cf_into(opts, Cf::DEFAULT, key, out)
    }

    fn get_cf_into(&self, opts: &ReadOptions, cf: Cf, _: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.check_cf(cf)?;
        self.check_snapshot(opts)?;
        out.clear();
        Ok(false)
    }

    fn create_cf(&self, name: &str) -> Result<Cf> {
        self.families.add(name, ())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        let (cf, ()) = self.families.for_drop(name)?;
        self.families.remove(cf);
        Ok(())
    }

    fn cf_handle(&self, name: &str) -> Option<Cf> {
        self.families.handle(name)
    }

    fn cf_names(&self) -> Vec<String> {
        self.families.names()
    }

    fn put_cf(&self, _: &WriteOptions, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_cf(cf)?;
        check_sizes(&self.limits(), key, Some(value))
    }

    fn delete_cf(&self, _: &WriteOptions, cf: Cf, key: &[u8]) -> Result<()> {
        self.check_cf(cf)?;
        check_sizes(&self.limits(), key, None)
    }

    fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot::new(NAME, self.owner(), ()))
    }

    fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf(opts, Cf::DEFAULT, key, value)
    }

    fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        self.delete_cf(opts, Cf::DEFAULT, key)
    }

    fn write(&self, _opts: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        // Checked as a real engine would, so a batch it would refuse is
        // refused here too; then dropped.
        let limits = self.limits();
        for op in batch.iter() {
            self.check_cf(op.cf())?;
            match op {
                crate::BatchOp::Put { key, value, .. } => check_sizes(&limits, key, Some(value))?,
                crate::BatchOp::Delete { key, .. } => check_sizes(&limits, key, None)?,
                crate::BatchOp::DeleteRange { begin, end, .. } => {
                    check_sizes(&limits, begin, None)?;
                    check_sizes(&limits, end, None)?;
                }
            }
        }
        Ok(())
    }

    fn iter<'a>(&'a self, opts: &ReadOptions) -> Result<Box<dyn DbIterator + 'a>> {
        self.iter_cf(opts, Cf::DEFAULT)
    }

    fn iter_cf<'a>(&'a self, opts: &ReadOptions, cf: Cf) -> Result<Box<dyn DbIterator + 'a>> {
        self.check_cf(cf)?;
        self.check_snapshot(opts)?;
        Ok(Box::new(NeverValid(Ok(()))))
    }

    /// Validates `args` as every engine does, then yields each range empty.
    fn multi_scan_cf<'a>(
        &'a self,
        opts: &ReadOptions,
        cf: Cf,
        args: &MultiScanArgs,
    ) -> Result<Box<dyn MultiScan + 'a>> {
        self.check_cf(cf)?;
        self.check_snapshot(opts)?;
        let empty = |_: &ReadOptions| -> Result<Box<dyn DbIterator + 'a>> {
            Ok(Box::new(NeverValid(Ok(()))))
        };
        let ms = IterMultiScan::new(opts, args, empty)?;
        Ok(Box::new(ms))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact_range(&self, _begin: Option<&[u8]>, _end: Option<&[u8]>) -> Result<()> {
        Ok(())
    }

    fn property(&self, name: &str) -> Option<String> {
        match name {
            "null.num-entries" => Some("0".into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{collect_multi_scan, EngineKind, Entries, Error, ScanRange};

    fn open_tmp(dir: &Path) -> Result<Box<dyn Db>> {
        crate::open(EngineKind::Null, dir, &EngineOptions::default())
    }

    #[test]
    fn writes_succeed_and_nothing_is_kept() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = open_tmp(&dir.path().join("db"))?;
        let w = WriteOptions::default();
        db.put(&w, b"a", b"1")?;
        db.delete(&w, b"b")?;
        let mut b = WriteBatch::new();
        b.put(b"c", b"3");
        b.delete_range(b"a", b"z");
        db.write(&WriteOptions::sync(), &b)?;
        let r = ReadOptions::default();
        assert_eq!(db.get(&r, b"a")?, None);
        assert_eq!(db.get(&r, b"c")?, None);
        let mut out = b"stale".to_vec();
        assert!(!db.get_into(&r, b"a", &mut out)?);
        assert!(out.is_empty());
        assert_eq!(Entries::from_first(db.iter(&r)?).count(), 0);
        let mut it = db.iter(&r)?;
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"a");
        assert!(!it.valid() && it.status().is_ok());
        assert_eq!(db.multi_get(&r, &[b"a", b"c"]).len(), 2);
        let args = MultiScanArgs::new(vec![ScanRange::new(b"a", b"c"), ScanRange::unbounded(b"x")]);
        let got = collect_multi_scan(db.multi_scan(&r, &args)?.as_mut())?;
        assert_eq!(got, vec![Vec::new(), Vec::new()]);
        let s = db.snapshot()?;
        assert_eq!(db.get(&r.clone().with_snapshot(&s), b"a")?, None);
        db.flush()?;
        db.wait_for_background_work()?;
        // Families exist by name only; their handles are checked.
        let cf = db.create_cf("users")?;
        assert_eq!(db.cf_handle("users"), Some(cf));
        db.put_cf(&w, cf, b"a", b"1")?;
        assert_eq!(db.get_cf(&r, cf, b"a")?, None);
        db.drop_cf("users")?;
        assert!(db.put_cf(&w, cf, b"a", b"1").is_err());
        assert_eq!(db.cf_names(), vec!["default".to_string()]);
        Ok(())
    }

    #[test]
    fn its_capabilities_say_it_stores_nothing() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = open_tmp(dir.path())?;
        let caps = db.capabilities();
        assert_eq!(caps.discards_writes(), Some(DISCARDS));
        assert!(caps.missing().is_empty());
        assert_eq!(db.name(), "null");
        // A real engine keeps what it is given.
        #[cfg(feature = "vmemkv")]
        {
            let vdir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
            let v = crate::open(EngineKind::Vmemkv, vdir.path(), &EngineOptions::default())?;
            assert_eq!(v.capabilities().discards_writes(), None);
        }
        Ok(())
    }

    #[test]
    fn bad_input_is_refused_as_a_real_engine_refuses_it() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = open_tmp(dir.path())?;
        let r = ReadOptions::default();
        let empty = MultiScanArgs::new(Vec::new());
        assert!(matches!(
            db.multi_scan(&r, &empty),
            Err(Error::InvalidArgument(_))
        ));
        let big = vec![0u8; (16 << 20) + 1];
        assert!(matches!(
            db.put(&WriteOptions::default(), b"k", &big),
            Err(Error::InvalidArgument(_))
        ));
        // The directory is locked while open, as with every engine.
        assert!(matches!(open_tmp(dir.path()), Err(Error::Busy(_))));
        let o = EngineOptions::default().set("bloom", 1);
        let other = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert!(matches!(
            crate::open(EngineKind::Null, other.path(), &o),
            Err(Error::InvalidArgument(m)) if m.contains("bloom")
        ));
        // A snapshot of another database is refused.
        #[cfg(feature = "vmemkv")]
        {
            let vdir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
            let v = crate::open(EngineKind::Vmemkv, vdir.path(), &EngineOptions::default())?;
            let foreign = v.snapshot()?;
            assert!(matches!(
                db.get(&r.clone().with_snapshot(&foreign), b"a"),
                Err(Error::InvalidArgument(_))
            ));
            drop(foreign);
        }
        Ok(())
    }
}
