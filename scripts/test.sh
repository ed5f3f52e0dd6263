#!/usr/bin/env bash
# The one command that runs every check: formatting, clippy, and all tests
# with every engine compiled in (vmemkv, RocksDB, RocksDB-BlobDB, LMDB).
#
# It installs what the rival engines need (clang and libclang-dev for the
# rocksdb crate's bindgen, liburing-dev for RocksDB's io_uring, fio for the
# report's device-limit columns) when missing, and, as root, xfsprogs and
# e2fsprogs for the power-cut campaign (tests/tests/power_cut.rs: ext4 on a
# loop device over a reflinked XFS file; without root it is skipped).
# The first run compiles RocksDB from C++: about 20-25 minutes on 2 cores.
# Set CARGO_TARGET_DIR to a cache outside the clone to pay that once.
#
# Knobs: VMEMKV_TEST_RIVALS=0 tests vmemkv alone (no C++ build).
#        VMEMKV_TEST_FUZZ_SECS=N runs the libFuzzer differential target for N
#        seconds (default 60; 0 skips it). It installs cargo-fuzz if missing
#        and needs no nightly toolchain (RUSTC_BOOTSTRAP=1).
set -euo pipefail
cd "$(dirname "$0")/.."

rivals="${VMEMKV_TEST_RIVALS:-1}"

install_packages() {
    local missing=()
    if [[ "$1" == rivals ]]; then
        command -v clang >/dev/null 2>&1 || missing+=(clang)
        set -- libclang-dev liburing-dev pkg-config libsnappy-dev fio xfsprogs e2fsprogs
    else
        set -- xfsprogs e2fsprogs
    fi
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        echo "== installing ${missing[*]}"
        local sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
    fi
}

feature_args=()
what="vmemkv only"
[[ $(id -u) -ne 0 ]] || install_packages power-cuts
if [[ "$rivals" != 0 ]]; then
    install_packages rivals
    feature_args=(--all-features)
    what="all features: vmemkv, rocksdb, blobdb, lmdb, fjall, fjall-blob, sparkey"
fi

# One profile (release) for clippy, tests and benchmarks, so RocksDB's C++
# build happens once per target directory.
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (release, $what)"
cargo clippy --release --workspace --all-targets "${feature_args[@]}" -- -D warnings
# The trait crate with no engine at all (TiKV's engine_traits rule): only
# the null engine, vmemkv's adapter being a default feature.
echo "== cargo clippy + test -p vmemkv-compat --no-default-features (no engine)"
cargo clippy --release -p vmemkv-compat --no-default-features --all-targets -- -D warnings
cargo test --release -p vmemkv-compat --no-default-features --lib --quiet
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace "${feature_args[@]}" --quiet
echo "== cargo test (release, $what)"
cargo test --release --workspace "${feature_args[@]}"
# The rocksdb_api examples (compat/examples/): each body runs on the rocksdb
# crate itself and, through the facade, on every compiled-in engine that
# iterates (not null, which stores nothing, nor Sparkey, a hash store with
# no ordered iteration).
facade_examples=(entities prefix_scan snapshot_export)
crate_examples=(prefix_scan snapshot_export entities)
example_engines=(vmemkv)
if [[ "$rivals" != 0 ]]; then
    example_engines=(vmemkv rocksdb blobdb lmdb fjall fjall-blob)
fi
echo "== rocksdb_api examples (${facade_examples[*]} on ${example_engines[*]})"
for ex in "${facade_examples[@]}"; do
    for engine in "${example_engines[@]}"; do
        VMEMKV_ENGINE="$engine" cargo run --quiet --release -p vmemkv-compat "${feature_args[@]}" --example "$ex" >/dev/null ||
            { echo "== example $ex failed on engine $engine"; exit 1; }
    done
done
if [[ "$rivals" != 0 ]]; then
    for ex in "${crate_examples[@]}"; do
        cargo run --quiet --release -p vmemkv-compat "${feature_args[@]}" --example "${ex}_rocksdb" >/dev/null ||
            { echo "== example ${ex}_rocksdb failed on the rocksdb crate"; exit 1; }
    done
fi
fuzz_secs="${VMEMKV_TEST_FUZZ_SECS:-60}"
if [[ "$fuzz_secs" != 0 ]]; then
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "== installing cargo-fuzz"
        cargo install cargo-fuzz --locked --version 0.13.2 --quiet
    fi
    echo "== cargo fuzz run differential (${fuzz_secs} s, seed corpus fuzz/corpus/differential)"
    fuzz_target_args=()
    if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then
        fuzz_target_args=(--target-dir "$CARGO_TARGET_DIR/fuzz")
    fi
    # New units go to a scratch corpus; the committed seed corpus stays as is.
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    mkdir "$scratch/corpus"
    if ! (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run differential "${fuzz_target_args[@]}" \
        "$scratch/corpus" corpus/differential -- -max_total_time="$fuzz_secs" -print_final_stats=1 \
        >"$scratch/log" 2>&1); then
        tail -80 "$scratch/log"
        echo "== fuzzing failed (reproducer in fuzz/artifacts/differential)"
        exit 1
    fi
    grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)|INITED|DONE" "$scratch/log" || true
fi
echo "== all checks passed"
