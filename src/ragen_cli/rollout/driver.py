"""The multi-turn rollout driver: P groups x N copies of an env, run in lockstep.

Every turn, one batched `backend.generate` call serves all live episodes (identical prompts,
e.g. the N copies of a group at turn 1, are sent once with n=N); finished episodes drop out.
Group g shares `seeds[g]` across its N copies. Each episode becomes one `Trajectory`: the
exact token ids the model saw and sampled, a loss mask that is 1 on sampled tokens only,
sampling log-probs, and per-turn rewards placed at each turn's last sampled token.

Rules (as RAGEN's reference code):
1. Per-turn reward = sum of env rewards of the actions run that turn + `format_penalty` when
   the reply does not parse (then no action is run, but the turn counts).
2. Actions run in order until the episode ends (terminated or the env's action budget).
3. Before each turn, if the sequence the trainer will read plus `max_tokens_per_turn` would
   exceed `max_context`, the episode ends there (truncated, overflow); it never crashes. That
   sequence is the full trajectory, or with per-turn rows (`per_turn_rows`) the turn's own prompt.
4. The envs of a turn step one after another, or, for an env whose config has
   `max_concurrent_calls` (the tools env), that many at once in threads: a turn's tool calls wait
   for the slowest, not for their sum. Only the env steps and each episode's own records run in
   the threads; the tokenizer and the contexts are used before, in order.
5. With `context_window=w`, the sampler sees the first message plus the last w turns, while
   the trajectory keeps the full history and records each turn's windowed prompt
   (`turn_prompts`) and reply span (`turn_start`..`turn_end`). With `update_context: full` the
   trainer reads the full history, so its first ratio on later turns is
   pi(a | full history) / mu(a | window): an importance weight, not 1. With `window` it trains
   each turn on the prompt it was sampled from (train/turn_rows.py), so the ratio starts at 1.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ragen_cli.rollout.context import ChatFormat, EpisodeContext, trains_per_turn
from ragen_cli.rollout.prompts import answer_example, turn_text
from ragen_cli.rollout.parse import ReplyTags
from ragen_cli.rollout.types import Sample, Trajectory, TurnRecord


@dataclass
class _Episode:
    env: Any
    ctx: EpisodeContext
    traj: Trajectory
    obs: str
    done: bool = False
    terminated: bool = False  # the env reached a terminal state (not a budget cut)
    prev_reward: float | None = None
    example: str = "none"  # rollout.answer_example for this episode's group
    copy: int = 0  # index among its group's N copies
    prompt: list[int] | None = None  # the sampler's prompt of the open turn
    shown: str | None = None  # the answer example the open turn's prompt shows


def run_rollouts(backend, tokenizer, env_ref, seeds: list[int], group_size: int, rollout,
                 max_context: int, sample_seed: int, shown: int | None = None, policy=None) -> list[Trajectory]:
    """Run len(seeds) x group_size episodes; trajectories come grouped in order (group = index
    into `seeds`). `env_ref` has `.name` and `.config` (spec `EnvRef`); `rollout` is the spec's
    `RolloutSpec` (pass a copy with another temperature for validation). Only the first `shown`
    groups (all when None) show `rollout.answer_example`; the rest show `[your answer]`.
    `policy`: a scripted player `fn(env, obs, turn)` whose replies replace the backend's samples
    (rollout/demos.py: demonstrations laid out exactly as the model's own episodes; `backend` unused)."""
    from ragen_cli.envs.registry import make_env
    from ragen_cli.rollout.agent_driver import is_agent_env, run_agent_rollouts
    from ragen_cli.rollout.tool_chat import episode_context

    if group_size < 1 or not seeds:
        raise ValueError("run_rollouts needs at least one seed and group_size >= 1")
    if is_agent_env(env_ref):  # the user's program plays the episodes (rollout/agent_driver.py)
        if policy is not None:
            raise ValueError("a scripted player cannot play an agent env: its episodes are your agent program's")
        return run_agent_rollouts(backend, tokenizer, env_ref, seeds, group_size, rollout, max_context, sample_seed)
    fmt = ChatFormat(tokenizer, rollout.think, ReplyTags.of(rollout))
    episodes: list[_Episode] = []
    envs = []
    try:
        for group, seed in enumerate(seeds):
            for copy in range(group_size):
                env = make_env(env_ref.name, dict(env_ref.config))
                envs.append(env)
                if hasattr(env, "use_tokenizer"):  # a tool env counts its results' tokens with it
                    env.use_tokenizer(tokenizer)
                obs, info = env.reset(seed=seed)
                ctx = episode_context(env, tokenizer, rollout, fmt)  # a tool env's own (rollout/tool_chat.py)
                traj = Trajectory(group=group, seed=seed, env_name=env_ref.name, info=dict(info))
                example = rollout.answer_example if shown is None or group < shown else "none"
                episodes.append(_Episode(env=env, ctx=ctx, traj=traj, obs=obs, example=example, copy=copy))
        for turn in range(1, rollout.max_turns + 1):
            live = [ep for ep in episodes if not ep.done and _open_turn(ep, turn, rollout, max_context)]
            if not live:
                break
            if policy is None:
                samples = generate_grouped(backend, [ep.prompt for ep in live], rollout, seed=sample_seed * 1009 + turn)
            else:
                from ragen_cli.rollout.demos import policy_sample

                samples = [policy_sample(policy, ep.env, ep.obs, turn, ep.ctx.fmt, rollout) for ep in live]
            replies = [_read_reply(ep, sample, rollout, tokenizer) for ep, sample in zip(live, samples)]
            workers = getattr(live[0].env.config, "max_concurrent_calls", 1)
            if workers > 1 and len(live) > 1:  # rule 4
                with ThreadPoolExecutor(min(workers, len(live)), thread_name_prefix="ragen-env") as pool:
                    list(pool.map(_act, live, replies, [rollout] * len(live)))
            else:
                for ep, reply in zip(live, replies):
                    _act(ep, reply, rollout)
            for ep in live:
                ep.done = ep.done or turn == rollout.max_turns
    finally:  # an env may hold a process, a server session or a file (the adapters): release it
        for env in envs:
            env.close()
    for ep in episodes:
        ep.traj.truncated = ep.traj.overflow or not ep.terminated
        ep.traj.messages = [dict(m) for m in ep.ctx.messages]
        ep.traj.check()
    return [ep.traj for ep in episodes]


def _open_turn(ep: _Episode, turn: int, rollout, max_context: int) -> bool:
    """Append the prompt tokens of `turn`; False (and end the episode) when it would overflow."""
    actions_left = getattr(ep.env, "actions_left", ep.env.max_actions)
    example = answer_example(ep.example, ep.env.valid_actions(), rollout.action_sep,
                             rollout.max_actions_per_turn, ep.traj.seed, turn, ep.copy)
    tags = ep.ctx.fmt.tags
    block = turn_text(turn, ep.obs, actions_left, rollout.think, rollout.max_tokens_per_turn, example, tags)
    ids = ep.ctx.next_prompt_ids(block, ep.prev_reward)
    state = None  # the first prompt with `[your answer]` where the example is: the state alone
    if turn == 1 and example:
        state = ep.ctx.next_prompt_ids(turn_text(turn, ep.obs, actions_left, rollout.think, rollout.max_tokens_per_turn,
                                                 tags=tags), None)
    ep.ctx.commit_prompt(block, ep.prev_reward, ids)
    window = ep.ctx.window_prompt(rollout.context_window)
    trained = len(window) if window is not None and per_turn_rows(rollout, ep.ctx.fmt) else len(ep.traj.input_ids) + len(ids)
    if trained + rollout.max_tokens_per_turn > max_context:
        ep.ctx.uncommit_prompt()
        if not ep.traj.input_ids:  # not even the first prompt fits: keep it, nothing trained
            ep.traj.append(ids, 0)
        ep.done = True
        ep.traj.truncated = ep.traj.overflow = True
        return False
    if turn == 1:
        ep.traj.state_prompt = state
    ep.traj.append(ids, 0)
    ep.traj.turn_prompts.append(window)
    ep.prompt = window if window is not None else ep.traj.input_ids  # read before the reply is appended
    ep.shown = example
    return True


def _read_reply(ep: _Episode, sample: Sample, rollout, tokenizer) -> tuple[TurnRecord, list[str], int, int]:
    """Record the sampled reply's tokens and parse it -> (the turn's record, its actions, the
    reply's last position, its length)."""
    traj = ep.traj
    traj.append(sample.token_ids, 1, sample.logprobs)
    turn_end = len(traj.input_ids) - 1
    n = len(sample.token_ids)
    # with thinking off every token is answer (<answer> is pre-filled): nothing to decode
    tags = ep.ctx.fmt.tags
    first = answer_start([tokenizer.decode([i]) for i in sample.token_ids], True, tags.think[1]) if rollout.think else 0
    for k in range(first, n - (sample.finish_reason == "stop")):  # the stop token is no part of the answer
        traj.answer_mask[turn_end + 1 - n + k] = 1
    traj.append(ep.ctx.commit_reply(sample.token_ids, sample.text), 0)
    reply = ep.ctx.fmt.prefill + sample.text
    # The sampled end-of-turn token is not part of the answer ("<answer>Up<|im_end|>" -> "Up").
    parsed = ep.ctx.parse(ep.ctx.fmt.strip_end(reply), rollout)
    record = TurnRecord(obs=ep.obs, reply=reply, actions=parsed.actions, reward=0.0,
                        format_ok=parsed.format_ok, finish_reason=sample.finish_reason,
                        copied_example=None if ep.shown is None else copies(parsed.actions, ep.shown, rollout.action_sep))
    return record, parsed.actions, turn_end, n


def _act(ep: _Episode, reply: tuple[TurnRecord, list[str], int, int], rollout) -> None:
    """Run the reply's actions in the env and record the turn (touches this episode alone)."""
    record, actions, turn_end, n = reply
    traj = ep.traj
    reward = 0.0 if record.format_ok else rollout.format_penalty
    for action in actions:
        obs, r, terminated, truncated, info = ep.env.step(action)
        reward += r
        traj.task_reward += r - float(info.get("shaping", 0.0))
        record.executed += 1
        record.valid += bool(info.get("action_is_valid", False))
        record.effective += bool(info.get("action_is_effective", False))
        if "tool_calls" in info:
            record.tool_calls = (record.tool_calls or []) + list(info.pop("tool_calls"))
        ep.obs = obs
        traj.info = dict(info)
        traj.success = bool(info.get("success", False))
        if terminated or truncated:
            ep.done = True
            ep.terminated = bool(terminated)
            break
    if record.format_ok and record.valid < record.executed:
        # As the reference: the format penalty also falls on a turn with any invalid action,
        # else well-formed nonsense (reward 0) beats an unparsable reply (the penalty).
        reward += rollout.format_penalty
    record.reward = reward
    ep.prev_reward = reward
    traj.turns.append(record)
    traj.turn_start.append(turn_end + 1 - n)
    traj.turn_end.append(turn_end)
    traj.turn_rewards.append(reward)


def per_turn_rows(rollout, fmt: ChatFormat) -> bool:
    """`trains_per_turn` for this episode's chat template (what the Plan decided, `Plan.turn_rows`)."""
    return trains_per_turn(rollout.update_context, fmt.prefix_stable)


def answer_start(pieces: list[str], think: bool, close: str = "</think>") -> int:
    """Index of a reply's first answer token, from its tokens' texts: 0 with thinking off (the
    `<answer>` tag is pre-filled), else the token after the one that completes `close` (the
    reasoning's closing tag; len(pieces) when none does: the reply has no answer)."""
    if not think:
        return 0
    text = ""
    for i, piece in enumerate(pieces):
        text += piece
        if close in text:
            return i + 1
    return len(pieces)


def generate_grouped(backend, prompts: list[list[int]], rollout, seed: int) -> list[Sample]:
    """One `generate` call for all prompts, one sample each. When every distinct prompt occurs
    equally often (the N copies of each group at turn 1), send each once with n = that count."""
    index: dict[tuple[int, ...], list[int]] = {}
    for i, prompt in enumerate(prompts):
        index.setdefault(tuple(prompt), []).append(i)
    counts = {len(v) for v in index.values()}
    kwargs = dict(max_tokens=rollout.max_tokens_per_turn, temperature=rollout.temperature,
                  top_p=rollout.top_p, seed=seed)
    if len(counts) == 1 and counts != {1}:
        n = counts.pop()
        outs = backend.generate([list(k) for k in index], n=n, **kwargs)
        result: list[Sample | None] = [None] * len(prompts)
        for positions, samples in zip(index.values(), outs):
            for pos, sample in zip(positions, samples):
                result[pos] = sample
        return result  # type: ignore[return-value]
    return [out[0] for out in backend.generate(prompts, n=1, **kwargs)]


def copies(actions: list[str], example: str, sep: str) -> bool:
    """Whether parsed `actions` are the example's actions ("Left || Up"), case and spaces aside."""
    def norm(xs):
        return [" ".join(x.lower().split()) for x in xs]
    return bool(actions) and norm(actions) == norm(example.split(sep))


def reward_fn_means(trajs: list[Trajectory]) -> dict[str, float]:
    """`reward/fn/<fn>`: each reward function's mean over the episodes it scored (an env that
    reports `info["reward_fns"]`, the dataset adapter: per episode, the function's sum or None)."""
    from ragen_cli.monitor.metrics import env_metric

    values: dict[str, list[float]] = {}
    for traj in trajs:
        for name, value in (traj.info.get("reward_fns") or {}).items():
            if value is not None:
                values.setdefault(name, []).append(float(value))
    return {env_metric("reward/fn/<fn>", name): sum(v) / len(v) for name, v in values.items()}


def rollout_stats(trajs: list[Trajectory], seconds: float) -> dict[str, float]:
    """Per-batch rollout metrics, named as in monitor/metrics.py."""
    turns = [t for traj in trajs for t in traj.turns]
    generated = sum(traj.num_generated for traj in trajs)
    executed = sum(t.executed for t in turns)
    shown = [t.copied_example for t in turns if t.copied_example is not None]
    copied = {"episode/example_copy_ratio": sum(shown) / len(shown)} if shown else {}
    from ragen_cli.envs.judge import judge_metrics
    from ragen_cli.rollout.agent_driver import agent_metrics
    from ragen_cli.rollout.tool_chat import tool_metrics

    return {**copied, **reward_fn_means(trajs), **tool_metrics(trajs), **agent_metrics(trajs), **judge_metrics(trajs),
        "episode/response_tokens_per_turn": generated / max(1, len(turns)),
        "episode/turns": len(turns) / max(1, len(trajs)),
        "episode/actions": executed / max(1, len(trajs)),
        "episode/valid_action_ratio": sum(t.valid for t in turns) / max(1, executed),
        "episode/effective_action_ratio": sum(t.effective for t in turns) / max(1, executed),
        "episode/format_error_ratio": sum(not t.format_ok for t in turns) / max(1, len(turns)),
        "episode/truncated": float(sum(traj.truncated for traj in trajs)),
        "train/success": sum(traj.success for traj in trajs) / max(1, len(trajs)),
        "train/episodes": float(len(trajs)),
        "train/groups": float(len({traj.group for traj in trajs})),
        "timing/rollout_s": seconds,
        "perf/rollout_tokens_per_s": generated / seconds if seconds > 0 else 0.0,
    }


def timed_rollouts(*args, **kwargs) -> tuple[list[Trajectory], dict[str, float]]:
    """`run_rollouts` plus its `rollout_stats`."""
    start = time.perf_counter()
    trajs = run_rollouts(*args, **kwargs)
    return trajs, rollout_stats(trajs, time.perf_counter() - start)
