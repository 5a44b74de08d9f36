"""The driver and the context builder against a scripted model (issue 4 acceptance).

`ScriptedBackend` is a real `Backend` whose "model" replies with fixed texts: it stands in for
the language model, not for the code under test (context building, token bookkeeping, masks,
rewards, overflow). Sokoban seed 1 starts as

    ######
    ######
    #___O#
    #_X__#
    #P_###
    ######
"""

from __future__ import annotations

import pytest

from ragen_cli.rollout.driver import rollout_stats, run_rollouts
from ragen_cli.spec.models import EnvRef, RolloutSpec
from rollout_scripted import ScriptedBackend

INSTR = (
    "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets. "
    "When you are right next to a box, you can push it by moving in the same direction. You cannot push "
    "a box through a wall, and you cannot pull a box.\nThe meaning of each symbol in the state is:\n"
    "#: wall, _: floor, O: target, √: box on target, X: box, P: player, S: player on target\n"
    "Your available actions are:\nUp, Down, Left, Right\n"
)
FMT = ("Always output: <think> [Your thoughts] </think> <answer> [your answer] </answer> with no extra "
       "text. Strictly follow this format. Max response length: 12 words (tokens).\n")


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from ragen_cli.models.load import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def enc(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


REPLIES = [
    "push</think><answer>Up</answer><|im_end|>",  # 11 tokens, ends with <|im_end|>
    "no tags here<|im_end|>",  # format error
    "x</think><answer>Right || Up</answer> and then some more words to cut",  # cut at 12 tokens
]


def test_three_turn_sokoban_context_matches_hand_written_tokens(tok):
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12)
    backend = ScriptedBackend(tok, REPLIES)
    [traj] = run_rollouts(backend, tok, EnvRef(name="sokoban"), [1], 1, rollout, 4096, 0)
    # Hand-written: Up moves P from row 4 to row 3 (-0.1, 9 actions left); turn 2 does not parse
    # (-0.1 penalty, state unchanged); turn 3 runs Right (pushes X one cell right) then Up (-0.2).
    parts = [
        "<|im_start|>system\nYou're a helpful assistant. <|im_end|>\n<|im_start|>user\n" + INSTR
        + 'You can take up to 5 actions per turn, separated by the action separator "||".\n'
        "Turn 1:\nState:\n######\n######\n#___O#\n#_X__#\n#P_###\n######\nYou have 10 actions left. " + FMT
        + "<|im_end|>\n<|im_start|>assistant\n<think>",
        "\n<|im_start|>user\nReward:\n-0.1\n\nTurn 2:\nState:\n######\n######\n#___O#\n#PX__#\n#__###\n######\n"
        "You have 9 actions left. " + FMT + "<|im_end|>\n<|im_start|>assistant\n<think>",
        "\n<|im_start|>user\nReward:\n-0.1\n\nTurn 3:\nState:\n######\n######\n#___O#\n#PX__#\n#__###\n######\n"
        "You have 9 actions left. " + FMT + "<|im_end|>\n<|im_start|>assistant\n<think>",
    ]
    r1, r2, r3 = enc(tok, REPLIES[0]), enc(tok, REPLIES[1]), enc(tok, REPLIES[2])[:12]
    end3 = enc(tok, "<|im_end|>")  # turn 3 hit max_tokens: the template's end-of-turn, mask 0
    p = [enc(tok, part) for part in parts]
    expected = p[0] + r1 + p[1] + r2 + p[2] + r3 + end3
    assert traj.input_ids == expected
    assert traj.loss_mask == [0] * len(p[0]) + [1] * 11 + [0] * len(p[1]) + [1] * 4 + [0] * len(p[2]) + [1] * 12 + [0]
    assert traj.old_logprobs == [-0.5 if m else 0.0 for m in traj.loss_mask]
    # turn ends: last sampled token of each turn
    e1 = len(p[0]) + 11 - 1
    e2 = e1 + len(p[1]) + 4
    e3 = e2 + len(p[2]) + 12
    assert traj.turn_end == [e1, e2, e3]
    assert traj.turn_rewards == pytest.approx([-0.1, -0.1, -0.2])
    assert traj.episode_reward == pytest.approx(-0.4)
    assert [t.actions for t in traj.turns] == [["Up"], [], ["Right", "Up"]]
    assert [t.format_ok for t in traj.turns] == [True, False, True]
    assert [(t.valid, t.effective, t.executed) for t in traj.turns] == [(1, 1, 1), (0, 0, 0), (2, 2, 2)]
    assert [t.finish_reason for t in traj.turns] == ["stop", "stop", "length"]
    assert traj.truncated and not traj.overflow and not traj.success  # turn budget, not solved
    # the prompt of each turn is exactly the trajectory so far (sampled ids never re-tokenised)
    assert backend.calls[1] == [expected[: e1 + 1] + p[1]]
    assert backend.calls[2] == [expected[: e2 + 1] + p[2]]


