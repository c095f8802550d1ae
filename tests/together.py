"""End-to-end tests of one module run at once against the module's shared cluster.

An end-to-end test spends most of its minute waiting: for its trial's steps, Prometheus' scrapes
and the operator's ticks, while the control plane, Prometheus and the operator sit idle. A module
whose tests each drive a trial of their own (a namespace each) against module-scoped fixtures
marks them ``@together`` and defines a module-scoped ``together_batch`` fixture that calls
:func:`start_together`. At the first marked test, every selected marked test of the module (of
the same module parameter, e.g. the same backend) starts at once in a thread, at most
``CONCURRENCY`` at a time (``ACCELTRIAL_E2E_CONCURRENCY``, default 6); each test then waits for
its own body and raises what the body raised. Test IDs, assertions and failure messages are
those of the body, unchanged; only the waiting overlaps.

A body's parameters come from the ``shared`` values the batch was given (the module's fixtures),
its own direct parametrization, or ``tmp_path`` (a folder of its own); a function-scoped fixture
of another kind cannot be made for a test that is not running yet, so it is refused by name.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

CONCURRENCY = max(1, int(os.environ.get("ACCELTRIAL_E2E_CONCURRENCY", "6")))
BATCH_FIXTURE = "together_batch"

Body = Callable[..., None]


@dataclass
class Batch:
    """The started bodies of one module (and module parameter), by test node ID."""

    futures: dict[str, Future[None]]

    def outcome(self, nodeid: str) -> None:
        """Wait for the body of ``nodeid``; raise what it raised."""
        if nodeid not in self.futures:
            pytest.fail(f"{nodeid} is @together but was not started with its module's batch")
        self.futures[nodeid].result()


def together(body: Body) -> Callable[..., None]:
    """The test ``body`` as one of its module's batch (see the module docstring)."""
    parameters = list(inspect.signature(body).parameters.values())
    names = [p.name for p in parameters]
    if "request" in names or BATCH_FIXTURE in names:
        raise TypeError(f"{body.__name__}: a @together body takes neither request nor the batch")

    def test(request: pytest.FixtureRequest, **fixtures: Any) -> None:
        batch: Batch = fixtures[BATCH_FIXTURE]
        batch.outcome(request.node.nodeid)

    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    test.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("request", keyword),
            inspect.Parameter(BATCH_FIXTURE, keyword),
            *parameters,
        ]
    )
    test.__name__ = body.__name__
    test.__qualname__ = body.__qualname__
    test.__doc__ = body.__doc__
    test.__module__ = body.__module__
    test.together_body = body  # type: ignore[attr-defined]
    if hasattr(body, "pytestmark"):
        test.pytestmark = body.pytestmark  # type: ignore[attr-defined]
    return test


@contextlib.contextmanager
def start_together(
    request: pytest.FixtureRequest,
    shared: dict[str, Any],
    in_group: Callable[[pytest.Item], bool] = lambda _item: True,
) -> Iterator[Batch]:
    """Start the bodies of the module's selected ``@together`` tests that ``in_group`` keeps,
    with ``shared`` as their fixtures; on leaving, cancel those not started and wait for the
    rest (a test deselected by ``-x`` never leaves a trial running behind the fixtures)."""
    tmp_path_factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    items = [
        item
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and hasattr(item.function, "together_body")
        and in_group(item)
    ]
    with ThreadPoolExecutor(CONCURRENCY, "together") as pool:
        futures: dict[str, Future[None]] = {}
        for item in items:
            body: Body = item.function.together_body  # type: ignore[attr-defined]
            arguments = _arguments(item, body, shared, tmp_path_factory)
            futures[item.nodeid] = pool.submit(body, **arguments)
        try:
            yield Batch(futures)
        finally:
            for future in futures.values():
                future.cancel()


def _arguments(
    item: pytest.Function,
    body: Body,
    shared: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    params: dict[str, Any] = item.callspec.params if hasattr(item, "callspec") else {}
    arguments: dict[str, Any] = {}
    for name in inspect.signature(body).parameters:
        if name in shared:
            arguments[name] = shared[name]
        elif name == "tmp_path":
            arguments[name] = tmp_path_factory.mktemp(item.name[:40], numbered=True)
        elif name in params:
            arguments[name] = params[name]
        else:
            raise pytest.UsageError(
                f"{item.nodeid}: @together gives a body the batch's shared fixtures "
                f"({', '.join(sorted(shared))}), tmp_path and its own parameters, not {name!r}"
            )
    return arguments
