"""A local Kubernetes control plane for the tests and ``acceltrial sandbox up``.

An API server on a loopback port with the semantics the operator relies on (store), CRDs with
schema and CEL validation (crds, schema), and simulated nodes and workload controllers
(topology, controllers). Start one with :class:`acceltrial_testbed.sandbox.cluster.Sandbox`.
"""
