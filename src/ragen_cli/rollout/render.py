"""Mask audit: render a trajectory with the trained tokens highlighted (`ragen inspect`).

A trajectory is a `Trajectory` or a record from trajectories/step-K.jsonl (`Trajectory.
to_record`). With its `input_ids` / `loss_mask` and a tokenizer, the exact token sequence is
shown: runs of trained tokens (mask 1) in bold green, everything else (system, observations,
rewards, template, pre-filled `<think>`) dimmed. Without tokens, the turns' text is shown. A
tools env's turns also list their calls and results (`tool_call_text`).
Imports rich only (transformers only to load a tokenizer, inside `load_tokenizer_for`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text

TRAINED = "bold green"
CONTEXT = "dim"


def mask_runs(input_ids: list[int], loss_mask: list[int]) -> list[tuple[int, list[int]]]:
    """Maximal runs of equal mask value: [(mask, ids), ...] in order."""
    if len(input_ids) != len(loss_mask):
        raise ValueError(f"{len(input_ids)} token ids but {len(loss_mask)} mask values")
    runs: list[tuple[int, list[int]]] = []
    for tid, m in zip(input_ids, loss_mask):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(tid)
        else:
            runs.append((m, [tid]))
    return runs


def tool_call_text(call: dict, limit: int = 200) -> str:
    """One tool call of a turn record (`TurnRecord.tool_calls`) as a line: `multiply(a=3, b=4) -> 12`,
    `nap(seconds=60) -> [error] Error: ...`, or `[invalid] Error: ...` for a malformed reply; the
    result cut to `limit` characters. The one rendering `ragen inspect` and `ragen watch` show."""
    result = " ".join(str(call.get("result", "")).split())
    if len(result) > limit:
        result = result[:limit - 3] + "..."
    status = call.get("status", "ok")
    if status == "invalid":
        return f"[invalid] {result}"
    args = call.get("arguments") or {}
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{call.get('name')}({shown}) -> " + ("[error] " if status == "error" else "") + result


def _as_record(traj: Any) -> dict:
    return traj if isinstance(traj, dict) else traj.to_record(with_tokens=True)


def _header(rec: dict) -> Text:
    flags = [k for k in ("success", "truncated", "overflow") if rec.get(k)]
    head = Text(f"env {rec.get('env', '?')}  group {rec.get('group', '?')}  seed {rec.get('seed', '?')}  "
                f"reward {rec.get('reward', 0.0):.3g}  ", style="bold")
    head.append(" ".join(flags) or "-", style="yellow")
    head.append("\n")
    for k, turn in enumerate(rec.get("turns", []), start=1):
        fmt = "ok" if turn.get("format_ok") else "FORMAT ERROR"
        head.append(f"  turn {k}: actions {turn.get('actions')}  reward {turn.get('reward', 0.0):.3g}  "
                    f"valid {turn.get('valid', 0)}  effective {turn.get('effective', 0)}  {fmt}\n", style="cyan")
        for call in turn.get("tool_calls") or []:
            head.append(f"    call {tool_call_text(call)}\n", style="red" if call.get("status") != "ok" else "magenta")
    return head


def render_trajectory(traj: Any, tokenizer: Any = None) -> Text:
    """A rich Text of one trajectory; trained tokens in bold green (see module docstring)."""
    rec = _as_record(traj)
    out = _header(rec)
    if tokenizer is not None and "input_ids" in rec and "loss_mask" in rec:
        for m, ids in mask_runs(rec["input_ids"], rec["loss_mask"]):
            out.append(tokenizer.decode(ids, skip_special_tokens=False), style=TRAINED if m else CONTEXT)
        n = sum(rec["loss_mask"])
        out.append(f"\n[{n} trained tokens of {len(rec['input_ids'])}]\n", style="bold")
        return out
    out.append("(no token ids or tokenizer: showing turn text; trained = the replies)\n", style="italic")
    for k, turn in enumerate(rec.get("turns", []), start=1):
        out.append(f"Turn {k}:\nState:\n{turn.get('obs', '')}\n", style=CONTEXT)
        out.append(turn.get("reply", ""), style=TRAINED)
        out.append("\n")
    return out


def read_records(path: Path) -> list[dict]:
    """Records of a trajectories JSONL file; a half-written last line is skipped."""
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break  # a writer may be mid-line
            raise ValueError(f"{path}:{i + 1}: not a JSON object") from None
    return records


def find_trajectory_file(path: Path, step: int | None) -> Path:
    """FILE itself, or for a run directory trajectories/step-K.jsonl (K = `step` or the latest)."""
    if path.is_file():
        return path
    folder = path / "trajectories" if (path / "trajectories").is_dir() else path
    if not folder.is_dir():
        raise FileNotFoundError(f"{path} is neither a trajectories file nor a run directory")
    if step is not None:
        file = folder / f"step-{step}.jsonl"
        if not file.is_file():
            raise FileNotFoundError(f"no trajectories for step {step} in {folder}")
        return file
    files = sorted(folder.glob("step-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    if not files:
        raise FileNotFoundError(f"no step-*.jsonl files in {folder}")
    return files[-1]


def model_from_run(file: Path) -> str | None:
    """The model name of the run a trajectories file belongs to (RUN/spec.yaml), if any."""
    for parent in (file.parent, file.parent.parent):
        spec = parent / "spec.yaml"
        if spec.is_file():
            import yaml

            data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
            return (data.get("model") or {}).get("name", "smollm2-135m-instruct")
    return None


def load_tokenizer_for(model: str):
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(resolve_model(model))
