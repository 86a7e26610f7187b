//! Architecture invariant: protocol code is pure. Every crate the simulator replays (the
//! replication protocols, the multicast, the stores, the SQL engine and planner, and the cluster
//! data path that joins them) depends only on pure crates and serialisation, and its sources
//! name no I/O, clock, thread, process, OS randomness or unordered map: the runtime and the
//! simulator run the same code, and a seed replays bit for bit.
//!
//! One table for every pure crate (it replaced six per-crate copies of this check, stop 33); a
//! Tessera crate a pure crate depends on must be in the table itself, so purity is closed under
//! dependencies.

use std::path::{Path, PathBuf};

/// Each pure crate and the dependencies it may have.
const PURE_CRATES: &[(&str, &[&str])] = &[
    ("stdx", &[]),
    ("wire", &["serde", "postcard", "crc32c"]),
    ("vr", &["stdx", "wire", "serde"]),
    ("placement", &["stdx", "serde"]),
    (
        "ecast",
        &["placement", "vr", "wire", "stdx", "serde", "postcard"],
    ),
    // imbl: persistent maps (snapshots shared with the checkpoint writer), pure data structures.
    // wire: its byte-string serialisation and exactly sized buffers (checkpoints).
    ("kv", &["vr", "wire", "serde", "postcard", "stdx", "imbl"]),
    ("resp", &["kv"]),
    // rust_decimal: NUMERIC's exact values (pure arithmetic).
    // engine: imbl for rows and index entries (a snapshot is O(1), a write after it O(log n)).
    (
        "engine",
        &["vr", "wire", "serde", "postcard", "rust_decimal", "imbl"],
    ),
    ("sql", &["engine", "sqlparser"]),
    (
        "store",
        &["kv", "vr", "wire", "engine", "sql", "serde", "postcard"],
    ),
    (
        "cluster",
        &[
            "kv",
            "vr",
            "resp",
            "engine",
            "sql",
            "store",
            "ecast",
            "placement",
            "wire",
            "serde",
            "postcard",
        ],
    ),
];

const FORBIDDEN_IN_SOURCES: &[&str] = &[
    "std::net",
    "std::fs",
    "std::io",
    "std::thread",
    "std::time",
    "std::process",
    "std::env",
    "Instant",
    "SystemTime",
    "RandomState",
    "tokio",
    "rand::",
    "HashSet",
    "HashMap",
];

/// Named exceptions: (crate, file name, word), each with its reason.
const ALLOWED_IN_FILE: &[(&str, &str, &str)] = &[
    // The query index's lookup-only tables: never iterated, with a fixed-key hasher.
    ("engine", "query_index.rs", "HashMap"),
    // A unit-test module (`#[cfg(test)]`) that runs the planner on a small-stack thread.
    ("sql", "fuzz_tests.rs", "std::thread"),
];

/// The names in a manifest's `[dependencies]` table.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if in_dependencies && !line.is_empty() && !line.starts_with('#') {
            names.push(
                line.split(['=', '.', ' '])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            );
        }
    }
    names
}

/// The lines of `text` (not comments) that name a forbidden word, as (line number, word), less
/// the words `allowed`.
fn violations(text: &str, allowed: &[&str]) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for forbidden in FORBIDDEN_IN_SOURCES {
            if line.contains(forbidden) && !allowed.contains(forbidden) {
                found.push((number + 1, *forbidden));
            }
        }
    }
    found
}

/// Every `.rs` file under `directory`, at any depth.
fn sources(directory: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn pure_crates_depend_only_on_pure_crates() {
    let crates = crates_dir();
    for (name, allowed) in PURE_CRATES {
        let manifest = std::fs::read_to_string(crates.join(name).join("Cargo.toml")).unwrap();
        let names = dependencies(&manifest);
        for dependency in &names {
            assert!(
                allowed.contains(&dependency.as_str()),
                "{name} may not depend on {dependency}"
            );
            if crates.join(dependency).join("Cargo.toml").exists() {
                assert!(
                    PURE_CRATES.iter().any(|(pure, _)| pure == dependency),
                    "{name} depends on Tessera's {dependency}, which is not checked as pure"
                );
            }
        }
        // The parser found the table (every pure crate but stdx has dependencies).
        assert!(
            *name == "stdx" || !names.is_empty(),
            "no dependencies found for {name}"
        );
    }
}

#[test]
fn pure_sources_name_no_io_clock_thread_randomness_or_unordered_map() {
    let crates = crates_dir();
    for (name, _) in PURE_CRATES {
        let files = sources(&crates.join(name).join("src"));
        assert!(!files.is_empty(), "no sources found for {name}");
        for path in files {
            let file = path.file_name().unwrap().to_str().unwrap();
            let allowed: Vec<&str> = ALLOWED_IN_FILE
                .iter()
                .filter(|(krate, allowed_file, _)| krate == name && *allowed_file == file)
                .map(|(_, _, word)| *word)
                .collect();
            let text = std::fs::read_to_string(&path).unwrap();
            let found = violations(&text, &allowed);
            assert!(
                found.is_empty(),
                "{}: names {found:?} (line, word)",
                path.display()
            );
        }
    }
}

#[test]
fn every_named_exception_is_still_needed() {
    let crates = crates_dir();
    for (krate, file, word) in ALLOWED_IN_FILE {
        let path = sources(&crates.join(krate).join("src"))
            .into_iter()
            .find(|path| path.file_name().is_some_and(|name| name == *file))
            .unwrap_or_else(|| panic!("{krate}/{file} is gone: drop its exception"));
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            !violations(&text, &[]).is_empty() && text.contains(word),
            "{krate}/{file} no longer names {word}: drop its exception"
        );
    }
}

/// The checker's canary: it catches what it must and skips comments.
#[test]
fn the_checker_catches_io_clocks_and_unordered_maps() {
    let source = "use std::time::Instant;\n// std::net in a comment\nlet map: HashMap<u8, u8>;\n";
    assert_eq!(
        violations(source, &[]),
        vec![(1, "std::time"), (1, "Instant"), (3, "HashMap")]
    );
    assert_eq!(
        violations(source, &["HashMap"]),
        vec![(1, "std::time"), (1, "Instant")]
    );
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nvr.workspace = true\ntokio = \"1\"\n[dev-dependencies]\nrand = \"0.8\"\n";
    assert_eq!(dependencies(manifest), vec!["vr", "tokio"]);
}
