"""A minimal JSON-over-HTTPS client with the admin certificate: enough to probe readiness and
create the Nodes and CRDs while the control plane starts (no kubeconfig parsing; it retries
only what a busy server asks it to: a 429, or an answer that did not come in time)."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from acceltrial_testbed.sandbox.realplane.pki import Certificates

TIMEOUT_SECONDS = 10.0
# A create or read at start-up waits longer and is sent again once it timed out: three planes
# starting at once on two cores each compile the Gateway API's 1.2 MB of CRDs into their OpenAPI
# documents, and one create answered after more than 10 s (a whole test module lost its plane).
BUSY_TIMEOUT_SECONDS = 30.0
TIMEOUT_RETRIES = 2
TOO_MANY_REQUESTS_RETRIES = 50
RETRY_AFTER_SECONDS = 0.2


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class AdminClient:
    def __init__(self, url: str, certificates: Certificates) -> None:
        self.url = url
        self._context = ssl.create_default_context(cafile=str(certificates.ca))
        self._context.load_cert_chain(str(certificates.admin_cert), str(certificates.admin_key))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = TIMEOUT_SECONDS,
    ) -> Any:
        """Send one request; a 429 (a new kind's storage still initializing, or throttling) is
        retried after a moment, as client-go does."""
        for attempt in range(TOO_MANY_REQUESTS_RETRIES + 1):
            try:
                return self._send(method, path, body, content_type, timeout)
            except ApiError as error:
                if error.status != 429 or attempt == TOO_MANY_REQUESTS_RETRIES:
                    raise
                time.sleep(RETRY_AFTER_SECONDS)
        raise AssertionError("unreachable")

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        timeout: float = TIMEOUT_SECONDS,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", content_type)
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(
                request, timeout=timeout, context=self._context
            ) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from error
        return json.loads(text) if text.strip().startswith(b"{") else text.decode()

    def ok(self, path: str) -> bool:
        """True if GET ``path`` answers 2xx; False while the server is down or not ready."""
        try:
            self.request("GET", path)
        except (ApiError, OSError):
            return False
        return True

    def get(self, path: str) -> Any:
        return self._patiently("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to the collection at ``path``. A create whose answer did not come in time
        is sent again; AlreadyExists then means the first one landed, and the object is read."""
        for attempt in range(TIMEOUT_RETRIES + 1):
            try:
                return self.request("POST", path, body, timeout=BUSY_TIMEOUT_SECONDS)
            except ApiError as error:
                if error.status != 409 or attempt == 0:
                    raise
                return self.get(f"{path}/{body['metadata']['name']}")
            except TimeoutError:
                if attempt == TIMEOUT_RETRIES:
                    raise
        raise AssertionError("unreachable")

    def merge_patch(self, path: str, patch: dict[str, Any]) -> Any:
        return self._patiently("PATCH", path, patch, "application/merge-patch+json")

    def _patiently(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """An idempotent request, sent again if its answer did not come in time."""
        for attempt in range(TIMEOUT_RETRIES + 1):
            try:
                return self.request(method, path, body, content_type, BUSY_TIMEOUT_SECONDS)
            except TimeoutError:
                if attempt == TIMEOUT_RETRIES:
                    raise
        raise AssertionError("unreachable")
