"""The fleet's model servers over HTTP: each Service's OpenAI-compatible API, answered by the
tiny model of the variant whose Ready pods it selects.

``/{namespace}/{service}/v1/completions`` and ``/v1/chat/completions``, as a client in the
cluster reaches ``http://{service}.{namespace}.svc:{port}/v1/...``: the operator's quality
check is pointed here by its documented setting, as the demo does. The Service is read from the
API server on each request (quality requests are few): no Ready pod behind it answers 503, as a
Service without endpoints refuses the connection. The GPU pods answer in float32, the Neuron
candidate's in bfloat16, each with its scenario's ``outputs``. The requests are counted apart
(:attr:`ModelServers.answered`): the operator's, never users'.

Given the fleets that simulate the pods (``trial_serving``), a request that asks for no
log-probabilities (the capacity sweep's; the quality check's always ask) is answered by one of
the Service's Ready pods in turn, as that pod's model answers the trial's own requests
(fleet/trial_requests.py): refused at once beyond its capacity, otherwise after a latency that
grows with its load. A Service's pods are read at most once a second (:data:`PODS_TTL`), so a
sweep of a hundred requests a second does not load the API server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.metrics import Variant
from acceltrial.providers.quality.openai import RequestRefused, Transport
from acceltrial_testbed.sandbox.access import Access, as_access
from acceltrial_testbed.sandbox.fleet.answers import (
    RequestError,
    chat_completion,
    completion,
    stream_chunks,
)
from acceltrial_testbed.sandbox.fleet.exporter import TTFT_SHARE
from acceltrial_testbed.sandbox.fleet.language_model import Outputs, TinyModel
from acceltrial_testbed.sandbox.fleet.serving import serving_on_loopback
from acceltrial_testbed.sandbox.fleet.traffic import ready
from acceltrial_testbed.sandbox.fleet.trial_requests import TrialAnswer

Backing = tuple[Variant, list[str]]
"""The variant of a Service's Ready pods, and their names."""
PODS_TTL = 1.0
"""Seconds a Service's Ready pods are taken as read."""


@dataclass(frozen=True)
class Reply:
    """A model server's answer and how long the pod takes to give it."""

    status: int
    body: dict[str, Any]
    seconds: float = 0.0
    waited: float = 0.0
    """Of ``seconds``, the time the request queued before the pod began it."""

    @property
    def first_token_seconds(self) -> float:
        """The queue, then the prefill's share of the service time."""
        return self.waited + (self.seconds - self.waited) * TTFT_SHARE


class TrialServing(Protocol):
    """What simulates a namespace's pods (the fleet): how a pod answers a trial request."""

    def serve_trial_request(self, pod: str) -> TrialAnswer | None: ...


