//! The engine's modules import one way: facade, then subsystems, then the
//! shared state, then T1 and T2 (docs/design.md, "Source map"). This test
//! reads `src/` and fails on any import cycle between top-level modules,
//! and on storage (T2) reaching up into the index or the read path.
//!
//! It parses `crate::` paths textually, which is all the module system
//! lets a sibling use; test-only code at the end of a file is ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`t1/shard.rs` -> `t1`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

/// Code without comments and without the trailing `#[cfg(test)]` module.
fn code_of(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level names a file reaches through `crate::`, including each
/// head of a `crate::{a, b::c}` group.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // e.g. `$crate::`, `vmemkv_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        out.insert(ident_at(&group[j..]).to_string());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident_at(rest).to_string());
        }
    }
    out
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut g = Graph::new();
    for f in &files {
        let Some(m) = module_of(&src, f) else {
            continue;
        };
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let deps = g.entry(m.clone()).or_default();
        for r in crate_refs(&code_of(&text)) {
            if r != m && modules.contains(&r) {
                deps.insert(r);
            }
        }
    }
    g
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct St<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap_or_else(|| unreachable!());
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap_or_else(|| unreachable!());
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = St {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn the_parser_sees_groups_and_paths() {
    let refs =
        crate_refs("use crate::{t2::log::Log, state::Inner};\nlet x = crate::t1::T1::new();");
    let want: BTreeSet<String> = ["t2", "state", "t1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(refs, want);
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("a".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

#[test]
fn engine_modules_form_no_cycle() {
    let g = graph();
    assert!(g.len() > 10, "found only {} modules: {g:?}", g.len());
    let c = cycles(&g);
    assert!(c.is_empty(), "import cycles among engine modules: {c:?}");
}

#[test]
fn storage_does_not_reach_up() {
    let g = graph();
    let deps = |m: &str| g.get(m).cloned().unwrap_or_default();
    let subsystems = [
        "write",
        "read",
        "recovery",
        "checkpointing",
        "statistics",
        "iter",
        "multiscan",
        "maintenance",
        "unlogged",
    ];
    // The facade is on top: nothing imports it.
    for (m, d) in &g {
        assert!(!d.contains("db"), "{m} imports the facade `db`: {d:?}");
    }
    // Shared state sits below every subsystem.
    for up in subsystems {
        assert!(!deps("state").contains(up), "state imports {up}");
    }
    // T1, T2 and the leaf helpers sit below the shared state.
    for low in [
        "t2",
        "t1",
        "crc",
        "fsutil",
        "files",
        "failpoint",
        "stats",
        "prefetch",
        "clock",
    ] {
        for up in subsystems.iter().chain(&["state"]) {
            assert!(
                !deps(low).contains(*up),
                "{low} imports {up}: {:?}",
                deps(low)
            );
        }
    }
    // T2 stores bytes; it knows nothing of the index above it.
    for up in ["t1", "index"] {
        assert!(
            !deps("t2").contains(up),
            "t2 imports {up}: {:?}",
            deps("t2")
        );
    }
    // T1 is self-contained but for T2's value address and the CPU-cache
    // hints, a leaf that imports nothing.
    for d in deps("t1") {
        assert!(d == "t2" || d == "prefetch", "t1 imports {d}");
    }
    for leaf in ["prefetch", "clock"] {
        assert!(deps(leaf).is_empty(), "{leaf} imports {:?}", deps(leaf));
    }
}
