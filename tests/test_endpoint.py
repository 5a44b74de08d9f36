"""The policy behind an OpenAI-compatible endpoint (rollout/endpoint.py, issue 74), driven by
the real `openai` client: recorded ids are the sampled ids and the trained mask covers only
them, a 3-request conversation is stitched into one token list equal to the template's
rendering, an edited history starts a row of its own, concurrent episodes share engine calls,
and every bad request is an HTTP error, not a crash. The engine is the HF backend on
tiny-random (real sampling, real log-probs)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip("openai")

MAX_TOKENS = 6


@pytest.fixture(scope="module")
def served(tiny_hf):
    from ragen_cli.rollout.endpoint import AgentChatFormat, PolicyEndpoint
    from ragen_cli.spec.models import RolloutSpec

    backend, model, tok = tiny_hf
    fmt = AgentChatFormat(tok)
    endpoint = PolicyEndpoint(backend, fmt, RolloutSpec(max_tokens_per_turn=MAX_TOKENS), seed=3)
    yield endpoint, model, tok, fmt
    endpoint.close()


def client(endpoint, episode: str):
    return openai.OpenAI(base_url=endpoint.base_url(episode), api_key="unused", max_retries=0, timeout=120)


def trainer_gap(model, trajs) -> tuple[float, int]:
    """Largest |trainer log-prob - sampler log-prob| over the trained tokens of the per-request
    rows (train/turn_rows.py), and the trained token count."""
    from ragen_cli.train.batch import collate, score
    from ragen_cli.train.turn_rows import turn_rows

    rows = turn_rows(trajs)[0]
    batch = collate(rows)
    gap = float(((score(model, batch, micro=4) - batch.sample_logp).abs() * batch.mask).max())
    return gap, int(batch.mask.sum())


def test_a_reply_is_the_sampled_tokens_and_only_they_are_trained(served):
    from ragen_cli.rollout.endpoint import episode_trajectory

    endpoint, model, tok, fmt = served
    out = client(endpoint, "one").chat.completions.create(
        model="ragen-policy", messages=[{"role": "user", "content": "Which is larger, 3 or 7?"}])
    [call] = endpoint.episodes["one"].calls
    assert call.prompt_ids == fmt.encode(fmt.render([{"role": "user", "content": "Which is larger, 3 or 7?"}], True))
    assert out.choices[0].message.content == fmt.strip_end(tok.decode(call.sample.token_ids))
    assert out.usage.completion_tokens == len(call.sample.token_ids) <= MAX_TOKENS
    traj = episode_trajectory(endpoint.episodes["one"], reward=1.0)
    assert traj.loss_mask == [0] * len(call.prompt_ids) + [1] * len(call.sample.token_ids) + [0] * len(call.end_ids)
    gap, trained = trainer_gap(model, [traj])
    assert trained == len(call.sample.token_ids) and gap <= 1e-5


def test_three_requests_of_a_conversation_are_one_token_list(served):
    from ragen_cli.rollout.endpoint import episode_trajectory

    endpoint, model, tok, fmt = served
    c = client(endpoint, "three")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Pick a number."}]
    for follow_up in ("Another one.", "And a last one.", None):
        reply = c.chat.completions.create(model="m", messages=messages).choices[0].message
        messages = messages + [{"role": "assistant", "content": reply.content}]
        if follow_up:
            messages = messages + [{"role": "user", "content": follow_up}]
    log = endpoint.episodes["three"]
    assert [call.extends for call in log.calls] == [False, True, True]
    traj = episode_trajectory(log, reward=0.5)
    # one token list: each request's prompt is the list up to its reply, nothing re-tokenised
    assert traj.turn_prompts == [None, None, None]
    assert all(traj.input_ids[: s] == call.prompt_ids for s, call in zip(traj.turn_start, log.calls))
    # and it is the chat template's rendering of the whole conversation
    assert tok.decode(traj.input_ids) + fmt.after_eot == fmt.render(messages, generation_prompt=False)
    assert traj.turn_rewards == [0.0, 0.0, 0.5] and traj.episode_reward == 0.5
    gap, trained = trainer_gap(model, [traj])
    assert trained == sum(len(call.sample.token_ids) for call in log.calls) and gap <= 1e-5


def test_an_edited_history_starts_a_row_of_its_own(served):
    from ragen_cli.rollout.endpoint import episode_trajectory

    endpoint, model, tok, fmt = served
    c = client(endpoint, "edited")
    first = [{"role": "user", "content": "Say a word."}]
    reply = c.chat.completions.create(model="m", messages=first).choices[0].message.content
    # the agent rewrites the reply it got (a summary, a trimmed history): no longer a continuation
    second = first + [{"role": "assistant", "content": "(edited) " + reply}, {"role": "user", "content": "Again."}]
    c.chat.completions.create(model="m", messages=second)
    # then continues the edited conversation as returned: stitched onto the second row
    third = second + [{"role": "assistant", "content": endpoint.episodes["edited"].history[-1]["content"]},
                      {"role": "user", "content": "Once more."}]
    c.chat.completions.create(model="m", messages=third)
    log = endpoint.episodes["edited"]
    assert [call.extends for call in log.calls] == [False, False, True] and endpoint.stats.new_rows >= 1
    traj = episode_trajectory(log, reward=1.0)
    assert traj.turn_prompts[0] is None
    assert traj.turn_prompts[1] == log.calls[1].prompt_ids == fmt.encode(fmt.render(second, True))
    assert traj.turn_prompts[2] == log.calls[2].prompt_ids  # the layout holds both rows: each turn names its prompt
    assert log.calls[2].prompt_ids[: len(log.calls[1].prompt_ids)] == log.calls[1].prompt_ids
    gap, trained = trainer_gap(model, [traj])
    assert trained == sum(len(call.sample.token_ids) for call in log.calls) and gap <= 1e-5


def test_concurrent_episodes_share_engine_calls_and_keep_their_own_records(served):
    from ragen_cli.rollout.endpoint import episode_trajectory

    endpoint, model, tok, fmt = served
    before = endpoint.batcher.calls
    errors = []

    def agent(i: int) -> None:
        try:
            c = client(endpoint, f"conc-{i}")
            messages = [{"role": "user", "content": f"Count to {i + 2}."}]
            reply = c.chat.completions.create(model="m", messages=messages).choices[0].message.content
            c.chat.completions.create(model="m", messages=messages + [{"role": "assistant", "content": reply},
                                                                       {"role": "user", "content": "Go on."}])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    logs = [endpoint.episodes[f"conc-{i}"] for i in range(6)]
    assert [[c.extends for c in log.calls] for log in logs] == [[False, True]] * 6
    assert endpoint.batcher.calls - before < 12  # 12 requests, fewer engine calls
    trajs = [episode_trajectory(log, reward=float(i), group=i) for i, log in enumerate(logs)]
    gap, trained = trainer_gap(model, trajs)
    assert trained == sum(len(c.sample.token_ids) for log in logs for c in log.calls) and gap <= 1e-5


def test_bad_requests_are_http_errors_and_sampling_is_the_run_s(served):
    endpoint, *_ = served
    c = client(endpoint, "bad")
    user = [{"role": "user", "content": "hi"}]
    for kwargs, words in (({"n": 2}, "n > 1"), ({"logit_bias": {"5": 10}}, "logit_bias"),
                          ({"stop": ["x"]}, "stop sequences"), ({"stream": True}, "stream is not supported"),
                          ({"max_tokens": 0}, "max_tokens must be a positive whole number")):
        with pytest.raises(openai.BadRequestError, match=words):
            c.chat.completions.create(model="m", messages=user, **kwargs)
    with pytest.raises(openai.BadRequestError, match="messages must be a non-empty list"):
        c.chat.completions.create(model="m", messages=[])
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=f"http://127.0.0.1:{endpoint.port}/v1", api_key="x", max_retries=0).chat.completions.create(
            model="m", messages=user)
    request = urllib.request.Request(endpoint.base_url("bad") + "/chat/completions", data=b"{not json",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 400 and "not JSON" in json.loads(err.value.read())["error"]["message"]
    assert "bad" not in endpoint.episodes or endpoint.episodes["bad"].calls == []  # nothing refused was recorded
    # temperature and top_p are the run's: taken, replaced, counted; max_tokens is capped
    overridden = endpoint.stats.overridden
    out = c.chat.completions.create(model="m", messages=user, temperature=0.1, top_p=0.5, max_tokens=500)
    assert endpoint.stats.overridden == overridden + 1 and out.usage.completion_tokens <= MAX_TOKENS
    assert c.models.list().data[0].id == "ragen-policy"
