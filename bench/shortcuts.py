"""The best validation success a policy that does not learn gets on a run's own validation
episodes: the level a run must clear before the health corpus calls it a learner
(docs/health.md, "The labelling rule"). One JSON line per spec.

    .venv/bin/python bench/shortcuts.py SPEC.yaml [...]   # a custom env's spec from its project folder

The policies, on the validation env and seeds the run's `val/<env>/success` reads:
- the dataset task with two numbers (`specs/larger.yaml`): always the first number, always the
  second, the training set's most common answer, a coin flip (bench/larger_shortcuts.py);
- any other env: uniform random moves (100 draws per seed), every fixed action (the same action
  every move), the best fixed sequence of moves where there are at most MAX_SEQUENCES of them
  (chosen on these very seeds: an optimistic shortcut, never below what a fixed sequence chosen
  elsewhere scores), copying the answer example the prompt shows (when it shows one), and reading the
  env's `move_hint` sentence (when the run's prompt shows it) (bench/random_policy.py), each given
  `max_turns x max_actions_per_turn` moves.
"""

from __future__ import annotations

import itertools
import json
import sys


MAX_SEQUENCES = 4096  # fixed move sequences tried one by one (Guess-the-number: 8^3 = 512)


def scores(spec) -> dict[str, float]:
    """{policy: validation success} for every non-learning policy above on `spec` (a RunSpec)."""
    from ragen_cli.envs.registry import make_env

    val = spec.env.val.envs[0] if spec.env.val.envs else spec.env.train
    if val.name == "dataset":
        from larger_shortcuts import scores as dataset_scores

        out = dataset_scores(spec)
        return {k: out[k] for k in ("always_first", "always_second", "majority_answer", "coin_flip")}
    from random_policy import copy_example_rate, fixed_action_rate, reads_words_rate, sequence_rate, success_rate

    env = make_env(val.name, dict(val.config))
    seeds = list(range(spec.env.val.seed, spec.env.val.seed + spec.env.val.episodes))
    moves = spec.rollout.max_turns * spec.rollout.max_actions_per_turn
    env.reset(seed=seeds[0])
    actions = env.valid_actions()
    out = {"random": success_rate(env, seeds, moves, draws=100)}
    for action in actions:
        out[f"always {action}"] = fixed_action_rate(env, seeds, action, moves)
    if 1 < moves and len(actions) ** moves <= MAX_SEQUENCES:
        rate, seq = max(((sequence_rate(env, seeds, q), q) for q in itertools.product(actions, repeat=moves)),
                        key=lambda rq: rq[0])  # the first best, in product order
        out[f"the sequence {' '.join(seq)}"] = rate
    if spec.rollout.answer_example != "none":
        out["copy the example"] = copy_example_rate(env, seeds, spec.rollout, spec.rollout.answer_example)
    if getattr(env.config, "move_hint", False):  # only where the prompt shows the sentence
        out["read move_hint"] = reads_words_rate(val.name, dict(val.config), seeds, spec.rollout)
    return out


def best(spec) -> dict:
    """The best of `scores`: {"policy", "success", "episodes", "scores"}."""
    got = {k: round(v, 4) for k, v in scores(spec).items()}
    name = max(got, key=lambda k: got[k])
    return {"policy": name, "success": got[name], "episodes": spec.env.val.episodes, "scores": got}


def main(argv: list[str] | None = None) -> int:
    from ragen_cli.spec.loader import load_spec

    for path in argv if argv is not None else sys.argv[1:]:
        print(json.dumps({"spec": path, **best(load_spec(path))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
