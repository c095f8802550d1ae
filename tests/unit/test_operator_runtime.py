"""What the operator process sets up at start: configuration, kopf storage, the metrics endpoint."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import kopf
import pytest
from kubernetes.config import kube_config
from prometheus_client import generate_latest

from acceltrial.api.status import PHASES
from acceltrial.handlers.config import ConfigError, config_from_env
from acceltrial.handlers.metrics import REGISTRY, record_trial, serve_metrics
from acceltrial.handlers.startup import configure, kubernetes_client
from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig


def test_config_defaults_and_overrides() -> None:
    assert config_from_env({}).metrics_port == 8080
    config = config_from_env({"ACCELTRIAL_LOG_LEVEL": "DEBUG", "ACCELTRIAL_METRICS_PORT": "9000"})
    assert (config.log_level, config.metrics_port) == ("debug", 9000)


def test_bad_config_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="ACCELTRIAL_METRICS_PORT"):
        config_from_env({"ACCELTRIAL_METRICS_PORT": "eighty"})


def test_kopf_keeps_its_bookkeeping_out_of_status() -> None:
    settings = kopf.OperatorSettings()
    configure(settings)
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert settings.persistence.finalizer == "acceltrial.dev/finalizer"


def test_metrics_endpoint_serves_build_info() -> None:
    port = serve_metrics(0, address="127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert 'acceltrial_build_info{version="' in text
    assert "acceltrial_admissions_total" in text or "# TYPE acceltrial_admissions" in text


def test_trial_metrics_are_exported() -> None:
    record_trial("serving", "llama3", "Progressing", 25, PHASES)
    text = generate_latest(REGISTRY).decode()
    assert (
        'acceltrial_trial_phase{namespace="serving",phase="Progressing",trial="llama3"} 1.0' in text
    )
    assert 'acceltrial_trial_phase{namespace="serving",phase="Paused",trial="llama3"} 0.0' in text
    assert 'acceltrial_canary_weight{namespace="serving",trial="llama3"} 25.0' in text
    assert "acceltrial_reconcile_duration_seconds_bucket" in text


def test_ticks_run_on_as_many_threads_as_configured_each_with_a_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick mostly waits on the API server and Prometheus: the threads overlap their waits,
    and the API client keeps a connection for each (else a new TLS handshake per request)."""
    assert config_from_env({}).workers == 16
    with pytest.raises(ConfigError, match="ACCELTRIAL_WORKERS"):
        config_from_env({"ACCELTRIAL_WORKERS": "0"})
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, "https://127.0.0.1:6443", user={"token": "t"})
    # Read when the kubernetes package is imported: KUBECONFIG as the process started with it.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api = kubernetes_client(workers=40)
    assert api.configuration.host == "https://127.0.0.1:6443"
    assert api.configuration.connection_pool_maxsize == 40
    settings = kopf.OperatorSettings()
    settings.execution.max_workers = config_from_env({"ACCELTRIAL_WORKERS": "24"}).workers
    assert settings.execution.executor._max_workers == 24  # type: ignore[attr-defined]
