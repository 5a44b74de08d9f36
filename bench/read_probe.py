"""Can the model learn to read the grid at all? A supervised probe beside the RL runs (issue 22).

RL without the move hint never beat the state-blind policies (docs/experiments/
sokoban-frozenlake.md). Two explanations differ in what they predict: the model cannot map the
coordinates to a move at this size and budget (then supervision fails too), or it can and RL
never found the signal (then supervision succeeds). This bench trains the model the spec names
(its LoRA adapter as `ragen train` builds it, fp32, plain PyTorch and AdamW) on the *correct* first move of FrozenLake states, with
exactly the first prompt a rollout shows (tokens from the rollout's own `EpisodeContext`), and
measures on held-out states whether its most likely first move is on a shortest path.

    .venv/bin/python bench/read_probe.py                          # specs/frozenlake.yaml
    .venv/bin/python bench/read_probe.py --steps 200 --lr 1e-3 --train-states 1024

Loss: -log of the probability of the set of correct moves (every move that starts a shortest
path to the goal; goal_distance in envs/frozenlake.py), at the reply's first token, summed over
the move word with and without a leading space. Metric: share of held-out states (the spec's
validation seeds) whose highest-probability move is correct, beside what state-blind choices
score on the same states (the best fixed move; uniform random = mean share of correct moves).
Prints one JSON line per evaluation, with the mean training loss since the previous one (a
uniform choice among the four moves scores 0.69 where two are correct, 1.39 where one is).
"""

from __future__ import annotations

import argparse
import json
import math
import time

from base_model import shipped_spec

MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}


def correct_moves(board: list[str], state: int) -> set[str]:
    """Moves that start a shortest path from `state` to the goal (holes impassable)."""
    from ragen_cli.envs.frozenlake import goal_distance

    size = len(board)
    dist = goal_distance(board)
    r, c = divmod(state, size)
    out = set()
    for name, (dr, dc) in MOVES.items():
        nr, nc = r + dr, c + dc
        if 0 <= nr < size and 0 <= nc < size and board[nr][nc] != "H" and dist[nr * size + nc] == dist[state] - 1:
            out.add(name)
    return out


def states(spec, seeds: list[int], tokenizer) -> list[tuple[list[int], set[str]]]:
    """(first-turn prompt ids, correct moves) per seed, built as the rollout driver builds them."""
    from ragen_cli.envs.registry import make_env
    from ragen_cli.rollout.context import ChatFormat, EpisodeContext
    from ragen_cli.rollout.prompts import answer_example, turn_text

    ro, env_ref = spec.rollout, spec.env.train
    fmt = ChatFormat(tokenizer, ro.think)
    out = []
    for seed in seeds:
        env = make_env(env_ref.name, dict(env_ref.config))
        obs, _ = env.reset(seed=seed)
        ctx = EpisodeContext(fmt, env.instruction(), ro.action_sep, ro.max_actions_per_turn)
        example = answer_example(ro.answer_example, env.valid_actions(), ro.action_sep, ro.max_actions_per_turn, seed, 1)
        block = turn_text(1, obs, env.actions_left, ro.think, ro.max_tokens_per_turn, example)
        out.append((ctx.next_prompt_ids(block, None), correct_moves(env.board, env.state)))
    return out


def move_token_ids(tokenizer) -> dict[str, list[int]]:
    """Each move's first token, without and with a leading space."""
    return {m: sorted({tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (m, " " + m)}) for m in MOVES}


def move_logprobs(model, batch: list[list[int]], pad_id: int, ids: dict[str, list[int]]):
    """[len(batch), 4] log-probabilities of each move at the reply's first token (left padding)."""
    import torch

    width = max(len(p) for p in batch)
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in batch])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
    logits = model(input_ids=input_ids, attention_mask=mask).logits[:, -1, :].float()
    logp = torch.log_softmax(logits, dim=-1)
    return torch.stack([torch.logsumexp(logp[:, ids[m]], dim=-1) for m in MOVES], dim=-1)


def evaluate(model, data, pad_id, ids, batch: int = 16) -> float:
    import torch

    names = list(MOVES)
    hits = 0
    with torch.no_grad():
        for i in range(0, len(data), batch):
            chunk = data[i:i + batch]
            best = move_logprobs(model, [p for p, _ in chunk], pad_id, ids).argmax(dim=-1).tolist()
            hits += sum(names[b] in ok for b, (_, ok) in zip(best, chunk))
    return hits / len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="frozenlake")
    ap.add_argument("--train-states", type=int, default=512)
    ap.add_argument("--eval-states", type=int, default=256)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import random

    import torch
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.train.lora import wrap

    spec = shipped_spec(args.spec)
    torch.manual_seed(args.seed)
    model_dir = resolve_model(spec.model.name, "float32")
    tokenizer = load_tokenizer(model_dir)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = move_token_ids(tokenizer)
    train = states(spec, list(range(spec.env.train.seed, spec.env.train.seed + args.train_states)), tokenizer)
    held = states(spec, list(range(spec.env.val.seed, spec.env.val.seed + args.eval_states)), tokenizer)

    fixed = {m: sum(m in ok for _, ok in held) / len(held) for m in MOVES}
    chance = sum(len(ok) / len(MOVES) for _, ok in held) / len(held)
    print(json.dumps({"held_out_states": len(held), "uniform_random": round(chance, 4),
                      "fixed_move": {m: round(v, 4) for m, v in fixed.items()}}), flush=True)

    model = wrap(load_causal_lm(model_dir, "float32"), spec.model.lora)  # the spec's adapter, as `ragen train` wraps it
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    names = list(MOVES)
    rng = random.Random(args.seed)
    t0, losses = time.perf_counter(), []
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            model.eval()
            acc = evaluate(model, held, pad_id, ids)
            train_loss = round(sum(losses) / len(losses), 4) if losses else None  # since the last evaluation
            print(json.dumps({"step": step, "held_out_correct": round(acc, 4), "train_loss": train_loss,
                              "minutes": round((time.perf_counter() - t0) / 60, 1)}), flush=True)
            model.train()
            losses = []
        if step == args.steps:
            break
        chunk = rng.sample(train, args.batch)
        logp = move_logprobs(model, [p for p, _ in chunk], pad_id, ids)
        want = torch.tensor([[m in ok for m in names] for _, ok in chunk])
        loss = -torch.logsumexp(logp.masked_fill(~want, -math.inf), dim=-1).mean()
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
