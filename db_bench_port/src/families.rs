//! `--num_column_families`, `--num_hot_column_families` and
//! `--column_family_distribution`: db_bench's `DBWithColumnFamilies`.
//!
//! With `--num_column_families=N > 1` the database is opened with the
//! families `default`, `column_family_name_000001`, ... (db_bench's
//! `ColumnFamilyName`), and the benchmarks that db_bench routes through
//! `GetCfh` pick a family from the same random number that picks the key:
//! the fills (`DoWrite`), `readrandom` and its variants (`ReadRandom`) and
//! the Gets of `mixgraph`. Every other benchmark addresses `default` only,
//! as in db_bench, so `readseq` after a 4-family fill sees about a quarter
//! of the keys.
//!
//! `--num_hot_column_families=H` (0 < H < N) opens only the first H
//! families; a fill is split into N / H stages, and each stage creates the
//! next H families and writes to them alone. Reads go to the H families
//! created last. `--column_family_distribution` gives the percentage of
//! operations each hot family receives.
//!
//! With N ≤ 1 nothing here exists: the workloads take their default-family
//! path, unchanged.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

use vmemkv_compat::{Capability, Cf, Db, Error};

use crate::error::{BenchError, Result};
use crate::flags::Flags;

/// db_bench's `ColumnFamilyName(i)`: `default` for 0, else
/// `column_family_name_%06zu`.
pub fn column_family_name(i: usize) -> String {
    if i == 0 {
        Cf::DEFAULT_NAME.to_string()
    } else {
        format!("column_family_name_{i:06}")
    }
}

/// The family settings of a run with `--num_column_families` > 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfConfig {
    /// `--num_column_families`.
    pub num: usize,
    /// Families written and read at a time: `--num_hot_column_families`
    /// when 0 < it < `num`, else `num` (as db_bench's `OpenDb` sets it).
    pub num_hot: usize,
    /// `--column_family_distribution`: percentage per hot family (empty:
    /// uniform).
    pub distribution: Vec<i32>,
}

impl CfConfig {
    /// The settings the flags ask for, or `None` for one family (the
    /// default: every code path as without the flags). The distribution is
    /// checked here, before any database is touched, with db_bench's
    /// messages.
    pub fn from_flags(flags: &Flags) -> Result<Option<CfConfig>> {
        let n = flags.i64("num_column_families");
        if n <= 1 {
            return Ok(None);
        }
        let num = n as usize;
        let hot = flags.i64("num_hot_column_families");
        let num_hot = if hot > 0 && hot < n {
            hot as usize
        } else {
            num
        };
        let text = flags.str("column_family_distribution");
        let mut distribution = Vec::new();
        if !text.is_empty() {
            let flag = "column_family_distribution";
            for item in text.split(',') {
                let p = item.trim().parse::<i32>().map_err(|_| {
                    BenchError::flag(
                        flag,
                        format!("ERROR: illegal value '{text}' specified for string flag '{flag}' (expected comma-separated integer percentages)"),
                    )
                })?;
                distribution.push(p);
            }
            let sum: i64 = distribution.iter().map(|&p| i64::from(p)).sum();
            if sum != 100 {
                return Err(BenchError::flag(
                    flag,
                    "column_family_distribution items must sum to 100",
                ));
            }
            if distribution.len() != num_hot {
                return Err(BenchError::flag(
                    flag,
                    format!(
                        "got {} column_family_distribution items; expected {num_hot}",
                        distribution.len()
                    ),
                ));
            }
        }
        Ok(Some(CfConfig {
            num,
            num_hot,
            distribution,
        }))
    }

    /// db_bench's `ops_per_stage` of a fill of `max_ops` operations: the
    /// fill moves to the next `num_hot` families after this many.
    pub fn ops_per_stage(&self, max_ops: i64) -> i64 {
        let stages = (self.num / self.num_hot).max(1) as i64;
        ((max_ops - 1) / stages + 1).max(1)
    }
}

