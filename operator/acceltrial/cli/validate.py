"""``acceltrial validate FILE...``: check trial manifests offline, one line per problem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import yaml

from acceltrial.api.validation import Document, is_trial_candidate, load_documents, validate_trial


def validate_files(paths: list[str], out: TextIO) -> int:
    """Validate every AcceleratorTrial and TrainingTrial in ``paths`` (``-`` is stdin);
    return the exit code."""
    problems = 0
    trials = 0
    for path in paths:
        file_problems, file_trials = _validate_file(path, out)
        problems += file_problems
        trials += file_trials
    if problems == 0 and trials == 0:
        print("no AcceleratorTrial or TrainingTrial found in the given files", file=out)
        return 1
    summary = f"{trials} trial(s) checked, {problems} problem(s)"
    print(summary, file=out)
    return 1 if problems else 0


def _validate_file(path: str, out: TextIO) -> tuple[int, int]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"{path}: cannot read the file: {_reason(error)}", file=out)
        return 1, 0
    try:
        documents = list(load_documents(text))
    except yaml.YAMLError as error:
        print(f"{path}: not valid YAML: {_yaml_reason(error)}", file=out)
        return 1, 0
    problems = 0
    trials = 0
    for document in documents:
        if not is_trial_candidate(document.body):
            continue
        trials += 1
        where = f"{path}#{document.index} {_describe(document)}"
        found = validate_trial(document.body)
        for problem in found:
            print(f"{where}: {problem}", file=out)
        if not found:
            print(f"{where}: valid", file=out)
        problems += len(found)
    return problems, trials


def _describe(document: Document) -> str:
    body = document.body
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(metadata, dict):
        return "(unnamed)"
    name = metadata.get("name") or metadata.get("generateName") or "(unnamed)"
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def _reason(error: OSError | UnicodeDecodeError) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def _yaml_reason(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)
