"""`ragen eval` end to end on the tiny model (HF backend): determinism, manifest, compare mode,
full and LoRA checkpoints in the trainer's layout (train/checkpoint.py).

The checkpoints are made here: the tiny random model is fine-tuned to answer every bandit
prompt with `<think>ok</think><answer>Dragon</answer>`, and the same change is written once as
full weights and once as an exact PEFT LoRA adapter on the base. Dragon
is the risky arm with the higher expected value (0.25 vs 0.1), so such a policy succeeds on
every seed while the random base model never produces a parsable answer. That gives compare
mode and checkpoint loading a difference they must find.

Precision: `ragen eval` takes `precision: auto` from the spec (none here), so it runs fp32 or
bf16 as the machine says. The fine-tuning's greedy margin is derived to hold in both (`_sft`),
and the LoRA test runs under both answers of the machine (`machine_precision`); the others run
as conftest leaves the machine (fp32 unless RAGEN_CPU_BF16=1).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.eval.manifest import content_hash

pytestmark = pytest.mark.slow
TARGET = "ok</think><answer>Dragon</answer><|im_end|>"
SPEC = """name: sft-run
model:
  name: {base}
env:
  train:
    name: bandit
  val:
    envs:
      - name: bandit
    episodes: 4
    seed: 200
    temperature: 0.0
rollout:
  backend: hf
  max_turns: 1
  max_tokens_per_turn: 16