/// The open families of one database (db_bench's `DBWithColumnFamilies`
/// without the database): `num` handle slots, of which the first
/// `num_created` are filled, the last `num_hot` of those being the ones
/// operations go to.
#[derive(Debug)]
pub struct ColumnFamilies {
    cfg: CfConfig,
    /// Handle ids by family index; 0 until created (index 0 is `default`,
    /// id 0, so an unfilled slot is never read: see `num_created`).
    handles: Box<[AtomicU32]>,
    /// Slots filled; published after the handles it covers.
    num_created: AtomicUsize,
    /// Only one thread creates a stage's families.
    create: Mutex<()>,
}

impl ColumnFamilies {
    /// Opens (or creates) the first `num_hot` families of `db`, as
    /// db_bench's `OpenDb` with `create_missing_column_families`. An engine
    /// without families is refused with the flag and the engine's reason.
    pub fn open(db: &dyn Db, cfg: &CfConfig) -> Result<ColumnFamilies> {
        let caps = db.capabilities();
        if let Some(why) = caps.why_not(Capability::ColumnFamilies) {
            return Err(refused(db.name(), cfg.num, why));
        }
        let mut handles = Vec::new();
        handles.try_reserve_exact(cfg.num).map_err(|_| {
            BenchError::flag(
                "num_column_families",
                format!(
                    "ERROR: --num_column_families={} needs more memory than is available",
                    cfg.num
                ),
            )
        })?;
        handles.resize_with(cfg.num, || AtomicU32::new(0));
        let families = ColumnFamilies {
            cfg: cfg.clone(),
            handles: handles.into_boxed_slice(),
            num_created: AtomicUsize::new(0),
            create: Mutex::new(()),
        };
        for i in 0..cfg.num_hot {
            let cf = families.open_one(db, i)?;
            families.handles[i].store(cf.id(), Ordering::Relaxed);
        }
        families.num_created.store(cfg.num_hot, Ordering::Release);
        Ok(families)
    }

    /// The handle of family `i`, created if the database lacks it. An
    /// engine opens every existing family itself, so one from an earlier
    /// run (`--use_existing_db`) is found by name.
    fn open_one(&self, db: &dyn Db, i: usize) -> Result<Cf> {
        let name = column_family_name(i);
        if let Some(cf) = db.cf_handle(&name) {
            return Ok(cf);
        }
        db.create_cf(&name).map_err(|e| match e {
            // The capability was claimed but the adapter has no families.
            Error::NotSupported(why) => refused(db.name(), self.cfg.num, &why),
            e => BenchError::engine(format!("create column family {name:?} error"), e),
        })
    }

    /// The settings these families were opened with.
    pub fn config(&self) -> &CfConfig {
        &self.cfg
    }

    /// db_bench's `GetCfh(rand_num)`: the hot family that key number
    /// `rand_num` goes to, so that a read finds the family its write used.
    #[inline]
    pub fn get_cfh(&self, rand_num: i64) -> Cf {
        let hot = self.cfg.num_hot;
        let offset = if self.cfg.distribution.is_empty() {
            (rand_num as u64 % hot as u64) as usize
        } else {
            // The items sum to 100 and rand % 100 < 100, so the walk stops
            // at the last item at the latest.
            let target = (rand_num % 100) as i32;
            let mut sum = 0;
            let mut i = 0;
            while i + 1 < hot && sum + self.cfg.distribution[i] < target {
                sum += self.cfg.distribution[i];
                i += 1;
            }
            i
        };
        let created = self.num_created.load(Ordering::Acquire);
        Cf::from_id(self.handles[created - hot + offset].load(Ordering::Relaxed))
    }

