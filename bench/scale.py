"""Scale benchmark: N trials at once against one operator replica on a local cluster.

Starts a cluster (``--control-plane emulator``, the default: the sandbox's emulated API server
with its workload controllers; or ``real``: etcd, kube-apiserver, the controllers and kwok,
built by ``make control-plane``; see bench/beds.py) with a g5 and an inf2 node per trial, a stub
Prometheus that answers every query, and the operator as its own ``kopf run`` process with the
default 10 s tick. It applies N trials (three criteria each, analysis.interval 10s so that every
tick measures), waits until all measure, then watches for ``--seconds`` and prints:

- operator RSS at the end and CPU seconds per trial-hour over the window;
- tick lag: how late each measurement ran against its interval (the time between a trial's two
  consecutive ``status.lastMeasurementAt`` minus the interval), p50 and p99;
- API requests and Prometheus queries per trial per minute (the benchmark's own polling is
  not counted), and per measurement with the operator's CPU;
- the cores the operator and each of the cluster's processes used over the window: what
  saturated when the lag grows.

    .venv/bin/python -m bench.scale --trials 10 100 --seconds 120
    .venv/bin/python -m bench.scale --trials 100 500 1000 --control-plane real
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from acceltrial.api.status import TERMINAL_PHASES
from acceltrial_testbed.demo.cluster import TRIALS, baseline_objects
from bench.beds import NAMESPACE, NAMESPACES, Bed, ControlPlane, Counter, bed

INTERVAL_S = 10


QUERIES = Counter()


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
    """Trials measured at least twice in the window (the lag needs two measurements)."""
    cpu_ms_per_measurement: float
    api_per_measurement: float
    queries_per_measurement: float
    operator_cores: float
    cluster_cores: dict[str, float]
    """Cores each of the cluster's processes used over the window."""


def run(trials: int, seconds: float, folder: Path, plane: ControlPlane = "emulator") -> Figures:
    with bed(plane, trials, folder) as cluster, stub_prometheus() as prometheus:
        operator = _start_operator(cluster.operator_kubeconfig, folder)
        try:
            for index in range(trials):
                body = trial(index, prometheus)
                baseline = SimpleNamespace(replicas=1, image="vllm/vllm-openai:v0.11.0")
                for path, manifest in baseline_objects(body, baseline):  # type: ignore[arg-type]
                    if path != NAMESPACES:
                        cluster.create(path, manifest)
                cluster.create(TRIALS.format(NAMESPACE), body)
            _wait_until_measuring(cluster, trials, timeout=150 + 2 * trials)
            return _measure(cluster, operator.pid, trials, seconds)
        finally:
            operator.terminate()
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
                operator.wait()


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


def _last_measured(cluster: Bed) -> dict[str, datetime]:
    seen = {}
    for item in cluster.trials():
        when = item.get("status", {}).get("lastMeasurementAt")
        if when:
            seen[item["metadata"]["name"]] = datetime.fromisoformat(when)
    return seen


def _wait_until_measuring(cluster: Bed, trials: int, timeout: float) -> None:
    """Until every trial has measured once or ended (a busy cluster fails a few in preflight:
    they never measure), or ``timeout``: then the figures cover those that measured, and
    ``measuring`` says how many that was."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # a busy machine: ask again
            if _settled(cluster.trials()) == trials:
                return
        time.sleep(2)


def _settled(items: list[dict[str, Any]]) -> int:
    """How many trials have measured once or ended."""
    return sum(
        1
        for item in items
        if item.get("status", {}).get("lastMeasurementAt")
        or item.get("status", {}).get("phase") in TERMINAL_PHASES
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _measure(cluster: Bed, pid: int, trials: int, seconds: float) -> Figures:
    cpu, api, queries = _cpu_seconds(pid), cluster.operator_requests(), QUERIES.value
    cluster_cpu = _cluster_cpu(cluster)
    started = time.monotonic()
    last = _last_measured(cluster)
    lags: list[float] = []
    measured: set[str] = set()
    while time.monotonic() - started < seconds:
        time.sleep(1)
        try:
            now_measured = _last_measured(cluster)
        except OSError:  # a busy machine: the next poll sees the same measurements
            continue
        for name, when in now_measured.items():
            before = last.get(name)
            if before is not None and when > before:
                lags.append((when - before).total_seconds() - INTERVAL_S)
                measured.add(name)
            last[name] = when
    elapsed = time.monotonic() - started
    spent = {"cpu": _cpu_seconds(pid) - cpu, "api": cluster.operator_requests() - api,
             "queries": QUERIES.value - queries}  # fmt: skip
    cluster_cores = {k: (_cluster_cpu(cluster)[k] - v) / elapsed for k, v in cluster_cpu.items()}
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
        operator_cores=spent["cpu"] / elapsed,
        cluster_cores=cluster_cores,
    )


def _cluster_cpu(cluster: Bed) -> dict[str, float]:
    return {name: _cpu_seconds(pid) for name, pid in cluster.cluster_pids.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--seconds", type=float, default=120, help="measured window per N")
    parser.add_argument("--quick", action="store_true", help="N=10 for 40 s")
    parser.add_argument(
        "--control-plane", choices=["emulator", "real"], default="emulator",
        help="the sandbox's emulated API server, or the real one (make control-plane)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    counts, seconds = ([10], 40.0) if args.quick else (args.trials, args.seconds)
    print(f"{'trials':>6} {'RSS MiB':>8} {'CPU s/trial-h':>14} {'lag p50 s':>10} "
          f"{'lag p99 s':>10} {'API/trial-min':>14} {'queries/trial-min':>18} "
          f"{'measuring':>9}")  # fmt: skip
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="acceltrial-scale-") as folder:
            f = run(n, seconds, Path(folder), args.control_plane)
        print(
            f"{f.trials:>6} {f.rss_mib:>8.0f} {f.cpu_s_per_trial_hour:>14.1f} "
            f"{f.lag_p50_s:>10.2f} {f.lag_p99_s:>10.2f} {f.api_per_trial_minute:>14.1f} "
            f"{f.queries_per_trial_minute:>18.1f} {f.measuring:>9}   per measurement: "
            f"{f.cpu_ms_per_measurement:.0f} ms CPU, {f.api_per_measurement:.1f} API requests, "
            f"{f.queries_per_measurement:.1f} queries",
            flush=True,
        )
        busy = ", ".join(f"{name} {cores:.2f}" for name, cores in f.cluster_cores.items())
        print(f"{'':>6} cores used: operator {f.operator_cores:.2f}; {busy}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
