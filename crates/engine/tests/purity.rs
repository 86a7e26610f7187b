//! Architecture invariant: the engine is a pure, deterministic state machine. It depends only
//! on `vr` (for the trait), `serde` and `postcard`, and its sources name no I/O, clock, thread,
//! process or randomness, and no unordered map except the query index's lookup-only tables.

use std::path::Path;

/// rust_decimal: NUMERIC's exact values (pure arithmetic, built without std's I/O).
const ALLOWED_DEPENDENCIES: &[&str] = &["vr", "serde", "postcard", "rust_decimal"];
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
    "rand::",
    "HashSet",
    "HashMap",
];
/// Files allowed to name `HashMap`: lookups only, never iterated, fixed-key hasher.
const HASH_MAP_ALLOWED: &[&str] = &["query_index.rs"];

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
                line.split(['=', '.'])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            );
        }
    }
    names
}

#[test]
fn engine_depends_only_on_vr_serde_postcard_and_rust_decimal() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let names = dependencies(&manifest);
    assert!(
        names.contains(&"vr".to_string()),
        "the parser finds dependencies"
    );
    for dependency in names {
        assert!(
            ALLOWED_DEPENDENCIES.contains(&dependency.as_str()),
            "engine may not depend on {dependency}"
        );
    }
}

#[test]
fn engine_sources_name_no_io_clock_thread_randomness_or_unordered_map() {
    let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = 0;
    for entry in std::fs::read_dir(source_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        files += 1;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for forbidden in FORBIDDEN_IN_SOURCES {
                if *forbidden == "HashMap" && HASH_MAP_ALLOWED.contains(&name.as_str()) {
                    continue;
                }
                assert!(
                    !line.contains(forbidden),
                    "{name}:{}: names {forbidden}: {line}",
                    number + 1
                );
            }
        }
    }
    assert!(files >= 10, "found {files} source files");
}
