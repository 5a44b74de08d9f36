"""HF backend on the tiny random model: seeded sampling, log-probs at temperature 1, greedy,
stop handling, and the `score` / `parity_gap` probe.

Precision: the backend of the sampling tests is fp32 (pinned): they test that the recorded
log-probs and the greedy choice are the model's own, which only fp32 resolves to 1e-4. The sync
test takes `precision: auto` as an owned (eval) backend does, under both answers of the machine,
with the bf16 bound of tests/bf16.py."""

from __future__ import annotations

import pytest

from ragen_cli.rollout.backend import make_backend, parity_gap


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    from ragen_cli.spec.models import RunSpec

    spec = RunSpec(name="t", env={"train": {"name": "bandit"}}, deepspeed={"precision": "fp32"})
    return make_backend("hf", tiny_model_dir, spec)


PROMPTS = [[1, 504, 3058, 314, 260], [1, 30, 31]]


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(backend):
    kw = dict(n=2, max_tokens=5, temperature=1.0, top_p=1.0)
    a = backend.generate(PROMPTS, seed=7, **kw)
    b = backend.generate(PROMPTS, seed=7, **kw)
    c = backend.generate(PROMPTS, seed=8, **kw)
    ids = lambda out: [[s.token_ids for s in group] for group in out]  # noqa: E731
    assert ids(a) == ids(b) and ids(a) != ids(c)
    assert len(a) == 2 and all(len(group) == 2 for group in a)


def test_logprobs_are_temperature_one_model_logprobs(backend):
    # Sampling at T=2 must still record log p under the unmodified model: compare with a plain
    # forward pass over prompt + sample (score gives log p of tokens 1..L-1).
    [[sample]] = backend.generate(PROMPTS[:1], n=1, max_tokens=6, temperature=2.0, top_p=1.0, seed=3)
    scored = backend.score(PROMPTS[0] + sample.token_ids)[len(PROMPTS[0]) - 1:]
    assert len(sample.logprobs) == len(sample.token_ids) == len(scored)
    assert sample.logprobs == pytest.approx(scored, abs=1e-4)


def test_greedy_picks_the_argmax_and_padding_does_not_change_it(backend):
    import torch

    out = backend.generate(PROMPTS, n=1, max_tokens=5, temperature=0.0, top_p=1.0, seed=0)
    alone = backend.generate(PROMPTS[1:], n=1, max_tokens=5, temperature=0.0, top_p=1.0, seed=0)
    assert out[1][0].token_ids == alone[0][0].token_ids  # left padding in the batch is inert
    ids = PROMPTS[0] + out[0][0].token_ids
    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([ids])).logits[0]
    for k, tid in enumerate(out[0][0].token_ids):
        assert tid == int(logits[len(PROMPTS[0]) - 1 + k].argmax())


def test_sample_is_cut_after_the_first_stop_token(backend):
    # generate() returns rows padded after the stop token; a tiny random model almost never
    # samples <|im_end|> (id 2), so the cut is checked on hand-made rows: [5, 6, 2, 7, 2] ends
    # at index 2 ("stop"); [5, 6, 7] never stops ("length").
    stop = backend._sample([5, 6, 2, 7, 2], [-1.0, -2.0, -3.0, -4.0, -5.0])
    assert (stop.token_ids, stop.logprobs, stop.finish_reason) == ([5, 6, 2], [-1.0, -2.0, -3.0], "stop")
    assert stop.text.endswith("<|im_end|>")
    length = backend._sample([5, 6, 7], [-1.0, -2.0, -3.0])
    assert (length.token_ids, length.finish_reason) == ([5, 6, 7], "length")


def test_parity_gap():
    # largest absolute gap: |-1 - -1.25| = 0.25 (the benches' and tests' probe; the run's sync
    # check is rollout/parity.py, tests/test_sync_parity.py)
    assert parity_gap([-1.0, -2.0, -0.5], [-1.25, -2.0, -0.4]) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="equal, non-empty"):
        parity_gap([-1.0], [-1.0, -2.0])


def test_auto_falls_back_to_hf_and_says_so(tiny_model_dir, monkeypatch, caplog):
    import sys

    from ragen_cli.spec.models import RunSpec

    spec = RunSpec(name="t", env={"train": {"name": "bandit"}})
    monkeypatch.setitem(sys.modules, "vllm", None)  # vLLM not importable on this machine
    with caplog.at_level("WARNING", logger="ragen.rollout"):
        backend = make_backend("auto", tiny_model_dir, spec)
    assert backend.name == "hf"
    assert "vLLM unavailable" in caplog.text and "using HF generate" in caplog.text
    with pytest.raises(ValueError, match="unknown rollout backend"):
        make_backend("tgi", tiny_model_dir, spec)


@pytest.mark.slow
def test_owned_model_sync_full_weights_and_lora_versions(tiny_model_dir, tmp_path, machine_precision):
    """An HF backend that owns its model (eval) serves whatever it was last synced to, in the
    precision `auto` gives on this kind of machine; the trainer's model is fp32.

    fp32: the backend computes the trainer's function with the same kernels, so the gap is
    rounding of one fp32 forward (~1e-6): bound 1e-5. bf16: the backend's weights are the
    trainer's rounded to bf16, so its log-probs lie within 6 u S of the trainer's (tests/bf16.py,
    S read from the trainer on these tokens; about 0.09 here), and a stale model must be caught
    beyond that bound (the 0.05 perturbation moves these log-probs by 0.7-1.4 nats)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from bf16 import logprob_bound
    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.spec.models import RunSpec

    spec = RunSpec(name="t", env={"train": {"name": "bandit"}})  # precision: auto
    backend = make_backend("hf", tiny_model_dir, spec)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[machine_precision]
    assert next(backend.model.parameters()).dtype == dtype
    ids = [1, 504, 3058, 314, 260, 30, 31]
    trainer = load_causal_lm(tiny_model_dir)
    with torch.no_grad():
        for p in trainer.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    new = {k: v.clone() for k, v in trainer.state_dict().items()}

    def bound(model) -> float:
        return 1e-5 if machine_precision == "fp32" else logprob_bound(model, ids)

    assert parity_gap(backend.score(ids), _score(trainer, ids)) > max(0.05, bound(trainer))  # stale before the sync
    backend.sync(new)
    assert parity_gap(backend.score(ids), _score(trainer, ids)) < bound(trainer)
    for version in (1, 2):
        torch.manual_seed(version)
        base = load_causal_lm(tiny_model_dir)
        base.load_state_dict(new)  # the adapter sits on the synced full weights
        config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
        peft_model = get_peft_model(base, config)
        peft_model.save_pretrained(tmp_path / f"a{version}")
        stale = parity_gap(backend.score(ids), _score(peft_model, ids))
        assert stale > max(0.05, bound(peft_model))  # serves the old version
        backend.sync(tmp_path / f"a{version}")
        assert parity_gap(backend.score(ids), _score(peft_model, ids)) < bound(peft_model)
        assert next(backend.model.parameters()).dtype == dtype


def _score(model, ids):
    """log p(ids[i] | ids[:i]) by a plain forward pass (independent of the backend's code)."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    return torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].tolist()
