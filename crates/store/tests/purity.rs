//! Architecture invariant: the replicated store is pure, like the halves it joins. It depends
//! only on pure crates, and its sources name no I/O, clock, thread, process, randomness or
//! unordered map (the simulator replicates it and must replay a seed bit for bit).

use std::path::Path;

const ALLOWED_DEPENDENCIES: &[&str] = &["kv", "vr", "engine", "sql", "serde", "postcard"];
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
fn store_depends_only_on_pure_crates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let names = dependencies(&manifest);
    assert!(
        names.contains(&"engine".to_string()),
        "the parser finds dependencies"
    );
    for dependency in names {
        assert!(
            ALLOWED_DEPENDENCIES.contains(&dependency.as_str()),
            "store may not depend on {dependency}"
        );
    }
}

#[test]
fn store_sources_name_no_io_clock_thread_randomness_or_unordered_map() {
    let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = 0;
    for entry in std::fs::read_dir(source_dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        files += 1;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for forbidden in FORBIDDEN_IN_SOURCES {
                assert!(
                    !line.contains(forbidden),
                    "{}:{}: names {forbidden}: {line}",
                    path.display(),
                    number + 1
                );
            }
        }
    }
    assert!(files >= 1, "found {files} source files");
}
