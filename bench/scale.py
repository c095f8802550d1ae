"""Scale benchmark: N trials at once against one operator replica on the local sandbox.

Starts the sandbox's API server (emulator, with its workload controllers) with a node group
large enough for N baselines and N candidates, a stub Prometheus that answers every query with
one series, and the operator as its own ``kopf run`` process with the default 10 s tick. It
applies N trials (three criteria each, analysis.interval 10s so that every tick measures),
waits until all measure, then watches for ``--seconds`` and prints:

- operator RSS at the end and CPU seconds per trial-hour over the window;
- tick lag: how late each measurement ran against its interval (the time between a trial's two
  consecutive ``status.lastMeasurementAt`` minus the interval), p50 and p99;
- API requests and Prometheus queries per trial per minute (the benchmark's own polling is
  not counted).

    .venv/bin/python -m bench.scale --trials 10 100 --seconds 120
    .venv/bin/python -m bench.scale --quick          # N=10 for 40 s, as `make bench` runs it
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from aiohttp import web

import acceltrial.sandbox.cluster as sandbox_cluster
import acceltrial.sandbox.server as sandbox_server
from acceltrial.api.crd import render_crd
from acceltrial.demo.cluster import TRIALS, baseline_objects
from acceltrial.sandbox.cluster import Sandbox
from acceltrial.sandbox.topology import load_topology

NAMESPACE = "bench"
INTERVAL_S = 10
BENCH_AGENT = "acceltrial-bench"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class Counter:
    """A thread-safe count."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1


API_REQUESTS = Counter()
QUERIES = Counter()


@web.middleware
async def _count_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    if request.headers.get("User-Agent") != BENCH_AGENT:
        API_REQUESTS.add()
    return await handler(request)


def _counting_app(build: Callable[..., web.Application]) -> Callable[..., web.Application]:
    def build_counting(*args: Any, **kwargs: Any) -> web.Application:
        app = build(*args, **kwargs)
        app.middlewares.append(_count_requests)
        return app

    return build_counting


# The sandbox builds its app when it starts: count every request it serves.
sandbox_cluster.build_app = _counting_app(sandbox_server.build_app)  # type: ignore[attr-defined]


_ASK_INDEX = re.compile(r'"acceltrial_ask", "(\d+)"')


class _Prometheus(BaseHTTPRequestHandler):
    """Answers every instant query with one series at 0.5 and every range query with one
    series sampled at each step: every criterion has a value, and both variants the same. A
    query asking several readings together gets one such series for each (its index label)."""

    def do_GET(self) -> None:
        self._answer(urllib.parse.urlparse(self.path))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length).decode()
        self._answer(urllib.parse.urlparse(self.path)._replace(query=body))

    def _answer(self, url: urllib.parse.ParseResult) -> None:
        QUERIES.add()
        params = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        now = time.time()
        asked = _ASK_INDEX.findall(params.get("query", ""))
        labels = [{"acceltrial_ask": index} for index in asked] or [{}]
        if url.path.endswith("/query_range"):
            start, end = float(params["start"]), float(params["end"])
            step = max(float(params.get("step", 15)), 1.0)
            points, t = [], start
            while t <= end:
                points.append([t, "0.5"])
                t += step
            result = [{"metric": m, "values": points} for m in labels]
            data = {"resultType": "matrix", "result": result}
        else:
            result = [{"metric": m, "value": [now, "0.5"]} for m in labels]
            data = {"resultType": "vector", "result": result}
        payload = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def stub_prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def topology(trials: int, folder: Path) -> Path:
    """The default topology with a g5 and an inf2 node per trial."""
    body = yaml.safe_load(
        load_topology().model_dump_json(by_alias=True, exclude_none=True)  # JSON is YAML
    )
    for group in body["nodeGroups"]:
        if group["name"] in ("gpu-g5", "neuron-inf2"):
            group["count"] = trials + 1
    path = folder / "topology.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def trial(index: int, prometheus: str) -> dict[str, Any]:
    name = f"llm-{index:04d}"
    return {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "AcceleratorTrial",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "baseline": {"deploymentRef": {"name": f"{name}-gpu"}, "container": "vllm",
                         "instanceType": "g5.xlarge"},
            "candidate": {"image": "example.com/llm-neuron:1", "instanceType": "inf2.8xlarge",
                          "neuronCores": 2, "replicas": 1},
            "traffic": {"router": "gatewayapi",
                        "gatewayapi": {"httpRouteRef": {"name": name}}},
            "steps": [{"weight": 5, "duration": "2h"}],
            "analysis": {
                "interval": f"{INTERVAL_S}s",
                "prometheus": {"address": prometheus},
                "criteria": [
                    {"name": "p99-latency", "metric": "latency_p99", "relative": {"max": 1.1}},
                    {"name": "mean-latency", "metric": "latency_mean",
                     "statistical": {"direction": "increase"}},
                    {"name": "errors", "metric": "error_ratio", "relative": {"max": 1.5}},
                ],
            },
            "economics": {"pricing": "catalog", "region": "us-east-1"},
        },
    }  # fmt: skip


@dataclass(frozen=True)
class Figures:
    trials: int
    rss_mib: float
    cpu_s_per_trial_hour: float
    lag_p50_s: float
    lag_p99_s: float
    api_per_trial_minute: float
    queries_per_trial_minute: float
    measuring: int
    cpu_ms_per_measurement: float
    api_per_measurement: float
    queries_per_measurement: float
    """Trials measured at least twice in the window (the lag needs two measurements)."""


