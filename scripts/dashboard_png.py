"""Draw the chart's Grafana dashboard as a PNG from a demo's data, for docs/operations.md.

    acceltrial demo --scenario promote --keep      # prints "logs and Prometheus data kept in DIR"
    python scripts/dashboard_png.py DIR docs/images/dashboard.png

It starts Prometheus on the demo's kept data (scraping nothing), runs each panel's query over
the data's time span with Grafana's variables filled as the tests fill them, and draws one small
chart per panel, titled as in Grafana. Not Grafana's rendering, the same queries and data.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from acceltrial_testbed.sandbox.prometheus import PrometheusServer, find_prometheus

REPO = Path(__file__).resolve().parent.parent
DASHBOARD = REPO / "charts" / "acceltrial" / "files" / "monitoring" / "dashboard.json"
VARIABLES = {"$namespace": ".*", "$trial": ".*", "$__rate_interval": "15s"}


def get(url: str, path: str, **query: str) -> Any:
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(query)}", timeout=30) as r:
        body = json.loads(r.read())
    if body["status"] != "success":
        raise RuntimeError(body)
    return body["data"]


def span(url: str) -> tuple[float, float]:
    """The first and the last sample the demo's Prometheus holds (its head block)."""
    head = get(url, "/api/v1/status/tsdb")["headStats"]
    return head["minTime"] / 1000, head["maxTime"] / 1000


def legend(metric: dict[str, str], template: str) -> str:
    for key, value in metric.items():
        template = template.replace("{{" + key + "}}", value)
    return template


def draw(url: str, out: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    start, end = span(url)
    panels = dashboard["panels"]
    rows = (len(panels) + 2) // 3
    figure, axes = plt.subplots(rows, 3, figsize=(15, 3.2 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            data = get(url, "/api/v1/query_range", query=expr, start=str(start), end=str(end),
                       step="2")  # fmt: skip
            for series in data["result"]:
                xs = [float(t) - start for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                ax.plot(xs, ys, label=legend(series["metric"], target.get("legendFormat", "")))
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel("seconds into the demo", fontsize=8)
        ax.tick_params(labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    figure.suptitle(dashboard["title"] + " (a demo's data)")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_folder", type=Path, help="the folder `acceltrial demo --keep` kept")
    parser.add_argument("out", type=Path, help="the PNG to write")
    args = parser.parse_args(argv)
    prometheus = PrometheusServer(find_prometheus(), args.demo_folder / "prometheus", []).start()
    try:
        draw(prometheus.url, args.out)
    finally:
        prometheus.stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
