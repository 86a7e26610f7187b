//! Architecture invariant: the cluster's data path (`cluster`) is pure, so the simulator runs the
//! same `PartitionStore`, payloads and transaction driver as the runtime. Its dependencies are
//! Tessera's pure crates and serialisation only, and its sources may not name the standard
//! library's I/O, time, thread or process modules, tokio or OS randomness (the same check as
//! `crates/ecast/tests/no_io_dependencies.rs`).

use std::path::Path;

const ALLOWED_DEPENDENCIES: &[&str] = &[
    "kv",
    "vr",
    "resp",
    "engine",
    "sql",
    "store",
    "ecast",
    "placement",
    "serde",
    "postcard",
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
    "tokio",
    "rand::",
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
fn cluster_depends_only_on_pure_crates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let names = dependencies(&manifest);
    assert!(
        names.contains(&"store".to_string()),
        "the parser sees the dependencies"
    );
    for dependency in names {
        assert!(
            ALLOWED_DEPENDENCIES.contains(&dependency.as_str()),
            "cluster may not depend on {dependency}"
        );
    }
}

#[test]
fn cluster_sources_name_no_io_clock_thread_or_os_randomness() {
    let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for entry in std::fs::read_dir(&source_dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        checked += 1;
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for forbidden in FORBIDDEN_IN_SOURCES {
                assert!(
                    !code.contains(forbidden),
                    "{}:{}: names {forbidden}: {line}",
                    path.display(),
                    number + 1
                );
            }
        }
    }
    assert!(checked >= 3, "the test reads the crate's sources");
}