"""


def _bandit_prompts(model, tok) -> list[list[int]]:
    """First-turn bandit prompts exactly as the rollout driver builds them for SPEC's evaluations
    (both arm orders; the prompt states the reply budget, SPEC's 16 tokens)."""
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    rollout = RolloutSpec(max_turns=1, max_tokens_per_turn=16, temperature=0.0)
    trajs = run_rollouts(HFBackend(model, tok), tok, EnvRef(name="bandit"), [0, 1, 2, 3], 1, rollout, 4096, 0)
    prompts = {tuple(t.input_ids[:t.loss_mask.index(1)]) for t in trajs}
    assert len({len(p) for p in prompts}) == 1, "arm orders give prompts of different lengths"
    return [list(p) for p in sorted(prompts)]


def _sft(lm, params, prompts, target, max_steps=400):
    """Teacher-forced fine-tuning of `params` until greedy decoding yields `target` after every
    prompt, in fp32 and in bf16: at every target position the target's logit must beat every
    other by more than 6 u S. A bf16 evaluation moves each logit by at most 3 u S (tests/bf16.py,
    S = max sum_j |h_j W_ij| at these positions), so a difference of two logits by at most 6 u S:
    neither bf16 rounding nor KV-cache round-off (far smaller, fp32) can flip a token."""
    import torch

    from bf16 import U

    opt = torch.optim.Adam(params, lr=1e-2)
    ids = torch.tensor([p + target for p in prompts])
    start, tgt = len(prompts[0]), ids[:, len(prompts[0]):]
    for _ in range(max_steps):
        hidden = lm.model(input_ids=ids).last_hidden_state[:, start - 1:-1]
        logits = lm.lm_head(hidden)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        true = logits.gather(-1, tgt[..., None])[..., 0]
        other = logits.scatter(-1, tgt[..., None], float("-inf")).amax(-1)
        with torch.no_grad():
            margin = 6 * U * float((hidden.abs() @ lm.lm_head.weight.abs().T).max())
        if (true - other).min() > margin:
            return
        opt.zero_grad()
        loss.backward()
        opt.step()
    raise AssertionError(f"fine-tuning did not reach margin {margin:.3f} in {max_steps} steps")


def _write_checkpoint(run: Path, step: int, save, base: Path, lora: bool) -> Path:
    """RUN/checkpoints/step-N/{model/, state.json} as train/checkpoint.py lays it out."""
    ckpt = run / "checkpoints" / f"step-{step}"
    (ckpt / "model").mkdir(parents=True)
    save(ckpt / "model")
    (ckpt / "state.json").write_text(json.dumps({"step": step, "base_model": str(base), "lora": lora}))
    (run / "spec.yaml").write_text(SPEC.format(base=base))
    return ckpt


def _linear_names(model) -> list[str]:
    import torch

    return [n for n, m in model.model.layers.named_modules() if isinstance(m, torch.nn.Linear)]


def _lora_from_delta(base, tuned, tiny_model_dir):
    """A PEFT LoRA model on `base` equal to `tuned`: rank r = hidden size covers every delta
    exactly; each dW = U S V^T gives B = U S, A = V^T (scaling alpha / r = 1); the final norm
    (changed by the fine-tuning) travels as a saved module."""
    import torch
    from peft import LoraConfig, get_peft_model

    r = base.config.hidden_size
    peft_model = get_peft_model(base, LoraConfig(r=r, lora_alpha=r, target_modules="all-linear",
                                                 modules_to_save=["model.norm"]))
    tuned_layers = dict(tuned.model.layers.named_modules())
    with torch.no_grad():
        for name in _linear_names(tuned):
            lora = peft_model.get_base_model().model.layers.get_submodule(name)
            delta = tuned_layers[name].weight - lora.base_layer.weight
            u, s, vh = torch.linalg.svd(delta, full_matrices=False)
            k = s.shape[0]
            lora.lora_A["default"].weight.zero_()[:k] = vh
            lora.lora_B["default"].weight.zero_()[:, :k] = u * s
        norm = peft_model.get_base_model().model.norm
        norm.modules_to_save["default"].weight.copy_(tuned.model.norm.weight)
    return peft_model


@pytest.fixture(scope="module")
def checkpoints(tiny_model_dir, tmp_path_factory):
    import torch

    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.train.lora import copy_tokenizer_files

    root = tmp_path_factory.mktemp("eval-ckpts")
    tok = load_tokenizer(tiny_model_dir)
    target = tok.encode(TARGET, add_special_tokens=False)
    torch.manual_seed(0)
    full = load_causal_lm(tiny_model_dir)
    prompts = _bandit_prompts(full, tok)
    for p in full.parameters():
        p.requires_grad_(False)
    params = [full.model.layers.get_submodule(n).weight for n in _linear_names(full)] + [full.model.norm.weight]
    for p in params:
        p.requires_grad_(True)
    _sft(full, params, prompts, target)

    def save_full(d):
        full.save_pretrained(str(d), safe_serialization=True)
        copy_tokenizer_files(tiny_model_dir, d, shutil.copy2)

    full_ckpt = _write_checkpoint(root / "full-run", 3, save_full, tiny_model_dir, lora=False)
    peft_model = _lora_from_delta(load_causal_lm(tiny_model_dir), full, tiny_model_dir)
    lora_ckpt = _write_checkpoint(root / "lora-run", 2, lambda d: peft_model.save_pretrained(str(d)),
                                  tiny_model_dir, lora=True)
    return {"full": full_ckpt, "lora": lora_ckpt, "root": root}


def _eval(args: list[str]) -> dict:
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 0, result.output
    out = Path(args[args.index("--out") + 1])
    return json.loads((out / "eval.json").read_text())


def test_eval_is_deterministic_on_two_envs(tiny_model_dir, tmp_path):
    args = ["--model", "tiny-random", "--env", "bandit", "--env", "sokoban", "--episodes", "3",
            "--seed", "7", "--max-turns", "2", "--max-tokens", "8", "--backend", "hf"]
    first = _eval([*args, "--out", str(tmp_path / "a")])
    second = _eval([*args, "--out", str(tmp_path / "b")])
    assert first["results"] == second["results"] and first["episodes"] == second["episodes"]
    # the sampled text itself repeats, not only the summary numbers
    traj_a = (tmp_path / "a" / "trajectories" / "step-0.jsonl").read_text()
    assert traj_a == (tmp_path / "b" / "trajectories" / "step-0.jsonl").read_text()
    lines = [json.loads(x) for x in traj_a.splitlines()]
    assert [(r["env"], r["seed"]) for r in lines] == [("bandit", 7), ("bandit", 8), ("bandit", 9),
                                                      ("sokoban", 7), ("sokoban", 8), ("sokoban", 9)]
    m = first["manifest"]
    assert m["policy"]["kind"] == "model" and m["policy"]["content_hash"] == content_hash(tiny_model_dir)
    assert [e["name"] for e in m["envs"]] == ["bandit", "sokoban"] and m["seeds"] == [7, 8, 9]
    assert m["sampling"]["temperature"] == 0.5 and not m["sampling"]["greedy"]
    assert m["sampling"]["max_turns"] == 2 and m["sampling"]["max_tokens_per_turn"] == 8
    assert m["backend"] == "hf" and m["ragen_version"] and m["date"]
    # the output directory is a run directory: `ragen watch` reads it through RunDir, and
    # `ragen inspect` shows it (token view via its spec.yaml)
    from ragen_cli.monitor.rundir import RunDir

    assert RunDir(tmp_path / "a").steps_with_trajectories() == [0]
    assert RunDir(tmp_path / "a").read_trajectories(0) == lines
    shown = CliRunner().invoke(app, ["inspect", str(tmp_path / "a"), "--index", "3"])
    assert shown.exit_code == 0, shown.output
    assert lines[3]["turns"][0]["reply"][:20] in shown.output
    bandit = first["results"][0]
    assert bandit["env"] == "bandit" and bandit["episodes"] == 3
    # the random model never writes <answer>: every turn is a format error worth -0.1, no action
    # runs, so bandit (1 action budget) lasts both turns: reward 2 * -0.1, success 0/3 with the
    # Wilson interval (0, z^2/3 / (1 + z^2/3)) = (0, 0.5615)
    assert bandit["format_error_ratio"] == 1.0 and bandit["mean_reward"] == pytest.approx(-0.2)
    assert bandit["ci95"] == pytest.approx([0.0, 0.56151], abs=1e-4)


def test_compare_base_with_full_checkpoint_on_the_run_spec(checkpoints, tmp_path):
    ckpt = checkpoints["full"]
    # no env / sampling options: they come from the checkpoint's RUN/spec.yaml validation
    # section (bandit, seeds from 200, greedy, 1 turn of 16 tokens); 6 seeds instead of 4
    cmp = _eval(["--compare", "tiny-random", str(ckpt), "--episodes", "6", "--out", str(tmp_path / "cmp")])
    a, b = cmp["A"]["manifest"], cmp["B"]["manifest"]
    assert a["seeds"] == b["seeds"] == list(range(200, 206)) and b["sampling"]["greedy"]
    assert a["policy"]["kind"] == "model" and b["policy"]["kind"] == "checkpoint" and b["policy"]["step"] == 3
    assert b["policy"]["content_hash"] == content_hash(ckpt / "model") != a["policy"]["content_hash"]
    assert cmp["A"]["results"][0]["success_rate"] == 0.0 and cmp["B"]["results"][0]["success_rate"] == 1.0
    row = cmp["comparison"][0]
    # A (random) fails all 6 seeds, B (always Dragon) succeeds on all 6: 6 discordant pairs,
    # all for B; McNemar p = 2 * (1/2)^6 = 0.03125 < 0.05
    assert (row["a_only"], row["b_only"], row["n"]) == (0, 6, 6)
    assert row["diff"] == 1.0 and row["p_value"] == pytest.approx(0.03125) and row["significant"]
    # score = mean task reward: B always pulls the risky arm, which pays 1.0 or 0 (seeded); the
    # paired difference is the mean of B_i - A_i
    ta = [e["task_reward"] for e in cmp["A"]["episodes"]["bandit"]]
    tb = [e["task_reward"] for e in cmp["B"]["episodes"]["bandit"]]
    assert set(tb) <= {0.0, 1.0} and row["score_b"] == pytest.approx(sum(tb) / 6) == cmp["B"]["results"][0]["score"]
    assert row["score_diff"] == pytest.approx((sum(tb) - sum(ta)) / 6)
    assert (tmp_path / "cmp" / "B" / "trajectories" / "step-3.jsonl").is_file()
    assert (tmp_path / "cmp" / "A" / "trajectories" / "step-0.jsonl").is_file()


def test_lora_checkpoint_is_applied_to_its_base(checkpoints, tmp_path, machine_precision):
    ckpt = checkpoints["lora"]
    spec = ckpt.parent.parent / "spec.yaml"  # explicit --spec: same settings as the run's own
    doc = _eval(["--checkpoint", str(ckpt), "--spec", str(spec), "--episodes", "3", "--out", str(tmp_path / "l")])
    m = doc["manifest"]
    assert m["sampling"]["precision"] == machine_precision  # `auto`, as this kind of machine resolves it
    assert m["policy"]["kind"] == "lora-checkpoint" and m["policy"]["step"] == 2
    assert m["policy"]["base_dir"].endswith("tiny-random-float32")
    assert m["policy"]["content_hash"] == content_hash(ckpt / "model")
    # the adapter alone turns the random base into the always-Dragon policy
    assert doc["results"][0]["success_rate"] == 1.0 and doc["results"][0]["episodes"] == 3


def test_lora_checkpoint_on_another_base_is_refused(checkpoints, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    other = tmp_path / "other-model"
    config = LlamaConfig(vocab_size=49152, hidden_size=96, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=3, num_key_value_heads=3, head_dim=32)
    LlamaForCausalLM(config).save_pretrained(str(other))
    result = CliRunner().invoke(app, ["eval", "--checkpoint", str(checkpoints["lora"]), "--model", str(other),
                                      "--env", "bandit", "--episodes", "1", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "belongs to another model" in result.output and "hidden_size: 64 vs 96" in result.output
    result = CliRunner().invoke(app, ["eval", "--checkpoint", str(checkpoints["full"]), "--model", str(other),
                                      "--env", "bandit", "--out", str(tmp_path / "y")])
    assert result.exit_code == 2 and "belongs to another model" in result.output


@pytest.mark.slow
def test_compare_on_vllm_opens_both_engines_in_the_eval_process(tiny_model_dir, tmp_path):
    """`ragen eval --compare` on the vLLM backend: each policy's engine in the eval's own process
    (rollout.vllm_args.ENGINE_IN_PROCESS, as in a run), the second opened after the first closed,
    their logs in OUT/engine.log.
    Greedy, the same model twice plays the same tokens, and they are the HF backend's tokens
    (vLLM's greedy equals HF's on this model: tests/test_rollout_vllm.py)."""
    import os
    import subprocess
    import sys

    ragen = Path(sys.executable).parent / "ragen"
    common = ["--env", "bandit", "--env", "sokoban", "--episodes", "3", "--seed", "7", "--greedy", "--max-turns", "2",
              "--max-tokens", "8"]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    proc = subprocess.run([str(ragen), "eval", "--compare", "tiny-random", "tiny-random", "--backend", "vllm", *common,
                           "--out", str(tmp_path / "v")], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Without --verbose vLLM's logs go to OUT/engine.log (ragen_cli.quiet), not the console; its
    # weight-loading bar and torch's Triton line are off too. Each line names its process:
    # "MainProcess" here, "EngineCore" for an engine process of its own (vLLM's default).
    console = proc.stdout + proc.stderr
    assert f"ragen eval: engine logs in {tmp_path / 'v' / 'engine.log'} (--verbose shows them here)" in console
    assert not any(s in console for s in ("Initializing a V1 LLM engine", "EngineCore", "Loading safetensors", "Triton"))
    inits = [line for line in (tmp_path / "v" / "engine.log").read_text().splitlines() if "Initializing a V1 LLM engine" in line]
    assert len(inits) == 2 and all(" INFO MainProcess vllm." in line for line in inits)
    hf = _eval(["--model", "tiny-random", "--backend", "hf", *common, "--out", str(tmp_path / "h")])

    def tokens(path: Path) -> list:
        return [(r["env"], r["seed"], [t["reply"] for t in r["turns"]])
                for r in map(json.loads, (path / "trajectories" / "step-0.jsonl").read_text().splitlines())]

    a, b = tokens(tmp_path / "v" / "A"), tokens(tmp_path / "v" / "B")
    assert a == b == tokens(tmp_path / "h") and len(a) == 6
    cmp = json.loads((tmp_path / "v" / "eval.json").read_text())
    assert cmp["A"]["manifest"]["backend"] == cmp["B"]["manifest"]["backend"] == "vllm"
    assert hf["manifest"]["backend"] == "hf"
