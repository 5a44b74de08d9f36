"""docs/metrics.md is generated from the metrics table and must be up to date."""

from pathlib import Path

from ragen_cli.monitor.metrics import METRICS
from ragen_cli.monitor.metrics_doc import render

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def test_docs_metrics_md_is_up_to_date():
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/metrics.md is stale: run `python -m ragen_cli.monitor.metrics_doc docs/metrics.md`"
    )


def test_every_metric_is_documented_once():
    text = render()
    for name in METRICS:
        assert text.count(f"| `{name}` |") == 1, name