class ModelServers:
    """The variants' models, and the requests each answered."""

    def __init__(
        self,
        cluster: Access | str,
        outputs: Mapping[Variant, Outputs],
        trial_serving: Callable[[str], TrialServing | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        backing_reader: Callable[[str, str], Backing | None] | None = None,
    ) -> None:
        self.access = as_access(cluster)
        self._read = backing_reader or self._read_backing
        self._trial_serving = trial_serving
        self._clock = clock
        self._backing: dict[tuple[str, str], tuple[float, Backing]] = {}
        self._turn = 0
        self.models: dict[Variant, TinyModel] = {
            variant: TinyModel("float32" if variant == "baseline" else "bfloat16",
                               outputs.get(variant))
            for variant in ("baseline", "candidate")
        }  # fmt: skip
        self.answered: Counter[Variant] = Counter()
        self._lock = threading.Lock()

    def variant_behind(self, namespace: str, service: str) -> Variant | None:
        """The variant of the Ready pods ``service`` selects; None without any."""
        found = self.backing(namespace, service)
        return None if found is None else found[0]

    def backing(self, namespace: str, service: str) -> Backing | None:
        """The variant and names of the Ready pods ``service`` selects (read at most once per
        :data:`PODS_TTL`); None without any."""
        now = self._clock()
        with self._lock:
            cached = self._backing.get((namespace, service))
        if cached is not None and now - cached[0] < PODS_TTL:
            return cached[1]
        found = self._read(namespace, service)
        if found is not None:  # none Ready yet: asked again next time, as a client retries
            with self._lock:
                self._backing[namespace, service] = (now, found)
        return found

    def _read_backing(self, namespace: str, service: str) -> Backing | None:
        status, body = self.access.get(
            f"/api/v1/namespaces/{namespace}/services/{service}", timeout=5
        )
        if status != 200:
            return None
        selector: Mapping[str, str] = json.loads(body).get("spec", {}).get("selector") or {}
        status, body = self.access.get(f"/api/v1/namespaces/{namespace}/pods", timeout=5)
        pods = json.loads(body).get("items", []) if status == 200 else []
        backing = [
            p for p in pods
            if selector and ready(p)
            and selector.items() <= (p["metadata"].get("labels") or {}).items()
        ]  # fmt: skip
        if not backing:
            return None
        labels = backing[0]["metadata"].get("labels") or {}
        variant: Variant = "candidate" if labels.get(VARIANT_LABEL) == "candidate" else "baseline"
        return variant, sorted(p["metadata"]["name"] for p in backing)

    def answer(self, path: str, request: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and body of ``POST path`` (``/{namespace}/{service}/v1/...``), once the
        pod's latency has passed."""
        reply = self.reply(path, request)
        time.sleep(reply.seconds)
        return reply.status, reply.body

    def reply(self, path: str, request: Mapping[str, Any]) -> Reply:
        """The status and body of ``POST path``, and after how long the pod answers it."""
        parts = path.strip("/").split("/", 2)
        if len(parts) < 3 or parts[2] not in ("v1/completions", "v1/chat/completions"):
            return Reply(404, _error(f"no route {path}", 404))
        namespace, service, api = parts
        found = self.backing(namespace, service)
        if found is None:
            return Reply(503, _error(f"service {namespace}/{service} has no ready endpoints", 503))
        variant, pods = found
        served = None if request.get("logprobs") else self._trial_answer(namespace, pods)
        if served is not None and served.status == 503:
            return Reply(503, _error("the server is overloaded: try again later", 503))
        seconds = 0.0 if served is None else served.seconds
        waited = 0.0 if served is None else served.waited
        if served is not None and served.status != 200:
            return Reply(served.status, _error("the request failed", served.status), seconds)
        model = self.models[variant]
        name = str(request.get("model") or service)
        try:
            body = (
                completion(model, name, request)
                if api == "v1/completions"
                else chat_completion(model, name, request)
            )
        except RequestError as error:
            return Reply(400, _error(str(error), 400))
        with self._lock:
            self.answered[variant] += 1
        return Reply(200, body, seconds, waited)

    def _trial_answer(self, namespace: str, pods: list[str]) -> TrialAnswer | None:
        """How the next of ``pods`` in turn answers a trial request; None unless the fleet
        simulates it."""
        serving = self._trial_serving(namespace) if self._trial_serving else None
        if serving is None or not pods:
            return None
        with self._lock:
            self._turn += 1
            pod = pods[self._turn % len(pods)]
        return serving.serve_trial_request(pod)


def in_process(model: TinyModel, name: str = "tiny") -> Transport:
    """``model``'s answers without HTTP: the client's transport seam, for benchmarks and tests
    that ask thousands of prompts."""

    def answer(path: str, request: dict[str, Any]) -> Mapping[str, Any]:
        try:
            if path == "/v1/completions":
                return completion(model, name, request)
            if path == "/v1/chat/completions":
                return chat_completion(model, name, request)
        except RequestError as error:
            raise RequestRefused(f"{path} refused (400): {error}") from None
        raise RequestRefused(f"{path} refused (404): no route")

    return answer


def _event(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _error(message: str, code: int) -> dict[str, Any]:
    """vLLM's error body."""
    return {"object": "error", "message": message, "type": "BadRequestError", "code": code}


@contextmanager
def model_endpoint(servers: ModelServers) -> Iterator[str]:
    """Serve ``servers`` on a free loopback port; yield the base URL (the Services' paths
    follow it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
                reply = servers.reply(self.path, request)
            except (json.JSONDecodeError, ValueError, TypeError) as error:
                request, reply = {}, Reply(400, _error(f"bad request: {error}", 400))
            if reply.status == 200 and request.get("stream"):
                self._stream(reply)
                return
            time.sleep(reply.seconds)
            raw = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _stream(self, reply: Reply) -> None:
            """Server-sent events as vLLM streams them: the first token once the request has
            queued and been prefilled, the rest once its latency has passed (the mean gap
            between tokens is what it would be; one write for them keeps the test bed's CPU
            low)."""
            first, *rest = stream_chunks(reply.body)
            time.sleep(reply.first_token_seconds)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(_event(first))
            self.wfile.flush()
            time.sleep(reply.seconds - reply.first_token_seconds)
            self.wfile.write(b"".join(_event(chunk) for chunk in rest) + b"data: [DONE]\n\n")

        def log_message(self, *_: Any) -> None:
            pass

    with serving_on_loopback(Handler, "fleet-models") as url:
        yield url
