"""Cross-scoring for the template-collapse metrics (monitor/collapse.py has the maths).

Each sampled first-turn reply is scored under the first-turn prompt of every initial state of
the step (teacher forcing with the trainer's actor). The prompt of a state is the one its first
copy saw, with the `[your answer]` placeholder where an answer example was shown
(`Trajectory.state_prompt`): the columns differ in the state alone. A reply that copies the
example it was shown (`rollout.answer_example: random` draws one per state) therefore scores no
better under its own state than under another one: copying the example counts as template
collapse, as it should, and not as reading the state.
"""

from __future__ import annotations

import contextlib
import copy

import torch

from ragen_cli.algos.logits import logprobs_from_logits
from ragen_cli.monitor.collapse import spread_sample
from ragen_cli.train.batch import module_device


def first_turn(input_ids: list[int], loss_mask: list[int], turn_end: list[int]) -> tuple[list[int], list[int]]:
    """(prompt, reply) of a trajectory's first turn: the tokens before its first sampled token,
    and its sampled tokens up to the first turn's end. Both empty without a sampled token."""
    if not turn_end:
        return [], []
    start = loss_mask.index(1)
    return input_ids[:start], [t for t, m in zip(input_ids[start: turn_end[0] + 1], loss_mask[start: turn_end[0] + 1]) if m]


def pairs(trajs, max_replies: int, max_groups: int | None = None) -> tuple[list[list[int]], list[float], list[list[int]], list[int]]:
    """(prompts, weights, replies, own) for `cross_stats`: one column per distinct state prompt
    of up to `max_groups` groups spread over the batch (weight = the number of those groups that
    show it), up to `max_replies` of their replies spread over them, and each reply's own column."""
    groups = sorted({t.group for t in trajs})
    chosen = {groups[i] for i in spread_sample(len(groups), max_groups or len(groups))}
    trajs = [t for t in trajs if t.group in chosen]
    prompt_of_group: dict[int, tuple[int, ...]] = {}
    for t in trajs:
        if t.group not in prompt_of_group:
            prompt_of_group[t.group] = tuple(t.state_prompt or first_turn(t.input_ids, t.loss_mask, t.turn_end)[0])
    columns: dict[tuple[int, ...], int] = {}
    weights: list[float] = []
    for prompt in prompt_of_group.values():
        if not prompt:
            continue
        if prompt not in columns:
            columns[prompt] = len(columns)
            weights.append(0.0)
        weights[columns[prompt]] += 1.0
    candidates = [t for t in trajs if prompt_of_group.get(t.group) in columns and t.turn_end]
    replies, own = [], []
    for i in spread_sample(len(candidates), max_replies):
        t = candidates[i]
        reply = first_turn(t.input_ids, t.loss_mask, t.turn_end)[1]
        if reply:
            replies.append(reply)
            own.append(columns[prompt_of_group[t.group]])
    return [list(p) for p in columns], weights, replies, own


def common_prefix(prompts: list[list[int]]) -> int:
    """Length of the longest token prefix all prompts share (each prompt keeps its last token)."""
    n = min(len(p) for p in prompts) - 1
    for i in range(max(n, 0)):
        if any(p[i] != prompts[0][i] for p in prompts):
            return i
    return max(n, 0)


@contextlib.contextmanager
def eval_mode(module):
    """`module` in eval mode (no dropout) for the block, its own mode restored after."""
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)


def _extend(module, cache, ids: list[int]):
    """`cache` (copied) run on through `ids`; a fresh cache when `cache` is None."""
    cache = copy.deepcopy(cache) if cache is not None else None
    if not ids:
        return cache
    return module(input_ids=torch.tensor([ids], device=module_device(module)), past_key_values=cache,
                  use_cache=True, logits_to_keep=1).past_key_values


@torch.no_grad()
def reply_logprobs(module, prompt: list[int], replies: list[list[int]], chunk: int = 16,
                   shared: tuple = (None, 0)) -> torch.Tensor:
    """Mean per-token log p(reply | prompt) for each reply [R], on the module's device, `module`
    as it is (cross_matrix puts it in eval mode). The prompt (all but its last token) runs once,
    on from `shared` = (KV cache of its first k tokens, k) when given; its cache is copied and
    repeated for each chunk. Token ids are built on the host and moved to the module's device."""
    dev = module_device(module)
    out: list[torch.Tensor] = []
    base, k = shared
    prefix = _extend(module, base, prompt[k:-1])
    n_head = len(prompt) - 1
    for lo in range(0, len(replies), chunk):
        part = replies[lo: lo + chunk]
        L = max(len(r) for r in part)
        # row = [last prompt token, r_1 .. r_{m-1}] predicts [r_1 .. r_m]
        ids = torch.zeros(len(part), L, dtype=torch.long)
        target = torch.zeros(len(part), L, dtype=torch.long)
        mask = torch.zeros(len(part), L)
        for b, r in enumerate(part):
            row = [prompt[-1], *r[:-1]]
            ids[b, : len(row)] = torch.tensor(row)
            target[b, : len(r)] = torch.tensor(r)
            mask[b, : len(r)] = 1.0
        attn = torch.cat([torch.ones(len(part), n_head, dtype=torch.long), mask.long()], dim=1).to(dev)
        ids, target, mask = ids.to(dev), target.to(dev), mask.to(dev)
        if prefix is not None:
            cache = copy.deepcopy(prefix)
            cache.batch_repeat_interleave(len(part))
            logits = module(input_ids=ids, attention_mask=attn, past_key_values=cache, use_cache=True).logits
        else:
            logits = module(input_ids=ids, attention_mask=attn, use_cache=False).logits
        logp = logprobs_from_logits(logits.float(), target) * mask
        out.append(logp.sum(-1) / mask.sum(-1))
    return torch.cat(out)


@torch.no_grad()
def cross_matrix(module, prompts: list[list[int]], replies: list[list[int]], rank: int = 0,
                 world: int = 1) -> list[list[float]]:
    """cross[i][j] = mean per-token log p(replies[i] | prompts[j]). The prompts' common prefix
    (system message and instructions: most of a prompt) runs once; each prompt then runs only
    its own rest. With several processes each scores the columns j = rank (mod world) and the
    columns are all-gathered; every process runs the same number of forwards (the last column
    is repeated to pad), as ZeRO-3 needs."""
    k = common_prefix(prompts)
    mine = list(range(rank, len(prompts), world))
    rounds = -(-len(prompts) // world)
    with eval_mode(module):
        shared = (_extend(module, None, prompts[0][:k]), k)
        # one copy to the host per column (the matrix is read as Python floats)
        cols = {j: reply_logprobs(module, prompts[j], replies, shared=shared).cpu().tolist() for j in mine}
        for _ in range(rounds - len(mine)):
            reply_logprobs(module, prompts[-1], replies, shared=shared)
    if world > 1:
        parts: list = [None] * world
        torch.distributed.all_gather_object(parts, cols)
        cols = {j: c for part in parts for j, c in part.items()}
    return [[cols[j][i] for j in range(len(prompts))] for i in range(len(replies))]
