"""The cluster as the fleet sees it, kept current by watches instead of read on every tick.

A gateway learns of route and endpoint changes by watching the API server, not by listing it
four times a second. Listed on every tick, the fleet's reads were the largest load on a demo's
API server and a good part of the demo process's CPU, on a machine where the tests are
CPU-bound. :class:`WatchedCollections` lists a collection once when first asked for it, then
follows it with a watch from that list's resourceVersion in a thread of its own, relisting when
the server says the version is too old (410) and watching again when a watch ends (the server
ends each after ``timeoutSeconds``). A type the cluster does not serve lists as empty and is
asked for again a moment later (a CRD installed after the fleet started).

:func:`watched_reader` reads what :func:`~.traffic.read_cluster` lists, and
:func:`watched_namespaces` the same for every namespace at once, from the watched collections.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any

from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.fleet.traffic import (
    POOLS,
    ClusterReading,
    ClusterView,
    Entry,
    Manifest,
    by_namespace,
    names_pools,
)

LOG = logging.getLogger(__name__)
WATCH_SECONDS = 60
"""How long the server keeps each watch open before the fleet watches again."""
RETRY_SECONDS = 0.5
"""How soon a collection that could not be listed or watched is tried again."""
GATEWAY = "/apis/gateway.networking.k8s.io"


class GoneError(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class Collection:
    """One collection path, listed once and then followed by a watch."""

    def __init__(self, access: Access, path: str) -> None:
        self.access = access
        self.path = path
        self._items: dict[tuple[str, str], Manifest] = {}
        self._lock = threading.Lock()
        self._listed = threading.Event()
        self._stopped = threading.Event()
        self._connection: http.client.HTTPConnection | None = None
        self._thread = threading.Thread(target=self._follow, name=f"watch {path}", daemon=True)

    def start(self, wait: float = 10.0) -> Collection:
        self._thread.start()
        self._listed.wait(wait)
        return self

    def items(self) -> list[Manifest]:
        with self._lock:
            return list(self._items.values())

    def stop(self) -> None:
        self._stopped.set()
        connection = self._connection
        if connection is not None and connection.sock is not None:
            with suppress(OSError):
                connection.sock.shutdown(2)  # ends the blocked read of the watch

    def _follow(self) -> None:
        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except GoneError:
                version = None
            except (OSError, http.client.HTTPException, ValueError) as error:
                if self._stopped.is_set():
                    return
                LOG.debug("watching %s: %s; again shortly", self.path, error)
                version = None
                self._stopped.wait(RETRY_SECONDS)

    def _list(self) -> str | None:
        status, body = self.access.get(self.path, timeout=10)
        if status == 404:  # not served (yet): empty, and listed again shortly
            self._replace({})
            self._listed.set()
            raise OSError(f"{self.path} is not served")
        if status >= 400:
            raise OSError(f"GET {self.path}: HTTP {status}")
        listed = json.loads(body)
        self._replace({_key(item): item for item in listed.get("items") or []})
        self._listed.set()
        version = (listed.get("metadata") or {}).get("resourceVersion")
        return str(version) if version else None

    def _replace(self, items: dict[tuple[str, str], Manifest]) -> None:
        with self._lock:
            self._items = items

    def _watch(self, version: str | None) -> str | None:
        query = {"watch": "1", "timeoutSeconds": str(WATCH_SECONDS)}
        if version:
            query["resourceVersion"] = version
        connection = self._open()
        try:
            connection.request(
                "GET", f"{self.path}?{urllib.parse.urlencode(query)}",
                headers={"Accept": "application/json"},
            )  # fmt: skip
            reply = connection.getresponse()
            if reply.status == 410:
                raise GoneError()
            if reply.status >= 400:
                raise OSError(f"watch {self.path}: HTTP {reply.status}")
            for event in _events(reply):
                version = self._apply(event) or version
        finally:
            connection.close()
            self._connection = None
        return version

    def _open(self) -> http.client.HTTPConnection:
        connection = self.access.connect(timeout=WATCH_SECONDS + 30)
        self._connection = connection
        return connection

    def _apply(self, event: dict[str, Any]) -> str | None:
        """Apply one watch event; the resourceVersion it carries."""
        kind, item = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if item.get("code") == 410:
                raise GoneError()
            raise OSError(f"watch {self.path}: {item.get('message')}")
        version = (item.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            with self._lock:
                if kind == "DELETED":
                    self._items.pop(_key(item), None)
                else:
                    self._items[_key(item)] = item
        return str(version) if version else None


def _events(reply: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    while True:
        line = reply.readline()
        if not line:
            return
        if line.strip():
            yield json.loads(line)


def _key(item: Manifest) -> tuple[str, str]:
    metadata = item.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


class WatchedCollections:
    """Every collection asked for so far, each followed by its own watch."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._collections: dict[str, Collection] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def items(self, path: str) -> list[Manifest]:
        """The collection's objects now: listed (and then watched) on the first call."""
        with self._lock:
            collection = self._collections.get(path)
            if collection is None and not self._stopped:
                collection = self._collections[path] = Collection(self.access, path)
                collection.start()
        return [] if collection is None else collection.items()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for collection in self._collections.values():
                collection.stop()


def watched_reader(watched: WatchedCollections) -> Callable[[Access, Entry], ClusterView]:
    """A :class:`~.exporter.Fleet` reader: one namespace's view, from ``watched``."""

    def read(_access: Access, entry: Entry) -> ClusterView:
        base = f"/api/v1/namespaces/{entry.namespace}"
        pods = watched.items(f"{base}/pods")
        services = {s["metadata"]["name"]: s for s in watched.items(f"{base}/services")}
        if entry.route is None:
            return ClusterView(pods, services)
        where = entry.route_namespace or entry.namespace
        routes = watched.items(f"{GATEWAY}/v1/namespaces/{where}/httproutes")
        route = next((r for r in routes if r["metadata"]["name"] == entry.route), None)
        grants = watched.items(f"{GATEWAY}/v1beta1/namespaces/{entry.namespace}/referencegrants")
        pools: dict[str, Manifest] = {}
        if route is not None and names_pools(route):  # watched only where a route names one
            found = watched.items(f"{POOLS}/namespaces/{entry.namespace}/inferencepools")
            pools = {pool["metadata"]["name"]: pool for pool in found}
        return ClusterView(pods, services, route, grants, pools)

    return read


def watched_namespaces(watched: WatchedCollections) -> Callable[[Access], ClusterReading]:
    """A :class:`~.fleets.Fleets` reader: every namespace's objects, from ``watched``."""

    def read(_access: Access) -> ClusterReading:
        routes = watched.items(f"{GATEWAY}/v1/httproutes")
        pools: dict[str, list[Manifest]] = {}
        if any(names_pools(route) for route in routes):
            pools = by_namespace(watched.items(f"{POOLS}/inferencepools"))
        return ClusterReading(
            by_namespace(watched.items("/api/v1/pods")),
            by_namespace(watched.items("/api/v1/services")),
            by_namespace(routes),
            by_namespace(watched.items(f"{GATEWAY}/v1beta1/referencegrants")),
            pools,
        )

    return read
