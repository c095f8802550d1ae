"""Adapters behind small ports, one folder per port: routing (Gateway API, replicas; looked up
by spec name in ``routing/registry.py``), metrics (Prometheus: the engine's requests rendered as
PromQL; by ``analysis.source`` in ``metrics/factory.py``), capacity (the Nodes; by name in
``capacity/registry.py``), pricing (the bundled catalog, the AWS Price List API) and reports
(ConfigMap, S3).

Providers do not import each other (an import-linter contract); the engine never imports them.
"""
