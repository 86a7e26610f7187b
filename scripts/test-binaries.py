#!/usr/bin/env python3
"""Lists the test binaries of a `cargo test --no-run --message-format=json` build.

    scripts/test-binaries.py BUILD_JSON --package tessera     that package's test binaries
    scripts/test-binaries.py BUILD_JSON --exclude tessera     every other package's

One line per binary, tab-separated: the package's directory (where `cargo test` runs it), the
executable, and the label `cargo test` prints ("tests/x.rs (target/debug/deps/x-…)"). The order
is cargo's: by package name, a package's unit tests before its integration tests, then by target
name. `scripts/test` runs the two lists side by side (see there, "Two lanes"). A package is named by
its directory (crates/<name>), which is its name for every crate of this workspace.
"""

import json
import os
import sys


def binaries(build_json):
    found = []
    with open(build_json, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if message.get("reason") != "compiler-artifact":
                continue
            if not message.get("executable") or not message["profile"]["test"]:
                continue
            directory = os.path.dirname(message["manifest_path"])
            target = message["target"]
            package = os.path.basename(directory)
            source = os.path.relpath(target["src_path"], directory)
            unit = "test" not in target["kind"]
            executable = message["executable"]
            shown = os.path.relpath(executable, os.path.dirname(os.path.dirname(directory)))
            label = ("unittests " if unit else "") + f"{source} ({shown})"
            found.append((package, 0 if unit else 1, target["name"], directory, executable, label))
    found.sort()
    return found


def main(argv):
    if len(argv) != 4 or argv[2] not in ("--package", "--exclude"):
        sys.exit(__doc__)
    build_json, mode, package = argv[1], argv[2], argv[3]
    listed = binaries(build_json)
    if not any(entry[0] == package for entry in listed):
        sys.exit(f"test-binaries: no test binary of package {package!r} in {build_json}")
    for name, _, _, directory, executable, label in listed:
        if (name == package) == (mode == "--package"):
            print(f"{directory}\t{executable}\t{label}")


if __name__ == "__main__":
    main(sys.argv)
