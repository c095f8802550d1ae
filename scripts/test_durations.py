"""Where the test suite's time goes: a table per directory of tests/ and the slowest tests, from
the JUnit files pytest writes (``--junitxml``) and, when the run set ACCELTRIAL_TEST_TIMINGS, the
machine's busy CPU time during each test (tests/conftest.py).

    python scripts/test_durations.py artifacts/junit-*.xml [--timings FILE] [--slowest 30]
        [--write-slowest tests/slowest-files.txt]

``--write-slowest`` rewrites the list of the slowest test files that the suite starts first
(tests/conftest.py), from the run's seconds per file.

Busy CPU counts every process on the machine (the control plane, Prometheus, the operator, the
demos' CPU hog), so "busy" is the share of the machine's cores in use during the tests and the
rest is time the machine spent waiting (steps, scrapes, ticks, sleeps, polling).
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def junit_seconds(files: list[Path]) -> dict[str, float]:
    """Seconds per test (setup, call and teardown), by a test ID like pytest's."""
    seconds: dict[str, float] = {}
    for file in files:
        for case in ET.parse(file).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/")
            test_id = f"{path}::{case.get('name')}"
            seconds[test_id] = seconds.get(test_id, 0.0) + float(case.get("time", 0))
    return seconds


def directory(test_id: str) -> str:
    return "/".join(test_id.split("/")[:2])


def busy_by_test(timings: Path | None) -> dict[str, tuple[float, float, int]]:
    if timings is None:
        return {}
    rows = [json.loads(line) for line in timings.read_text().splitlines() if line.strip()]
    return {
        r["test"].replace(".py::", "::"): (r["seconds"], r["busy_cpu_seconds"], r["cores"])
        for r in rows
    }


SLOWEST_FILES_KEPT = 25
HEADER = """\
# The test files that take longest, slowest first: tests/conftest.py runs them first, so make
# test-cluster's workers start on them and the short files fill the gaps at the end.
# Rewritten from a run's timings by:
#   python scripts/test_durations.py artifacts/junit-*.xml --timings artifacts/timings.jsonl \\
#     --write-slowest tests/slowest-files.txt
"""


def write_slowest(seconds: dict[str, float], path: Path) -> None:
    """The ``SLOWEST_FILES_KEPT`` files with the most seconds, slowest first."""
    per_file: dict[str, float] = defaultdict(float)
    for test_id, took in seconds.items():
        per_file[test_id.split("::", 1)[0] + ".py"] += took
    slowest = sorted(per_file, key=lambda name: -per_file[name])[:SLOWEST_FILES_KEPT]
    path.write_text(HEADER + "".join(f"{name}\n" for name in slowest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", type=Path)
    parser.add_argument("--timings", type=Path)
    parser.add_argument("--slowest", type=int, default=30)
    parser.add_argument("--write-slowest", type=Path, help="rewrite tests/slowest-files.txt")
    args = parser.parse_args()
    seconds = junit_seconds(args.junit)
    if args.write_slowest is not None:
        write_slowest(seconds, args.write_slowest)
    busy = busy_by_test(args.timings)
    per_dir: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for test_id, took in seconds.items():
        row = per_dir[directory(test_id)]
        row[0] += 1
        row[1] += took
    for test_id, (took, cpu, cores) in busy.items():
        row = per_dir[directory(test_id)]
        row[2] += cpu
        row[3] += took * cores
    print("| directory | tests | seconds | share | machine busy |")
    print("|---|---:|---:|---:|---:|")
    total = sum(seconds.values())
    for name, (count, took, cpu, capacity) in sorted(per_dir.items(), key=lambda i: -i[1][1]):
        used = f"{cpu / capacity:.0%}" if capacity else "n/a"
        print(f"| {name} | {count:.0f} | {took:.0f} | {took / total:.0%} | {used} |")
    print(f"| total | {len(seconds)} | {total:.0f} | 100% | |")
    print()
    print(f"| slowest {args.slowest} | seconds | machine busy |")
    print("|---|---:|---:|")
    for test_id, took in sorted(seconds.items(), key=lambda i: -i[1])[: args.slowest]:
        match = busy.get(test_id)
        used = f"{match[1] / (match[0] * match[2]):.0%}" if match and match[0] else "n/a"
        print(f"| `{test_id}` | {took:.1f} | {used} |")


if __name__ == "__main__":
    main()
