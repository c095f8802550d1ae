"""The test bed's start-up client against a busy API server: an HTTPS server of the test's own
that answers a create too late, as a kube-apiserver compiling CRDs on a loaded machine did."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from acceltrial_testbed.sandbox.realplane import client as plane_client
from acceltrial_testbed.sandbox.realplane.client import AdminClient
from acceltrial_testbed.sandbox.realplane.pki import Certificates, issue_certificates

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAME = "gateways.gateway.networking.k8s.io"


class SlowFirstAnswer(BaseHTTPRequestHandler):
    """Stores what is created; the first create lands but is answered only after a pause."""

    stored: ClassVar[dict[str, dict[str, object]]] = {}
    posts: ClassVar[list[float]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = body["metadata"]["name"]
        self.posts.append(time.monotonic())
        if name in self.stored:
            self._answer(409, {"kind": "Status", "reason": "AlreadyExists"})
            return
        self.stored[name] = body
        if len(self.posts) == 1:
            time.sleep(3.0)  # past the client's wait, however loaded the machine
        self._answer(201, body)

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        found = self.stored.get(name)
        self._answer(200, found) if found else self._answer(404, {"kind": "Status"})

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client gave up on this answer, as it should

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def busy_server(tmp_path: Path) -> Iterator[tuple[str, Certificates]]:
    certificates = issue_certificates(tmp_path / "pki")
    SlowFirstAnswer.stored, SlowFirstAnswer.posts = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowFirstAnswer)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(certificates.serving_cert), str(certificates.serving_key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", certificates
    server.shutdown()
    server.server_close()


def test_a_create_answered_too_late_is_sent_again_and_reads_what_landed(
    busy_server: tuple[str, Certificates], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plane_client, "BUSY_TIMEOUT_SECONDS", 1.0)
    url, certificates = busy_server
    created = AdminClient(url, certificates).create(CRDS, {"metadata": {"name": NAME}})
    assert created == {"metadata": {"name": NAME}}
    assert len(SlowFirstAnswer.posts) == 2


def test_a_conflict_on_the_first_create_is_the_callers_to_see(
    busy_server: tuple[str, Certificates],
) -> None:
    url, certificates = busy_server
    SlowFirstAnswer.stored[NAME] = {"metadata": {"name": NAME}}
    with pytest.raises(plane_client.ApiError, match="409"):
        AdminClient(url, certificates).create(CRDS, {"metadata": {"name": NAME}})
