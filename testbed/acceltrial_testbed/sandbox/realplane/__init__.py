"""The real Kubernetes control plane for the tests and ``acceltrial sandbox up --control-plane
real``: the upstream kube-apiserver, kube-controller-manager, kube-scheduler and etcd built by
``make control-plane``, with kwok playing the kubelet for the topology's simulated Nodes.

Start one with :class:`acceltrial_testbed.sandbox.realplane.plane.RealControlPlane`; the emulator in
:mod:`acceltrial_testbed.sandbox.cluster` stays the zero-setup alternative.
"""
