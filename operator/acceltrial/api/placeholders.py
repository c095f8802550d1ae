"""The placeholders a query template may use, and the grammar that admits only those.

A template is rendered once per variant (baseline and candidate). ``{{pods}}`` becomes an anchored,
escaped regex of that variant's pod names, so a template selects a variant with
``pod=~"{{pods}}"``.
"""

from __future__ import annotations

ALLOWED_PLACEHOLDERS = ("namespace", "pods", "deployment", "interval")

_NAMES = "|".join(ALLOWED_PLACEHOLDERS)
# Any text in which every "{{" opens one of the allowed placeholders. RE2 and Python's re agree on
# this syntax, so the API server's CEL and the offline validator accept the same templates.
QUERY_TEMPLATE_PATTERN = rf"^(?:[^{{]|\{{[^{{]|\{{$|\{{\{{\s*(?:{_NAMES})\s*\}}\}})*$"

PLACEHOLDER_HINT = ", ".join("{{" + name + "}}" for name in ALLOWED_PLACEHOLDERS)