    /// db_bench's `CreateNewCf(options, stage)`: the fill reached `stage`,
    /// so families `stage * num_hot` .. `(stage + 1) * num_hot` must exist
    /// and become the hot ones. The first thread to get here creates them.
    pub fn create_new_cf(&self, db: &dyn Db, stage: i64) -> Result<()> {
        let _guard = self
            .create
            .lock()
            .map_err(|_| BenchError::Invariant("column family creation lock poisoned".into()))?;
        let hot = self.cfg.num_hot;
        let created = self.num_created.load(Ordering::Acquire);
        let wanted = (stage.max(0) as usize + 1).saturating_mul(hot);
        if wanted <= created {
            return Ok(());
        }
        let new_created = created + hot;
        if new_created > self.handles.len() {
            return Err(BenchError::Invariant(format!(
                "stage {stage} needs {new_created} column families, more than --num_column_families={}",
                self.cfg.num
            )));
        }
        for i in created..new_created {
            let cf = self.open_one(db, i)?;
            self.handles[i].store(cf.id(), Ordering::Relaxed);
        }
        self.num_created.store(new_created, Ordering::Release);
        Ok(())
    }

    /// Families created so far (`default` included).
    pub fn created(&self) -> usize {
        self.num_created.load(Ordering::Acquire)
    }
}

