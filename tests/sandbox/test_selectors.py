"""Contract: label and field selectors on list and watch."""

from __future__ import annotations

import pytest

from tests.sandbox.conftest import CONFIGMAPS, ROOT_CA, Api, configmap


@pytest.fixture
def labelled(api: Api) -> Api:
    api.post(CONFIGMAPS, configmap("web-1", {"app": "web", "tier": "front"}))
    api.post(CONFIGMAPS, configmap("web-2", {"app": "web"}))
    api.post(CONFIGMAPS, configmap("db-1", {"app": "db", "tier": "back"}))
    api.post(CONFIGMAPS, configmap("plain"))
    return api


def names(api: Api, **query: str) -> list[str]:
    reply = api.get(CONFIGMAPS, **query)
    assert reply.status == 200, reply.body
    return [i["metadata"]["name"] for i in reply.body["items"] if i["metadata"]["name"] != ROOT_CA]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==web", ["web-1", "web-2"]),
        ("app!=web", ["db-1", "plain"]),
        ("app in (web,db)", ["db-1", "web-1", "web-2"]),
        ("app notin (web)", ["db-1", "plain"]),
        ("tier", ["db-1", "web-1"]),
        ("!tier", ["plain", "web-2"]),
        ("app=web,tier", ["web-1"]),
        ("app in (web, db),!tier", ["web-2"]),
    ],
)
def test_label_selectors_filter_lists(labelled: Api, selector: str, expected: list[str]) -> None:
    """Labels and Selectors (kubernetes.io/docs/concepts/overview/working-with-objects/labels):
    equality-based (=, ==, !=; != also matches objects without the key) and set-based (in,
    notin, exists, !exists) requirements, comma-separated, all of which must hold."""
    assert names(labelled, labelSelector=selector) == expected


def test_a_malformed_label_selector_answers_400(labelled: Api) -> None:
    """The API server refuses a selector it cannot parse with 400 Bad Request."""
    assert labelled.get(CONFIGMAPS, labelSelector="app in web").status == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=db-1", ["db-1"]),
        ("metadata.name!=db-1", ["plain", "web-1", "web-2"]),
        ("metadata.namespace=default,metadata.name==plain", ["plain"]),
        ("metadata.namespace=other", []),
    ],
)
def test_field_selectors_on_name_and_namespace(
    labelled: Api, selector: str, expected: list[str]
) -> None:
    """Field Selectors (kubernetes.io/docs/concepts/overview/working-with-objects/
    field-selectors): every kind supports metadata.name and metadata.namespace with =, ==, !=."""
    assert names(labelled, fieldSelector=selector) == expected


def test_an_unsupported_field_answers_400(labelled: Api) -> None:
    """Field selectors on fields the kind does not index are refused with 400 Bad Request
    (for a kind with only the common fields: "is not a known field selector")."""
    reply = labelled.get(CONFIGMAPS, fieldSelector="data.k=v")

    assert reply.status == 400
    assert '"data.k" is not a known field selector' in reply.body["message"]


def test_selectors_apply_to_watch(labelled: Api) -> None:
    """Selectors work the same on watch: only matching objects are sent, and an object whose
    labels change to stop matching is sent as DELETED (the watch cache's filtering)."""
    version = labelled.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    labelled.merge(f"{CONFIGMAPS}/web-2", {"data": {"x": "1"}})
    labelled.merge(f"{CONFIGMAPS}/db-1", {"data": {"x": "1"}})
    labelled.merge(f"{CONFIGMAPS}/web-1", {"metadata": {"labels": {"app": "old"}}})

    events = labelled.watch(
        CONFIGMAPS, labelSelector="app=web", resourceVersion=version, timeoutSeconds="1"
    )

    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "web-2"),
        ("DELETED", "web-1"),
    ]


def test_field_selectors_apply_to_watch(labelled: Api) -> None:
    """A field selector on watch (how kopf and kubectl follow one object) delivers only that
    object's events."""
    version = labelled.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    labelled.merge(f"{CONFIGMAPS}/web-2", {"data": {"x": "1"}})
    labelled.merge(f"{CONFIGMAPS}/db-1", {"data": {"x": "1"}})

    events = labelled.watch(
        CONFIGMAPS, fieldSelector="metadata.name=db-1", resourceVersion=version, timeoutSeconds="1"
    )

    assert [e["object"]["metadata"]["name"] for e in events] == ["db-1"]
