"""Operator start-up and shutdown: logging, where kopf keeps its bookkeeping, the metrics
endpoint; at exit, the notifications still queued."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kubernetes import client, config

from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.metrics import serve_metrics
from acceltrial.handlers.notify import DELIVERIES, FLUSH_SECONDS
from acceltrial.handlers.peering import configure_peering
from acceltrial.kube.gateway import Kube

ANNOTATION_PREFIX = "acceltrial.dev"
TIMER_EXIT_POLLING_SECONDS = 1.0


def configure(settings: kopf.OperatorSettings) -> None:
    """Keep kopf's progress and diff-base in annotations: status holds only the API's fields."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{ANNOTATION_PREFIX}/finalizer"
    # A trial deleted while its tick runs keeps kopf's finalizer until the tick returns; kopf
    # looks again after this many seconds (60 by default: a minute's wait for `kubectl delete`
    # after the rollback it asked for was done).
    settings.background.cancellation_polling = TIMER_EXIT_POLLING_SECONDS
    settings.posting.level = logging.INFO


@kopf.on.startup()
def on_startup(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Any, **_: Any) -> None:
    config = config_from_env()
    logging.getLogger().setLevel(config.log_level.upper())
    configure(settings)
    configure_peering(settings, config.peering_lifetime_seconds)
    settings.execution.max_workers = config.workers
    memo.kube = Kube(kubernetes_client(config.workers), timeout_seconds=config.api_timeout_seconds)
    port = serve_metrics(config.metrics_port)
    logger.info("acceltrial metrics on port %d", port)


@kopf.on.cleanup()
def on_cleanup(logger: Any, **_: Any) -> None:
    """Tell what is queued before the operator exits (a SIGTERM right after a decision), for a
    bounded time: a receiver that hangs cannot hold the shutdown past it."""
    if not DELIVERIES.flush(FLUSH_SECONDS):
        logger.warning("notifications still queued after %gs; the operator exits", FLUSH_SECONDS)


def kubernetes_client(workers: int = 1) -> client.ApiClient:
    """An API client for the cluster the operator runs in, else the current kubeconfig, keeping
    a connection for each of ``workers`` threads (fewer would open a new TLS connection for a
    request whenever all are taken)."""
    settings = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=settings)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=settings)  # type: ignore[no-untyped-call]
    settings.connection_pool_maxsize = max(settings.connection_pool_maxsize or 0, workers)
    return client.ApiClient(settings)
