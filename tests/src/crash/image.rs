//! A block device whose crash image can be taken at any moment: ext4 on a
//! loop device, whose backing file lies on XFS (itself on a loop file) with
//! reflinks.
//!
//! A reflink clone of the backing file (`cp --reflink=always`) is taken
//! under XFS's I/O lock after the loop device's writes are flushed into it,
//! so it holds exactly what the device had received: nothing of the ext4
//! page cache above it. Dirty pages of a shared mapping, buffered `pwrite`s
//! and ext4 metadata not yet committed to its journal are lost, as in a
//! power cut. Mounting the clone replays the journal, as a reboot does.
//!
//! Needs root, `mkfs.xfs` (xfsprogs), `mkfs.ext4` and loop devices; no
//! device-mapper.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

/// Sparse sizes: only written blocks take memory or disk.
const XFS_BYTES: u64 = 16 << 30;
const EXT4_BYTES: u64 = 4 << 30;

/// The two file systems of one campaign, unmounted when dropped.
pub struct CrashImage {
    root: PathBuf,
    xfs_mnt: PathBuf,
    ext4_mnt: PathBuf,
    xfs_mounted: bool,
    ext4_mounted: bool,
    lazy_unmounts: Vec<String>,
}

fn run(cmd: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .map_err(|e| format!("{cmd}: {e} (power cuts need {cmd} on PATH)"))?;
    if out.status.success() {
        Ok(())
    } else {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        Err(format!(
            "{cmd} {} failed ({}): {}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn sparse_file(path: &Path, len: u64) -> Result<(), String> {
    std::fs::File::create(path)
        .and_then(|f| f.set_len(len))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Why this process cannot build a crash image, if it cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("power cuts need root (loop devices and mounts)".into());
    }
    for tool in ["mkfs.xfs", "mkfs.ext4", "mount", "umount", "cp"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
        if !found {
            return Some(format!(
                "power cuts need {tool} (apt-get install xfsprogs e2fsprogs)"
            ));
        }
    }
    None
}

impl CrashImage {
    /// Builds both file systems under `root` and mounts ext4 at
    /// [`CrashImage::mount_point`].
    pub fn create(root: &Path) -> Result<CrashImage, String> {
        let xfs_mnt = root.join("xfs");
        let ext4_mnt = root.join("ext4");
        for d in [root, &xfs_mnt, &ext4_mnt] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let mut img = CrashImage {
            root: root.to_path_buf(),
            xfs_mnt,
            ext4_mnt,
            xfs_mounted: false,
            ext4_mounted: false,
            lazy_unmounts: Vec::new(),
        };
        let xfs_img = root.join("xfs.img");
        sparse_file(&xfs_img, XFS_BYTES)?;
        run("mkfs.xfs", &[&"-q", &"-f", &"-m", &"reflink=1", &xfs_img])?;
        run("mount", &[&"-o", &"loop", &xfs_img, &img.xfs_mnt])?;
        img.xfs_mounted = true;
        let dev = img.device();
        sparse_file(&dev, EXT4_BYTES)?;
        run(
            "mkfs.ext4",
            &[
                &"-q",
                &"-F",
                &"-E",
                &"nodiscard,lazy_itable_init=0,lazy_journal_init=0",
                &dev,
            ],
        )?;
        img.mount()?;
        Ok(img)
    }

    /// Where the file system under test is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.ext4_mnt
    }

    fn device(&self) -> PathBuf {
        self.xfs_mnt.join("device.img")
    }

    fn mount(&mut self) -> Result<(), String> {
        // A journal commit every second (default 5) lets short cycles cut
        // before, during and after commits.
        run(
            "mount",
            &[
                &"-o",
                &"loop,commit=1,data=writeback",
                &self.device(),
                &self.ext4_mnt,
            ],
        )?;
        self.ext4_mounted = true;
        Ok(())
    }

    /// Cuts power under `writer`: stops it, clones the device as it stands
    /// and kills the writer. Returns the writer's exit status when it had
    /// ended by itself before the stop. [`CrashImage::reboot`] mounts the
    /// clone.
    pub fn cut(&mut self, writer: &mut Child) -> Result<Option<ExitStatus>, String> {
        let pid = writer.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: plain libc calls on a pid this process spawned and has not
        // reaped, so the pid cannot have been reused; `status` is a valid
        // out-pointer. `WUNTRACED` returns once the child is stopped, or
        // reaps it if it had exited.
        let waited = unsafe {
            libc::kill(pid, libc::SIGSTOP);
            libc::waitpid(pid, &mut status, libc::WUNTRACED)
        };
        let exited = waited == pid && !libc::WIFSTOPPED(status);
        let clone = self.xfs_mnt.join("cut.img");
        let cloned = run("cp", &[&"--reflink=always", &self.device(), &clone]);
        if !exited {
            // SAFETY: as above; the child is stopped and still unreaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            let _ = writer.wait();
        }
        cloned?;
        Ok(exited.then(|| ExitStatus::from_raw(status)))
    }

    /// Mounts the image taken at the last cut in place of the device (ext4
    /// replays its journal), so the next open sees what a reboot would.
    /// Nothing may hold a file of the mount.
    pub fn reboot(&mut self) -> Result<(), String> {
        let clone = self.xfs_mnt.join("cut.img");
        self.unmount_device()?;
        std::fs::rename(&clone, self.device())
            .map_err(|e| format!("{} -> device: {e}", clone.display()))?;
        self.mount()
    }

    fn unmount_device(&mut self) -> Result<(), String> {
        if !self.ext4_mounted {
            return Ok(());
        }
        let mut tries = 0;
        while let Err(e) = run("umount", &[&self.ext4_mnt]) {
            tries += 1;
            if tries < 20 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            // Something of this process still maps or holds a file there:
            // name it, and detach the mount lazily so the campaign goes on.
            let held = held_files(&self.ext4_mnt);
            run("umount", &[&"-l", &self.ext4_mnt])?;
            self.ext4_mounted = false;
            self.lazy_unmounts
                .push(format!("{e}; held by this process: {held}"));
            return Ok(());
        }
        self.ext4_mounted = false;
        Ok(())
    }

    /// Mounts that stayed busy after the engine's handle was dropped, with
    /// what held them: an engine that leaves a file open or mapped.
    pub fn lazy_unmounts(&self) -> &[String] {
        &self.lazy_unmounts
    }
}

/// This process's open files and mappings under `dir`.
fn held_files(dir: &Path) -> String {
    let prefix = dir.to_string_lossy().into_owned();
    let mut held: Vec<String> = std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with(&prefix))
        .map(|p| format!("mapped {p}"))
        .collect();
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        for fd in fds.flatten() {
            if let Ok(t) = std::fs::read_link(fd.path()) {
                if t.starts_with(dir) {
                    held.push(format!("open {}", t.display()));
                }
            }
        }
    }
    held.sort();
    held.dedup();
    if held.is_empty() {
        "nothing found".into()
    } else {
        held.join(", ")
    }
}

impl Drop for CrashImage {
    fn drop(&mut self) {
        let _ = self.unmount_device();
        if self.xfs_mounted && run("umount", &[&self.xfs_mnt]).is_err() {
            let _ = run("umount", &[&"-l", &self.xfs_mnt]);
        }
        let _ = std::fs::remove_file(self.root.join("xfs.img"));
    }
}