def test_mask_covers_exactly_the_sampled_tokens_and_no_observation(tok):
    """Mask audit: decoding each maximal run of mask-1 tokens gives exactly one reply."""
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12)
    [traj] = run_rollouts(ScriptedBackend(tok, REPLIES), tok, EnvRef(name="sokoban"), [1], 1, rollout, 4096, 0)
    runs, cur = [], []
    for tid, m in zip(traj.input_ids, traj.loss_mask):
        if m:
            cur.append(tid)
        elif cur:
            runs.append(cur)
            cur = []
    runs += [cur] if cur else []
    assert [tok.decode(r) for r in runs] == [REPLIES[0], REPLIES[1], "x</think><answer>Right || Up</answer>"]
    trained = "".join(tok.decode(r) for r in runs)
    assert "State:" not in trained and "Reward:" not in trained and "<|im_start|>" not in trained


def test_groups_share_seeds_and_identical_prompts_are_sent_once(tok):
    rollout = RolloutSpec(max_turns=1, max_tokens_per_turn=12)
    backend = ScriptedBackend(tok, REPLIES[:1])
    trajs = run_rollouts(backend, tok, EnvRef(name="sokoban"), [1, 2, 3], 4, rollout, 4096, 0)
    assert [t.group for t in trajs] == [0] * 4 + [1] * 4 + [2] * 4
    assert [t.seed for t in trajs] == [1] * 4 + [2] * 4 + [3] * 4
    assert len(backend.calls[0]) == 3  # 3 distinct first prompts, each with n=4
    assert trajs[0].input_ids == trajs[3].input_ids != trajs[4].input_ids


def test_overflow_ends_the_trajectory_cleanly(tok):
    # The first prompt is ~200 tokens; with max_context = first prompt + 12 + 5 the first turn
    # fits (prompt + 12 <= ctx) but turn 2 (about 100 more prompt tokens) does not.
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12)
    [full] = run_rollouts(ScriptedBackend(tok, REPLIES), tok, EnvRef(name="sokoban"), [1], 1, rollout, 4096, 0)
    first_prompt = full.turn_end[0] - 10  # turn 1 sampled 11 tokens ending at turn_end[0]
    ctx = first_prompt + 12 + 5
    [traj] = run_rollouts(ScriptedBackend(tok, REPLIES), tok, EnvRef(name="sokoban"), [1], 1, rollout, ctx, 0)
    assert traj.overflow and traj.truncated
    assert len(traj.turns) == 1 and traj.turn_end == [full.turn_end[0]]
    assert traj.input_ids == full.input_ids[: full.turn_end[0] + 1]
    assert len(traj.input_ids) <= ctx
    # not even the first prompt fits: kept as prompt only, nothing trained, no generate call
    backend = ScriptedBackend(tok, REPLIES)
    [empty] = run_rollouts(backend, tok, EnvRef(name="sokoban"), [1], 1, rollout, first_prompt + 11, 0)
    assert empty.overflow and empty.turns == [] and sum(empty.loss_mask) == 0 and backend.calls == []
    stats = rollout_stats([traj, empty], seconds=2.0)
    assert stats["episode/truncated"] == 2.0 and stats["perf/rollout_tokens_per_s"] == 11 / 2.0


