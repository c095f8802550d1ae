"""Contract: watch semantics (API concepts, "Efficient detection of changes")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from acceltrial_testbed.sandbox.cluster import Sandbox
from tests.sandbox.conftest import CONFIGMAPS, ROOT_CA, Api, configmap, eventually


def without_root_ca(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of the test's own objects: a real cluster also has kube-root-ca.crt, published
    into every namespace by kube-controller-manager."""
    return [e for e in events if e["object"]["metadata"].get("name") != ROOT_CA]


def test_watch_from_a_version_delivers_only_later_events(api: Api) -> None:
    """ "Start a watch at the resourceVersion of the list": the server sends every change after
    that version, in order, and nothing from before."""
    api.post(CONFIGMAPS, configmap("before"))
    version = api.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    api.post(CONFIGMAPS, configmap("after"))
    api.merge(f"{CONFIGMAPS}/before", {"data": {"k": "v"}})
    api.delete(f"{CONFIGMAPS}/after")

    events = api.watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="1")

    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "after"),
        ("MODIFIED", "before"),
        ("DELETED", "after"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)
    assert versions[0] > int(version)


def test_watch_without_a_version_starts_with_the_current_objects(api: Api) -> None:
    """Without resourceVersion ("Get State and Start at Most Recent") the watch first sends
    every existing object as ADDED."""
    api.post(CONFIGMAPS, configmap("a"))
    api.post(CONFIGMAPS, configmap("b"))

    events = without_root_ca(api.watch(CONFIGMAPS, timeoutSeconds="1"))

    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_watch_honours_timeout_seconds(api: Api) -> None:
    """timeoutSeconds limits the watch call: the server closes the stream after it."""
    version = api.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    started = time.monotonic()

    events = api.watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="1")

    elapsed = time.monotonic() - started
    assert events == []
    assert 0.9 <= elapsed < 5


@pytest.mark.emulator_only  # reads the emulator's store
def test_watch_delivers_events_as_they_happen(cluster: Sandbox, api: Api) -> None:
    """A watch stays open and streams changes made after it started."""
    version = api.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []
    watcher = threading.Thread(
        target=lambda: events.extend(
            api.watch(CONFIGMAPS, count=1, resourceVersion=version, timeoutSeconds="10")
        )
    )
    watcher.start()
    eventually(lambda: cluster.call(lambda: cluster.store.watch_count) == 1)

    api.post(CONFIGMAPS, configmap("late"))
    watcher.join(timeout=10)

    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "late")]


@pytest.mark.emulator_only  # reads the emulator's store
def test_a_version_no_longer_kept_answers_410_gone(cluster: Sandbox, api: Api) -> None:
    """ "410 Gone": when the requested resourceVersion is older than the server's history
    (etcd compaction), the watch ends with an ERROR event carrying a Status with code 410, so
    the client relists."""
    version = api.post(CONFIGMAPS, configmap("a")).body["metadata"]["resourceVersion"]
    api.merge(f"{CONFIGMAPS}/a", {"data": {"k": "v"}})
    cluster.call(cluster.store.compact)

    events = api.watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="1")

    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] == "Expired"


def test_history_is_bounded() -> None:
    """The server keeps a bounded window of changes: past it, old versions are gone (410)."""
    with Sandbox(history=3) as cluster:
        api = Api(cluster.url)
        first = api.post(CONFIGMAPS, configmap("a")).body["metadata"]["resourceVersion"]
        for value in "12345":
            api.merge(f"{CONFIGMAPS}/a", {"data": {"k": value}})

        old = api.watch(CONFIGMAPS, resourceVersion=first, timeoutSeconds="1")
        recent = api.watch(CONFIGMAPS, resourceVersion=str(int(first) + 2), timeoutSeconds="1")

    assert old[0]["object"]["code"] == 410
    assert [e["object"]["data"]["k"] for e in recent] == ["3", "4", "5"]


@pytest.mark.emulator_only  # the real server sends bookmarks about once a minute, not at once
def test_bookmarks_carry_the_current_version(api: Api) -> None:
    """API concepts, "Watch bookmarks": with allowWatchBookmarks=true the server may send
    BOOKMARK events whose object has only the kind and the current resourceVersion; here one
    comes before a quiet watch ends, so the client resumes from a fresh version."""
    api.post(CONFIGMAPS, configmap("a"))
    api.post("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                    "metadata": {"name": "s"}})  # fmt: skip
    version = api.get(CONFIGMAPS).body["metadata"]["resourceVersion"]

    events = api.watch(
        CONFIGMAPS, resourceVersion=version, timeoutSeconds="1", allowWatchBookmarks="true"
    )

    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["object"]["kind"] == "ConfigMap"
    assert events[0]["object"]["metadata"]["resourceVersion"] == version


def test_initial_events_end_with_a_bookmark(api: Api) -> None:
    """Streaming lists (sendInitialEvents=true, KEP-3157): the current objects come as ADDED,
    then a BOOKMARK annotated k8s.io/initial-events-end marks the end of the initial state."""
    api.post(CONFIGMAPS, configmap("a"))
    existing = len(api.get(CONFIGMAPS).body["items"])

    events = api.watch(
        CONFIGMAPS,
        count=existing + 1,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
        timeoutSeconds="5",
    )

    events = without_root_ca(events)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}
