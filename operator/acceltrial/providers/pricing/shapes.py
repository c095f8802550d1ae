"""The Neuron shape of an instance type (devices, NeuronCores, accelerator memory) for the memory
preflight: from the bundled catalog, else from EC2 ``DescribeInstanceTypes`` (its ``NeuronInfo``),
with the default credential chain (IRSA on EKS: ``ec2:DescribeInstanceTypes``).
``AWS_ENDPOINT_URL_EC2`` points it elsewhere (a test server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session

from acceltrial.engine.neuron_fit import GIB, NeuronShape
from acceltrial.providers.pricing.catalog import Catalog, bundled_catalog

_UNIT_BYTES = {"GiB": GIB, "GB": 1000**3}
MIB = 1024**2


def _ec2(region: str) -> Any:
    return Session().create_client("ec2", region_name=region)


class NeuronShapes:
    """Looks up an instance type's Neuron shape; None when neither source knows it."""

    def __init__(
        self,
        catalog: Catalog | None = None,
        ec2_for: Callable[[str], Any] = _ec2,
    ) -> None:
        self._catalog = catalog or bundled_catalog()
        self._ec2_for = ec2_for

    def shape(self, instance_type: str, region: str) -> NeuronShape | None:
        return self._from_catalog(instance_type) or self._from_ec2(instance_type, region)

    def _from_catalog(self, instance_type: str) -> NeuronShape | None:
        spec = self._catalog.spec(instance_type)
        if spec is None or spec.accelerator.kind != "neuron" or not spec.accelerator.neuron_cores:
            return None
        memory = spec.accelerator_memory
        return NeuronShape(
            instance_type,
            devices=spec.accelerator.devices,
            cores=spec.accelerator.neuron_cores,
            memory_bytes=memory.total * _UNIT_BYTES[memory.unit],
            source=f"bundled catalog: {spec.spec_source}",
        )

    def _from_ec2(self, instance_type: str, region: str) -> NeuronShape | None:
        """EC2's answer; None when EC2 cannot be asked or has no Neuron figures (the preflight
        then skips the memory check rather than guess)."""
        try:
            reply = self._ec2_for(region).describe_instance_types(InstanceTypes=[instance_type])
        except (BotoCoreError, ClientError):
            return None
        found = reply.get("InstanceTypes") or []
        neuron = (found[0].get("NeuronInfo") or {}) if found else {}
        groups = neuron.get("NeuronDevices") or []
        devices = sum(int(g.get("Count", 0)) for g in groups)
        cores = sum(int(g.get("Count", 0)) * int(g.get("CoreInfo", {}).get("Count", 0))
                    for g in groups)  # fmt: skip
        memory = neuron.get("TotalNeuronDeviceMemoryInMiB") or sum(
            int(g.get("Count", 0)) * int(g.get("MemoryInfo", {}).get("SizeInMiB", 0))
            for g in groups
        )
        if not devices or not cores or not memory:
            return None
        return NeuronShape(
            instance_type,
            devices=devices,
            cores=cores,
            memory_bytes=float(memory) * MIB,
            source=f"EC2 DescribeInstanceTypes in {region}",
        )
