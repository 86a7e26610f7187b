#!/usr/bin/env python3
"""The Valkey ratchet: which test cases passed in a run of tests/valkey/run.sh, compared with
tests/valkey/expected-passes.txt.

    ratchet.py compare EXPECTED LOGDIR [UNIT ...]
                                         exit 1 if a case listed in EXPECTED (of the UNITs
                                         given, every unit without) did not pass in the logs
                                         of LOGDIR (one log per unit, run.sh's names); prints
                                         the cases that pass and are not listed yet
    ratchet.py list LOGDIR               prints every passing case, in EXPECTED's format
    ratchet.py self-test                 the comparison's own canary: a log that lost a listed
                                         case must fail, one that gained a case must pass

EXPECTED holds one case a line, `unit<TAB>case name` (`#` starts a comment). Only the units
that have a log in LOGDIR are compared: a unit whose log is missing fails every listed case of
it. A case name that appears twice in a unit (Valkey runs some cases in several passes) is
listed once: it must pass at least once.
"""
import os
import re
import sys
import tempfile

ANSI = re.compile(r"\x1b\[[0-9;]*m")
OK = re.compile(r"^\[ok\]: (.*?)(?: \(\d+ ms\))?$")


def log_name(unit):
    """run.sh's log file for a unit (`unit/type/incr` -> `unit_type_incr.log`)."""
    return unit.replace("/", "_") + ".log"


def passes(log_path):
    """The set of case names a unit log reports as passed."""
    names = set()
    with open(log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = OK.match(ANSI.sub("", line.rstrip("\n")))
            if match:
                names.add(match.group(1))
    return names


def read_expected(path):
    """unit -> set of case names."""
    expected = {}
    with open(path, encoding="utf-8") as listing:
        for line in listing:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            unit, _, name = line.partition("\t")
            if not name:
                raise SystemExit(f"ratchet: malformed line in {path}: {line!r}")
            expected.setdefault(unit, set()).add(name)
    return expected


def logged_units(logdir):
    """unit -> its log path, for every run.sh log in logdir."""
    units = {}
    for entry in sorted(os.listdir(logdir)):
        if entry.endswith(".log"):
            units[entry[: -len(".log")].replace("_", "/", 1).replace("unit/type_", "unit/type/")] = (
                os.path.join(logdir, entry)
            )
    return units


def compare(expected, logdir, units=None):
    """(missing, new): listed cases that did not pass, passing cases not listed (over `units`,
    or else the units listed and the units that have a log)."""
    missing, new = [], []
    for unit in sorted(units or set(expected) | set(logged_units(logdir))):
        path = os.path.join(logdir, log_name(unit))
        passed = passes(path) if os.path.exists(path) else set()
        for name in sorted(expected.get(unit, set()) - passed):
            missing.append((unit, name))
        for name in sorted(passed - expected.get(unit, set())):
            new.append((unit, name))
    return missing, new


def main(arguments):
    if len(arguments) >= 3 and arguments[0] == "compare":
        expected = read_expected(arguments[1])
        units = arguments[3:] or None
        if units:
            expected = {unit: names for unit, names in expected.items() if unit in units}
        missing, new = compare(expected, arguments[2], units)
        for unit, name in new:
            print(f"newly passing (add to {arguments[1]}): {unit}\t{name}")
        for unit, name in missing:
            print(f"FAILED (listed as passing): {unit}\t{name}")
        listed = sum(len(names) for names in expected.values())
        print(f"ratchet: {listed - len(missing)} of {listed} listed cases passed, "
              f"{len(new)} new passes")
        return 1 if missing else 0
    if len(arguments) == 2 and arguments[0] == "list":
        for unit, path in logged_units(arguments[1]).items():
            for name in sorted(passes(path)):
                print(f"{unit}\t{name}")
        return 0
    if arguments == ["self-test"]:
        return self_test()
    print(__doc__, file=sys.stderr)
    return 2


def self_test():
    """The canary of the comparison itself."""
    with tempfile.TemporaryDirectory() as directory:
        expected_path = os.path.join(directory, "expected.txt")
        with open(expected_path, "w", encoding="utf-8") as listing:
            listing.write("# comment\nunit/type/incr\tINCR against non existing key\n"
                          "unit/type/incr\tDECR against key created by incr\n")
        log = os.path.join(directory, log_name("unit/type/incr"))
        with open(log, "w", encoding="utf-8") as out:
            out.write("\x1b[32m[ok]\x1b[0m: INCR against non existing key (3 ms)\n"
                      "[err]: DECR against key created by incr in tests/unit/type/incr.tcl\n"
                      "[ok]: A new case (1 ms)\n")
        expected = read_expected(expected_path)
        missing, new = compare(expected, directory)
        assert missing == [("unit/type/incr", "DECR against key created by incr")], missing
        assert new == [("unit/type/incr", "A new case")], new
        with open(log, "a", encoding="utf-8") as out:
            out.write("[ok]: DECR against key created by incr (2 ms)\n")
        missing, _ = compare(expected, directory)
        assert missing == [], missing
        os.remove(log)
        missing, _ = compare(expected, directory)
        assert len(missing) == 2, "a unit without a log fails its listed cases"
    print("ratchet self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