def test_context_window_keeps_the_last_turns_for_the_sampler_only(tok):
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12, context_window=1)
    backend = ScriptedBackend(tok, REPLIES)
    [traj] = run_rollouts(backend, tok, EnvRef(name="sokoban"), [1], 1, rollout, 4096, 0)
    [full] = run_rollouts(ScriptedBackend(tok, REPLIES), tok, EnvRef(name="sokoban"), [1], 1,
                          RolloutSpec(max_turns=3, max_tokens_per_turn=12), 4096, 0)
    assert traj.input_ids == full.input_ids and traj.loss_mask == full.loss_mask  # trained: full history
    turn3_prompt = tok.decode(backend.calls[2][0])
    # window 1 at turn 3: system + instruction + only turn 3's state; no earlier reply or reward
    assert turn3_prompt.count("<|im_start|>") == 3 and "Turn 3:" in turn3_prompt
    assert "Turn 1:" not in turn3_prompt and "Turn 2:" not in turn3_prompt and "Reward:" not in turn3_prompt
    rollout2 = RolloutSpec(max_turns=3, max_tokens_per_turn=12, context_window=2)
    backend2 = ScriptedBackend(tok, REPLIES)
    run_rollouts(backend2, tok, EnvRef(name="sokoban"), [1], 1, rollout2, 4096, 0)
    text = tok.decode(backend2.calls[2][0])
    # window 2 at turn 3: turn 2 (state + its sampled reply + reward) and turn 3
    assert "Turn 1:" not in text and "Turn 2:" in text and "no tags here<|im_end|>" in text
    assert backend2.calls[2][0][-len(enc(tok, "<think>")):] == enc(tok, "<think>")
    assert "Turn 1:" not in tok.decode(backend.calls[1][0])  # window 1 at turn 2 already drops turn 1


def test_bandit_answer_only_episode_ends_when_the_env_terminates(tok):
    # think off: "<answer>" is pre-filled, so the sampled "Dragon<|im_end|>" (no closing tag)
    # parses as the action Dragon; Bandit terminates after one pull, so max_turns=3 still gives
    # one turn, not truncated; reward is the env's only.
    rollout = RolloutSpec(max_turns=3, max_tokens_per_turn=12, think=False)
    backend = ScriptedBackend(tok, ["Dragon<|im_end|>"])
    [traj] = run_rollouts(backend, tok, EnvRef(name="bandit"), [3], 1, rollout, 4096, 0)
    prompt = tok.decode(backend.calls[0][0])
    assert prompt.endswith("<|im_start|>assistant\n<answer>") and "<answer> [your answer] </answer>" in prompt
    assert "<think>" not in prompt
    assert len(traj.turns) == 1 and len(backend.calls) == 1
    assert not traj.truncated and traj.info["chose_high_ev"] is True
    assert traj.turn_rewards == [traj.turns[0].reward] and traj.turns[0].actions == ["Dragon"]
    assert traj.to_record()["info"]["arm"] == "Dragon"


def test_invalid_action_turn_gets_the_format_penalty(tok):
    # Bandit, think off: "Tiger" parses (format ok) but names no arm, so the env reports an
    # invalid action with reward 0; the turn then gets the format penalty: 0 + (-0.1) = -0.1.
    rollout = RolloutSpec(max_turns=1, max_tokens_per_turn=12, think=False, format_penalty=-0.1)
    [traj] = run_rollouts(ScriptedBackend(tok, ["Tiger<|im_end|>"]), tok, EnvRef(name="bandit"), [3], 1, rollout, 4096, 0)
    assert traj.turns[0].format_ok and traj.turns[0].valid == 0 and traj.turns[0].executed == 1
    assert traj.turn_rewards == [-0.1]
    # Seed 3's risky pull pays 1.0 (tests/test_envs_bandit.py): a valid pull gets no penalty.
    [traj] = run_rollouts(ScriptedBackend(tok, ["Dragon<|im_end|>"]), tok, EnvRef(name="bandit"), [3], 1, rollout, 4096, 0)
    assert traj.turns[0].valid == 1 and traj.turn_rewards == [1.0]


def test_answer_example_first_names_the_envs_first_actions_in_the_format_line(tok):
    # FrozenLake's actions are Left, Down, Right, Up (gymnasium's ids): with 2 actions per turn the
    # example is "Left || Down"; with 1 it is "Left". Nothing else in the prompt changes.
    replies = ["Down<|im_end|>"]
    for per_turn, example in ((2, "Left || Down"), (1, "Left")):
        rollout = RolloutSpec(max_turns=1, max_actions_per_turn=per_turn, max_tokens_per_turn=12, think=False,
                              answer_example="first")
        backend = ScriptedBackend(tok, replies)
        [shown] = run_rollouts(backend, tok, EnvRef(name="frozenlake"), [0], 1, rollout, 4096, 0)
        with_example = tok.decode(backend.calls[0][0])
        assert f"Always output: <answer> {example} </answer> with no extra text." in with_example
        plain = ScriptedBackend(tok, replies)
        [none] = run_rollouts(plain, tok, EnvRef(name="frozenlake"), [0], 1,
                              rollout.model_copy(update={"answer_example": "none"}), 4096, 0)
        assert tok.decode(plain.calls[0][0]) == with_example.replace(f"<answer> {example} </answer>",
                                                                     "<answer> [your answer] </answer>")
        # The state prompt (what the template-collapse metrics score under) is the placeholder
        # prompt token for token; without an example there is none (the prompt is the state).
        assert shown.state_prompt == list(plain.calls[0][0]) != list(backend.calls[0][0])
        assert none.state_prompt is None


