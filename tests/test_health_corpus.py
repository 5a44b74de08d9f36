"""The committed corpus of real runs (data/health_corpus/, read by bench/corpus.py): its labels follow the written rule,
and the detector's summary on it is the one docs/health.md reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "health_corpus.py"


def _bench():
    spec = importlib.util.spec_from_file_location("health_corpus", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _relabelled(name: str):
    """(bench module, corpus folder, committed labels, labels by run name less the corpus prefix)
    of held-out batch `name` of data/health_corpus/, after checking its labels follow the rule."""
    hc = _bench()
    corpus = hc.corpus.folder(name)
    committed = json.loads((corpus / "labels.json").read_text())
    assert [hc.label(corpus / "runs" / lab["run"]) for lab in committed] == committed
    return hc, corpus, committed, {lab["run"].removeprefix(f"{name}-"): lab for lab in committed}


def _named(by: dict, label: str) -> list[str]:
    """The runs (less the corpus prefix) that `_relabelled` labels `label`, sorted."""
    return sorted(k for k, lab in by.items() if lab["label"] == label)


def _onsets(by: dict) -> dict[str, int]:
    """{run less the corpus prefix: labelled onset} of the collapses."""
    return {k: lab["onset"] for k, lab in by.items() if lab["label"] == "collapse"}


def _first_verdicts(hc, corpus, committed, name: str) -> tuple[dict, dict]:
    """({run less the corpus prefix: (first warning, first collapse)} of the learners and
    collapses, the replay's summary) of a held-out corpus at the defaults."""
    rows, summary = hc.evaluate([{**lab, "corpus": str(corpus)} for lab in committed])
    return {r["run"].removeprefix(f"{name}-"): (r["first_warning"], r["first_collapse"]) for r in rows
            if r["label"] in ("learns", "collapse")}, summary


def _verdicts_of(hc, corpus, by, *runs: str) -> list[tuple]:
    """(first warning, first collapse) of the named runs (less the corpus prefix) at the defaults:
    for runs `_first_verdicts` leaves out, such as shortcuts."""
    rows = hc.run_verdicts([{**by[k], "corpus": str(corpus)} for k in runs])
    return [(r["first_warning"], r["first_collapse"]) for r in rows]


def test_labels_follow_the_rule():
    hc = _bench()
    committed = json.loads((hc.CORPUS / "labels.json").read_text())
    assert [hc.label(hc.CORPUS / "runs" / lab["run"]) for lab in committed] == committed
    assert {lab["run"] for lab in committed} == {p.name for p in (hc.CORPUS / "runs").iterdir() if p.is_dir()}


def test_detector_on_the_corpus():
    hc = _bench()
    rows, summary = hc.evaluate(json.loads((hc.CORPUS / "labels.json").read_text()))
    assert summary["false_collapse"] == 0 and summary["caught"] == summary["collapse_runs"] >= 4
    assert summary["learning_runs"] >= 4
    assert all(r["first_warning"] is None for r in rows if r["label"] == "learns")


def test_fresh_corpus_labels_and_a_replay_of_both_corpora_as_one():
    hc = _bench()
    fresh = hc.corpus.folder("fresh")
    committed = json.loads((fresh / "labels.json").read_text())
    assert [hc.label(fresh / "runs" / lab["run"]) for lab in committed] == committed
    both = [{**lab, "corpus": str(c)} for c in (hc.CORPUS, fresh) for lab in json.loads((c / "labels.json").read_text())]
    rows, summary = hc.evaluate(both)
    assert [r["run"] for r in rows] == [lab["run"] for lab in both]  # each read from its own folder
    assert summary["learning_runs"] == sum(lab["label"] == "learns" for lab in both)
    assert summary["collapse_runs"] == sum(lab["label"] == "collapse" for lab in both)


def test_table_has_a_row_per_run_with_its_label(capsys):
    hc = _bench()
    fresh = hc.corpus.folder("fresh")
    assert hc.main(["--corpus", str(fresh), "table"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    labels = json.loads((fresh / "labels.json").read_text())
    assert [r.split(" | ")[0] for r in rows] == [f"| {lab['run']}" for lab in labels]
    assert [r.split(" | ")[1].split(" ")[0] for r in rows] == [lab["label"] for lab in labels]


def test_alone_lists_the_template_only_warnings_the_default_no_longer_gives(capsys):
    """`alone` replays with `mi_alone_peak` 0: on fresh4 and fresh6 it finds seed 23 at step 8 and
    seed 118 at steps 8-11 (peaks 0.121 and 0.122, docs/health.md), seed 111 at 13-14; under the
    defaults (0.2) none of those steps is a warning on the template signal alone."""
    hc = _bench()
    corpora = ["fresh4", "fresh6"]
    assert hc.main(["alone", *(a for c in corpora for a in ("--corpus", str(c)))]) == 0
    lines = capsys.readouterr().out.splitlines()
    found = [(line.split()[0].split("-seed")[1], int(line.split()[3]), line.split()[-1]) for line in lines]
    assert found == [("23", 8, "0.121"), ("111", 13, "0.109"), ("111", 14, "0.109"),
                     ("118", 8, "0.122"), ("118", 9, "0.122"), ("118", 10, "0.122"), ("118", 11, "0.122")]
    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    for batch, run in (("fresh4", "fresh4-bandit-s-bf16-seed23"), ("fresh6", "fresh6-bandit-s-fp32-seed118")):
        t = replay(hc.corpus.run(batch, run), HealthSpec(), collapse_every=hc.default_cadence())
        assert all(v.level == "healthy" for v in t.verdicts)


def test_zeros_lists_the_steps_no_episode_succeeded_after_a_gain(capsys):
    """`zeros` on fresh8 and the tuned corpus: only 16x seed 131, train success 0 from step 20 to
    the end (30) after a gain to a smoothed .66 at step 12; its success before the zeros, at step 19,
    was (.50 + .50 + .23)/3 = .41 (its metrics.jsonl), so 8 groups all fail with chance .59^8 =
    .015 <= .023: wiped_out. None of the tuned corpus's 35 runs has such a step (the Bandit ones
    never gain 0.1 before a zero; seed 4 of `bandit-s-lr175e4` has its zero after a gain of 0.03)."""
    hc = _bench()
    corpora = ["main", "fresh8"]
    assert hc.main(["zeros", *(a for c in corpora for a in ("--corpus", str(c)))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].split()[:2] == ["fresh8-larger16x-fp32-seed131", "collapse"]
    assert lines[0].endswith("zero at steps [20, 21, 22, 23, 24, 25] ...; at the first: wiped_out, chance 0.015")


def test_settled_from():
    hc = _bench()
    acts = [{"step": 1, "actions": ["a", "b"] * 4}, {"step": 2, "actions": ["a"] * 7 + ["b"]},
            {"step": 3, "actions": ["a"] * 6 + ["b"] * 2}, {"step": 4, "actions": ["b"] * 8},
            {"step": 5, "actions": ["b"] * 7 + ["c"]}]
    # 7/8 = 0.875 >= 0.85 settles, 6/8 = 0.75 does not: settled from step 4 (step 3 breaks 2)
    assert hc.settled_from(acts) == 4
    assert hc.settled_from(acts[:3]) is None


def test_separable_at_is_the_first_step_outside_every_learners_range():
    hc = _bench()
    learners = [{"m": {2: 0.1, 3: 0.2}}, {"m": {2: 0.3, 3: 0.4}}, {"m": {2: 0.2, 3: 0.3}, "n": {2: 5.0}}]
    # step 2: 0.25 lies inside [0.1, 0.3]; step 3: 0.45 lies above [0.2, 0.4]
    assert hc.separable_at({"m": {2: 0.25, 3: 0.45}}, learners, 2, 6) == (3, ["m"])
    # a range's ends are inside; "n" has one learner, fewer than min_learners 3, so never counts
    assert hc.separable_at({"m": {2: 0.1, 3: 0.4}, "n": {2: 9.0}}, learners, 2, 6) is None
    assert hc.separable_at({"m": {2: 0.05}}, learners, 2, 6) == (2, ["m"])
    assert hc.separable_at({"m": {2: 0.05}}, learners, 3, 6) is None  # before `first`: not looked at


def test_with_history_by_hand():
    hc = _bench()
    out = hc.with_history({"m": {1: 2.0, 2: 4.0, 4: 1.0}})
    assert out["m"] == {1: 2.0, 2: 4.0, 4: 1.0}
    assert out["m:delta"] == {2: 2.0, 4: -3.0}
    assert out["m:of_first"] == {1: 0.0, 2: 2.0, 4: -1.0}
    assert out["m:of_peak"] == {1: 1.0, 2: 1.0, 4: 0.25}
    assert hc.with_history({"z": {1: 0.0, 2: 0.0}})["z:of_peak"] == {1: 1.0, 2: 1.0}


def test_held_out_envelope_warns_a_run_outside_the_others():
    hc = _bench()
    runs = [{"m": {2: 0.1}}, {"m": {2: 0.2}}, {"m": {2: 0.3}}, {"m": {2: 0.9}}]
    # held out: 0.1 is below [0.2, 0.9], 0.9 above [0.1, 0.3]; 0.2 and 0.3 lie inside the others' range
    assert hc.held_out_envelope(runs, 2, 5) == [(2, ["m"]), None, None, (2, ["m"])]


def test_narrowed_by_hand():
    hc = _bench()
    history = [
        {"step": 1, "actor/entropy": 4.0, "diversity/distinct_2": 0.8, "reward/task_in_group_std": 0.4,
         "diversity/identical_share": 0.0, "collapse/mi_norm": 0.5},
        {"step": 2, "actor/entropy": 2.0, "diversity/distinct_2": 0.4, "reward/task_in_group_std": 0.2,
         "diversity/identical_share": 0.5},
        {"step": 3, "actor/entropy": 1.0, "diversity/distinct_2": 0.2, "reward/task_in_group_std": 0.4,
         "diversity/identical_share": 1.0, "collapse/mi_norm": 0.1},
    ]
    # smoothed over 3: std 0.4, 0.3, 1/3 -> (1/3) / 0.4; entropy 4, 3, 7/3 -> (7/3) / 4; distinct
    # 0.8, 0.6, 1.4/3 -> 7/12; identical (0 + 0.5 + 1) / 3; I(X;Z) 0.5, 0.3 -> 0.6
    got = hc.narrowed(history)
    want = [5 / 6, 7 / 12, 7 / 12, -0.5, 0.6]
    assert all(abs(a - b) < 1e-12 for a, b in zip(got, want)) and len(got) == 5
    assert hc.narrowed(history[:1]) == [1.0, 1.0, 1.0, -0.0, 1.0]  # no history to fall from


def test_twins_counts_learners_of_the_family_at_least_as_narrowed(tmp_path, capsys):
    hc = _bench()
    entropy = {"x-seed1": [4, 3, 2, 1.5, 1.2], "x-seed2": [4, 3, 2, 1, 0.5], "x-seed3": [4] * 5, "y-seed4": [4, 2, 1, 0.5, 0.1]}
    for run, xs in entropy.items():
        (tmp_path / "runs" / run).mkdir(parents=True)
        (tmp_path / "runs" / run / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": i, "actor/entropy": x}) + "\n" for i, x in enumerate([9.0, *xs])))
    labels = [{"run": "x-seed1", "label": "collapse", "onset": 8}, {"run": "x-seed2", "label": "learns"},
              {"run": "x-seed3", "label": "learns"}, {"run": "y-seed4", "label": "learns"}]
    hc.twins([{**lab, "corpus": str(tmp_path)} for lab in labels])
    # step 5 (warm-up 5, onset 8 - 3): the collapse's entropy ratio (1.2 + 1.5 + 2) / 3 / 4; seed 2's
    # is lower (a twin), seed 3's is 1; y-seed4 is another family; step 0 (the base model) is skipped
    assert "2 learners of x; as narrowed at steps 5-5: [1]" in capsys.readouterr().out


def test_warned_by_counts_first_warnings_at_each_step_they_grow():
    hc = _bench()
    # collapses warned at 2, 3, never; learners at 3, 3: by 2 -> (1, 0); by 3 -> (2, 2); 4, 5 unchanged
    assert hc.warned_by([2, 3, None], [3, 3], first=2, last=5) == [(2, (1, 0)), (3, (2, 2))]


def test_summarize_by_hand():
    hc = _bench()
    rows = [  # onset, first warning, first collapse
        {"label": "collapse", "onset": 9, "first_warning": 5, "first_collapse": 10, "v0": 0.0, "best": 0.5},
        {"label": "collapse", "onset": 4, "first_warning": 5, "first_collapse": 7, "v0": 0.0, "best": 0.1},
        {"label": "collapse", "onset": 12, "first_warning": None, "first_collapse": None, "v0": 0.0, "best": 0.0},
        {"label": "learns", "onset": None, "first_warning": 6, "first_collapse": None, "v0": 0.0, "best": 1.0},
        {"label": "learns", "onset": None, "first_warning": None, "first_collapse": None, "v0": 0.0, "best": 1.0},
    ]
    s = hc.summarize(rows, warmup_steps=5)
    # leads 4 and -1 (caught); delays 10-9 = 1 and 7-4 = 3; onset >= 8: leads 4 and unwarned (-99)
    assert (s["caught"], s["median_lead_steps"], s["max_onset_delay"], s["slow_min_lead"]) == (2, 1.5, 3, -99)
    # late onset (onset - 3 >= 5): only the first; best >= v0 + 0.2: only the first collapse
    assert (s["late_onset_runs"], s["learners_warned"], s["false_collapse"], s["gain_then_loss_runs"]) == (1, 1, 0, 1)


def test_moved_thresholds():
    hc = _bench()
    assert hc.moved("std_warn", 1.2) == 0.6 and hc.moved("window", 0.8) == 16
    assert hc.moved("collapse_votes", 1.2) is None  # round(2.4) = 2: unchanged
    assert hc.moved("dead_frac", 1.2) == 1.0 and hc.moved("std_warn", 2.5) == 0.99  # pulled inside le=1 / lt=1


def test_safe_band_is_the_run_of_passing_values_around_the_default():
    hc = _bench()
    # smooth on the held-out corpora: only the default passes
    assert hc.safe_band({2: "-", 3: "c", 4: "-", 5: "-"}, 3) == (3, 3)
    # a band reaching the low end, cut above the default: 0.55 / 0.25 = 2.2 x wide
    marks = {0.25: "c", 0.3: "+", 0.35: "c", 0.4: "c", 0.45: "c", 0.5: "c", 0.55: "c", 0.6: "-", 0.7: "c"}
    assert hc.safe_band(marks, 0.5) == (0.25, 0.55)  # the pass at 0.7 is past a failure: not in it
    assert hc.safe_band({0.9: "-", 1.0: "c"}, 0.9) is None


def test_thinned_keeps_collapse_metrics_on_the_cadence_only():
    from ragen_cli.monitor.replay import thinned

    hist = [{"step": t, "collapse/mi_norm": 0.1 * t, "actor/entropy": 1.0} for t in (1, 2, 3, 4)]
    out = thinned(hist, 2)
    assert [("collapse/mi_norm" in r) for r in out] == [False, True, False, True]
    assert all(r["actor/entropy"] == 1.0 for r in out) and thinned(hist, 1) is hist


def test_gpu_corpus_labels_and_its_gain_then_loss_runs():
    """The GPU batches (data/health_corpus/gpu_runs.txt and gpu_runs_vanilla.txt, made on an H200): labels
    follow the rule; by hand from the validation series, 16x seeds 83 (0.64 -> 0.00 at step 30),
    85 (0.56 -> 0.00 from 10) and 86 (0.69 -> 0.19 at 20, 0.00 from 22) gained at least 0.2 and
    stayed under half of it from the onset; the two vanilla Bandit runs at 2e-5 never passed
    0.03 (none); the other thirteen keep a gain of at least 0.2."""
    hc = _bench()
    gpu = hc.corpus.folder("gpu")
    committed = json.loads((gpu / "labels.json").read_text())
    assert [hc.label(gpu / "runs" / lab["run"]) for lab in committed] == committed
    assert len(committed) == 18 and {lab["run"] for lab in committed} == {p.name for p in (gpu / "runs").iterdir()}
    onsets = {lab["run"]: lab["onset"] for lab in committed if lab["label"] == "collapse"}
    assert onsets == {"gpu-larger16x-seed83": 30, "gpu-larger16x-seed85": 10, "gpu-larger16x-seed86": 20}
    _, summary = hc.evaluate([{**lab, "corpus": str(gpu)} for lab in committed])
    assert summary["gain_then_loss_runs"] == 3 and summary["learning_runs"] == 10
    assert [lab["run"] for lab in committed if lab["label"] == "none"] == [
        "gpu-vanilla-bandit-lr2e5-seed205", "gpu-vanilla-bandit-lr2e5-seed206"]
    # kept a gain but end at or under always-the-first-number (0.5625 on these 64 rows): 0.56
    # needs > 0.5625 + 2 * sqrt(.56 * .44 / 64) = 0.687; 0.42 and 0.55 are under it
    assert {lab["run"]: lab["final"] for lab in committed if lab["label"] == "shortcut"} == {
        "gpu-larger16x-seed84": 0.5625, "gpu-larger4x-seed76": 0.421875, "gpu-vanilla-larger4x-seed204": 0.546875}


def test_beats_shortcut_by_hand():
    hc = _bench()
    # se = sqrt(f (1 - f) / n); learns when f >= min(shortcut + 2 se, 1 - 2 se)
    assert hc.beats_shortcut(0.73, 0.5625, 64)  # se .0555: .5625 + .111 = .673 <= .73
    assert not hc.beats_shortcut(0.67, 0.5625, 64)  # se .0588: .680 > .67
    assert hc.beats_shortcut(0.98, 1.0, 64)  # se .0175: 1 - .035 = .965 <= .98 (the optimum, within noise)
    assert not hc.beats_shortcut(0.90, 1.0, 64)  # se .0375: .925 > .90
    assert hc.beats_shortcut(1.0, 1.0, 64) and not hc.beats_shortcut(0.36, 1.0, 64)


def test_label_with_a_shortcut(tmp_path):
    """A run that gains 0.03 -> 0.60 and keeps it is a learner only above its shortcut."""
    hc = _bench()
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "spec.yaml").write_text("env: {train: {name: dataset}}\n")
    (run / "actions.jsonl").write_text("")

    def labelled(final: float, shortcut: float) -> str:
        vals = [0.03, 0.6, final]
        (run / "metrics.jsonl").write_text("".join(json.dumps({"step": 2 * i, "val/dataset/success": v}) + "\n"
                                                   for i, v in enumerate(vals)))
        (run / "shortcut.json").write_text(json.dumps({"policy": "always_first", "success": shortcut, "episodes": 64}))
        return hc.label(run)["label"]

    assert labelled(0.60, 0.30) == "learns"  # .30 + 2 * sqrt(.6 * .4 / 64) = .42 <= .60
    assert labelled(0.60, 0.5625) == "shortcut"  # .5625 + .122 = .685 > .60
    assert labelled(0.20, 0.30) == "collapse"  # under half the gain (.315): an Echo Trap, shortcut or not


def test_shortcuts_on_the_bandit_and_the_dataset_task():
    """bench/shortcuts.py on the shipped specs. Bandit success is choosing the risky arm (higher
    expected value), whatever it pays: always naming it scores 1, the safe arm 0, a random arm
    about half. The dataset task: each row's larger number is the first or the second, so the
    two fixed picks sum to 1, and the coin flip is 0.5."""
    import sys

    sys.path.insert(0, str(BENCH.parent))
    from base_model import shipped_spec
    from shortcuts import best, scores

    bandit = scores(shipped_spec("bandit"))
    assert bandit["always Dragon"] == 1.0 and bandit["always Phoenix"] == 0.0 and abs(bandit["random"] - 0.5) < 0.05
    assert best(shipped_spec("bandit"))["policy"] == "always Dragon"
    larger = scores(shipped_spec("larger", ["env.val.episodes=64"]))
    assert larger["always_first"] + larger["always_second"] == 1.0 and larger["coin_flip"] == 0.5


def test_a_fixed_sequence_of_guesses_ignores_the_hints():
    """Guess-the-number (the `ragen init` scaffold's env): the sequence 4, 6, 8 wins exactly on
    the seeds whose secret is 4, 6 or 8, whatever the hints say; the best of the 8^3 sequences
    scores at least that."""
    import sys

    sys.path.insert(0, str(BENCH.parent))
    from random_policy import sequence_rate

    found = importlib.util.spec_from_file_location("guess_template_env", BENCH.parents[1] / "templates" / "guess" / "my_env.py")
    guess = importlib.util.module_from_spec(found)  # not as `my_env`: other tests import their own
    sys.modules[found.name] = guess  # dataclasses look their module up
    found.loader.exec_module(guess)
    env = guess.GuessNumberEnv(guess.GuessNumberConfig(high=8, max_actions=3))
    seeds = list(range(123, 187))
    secrets = []
    for s in seeds:
        env.reset(seed=s)
        secrets.append(env._secret)
    assert sequence_rate(env, seeds, ("4", "6", "8")) == sum(x in (4, 6, 8) for x in secrets) / len(seeds)
    assert sequence_rate(env, seeds, ("4", "4", "4")) == secrets.count(4) / len(seeds)


def test_fresh2_corpus_held_out_for_the_shortcut_label_and_the_warmup():
    """The thirteenth session's runs (docs/health.md, "A shortcut in the label"), listed before
    they were made. By hand from the committed copies: 10x Bandit seed 64 names Phoenix in 8 of 8
    saved trajectories from step 3 (template, onset 3) and is called at step 4, inside the 5-step
    warm-up (one step after the onset; the old warm-up held it to step 5); 20x seed 92 settled on
    Phoenix at step 6, broke into noise at step 15 (0 of 8 Phoenix) and settled again from 16 (the
    rule's onset); `larger` seeds 44 and 45 end at 0.4375 and 0.640625, under always-the-first-
    number's 0.5625 + 2 sqrt(f (1 - f) / 64) (0.687 and 0.683): shortcut; 4x seed 78 answers the
    second number (0.4375) from step 4: shortcut."""
    hc = _bench()
    corpus = hc.corpus.folder("fresh2")
    committed = json.loads((corpus / "labels.json").read_text())
    assert [hc.label(corpus / "runs" / lab["run"]) for lab in committed] == committed
    by = {lab["run"].removeprefix("fresh2-"): lab for lab in committed}
    assert (by["bandit-lr2e3-keep1-fp32-seed64"]["label"], by["bandit-lr2e3-keep1-fp32-seed64"]["onset"]) == ("collapse", 3)
    assert (by["bandit-lr4e3-keep1-bf16-seed92"]["label"], by["bandit-lr4e3-keep1-bf16-seed92"]["onset"]) == ("collapse", 16)
    assert {k: lab["final"] for k, lab in by.items() if lab["label"] == "shortcut"} == {
        "larger-bf16-seed44": 0.4375, "larger-bf16-seed45": 0.640625, "larger4x-bf16-seed78": 0.4375}
    rows, summary = hc.evaluate([{**lab, "corpus": str(corpus)} for lab in committed])
    first = {r["run"].removeprefix("fresh2-"): r["first_collapse"] for r in rows}
    assert first["bandit-lr2e3-keep1-fp32-seed64"] == 4
    # StarPO-S bf16 seed 18 names Phoenix in 8 of 8 from step 12 (6 at step 11), warned at 8
    assert (by["bandit-s-bf16-seed18"]["label"], by["bandit-s-bf16-seed18"]["onset"]) == ("collapse", 12)
    assert (first["bandit-s-bf16-seed18"], summary["slow_min_lead"]) == (11, 4)
    assert summary["false_collapse"] == summary["learners_warned"] == 0 and summary["caught"] == summary["collapse_runs"] == 3
    assert summary["learning_runs"] == 4  # seeds 17, 27, 28 (Bandit 1.00) and larger-4x 77 (0.97)


def test_converged_learners_at_solved_one_are_not_called_collapsed():
    """`solved` 1.0 (its +20% setting) on two converged dataset-task learners: `larger` 4x seed 73
    has train success 1.00, 0.88, 0.88 at steps 25-27 with every group one reward (zero_std 1.0),
    smoothed 0.92: not solved at 1.0, but 0.92 >= 1/2, so `no_variance` is no failure and step 27
    is a warning (no_signal beside the narrowing), not the collapse it was before 2026-11-27.
    GPU vanilla 4x seed 203 likewise. The default `solved` 0.9 leaves both healthy throughout."""
    from ragen_cli.monitor.replay import replay
    from ragen_cli.spec.health_spec import HealthSpec

    hc = _bench()
    runs = [hc.corpus.run("fresh", "fresh-larger4x-bf16-seed73"), hc.corpus.run("gpu", "gpu-vanilla-larger4x-seed203")]
    strict = [replay(run, HealthSpec(solved=1.0), collapse_every=hc.default_cadence()) for run in runs]
    for run, t in zip(runs, strict):
        assert t.first_collapse() is None and t.first_warning() is not None
        assert replay(run, HealthSpec(), collapse_every=hc.default_cadence()).first_warning() is None
    assert strict[0].first_warning().step == 27 and strict[0].first_warning().reasons[0].signal == "no_signal"


def test_fresh3_corpus_held_out_for_the_no_variance_change():
    """The fourteenth session's runs (docs/health.md, "The fourteenth session's runs"), listed and
    started before the change to `no_variance` was written. By hand from the committed copies: ten
    learners (StarPO-S Bandit bf16 19, 20, 49 and fp32 29, 30, 39, 59: 0.05 -> 0.98-1.00; `larger`
    4x 79, 80, 90: 0.03 -> 0.92-1.00), none warned; StarPO-S bf16 seed 21 still rising at its last
    validation (0.9375 < 1 - 2 sqrt(0.9375 x 0.0625 / 64) = 0.9395, the ceiling clause): shortcut;
    20x seed 93 names Phoenix (the safe arm) in 8 of 8 saved trajectories at steps 2-4 and from
    step 6 on (3 of 8 at step 5): template collapse, onset 6, called at 8."""
    hc, corpus, committed, by = _relabelled("fresh3")
    assert _named(by, "learns") == [
        "bandit-s-bf16-seed19", "bandit-s-bf16-seed20", "bandit-s-bf16-seed49", "bandit-s-fp32-seed29",
        "bandit-s-fp32-seed30", "bandit-s-fp32-seed39", "bandit-s-fp32-seed59", "larger4x-bf16-seed79",
        "larger4x-bf16-seed80", "larger4x-bf16-seed90"]
    assert (by["bandit-s-bf16-seed21"]["label"], by["bandit-s-bf16-seed21"]["final"]) == ("shortcut", 0.9375)
    assert (by["bandit-lr4e3-keep1-bf16-seed93"]["label"], by["bandit-lr4e3-keep1-bf16-seed93"]["onset"]) == ("collapse", 6)
    rows, summary = hc.evaluate([{**lab, "corpus": str(corpus)} for lab in committed])
    assert {r["run"]: r["first_collapse"] for r in rows if r["label"] == "collapse"} == {"fresh3-bandit-lr4e3-keep1-bf16-seed93": 8}
    assert summary["false_collapse"] == summary["learners_warned"] == 0 and summary["max_onset_delay"] == 2


def test_fresh4_corpus_held_out_with_the_detector_unchanged():
    """The fifteenth session's runs (docs/health.md), listed before they were made, none read
    before the session's last health-rule decision (none changed). By hand from the committed
    copies: six learners (StarPO-S Bandit bf16 22, 23 and fp32 35: 0.05 -> 0.97-1.00; `larger` 4x
    80, 94 and 16x 98: 0.03 -> 0.92-1.00), two of them warned by the detector of that session: bf16
    seed 23 at step 8 (I(X;Z)/H(X) down from 0.12 to 0.05 while its success was 0.06) and 4x seed
    94 at step 24 (its smoothed train success 0.863, just under `solved` less its margin). Since
    the sixteenth session a held gain is progress (`holding`: 0.863 is within its own noise of its
    peak), so seed 94 is not warned (the rule was written with seed 94 in view; the sixteenth
    session's runs test it). Three keep a gain only to the
    shortcut "always the first number" (0.56): 4x 95 and 96, 16x 97. 16x seed 99 gained (0.03 ->
    0.56) and lost it (0.03 at the end): an Echo Trap, onset 18, called at step 7 when its
    train success fell. Since the twenty-first session a template fall alone counts only from a
    peak of `mi_alone_peak` (0.2), so seed 23 (peak 0.12) is no longer warned."""
    hc, corpus, committed, by = _relabelled("fresh4")
    assert _named(by, "learns") == [
        "bandit-s-bf16-seed22", "bandit-s-bf16-seed23", "bandit-s-fp32-seed35", "larger16x-bf16-seed98",
        "larger4x-bf16-seed80", "larger4x-bf16-seed94"]
    assert _named(by, "shortcut") == [
        "larger16x-bf16-seed97", "larger4x-bf16-seed95", "larger4x-bf16-seed96"]
    assert (by["larger16x-bf16-seed99"]["label"], by["larger16x-bf16-seed99"]["onset"]) == ("collapse", 18)
    got, summary = _first_verdicts(hc, corpus, committed, "fresh4")
    assert got == {"bandit-s-bf16-seed22": (None, None), "bandit-s-bf16-seed23": (None, None),
                   "bandit-s-fp32-seed35": (None, None), "larger16x-bf16-seed98": (None, None),
                   "larger4x-bf16-seed80": (None, None), "larger4x-bf16-seed94": (None, None),
                   "larger16x-bf16-seed99": (7, 7)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0 and summary["gain_then_loss_runs"] == 1


def test_fresh5_corpus_held_out_for_the_held_gain_rule():
    """The sixteenth session's runs (docs/health.md), listed with the held-gain rule (`holding`)
    before they were made, none read before the session's last health-rule commit. By hand from the
    committed copies: four learners (StarPO-S Bandit bf16 24 and fp32 36: 0.05 -> 1.00; `larger`
    4x 102 and vanilla StarPO 4x 207: 0.03 -> 0.98), none warned. Three keep a gain only to the
    shortcut "always the first number" (0.56): 4x 100 and 104, 16x 103. Three collapses: StarPO-S
    Bandit bf16 seed 25 settled on the safe arm (onset 27; its success never beat 0.05), warned
    at 14 and called at 23; `larger` 16x seeds 101 (0.03 -> 0.45 -> 0.00, onset 24) and 105 (0.03 ->
    0.61 -> 0.00, onset 22) gained and lost it, called at 8 and 13 when their train success fell."""
    hc, corpus, committed, by = _relabelled("fresh5")
    assert _named(by, "learns") == [
        "bandit-s-bf16-seed24", "bandit-s-fp32-seed36", "larger4x-bf16-seed102", "vanilla-larger4x-bf16-seed207"]
    assert _named(by, "shortcut") == [
        "larger16x-bf16-seed103", "larger4x-bf16-seed100", "larger4x-bf16-seed104"]
    assert _onsets(by) == {
        "bandit-s-bf16-seed25": 27, "larger16x-bf16-seed101": 24, "larger16x-bf16-seed105": 22}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh5")
    assert got == {"bandit-s-bf16-seed24": (None, None), "bandit-s-fp32-seed36": (None, None),
                   "larger4x-bf16-seed102": (None, None), "vanilla-larger4x-bf16-seed207": (None, None),
                   "bandit-s-bf16-seed25": (14, 23), "larger16x-bf16-seed101": (8, 8), "larger16x-bf16-seed105": (13, 13)}
    assert summary["false_collapse"] == summary["learners_warned"] == 0 and summary["gain_then_loss_runs"] == 2


def test_fresh6_corpus_fp32_on_a_cpu_without_avx512():
    """The seventeenth session's runs (docs/health.md), listed before they were made, on a CPU
    with AVX2 and no AVX512 (fp32); 1-4 made by the seventeenth session, 5-10 by the eighteenth
    after its rule change was committed. By hand from the committed copies: StarPO-S Bandit fp32
    seed 111 learned (0.05 -> 1.00) but named the safe arm (Phoenix) in 4-6 of its 8 saved replies
    at steps 8-18 with no gain (train success 0.00-0.04 to step 12), then the risky arm (Dragon)
    from step 20: the detector of those runs called a collapse at step 10 (no gain, I(X;Z)/H(X)
    down from 0.11 to 0.05, entropy and bigrams at 74% and 71% of their peaks), a false collapse;
    since the eighteenth session `no_gain` also needs a narrowing measure at its own limit
    (`NARROWED`), so it is warned from step 9 and never called. Seed 118 too named Phoenix (in 3-6
    of its 8 saved replies at steps 2-16, Dragon in at most 2) with validation 0.00 at steps 4-8,
    then learned (0.77 at 12, 1.00 at 26): warned at 8-11 on `template` alone (I(X;Z)/H(X) from a
    peak of 0.12), not since the twenty-first session (`mi_alone_peak` 0.2). `larger` 16x seed 117
    swung (validation 0.61, 0.17, 0.64, 0.16 at 14, 0.86 at 20, 0.70 at the end, above "always the
    first number" 0.56 + 2 se): at step 14 its smoothed train success was (.30 + .30 + .23)/3 =
    .28 against a peak of .60 (steps 2-4), under half its gain over .02, beside three narrowing
    signals: called a collapse, then learned.
    16x seed 120 held 0.44-0.56 for 18 steps, then lost it (0.23 at 20, 0.00 from 22; train success
    .77 at 19, .35, .34, then 0): a gain-then-loss collapse, onset 20, called at 22 (lead -2).
    `larger` 4x seed 112 and 16x seed 113 keep a gain only to a shortcut's level (0.44 = "always
    the second number", 0.53 < 0.56 "always the first"); 4x seeds 116 and 119 and vanilla StarPO 4x
    seed 114 learned (0.88, 0.98, 0.95 at the end), Bandit seed 115 too (1.00), none warned."""
    hc, corpus, committed, by = _relabelled("fresh6")
    assert _named(by, "learns") == [
        "bandit-s-fp32-seed111", "bandit-s-fp32-seed115", "bandit-s-fp32-seed118", "larger16x-fp32-seed117",
        "larger4x-fp32-seed116", "larger4x-fp32-seed119", "vanilla-larger4x-fp32-seed114"]
    assert _named(by, "shortcut") == [
        "larger16x-fp32-seed113", "larger4x-fp32-seed112"]
    assert _onsets(by) == {"larger16x-fp32-seed120": 20}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh6")
    assert got == {"bandit-s-fp32-seed111": (9, None), "bandit-s-fp32-seed115": (None, None),
                   "bandit-s-fp32-seed118": (None, None), "larger16x-fp32-seed117": (14, 14),
                   "larger4x-fp32-seed116": (None, None), "larger4x-fp32-seed119": (None, None),
                   "vanilla-larger4x-fp32-seed114": (None, None), "larger16x-fp32-seed120": (22, 22)}
    assert summary["false_collapse"] == 1 and summary["learners_warned"] == 2
    assert summary["max_onset_delay"] == 2 and summary["slow_min_lead"] == -2 and summary["gain_then_loss_runs"] == 1


def test_fresh7_corpus_with_the_engine_in_the_trainers_process():
    """The nineteenth session's runs (docs/health.md), listed before they were made, fp32 on a CPU
    without AVX512, the first full-length runs with vLLM in the trainer's process. By hand from the
    committed copies: Bandit seeds 121 and 123 learned (validation 0.05 -> 1.00 by steps 22 and
    20), never warned. `larger` 16x seeds 122 and 124 gained, swung and lost: validation
    0.56 at steps 2-8, 0.17 at 10, 0.48-0.72 at 12-22, then 0.44, 0.30 (26), 0.23, 0.00 (seed
    122); 0.44, 0.16 at 4, 0.44-0.75 at 6-18, 0.88 at 20, 0.73, 0.73, then 0.38 (26), 0.14, 0.08
    (seed 124); both above "always the first number" (0.56) at their best, onset 26. The
    detector called each a collapse on its first dip (train success .62 at step 3 -> .14, .04;
    .75 at 5 -> .26, .02 by step 11), which validation showed too (0.16 at 4, 0.17 at 10), and
    which each run then recovered from: first warning 7 and 6, first collapse 10 and 6, so the
    replay's leads (19, 20) belong to that dip, not to the final fall (called at 28 and 27)."""
    hc, corpus, committed, by = _relabelled("fresh7")
    assert _named(by, "learns") == ["bandit-s-fp32-seed121", "bandit-s-fp32-seed123"]
    assert _onsets(by) == {
        "larger16x-fp32-seed122": 26, "larger16x-fp32-seed124": 26}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh7")
    assert got == {"bandit-s-fp32-seed121": (None, None), "bandit-s-fp32-seed123": (None, None),
                   "larger16x-fp32-seed122": (7, 10), "larger16x-fp32-seed124": (6, 6)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0
    assert summary["gain_then_loss_runs"] == 2 and summary["slow_min_lead"] == 19


def test_fresh8_corpus_held_out_for_the_lone_template_rule():
    """The twenty-first session's runs (docs/health.md), listed with the `mi_alone_peak` rule before
    they were made, fp32 on a CPU without AVX512. By hand from the committed copies: StarPO-S
    Bandit seeds 125, 126 and 130 learned (validation 0.05 -> 0.98-1.00; seed 126 sat at 0.00-0.09
    to step 20 first), never warned. Seed 128, the same spec, named the safe arm (Phoenix) in all 8
    saved replies from step 6 to the end with validation 0.00: a template collapse, onset 6,
    warned at 5 (entropy and bigrams at 67% and 58% of their peaks) and called at 6 with I(X;Z)/H(X)
    down from a peak of 0.08 beside four other narrowing signals: a low-peak fall still counts there.
    `larger` 4x seed 127 and vanilla StarPO 4x seed 129 kept a gain only to "always the first
    number" (0.5625 at every validation from step 6): shortcuts. `larger` 16x seed 131 reached that
    shortcut's level (0.5625 at steps 6-10) and lost it (0.28 at 18, 0.00 from 20): a gain-then-loss
    collapse, onset 18, into garbage replies ("makingioutsoniesm islamicm") with the entropy back at
    95-99% of its first value, so only the in-group std narrowed at steps 20-21: warned at 18, called
    at 22 when I(X;Z)/H(X) joined it (onset + 4, lead 0; target 2 asks within 2 and a lead of 3).
    Since the twenty-second session a step of zeros that the success before it makes improbable
    (`wiped_out`) is a collapse beside one narrowing signal: train success was 0 at step 20 after a
    smoothed .41, 8 groups all failing with chance .015, beside the in-group std: called at 20 (onset + 2).
    Seed 132, the list's run 8 (made in the twenty-second session with 73f3c9b's code), learned the
    reply format (valid arm names from step 13) but not the arm: validation 0.05 -> 0.53 from step 18
    to the end, what a random arm scores (0.50), below "always Dragon" (1.00): a shortcut, unwarned."""
    hc, corpus, committed, by = _relabelled("fresh8")
    assert _named(by, "learns") == [
        "bandit-s-fp32-seed125", "bandit-s-fp32-seed126", "bandit-s-fp32-seed130"]
    assert _named(by, "shortcut") == [
        "bandit-s-fp32-seed132", "larger4x-fp32-seed127", "vanilla-larger4x-fp32-seed129"]
    assert _onsets(by) == {
        "bandit-s-fp32-seed128": 6, "larger16x-fp32-seed131": 18}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh8")
    assert got == {"bandit-s-fp32-seed125": (None, None), "bandit-s-fp32-seed126": (None, None),
                   "bandit-s-fp32-seed130": (None, None), "bandit-s-fp32-seed128": (5, 6),
                   "larger16x-fp32-seed131": (18, 20)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0
    assert summary["max_onset_delay"] == 2 and summary["slow_min_lead"] == 0 and summary["gain_then_loss_runs"] == 1
    assert _verdicts_of(hc, corpus, by, "bandit-s-fp32-seed132") == [(None, None)]


def test_fresh9_corpus_held_out_for_wiped_out():
    """The twenty-second session's runs (docs/health.md), listed before they were made, replayed
    under `wiped_out` (committed before any of them was read), fp32 on a CPU without AVX512. By hand
    from the committed copies: StarPO-S Bandit seeds 135, 137 and 139 learned (validation 0.05 -> 1.00),
    `larger` 4x seeds 134 and 136 too (0.02 -> 1.00, 0.97, above "always the first number", 0.56);
    none warned. Bandit seed 133 ended at 0.86, short of "always Dragon" (1.00) beyond 2 standard
    errors: a shortcut by the label's rule, unwarned. `larger` 16x seed 138 swung (validation 0.56 at
    steps 2-4, 0.05 at 6, 0.55-0.56 at 8-10, 0.00 at 12, 0.31-0.58 at 14-20) and lost it from step 22
    (0.00 to the end): a gain-then-loss collapse, onset 22. Its first collapse call is on the dip
    before step 6's validation (train success .60, .37, .04 at steps 5-7: success_fell at 8), as for
    fresh7 seeds 122 and 124, and it is called a collapse again from step 19 (train success .14)
    without a break to the end, 3 steps before the onset."""
    hc, corpus, committed, by = _relabelled("fresh9")
    assert _named(by, "learns") == [
        "bandit-s-fp32-seed135", "bandit-s-fp32-seed137", "bandit-s-fp32-seed139", "larger4x-fp32-seed134",
        "larger4x-fp32-seed136"]
    assert _named(by, "shortcut") == ["bandit-s-fp32-seed133"]
    assert _onsets(by) == {"larger16x-fp32-seed138": 22}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh9")
    assert got == {"bandit-s-fp32-seed135": (None, None), "bandit-s-fp32-seed137": (None, None),
                   "bandit-s-fp32-seed139": (None, None), "larger4x-fp32-seed134": (None, None), "larger4x-fp32-seed136": (None, None),
                   "larger16x-fp32-seed138": (8, 8)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0 and summary["gain_then_loss_runs"] == 1
    assert _verdicts_of(hc, corpus, by, "bandit-s-fp32-seed133") == [(None, None)]
    from ragen_cli.monitor.replay import replay

    t = replay(corpus / "runs" / "fresh9-larger16x-fp32-seed138", collapse_every=hc.default_cadence())
    assert [s for s, v in zip(t.steps, t.verdicts) if v.level == "collapse"] == [8, 9, *range(19, 31)]


def test_gpu2_corpus_bf16_on_an_h200():
    """The twenty-third session's GPU batch (docs/health.md, data/health_corpus/gpu_runs_gpu2.txt), listed before
    it was made, bf16 on one H200 with the HF rollout backend, 8 runs at once, stopped at a
    deadline. By hand from the committed copies: vanilla StarPO on `larger` seeds 151 and 152
    learned (validation 0.02 -> 1.00), StarPO-S `larger` 4x seeds 153 and 156 too (0.95, 1.00, above
    "always the first number", 0.5625), and Bandit seeds 157 and 158 (0.00 -> 1.00 by steps 20 and
    18); none warned. `larger` 4x seeds 154 and 155 sat at 0.5625 from step 2 to the end: that
    shortcut. Bandit seeds 159, 160, 162, 163 and 164 were stopped by the deadline at 17-22 steps,
    still climbing (validation 0.75, 0.78, 0.83, 0.89, 0.58 at their last): short
    of "always Dragon" (1.00), shortcuts by the label's rule, unwarned. Bandit seed 161 named the safe
    arm (Phoenix) in all 8 saved replies at step 18 ("Phoenix Phoenix Phoenix ..."), 7 of 8 at step
    10, with train success 0.00 from step 9: a template collapse, onset 10, warned at 9 and called
    at 11."""
    hc, corpus, committed, by = _relabelled("gpu2")
    assert _named(by, "learns") == [
        "bandit-s-seed157", "bandit-s-seed158", "larger4x-seed153", "larger4x-seed156",
        "vanilla-larger-seed151", "vanilla-larger-seed152"]
    assert _named(by, "shortcut") == [
        "bandit-s-seed159", "bandit-s-seed160", "bandit-s-seed162", "bandit-s-seed163", "bandit-s-seed164",
        "larger4x-seed154", "larger4x-seed155"]
    assert _onsets(by) == {"bandit-s-seed161": 10}
    got, summary = _first_verdicts(hc, corpus, committed, "gpu2")
    assert got == {"bandit-s-seed157": (None, None), "bandit-s-seed158": (None, None),
                   "larger4x-seed153": (None, None), "larger4x-seed156": (None, None),
                   "vanilla-larger-seed151": (None, None), "vanilla-larger-seed152": (None, None),
                   "bandit-s-seed161": (9, 11)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0
    assert summary["max_onset_delay"] == 1 and summary["slow_min_lead"] == 1
    assert _verdicts_of(hc, corpus, by, "bandit-s-seed159", "bandit-s-seed160", "bandit-s-seed162",
                        "bandit-s-seed163", "bandit-s-seed164") == [(None, None)] * 5


def test_fresh10_corpus_fp32_bandit_after_the_gpu_batch():
    """The twenty-third session's CPU runs (docs/health.md), listed before they were made (run 9,
    seed 173, added before run 8 ended), `make train`'s Bandit spec in fp32 on a CPU without AVX512.
    By hand from the committed copies: seeds 165, 166, 168 and 169 learned (validation 0.05 ->
    1.00), none warned. Seed 170 ended at 0.94 and seed 173 at 0.53 (the reply format learned, the
    arm not: a random arm's 0.50), short of "always Dragon" (1.00): shortcuts; 173's in-group std
    fell to 10% of its peak at step 29, a warning. Seeds 167, 171 and 172 settled on the safe arm
    (Phoenix first in all 8 saved replies at steps 16 and 30; validation at most 0.02 from step 2):
    template collapses with onsets 7, 29 and 12 by the label's rule. 167 is warned at 6 and called
    at 7; 171 is called at 17 (no gain, in-group std and I(X;Z)/H(X) down), long before the
    onset its label takes from the replies' last change; 172 is warned at 13 and called at 14."""
    hc, corpus, committed, by = _relabelled("fresh10")
    assert _named(by, "learns") == [
        "bandit-s-fp32-seed165", "bandit-s-fp32-seed166", "bandit-s-fp32-seed168", "bandit-s-fp32-seed169"]
    assert _named(by, "shortcut") == [
        "bandit-s-fp32-seed170", "bandit-s-fp32-seed173"]
    assert _onsets(by) == {
        "bandit-s-fp32-seed167": 7, "bandit-s-fp32-seed171": 29, "bandit-s-fp32-seed172": 12}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh10")
    assert got == {"bandit-s-fp32-seed165": (None, None), "bandit-s-fp32-seed166": (None, None),
                   "bandit-s-fp32-seed168": (None, None), "bandit-s-fp32-seed169": (None, None),
                   "bandit-s-fp32-seed167": (6, 7), "bandit-s-fp32-seed171": (17, 17), "bandit-s-fp32-seed172": (13, 14)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0
    assert summary["max_onset_delay"] == 2 and summary["slow_min_lead"] == -1
    assert _verdicts_of(hc, corpus, by, "bandit-s-fp32-seed170", "bandit-s-fp32-seed173") == [(None, None), (29, None)]


def test_fresh11_corpus_fp32_bandit_and_the_dataset_task():
    """The twenty-fourth session's runs (docs/health.md), listed before they were made, fp32 on a
    CPU without AVX512, the detector unchanged. By hand from the committed copies: Bandit seeds
    176, 178 and 181 learned (validation 0.05 -> 1.00; Dragon, and not Phoenix, in all 8 saved
    replies at step 30), none warned; `larger` 4x seed 175 learned (0.02 -> 0.98, ending at 0.86 as its replies
    narrowed to 95% identical with in-group std 0), warned at step 25 (in-group std at 8% of its
    peak, entropy at 10%) and never called a collapse. Bandit seed 174 settled on the safe arm
    (Phoenix in all 8 saved replies at steps 16 and 30): a template collapse, onset 7, warned at 5
    and called at 8. Shortcuts: Bandit 179 learned the format but not the arm (0.53; both arms in
    its replies at step 30), warned at 27 (in-group std); `larger` 4x 177 answers the first number
    in all 8 saved replies at step 30 (0.56, "always the first number" exactly) and 180 the second
    (0.44, "always the second"), both called a collapse (12 and 7) with no reward spread left."""
    hc, corpus, committed, by = _relabelled("fresh11")
    assert _named(by, "learns") == [
        "bandit-s-fp32-seed176", "bandit-s-fp32-seed178", "bandit-s-fp32-seed181", "larger4x-fp32-seed175"]
    assert _named(by, "shortcut") == [
        "bandit-s-fp32-seed179", "larger4x-fp32-seed177", "larger4x-fp32-seed180"]
    assert _onsets(by) == {"bandit-s-fp32-seed174": 7}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh11")
    assert got == {"bandit-s-fp32-seed176": (None, None), "bandit-s-fp32-seed178": (None, None),
                   "bandit-s-fp32-seed181": (None, None), "larger4x-fp32-seed175": (25, None),
                   "bandit-s-fp32-seed174": (5, 8)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 1
    assert summary["caught"] == summary["collapse_runs"] == 1 and summary["max_onset_delay"] == 1
    assert _verdicts_of(hc, corpus, by, "bandit-s-fp32-seed179", "larger4x-fp32-seed177", "larger4x-fp32-seed180") == [
        (27, None), (9, 12), (7, 7)]


def test_fresh12_corpus_bf16_on_a_native_bf16_cpu():
    """The twenty-fifth session's runs (docs/health.md), listed before they were made, `precision:
    auto` on a CPU with AVX512-BF16 (so bf16), the detector unchanged. By hand from the committed
    copies: Bandit seeds 184, 187 and 191 learned (validation 0.05 -> 1.00, 0.95 and 1.00; Dragon
    in 7, 5 and 8 of the 8 saved replies at step 30, the rest of 187's naming Dragon in a
    sentence), `larger` 4x seeds 183, 189 and 194 learned (0.03 -> 0.91, 0.98 and 1.00) and so did
    vanilla StarPO on the dataset task, seeds 190 and 192 (0.03 -> 1.00 and 0.98): none warned.
    Five Bandit runs settled on the safe arm (Phoenix in all 8 saved replies at step 30; validation
    never above its 0.05 start): onsets 8, 6, 21, 12 and 15 for seeds 182, 185, 188, 193 and 195,
    warned at 8, 7, 12, 8 and 12 (joint narrowing) and called at 9, 8, 19, 10 and 16. `larger` 4x
    seed 186 ends at 0.56, "always the first number" exactly: a shortcut, called a collapse at 11
    with no reward spread left."""
    hc, corpus, committed, by = _relabelled("fresh12")
    assert _named(by, "learns") == [
        "bandit-s-bf16-seed184", "bandit-s-bf16-seed187", "bandit-s-bf16-seed191", "larger4x-bf16-seed183",
        "larger4x-bf16-seed189", "larger4x-bf16-seed194", "vanilla-larger-bf16-seed190", "vanilla-larger-bf16-seed192"]
    assert _named(by, "shortcut") == ["larger4x-bf16-seed186"]
    assert _onsets(by) == {"bandit-s-bf16-seed182": 8, "bandit-s-bf16-seed185": 6, "bandit-s-bf16-seed188": 21,
                           "bandit-s-bf16-seed193": 12, "bandit-s-bf16-seed195": 15}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh12")
    assert {k: v for k, v in got.items() if by[k]["label"] == "learns"} == dict.fromkeys(_named(by, "learns"), (None, None))
    assert {k: v for k, v in got.items() if by[k]["label"] == "collapse"} == {
        "bandit-s-bf16-seed182": (8, 9), "bandit-s-bf16-seed185": (7, 8), "bandit-s-bf16-seed188": (12, 19),
        "bandit-s-bf16-seed193": (8, 10), "bandit-s-bf16-seed195": (12, 16)}
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0
    assert summary["caught"] == summary["collapse_runs"] == 5 and summary["max_onset_delay"] == 2
    assert summary["slow_min_lead"] == 0  # seed 182: onset 8, first warned at 8
    assert _verdicts_of(hc, corpus, by, "larger4x-bf16-seed186") == [(11, 11)]


def test_fresh13_corpus_bf16_on_a_native_bf16_cpu_after_the_lead_bound():
    """The twenty-sixth session's runs (docs/health.md), listed before they were made, bf16 on a
    CPU with AVX512-BF16, the detector unchanged. By hand from the committed copies: Bandit seeds
    202 and 205 learned (validation 0.05 -> 1.00; Dragon in 7 and 8 of the 8 saved replies at step
    30), `larger` 4x seed 197 (0.03 -> 0.95) and vanilla StarPO on the dataset task, seed 204
    (0.03 -> 0.97): none warned. Bandit seed 206 settled on the safe arm (Phoenix in all 8 saved
    replies at every step from 11, 6 at step 10; validation never above its 0.05 start): onset 11, warned at 8 (template
    and joint narrowing), called at 9, a lead of 3. Five Bandit runs stopped short of the fixed
    move's 1.00 (0.91, 0.53, 0.52 after 0.81, 0.84, 0.53: shortcuts by the rule) and three `larger`
    4x runs end at 0.56, "always the first number" exactly, called a collapse at 9-12 with no
    reward spread left."""
    hc, corpus, committed, by = _relabelled("fresh13")
    assert _named(by, "learns") == ["bandit-s-bf16-seed202", "bandit-s-bf16-seed205", "larger4x-bf16-seed197",
                                    "vanilla-larger-bf16-seed204"]
    assert _named(by, "shortcut") == [
        "bandit-s-bf16-seed196", "bandit-s-bf16-seed198", "bandit-s-bf16-seed199", "bandit-s-bf16-seed201",
        "bandit-s-bf16-seed208", "larger4x-bf16-seed200", "larger4x-bf16-seed203", "larger4x-bf16-seed207"]
    assert _onsets(by) == {"bandit-s-bf16-seed206": 11}
    got, summary = _first_verdicts(hc, corpus, committed, "fresh13")
    assert {k: v for k, v in got.items() if by[k]["label"] == "learns"} == dict.fromkeys(_named(by, "learns"), (None, None))
    assert got["bandit-s-bf16-seed206"] == (8, 9)
    assert summary["false_collapse"] == 0 and summary["learners_warned"] == 0 and summary["slow_min_lead"] == 3
    assert _verdicts_of(hc, corpus, by, "larger4x-bf16-seed200", "larger4x-bf16-seed203", "larger4x-bf16-seed207",
                        "bandit-s-bf16-seed199", "bandit-s-bf16-seed208") == [(9, 9), (12, 12), (10, 10), (27, None), (25, None)]
