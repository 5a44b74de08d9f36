"""The model card (README.md) that `ragen export` writes beside the exported model.

Everything in it is read from the run directory, nothing is typed in: the checkpoint's
state.json (step, LoRA or full weights), the run's resolved RUN_DIR/spec.yaml (base model,
environment, algorithm, schedule; the whole file at the end of the card), and, when `ragen eval`
evaluated this checkpoint, the newest complete RUN_DIR/evals/*/eval.json whose policy has the
checkpoint's content hash (eval/manifest.py), so an eval of other weights is never shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# Built-in models (models/builtin.py) and the hub repo each one is converted from
BASE_MODEL_IDS = {"smollm2-135m-instruct": "HuggingFaceTB/SmolLM2-135M-Instruct"}


def write_card(ckpt: Path, out: Path, repo: str | None = None) -> Path:
    """OUT/README.md for checkpoint `ckpt`; `repo` (the hub repo it goes to) for the usage lines."""
    path = Path(out) / "README.md"
    path.write_text(render_card(Path(ckpt), repo), encoding="utf-8")
    return path


def render_card(ckpt: Path, repo: str | None = None) -> str:
    state = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
    run_dir = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else None
    spec_text = _read_text(run_dir / "spec.yaml") if run_dir else None
    spec = (yaml.safe_load(spec_text) if spec_text else None) or {}
    found = find_eval(ckpt, run_dir) if run_dir else None
    parts = [front_matter(spec), *intro(ckpt, state, spec), training_table(state, spec),
             eval_section(found, run_dir) if found else "## Evaluation\n\nNo `ragen eval` of this checkpoint "
             f"in the run's evals/ yet (`ragen eval --checkpoint {_short(ckpt)}`).\n", usage(repo)]
    if spec_text:
        parts.append("## Spec\n\nThe run's resolved spec (`ragen train spec.yaml` repeats the run):\n\n"
                     f"<details><summary>spec.yaml</summary>\n\n```yaml\n{spec_text.rstrip()}\n```\n\n</details>\n")
    return "\n".join(parts)


def front_matter(spec: dict) -> str:
    """The hub's metadata block: library, tags and, when it is a hub repo, the base model."""
    meta: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-generation",
                            "tags": ["ragen", "reinforcement-learning", "starpo"]}
    env = _get(spec, "env.train.name")
    if env:
        meta["tags"].append(str(env))
    base = base_model_id(_get(spec, "model.name"))
    if base:
        meta["base_model"] = base
    return f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n"


def base_model_id(name: str | None) -> str | None:
    """The hub id of the base model: a built-in's source repo, a name of the form org/name, or
    None (a local directory, the test model)."""
    if not name:
        return None
    if name in BASE_MODEL_IDS:
        return BASE_MODEL_IDS[name]
    looks_like_id = name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()
    return name if looks_like_id else None


def intro(ckpt: Path, state: dict, spec: dict) -> list[str]:
    name = spec.get("name") or ckpt.parent.parent.name
    env = _get(spec, "env.train.name") or "?"
    return [f"# {name} (step {state.get('step')})\n",
            f"A policy trained with ragen's StarPO (RAGEN, "
            f"arXiv 2504.20073), multi-turn reinforcement learning on the `{env}` environment, from "
            f"`{_get(spec, 'model.name') or state.get('base_model')}`. Exported from checkpoint `{_short(ckpt)}`"
            + (" (the LoRA adapter merged into the base weights)." if state.get("lora") else ".") + "\n"]


def training_table(state: dict, spec: dict) -> str:
    g = lambda key: _get(spec, key)  # noqa: E731
    lora = g("model.lora")
    rows = [
        ("base model", f"`{g('model.name')}`"),
        ("weights", f"LoRA rank {lora.get('rank')}, alpha {lora.get('alpha')}, merged" if state.get("lora") and lora
         else "LoRA, merged" if state.get("lora") else "full fine-tuning"),
        ("algorithm", f"`{g('algorithm.preset')}`, advantages `{g('algorithm.adv_estimator')}`, "
                      f"clip {g('algorithm.clip_low')} / {g('algorithm.clip_high')}, KL coef {g('algorithm.kl_coef')}, "
                      f"loss `{g('algorithm.loss_agg')}`"),
        ("rollout filter", f"`{g('algorithm.filter.strategy')}` by `{g('algorithm.filter.metric')}`, "
                           f"keep ratio {g('algorithm.filter.keep_ratio')}"),
        ("environment", f"`{g('env.train.name')}` {json.dumps(g('env.train.config') or {})}, "
                        f"{g('env.train.groups')} groups x {g('env.train.group_size')} rollouts per step, "
                        f"up to {g('rollout.max_turns')} turn(s) per episode"),
        ("steps", f"{state.get('step')} (of train.steps = {g('train.steps')})"),
        ("optimiser", f"lr {g('train.lr_actor')} ({g('train.schedule')}), precision {g('deepspeed.precision')}, "
                      f"seed {g('train.seed')}"),
    ]
    return "## Training\n\n| setting | value |\n| --- | --- |\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)


def find_eval(ckpt: Path, run_dir: Path) -> tuple[Path, dict] | None:
    """(eval.json path, the policy's report) of the newest complete eval of these weights."""
    from ragen_cli.eval.manifest import content_hash

    reports = []
    for path in sorted((run_dir / "evals").glob("*/eval.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # half-written or damaged: not an eval to quote
            continue
        candidates = [doc] if "manifest" in doc else [doc[k] for k in ("A", "B") if isinstance(doc.get(k), dict)]
        reports += [(path, r) for r in candidates if "incomplete" not in r and r.get("results")]
    if not reports:
        return None
    try:
        own = content_hash(ckpt / "model")
    except FileNotFoundError:
        return None
    mine = [(p, r) for p, r in reports if _get(r, "manifest.policy.content_hash") == own]
    return max(mine, key=lambda pr: str(_get(pr[1], "manifest.date"))) if mine else None


def eval_section(found: tuple[Path, dict], run_dir: Path) -> str:
    path, report = found
    m = report["manifest"]
    temperature = (m.get("sampling") or {}).get("temperature")
    head = (f"## Evaluation\n\n`ragen eval` of this checkpoint on {m.get('date')} "
            f"(`{path.relative_to(run_dir).as_posix()}` in the run directory"
            + (f", temperature {temperature}" if temperature is not None else "") + "). "
            "Success rate with its Wilson 95% interval; score (the env's own task reward) with its "
            "normal 95% interval.\n\n"
            "| env | episodes | success (95% CI) | mean reward | score (95% CI) |\n| --- | --- | --- | --- | --- |\n")
    rows = []
    for r in report["results"]:
        lo, hi = r["ci95"]
        score = "-" if r.get("score") is None else f"{r['score']:.3f}" + (
            f" ({r['score_ci95'][0]:.3f} to {r['score_ci95'][1]:.3f})" if r.get("score_ci95") else "")
        rows.append(f"| {r['env']} | {r['episodes']} | {pct(r['success_rate'])} ({pct(lo)} to {pct(hi)}) | "
                    f"{r['mean_reward']:.3f} | {score} |\n")
    return head + "".join(rows)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def usage(repo: str | None) -> str:
    where = repo or "path/to/this/directory"
    return ("## Usage\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
            f'model = AutoModelForCausalLM.from_pretrained("{where}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{where}")\n```\n')


def _get(doc: dict, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _short(ckpt: Path) -> str:
    """RUN/checkpoints/step-K without the local directories above the run (a card is public)."""
    return "/".join(ckpt.parts[-3:])


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
