"""The Prometheus HTTP API client: instant and range queries, authentication, typed errors.

Authentication: a bearer token, basic auth, or AWS SigV4 (Amazon Managed Service for
Prometheus, signed with botocore's signer). TLS: a custom CA bundle, or verification off. Every
failure is a :class:`MetricsError` subclass whose message says what happened:
unreachable, rejected query (Prometheus' own error text), throttled (429), server error,
timeout, or an answer of an unexpected shape. Only a rejected query is permanent.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.session import Session

from acceltrial.providers.metrics.port import MetricsError

Signer = Callable[[str, str, bytes, dict[str, str]], dict[str, str]]


@dataclass(frozen=True)
class Series:
    """One time series of a query result: its labels and ``(timestamp, value)`` samples."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


class PrometheusUnreachable(MetricsError):
    """No connection could be made."""


class QueryRejected(MetricsError):
    """Prometheus refused the query (HTTP 4xx but 429), e.g. a syntax error or no permission:
    asking again cannot help."""

    temporary = False


class PrometheusBusy(MetricsError):
    """Prometheus (or a proxy in front of it) asked to slow down (HTTP 429)."""


class PrometheusServerError(MetricsError):
    """Prometheus failed to answer (HTTP 5xx)."""


class QueryTimeout(MetricsError):
    """No answer within the timeout."""


class BadResponse(MetricsError):
    """The answer was not the Prometheus API's shape."""


@dataclass(frozen=True)
class Auth:
    """How requests are authenticated: at most one of these."""

    bearer_token: str | None = None
    basic: tuple[str, str] | None = None
    sign: Signer | None = None
    """Adds headers to a request, given (method, url, body, headers); see :func:`sigv4_signer`."""


def sigv4_signer(region: str, service: str = "aps", credentials: Any = None) -> Signer:
    """A signer for Amazon Managed Service for Prometheus with botocore's SigV4.

    ``credentials`` defaults to botocore's chain (IRSA on EKS, env vars, profiles).
    """
    creds = credentials or Session().get_credentials()
    if creds is None:
        raise MetricsError("sigv4: no AWS credentials found (IRSA, environment or profile)")

    def sign(method: str, url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(creds, service, region).add_auth(request)
        return dict(request.headers.items())

    return sign


class PrometheusClient:
    """A client of one Prometheus (or compatible) HTTP API."""

    def __init__(
        self,
        address: str,
        timeout_seconds: float = 10.0,
        auth: Auth | None = None,
        ca_pem: str | None = None,
        insecure_skip_verify: bool = False,
    ) -> None:
        self._base = address.rstrip("/")
        self._timeout = timeout_seconds
        self._auth = auth or Auth()
        # Loading the system CA store costs tens of milliseconds: only https needs it, once.
        https = self._base.startswith("https://")
        self._ssl = _ssl_context(ca_pem, insecure_skip_verify) if https else None

    def instant(self, query: str, at: datetime) -> list[Series]:
        data = self._post("/api/v1/query", {"query": query, "time": _ts(at)})
        return _parse(data, "vector")

    def range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> list[Series]:
        form = {"query": query, "start": _ts(start), "end": _ts(end), "step": f"{step_seconds:g}"}
        return _parse(self._post("/api/v1/query_range", form), "matrix")

    def _post(self, path: str, form: Mapping[str, str]) -> Any:
        url = self._base + path
        body = urllib.parse.urlencode(form).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        headers.update(self._auth_headers("POST", url, body, headers))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._ssl) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as error:
            raise _http_error(error) from None
        except TimeoutError:
            raise QueryTimeout(f"no answer from {self._base} within {self._timeout:g}s") from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise QueryTimeout(
                    f"no answer from {self._base} within {self._timeout:g}s"
                ) from None
            raise PrometheusUnreachable(f"cannot reach {self._base}: {error.reason}") from None
        except OSError as error:
            raise PrometheusUnreachable(f"cannot reach {self._base}: {error}") from None
        return _json(raw)

    def _auth_headers(
        self, method: str, url: str, body: bytes, headers: dict[str, str]
    ) -> dict[str, str]:
        if self._auth.bearer_token is not None:
            return {"Authorization": f"Bearer {self._auth.bearer_token}"}
        if self._auth.basic is not None:
            pair = ":".join(self._auth.basic).encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        if self._auth.sign is not None:
            return self._auth.sign(method, url, body, dict(headers))
        return {}


@functools.lru_cache(maxsize=32)
def _ssl_context(ca_pem: str | None, insecure: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _http_error(error: urllib.error.HTTPError) -> MetricsError:
    detail = ""
    try:
        payload = json.loads(error.read() or b"{}")
        detail = f"{payload.get('errorType', '')}: {payload.get('error', '')}".strip(": ")
    except (ValueError, AttributeError, OSError):
        detail = error.reason if isinstance(error.reason, str) else ""
    text = f"HTTP {error.code}" + (f": {detail}" if detail else "")
    if error.code == 429:
        return PrometheusBusy(text)
    return QueryRejected(text) if 400 <= error.code < 500 else PrometheusServerError(text)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise BadResponse("the answer is not JSON") from None


def _parse(payload: Any, expected: str) -> list[Series]:
    if not isinstance(payload, dict) or payload.get("status") != "success":
        raise BadResponse(f"unexpected answer: {str(payload)[:200]}")
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != expected:
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise BadResponse(f"expected a {expected} result, got {kind!r}")
    try:
        return [_series(item, expected) for item in data["result"]]
    except (KeyError, TypeError, ValueError, IndexError):
        raise BadResponse(f"malformed {expected} result") from None


def _series(item: dict[str, Any], kind: str) -> Series:
    points = [item["value"]] if kind == "vector" else item["values"]
    samples = tuple((float(ts), float(value)) for ts, value in points)
    return Series(labels=dict(item.get("metric", {})), samples=samples)


def _ts(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"
