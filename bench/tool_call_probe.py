"""Does the model call the tool at all? The probe issue 62 asks for before a tool-use learning run.

    python bench/tool_call_probe.py --out /tmp/tool-probe [--model smollm2-135m-instruct] [--samples 4]

Writes a `ragen init --template tools` project into OUT/project, then for each prompt variant runs
`ragen eval` on the template's 40 validation rows (the spec's validation env, `--samples` episodes
per row, temperature 1.0: what training samples) and counts, over every reply:

- `tries`: replies that start a call in the parser's format (`<tool_call>` for hermes; a reply
  that opens with `{` or `<|python_tag|>` for llama3),
- `parsed`: calls that parsed and fit the tool's schema, so they ran (`TurnRecord.tool_calls`
  with status ok or error),
- `right args`: calls of `multiply` with the row's two numbers,
- `solved`: episodes whose final answer the reward function paid.

Variants: the template as shipped (the tool and the Hermes call format in SmolLM2's system
prompt, docs/tools.md), the same with the Llama 3.1 format, and the shipped prompt plus one worked
example (a call with other numbers, its result, the answer). Prints a markdown table; the
numbers for the built-in model are in docs/experiments/tools-probe.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

EXAMPLE = ("\n\nExample:\nuser: What is 12 * 34? Reply with the number only.\nassistant: <tool_call>\n"
           '{"name": "multiply", "arguments": {"a": 12, "b": 34}}\n</tool_call>\ntool: 408\nassistant: 408')
VARIANTS = {  # name -> (parser, text added to the shipped system prompt)
    "shipped (hermes)": ("hermes", ""),
    "llama3 format": ("llama3", ""),
    "hermes + a worked example": ("hermes", EXAMPLE),
}
_QUESTION = re.compile(r"What is (\d+) \* (\d+)\?")


def tries_a_call(reply: str, parser: str) -> bool:
    if parser == "hermes":
        return "<tool_call>" in reply
    text = reply.strip()
    return text.startswith("{") or text.startswith("<|python_tag|>")


def count(records: list[dict], parser: str) -> dict[str, int]:
    """The probe's counts over the episodes of one variant (module docstring)."""
    out = {"episodes": len(records), "replies": 0, "tries": 0, "parsed": 0, "right args": 0, "solved": 0}
    for rec in records:
        numbers = _QUESTION.search(rec["turns"][0]["obs"])
        want = sorted(int(x) for x in numbers.groups()) if numbers else None
        out["solved"] += bool(rec.get("success"))
        for turn in rec["turns"]:
            out["replies"] += 1
            out["tries"] += tries_a_call(turn["reply"], parser)
            for call in turn.get("tool_calls") or []:
                if call["status"] == "invalid":
                    continue
                out["parsed"] += 1
                args = call.get("arguments") or {}
                out["right args"] += call["name"] == "multiply" and sorted(args.values()) == want
    return out


def variant_spec(project: Path, name: str) -> Path:
    parser, extra = VARIANTS[name]
    spec = yaml.safe_load((project / "ragen.yaml").read_text(encoding="utf-8"))
    for config in [spec["env"]["train"]["config"]] + [e["config"] for e in spec["env"]["val"]["envs"]]:
        config["parser"] = parser
        config["system_prompt"] = spec["env"]["train"]["config"]["system_prompt"] + extra
    path = project / f"probe-{re.sub(r'[^a-z0-9]+', '-', name).strip('-')}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--samples", type=int, default=4)
    args = ap.parse_args()
    ragen = [str(Path(sys.executable).with_name("ragen"))]  # the console script of this environment
    project = args.out / "project"
    if not project.exists():
        subprocess.run(ragen + ["init", str(project), "--template", "tools"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for name in VARIANTS:
        spec, out = variant_spec(project, name), args.out / re.sub(r"[^a-z0-9]+", "-", name).strip("-")
        subprocess.run(ragen + ["eval", "--spec", spec.name, "--model", args.model, "--temperature", "1.0",
                                "--samples", str(args.samples), "--out", str(out.resolve())],
                       cwd=project, check=True, stdout=subprocess.DEVNULL)
        records = [json.loads(line) for line in (out / "trajectories" / "step-0.jsonl").read_text().splitlines() if line]
        rows.append((name, count(records, VARIANTS[name][0])))
    keys = list(rows[0][1])
    print("| prompt | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for name, c in rows:
        print(f"| {name} | " + " | ".join(str(c[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
