"""kube/nodes.py NodeList: trials asking while a listing is in flight share the next one, never
one that started before they asked; one listing at a time, nothing kept from a failed one, and
only what capacity checks read."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from acceltrial.kube.nodes import NodeList

NODE: dict[str, Any] = {
    "metadata": {
        "name": "ip-10-0-1-7", "labels": {"node.kubernetes.io/instance-type": "inf2.xlarge"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {"providerID": "aws:///us-east-1a/i-0abc",
             "taints": [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"aws.amazon.com/neuroncore": "2"},
               "capacity": {"aws.amazon.com/neuroncore": "2"},
               "images": [{"names": ["vllm"], "sizeBytes": 9_000_000_000}],
               "conditions": [{"type": "Ready", "status": "True"}]},
}  # fmt: skip


class Lister:
    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls = 0
        self.gate = gate
        self.fail_next = False

    def nodes(self) -> list[dict[str, Any]]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail_next:
            self.fail_next = False
            raise OSError("the API server cannot be reached")
        return [NODE]


def test_a_listing_is_shared_only_by_asks_no_later_than_its_start() -> None:
    now = [0.0]
    nodes, lister = NodeList(clock=lambda: now[0]), Lister()
    assert nodes.all(lister) == nodes.all(lister), "asked at the listing's start: shared"
    assert lister.calls == 1
    now[0] = 0.1
    nodes.all(lister)
    assert lister.calls == 2, "asked after it started: a Node may have gone since"
    aged = NodeList(max_age_seconds=5, clock=lambda: now[0])
    aged.all(lister)
    now[0] = 5.0
    aged.all(lister)
    assert lister.calls == 3
    now[0] = 5.2
    aged.all(lister)
    assert lister.calls == 4


def test_trials_asking_at_once_wait_for_one_listing() -> None:
    gate = threading.Event()
    nodes, lister = NodeList(), Lister(gate)
    answers: list[object] = []
    threads = [threading.Thread(target=lambda: answers.append(nodes.all(lister)))
               for _ in range(8)]  # fmt: skip
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(5)
    assert len(answers) == 8
    assert lister.calls <= 2, "the one in flight, then one for every thread that waited"


def test_a_failed_listing_is_not_kept() -> None:
    nodes, lister = NodeList(), Lister()
    lister.fail_next = True
    with pytest.raises(OSError, match="cannot be reached"):
        nodes.all(lister)
    assert nodes.all(lister)
    assert lister.calls == 2


def test_only_what_capacity_and_neuron_checks_read_is_kept() -> None:
    (kept,) = NodeList().all(Lister())
    assert kept == {
        "metadata": {"name": "ip-10-0-1-7",
                     "labels": {"node.kubernetes.io/instance-type": "inf2.xlarge"}},
        "spec": NODE["spec"],
        "status": {"allocatable": {"aws.amazon.com/neuroncore": "2"},
                   "capacity": {"aws.amazon.com/neuroncore": "2"}},
    }  # fmt: skip
