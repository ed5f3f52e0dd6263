//! Compiles the C++ MultiScan shim (`cpp/multiscan_shim.cc`) against the
//! headers of the RocksDB that `librocksdb-sys` bundles (only with the
//! `rocksdb` feature), and records the versions of the rival crates the
//! workspace's Cargo.lock resolved, which the adapters report as their
//! engine's version (db_bench writes it into LOG, where RocksDB's
//! benchmark.sh reads it).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    crate_versions();
    // The cfg mirrors CARGO_FEATURE_ROCKSDB: `cc` is only a build
    // dependency when the feature is on.
    #[cfg(feature = "rocksdb")]
    if std::env::var_os("CARGO_FEATURE_ROCKSDB").is_some() {
        shim::build();
    }
}

/// Sets `VMEMKV_COMPAT_VERSION_<CRATE>` for each rival crate (`-` as `_`), from the
/// workspace's Cargo.lock (`unknown` when compat is built outside it).
fn crate_versions() {
    let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    for name in ["fjall", "sparkey", "librocksdb-sys"] {
        let want = format!("name = \"{name}\"");
        let version = text
            .split("[[package]]")
            .find(|p| p.lines().any(|l| l.trim() == want))
            .and_then(|p| p.lines().find_map(|l| l.trim().strip_prefix("version = ")))
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        println!(
            "cargo:rustc-env=VMEMKV_COMPAT_VERSION_{}={version}",
            name.to_uppercase().replace('-', "_")
        );
    }
}

#[cfg(feature = "rocksdb")]
mod shim {
    use std::env;
    use std::path::PathBuf;

    /// The directory of the `librocksdb-sys` sources. Its build script
    /// publishes it (`links = "rocksdb"`, key `cargo_manifest_dir`), which
    /// Cargo hands to direct dependents as `DEP_ROCKSDB_CARGO_MANIFEST_DIR`.
    fn rocksdb_sys_dir() -> PathBuf {
        match env::var_os("DEP_ROCKSDB_CARGO_MANIFEST_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => fail(
                "DEP_ROCKSDB_CARGO_MANIFEST_DIR is not set: compat must depend directly on librocksdb-sys",
            ),
        }
    }

    fn fail(msg: &str) -> ! {
        eprintln!("vmemkv-compat build script: {msg}");
        std::process::exit(1);
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=cpp/multiscan_shim.cc");
        println!("cargo:rerun-if-env-changed=ROCKSDB_CXX_STD");
        let include = rocksdb_sys_dir().join("rocksdb").join("include");
        let header = include.join("rocksdb").join("multi_scan.h");
        if !header.exists() {
            fail(&format!(
                "{} not found: the bundled RocksDB has no MultiScan API",
                header.display()
            ));
        }
        let target = env::var("TARGET").unwrap_or_default();
        let std_flag = env::var("ROCKSDB_CXX_STD").map_or_else(
            |_| "-std=c++20".to_owned(),
            |s| {
                if s.starts_with("-std=") {
                    s
                } else {
                    format!("-std={s}")
                }
            },
        );
        let mut b = cc::Build::new();
        b.cpp(true)
            .file("cpp/multiscan_shim.cc")
            .include(&include)
            // Same ABI-relevant defines as librocksdb-sys uses for RocksDB.
            .define("NDEBUG", Some("1"))
            .define("HAVE_ALIGNED_NEW", None)
            .flag(&std_flag)
            .flag("-include")
            .flag("cstdint")
            .warnings(true);
        if !target.contains("msvc") {
            b.define("HAVE_UINT128_EXTENSION", None);
        }
        if target.contains("linux") {
            b.define("OS_LINUX", None)
                .define("ROCKSDB_PLATFORM_POSIX", None)
                .define("ROCKSDB_LIB_IO_POSIX", None);
        }
        b.compile("vmemkv_rocksdb_shim");
    }
}
