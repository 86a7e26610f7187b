//! Architecture invariant: placement is pure. Fails if a dependency or a source line brings in
//! I/O, clocks, threads, OS randomness or unordered maps.

#[test]
fn placement_depends_only_on_pure_crates() {
    let manifest = include_str!("../Cargo.toml");
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a dependencies table");
    let dependencies = dependencies.split("\n[").next().unwrap_or_default();
    for line in dependencies
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
    {
        let name = line.split(['.', ' ', '=']).next().unwrap_or_default();
        assert!(
            ["stdx", "serde"].contains(&name),
            "placement may not depend on {name}"
        );
    }
}

#[test]
fn placement_sources_use_no_io_clock_thread_or_unordered_map() {
    let sources = [
        include_str!("../src/lib.rs"),
        include_str!("../src/position.rs"),
        include_str!("../src/configuration.rs"),
        include_str!("../src/message.rs"),
        include_str!("../src/plan.rs"),
        include_str!("../src/ecast.rs"),
    ];
    let forbidden = [
        "HashMap",
        "HashSet",
        "std::time",
        "Instant",
        "SystemTime",
        "std::thread",
        "std::fs",
        "std::net",
        "std::io",
        "rand::",
    ];
    for source in sources {
        for word in forbidden {
            assert!(!source.contains(word), "a placement source mentions {word}");
        }
    }
}
