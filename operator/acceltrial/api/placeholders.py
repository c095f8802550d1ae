"""The placeholders a query template may use, and the grammar that admits only those.

A template is rendered once per variant (baseline and candidate). ``{{pods}}`` becomes an anchored,
escaped regex of that variant's pod names, so a template selects a variant with
``pod=~"{{pods}}"``. ``{{instances}}`` is the same for the EC2 instance ids of the nodes the
variant's pods run on, for exporters that label series by instance only (neuron-monitor without
``--enable-k8s-info``): ``instance_id=~"{{instances}}"``.
"""

from __future__ import annotations

ALLOWED_PLACEHOLDERS = ("namespace", "pods", "deployment", "interval", "instances")

_NAMES = "|".join(ALLOWED_PLACEHOLDERS)
# Any text in which every "{{" opens one of the allowed placeholders. RE2 and Python's re agree on
# this syntax, so the API server's CEL and the offline validator accept the same templates.
QUERY_TEMPLATE_PATTERN = rf"^(?:[^{{]|\{{[^{{]|\{{$|\{{\{{\s*(?:{_NAMES})\s*\}}\}})*$"

PLACEHOLDER_HINT = ", ".join("{{" + name + "}}" for name in ALLOWED_PLACEHOLDERS)
