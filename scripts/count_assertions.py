"""How many assertions the test suite makes, counted in its source: every ``assert`` statement,
every ``pytest.raises`` / ``pytest.warns`` / ``pytest.fail`` call, per directory of tests/.

    python scripts/count_assertions.py            # the working tree
    python scripts/count_assertions.py --rev REV  # a commit, read with git (e.g. before a change)

A statement counts once however often it runs (a loop, a parametrized test): the count says
whether a change removed checks from the suite, not how many times they execute.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CALLS = {"raises", "warns", "fail"}


def sources(rev: str | None) -> dict[str, str]:
    """Every Python file under tests/, by path, at ``rev`` (or in the working tree)."""
    if rev is None:
        return {str(p.relative_to(REPO)): p.read_text() for p in REPO.glob("tests/**/*.py")}
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "tests/"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    files = {}
    for path in listed:
        if path.endswith(".py"):
            shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO,
                                   capture_output=True, text=True, check=True)  # fmt: skip
            files[path] = shown.stdout
    return files


def assertions(source: str) -> int:
    return sum(1 for node in ast.walk(ast.parse(source)) if _checks(node))


def _checks(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CALLS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision (default: the working tree)")
    args = parser.parse_args()
    per_directory: Counter[str] = Counter()
    for path, source in sources(args.rev).items():
        per_directory["/".join(Path(path).parts[:2])] += assertions(source)
    for directory, count in sorted(per_directory.items()):
        print(f"{directory:24} {count:5}")
    print(f"{'total':24} {sum(per_directory.values()):5}")


if __name__ == "__main__":
    main()
