"""Rollouts of an agent env (envs/adapters/agent_env.py): the user's program plays each episode
against the policy served at ragen's endpoint (rollout/endpoint.py).

For a batch of seeds x group_size: one endpoint on the run's rollout engine; each episode gets
its env (its task row, by seed), its own base URL and an `openai.OpenAI` client, and runs
`entry(client, row)` in a daemon thread, at most `max_concurrency` at once. When it returns, its
recorded requests become its trajectory (`endpoint.episode_trajectory`, one row per request in
the update); the reward is what it returned, or the reward functions' score of its last reply.

A failed episode (the agent raised, ran past `timeout_s`, made no request, returned neither a
number nor None, or a reward function found nothing to score) keeps only its first prompt (mask
0: nothing trained) with reward 0, and says why in `info["agent_error"]`. A batch in which
every episode failed raises `AgentFailure` with the last error and the agent's own last frame.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

from ragen_cli.envs.base import EnvFailure
from ragen_cli.rollout.types import Trajectory


class AgentFailure(EnvFailure):
    """Every episode of a batch failed: the agent program, not the model, is broken."""


@dataclass
class _Job:
    group: int
    seed: int
    env: Any
    row: dict
    episode: str
    reward: float | None = None
    error: str | None = None
    frame: str = ""
    done: bool = False


def is_agent_env(env_ref: Any) -> bool:
    """Whether `env_ref` names an env whose episodes are a user's program (`drives_itself`)."""
    from ragen_cli.envs.registry import resolve

    try:
        cls = resolve(env_ref.name)[0]
    except ValueError:
        return False
    return bool(getattr(cls, "drives_itself", False))


def _user_frame(exc: BaseException, entry: str) -> str:
    """The last frame of the traceback that is the user's code (not ragen's, not a library's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "ragen_cli" not in f.filename and "site-packages" not in f.filename]
    f = (own or frames or [None])[-1]
    return f"{f.filename}:{f.lineno} in {f.name}" if f is not None else entry


def _run(job: _Job, client: Any, entry: Any, name: str) -> None:
    try:
        out = entry(client, dict(job.row))
        if out is not None and (isinstance(out, bool) or not isinstance(out, (int, float)) or not math.isfinite(out)):
            raise TypeError(f"{name} returned {out!r:.60}: a finite number (the reward) or None (score with rewards:)")
        job.reward = None if out is None else float(out)
    except BaseException as exc:  # noqa: BLE001 (a user's program may fail in any way, sys.exit too: one failed episode)
        job.error = f"{type(exc).__name__}: {exc}"
        job.frame = _user_frame(exc, name)
    finally:
        job.done = True


def _play(jobs: list[_Job], endpoint, config) -> None:
    """Run every job's agent, at most `max_concurrency` at once; one still running after
    `timeout_s` is a failed episode (its daemon thread is left behind: its later requests find the
    endpoint closed)."""
    import openai

    pending, running = list(jobs), []
    while pending or running:
        now = time.monotonic()
        for job, start in list(running):
            if job.done or now - start > config.timeout_s:
                running.remove((job, start))
                if not job.done:
                    job.error, job.frame = f"TimeoutError: the episode ran past timeout_s = {config.timeout_s:g} s", config.entry
        while pending and len(running) < config.max_concurrency:
            job = pending.pop(0)
            client = openai.OpenAI(base_url=endpoint.base_url(job.episode), api_key="ragen", max_retries=0,
                                   timeout=config.timeout_s)
            threading.Thread(target=_run, args=(job, client, job.env.entry, config.entry),
                             name=f"ragen-agent-{job.episode}", daemon=True).start()
            running.append((job, time.monotonic()))
        time.sleep(0.01)


def run_agent_rollouts(backend, tokenizer, env_ref, seeds: list[int], group_size: int, rollout, max_context: int,
                       sample_seed: int) -> list[Trajectory]:
    """`rollout/driver.run_rollouts` for an agent env (module docstring); trajectories grouped in
    order (group = index into `seeds`)."""
    from ragen_cli.envs.registry import make_env
    from ragen_cli.rollout.endpoint import AgentChatFormat, PolicyEndpoint, episode_trajectory

    fmt = AgentChatFormat(tokenizer)
    jobs: list[_Job] = []
    for group, seed in enumerate(seeds):
        for _ in range(group_size):
            env = make_env(env_ref.name, dict(env_ref.config))
            env.reset(seed=seed)
            jobs.append(_Job(group, seed, env, dict(env.row), uuid.uuid4().hex[:12]))
    endpoint = PolicyEndpoint(backend, fmt, rollout, seed=sample_seed, max_context=max_context)
    try:
        _play(jobs, endpoint, jobs[0].env.config)
        with endpoint.lock:  # an agent past its timeout may still be talking to the endpoint
            trajs = [_trajectory(job, endpoint, fmt, env_ref.name, episode_trajectory) for job in jobs]
    finally:
        endpoint.close()
    failed = [job for job in jobs if job.error]
    if failed and len(failed) == len(jobs):
        last = failed[-1]
        raise AgentFailure(f"every agent episode of the batch failed ({len(jobs)} of {len(jobs)}); the last: "
                           f"{last.error} (at {last.frame})")
    return trajs


def _trajectory(job: _Job, endpoint, fmt, env_name: str, episode_trajectory) -> Trajectory:
    log = endpoint.episodes.get(job.episode)
    if job.error is None and (log is None or not log.calls):
        job.error, job.frame = "the agent made no request to the model", job.env.config.entry
    scores: dict = {}
    if job.error is None and job.reward is None:
        last = log.calls[-1].history[-1]["content"] if log.calls[-1].history else fmt.tokenizer.decode(
            log.calls[-1].sample.token_ids)
        try:
            job.reward, scores = job.env.score(fmt.strip_end(last or ""))
        except Exception as exc:  # noqa: BLE001 (no rewards:, or a reward function that failed)
            job.error, job.frame = f"{type(exc).__name__}: {exc}", job.env.config.entry
    info = {"agent_requests": 0 if log is None else len(log.calls),
            "agent_new_rows": 0 if log is None else sum(not c.extends for c in log.calls[1:]),
            "agent_failed": int(job.error is not None)}
    if job.error is not None:  # nothing of a failed episode is trained: its first prompt, mask 0
        first = log.calls[0].prompt_ids if log is not None and log.calls else fmt.encode(
            fmt.render([{"role": "user", "content": str(job.row.get(job.env.config.prompt_field, ""))}], True))
        traj = Trajectory(group=job.group, seed=job.seed, env_name=env_name)
        traj.append(first, 0)
        traj.info = {**info, "agent_error": f"{job.error} (at {job.frame})"}
        return traj
    traj = episode_trajectory(log, job.reward, job.group, job.seed, env_name)
    traj.success = job.reward >= job.env.config.success_threshold
    traj.info = {**info, **{k: scores[k] for k in ("reward_fns", "judge_reply", "judge_failed") if k in scores}}
    return traj


def agent_metrics(trajs: list[Trajectory]) -> dict[str, float]:
    """The agent metrics of a step (docs/metrics.md), over the episodes of agent envs; {} when none."""
    infos = [t.info for t in trajs if "agent_failed" in t.info]
    if not infos:
        return {}
    requests = sum(i["agent_requests"] for i in infos)
    return {"agent/failed_ratio": sum(i["agent_failed"] for i in infos) / len(infos),
            "agent/requests": requests / len(infos),
            "agent/new_row_ratio": sum(i["agent_new_rows"] for i in infos) / max(1, requests)}
