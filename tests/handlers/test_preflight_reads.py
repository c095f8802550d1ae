"""Preflight's cost does not grow with the number of trials: trials starting together share a
listing of the Nodes (never one from before they asked), and a trial finds another trial on its
baseline in the operator's index of trials (handlers/trials.py) instead of listing the
namespace's trials. Before, N trials starting together decoded N x (every Node + every trial):
at 500 trials on the real API server that was most of the operator's start-up and its peak
memory."""

from __future__ import annotations

from acceltrial.api.trial import TRIAL_GVR
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.gateway import Kube
from acceltrial.kube.nodes import NodeList
from tests.handlers.conftest import RecordingClient, create_trial, trial_ref, trial_spec
from tests.sandbox.conftest import Api


def test_trials_starting_together_share_a_listing_of_the_nodes_from_after_they_asked(
    api: Api, kube: Kube, recorder: RecordingClient, namespace: str
) -> None:
    now = [1000.0]
    kube.node_list = NodeList(clock=lambda: now[0])
    spec = trial_spec()
    first = create_trial(api, namespace, spec)
    worlds = [TrialWorld(kube, spec, ref, known_trials=[])
              for ref in (first, trial_ref(namespace, "another-trials-uid"))]  # fmt: skip
    recorder.sent.clear()

    for world in worlds:  # the clock stands still: both asked when the listing started
        assert world.preflight() is not None
        assert world.snapshot.nodes, "the cluster's Nodes"
    assert recorder.count("GET", "/api/v1/nodes") == 1, recorder.sent

    now[0] += 0.1
    later = TrialWorld(kube, spec, worlds[0].trial, known_trials=[])
    assert later.snapshot.nodes
    assert recorder.count("GET", "/api/v1/nodes") == 2, "asked later: listed again"


def test_a_trial_on_the_same_baseline_is_found_in_the_index_not_by_listing_trials(
    api: Api, kube: Kube, recorder: RecordingClient, namespace: str
) -> None:
    spec = trial_spec()
    ref = create_trial(api, namespace, spec)
    running = {
        "metadata": {"name": "llama3-inf2-earlier", "uid": "another-uid"},
        "spec": {"baseline": {"deploymentRef": {"name": "llama3-gpu"}}},
        "status": {"phase": "Progressing"},
    }
    itself = {**running, "metadata": {"name": ref.name, "uid": ref.uid}}
    recorder.sent.clear()

    problems, _ = TrialWorld(kube, spec, ref, known_trials=[itself, running]).preflight()

    assert "trial llama3-inf2-earlier already runs on baseline llama3-gpu" in " ".join(problems)
    assert recorder.count("GET", TRIAL_GVR.collection_path(namespace)) == 0, recorder.sent
    alone, _ = TrialWorld(kube, spec, ref, known_trials=[itself]).preflight()
    assert not [p for p in alone if "already runs" in p], "itself is no competitor"
