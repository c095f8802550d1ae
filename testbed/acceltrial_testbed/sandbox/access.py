"""How an in-process client reaches a local cluster: its URL and, for the real control plane,
the TLS context that trusts its CA and presents the admin client certificate.

Every client of the sandbox inside this process (the demo's JSON client, the simulated fleet's
reads, kopf's login in the tests) takes an :class:`Access` instead of a bare URL, so the same
code talks to the emulator (plain HTTP, any token) and to the real kube-apiserver (HTTPS with
client certificates). ``Sandbox.access`` and ``RealControlPlane.access`` give one.
"""

from __future__ import annotations

import functools
import ssl
import urllib.request
from dataclasses import dataclass
from http.client import HTTPResponse
from pathlib import Path

EMULATOR_TOKEN = "sandbox"  # the emulator accepts any bearer token


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


def as_access(cluster: Access | str) -> Access:
    """An :class:`Access` for a plain URL (the emulator, a test's stub), or the one given."""
    return cluster if isinstance(cluster, Access) else Access(cluster)
