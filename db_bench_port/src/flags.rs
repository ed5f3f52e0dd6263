//! A gflags-compatible command-line parser over the flag table.
//!
//! Accepted syntax, as gflags accepts it: `--name=value`, `--name value`,
//! one or two leading dashes, `--name`/`--noname` and `--name=true|false|1|0`
//! (also `t/f/y/n/yes/no`) for booleans, dashes and underscores equivalent
//! in names, `--flagfile=FILE[,FILE]`, `--undefok=a,b`, `--fromenv=a,b`,
//! `--tryfromenv=a,b`, `--help`, `--version`, and `--` ending the flags.
//! Errors use gflags' wording so that scripts grepping for them still work.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::flag_table::{
    FlagDef, FlagType, ALIASES, GENERIC_FLAGS, GENERIC_HELP, PORT_FLAGS, PORT_HELP, ROCKSDB_FLAGS,
    UNSUPPORTED_FLAGS,
};

/// A parse failure; the message is printed as is and the process exits 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError {
    /// gflags-style messages, one per line.
    pub message: String,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    /// Run benchmarks with these flags.
    Run(Flags),
    /// `--help`: print this text and exit 1 (as gflags does).
    Help(String),
    /// `--version` / `--build_info`: print this text and exit 0.
    Version(String),
}

/// How the port treats a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagClass {
    /// One of the port's own flags.
    Port,
    /// A db_bench flag honoured for every engine.
    Generic,
    /// A RocksDB tuning flag: forwarded to rocksdb/blobdb, meaningless elsewhere.
    RocksDbTuning,
    /// A db_bench feature the port lacks (the reason is given).
    Unsupported(&'static str),
}

/// The registry of known flags.
#[derive(Debug)]
struct Registry {
    defs: HashMap<&'static str, FlagDef>,
}

impl Registry {
    fn new() -> Self {
        let mut defs = HashMap::new();
        for d in ROCKSDB_FLAGS.iter().chain(PORT_FLAGS.iter()) {
            defs.insert(d.name, *d);
        }
        Registry { defs }
    }

    fn lookup(&self, name: &str) -> Option<FlagDef> {
        let canon = ALIASES
            .iter()
            .find(|(a, _)| *a == name)
            .map_or(name, |(_, c)| *c);
        self.defs.get(canon).copied()
    }
}

/// Normalises a flag name: gflags treats `-` and `_` alike.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

/// Classifies a flag by name.
pub fn classify(name: &str) -> FlagClass {
    if PORT_FLAGS.iter().any(|d| d.name == name) {
        FlagClass::Port
    } else if GENERIC_FLAGS.contains(&name) {
        FlagClass::Generic
    } else if let Some((_, why)) = UNSUPPORTED_FLAGS.iter().find(|(n, _)| *n == name) {
        FlagClass::Unsupported(why)
    } else {
        FlagClass::RocksDbTuning
    }
}

/// The option keys the RocksDB adapter takes (the list is compiled in every
/// build, so `--help` can show it without the `rocksdb` feature).
pub fn rocksdb_option_keys() -> &'static [&'static str] {
    vmemkv_compat::engines::rocksdb_keys::ROCKSDB_OPTION_KEYS
}

/// Whether a flag is forwarded to the RocksDB adapter.
pub fn is_forwarded_to_rocksdb(name: &str) -> bool {
    rocksdb_option_keys().contains(&name)
}

/// Parsed flags: explicitly set values (validated) over the table defaults.
#[derive(Debug, Clone)]
pub struct Flags {
    defs: HashMap<&'static str, FlagDef>,
    values: BTreeMap<&'static str, String>,
    /// Arguments that were not flags (gflags leaves them to the program).
    pub positional: Vec<String>,
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "n" | "no" => Some(false),
        _ => None,
    }
}

fn parse_signed(v: &str) -> Option<i64> {
    let t = v.trim_start();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let mag: i128 = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else {
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        body.parse::<i128>().ok()?
    };
    let v = if neg { -mag } else { mag };
    i64::try_from(v).ok()
}

