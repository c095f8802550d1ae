"""Adapters behind small ports, one folder per port: metrics (Prometheus) and pricing (the
bundled catalog, the AWS Price List API) so far.

Providers do not import each other; the engine never imports them.
"""
