"""Running the sandbox: the API server and controllers on their own thread and event loop.

:class:`Sandbox` is the handle tests and ``acceltrial sandbox up`` use: ``with Sandbox() as
cluster:`` serves on a loopback port (``cluster.url``), writes a kubeconfig
(``cluster.kubeconfig``), creates the topology's Nodes, runs the workload controllers (pods
turn Ready ``ready_delay`` seconds after they are bound) and the provisioner (Karpenter
NodePools and managed node groups, the latter in moto's EKS API at ``cluster.eks``) and stops
on exit. Code on other
threads reaches the store through :meth:`Sandbox.call`, which runs a function on the server's
loop (the store is not thread-safe).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web

from acceltrial_testbed.sandbox import crds
from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.controllers import Controllers
from acceltrial_testbed.sandbox.defaults import default_builtin
from acceltrial_testbed.sandbox.eks import SandboxEks
from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig
from acceltrial_testbed.sandbox.limits import refuse_oversized_data
from acceltrial_testbed.sandbox.provisioner import Provisioner, StoreObjects, eks_sizes
from acceltrial_testbed.sandbox.resources import Registry
from acceltrial_testbed.sandbox.server import build_app
from acceltrial_testbed.sandbox.store import Clock, Store, utc_now
from acceltrial_testbed.sandbox.topology import Topology, load_topology, nodes

T = TypeVar("T")


class Sandbox:
    """A local API server (see the module docstring)."""

    def __init__(
        self,
        *,
        port: int = 0,
        kubeconfig: Path | None = None,
        clock: Clock = utc_now,
        history: int = 10_000,
        topology: Topology | None = None,
        ready_delay: float = 1.0,
        controllers: bool = True,
        provision_delay: float | None = None,
        consolidation_delay: float | None = None,
    ) -> None:
        self.requested_port = port
        self.kubeconfig = kubeconfig or Path(tempfile.mkdtemp(prefix="sandbox-")) / "kubeconfig"
        self.store = Store(Registry(), clock=clock, history=history)
        self.store.admissions.append(default_builtin)
        self.store.admissions.append(refuse_oversized_data)
        crds.install(self.store)
        self.topology = topology if topology is not None else load_topology()
        self.ready_delay = ready_delay
        self.controllers = controllers
        # The topology's delays unless a test sets its own.
        self.provision_delay = (
            self.topology.provision_delay_seconds if provision_delay is None else provision_delay
        )
        self.consolidation_delay = (
            self.topology.consolidation_delay_seconds
            if consolidation_delay is None
            else consolidation_delay
        )
        self.eks: SandboxEks | None = None
        """moto's EKS API with the topology's managed node groups (when it has any)."""
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox", daemon=True)
        self._runner: web.AppRunner | None = None
        self._controllers_task: asyncio.Task[None] | None = None
        self._provisioner_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access(self) -> Access:
        """How in-process clients reach it (plain HTTP: the emulator takes any token)."""
        return Access(self.url)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def start(self) -> Sandbox:
        if any(group.managed is not None for group in self.topology.node_groups):
            self.eks = SandboxEks(self.topology).start()
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        write_kubeconfig(self.kubeconfig, self.url)
        return self

    async def _serve(self) -> None:
        self._add_nodes()
        if self.controllers:
            self._controllers_task = asyncio.create_task(
                Controllers(self.store, self.ready_delay).run()
            )
            if self.topology.node_pools or self.eks is not None:
                self._provisioner_task = asyncio.create_task(self._provisioner().run())
        self._runner = web.AppRunner(
            build_app(self.store), handle_signals=False, shutdown_timeout=0.1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.requested_port)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]

    def _provisioner(self) -> Provisioner:
        eks = self.eks
        sizes = None
        if eks is not None:
            client = eks.client()
            sizes = functools.partial(eks_sizes, client, self.topology.cluster, eks.groups)
        provisioner = Provisioner(
            StoreObjects(self.store),
            self.topology,
            provision_delay=self.provision_delay,
            consolidation_delay=self.consolidation_delay,
            node_groups=sizes,
        )
        provisioner.install()
        return provisioner

    def _add_nodes(self) -> None:
        resource = self.store.registry.find("", "v1", "nodes")
        assert resource is not None  # a built-in kind
        for node in nodes(self.topology):
            self.store.create(resource, "", node)
            name = node["metadata"]["name"]
            self.store.update(resource, "", name, _with(node["status"]), subresource="status")

    def stop(self) -> None:
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            with contextlib.suppress(concurrent.futures.TimeoutError):
                future.result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
        if self.eks is not None:
            self.eks.stop()

    async def _shutdown(self) -> None:
        """Close the server, then cancel what still runs (open watches, controllers)."""
        if self._runner is not None:
            await self._runner.cleanup()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the server's loop and return its result (thread-safe)."""

        async def run() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def _with(status: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda obj: obj | {"status": status}
