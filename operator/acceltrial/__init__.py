"""acceltrial: trial an ML model server on AWS Inferentia2/Trainium beside its GPU deployment.

The package is laid out in layers (docs/architecture.md; import-linter enforces them): ``api``
holds the AcceleratorTrial models, the CRD generated from them and the shared vocabulary
(actions, reason codes, the trial's GVR, the report); ``engine`` the pure decisions; ``kube`` the
one gateway to the Kubernetes API; ``providers`` the adapters behind small ports (routing,
metrics, capacity, pricing, reports), one folder each; ``handlers`` the thin kopf handlers;
``cli`` the ``acceltrial`` command; ``sandbox`` and ``demo`` the local cluster and the demo,
which the operator never imports.
"""

__version__ = "0.1.0.dev0"
