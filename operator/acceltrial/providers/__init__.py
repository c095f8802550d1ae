"""Adapters behind small ports, one folder per port: metrics (Prometheus) so far.

Providers do not import each other; the engine never imports them.
"""
