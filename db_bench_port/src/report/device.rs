//! The device under the larger-than-memory cells: the bytes each run reads
//! from it, and the limit fio measures for each cell's I/O pattern.
//!
//! When values do not fit in memory every engine waits on the same disk, so
//! a ratio between engines says little once both sit at the device's limit.
//! The yardstick is the device itself: fio runs the cell's I/O pattern
//! (block size, queue depth, jobs = threads) in the same report run,
//! interleaved with the engines' repeats so that drift hits both alike. Each
//! engine's run is charged the bytes it read (db_bench's `--device_reads`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::matrix::{Scenario, Workload};

/// A block device, named as `/proc/diskstats` names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    /// e.g. `vda`, `nvme0n1p2`.
    pub name: String,
}

impl Disk {
    /// The device that holds `path`.
    pub fn of(path: &Path) -> Result<Disk, String> {
        let dev = fs::metadata(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .dev();
        // glibc's gnu_dev_major/minor encoding of a 64-bit dev_t.
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
        let text = fs::read_to_string(&uevent).map_err(|e| {
            format!(
                "{} is on device {major}:{minor}, which is not a block device ({uevent}: {e})",
                path.display()
            )
        })?;
        parse_devname(&text)
            .map(|name| Disk { name })
            .ok_or_else(|| format!("{uevent}: no DEVNAME line"))
    }
}

fn parse_devname(uevent: &str) -> Option<String> {
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.trim().to_string())
}

/// What fio does for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Io {
    /// Reads at random offsets.
    RandRead,
    /// One sequential stream of writes per job, as a log appends.
    SeqWrite,
}

/// A cell's I/O pattern: what the device must do for one db_bench
/// operation when nothing is cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pattern {
    /// Read or append.
    pub io: Io,
    /// Bytes per fio I/O.
    pub block: u64,
    /// I/Os in flight per job.
    pub iodepth: u32,
    /// Device bytes one operation needs: the limit in ops/s is fio's
    /// bytes/s over this.
    pub op_bytes: u64,
}

impl Pattern {
    /// `randread 4k qd1`, for tables.
    pub fn label(&self) -> String {
        let io = match self.io {
            Io::RandRead => "randread",
            Io::SeqWrite => "write",
        };
        let per_op = self.op_bytes / self.block.max(1);
        let mut s = format!("{io} {} qd{}", kib(self.block), self.iodepth);
        if per_op > 1 {
            s.push_str(&format!(", {per_op} per op"));
        }
        s
    }
}

fn kib(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}m", b >> 20)
    } else {
        format!("{}k", b.div_ceil(1024))
    }
}

fn flag(wl: &Workload, name: &str) -> Option<u64> {
    let prefix = format!("--{name}=");
    wl.flags
        .iter()
        .find_map(|f| f.strip_prefix(prefix.as_str()))
        .and_then(|v| v.parse().ok())
}

const PAGE: u64 = 4096;

/// The device's work for one operation of `wl` on `sc`, or `None` with the
/// reason when the cell needs no device I/O of its own.
///
/// The floor an engine that knows every value's location can reach: a point
/// read reads its value's pages once; a scan of n keys in a key-ordered
/// corpus reads n values' pages in one piece; a MultiScan of r ranges reads
/// r such pieces, all in flight at once when async; a write appends its key
/// and value to a log.
pub fn pattern(sc: &Scenario, wl: &Workload) -> Result<Pattern, &'static str> {
    let value = sc.value_size as u64;
    let scan_keys = flag(wl, "seek_nexts").filter(|&n| n > 0).unwrap_or(100);
    let read = |block: u64, iodepth: u32, ios: u64| Pattern {
        io: Io::RandRead,
        block,
        iodepth,
        op_bytes: block * ios,
    };
    match wl.bench {
        "gethit_zipf" | "gethit_uniform" => Ok(read(value.div_ceil(PAGE) * PAGE, 1, 1)),
        "scan_zipf" | "scan_uniform" | "ycsb_e" => {
            Ok(read((scan_keys * value).div_ceil(PAGE) * PAGE, 1, 1))
        }
        "multiscan" => {
            let ranges = flag(wl, "multiscan_size").unwrap_or(1).max(1);
            let asynchronous = flag(wl, "multiscan_use_async_io").unwrap_or(1) == 1;
            let depth = if asynchronous { ranges as u32 } else { 1 };
            Ok(read(
                (scan_keys * value).div_ceil(PAGE) * PAGE,
                depth,
                ranges,
            ))
        }
        "update_zipf" | "insert" => Ok(Pattern {
            io: Io::SeqWrite,
            block: 1 << 20,
            iodepth: 1,
            op_bytes: 16 + value,
        }),
        "getmiss_zipf" => Err("a miss needs no device read where keys are in RAM"),
        "delete" => Err("a delete appends a few bytes: not bound by the device"),
        _ => Err("no I/O pattern for this workload"),
    }
}

