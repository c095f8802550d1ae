"""One call of the official Kubernetes client, as the gateway makes it: with a timeout, the
answer's JSON as it came, and a failure as a KubeError saying the verb, the object and whether
a retry can help.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

Manifest = dict[str, Any]


PERMANENT_STATUSES = frozenset({400, 403, 404, 422})
"""Refusals a retry cannot change: a bad request, forbidden, a missing object, invalid."""


class KubeError(Exception):
    """A request to the API server failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def permanent(self) -> bool:
        """Whether retrying cannot help (409 conflicts, 429, 5xx and no answer are temporary)."""
        return self.status in PERMANENT_STATUSES

    def doing(self, what: str) -> KubeError:
        """The same error, saying what was being done."""
        return KubeError(self.status, f"{what}: {self}")


REQUEST_TIMEOUT_SECONDS = 30.0
"""How long one request may take before it counts as no answer (a temporary error): without a
timeout, a request to an API server that stopped answering would hold the trial forever."""


def versioned(method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """A JSON patch that tests the resourceVersion read: its failed test (422 on the API
    server) means someone wrote in between, a conflict to retry, not a refusal."""
    try:
        read(method, *args, **kwargs)
    except KubeError as error:
        if error.status == 422:
            raise KubeError(409, f"changed since read, will read again: {error}") from None
        raise


def refusal(error: ApiException) -> str:
    """The API server's own sentence (a Status' message), or the raw body."""
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {error.status}: {message or error.body}"


def read(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Manifest | None:
    try:
        return call(method, *args, **kwargs)
    except KubeError as error:
        if error.status == 404:
            return None
        raise


_VERBS = {"read": "get", "patch": "patch", "delete": "delete", "list": "list", "create": "create",
          "replace": "update", "get": "get"}  # fmt: skip
_KINDS = {"deployment": "Deployment", "service": "Service", "config_map": "ConfigMap",
          "secret": "Secret", "pod": "Pod", "node": "Node",
          "horizontal_pod_autoscaler": "HorizontalPodAutoscaler",
          "httproutes": "HTTPRoute", "acceleratortrials": "AcceleratorTrial",
          "inferencepools": "InferencePool", "inference_pool": "InferencePool"}  # fmt: skip


def request_target(method: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """The verb and the object of a client call, e.g. ``patch Service serving/llama3``, read
    from the official client's method name and its positional arguments."""
    words = getattr(method, "__name__", "call").lstrip("_").split("_")
    verb = _VERBS.get(words[0], words[0])
    rest = "_".join(words[1:]).removeprefix("namespaced_").removesuffix("_for_all_namespaces")
    rest = rest.removesuffix("_scale").removesuffix("_status")
    if rest == "custom_object":  # (group, version, namespace, plural, name, ...)
        kind = _KINDS.get(str(args[3]) if len(args) > 3 else "", "object")
        names = [str(a) for a in args[2:3]] + [str(a) for a in args[4:5] if isinstance(a, str)]
    else:  # (name, namespace, ...) for one object; (namespace,) for a list
        kind = _KINDS.get(rest, rest)
        strings = [a for a in args[:2] if isinstance(a, str)]
        names = strings[::-1] if verb != "list" else strings
    return " ".join((verb, kind, "/".join(names))).strip()


def _timeout_of(method: Callable[..., Any]) -> float:
    api = getattr(getattr(method, "__self__", None), "api_client", None)
    return float(getattr(api, "acceltrial_timeout_seconds", REQUEST_TIMEOUT_SECONDS))


def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Manifest:
    """Run a client call and return the answer's JSON as it came; a failure says the verb and
    the object (``patch HTTPRoute serving/llama3: HTTP 422: ...``)."""
    kwargs.setdefault("_request_timeout", _timeout_of(method))
    try:
        reply = method(*args, _preload_content=False, **kwargs)
    except ApiException as error:
        refused = f"{request_target(method, args)}: {refusal(error)}"
        raise KubeError(int(error.status or 0), refused) from None
    except (OSError, urllib3.exceptions.HTTPError) as error:
        target = request_target(method, args)
        raise KubeError(0, f"{target}: the API server cannot be reached: {error}") from None
    body = json.loads(reply.data or b"{}")
    return body if isinstance(body, dict) else {}