fn parse_unsigned(v: &str) -> Option<u64> {
    let t = v.trim_start_matches(' ');
    if t.starts_with('-') {
        return None;
    }
    let body = t.strip_prefix('+').unwrap_or(t);
    if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    body.parse::<u64>().ok()
}

/// Validates `value` for a flag of type `ty`, returning the normalised text.
fn validate(ty: FlagType, value: &str) -> Option<String> {
    match ty {
        FlagType::Bool => parse_bool(value).map(|b| b.to_string()),
        FlagType::I32 => parse_signed(value)
            .filter(|v| i32::try_from(*v).is_ok())
            .map(|v| v.to_string()),
        FlagType::I64 => parse_signed(value).map(|v| v.to_string()),
        FlagType::U32 => parse_unsigned(value)
            .filter(|v| u32::try_from(*v).is_ok())
            .map(|v| v.to_string()),
        FlagType::U64 => parse_unsigned(value).map(|v| v.to_string()),
        FlagType::F64 => {
            let t = value.trim();
            if t.is_empty() {
                None
            } else {
                t.parse::<f64>().ok().map(|_| t.to_string())
            }
        }
        FlagType::Str => Some(value.to_string()),
    }
}

fn illegal(def: &FlagDef, value: &str) -> String {
    format!(
        "ERROR: illegal value '{value}' specified for {} flag '{}'",
        def.ty.gflags_name(),
        def.name
    )
}

struct State {
    reg: Registry,
    values: BTreeMap<&'static str, String>,
    unknown: Vec<String>,
    errors: Vec<String>,
    undefok: HashSet<String>,
    positional: Vec<String>,
    help: bool,
    version: bool,
    build_info: bool,
}

const MAX_FLAGFILE_DEPTH: usize = 10;

impl State {
    fn set(&mut self, def: FlagDef, value: &str) {
        match validate(def.ty, value) {
            Some(v) => {
                self.values.insert(def.name, v);
            }
            None => self.errors.push(illegal(&def, value)),
        }
    }

    /// Handles gflags' built-in flags; returns false if `name` is not one.
    fn builtin(&mut self, name: &str, value: Option<&str>, depth: usize) -> bool {
        match name {
            "flagfile" => {
                match value {
                    Some(files) => {
                        for f in files.split(',').filter(|f| !f.is_empty()) {
                            self.flagfile(f, depth + 1);
                        }
                    }
                    None => self
                        .errors
                        .push("ERROR: flag '--flagfile' is missing its argument".into()),
                }
                true
            }
            "undefok" => {
                if let Some(v) = value {
                    self.undefok
                        .extend(v.split(',').filter(|s| !s.is_empty()).map(normalize));
                }
                true
            }
            "fromenv" | "tryfromenv" => {
                for n in value.unwrap_or("").split(',').filter(|s| !s.is_empty()) {
                    let n = normalize(n);
                    let Some(def) = self.reg.lookup(&n) else {
                        self.errors.push(format!(
                            "ERROR: unknown command line flag '{n}' (via --{name})"
                        ));
                        continue;
                    };
                    match std::env::var(format!("FLAGS_{n}")) {
                        Ok(v) => self.set(def, &v),
                        Err(_) if name == "fromenv" => self
                            .errors
                            .push(format!("ERROR: FLAGS_{n} not found in environment")),
                        Err(_) => {}
                    }
                }
                true
            }
            "help" | "helpfull" | "helpshort" | "helpxml" | "helppackage" | "helpon"
            | "helpmatch" => {
                self.help = value.is_none_or(|v| parse_bool(v).unwrap_or(true));
                true
            }
            "version" => {
                self.version = value.is_none_or(|v| parse_bool(v).unwrap_or(true));
                true
            }
            _ => false,
        }
    }

