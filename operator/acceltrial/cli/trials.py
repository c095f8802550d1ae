"""``acceltrial status | report | pause | resume | abort | promote | approve``: trials in the
cluster of the current kubeconfig context, as kubectl would reach it (also as ``kubectl
acceltrial ...``). A missing trial or an unreachable cluster is one clear line and exit 1."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from kubernetes import client, config
from pydantic import ValidationError

from acceltrial.api.actions import ACTION_ANNOTATION, USER_ACTIONS
from acceltrial.api.report import REPORT_KEY, UnreadableReport, read_report, report_name
from acceltrial.api.status import TERMINAL_PHASES
from acceltrial.api.training.report import TrainingReport
from acceltrial.engine.routing import share_text
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.pages import progress_bar as progress
from acceltrial.pages.render import html_page, markdown
from acceltrial.pages.training import training_html, training_markdown

ACTIONS = USER_ACTIONS
MESSAGE_WIDTH = 80
"""Longest MESSAGE shown by ``status``; the whole message is in the trial's status.message."""
Manifest = dict[str, Any]


class CliError(Exception):
    """Something the user can fix; the message says what."""


@dataclass(frozen=True)
class Target:
    kube: Kube
    namespace: str


def connect(namespace: str | None) -> Target:
    """The current kubeconfig context (or in-cluster config), and the namespace to use."""
    try:
        config.load_kube_config()  # type: ignore[no-untyped-call]
        _, context = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        default = (context or {}).get("context", {}).get("namespace") or "default"
    except (config.ConfigException, OSError) as error:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            raise CliError(
                f"no cluster configured ({error}); set KUBECONFIG or run inside a cluster"
            ) from None
        default = "default"
    return Target(Kube(client.ApiClient()), namespace or default)


def _trial(target: Target, name: str) -> Manifest:
    found: Manifest | None = _ask(lambda: target.kube.trial(target.namespace, name))
    if found is None:
        raise CliError(f"AcceleratorTrial {target.namespace}/{name} not found")
    return found


def _ask(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except KubeError as error:
        if error.status == 0:
            raise CliError(f"cannot reach the cluster: {error}") from None
        raise CliError(str(error)) from None


def status_rows(trials: Sequence[Manifest], watching: bool) -> list[list[str]]:
    header = ["NAME", "PHASE", "STEP", "WEIGHT", "VERDICTS", "MESSAGE"]
    if watching:
        header.insert(4, "PROGRESS")
    rows = [header]
    for trial in trials:
        status = trial.get("status") or {}
        steps = len(trial.get("spec", {}).get("steps") or [])
        row = [
            trial["metadata"]["name"],
            str(status.get("phase") or "Pending"),
            f"{status.get('step') or 0}/{steps}",
            share_text(status.get("canaryWeight") or 0, status.get("requestedWeight")),
            _verdicts(status),
            shorten(str(status.get("message") or ""), MESSAGE_WIDTH),
        ]
        if watching:
            row.insert(4, _bar(status, steps))
        rows.append(row)
    return rows


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` at a space, never inside a word or a name (a name with hyphens
    is one word), with "..." when something was left out."""
    if len(text) <= width:
        return text
    space = text.rfind(" ", 0, width - 2)
    # One word longer than the column is shown whole rather than cut.
    cut = text[:space] if space > 0 else text.split(" ", 1)[0]
    return cut.rstrip(" ,;:") + "..."


def _verdicts(status: Manifest) -> str:
    latest: dict[str, str] = {}
    for result in status.get("analysis") or []:
        latest[result["criterion"]] = result["verdict"]
    return ",".join(f"{name}={verdict}" for name, verdict in latest.items()) or "-"


def _bar(status: Manifest, steps: int) -> str:
    return progress.bar(progress.progress(status, steps))


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def show_status(
    target: Target, name: str | None, watch: bool, out: TextIO, interval: float = 2.0
) -> int:
    """Print the table once, or, watching, again on every change until the trial ends."""
    last = ""
    while True:
        if name is not None:
            trials = [_trial(target, name)]
        else:
            trials = _ask(lambda: target.kube.trials(target.namespace))
            if not trials:
                print(f"no AcceleratorTrial in namespace {target.namespace}", file=out)
                return 0
        table = _table(status_rows(trials, watch))
        if table != last:
            print(table, file=out, flush=True)
            last = table
        ended = all((t.get("status") or {}).get("phase") in TERMINAL_PHASES for t in trials)
        if not watch or (name is not None and ended):
            return 0
        time.sleep(interval)


def show_report(target: Target, name: str, output: str, out: TextIO) -> int:
    config_map = _ask(lambda: target.kube.config_map(target.namespace, report_name(name)))
    training = training_report_in(config_map)
    if training is not None:  # a TrainingTrial's report
        out.write(render_training(training, output))
        return 0
    _trial(target, name)
    try:
        report = read_report(config_map)
    except UnreadableReport as error:
        raise CliError(f"the report ConfigMap {report_name(name)} is unreadable: {error}") from None
    if report is None:
        raise CliError(f"trial {target.namespace}/{name} has no report yet (no measurement so far)")
    if output == "json":
        out.write(json.dumps(report.model_dump(mode="json", by_alias=True), indent=2) + "\n")
    elif output == "html":
        out.write(html_page(report))
    else:
        out.write(markdown(report))
    return 0


def training_report_in(config_map: dict[str, Any] | None) -> TrainingReport | None:
    """The TrainingTrial report a ``<trial>-report`` ConfigMap holds, if it holds one."""
    text = ((config_map or {}).get("data") or {}).get(REPORT_KEY)
    try:
        stored = json.loads(text) if text else None
    except ValueError:
        return None  # unreadable: read_report says so
    if not isinstance(stored, dict) or stored.get("kind") != "TrainingTrial":
        return None  # an AcceleratorTrial's report (read_report's), or none
    try:
        return TrainingReport.model_validate(stored)
    except ValidationError as error:
        raise CliError(f"the training report is unreadable: {error}") from None


def render_training(report: TrainingReport, output: str) -> str:
    if output == "json":
        return json.dumps(report.model_dump(mode="json", by_alias=True), indent=2) + "\n"
    return training_html(report) if output == "html" else training_markdown(report)


def act(target: Target, name: str, action: str, out: TextIO) -> int:
    _trial(target, name)
    _ask(lambda: target.kube.annotate_trial(target.namespace, name, {ACTION_ANNOTATION: action}))
    print(f"asked trial {target.namespace}/{name} to {action} ({ACTION_ANNOTATION}={action})",
          file=out)  # fmt: skip
    return 0