def test_copying_the_example_is_recorded_per_turn_and_counted(tok):
    # Sokoban's actions are Up, Down, Left, Right: answer_example first shows "Up || Down" every
    # turn. Turn 1 replies "up ||  Down" (the example, case and spaces aside: a copy), turn 2
    # "Down || Up" (the same names in another order: not a copy); no 2-move walk solves the
    # level, so both turns run. Ratio 1/2. Without an example nothing is recorded or counted.
    from ragen_cli.rollout.driver import copies

    assert copies(["left", "Down"], "Left || Down", "||") and not copies(["Down", "Left"], "Left || Down", "||")
    assert not copies([], "Left", "||") and copies(["Left"], " Left ", "||")
    rollout = RolloutSpec(max_turns=2, max_actions_per_turn=2, max_tokens_per_turn=12, think=False,
                          answer_example="first")
    backend = ScriptedBackend(tok, ["up ||  Down<|im_end|>", "Down || Up<|im_end|>"])
    [traj] = run_rollouts(backend, tok, EnvRef(name="sokoban"), [0], 1, rollout, 4096, 0)
    assert [t.copied_example for t in traj.turns] == [True, False]
    assert traj.turns[0].as_dict()["copied_example"] is True
    assert rollout_stats([traj], 1.0)["episode/example_copy_ratio"] == 0.5
    none = run_rollouts(ScriptedBackend(tok, ["Up<|im_end|>"]), tok, EnvRef(name="sokoban"), [0], 1,
                        rollout.model_copy(update={"answer_example": "none", "max_turns": 1}), 4096, 0)
    assert none[0].turns[0].copied_example is None and "episode/example_copy_ratio" not in rollout_stats(none, 1.0)


def test_answer_example_random_is_drawn_per_initial_state_and_turn(tok):
    # "random": each turn's example is 2 names drawn from Left/Down/Right/Up by a generator seeded
    # with (seed, turn) alone, so it is the same in every copy and every run, and the N copies of
    # a group still share their turn-1 prompt (one generate call with n=N).
    import random

    from ragen_cli.rollout.prompts import answer_example

    rollout = RolloutSpec(max_turns=2, max_actions_per_turn=2, max_tokens_per_turn=12, think=False,
                          answer_example="random")
    actions = ["Left", "Down", "Right", "Up"]
    expected = {(seed, turn): answer_example("random", actions, "||", 2, seed, turn)
                for seed in (0, 1, 2, 3) for turn in (1, 2)}
    # Hand check of the drawing rule: two draws with replacement, from a generator seeded by the
    # text "answer-example:SEED:TURN", joined by " || ".
    rng = random.Random("answer-example:0:1")
    assert expected[0, 1] == " || ".join(rng.choice(actions) for _ in range(2))
    assert len(set(expected.values())) > 1  # not a fixed example
    assert answer_example("first", actions, "||", 2, 0, 1) == "Left || Down"
    assert answer_example("none", actions, "||", 2, 0, 1) is None
    for seed in (0, 1, 2, 3):
        # "Hello" names no action: nothing moves, both turns run, and the 3 copies stay identical.
        backend = ScriptedBackend(tok, ["Hello<|im_end|>"] * 2)
        run_rollouts(backend, tok, EnvRef(name="frozenlake"), [seed], 3, rollout, 4096, 0)
        assert len(backend.calls) == 2 and len(backend.calls[0]) == 1  # turn 1: one prompt, n=3
        turn1 = tok.decode(backend.calls[0][0])
        assert f"Always output: <answer> {expected[seed, 1]} </answer> with no extra text." in turn1
        for prompt in backend.calls[1]:
            turn2 = tok.decode(prompt).rsplit("Turn 2:", 1)[1]
            assert f"Always output: <answer> {expected[seed, 2]} </answer> with no extra text." in turn2