/// One fio measurement of one cell's pattern.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FioRun {
    /// Scenario name.
    pub scenario: String,
    /// Workload display name.
    pub workload: String,
    /// Threads of the cell = fio jobs.
    pub threads: usize,
    /// Repeat index, interleaved with the engines' repeats.
    pub rep: usize,
    /// The pattern, as [`Pattern::label`] writes it.
    pub pattern: String,
    /// Device bytes one operation needs.
    pub op_bytes: u64,
    /// fio's throughput over all jobs, bytes/s.
    pub bw_bytes: Option<f64>,
    /// The limit: `bw_bytes / op_bytes`.
    pub limit_ops: Option<f64>,
    /// Why there is no figure.
    pub note: Option<String>,
}

/// The device section of `results.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The device under the work directory, or why it is not known.
    pub disk: String,
    /// fio's version and how it ran, or why it did not.
    pub fio: String,
    /// Every fio measurement.
    pub runs: Vec<FioRun>,
}

/// fio, ready to measure patterns on one scratch file.
#[derive(Debug)]
pub struct Fio {
    program: PathBuf,
    ioengine: &'static str,
    file: PathBuf,
    size: u64,
}

/// The fio binary on `PATH`, installed with apt-get when missing and
/// possible; otherwise an error that says how to get it.
pub fn find_fio() -> Result<(PathBuf, String), String> {
    let version = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let fio = PathBuf::from("fio");
    if let Some(v) = version(&fio) {
        return Ok((fio, v));
    }
    // /proc/self belongs to the process's effective user.
    let root = fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root && Path::new("/usr/bin/apt-get").exists() {
        eprintln!("fio missing: installing it with apt-get");
        let ok = Command::new("apt-get")
            .args(["install", "-y", "-qq", "fio"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            if let Some(v) = version(&fio) {
                return Ok((fio, v));
            }
        }
    }
    Err("fio missing (install it: apt-get install fio); no device-limit columns".into())
}

impl Fio {
    /// Lays out a `size`-byte scratch file at `file` for fio to read and
    /// write, on the same device as the corpora.
    pub fn prepare(program: PathBuf, file: PathBuf, size: u64) -> Result<Fio, String> {
        let mut fio = Fio {
            program,
            ioengine: "io_uring",
            file,
            size,
        };
        let layout = Pattern {
            io: Io::SeqWrite,
            block: 1 << 20,
            iodepth: 1,
            op_bytes: 1 << 20,
        };
        if fio.measure(&layout, 1, 0).is_err() {
            // A kernel without io_uring (or a sandbox that forbids it).
            fio.ioengine = "libaio";
        }
        fio.measure(&layout, 1, 0)?;
        Ok(fio)
    }

    /// How fio runs, for the report header.
    pub fn describe(&self) -> String {
        format!(
            "ioengine={}, O_DIRECT, random offsets over a {} MiB file on the corpora's device",
            self.ioengine,
            self.size >> 20
        )
    }

    /// fio's bytes/s for `p` with `jobs` jobs over `secs` seconds (0: one
    /// pass over the file, the layout).
    pub fn measure(&self, p: &Pattern, jobs: usize, secs: u64) -> Result<f64, String> {
        let jobs = jobs.max(1) as u64;
        let mut args = vec![
            "--name=limit".to_string(),
            format!("--filename={}", self.file.display()),
            format!("--ioengine={}", self.ioengine),
            "--direct=1".into(),
            format!("--bs={}", p.block),
            format!("--iodepth={}", p.iodepth),
            format!("--numjobs={jobs}"),
            "--group_reporting".into(),
            "--output-format=json".into(),
        ];
        match p.io {
            Io::RandRead => args.extend([
                "--rw=randread".into(),
                format!("--size={}", self.size),
                "--readonly".into(),
            ]),
            // Each job appends to its own slice of the file, as each
            // writer of a log-structured engine appends to its own tail.
            Io::SeqWrite => {
                let slice = (self.size / jobs) / p.block * p.block;
                args.extend([
                    "--rw=write".into(),
                    format!("--size={}", slice.max(p.block)),
                    format!("--offset_increment={}", slice.max(p.block)),
                ]);
            }
        }
        if secs > 0 {
            args.extend(["--time_based".into(), format!("--runtime={secs}")]);
        }
        let out = Command::new(&self.program)
            .args(&args)
            .output()
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "fio {}: {}",
                args.join(" "),
                err.lines().last().unwrap_or("(no stderr)")
            ));
        }
        parse_fio_bw(&String::from_utf8_lossy(&out.stdout), p.io)
    }
}

