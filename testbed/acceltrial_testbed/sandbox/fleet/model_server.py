"""The fleet's model servers over HTTP: each Service's OpenAI-compatible API, answered by the
tiny model of the variant whose Ready pods it selects.

``/{namespace}/{service}/v1/completions`` and ``/v1/chat/completions``, as a client in the
cluster reaches ``http://{service}.{namespace}.svc:{port}/v1/...``: the operator's quality
check is pointed here by its documented setting, as the demo does. The Service is read from the
API server on each request (quality requests are few): no Ready pod behind it answers 503, as a
Service without endpoints refuses the connection. The GPU pods answer in float32, the Neuron
candidate's in bfloat16, each with its scenario's ``outputs``. The requests are counted apart
(:attr:`ModelServers.answered`): the operator's, never users'.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.metrics import Variant
from acceltrial.providers.quality.openai import RequestRefused, Transport
from acceltrial_testbed.sandbox.access import Access, as_access
from acceltrial_testbed.sandbox.fleet.answers import RequestError, chat_completion, completion
from acceltrial_testbed.sandbox.fleet.language_model import Outputs, TinyModel
from acceltrial_testbed.sandbox.fleet.serving import serving_on_loopback
from acceltrial_testbed.sandbox.fleet.traffic import ready


class ModelServers:
    """The variants' models, and the requests each answered."""

    def __init__(self, cluster: Access | str, outputs: Mapping[Variant, Outputs]) -> None:
        self.access = as_access(cluster)
        self.models: dict[Variant, TinyModel] = {
            variant: TinyModel("float32" if variant == "baseline" else "bfloat16",
                               outputs.get(variant))
            for variant in ("baseline", "candidate")
        }  # fmt: skip
        self.answered: Counter[Variant] = Counter()
        self._lock = threading.Lock()

    def variant_behind(self, namespace: str, service: str) -> Variant | None:
        """The variant of the Ready pods ``service`` selects; None without any."""
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
        return "candidate" if labels.get(VARIANT_LABEL) else "baseline"

    def answer(self, path: str, request: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and body of ``POST path`` (``/{namespace}/{service}/v1/...``)."""
        parts = path.strip("/").split("/", 2)
        if len(parts) < 3 or parts[2] not in ("v1/completions", "v1/chat/completions"):
            return 404, _error(f"no route {path}", 404)
        namespace, service, api = parts
        variant = self.variant_behind(namespace, service)
        if variant is None:
            return 503, _error(f"service {namespace}/{service} has no ready endpoints", 503)
        model = self.models[variant]
        name = str(request.get("model") or service)
        try:
            body = (
                completion(model, name, request)
                if api == "v1/completions"
                else chat_completion(model, name, request)
            )
        except RequestError as error:
            return 400, _error(str(error), 400)
        with self._lock:
            self.answered[variant] += 1
        return 200, body


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
                status, body = servers.answer(self.path, request)
            except (json.JSONDecodeError, ValueError, TypeError) as error:
                status, body = 400, _error(f"bad request: {error}", 400)
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_: Any) -> None:
            pass

    with serving_on_loopback(Handler, "fleet-models") as url:
        yield url
