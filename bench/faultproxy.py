"""A fault-injecting HTTP proxy for the tests and the fault suite (never used by the operator).

:class:`FaultProxy` forwards every request to one upstream (the test's API server, the real
control plane's over TLS with its admin certificate, or a Prometheus) and, on a seeded
schedule, answers instead of it or spoils its answer:

API server faults
  ``conflict``     409 Conflict on a write (POST, PUT, PATCH, DELETE), nothing forwarded
  ``error-500``    500 Internal Server Error, nothing forwarded
  ``error-503``    503 Service Unavailable, nothing forwarded
  ``throttle``     429 Too Many Requests with ``Retry-After: 1``, nothing forwarded
  ``delay``        the request waits ``delay_seconds`` (past the client's timeout), then goes
                   through: a write the client gave up on still lands, as on a slow server
  ``watch-drop``   a watch stream is cut after its first event, or after
                   ``WATCH_DROP_SECONDS`` without one
  ``watch-gone``   a watch resumed from a resourceVersion gets ``410 Gone`` (an ERROR event
                   with an Expired Status, as kube-apiserver sends when the version is compacted)

Prometheus faults
  ``partial``      a query's answer loses half its series (at least one)
  ``stale``        a query is answered with the last answer given to the same PromQL
  plus ``error-500``, ``error-503``, ``throttle`` and ``delay`` as above. A Prometheus restart
  losing recent data is not a proxy's doing: the fault suite restarts the real Prometheus on
  empty storage and points the proxy at it with :meth:`FaultProxy.retarget`.

The schedule draws from ``random.Random(seed)`` per request, so a seed replays the same faults
for the same sequence of requests. Watch faults are the exception that makes them happen at all:
a client opens few, long-lived watches (an operator one per resource and namespace, at its
start), so the first watch of each stream (its path) always gets the schedule's watch fault, and
later ones at ``rate``. Every injected fault is counted in :attr:`FaultProxy.injected`.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from acceltrial_testbed.sandbox.access import Access, as_access

API_FAULTS = ("conflict", "error-500", "error-503", "throttle", "delay", "watch-drop", "watch-gone")
PROMETHEUS_FAULTS = ("error-500", "error-503", "throttle", "delay", "partial", "stale")
WATCH_FAULTS = ("watch-drop", "watch-gone")
WATCH_DROP_SECONDS = 5.0
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})
GONE_EVENT = {
    "type": "ERROR",
    "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version (injected)", "reason": "Expired", "code": 410,
    },
}  # fmt: skip


@dataclass
class Schedule:
    """Which faults to inject and how often: each request that a fault ``kind`` applies to gets
    it with probability ``rate``, drawn from a generator seeded with ``seed``, but the first
    watch of each stream always gets a watch fault of ``kinds``. ``after`` skips the first
    requests (a trial's start), ``limit`` caps the faults injected (None: no cap)."""

    kinds: tuple[str, ...] = ()
    rate: float = 0.0
    seed: int = 0
    after: int = 0
    limit: int | None = None
    _random: random.Random = field(init=False, repr=False)
    _seen: int = field(default=0, init=False, repr=False)
    _given: int = field(default=0, init=False, repr=False)
    _streams: set[str] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def draw(self, method: str, path: str, query: dict[str, str]) -> str | None:
        """The fault for this request, or None to forward it untouched."""
        with self._lock:
            self._seen += 1
            roll = self._random.random()
            pick = self._random.choice(self.kinds) if self.kinds else None
            if pick is None or self._seen <= self.after:
                return None
            if self.limit is not None and self._given >= self.limit:
                return None
            first = self._first_watch_fault(method, path, query)
            if first is not None:
                pick = first
            elif roll >= self.rate or not applies(pick, method, path, query):
                return None
            self._given += 1
            return pick

    def _first_watch_fault(self, method: str, path: str, query: dict[str, str]) -> str | None:
        """The watch fault for the first watch of stream ``path``, if this is one."""
        if query.get("watch") not in ("true", "1") or path in self._streams:
            return None
        fitting = [k for k in self.kinds if k in WATCH_FAULTS and applies(k, method, path, query)]
        if not fitting:
            return None
        self._streams.add(path)
        return fitting[0]


def applies(kind: str, method: str, path: str, query: dict[str, str]) -> bool:
    """Whether fault ``kind`` makes sense for this request."""
    watch = query.get("watch") in ("true", "1")
    promql = path.startswith("/api/v1/query")
    if kind == "conflict":
        return method in WRITES
    if kind == "watch-drop":
        return watch
    if kind == "watch-gone":
        return watch and bool(query.get("resourceVersion"))
    if kind in ("partial", "stale"):
        return promql
    return not watch  # errors and delays on ordinary requests


class FaultProxy:
    """A threaded proxy to ``upstream`` injecting ``schedule``'s faults; use as a context
    manager, then point clients at :attr:`url` (plain HTTP). An ``https://`` upstream (the real
    control plane) is reached with its :class:`Access`: its CA, and its client certificate as
    the identity every proxied request has."""

    def __init__(
        self, upstream: Access | str, schedule: Schedule, delay_seconds: float = 3.0
    ) -> None:
        self.schedule = schedule
        self.delay_seconds = delay_seconds
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self._access = as_access(upstream)
        self._answers: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def retarget(self, upstream: Access | str) -> None:
        """Send later requests to another upstream (a restarted Prometheus)."""
        self._access = as_access(upstream)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- used by the request handler -------------------------------------------------------

    def fault_for(self, method: str, target: str) -> str | None:
        parts = urllib.parse.urlsplit(target)
        query = dict(urllib.parse.parse_qsl(parts.query))
        with self._lock:
            self.requests += 1
        fault = self.schedule.draw(method, parts.path, query)
        if fault is not None:
            with self._lock:
                self.injected[fault] += 1
        return fault

    def upstream(self) -> http.client.HTTPConnection:
        return self._access.connect(timeout=60)

    def remember(self, promql: str, answer: bytes) -> bytes:
        """Keep ``answer`` as the latest for ``promql``; return the previous one (or this)."""
        with self._lock:
            previous = self._answers.get(promql, answer)
            self._answers[promql] = answer
        return previous


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        started = False  # whether an answer's status line went out

        def do_GET(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def do_PUT(self) -> None:
            self._relay()

        def do_PATCH(self) -> None:
            self._relay()

        def do_DELETE(self) -> None:
            self._relay()

        def log_message(self, *_: object) -> None:
            pass

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fault = proxy.fault_for(self.command, self.path)
            if fault in ("conflict", "error-500", "error-503", "throttle"):
                self._refuse(fault)
                return
            if fault == "watch-gone":
                self._send(200, (json.dumps(GONE_EVENT) + "\n").encode(), "application/json")
                return
            if fault == "delay":
                time.sleep(proxy.delay_seconds)
            self.started = False
            try:
                self._forward(body, fault)
            except OSError as error:  # upstream down (a restart) or the client gave up
                if not self.started:  # mid-stream, the connection just drops
                    self._send_safely(502, f"upstream unreachable: {error}".encode())
                self.close_connection = True

        def _forward(self, body: bytes, fault: str | None) -> None:
            connection = proxy.upstream()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Accept-Encoding"] = "identity"
            connection.request(self.command, self.path, body=body or None, headers=headers)
            reply = connection.getresponse()
            kept = [(k, v) for k, v in reply.getheaders() if k.lower() not in _HOP_BY_HOP]
            if "watch=" in self.path and reply.status == 200:
                if fault == "watch-drop" and connection.sock is not None:
                    connection.sock.settimeout(WATCH_DROP_SECONDS)  # a silent stream drops too
                self._stream(reply, kept, cut=fault == "watch-drop")
            else:
                payload = reply.read()
                if fault in ("partial", "stale") and reply.status == 200:
                    payload = _spoil(proxy, fault, body, payload)
                elif self.path.startswith("/api/v1/query") and reply.status == 200:
                    proxy.remember(_promql(body, self.path), payload)
                self._send(reply.status, payload, headers=kept)
            connection.close()

        def _stream(
            self, reply: http.client.HTTPResponse, headers: list[tuple[str, str]], cut: bool
        ) -> None:
            self.started = True
            self.send_response(200)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Connection", "close")
            self.end_headers()
            for lines, line in enumerate(_lines(reply), start=1):
                self.wfile.write(line)
                self.wfile.flush()
                if cut and lines >= 1:
                    break  # the connection drops mid-stream
            self.close_connection = True

        def _refuse(self, fault: str) -> None:
            code = {"conflict": 409, "error-500": 500, "error-503": 503, "throttle": 429}[fault]
            message = f"injected {fault}"
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "message": message, "code": code}  # fmt: skip
            if code == 409:
                status["reason"] = "Conflict"
            extra = [("Retry-After", "1")] if code == 429 else []
            payload = {**status, "errorType": "injected", "error": message}
            self._send(code, json.dumps(payload).encode(), headers=extra)

        def _send(
            self,
            code: int,
            payload: bytes,
            content_type: str | None = "application/json",
            headers: list[tuple[str, str]] | None = None,
        ) -> None:
            self.started = True
            self.send_response(code)
            names = {k.lower() for k, _ in headers or []}
            if content_type and "content-type" not in names:
                self.send_header("Content-Type", content_type)
            for key, value in headers or []:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.close_connection = True

        def _send_safely(self, code: int, payload: bytes) -> None:
            with suppress(OSError):
                self._send(code, payload, "text/plain")

    return Handler


def _lines(reply: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        line = reply.readline()
        if not line:
            return
        yield line


def _promql(body: bytes, path: str) -> str:
    form = dict(urllib.parse.parse_qsl(body.decode() or urllib.parse.urlsplit(path).query))
    return form.get("query", "")


def _spoil(proxy: FaultProxy, fault: str, body: bytes, payload: bytes) -> bytes:
    """A partial answer (half the series gone) or a stale one (the previous answer)."""
    promql = _promql(body, "")
    if fault == "stale":
        return proxy.remember(promql, payload)
    answer: dict[str, Any] = json.loads(payload)
    result = answer.get("data", {}).get("result")
    if isinstance(result, list) and result:
        answer["data"]["result"] = result[: len(result) // 2]
    return json.dumps(answer).encode()


@contextmanager
def proxied(
    upstream: Access | str, schedule: Schedule, delay_seconds: float = 3.0
) -> Iterator[FaultProxy]:
    """A running :class:`FaultProxy`."""
    with FaultProxy(upstream, schedule, delay_seconds) as proxy:
        yield proxy
