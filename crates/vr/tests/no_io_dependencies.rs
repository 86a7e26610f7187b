//! Architecture invariant: the protocol crate does no I/O. It may depend only on pure crates,
//! and its sources may not name the standard library's I/O, time, thread or process modules.

use std::path::Path;

const ALLOWED_DEPENDENCIES: &[&str] = &["stdx", "wire", "serde"];
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
fn vr_depends_only_on_pure_crates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    for dependency in dependencies(&manifest) {
        assert!(
            ALLOWED_DEPENDENCIES.contains(&dependency.as_str()),
            "vr may not depend on {dependency}"
        );
    }
    // And the pure crates it uses stay pure: stdx has no dependencies, wire only encoding ones.
    let crates = crate_dir.parent().unwrap();
    let stdx = std::fs::read_to_string(crates.join("stdx/Cargo.toml")).unwrap();
    assert!(dependencies(&stdx).is_empty(), "stdx has no dependencies");
    let wire = std::fs::read_to_string(crates.join("wire/Cargo.toml")).unwrap();
    for dependency in dependencies(&wire) {
        assert!(
            ["serde", "postcard", "crc32c"].contains(&dependency.as_str()),
            "wire may not depend on {dependency}"
        );
    }
}

#[test]
fn protocol_sources_name_no_io_clock_thread_or_unordered_map() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for source_dir in ["vr/src", "stdx/src", "wire/src"] {
        for entry in std::fs::read_dir(crates.join(source_dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
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
    }
}
