#!/usr/bin/env python3
"""Record an AcceleratorTrial in every phase from real demo runs, as Argo CD test data.

Runs ``acceltrial demo`` on a few scenarios (the local control plane, the simulated fleet, a real
Prometheus and the unchanged operator), watches the trial on the demo's API server, acts as a
person would at the right moments (pause, resume, approve, abort, a spec edit) and writes, for
each state the trial passed through, the last object seen in it (without a pending action
annotation) to
``integrations/argocd/resource_customizations/acceltrial.dev/AcceleratorTrial/testdata/``.
The health check, the resource actions and the kstatus conditions are tested on these files.

Usage (about 2-3 minutes; run it again after a change to the status the operator writes, then
review the diff and the messages in health_test.yaml):

    .venv/bin/python scripts/record_trial_phases.py [--only RUN ...] [--actions-only] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "examples" / "scenarios"
CUSTOMIZATION = (
    ROOT / "integrations" / "argocd" / "resource_customizations" / "acceltrial.dev"
) / "AcceleratorTrial"
TESTDATA = CUSTOMIZATION / "testdata"
TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/{}/acceleratortrials"
ACTION = "acceltrial.dev/action"
KEPT_RESULTS = 4
"""status.analysis keeps up to 64 results; the test data keeps the newest few."""

Object = dict[str, Any]


def state(obj: Object) -> str:
    """The test-data name of the state a trial is in (also the file name, after its health)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    phase = status.get("phase")
    if phase is None:
        return "progressing_noStatus"
    observed = status.get("observedGeneration")
    if observed is not None and observed < meta.get("generation", 0):
        return "progressing_newGeneration"
    held = any(
        c.get("type") == "SpecChangeRejected" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if held and phase not in ("RollingBack", "RolledBack", "Failed", "Aborted"):
        return "degraded_specChangeRejected"
    if phase == "Paused":
        return {
            "User": "suspended_userPause",
            "Inconclusive": "suspended_inconclusive",
            "AwaitingApproval": "suspended_awaitingApproval",
        }[status.get("pauseReason")]
    if phase == "Progressing":
        return "progressing_awaitingCandidate" if not status.get("step") else "progressing_step"
    health = {"Promoted": "healthy", "RolledBack": "degraded", "Failed": "degraded"}
    health["Aborted"] = "degraded"
    return f"{health.get(phase, 'progressing')}_{phase[0].lower()}{phase[1:]}"


@dataclass
class Trigger:
    """Once ``when`` holds of the trial for ``hold`` seconds, ``do`` is applied to it."""

    when: Callable[[Object], bool]
    do: Object
    """A JSON merge patch of the trial (an action annotation or a spec edit)."""
    hold: float = 0.0


def annotate(action: str) -> Object:
    return {"metadata": {"annotations": {ACTION: action}}}


def in_state(name: str, generation: int = 1) -> Callable[[Object], bool]:
    def check(obj: Object) -> bool:
        observed = (obj.get("status") or {}).get("observedGeneration")
        return state(obj) == name and observed == generation and not _pending_action(obj)

    return check


@dataclass
class Run:
    """One demo run: a shipped scenario, a patch of its trial and what a person does."""

    name: str
    scenario: str
    patch: Object
    ends: str
    triggers: list[Trigger] = field(default_factory=list)


SHORT_BAKE = {"spec": {"promotion": {"bakeTime": "1s"}}}
"""A bake shorter than one analysis interval is not measured: these runs are about the phases,
and the promote scenario's cost at 100% on one candidate replica is close to its limit."""

RUNS = [
    Run(
        "promote-with-pause",
        "promote",
        SHORT_BAKE,
        "Promoted",
        [
            Trigger(in_state("progressing_step"), annotate("pause")),
            # An edit that is not frozen at the start: the operator observes the new generation.
            Trigger(in_state("suspended_userPause"), {"spec": {"progressDeadline": "90s"}}, hold=2),
            Trigger(in_state("suspended_userPause", generation=2), annotate("resume"), hold=1),
        ],
    ),
    Run(
        "manual-approval",
        "promote",
        {"spec": {"promotion": {"mode": "manual", "bakeTime": "1s"}}},
        "Promoted",
        [Trigger(in_state("suspended_awaitingApproval"), annotate("approve"), hold=2)],
    ),
    Run(
        "inconclusive-then-abort",
        "no-traffic",
        {"spec": {"analysis": {"onInconclusive": "pause"}}},
        "Aborted",
        [
            # A frozen field: the operator refuses the change and holds the trial.
            Trigger(
                in_state("suspended_inconclusive"), {"spec": {"analysis": {"failureLimit": 1}}}, 2
            ),
            Trigger(in_state("degraded_specChangeRejected", generation=2), annotate("abort"), 2),
        ],
    ),
    Run("latency-regression", "latency-regression", {}, "RolledBack"),
    # No inf2.48xlarge node in the demo's cluster: preflight fails and nothing is created.
    Run(
        "no-capacity",
        "promote",
        {"spec": {"candidate": {"instanceType": "inf2.48xlarge"}}},
        "Failed",
    ),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only these (names in RUNS)")
    parser.add_argument(
        "--actions-only",
        action="store_true",
        help="only rewrite the actions' expected outputs from the recorded trials",
    )
    parser.add_argument(
        "--out", type=Path, default=TESTDATA, help="write here instead (to compare, not commit)"
    )
    args = parser.parse_args()
    runs = [r for r in RUNS if not args.actions_only and (not args.only or r.name in args.only)]
    args.out.mkdir(parents=True, exist_ok=True)
    for run in runs:
        recorded = record(run)
        for name, obj in sorted(recorded.items()):
            write(args.out / f"{name}.yaml", obj, run)
        print(f"{run.name}: {', '.join(sorted(recorded))}", flush=True)
    if args.out == TESTDATA:
        write_action_outputs()
    return 0


def write_action_outputs() -> None:
    """Each action test's expected output: its recorded input with the action's annotation."""
    actions = CUSTOMIZATION / "actions"
    tests = yaml.safe_load((actions / "action_test.yaml").read_text())["actionTests"]
    for test in tests:
        source = actions / test["inputPath"]
        obj = yaml.safe_load(source.read_text())
        obj["metadata"].setdefault("annotations", {})[ACTION] = test["action"]
        header = (
            f"# {source.name} (recorded, see its header) with the annotation the {test['action']}\n"
            "# action adds; written by scripts/record_trial_phases.py.\n"
        )
        target = actions / test["expectedOutputPath"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header + yaml.safe_dump(obj, sort_keys=False))


def record(run: Run) -> dict[str, Object]:
    """The last object of each state the trial passed through in one demo run."""
    with tempfile.TemporaryDirectory(prefix="acceltrial-record-") as folder:
        scenario = _scenario_file(run, Path(folder))
        command = [str(Path(sys.executable).parent / "acceltrial"), "demo", "--scenario", scenario]
        demo = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            return _watch(run, demo)
        finally:
            if demo.poll() is None:
                demo.terminate()
            demo.wait(timeout=60)


def _scenario_file(run: Run, folder: Path) -> str:
    raw = yaml.safe_load((SCENARIOS / f"{run.scenario}.yaml").read_text())
    raw["trial"]["file"] = str(SCENARIOS / raw["trial"]["file"])
    raw["trial"]["patch"] = _merged(raw["trial"].get("patch") or {}, run.patch)
    raw["expect"] = {"phase": run.ends}
    path = folder / f"{run.name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _watch(run: Run, demo: subprocess.Popen[str]) -> dict[str, Object]:
    assert demo.stdout is not None
    url = None
    for line in demo.stdout:
        if "local control plane at " in line:
            url = line.split("local control plane at ", 1)[1].split()[0]
            break
    if url is None:
        raise SystemExit(f"{run.name}: the demo did not say where its control plane is")
    namespace, name = _trial_name(run)
    objects: list[Object] = []
    threading.Thread(target=_stream, args=(url, namespace, objects), daemon=True).start()
    threading.Thread(target=_echo, args=(demo,), daemon=True).start()
    path = f"{url}{TRIALS.format(namespace)}/{name}"
    recorded: dict[str, Object] = {}
    triggers, since, seen = list(run.triggers), None, 0
    while demo.poll() is None or seen < len(objects):
        for obj in objects[seen:]:
            if not _pending_action(obj):
                recorded[state(obj)] = obj
        seen = len(objects)
        latest = objects[-1] if objects else None
        if triggers and latest is not None and triggers[0].when(latest):
            since = since or time.monotonic()
            if time.monotonic() - since >= triggers[0].hold:
                _merge(path, triggers.pop(0).do)
                since = None
        else:
            since = None
        time.sleep(0.1)
    if demo.returncode != 0 or triggers:
        raise SystemExit(f"{run.name}: the demo exited {demo.returncode}; {len(triggers)} left")
    return recorded


def _trial_name(run: Run) -> tuple[str, str]:
    trial = yaml.safe_load((SCENARIOS / "trial.yaml").read_text())
    return trial["metadata"]["namespace"], trial["metadata"]["name"]


def _stream(url: str, namespace: str, objects: list[Object]) -> None:
    """Every version of the trial, as the API server's watch delivers them."""
    query = urllib.parse.urlencode({"watch": "true", "timeoutSeconds": "600"})
    with urllib.request.urlopen(f"{url}{TRIALS.format(namespace)}?{query}", timeout=600) as reply:
        for line in reply:
            event = json.loads(line)
            if event.get("type") in ("ADDED", "MODIFIED"):
                objects.append(event["object"])


def _echo(demo: subprocess.Popen[str]) -> None:
    assert demo.stdout is not None
    for line in demo.stdout:
        print(f"    {line}", end="", flush=True)


def _merge(path: str, patch: Object) -> None:
    request = urllib.request.Request(path, data=json.dumps(patch).encode(), method="PATCH")
    request.add_header("Content-Type", "application/merge-patch+json")
    with urllib.request.urlopen(request, timeout=10):
        print(f"    (recorder) patched the trial: {json.dumps(patch)}", flush=True)


def _pending_action(obj: Object) -> bool:
    return ACTION in ((obj.get("metadata") or {}).get("annotations") or {})


def write(path: Path, obj: Object, run: Run) -> None:
    name = path.stem
    clean = _stripped(obj)
    header = (
        f"# Recorded by scripts/record_trial_phases.py from `acceltrial demo` run {run.name!r}\n"
        f"# (scenario examples/scenarios/{run.scenario}.yaml, trial patch "
        f"{json.dumps(run.patch)}):\n"
        f"# the trial as the API server last held it in state {name.split('_', 1)[1]!r}.\n"
        "# Stripped: uid, resourceVersion, creationTimestamp, managedFields, kopf's bookkeeping\n"
        "# annotations;\n"
        f"# status.analysis keeps its newest {KEPT_RESULTS} results; the demo's Prometheus "
        "address\n# is put back to the trial's.\n"
    )
    path.write_text(header + yaml.safe_dump(clean, sort_keys=False))


def _stripped(obj: Object) -> Object:
    clean = copy.deepcopy(obj)
    meta = clean["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        meta.pop(key, None)
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k not in ("acceltrial.dev/kopf-managed", "acceltrial.dev/last-handled-configuration")
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    trial = yaml.safe_load((SCENARIOS / "trial.yaml").read_text())
    clean["spec"]["analysis"]["prometheus"] = trial["spec"]["analysis"]["prometheus"]
    status = clean.get("status") or {}
    if status.get("analysis"):
        status["analysis"] = status["analysis"][-KEPT_RESULTS:]
    return clean


def _merged(base: Object, patch: Object) -> Object:
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


if __name__ == "__main__":
    sys.exit(main())
