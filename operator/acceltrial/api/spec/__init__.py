"""The AcceleratorTrial spec: what to trial, how to move traffic, how to judge it, what it costs.

One module per section, as the spec reads: ``variants`` (baseline, candidate), ``traffic``
(router, steps), ``criteria`` and ``analysis`` (how a step is judged, the metrics source),
``outcome`` (promotion, report), ``economics``; ``common`` holds what several share and ``root``
the ``TrialSpec`` that composes them. Import from here: this package is the public surface.

Field docstrings are the API reference users read (``kubectl explain``, the README); cross-field
rules are CEL (``x-kubernetes-validations``) so the API server and ``acceltrial validate`` enforce
the same ones.
"""

from acceltrial.api.spec.analysis import (
    MAX_CRITERIA,
    AnalysisSpec,
    HttpUrl,
    PresetName,
    PrometheusAuth,
    PrometheusSpec,
    SigV4Auth,
    TlsConfig,
)
from acceltrial.api.spec.common import AwsRegion, NamespacedRef, ObjectRef, SecretKeyRef
from acceltrial.api.spec.criteria import (
    PLACEHOLDER_MESSAGE,
    Bounds,
    Criterion,
    MetricName,
    RelativeBounds,
    StatisticalTest,
)
from acceltrial.api.spec.economics import EconomicsSpec, ExplicitPrices, MigrationCost, PriceFactors
from acceltrial.api.spec.outcome import PromotionSpec, ReportSpec, S3Destination
from acceltrial.api.spec.root import TrialSpec
from acceltrial.api.spec.traffic import (
    MAX_STEPS,
    GatewayApiRouting,
    ReplicaRouting,
    Step,
    TrafficSpec,
)
from acceltrial.api.spec.variants import (
    ArtifactLocation,
    BaselineSpec,
    CandidateSpec,
    InstanceType,
    NeuronInstanceType,
)

__all__ = [
    "MAX_CRITERIA",
    "MAX_STEPS",
    "PLACEHOLDER_MESSAGE",
    "AnalysisSpec",
    "ArtifactLocation",
    "AwsRegion",
    "BaselineSpec",
    "Bounds",
    "CandidateSpec",
    "Criterion",
    "EconomicsSpec",
    "ExplicitPrices",
    "GatewayApiRouting",
    "HttpUrl",
    "InstanceType",
    "MetricName",
    "MigrationCost",
    "NamespacedRef",
    "NeuronInstanceType",
    "ObjectRef",
    "PresetName",
    "PriceFactors",
    "PrometheusAuth",
    "PrometheusSpec",
    "PromotionSpec",
    "RelativeBounds",
    "ReplicaRouting",
    "ReportSpec",
    "S3Destination",
    "SecretKeyRef",
    "SigV4Auth",
    "StatisticalTest",
    "Step",
    "TlsConfig",
    "TrafficSpec",
    "TrialSpec",
]