/// Bytes/s of the grouped job in fio's `--output-format=json`.
pub fn parse_fio_bw(json: &str, io: Io) -> Result<f64, String> {
    // fio may print warnings before the JSON object.
    let start = json.find('{').ok_or("fio printed no JSON")?;
    let v: serde_json::Value =
        serde_json::from_str(&json[start..]).map_err(|e| format!("fio JSON: {e}"))?;
    let job = &v["jobs"][0];
    if job["error"].as_i64().unwrap_or(0) != 0 {
        return Err(format!("fio job error {}", job["error"]));
    }
    let side = match io {
        Io::RandRead => "read",
        Io::SeqWrite => "write",
    };
    job[side]["bw_bytes"]
        .as_f64()
        .filter(|&b| b > 0.0)
        .ok_or_else(|| format!("fio JSON has no {side}.bw_bytes"))
}

#[cfg(test)]
mod tests {
    use super::super::matrix::{scenarios, workloads, Scale};
    use super::*;

    #[test]
    fn the_device_is_named_from_its_uevent() {
        assert_eq!(
            parse_devname("MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n"),
            Some("vda".into())
        );
        assert_eq!(parse_devname("MAJOR=0\n"), None);
        // Wherever the tests run: a block device's name, or an error that
        // says why there is none (tmpfs, overlay).
        match Disk::of(Path::new(env!("CARGO_MANIFEST_DIR"))) {
            Ok(d) => assert!(!d.name.is_empty()),
            Err(e) => assert!(e.contains("not a block device"), "{e}"),
        }
    }

    #[test]
    fn patterns_follow_the_cells_io() {
        let full = scenarios(Scale::Full);
        let kb = full.iter().find(|s| s.name == "1KB-LTM").expect("1KB-LTM");
        let big = full
            .iter()
            .find(|s| s.name == "64KB-LTM")
            .expect("64KB-LTM");
        let wl = |name: &str| {
            workloads()
                .into_iter()
                .find(|w| w.name == name)
                .expect("workload")
        };
        let get = pattern(kb, &wl("Get Hit (Uniform)")).expect("get");
        assert_eq!(
            (get.io, get.block, get.iodepth, get.op_bytes),
            (Io::RandRead, 4096, 1, 4096)
        );
        assert_eq!(get.label(), "randread 4k qd1");
        let scan = pattern(big, &wl("Scan 100 (Zipf)")).expect("scan");
        assert_eq!((scan.block, scan.op_bytes), (6_553_600, 6_553_600));
        let ms = pattern(kb, &wl("MultiScan async (cold)")).expect("multiscan");
        assert_eq!(
            (ms.block, ms.iodepth, ms.op_bytes),
            (102_400, 15, 15 * 102_400)
        );
        assert_eq!(ms.label(), "randread 100k qd15, 15 per op");
        let sync = pattern(kb, &wl("MultiScan sync (cold)")).expect("multiscan");
        assert_eq!(sync.iodepth, 1);
        let up = pattern(kb, &wl("Update (Zipf)")).expect("update");
        assert_eq!((up.io, up.op_bytes), (Io::SeqWrite, 16 + 1024));
        assert!(pattern(kb, &wl("Get Miss")).is_err());
        assert!(pattern(kb, &wl("Delete")).is_err());
    }

    #[test]
    fn fio_json_gives_the_grouped_bandwidth() {
        let json = "fio: warning\n{\"jobs\":[{\"error\":0,\"read\":{\"bw_bytes\":71268767,\"iops\":17399.6},\"write\":{\"bw_bytes\":0}}]}";
        assert_eq!(parse_fio_bw(json, Io::RandRead), Ok(71_268_767.0));
        assert!(parse_fio_bw(json, Io::SeqWrite).is_err());
        assert!(parse_fio_bw("{\"jobs\":[{\"error\":5}]}", Io::RandRead).is_err());
        assert!(parse_fio_bw("no json", Io::RandRead).is_err());
    }
}