def test_example_groups_fade_linearly_then_stop():
    # ceil(P x (steps - s + 1) / steps) for s <= steps, then 0; None shows it in every group.
    from ragen_cli.rollout.prompts import eval_answer_example, example_groups

    # P=8, steps=10: 8x10/10=8, 8x9/10=7.2->8, 6.4->7, 5.6->6, 4.8->5, 4, 3.2->4, 2.4->3, 1.6->2, 0.8->1
    assert [example_groups(s, 8, 10) for s in range(1, 13)] == [8, 8, 7, 6, 5, 4, 4, 3, 2, 1, 0, 0]
    assert [example_groups(s, 4, 2) for s in (1, 2, 3)] == [4, 2, 0]
    assert example_groups(500, 8, None) == 8
    assert eval_answer_example("random", None) == "random" and eval_answer_example("random", 10) == "none"


def test_only_the_first_shown_groups_see_the_example(tok):
    # shown=1 of 2 groups: group 0's prompts carry the random example, group 1's the placeholder.
    from ragen_cli.rollout.prompts import answer_example

    rollout = RolloutSpec(max_turns=1, max_actions_per_turn=2, max_tokens_per_turn=12, think=False,
                          answer_example="random")
    backend = ScriptedBackend(tok, ["Hello<|im_end|>"])
    run_rollouts(backend, tok, EnvRef(name="frozenlake"), [0, 1], 2, rollout, 4096, 0, shown=1)
    first, second = (tok.decode(p) for p in backend.calls[0])
    example = answer_example("random", ["Left", "Down", "Right", "Up"], "||", 2, 0, 1)
    assert f"Always output: <answer> {example} </answer> with no extra text." in first
    assert "Always output: <answer> [your answer] </answer> with no extra text." in second


def test_validation_shows_the_example_unless_it_fades(tok):
    from ragen_cli.rollout.prompts import answer_example
    from ragen_cli.spec.models import EnvSpec, ModelSpec, RunSpec, TrainEnvSpec, ValSpec
    from ragen_cli.train.validate import run_validation

    rollout = RolloutSpec(max_turns=1, max_actions_per_turn=2, max_tokens_per_turn=12, think=False,
                          answer_example="random")
    spec = RunSpec(name="x", model=ModelSpec(name="tiny-random"), rollout=rollout,
                   env=EnvSpec(train=TrainEnvSpec(name="frozenlake"), val=ValSpec(episodes=1, seed=4)))
    example = answer_example("random", ["Left", "Down", "Right", "Up"], "||", 2, 4, 1)
    for steps, shown in ((None, f"<answer> {example} </answer>"), (10, "<answer> [your answer] </answer>")):
        backend = ScriptedBackend(tok, ["Hello<|im_end|>"])
        faded = spec.model_copy(update={"rollout": rollout.model_copy(update={"answer_example_steps": steps})})
        run_validation(backend, tok, faded)
        assert f"Always output: {shown} with no extra text." in tok.decode(backend.calls[0][0])


def test_answer_example_random_per_rollout_differs_between_a_groups_copies(tok):
    # "random-per-rollout": the generator is also seeded with the copy's index, so the 3 copies of
    # seed 0 get their own examples (3 prompts in the turn-1 call, not one with n=3).
    import random

    from ragen_cli.rollout.prompts import answer_example

    actions = ["Left", "Down", "Right", "Up"]
    rng = random.Random("answer-example:0:2:1")  # seed 0, copy 2, turn 1
    assert answer_example("random-per-rollout", actions, "||", 2, 0, 1, copy=2) == " || ".join(
        rng.choice(actions) for _ in range(2))
    expected = [answer_example("random-per-rollout", actions, "||", 2, 0, 1, copy=c) for c in range(3)]
    assert len(set(expected)) > 1
    rollout = RolloutSpec(max_turns=1, max_actions_per_turn=2, max_tokens_per_turn=12, think=False,
                          answer_example="random-per-rollout")
    backend = ScriptedBackend(tok, ["Hello<|im_end|>"])
    run_rollouts(backend, tok, EnvRef(name="frozenlake"), [0], 3, rollout, 4096, 0)
    assert len(backend.calls[0]) == len(set(expected))
    shown = {tok.decode(p).split("Always output: <answer> ")[1].split(" </answer>")[0] for p in backend.calls[0]}
    assert shown == set(expected)
