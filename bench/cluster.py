"""Benchmark of the sandbox API server: write throughput and watch-event latency.

Starts ``acceltrial sandbox up`` in its own process (so the client does not share its GIL),
opens N watches on ConfigMaps, creates M ConfigMaps with a few concurrent writers, and reports
writes per second and, over every (object, watcher) pair, the latency from sending the create
to the watcher receiving its ADDED event.

    .venv/bin/python bench/cluster.py                      # 1,000 objects, 50 watchers
    .venv/bin/python bench/cluster.py --objects 5000 --watchers 100 --writers 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

PATH = "/api/v1/namespaces/default/configmaps"


def start_sandbox(directory: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "acceltrial.cli.main",
            "sandbox",
            "up",
            "--control-plane",
            "emulator",  # this measures the sandbox's own API server
            "--port",
            "0",
            "--kubeconfig",
            str(directory / "kubeconfig"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("sandbox API server at "):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {line!r}")
    return process, line.split()[-1]


@dataclass
class Watcher:
    """One watch connection and when it received each object's ADDED event."""

    ready: asyncio.Event = field(default_factory=asyncio.Event)
    received: dict[str, float] = field(default_factory=dict)


async def watch(
    session: aiohttp.ClientSession, url: str, version: str, expected: int, watcher: Watcher
) -> None:
    received = watcher.received
    params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "300"}
    async with session.get(url + PATH, params=params) as response:
        watcher.ready.set()
        async for line in response.content:
            if not line.strip():
                continue
            event = json.loads(line)
            received[event["object"]["metadata"]["name"]] = time.perf_counter()
            if len(received) == expected:
                return


async def write(
    session: aiohttp.ClientSession, url: str, names: list[str], sent: dict[str, float]
) -> None:
    for name in names:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}
        sent[name] = time.perf_counter()
        async with session.post(url + PATH, json=body) as response:
            if response.status != 201:
                raise SystemExit(f"create {name} answered {response.status}")


async def run(url: str, objects: int, watcher_count: int, writers: int) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async with session.get(url + PATH) as response:
            version = (await response.json())["metadata"]["resourceVersion"]
        watchers = [Watcher() for _ in range(watcher_count)]
        watches = [asyncio.create_task(watch(session, url, version, objects, w)) for w in watchers]
        await asyncio.gather(*(w.ready.wait() for w in watchers))
        names = [f"bench-{i:05d}" for i in range(objects)]
        sent: dict[str, float] = {}
        started = time.perf_counter()
        await asyncio.gather(
            *(write(session, url, names[i::writers], sent) for i in range(writers))
        )
        elapsed = time.perf_counter() - started
        await asyncio.wait_for(asyncio.gather(*watches), timeout=300)
    latencies = sorted(w.received[name] - sent[name] for w in watchers for name in names)
    return {
        "writes_per_second": objects / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "max_ms": 1000 * latencies[-1],
        "events": len(latencies),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--writers", type=int, default=8, help="concurrent create requests")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        process, url = start_sandbox(Path(directory))
        try:
            result = asyncio.run(run(url, args.objects, args.watchers, args.writers))
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"objects: {args.objects}, watchers: {args.watchers}, writers: {args.writers}")
    print(f"writes/s: {result['writes_per_second']:.0f}")
    print(
        f"watch-event latency over {result['events']:.0f} events: "
        f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, "
        f"max {result['max_ms']:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
