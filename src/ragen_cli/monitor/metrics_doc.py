"""Render docs/metrics.md from the metrics table.

    python -m ragen_cli.monitor.metrics_doc docs/metrics.md   # write
    python -m ragen_cli.monitor.metrics_doc                   # print

tests/test_monitor_metrics_doc.py fails when the committed page differs from this output.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragen_cli.monitor.metrics import METRICS, RESERVED_KEYS, SECTIONS

HEADER = """# Metrics

Generated from `src/ragen_cli/monitor/metrics.py` by `python -m ragen_cli.monitor.metrics_doc
docs/metrics.md`; do not edit by hand.

Every line of `runs/<name>/metrics.jsonl` is one training step: `{keys}` plus any of the
metrics below (a metric is absent when it was not measured that step, e.g. the critic metrics
without a critic). `<env>` stands for an environment name (`val/bandit/success`). The trainer
cannot log a name that is not in this table (`RunDir.write_metrics` raises).
"""


def render() -> str:
    out = [HEADER.format(keys="`, `".join(RESERVED_KEYS))]
    for section, title in SECTIONS.items():
        rows = [m for m in METRICS.values() if m.section == section]
        if not rows:
            continue
        out.append(f"\n## {title}\n\n| name | unit | meaning |\n|---|---|---|\n")
        out.extend(f"| `{m.name}` | {m.unit} | {m.meaning.replace('|', '/')} |\n" for m in rows)
    return "".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
