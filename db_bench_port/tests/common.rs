//! Helpers shared by the integration tests: run the built binary.

#![allow(dead_code)]

use std::process::Command;

/// Exit status, stdout and stderr of one `db_bench` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Both streams, for failure messages.
    pub fn all(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }
}

/// Runs `db_bench` with `args` and extra environment variables.
pub fn db_bench_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_db_bench"));
    cmd.args(args).env_remove("DB_BENCH_ENGINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn db_bench");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `db_bench` with `args`.
pub fn db_bench(args: &[&str]) -> Run {
    db_bench_env(args, &[])
}

/// The result line of benchmark `name` in `stdout`.
pub fn result_line<'a>(stdout: &'a str, name: &str) -> Option<&'a str> {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name:<12} : ")) && l.contains("micros/op"))
}
