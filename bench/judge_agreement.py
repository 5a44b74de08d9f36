"""How far a judge reward agrees with an exact checker on the same replies (issue 74).

The base policy (SmolLM2-135M-Instruct, the built-in) answers N validation questions of
specs/larger.yaml's task (T = 1, the dataset adapter's prompt, as a run samples them); each reply
is scored by the exact checker (`ragen_cli.envs.rewards:first_number`) and by a judge
(envs/judge.py: the built-in model again, greedy, the rubric below). Reported: the judge's
failure rate (no number in its reply), and among judged replies its agreement with the checker
(judge score >= 0.5 as "correct"), the confusion counts and the judge's mean score on correct
and on wrong replies.

    .venv/bin/python bench/judge_agreement.py --episodes 64 --out /tmp/judge.json
"""

from __future__ import annotations

import argparse
import json
import time

RUBRIC = ("Question: {prompt}\nThe correct answer is {answer}.\nA student answered: {completion}\n"
          "Is the student's answer correct? Give a score from 0 (wrong) to 10 (correct). Score:")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--judge", default="smollm2-135m-instruct")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from ragen_cli.envs.judge import Judge, JudgeConfig
    from ragen_cli.envs.rewards import first_number
    from ragen_cli.models.builtin import resolve_model
    from ragen_cli.models.load import load_causal_lm, load_tokenizer
    from ragen_cli.rollout.driver import run_rollouts
    from ragen_cli.rollout.hf_backend import HFBackend
    from ragen_cli.spec.models import EnvRef, RolloutSpec

    path = resolve_model("smollm2-135m-instruct", "float32")
    tok, model = load_tokenizer(path), load_causal_lm(path, "float32")
    env = EnvRef(name="dataset", config={"path": "specs/data/larger/val.jsonl", "system_prompt": "Compare the two numbers.",
                                         "rewards": ["ragen_cli.envs.rewards:first_number"]})
    rollout = RolloutSpec(max_tokens_per_turn=8, think=False, temperature=1.0)
    start = time.time()
    trajs = run_rollouts(HFBackend(model, tok), tok, env, list(range(123, 123 + args.episodes)), 1, rollout, 1024, 0)
    from ragen_cli.envs.registry import make_env

    reader = make_env("dataset", dict(env.config))  # the row each episode's seed read
    judge = Judge(JudgeConfig(rubric=RUBRIC, model=args.judge, max_tokens=8))
    cases = []
    for t in trajs:
        reader.reset(seed=t.seed)
        row = reader.row
        answer = t.turns[0].actions[0] if t.turns and t.turns[0].actions else ""
        exact = first_number([row["prompt"]], [answer], answer=[row["answer"]])[0]
        [score] = judge([row["prompt"]], [answer], answer=[row["answer"]])
        cases.append({"prompt": row["prompt"], "reply": answer, "exact": exact, "judge": score,
                      "judge_reply": judge.last_reply})
    judged = [c for c in cases if c["judge"] is not None]
    agree = [(c["judge"] >= 0.5) == (c["exact"] == 1.0) for c in judged]
    confusion = {f"exact {int(e)} judge {int(j)}": sum((c["exact"] == 1.0) == e and (c["judge"] >= 0.5) == j
                                                       for c in judged)
                 for e in (True, False) for j in (True, False)}
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    report = {"episodes": len(cases), "exact_correct": sum(c["exact"] == 1.0 for c in cases),
              "judge_failed": len(cases) - len(judged), "agreement": mean(agree),
              "agreement_of_always_wrong": mean([c["exact"] != 1.0 for c in judged]),
              "confusion": confusion,
              "judge_mean_on_correct": mean([c["judge"] for c in judged if c["exact"] == 1.0]),
              "judge_mean_on_wrong": mean([c["judge"] for c in judged if c["exact"] != 1.0]),
              "seconds": time.time() - start, "examples": cases[:5]}
    print(json.dumps({k: v for k, v in report.items() if k != "examples"}, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**report, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
