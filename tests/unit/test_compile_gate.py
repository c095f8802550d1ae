"""The compile gate, tick by tick through the state machine: the Job is started once, waited for
within compile.timeout, and either lets the candidate be deployed or ends the trial Failed with
its reason, the candidate never created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from acceltrial.api.neuron import CompileStatus
from acceltrial.api.report import Compatibility
from acceltrial.api.status import TrialStatus
from acceltrial.api.validation import validate_trial
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.compile_gate import (
    CompileJobState,
    StartCompile,
    compile_job,
    with_compile_note,
)
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.ticks import DeployCandidate, Observation, TickResult
from tests.unit.test_lifecycle import ORIGINAL, make_spec

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TRIAL = TrialRef("llama3-inf2", "serving", "uid-1")
TEMPLATE = {"spec": {"containers": [{"name": "neuronx-cc", "image": "compiler:2.21"}]}}


def spec(**compile: Any) -> Any:
    return make_spec(
        candidate={
            "image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2,
            "compiledArtifacts": "s3://models/neff/llama3/",
            "compile": {"template": TEMPLATE, "timeout": "10m", **compile},
        }
    )  # fmt: skip


def tick(status: TrialStatus, at: float, job: CompileJobState | None) -> TickResult:
    observation = Observation(
        now=T0 + timedelta(seconds=at), generation=1, routing=ORIGINAL, compile_job=job
    )
    return decide(spec(), status, observation)


def preflight() -> TrialStatus:
    return decide(spec(), TrialStatus(), Observation(now=T0, generation=1)).status


def test_the_job_starts_then_the_candidate_is_deployed_after_it_succeeded() -> None:
    first = tick(preflight(), 0, CompileJobState("llama3-inf2-compile", "Absent"))
    assert first.actions == (StartCompile(),)
    assert first.status.phase == "Preflight"
    assert first.status.compile is not None
    assert first.status.compile.outcome == "Running"
    running = tick(first.status, 30, CompileJobState("llama3-inf2-compile", "Running"))
    assert running.actions == ()
    assert running.status.phase == "Preflight"
    assert "running for 30s of 10m" in (running.status.message or "")
    done = tick(running.status, 60, CompileJobState(
        "llama3-inf2-compile", "Succeeded", finished_at=T0 + timedelta(seconds=50)))  # fmt: skip
    assert DeployCandidate() in done.actions
    assert done.status.phase == "Progressing"
    assert done.status.compile is not None
    assert (done.status.compile.outcome, done.status.compile.seconds) == ("Succeeded", 50.0)


def test_a_failed_job_ends_the_trial_with_its_reason_and_no_candidate() -> None:
    started = tick(preflight(), 0, CompileJobState("llama3-inf2-compile", "Absent")).status
    why = "BackoffLimitExceeded: Job has reached the specified backoff limit; log tail:\nERROR"
    failed = tick(started, 40, CompileJobState("llama3-inf2-compile", "Failed", reason=why))
    assert failed.status.phase == "Failed"
    assert DeployCandidate() not in failed.actions
    assert failed.status.decision is not None
    assert failed.status.decision.reason == f"the compile Job llama3-inf2-compile failed: {why}"
    assert "the candidate was never created" in (failed.status.message or "")
    assert failed.status.compile is not None
    assert failed.status.compile.seconds == 40.0
    assert failed.status.original == ORIGINAL, "the routing as found, recorded before the Job"


def test_a_job_running_past_the_timeout_ends_the_trial() -> None:
    started = tick(preflight(), 0, CompileJobState("llama3-inf2-compile", "Absent")).status
    late = tick(started, 600, CompileJobState("llama3-inf2-compile", "Running"))
    assert late.status.phase == "Failed"
    assert "did not finish within 10m" in (late.status.message or "")


def test_a_job_deleted_mid_compile_is_created_again() -> None:
    started = tick(preflight(), 0, CompileJobState("llama3-inf2-compile", "Absent")).status
    again = tick(started, 5, CompileJobState("llama3-inf2-compile", "Absent"))
    assert again.actions == (StartCompile(),)
    assert again.status.phase == "Preflight"


def test_the_job_manifest_runs_the_template_once_within_the_timeout() -> None:
    job = compile_job(spec(backoffLimit=1), TRIAL)
    assert job["metadata"]["name"] == "llama3-inf2-compile"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["backoffLimit"] == 1
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["env"] == [
        {"name": "NEURON_COMPILED_ARTIFACTS", "value": "s3://models/neff/llama3/"}
    ]
    assert "env" not in TEMPLATE["spec"]["containers"][0], "the spec is not modified"


def test_the_report_notes_the_compile_time() -> None:
    done = CompileStatus(job="j", outcome="Succeeded", started_at=T0, seconds=312.4)
    assert with_compile_note(Compatibility(), done).notes == [
        "compiled for Neuron by Job j in 312 s"
    ]
    assert with_compile_note(Compatibility(), None).notes == []


def test_a_template_without_containers_is_refused_naming_the_field() -> None:
    body = {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "AcceleratorTrial",
        "metadata": {"name": "t", "namespace": "n"},
        "spec": spec().model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    body["spec"]["candidate"]["compile"]["template"] = {"spec": {"restartPolicy": "Never"}}
    problems = [str(p) for p in validate_trial(body)]
    assert len(problems) == 1
    assert problems[0].startswith("spec.candidate.compile.template: ")
    assert "a pod template needs spec.containers" in problems[0]


def test_the_compile_time_is_the_jobs_own_when_the_server_gives_it() -> None:
    started = tick(preflight(), 0, CompileJobState("llama3-inf2-compile", "Absent")).status
    job = CompileJobState(
        "llama3-inf2-compile", "Succeeded",
        finished_at=T0 + timedelta(seconds=50), started_at=T0 + timedelta(seconds=5),
    )  # fmt: skip
    done = tick(started, 60, job)
    assert done.status.compile is not None
    assert done.status.compile.seconds == 45.0, "from the Job's startTime, not its creation"
