//! Architecture invariant: E-Cast does no I/O (the same check as `crates/vr/tests/no_io_dependencies.rs`). It may depend only on pure crates,
//! and its sources may not name the standard library's I/O, time, thread or process modules.

use std::path::Path;

const ALLOWED_DEPENDENCIES: &[&str] = &["placement", "vr", "wire", "stdx", "serde", "postcard"];
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
    "HashMap",
    "HashSet",
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
fn ecast_depends_only_on_pure_crates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let names = dependencies(&manifest);
    assert!(
        names.contains(&"placement".to_string()),
        "the parser sees the dependencies"
    );
    for dependency in names {
        assert!(
            ALLOWED_DEPENDENCIES.contains(&dependency.as_str()),
            "ecast may not depend on {dependency}"
        );
    }
    // placement, its routing function, stays pure too.
    let crates = crate_dir.parent().unwrap();
    let placement = std::fs::read_to_string(crates.join("placement/Cargo.toml")).unwrap();
    for dependency in dependencies(&placement) {
        assert!(
            ["stdx", "serde"].contains(&dependency.as_str()),
            "placement may not depend on {dependency}"
        );
    }
}

#[test]
fn ecast_sources_name_no_io_clock_thread_or_unordered_map() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for source_dir in ["ecast/src", "placement/src"] {
        let mut checked = 0;
        for entry in std::fs::read_dir(crates.join(source_dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            checked += 1;
            for (number, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for forbidden in FORBIDDEN_IN_SOURCES {
                    assert!(
                        !line.contains(forbidden),
                        "{}:{}: protocol code names {forbidden}",
                        path.display(),
                        number + 1
                    );
                }
            }
        }
        assert!(checked > 0, "{source_dir} has sources");
    }
}
