"""A loopback HTTP(S) server for tests: the Prometheus client's transport, the fleet's exporter."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Responder = Callable[[BaseHTTPRequestHandler, bytes], tuple[int, bytes]]


@contextmanager
def http_server(
    respond: Responder,
    tls: ssl.SSLContext | None = None,
    content_type: str = "application/json",
) -> Iterator[str]:
    """Serve GETs and POSTs with ``respond(handler, body)`` on a free loopback port; yield the
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, payload = respond(self, body)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "https" if tls is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