fn refused(engine: &str, num: usize, why: &str) -> BenchError {
    BenchError::flag(
        "num_column_families",
        format!("ERROR: --num_column_families={num} cannot be honoured for engine {engine}: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Option<CfConfig>> {
        let f = Flags::from_args(args).expect("flags");
        CfConfig::from_flags(&f)
    }

    #[test]
    fn names_are_db_bench_s() {
        assert_eq!(column_family_name(0), "default");
        assert_eq!(column_family_name(1), "column_family_name_000001");
        assert_eq!(column_family_name(1234567), "column_family_name_1234567");
    }

    #[test]
    fn one_family_is_no_families_and_bad_distributions_are_refused() -> Result<()> {
        assert_eq!(cfg(&[])?, None);
        assert_eq!(cfg(&["--num_column_families=1"])?, None);
        assert_eq!(cfg(&["--num_column_families=0"])?, None);
        let c = cfg(&["--num_column_families=4", "--num_hot_column_families=9"])?;
        assert_eq!(c.map(|c| c.num_hot), Some(4));
        let c = cfg(&["--num_column_families=4", "--num_hot_column_families=2"])?;
        assert_eq!(c.map(|c| c.num_hot), Some(2));
        let e = cfg(&[
            "--num_column_families=4",
            "--column_family_distribution=10,20,30",
        ])
        .expect_err("sum");
        assert!(e.to_string().contains("must sum to 100"), "{e}");
        let e = cfg(&[
            "--num_column_families=4",
            "--column_family_distribution=50,50",
        ])
        .expect_err("count");
        assert!(
            e.to_string()
                .contains("got 2 column_family_distribution items; expected 4"),
            "{e}"
        );
        let e = cfg(&[
            "--num_column_families=2",
            "--column_family_distribution=50,x",
        ])
        .expect_err("parse");
        assert!(e.to_string().contains("column_family_distribution"), "{e}");
        // With one family the distribution is not read, as in db_bench.
        assert_eq!(cfg(&["--column_family_distribution=1"])?, None);
        Ok(())
    }

    #[test]
    fn stages_split_a_fill_as_db_bench_does() -> Result<()> {
        let c =
            cfg(&["--num_column_families=10", "--num_hot_column_families=3"])?.expect("families");
        // 10 / 3 = 3 stages; the last family is never written.
        assert_eq!(c.ops_per_stage(900), 300);
        assert_eq!(c.ops_per_stage(1000), 334);
        let c = cfg(&["--num_column_families=4"])?.expect("families");
        assert_eq!(c.ops_per_stage(1000), 1000);
        Ok(())
    }

    fn null_db(dir: &std::path::Path) -> Box<dyn Db> {
        vmemkv_compat::open(
            vmemkv_compat::EngineKind::Null,
            dir,
            &vmemkv_compat::EngineOptions::default(),
        )
        .expect("open null")
    }

    #[test]
    fn keys_go_to_families_by_their_number_and_stages_move_on() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = null_db(&dir.path().join("db"));
        let c = cfg(&["--num_column_families=4"])?.expect("families");
        let f = ColumnFamilies::open(db.as_ref(), &c)?;
        assert_eq!(
            db.cf_names(),
            vec![
                "column_family_name_000001",
                "column_family_name_000002",
                "column_family_name_000003",
                "default"
            ]
        );
        assert_eq!(f.get_cfh(0), Cf::DEFAULT);
        assert_eq!(f.get_cfh(4), Cf::DEFAULT);
        assert_eq!(
            Some(f.get_cfh(7)),
            db.cf_handle("column_family_name_000003")
        );

        let dir2 = tempfile::tempdir().expect("tempdir");
        let db = null_db(&dir2.path().join("db"));
        let c = cfg(&[
            "--num_column_families=4",
            "--num_hot_column_families=2",
            "--column_family_distribution=90,10",
        ])?
        .expect("families");
        let f = ColumnFamilies::open(db.as_ref(), &c)?;
        assert_eq!(db.cf_names().len(), 2);
        let one = db.cf_handle("column_family_name_000001");
        assert_eq!(f.get_cfh(89), Cf::DEFAULT);
        assert_eq!(f.get_cfh(90), Cf::DEFAULT);
        assert_eq!(Some(f.get_cfh(91)), one);
        assert_eq!(Some(f.get_cfh(199)), one);
        f.create_new_cf(db.as_ref(), 0)?;
        assert_eq!(f.created(), 2);
        f.create_new_cf(db.as_ref(), 1)?;
        f.create_new_cf(db.as_ref(), 1)?;
        assert_eq!(f.created(), 4);
        assert_eq!(
            f.get_cfh(0),
            db.cf_handle("column_family_name_000002").expect("cf")
        );
        assert_eq!(
            f.get_cfh(95),
            db.cf_handle("column_family_name_000003").expect("cf")
        );
        assert!(f.create_new_cf(db.as_ref(), 2).is_err());
        Ok(())
    }

    #[test]
    fn an_engine_without_families_is_refused_with_its_reason() {
        use vmemkv_compat::{Capabilities, Limits, ReadOptions, WriteBatch, WriteOptions};
        struct OneKeyspace;
        impl Db for OneKeyspace {
            fn name(&self) -> &'static str {
                "onekeyspace"
            }
            fn limits(&self) -> Limits {
                Limits {
                    max_key_size: None,
                    max_value_size: None,
                }
            }
            fn capabilities(&self) -> Capabilities {
                Capabilities::all().without(Capability::ColumnFamilies, "onekeyspace: one map")
            }
            fn get_into(
                &self,
                _: &ReadOptions,
                _: &[u8],
                _: &mut Vec<u8>,
            ) -> vmemkv_compat::Result<bool> {
                Ok(false)
            }
            fn put(&self, _: &WriteOptions, _: &[u8], _: &[u8]) -> vmemkv_compat::Result<()> {
                Ok(())
            }
            fn delete(&self, _: &WriteOptions, _: &[u8]) -> vmemkv_compat::Result<()> {
                Ok(())
            }
            fn write(&self, _: &WriteOptions, _: &WriteBatch) -> vmemkv_compat::Result<()> {
                Ok(())
            }
            fn iter<'a>(
                &'a self,
                _: &ReadOptions,
            ) -> vmemkv_compat::Result<Box<dyn vmemkv_compat::DbIterator + 'a>> {
                Ok(Box::new(vmemkv_compat::NeverValid(Ok(()))))
            }
            fn property(&self, _: &str) -> Option<String> {
                None
            }
        }
        let c = CfConfig {
            num: 3,
            num_hot: 3,
            distribution: Vec::new(),
        };
        let e = ColumnFamilies::open(&OneKeyspace, &c).expect_err("refused");
        let text = e.to_string();
        assert!(text.contains("--num_column_families=3"), "{text}");
        assert!(text.contains("onekeyspace: one map"), "{text}");
    }
}