    fn flagfile(&mut self, path: &str, depth: usize) {
        if depth > MAX_FLAGFILE_DEPTH {
            self.errors
                .push(format!("ERROR: flagfile '{path}' nested too deeply"));
            return;
        }
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                self.errors
                    .push(format!("ERROR: cannot read flagfile '{path}': {e}"));
                return;
            }
        };
        // A line without a leading dash is a program-name glob that makes
        // the following flags conditional; we honour "*" and "db_bench".
        let mut relevant = true;
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if !line.starts_with('-') {
                relevant = line
                    .split_whitespace()
                    .any(|g| g == "*" || g.contains("db_bench"));
                continue;
            }
            if !relevant {
                continue;
            }
            let body = line.trim_start_matches('-');
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let name = normalize(name);
            if self.builtin(&name, value, depth) {
                continue;
            }
            // As in gflags, unknown names in a flagfile are ignored.
            if let Some(def) = self.reg.lookup(&name) {
                match (def.ty, value) {
                    (_, Some(v)) => self.set(def, v),
                    (FlagType::Bool, None) => self.set(def, "true"),
                    (_, None) => self.errors.push(format!(
                        "ERROR: flag '{}' in flagfile '{path}' is missing its argument",
                        def.name
                    )),
                }
            } else if let Some(def) = name
                .strip_prefix("no")
                .map(|n| n.strip_prefix('_').unwrap_or(n))
                .and_then(|n| self.reg.lookup(n))
                .filter(|d| d.ty == FlagType::Bool && value.is_none())
            {
                self.set(def, "false");
            }
        }
    }

    fn args(&mut self, args: &[String]) {
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if arg == "--" {
                self.positional.extend(args[i..].iter().cloned());
                return;
            }
            if !arg.starts_with('-') || arg == "-" {
                self.positional.push(arg.clone());
                continue;
            }
            let body = arg.strip_prefix("--").unwrap_or_else(|| &arg[1..]);
            let (typed_name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let name = normalize(typed_name);
            if self.builtin(&name, value, 0) {
                if value.is_none() && name == "flagfile" {
                    // `--flagfile FILE`: the value is the next argument.
                    self.errors.pop();
                    match args.get(i) {
                        Some(f) => {
                            i += 1;
                            for f in f.split(',').filter(|f| !f.is_empty()) {
                                self.flagfile(f, 1);
                            }
                        }
                        None => self
                            .errors
                            .push(format!("ERROR: flag '{arg}' is missing its argument")),
                    }
                } else if value.is_none()
                    && matches!(name.as_str(), "undefok" | "fromenv" | "tryfromenv")
                {
                    if let Some(v) = args.get(i) {
                        i += 1;
                        let v = v.clone();
                        self.builtin(&name, Some(&v), 0);
                    }
                }
                continue;
            }
            if name == "build_info" {
                self.build_info = value.is_none_or(|v| parse_bool(v).unwrap_or(false));
                continue;
            }
            if let Some(def) = self.reg.lookup(&name) {
                match (def.ty, value) {
                    (_, Some(v)) => self.set(def, v),
                    (FlagType::Bool, None) => self.set(def, "true"),
                    (_, None) => match args.get(i) {
                        Some(v) => {
                            i += 1;
                            let v = v.clone();
                            self.set(def, &v);
                        }
                        None => self
                            .errors
                            .push(format!("ERROR: flag '{arg}' is missing its argument")),
                    },
                }
                continue;
            }
            if let Some(def) = name
                .strip_prefix("no")
                .map(|n| n.strip_prefix('_').unwrap_or(n))
                .and_then(|n| self.reg.lookup(n))
                .filter(|d| d.ty == FlagType::Bool)
            {
                match value {
                    None => self.set(def, "false"),
                    Some(v) => self.errors.push(format!(
                        "ERROR: boolean value ({v}) specified for bool flag '{}' using --no{} syntax",
                        def.name, def.name
                    )),
                }
                continue;
            }
            self.unknown.push(typed_name.to_string());
        }
    }
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Parsed, FlagError> {
    let mut st = State {
        reg: Registry::new(),
        values: BTreeMap::new(),
        unknown: Vec::new(),
        errors: Vec::new(),
        undefok: HashSet::new(),
        positional: Vec::new(),
        help: false,
        version: false,
        build_info: false,
    };
    st.args(args);
    let mut errors = std::mem::take(&mut st.errors);
    for u in &st.unknown {
        let n = normalize(u);
        let ok =
            st.undefok.contains(&n) || n.strip_prefix("no").is_some_and(|b| st.undefok.contains(b));
        if !ok {
            errors.push(format!("ERROR: unknown command line flag '{u}'"));
        }
    }
    if st.help {
        return Ok(Parsed::Help(help_text()));
    }
    if st.version || st.build_info {
        return Ok(Parsed::Version(version_text()));
    }
    if !errors.is_empty() {
        return Err(FlagError {
            message: errors.join("\n"),
        });
    }
    Ok(Parsed::Run(Flags {
        defs: st.reg.defs,
        values: st.values,
        positional: st.positional,
    }))
}

