"""`acceltrial check` offline, as documented: a trial file's queries against a real Prometheus
holding prepared histories, per criterion and variant, with the documented exit codes; with
spec.quality, one prompt to each variant's model server (local ones answering with recorded vLLM
and TGI JSON, reached through ACCELTRIAL_MODEL_URL)."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, environ_with
from tests.integration.conftest import history_prometheus, recent_history_end
from tests.unit.test_check_models import SERVERS, servers

__all__ = ["servers"]  # the local model servers' fixture

TRIAL = yaml.safe_load((REPO / "examples" / "scenarios" / "trial.yaml").read_text())


@pytest.fixture(scope="module")
def history_end() -> datetime:
    """This module's own: `acceltrial check` asks Prometheus about now, so its histories must end
    a couple of minutes before this module runs, however late in the session that is (the
    session's histories end when the session's first test needed them)."""
    return recent_history_end()


@pytest.fixture(scope="module")
def prometheus_url(
    tmp_path_factory: pytest.TempPathFactory, history_end: datetime
) -> Iterator[str]:
    with history_prometheus(tmp_path_factory, history_end) as url:
        yield url


def write_trial(tmp_path: Path, namespace: str | None) -> Path:
    trial = copy.deepcopy(TRIAL)
    trial["metadata"] = {"name": "llama3-8b-inf2"} | ({"namespace": namespace} if namespace else {})
    # The histories end a couple of minutes ago: a 5m rate window reaches into them.
    trial["spec"]["analysis"]["interval"] = "5m"
    for step in trial["spec"]["steps"]:
        step["duration"] = "10m"
    trial["spec"]["analysis"]["criteria"].append(
        {"name": "utilization", "metric": "accelerator_utilization", "absolute": {"min": 0.3}}
    )
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(trial))
    return path


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "check", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def test_every_criterion_of_a_healthy_pair_answers(tmp_path: Path, prometheus_url: str) -> None:
    pods = ["--baseline-pods", "healthy-gpu-.*", "--candidate-pods", "healthy-inf2-.*"]
    done = check(str(write_trial(tmp_path, "healthy")), "--prometheus", prometheus_url, *pods)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for criterion in ("errors", "p99-latency", "mean-latency", "utilization"):
        for variant in ("baseline", "candidate"):
            assert any(line.split()[:3] == ["ok", criterion, variant] for line in lines), (
                f"{criterion} {variant}: {done.stdout}"
            )
    assert "cost (token_rate for the cost model)" in done.stdout
    assert "12 of 12 queries give a value to judge" in done.stdout


def test_a_variant_without_metrics_is_named_with_its_query(
    tmp_path: Path, prometheus_url: str
) -> None:
    pods = ["--baseline-pods", "missing-gpu-.*", "--candidate-pods", "missing-inf2-.*"]
    done = check(str(write_trial(tmp_path, "missing")), "--prometheus", prometheus_url, *pods)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NO  p99-latency" in done.stdout
    assert "no usable value: it returned nothing (an empty result)" in done.stdout
    rendered = (
        "query: histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds"
        '_bucket{namespace="missing", pod=~"missing-inf2-.*"}'
    )
    assert rendered in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("prometheus:9090", "is not an http(s) URL"),
        ("http://127.0.0.1:1", "does not answer"),
    ],
)
def test_a_bad_or_unreachable_prometheus_is_a_usage_error(
    tmp_path: Path, url: str, said: str
) -> None:
    done = check(str(write_trial(tmp_path, "healthy")), "--prometheus", url,
                 "--baseline-pods", "a-.*")  # fmt: skip
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_file_or_namespace_is_a_usage_error(tmp_path: Path) -> None:
    missing = check(str(tmp_path / "nope.yaml"), "--baseline-pods", "a")
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    path = write_trial(tmp_path, None)
    done = check(str(path), "--prometheus", "http://127.0.0.1:1", "--baseline-pods", "a")
    assert done.returncode == 2
    assert "--namespace is needed" in done.stderr


def with_quality(path: Path) -> Path:
    """The trial asking a quality check; its baseline's Service is the local vLLM."""
    trial = yaml.safe_load(path.read_text())
    trial["spec"]["baseline"]["serviceRef"] = {"name": "vllm"}
    trial["spec"]["quality"] = {
        "prompts": {"configMapRef": {"name": "prompts", "key": "set.jsonl"}},
        "criteria": [{"name": "agreement", "metric": "token_agreement", "absolute": {"min": 0.98}}],
    }
    path.write_text(yaml.safe_dump(trial))
    return path


def models_at(template: str) -> dict[str, str]:
    return environ_with(**{"ACCELTRIAL_MODEL_URL": template})


def test_with_quality_each_variant_is_asked_one_prompt(
    tmp_path: Path, prometheus_url: str, servers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SERVERS, "llama3-8b-inf2-candidate", SERVERS["tgi"])
    path = with_quality(write_trial(tmp_path, "healthy"))
    pods = ["--baseline-pods", "healthy-gpu-.*", "--candidate-pods", "healthy-inf2-.*"]
    done = check(str(path), "--prometheus", prometheus_url, *pods,
                 env=models_at(servers + "/{service}"))  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert 'quality: asking "The capital of France is", a fixed prompt (offline' in done.stdout
    assert f"ok  quality  baseline   the endpoint answers at {servers}/vllm" in done.stdout
    assert 'ok  quality  baseline   the completions API answers: " Paris.\\n"' in lines
    assert "ok  quality  candidate  log-probabilities come back (3 tokens)" in lines
    assert (
        "--  quality  candidate  prompt log-probabilities (echo) do not come back: the check "
        "will re-prompt at each divergence"
    ) in lines
    assert lines[-1] == "quality: 2 of 2 model servers asked answer as the check needs"


def test_a_candidate_not_deployed_yet_is_said_so_and_a_silent_baseline_fails(
    tmp_path: Path, prometheus_url: str, servers: str
) -> None:
    path = with_quality(write_trial(tmp_path, "healthy"))
    pods = ["--baseline-pods", "healthy-gpu-.*"]
    before = check(str(path), "--prometheus", prometheus_url, *pods,
                   env=models_at(servers + "/{service}"))  # fmt: skip
    # The flag wins over the setting.
    silent = check(str(path), "--prometheus", prometheus_url, *pods,
                   "--model-url", "http://127.0.0.1:9/{service}",
                   env=models_at(servers + "/{service}"))  # fmt: skip

    assert before.returncode == 0, before.stdout + before.stderr
    assert (
        "--  quality  candidate  candidate not deployed yet: checked when it is Available"
        in before.stdout
    )
    assert silent.returncode == 1, silent.stdout + silent.stderr
    assert "NO  quality  baseline   the endpoint does not answer at http://127.0.0.1:9/vllm" in (
        silent.stdout
    )
    assert "quality: 0 of 1 model servers asked answer as the check needs" in silent.stdout


def test_a_model_url_the_operator_would_refuse_is_a_usage_error(tmp_path: Path) -> None:
    path = with_quality(write_trial(tmp_path, "healthy"))
    done = check(str(path), "--prometheus", "http://127.0.0.1:1", "--baseline-pods", "a",
                 env=models_at("http://models:8000"))  # fmt: skip

    assert done.returncode == 2
    assert "--model-url 'http://models:8000': give an http(s) URL template" in done.stderr
