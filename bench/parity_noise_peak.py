"""How two kernels' log-prob disagreement on a token depends on how likely the token is
(rollout/parity.py, "off" check). A logit error eps moves log p_t by eps_t - sum_j p_j eps_j =
(1 - p_t) eps_t - sum_{j != t} p_j eps_j, at most 2 (1 - p_t) max|eps|: a token the model is
sure of (p_t near 1) barely moves, an unlikely one moves by the logit error itself. So the probe's
noise, measured before an update on tokens the old policy liked, understates the noise after an
update that made them unlikely.

    .venv/bin/python bench/parity_noise_peak.py            # SmolLM2-135M, seconds

Scores the same chat rows (prompts from the shipped envs' kinds of question, each with a
reply that the model finds likely in places and unlikely in others) with the model in fp32 and
in bf16 (transformers, this CPU), and prints, per bin of 1 - p (p from fp32), the number of
reply tokens, the rms of 1 - p, and the rms log-prob gap between the two: if the gap follows
1 - p, the ratio gap / rms(1 - p) is about constant across the bins where p is large.
"""

from __future__ import annotations

import argparse
import json
import math

import torch

from ragen_cli.models.builtin import resolve_model

ROWS = [
    ("Which number is larger: 24 or 42? Reply with that number only.", "<answer>42</answer>"),
    ("Which number is larger: 83 or 21? Reply with that number only.", "<answer>21</answer> is larger."),
    ("You are at a slot machine with two arms, Phoenix and Dragon. Which arm do you pull?",
     "<answer>Dragon</answer> because dragons are lucky and strong."),
    ("Name a colour and a fruit.", "Blue and banana. Purple giraffe sandwich."),
    ("Write one sentence about the sea.", "The sea is vast, deep and full of life under its waves."),
    ("What is 7 times 8?", "7 times 8 is 56. Or maybe 65, I am a teapot."),
    ("List three animals.", "1. Dog\n2. Cat\n3. Elephant"),
    ("Say hello in French.", "Bonjour! Hola, ciao, guten Tag."),
    ("Count from 1 to 20.", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20"),
    ("List the days of the week.", "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday"),
    ("Recite the alphabet.", "A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z"),
    ("List the months of the year.", "January, February, March, April, May, June, July, August, September, "
     "October, November, December"),
]
BINS = [0.0, 1e-4, 1e-3, 1e-2, 0.1, 0.5, 1.0]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model("smollm2-135m-instruct", "float32")
    tok = AutoTokenizer.from_pretrained(path)
    f32 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    b16 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    one_minus_p, gaps = [], []
    for prompt, reply in ROWS:
        ids = list(tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                           tokenize=True, return_dict=True)["input_ids"])
        full = torch.tensor([ids + tok.encode(reply, add_special_tokens=False)])
        n = len(ids)
        with torch.no_grad():
            lp32 = torch.log_softmax(f32(full).logits.float(), -1)[0, n - 1:-1]
            lp16 = torch.log_softmax(b16(full).logits.float(), -1)[0, n - 1:-1]
        target = full[0, n:].unsqueeze(-1)
        a, b = lp32.gather(-1, target).squeeze(-1), lp16.gather(-1, target).squeeze(-1)
        one_minus_p += (1 - a.exp()).tolist()
        gaps += (a - b).tolist()
    rows = []
    for lo, hi in zip(BINS, BINS[1:]):
        sel = [(q, g) for q, g in zip(one_minus_p, gaps) if lo <= q < hi or (hi == 1.0 and q == 1.0)]
        if not sel:
            continue
        rq = math.sqrt(sum(q * q for q, _ in sel) / len(sel))
        rg = math.sqrt(sum(g * g for _, g in sel) / len(sel))
        rows.append({"one_minus_p": [lo, hi], "tokens": len(sel), "rms_one_minus_p": rq, "rms_gap": rg,
                     "gap_per_one_minus_p": rg / rq if rq > 0 else None})
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
