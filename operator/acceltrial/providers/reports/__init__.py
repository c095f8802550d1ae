"""Where decision reports are kept: the report port and its ConfigMap adapter."""