/// `--version` text, in gflags' `<prog> version <v>` shape.
pub fn version_text() -> String {
    format!(
        "db_bench version {} (db_bench_port over vmemkv-compat; db_bench flags of RocksDB 11.9)",
        env!("CARGO_PKG_VERSION")
    )
}

fn help_line(out: &mut String, def: &FlagDef, desc: &str) {
    let default = if def.literal {
        def.default
    } else {
        "(engine default)"
    };
    out.push_str(&format!(
        "    -{} ({desc}) type: {} default: {}\n",
        def.name,
        def.ty.gflags_name(),
        if def.ty == FlagType::Str && def.literal {
            format!("\"{default}\"")
        } else {
            default.to_string()
        }
    ));
}

/// Every engine `--engine` names, each not compiled into this binary marked
/// with the cargo feature that adds it.
fn engine_list() -> String {
    use vmemkv_compat::EngineKind;
    EngineKind::ALL
        .iter()
        .map(|&k| {
            if k.is_compiled_in() {
                k.as_str().to_string()
            } else {
                format!("{} (not built: --features {})", k.as_str(), k.feature())
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--help` text: the port's flags, then db_bench's flags grouped by
/// how the port treats them.
pub fn help_text() -> String {
    let mut out = format!(
        "db_bench: RocksDB's db_bench command line, run against any engine of the trait.\n\
         Engines (--engine): {}.\n\
         Usage: db_bench --benchmarks=fillseq,readrandom [--flag=value ...]\n\n\
         Flags from db_bench_port (not in RocksDB's db_bench):\n",
        engine_list()
    );
    for def in PORT_FLAGS {
        let desc = PORT_HELP
            .iter()
            .find(|(n, _)| *n == def.name)
            .map_or("", |(_, h)| *h);
        if def.name == "engine" {
            // Generated from the registry, so a new engine cannot be
            // missing from the line that documents the flag.
            help_line(&mut out, def, &format!("{desc} {}", engine_list()));
        } else {
            help_line(&mut out, def, desc);
        }
    }
    out.push_str("\ndb_bench flags honoured for every engine:\n");
    for def in ROCKSDB_FLAGS
        .iter()
        .filter(|d| classify(d.name) == FlagClass::Generic)
    {
        let desc = GENERIC_HELP
            .iter()
            .find(|(n, _)| *n == def.name)
            .map_or("db_bench semantics", |(_, h)| *h);
        help_line(&mut out, def, desc);
    }
    out.push_str(
        "\nRocksDB-only tuning flags: forwarded to --engine=rocksdb/blobdb where marked, \
         accepted and ignored for every other engine (no meaning there):\n",
    );
    for def in ROCKSDB_FLAGS
        .iter()
        .filter(|d| classify(d.name) == FlagClass::RocksDbTuning)
    {
        let desc = if is_forwarded_to_rocksdb(def.name) {
            "RocksDB option; forwarded to rocksdb/blobdb"
        } else {
            "RocksDB option; not forwarded (reported on stderr when set with rocksdb/blobdb)"
        };
        help_line(&mut out, def, desc);
    }
    out.push_str("\ndb_bench flags the port accepts but does not implement (a warning is printed when set):\n");
    for def in ROCKSDB_FLAGS {
        if let FlagClass::Unsupported(why) = classify(def.name) {
            help_line(&mut out, def, why);
        }
    }
    out.push_str(
        "\nHidden: --engine=harness_test selects an in-process BTreeMap used only to measure \
         harness overhead; it is not a storage engine.\n",
    );
    out
}

impl Flags {
    /// Parses a command line that must be a run (tests and library users).
    pub fn from_args(args: &[&str]) -> Result<Flags, FlagError> {
        let owned: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&owned)? {
            Parsed::Run(f) => Ok(f),
            Parsed::Help(_) | Parsed::Version(_) => Err(FlagError {
                message: "help or version requested".into(),
            }),
        }
    }

    /// Whether `name` was set on the command line or in a flagfile.
    pub fn is_set(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The flags set explicitly, with their normalised values.
    pub fn explicit(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.values.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Sets a flag programmatically (validated like a command-line value).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), FlagError> {
        let def = Registry {
            defs: self.defs.clone(),
        }
        .lookup(name)
        .ok_or_else(|| FlagError {
            message: format!("ERROR: unknown command line flag '{name}'"),
        })?;
        let v = validate(def.ty, value).ok_or_else(|| FlagError {
            message: illegal(&def, value),
        })?;
        self.values.insert(def.name, v);
        Ok(())
    }

    /// The raw text of a flag: its explicit value, else its literal default.
    /// `None` for an unknown flag or an unset one whose default is the
    /// engine's own.
    pub fn raw(&self, name: &str) -> Option<&str> {
        if let Some(v) = self.values.get(name) {
            return Some(v);
        }
        self.defs.get(name).filter(|d| d.literal).map(|d| d.default)
    }

    /// A string flag.
    pub fn str(&self, name: &str) -> String {
        self.raw(name).unwrap_or("").to_string()
    }

    /// A boolean flag (false when unknown).
    pub fn bool(&self, name: &str) -> bool {
        self.raw(name).and_then(parse_bool).unwrap_or(false)
    }

    /// A signed integer flag (0 when unknown).
    pub fn i64(&self, name: &str) -> i64 {
        self.raw(name).and_then(parse_signed).unwrap_or(0)
    }

    /// An unsigned integer flag (0 when unknown).
    pub fn u64(&self, name: &str) -> u64 {
        self.raw(name).and_then(parse_unsigned).unwrap_or(0)
    }

    /// A floating-point flag (0.0 when unknown).
    pub fn f64(&self, name: &str) -> f64 {
        self.raw(name)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    }

    /// Whether an explicitly set flag differs from its default.
    pub fn differs_from_default(&self, name: &str) -> bool {
        match (self.values.get(name), self.defs.get(name)) {
            (Some(v), Some(d)) => !d.literal || validate(d.ty, d.default).as_deref() != Some(v),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_flag_line_names_every_engine() {
        let h = help_text();
        let line = h
            .lines()
            .find(|l| l.trim_start().starts_with("-engine ("))
            .unwrap_or_else(|| panic!("no -engine line in\n{h}"));
        for k in vmemkv_compat::EngineKind::ALL {
            let named = line.split([',', ' ', '(', ')']).any(|w| w == k.as_str());
            assert!(named, "the -engine line lacks {}: {line}", k.as_str());
        }
    }

    #[test]
    fn help_names_every_engine_and_how_to_build_the_missing_ones() {
        let h = help_text();
        for k in vmemkv_compat::EngineKind::ALL {
            assert!(h.contains(k.as_str()), "--help lacks {}", k.as_str());
            if !k.is_compiled_in() {
                assert!(h.contains(&format!("--features {}", k.feature())), "{h}");
            }
        }
    }

    #[test]
    fn integer_forms() {
        assert_eq!(parse_signed("0x10"), Some(16));
        assert_eq!(parse_signed("-5"), Some(-5));
        assert_eq!(parse_signed("1e3"), None);
        assert_eq!(parse_unsigned("-1"), None);
        assert_eq!(validate(FlagType::I32, "3000000000"), None);
    }
}
