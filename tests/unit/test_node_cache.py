"""The process's Node cache: a Node is read once, again after its maximum age, and again next
time when it was gone; only what the queries use is kept."""

from __future__ import annotations

from typing import Any

from acceltrial.kube.nodes import NodeCache


class Nodes:
    """Nodes by name, counting reads."""

    def __init__(self, *names: str) -> None:
        self.existing = {name: node(name) for name in names}
        self.reads: list[str] = []

    def node(self, name: str) -> dict[str, Any] | None:
        self.reads.append(name)
        return self.existing.get(name)


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "inf2.8xlarge"},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
        "status": {"images": ["a large list"]},
    }  # fmt: skip


def test_a_node_is_read_once_and_again_after_its_maximum_age() -> None:
    now = [0.0]
    cache, nodes = NodeCache(max_age_seconds=300, clock=lambda: now[0]), Nodes("a", "b")
    assert [n["metadata"]["name"] for n in cache.named(nodes, ["b", "a", None, "a"])] == ["a", "b"]
    now[0] = 299.0
    cache.named(nodes, ["a", "b"])
    assert nodes.reads == ["a", "b"]
    now[0] = 301.0
    cache.named(nodes, ["a"])
    assert nodes.reads == ["a", "b", "a"]


def test_a_node_that_is_gone_is_asked_for_again() -> None:
    cache, nodes = NodeCache(clock=lambda: 0.0), Nodes("a")
    assert cache.named(nodes, ["a", "new"]) == [cache.named(nodes, ["a"])[0]]
    nodes.existing["new"] = node("new")
    assert [n["metadata"]["name"] for n in cache.named(nodes, ["new"])] == ["new"]
    assert nodes.reads == ["a", "new", "new"]


def test_only_the_fields_the_queries_use_are_kept() -> None:
    kept = NodeCache().named(Nodes("a"), ["a"])[0]
    assert kept == {
        "metadata": {"name": "a", "labels": {"node.kubernetes.io/instance-type": "inf2.8xlarge"}},
        "spec": {"providerID": "aws:///us-east-1a/i-a"},
    }
