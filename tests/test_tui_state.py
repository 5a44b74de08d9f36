"""RunState: incremental polling of a run directory that appears and grows."""

from ragen_cli.monitor.rundir import RunDir
from ragen_cli.tui.state import RunState, spec_info

SPEC = "name: live\nenv: {train: {name: bandit}}\ntrain: {steps: 30}\nmonitor: {health: {window: 5, warmup_steps: 3}}\n"


def test_spec_info_reads_name_total_and_health():
    info = spec_info(SPEC, None, "dir-name")
    assert (info.name, info.total_steps, info.health.window, info.health.warmup_steps) == ("live", 30, 5, 3)
    assert "env bandit" in info.description
    bad = spec_info("name: x\nmonitor: {health: {window: 1}}\n", {"steps": 7}, "d")
    assert bad.total_steps == 7 and bad.health.window == 20 and "monitor.health ignored" in bad.note
    assert spec_info("::: not yaml [", None, "d").name == "d"


def test_poll_waits_for_directory_then_follows_appends(tmp_path):
    state = RunState(tmp_path / "live")
    assert state.poll() is False and not state.exists
    run = RunDir(tmp_path / "live")
    run.create(SPEC, {})
    assert state.poll() is True and state.info.total_steps == 30
    for t in range(4):
        run.write_metrics(t, {"actor/entropy": 1.0})
    with open(run.metrics_path, "a") as f:
        f.write('{"step": 4, "actor/entro')
    assert state.poll() is True
    assert [r["step"] for r in state.history] == [0, 1, 2, 3] and state.poll() is False
    with open(run.metrics_path, "a") as f:
        f.write('py": 0.1}\n')
    # step 4: entropy 0.1; smooth 3: s4 = (1 + 1 + 0.1) / 3 = 0.7 -> 70% of the peak 1.0: healthy
    assert state.poll() is True and state.verdict.level == "healthy"
    run.write_metrics(5, {"actor/entropy": 0.1})
    run.write_metrics(6, {"actor/entropy": 0.1})
    # s5 = (1 + .1 + .1) / 3 = .4 <= entropy_warn 50% of the peak 1.0: warning at step 5, and at
    # 6; no outcome metric, so no failure to make it a collapse
    state.poll()
    assert [v.level for v in state.verdicts][-3:] == ["healthy", "warning", "warning"]
    run.write_event("checkpoint", 6, path="x")
    run.write_trajectories(6, [{"group": 0}])
    assert state.poll() is True and state.events[-1]["kind"] == "checkpoint" and state.traj_steps == [6]


def test_repeated_step_after_resume_replaces_record(tmp_path):
    run = RunDir(tmp_path / "r")
    run.create(SPEC, {})
    for t in range(3):
        run.write_metrics(t, {"reward/mean": float(t)})
    state = RunState(run.path)
    state.poll()
    version = state.version
    run.write_metrics(2, {"reward/mean": 9.0})
    assert state.poll() is True and state.version == version + 1
    assert [(r["step"], r["reward/mean"]) for r in state.history] == [(0, 0.0), (1, 1.0), (2, 9.0)]
    assert len(state.verdicts) == 3
