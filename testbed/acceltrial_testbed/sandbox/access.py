"""How an in-process client reaches a local cluster: its URL and, for the real control plane,
the TLS context that trusts its CA and presents the admin client certificate.

Every client of the sandbox inside this process (the demo's JSON client, the simulated fleet's
reads, kopf's login in the tests) takes an :class:`Access` instead of a bare URL, so the same
code talks to the emulator (plain HTTP, any token) and to the real kube-apiserver (HTTPS with
client certificates). ``Sandbox.access`` and ``RealControlPlane.access`` give one.
"""

from __future__ import annotations

import functools
import http.client
import ssl
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.client import HTTPResponse
from pathlib import Path

EMULATOR_TOKEN = "sandbox"  # the emulator accepts any bearer token
_KEPT = threading.local()
"""Each thread's open connections, by cluster URL (see :meth:`Access.get`)."""


@dataclass(frozen=True)
class Access:
    """A cluster's URL and the credentials files an HTTPS one needs (all None for HTTP)."""

    url: str
    ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    @property
    def secure(self) -> bool:
        return self.url.startswith("https://")

    @functools.cached_property
    def ssl_context(self) -> ssl.SSLContext | None:
        """Trusts the cluster's CA and presents the client certificate; None for plain HTTP."""
        if not self.secure:
            return None
        context = ssl.create_default_context(cafile=None if self.ca is None else str(self.ca))
        if self.client_cert is not None and self.client_key is not None:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def open(self, request: urllib.request.Request | str, timeout: float) -> HTTPResponse:
        """``urllib.request.urlopen`` with this cluster's TLS context (paths are joined to the
        URL when ``request`` is a string starting with ``/``)."""
        if isinstance(request, str) and request.startswith("/"):
            request = self.url + request
        response: HTTPResponse = urllib.request.urlopen(
            request, timeout=timeout, context=self.ssl_context
        )
        return response

    def get(self, path: str, timeout: float) -> tuple[int, bytes]:
        """``GET path``: the status and the body, on a connection this thread keeps open to
        the cluster. The demo reads its trial four times a second; a TLS handshake per
        read cost the test process more CPU than the reads. A connection the server closed
        meanwhile is opened again once; what still fails raises OSError."""
        kept: dict[str, http.client.HTTPConnection] = _KEPT.__dict__.setdefault("by_url", {})
        for attempt in (1, 2):
            connection = kept.get(self.url) or self.connect(timeout)
            kept[self.url] = connection
            try:
                connection.request("GET", path, headers={"Accept": "application/json"})
                reply = connection.getresponse()
                return reply.status, reply.read()
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                del kept[self.url]
                if attempt == 2:
                    raise OSError(f"GET {path}: {error}") from error
        raise AssertionError("unreachable")

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection to the cluster (not yet open), with its TLS context if HTTPS."""
        where = urllib.parse.urlsplit(self.url)
        host, port = where.hostname or "127.0.0.1", where.port
        if self.secure:
            return http.client.HTTPSConnection(
                host, port, timeout=timeout, context=self.ssl_context
            )
        return http.client.HTTPConnection(host, port, timeout=timeout)


def as_access(cluster: Access | str) -> Access:
    """An :class:`Access` for a plain URL (the emulator, a test's stub), or the one given."""
    return cluster if isinstance(cluster, Access) else Access(cluster)
