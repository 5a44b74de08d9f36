"""What every policy that does not compare the numbers scores on the `larger` task's validation
episodes (specs/larger.yaml): the same rows `ragen eval --spec specs/larger.yaml` and the run's
validation read (seeds val.seed .. val.seed + episodes - 1, through the dataset adapter's row
order), scored by the task's own reward function.

    .venv/bin/python bench/larger_shortcuts.py [--spec specs/larger.yaml]

Shortcuts: always the first number, always the second, the training set's most common answer
(majority), and a coin flip between the two (its expectation). The prompt shows no answer
example (rollout.answer_example: none), so there is no example to copy; the prompt is the state
itself, so "reading text the prompt derives from the state" is the task. One JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys


def scores(spec) -> dict:
    """What each shortcut scores on the validation rows of `spec` (a RunSpec), with the rows'
    count and seeds, the majority answer, and the best of them (`best_shortcut`)."""
    from ragen_cli.envs.adapters.dataset_env import load_function, load_rows
    from ragen_cli.envs.registry import make_env

    [val] = spec.env.val.envs
    seeds = range(spec.env.val.seed, spec.env.val.seed + spec.env.val.episodes)
    env = make_env(val.name, dict(val.config))
    rows = []
    for s in seeds:
        env.reset(seed=s)
        rows.append(env.row)
    [reward_name] = val.config["rewards"]
    reward = load_function(reward_name)
    train = load_rows(spec.env.train.config["path"])
    majority = collections.Counter(r["answer"] for r in train).most_common(1)[0][0]

    def score(pick) -> float:
        return sum(reward([r["prompt"]], [pick(r)], answer=[r["answer"]])[0] for r in rows) / len(rows)

    out = {"episodes": len(rows), "seeds": f"{seeds.start}..{seeds.stop - 1}",
           "always_first": score(lambda r: r["first"]), "always_second": score(lambda r: r["second"]),
           "majority_answer": score(lambda r: majority), "majority_value": majority, "coin_flip": 0.5,
           "best_shortcut": None}
    out["best_shortcut"] = max(out["always_first"], out["always_second"], out["majority_answer"], 0.5)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="specs/larger.yaml")
    args = ap.parse_args(argv)
    from ragen_cli.spec.loader import load_spec

    print(json.dumps(scores(load_spec(args.spec))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
