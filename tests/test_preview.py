"""`ragen validate --preview` (rollout/preview.py; issue 73, item 12): before any training, a few
base-model replies per env at the training temperature and what each reward function paid for
each, with the share of groups whose rewards differ."""

from __future__ import annotations

import re
import sys

import pytest
from typer.testing import CliRunner

REWARDS = '''
def parity(prompts, completions, **columns):
    """1.0 when the answer has an even number of characters (whatever the model writes, some do)."""
    return [float(len(c) % 2 == 0) for c in completions]
'''


def test_preview_shows_replies_what_each_reward_paid_and_the_spread(tmp_path, monkeypatch):
    from ragen_cli.cli import app
    from ragen_cli.rollout.preview import spread_share

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["init", "proj", "--template", "dataset"]).exit_code == 0
    (tmp_path / "proj" / "my_rewards.py").write_text(REWARDS, encoding="utf-8")
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)
    monkeypatch.chdir(tmp_path / "proj")
    result = runner.invoke(app, ["validate", "ragen.yaml", "--preview",
                                 "--set", "model.name=tiny-random",
                                 "--set", "env.train.config.rewards=[my_rewards:parity]",
                                 "--set", "env.val.envs=[]"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "preview: tiny-random, 3 initial states x 4 replies per env, temperature 1 (the training temperature)" in out
    block = out[out.index("train: dataset"):]
    seeds = re.findall(r"^  seed (\d+): (.*)$", block, re.M)
    assert [s for s, _ in seeds] == ["10000", "10001", "10002"] and all(q.endswith("Reply with the number only.") for _, q in seeds)
    lines = re.findall(r"^    reward (\S+), parity (\S+): '(.*)'$", block, re.M)
    assert len(lines) == 12
    for reward, paid, reply in lines:  # the reward function's value on the answer the reply holds
        answer = reply.removeprefix("<answer>").split("</answer>")[0].strip()
        assert float(paid) == float(reward) == float(len(answer) % 2 == 0)
    groups = [[float(r) for r, _, _ in lines[i:i + 4]] for i in (0, 4, 8)]
    spread = sum(len(set(g)) > 1 for g in groups)
    assert f"groups with reward spread: {spread} of 3 ({spread_share(groups):.0%})" in block


def test_spread_share_by_hand():
    from ragen_cli.rollout.preview import spread_share

    assert spread_share([[0, 0, 0], [0, 1, 0], [1, 1]]) == pytest.approx(1 / 3) and spread_share([]) == 0.0
