//! `db_bench`: RocksDB's benchmark command line over vmemkv-compat engines.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(db_bench_port::main_with_args(&args));
}
