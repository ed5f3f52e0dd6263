//! Compiles the C++ MultiScan shim (`cpp/multiscan_shim.cc`) against the
//! headers of the RocksDB that `librocksdb-sys` bundles. Does nothing unless
//! the `rocksdb` feature is on.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The cfg mirrors CARGO_FEATURE_ROCKSDB: `cc` is only a build
    // dependency when the feature is on.
    #[cfg(feature = "rocksdb")]
    if std::env::var_os("CARGO_FEATURE_ROCKSDB").is_some() {
        shim::build();
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