def run(trials: int, seconds: float, folder: Path) -> Figures:
    with Sandbox(topology=load_topology(topology(trials, folder)), ready_delay=0.2) as sandbox:
        _create(sandbox.url, CRDS, yaml.safe_load(render_crd()))
        with stub_prometheus() as prometheus:
            operator = _start_operator(sandbox.kubeconfig, folder)
            try:
                for index in range(trials):
                    body = trial(index, prometheus)
                    baseline = SimpleNamespace(replicas=1, image="vllm/vllm-openai:v0.11.0")
                    for path, manifest in baseline_objects(body, baseline):  # type: ignore[arg-type]
                        if path != "/api/v1/namespaces" or index == 0:
                            _create(sandbox.url, path, manifest)
                    _create(sandbox.url, TRIALS.format(NAMESPACE), body)
                _wait_until_measuring(sandbox.url, trials, timeout=150 + 2 * trials)
                return _measure(sandbox.url, operator.pid, trials, seconds)
            finally:
                operator.terminate()
                try:
                    operator.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    operator.kill()
                    operator.wait()


def _create(url: str, path: str, body: dict[str, Any]) -> None:
    """POST with patience (a busy machine); a retry that finds the object made is fine."""
    data = json.dumps(body).encode()
    for attempt in range(3):
        request = urllib.request.Request(url + path, data=data, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": BENCH_AGENT})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60):
                return
        except urllib.error.HTTPError as error:
            if error.code == 409 and attempt > 0:
                return
            raise
        except TimeoutError:
            continue
    raise SystemExit(f"the sandbox did not answer POST {path} three times in a row")


def _start_operator(kubeconfig: Path, folder: Path) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "KUBECONFIG": str(kubeconfig),
        "ACCELTRIAL_METRICS_PORT": "0",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    command = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone",
               f"--namespace={NAMESPACE}"]  # fmt: skip
    with (folder / "operator.log").open("ab") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder)


def _trials(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        url + TRIALS.format(NAMESPACE), headers={"User-Agent": BENCH_AGENT}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        items: list[dict[str, Any]] = json.load(response)["items"]
        return items


def _last_measured(url: str) -> dict[str, datetime]:
    seen = {}
    for item in _trials(url):
        when = item.get("status", {}).get("lastMeasurementAt")
        if when:
            seen[item["metadata"]["name"]] = datetime.fromisoformat(when)
    return seen


def _wait_until_measuring(url: str, trials: int, timeout: float) -> None:
    """Until every trial has measured once, or ``timeout``: then the figures cover those that
    did, and ``measuring`` says how many that was."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            if len(_last_measured(url)) == trials:
                return
        time.sleep(2)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _measure(url: str, pid: int, trials: int, seconds: float) -> Figures:
    cpu, api, queries = _cpu_seconds(pid), API_REQUESTS.value, QUERIES.value
    started = time.monotonic()
    last = _last_measured(url)
    lags: list[float] = []
    measured: set[str] = set()
    while time.monotonic() - started < seconds:
        time.sleep(1)
        try:
            now_measured = _last_measured(url)
        except TimeoutError:  # a busy machine: the next poll sees the same measurements
            continue
        for name, when in now_measured.items():
            before = last.get(name)
            if before is not None and when > before:
                lags.append((when - before).total_seconds() - INTERVAL_S)
                measured.add(name)
            last[name] = when
    elapsed = time.monotonic() - started
    spent = {"cpu": _cpu_seconds(pid) - cpu, "api": API_REQUESTS.value - api,
             "queries": QUERIES.value - queries}  # fmt: skip
    per = max(1, len(lags))
    trial_minutes = trials * elapsed / 60
    lags.sort()
    return Figures(
        trials=trials,
        rss_mib=_rss_mib(pid),
        cpu_s_per_trial_hour=spent["cpu"] / (trial_minutes / 60),
        lag_p50_s=statistics.median(lags) if lags else float("nan"),
        lag_p99_s=lags[int(0.99 * (len(lags) - 1))] if lags else float("nan"),
        api_per_trial_minute=spent["api"] / trial_minutes,
        queries_per_trial_minute=spent["queries"] / trial_minutes,
        measuring=len(measured),
        cpu_ms_per_measurement=1000 * spent["cpu"] / per,
        api_per_measurement=spent["api"] / per,
        queries_per_measurement=spent["queries"] / per,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--seconds", type=float, default=120, help="measured window per N")
    parser.add_argument("--quick", action="store_true", help="N=10 for 40 s")
    args = parser.parse_args(argv)
    counts, seconds = ([10], 40.0) if args.quick else (args.trials, args.seconds)
    print(f"{'trials':>6} {'RSS MiB':>8} {'CPU s/trial-h':>14} {'lag p50 s':>10} "
          f"{'lag p99 s':>10} {'API/trial-min':>14} {'queries/trial-min':>18} "
          f"{'measuring':>9}")  # fmt: skip
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="acceltrial-scale-") as folder:
            f = run(n, seconds, Path(folder))
        print(
            f"{f.trials:>6} {f.rss_mib:>8.0f} {f.cpu_s_per_trial_hour:>14.1f} "
            f"{f.lag_p50_s:>10.2f} {f.lag_p99_s:>10.2f} {f.api_per_trial_minute:>14.1f} "
            f"{f.queries_per_trial_minute:>18.1f} {f.measuring:>9}   per measurement: "
            f"{f.cpu_ms_per_measurement:.0f} ms CPU, {f.api_per_measurement:.1f} API requests, "
            f"{f.queries_per_measurement:.1f} queries",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
