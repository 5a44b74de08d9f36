"""Intervention policy: pure decisions for each health.action."""

from ragen_cli.monitor.health import Reason, Verdict
from ragen_cli.monitor.intervene import InterventionState, decide
from ragen_cli.spec.health_spec import HealthSpec

COLLAPSE = Verdict("collapse", [Reason("entropy", 0.1, 0.2, "entropy fell", "collapse")], 30)
WARNING = Verdict("warning", [], 30)


def test_warn_and_below_threshold_continue():
    st = InterventionState(step=30, keep_ratio=0.25)
    assert decide(COLLAPSE, HealthSpec(action="warn"), st).action == "continue"
    assert decide(WARNING, HealthSpec(action="stop"), st).action == "continue"  # act_on collapse
    assert decide(WARNING, HealthSpec(action="stop", act_on="warning"), st).action == "stop"


def test_stop_saves_checkpoint():
    d = decide(COLLAPSE, HealthSpec(action="stop"), InterventionState(step=30, keep_ratio=0.25))
    assert d.action == "stop" and d.save_checkpoint


def test_intervene_changes_filter_lr_and_rolls_back():
    cfg = HealthSpec(action="intervene")
    st = InterventionState(step=30, keep_ratio=0.25, healthy_checkpoints=(10, 20, 30))
    d = decide(COLLAPSE, cfg, st)
    # keep 0.25 x 0.5 = 0.125; lr x 0.5; newest healthy checkpoint before step 30 is 20.
    assert (d.action, d.keep_ratio, d.lr_scale, d.rollback_to) == ("intervene", 0.125, 0.5, 20)
    assert d.changes == {"keep_ratio": [0.25, 0.125], "lr_scale": 0.5, "rollback_to": 20}
    assert d.to_event()["action"] == "intervene"


def test_keep_ratio_floor_cooldown_and_budget():
    cfg = HealthSpec(action="intervene", lr_factor=1.0, rollback=False)
    # 0.06 x 0.5 = 0.03 -> floored at 0.05
    assert decide(COLLAPSE, cfg, InterventionState(step=30, keep_ratio=0.06)).keep_ratio == 0.05
    # Already at the floor, lr and rollback off: nothing to change -> stop.
    assert decide(COLLAPSE, cfg, InterventionState(step=30, keep_ratio=0.05)).action == "stop"
    full = HealthSpec(action="intervene")
    # cooldown 10: intervention at 25, now 30 -> 5 < 10 -> continue
    st = InterventionState(step=30, keep_ratio=0.25, interventions=1, last_intervention_step=25)
    assert decide(COLLAPSE, full, st).action == "continue"
    st = InterventionState(step=35, keep_ratio=0.25, interventions=1, last_intervention_step=25)
    assert decide(COLLAPSE, full, st).action == "intervene"
    st = InterventionState(step=50, keep_ratio=0.25, interventions=3, last_intervention_step=25)
    assert decide(COLLAPSE, full, st).action == "stop"


def test_no_signal_collapse_stops_whatever_the_action():
    empty = Verdict("collapse", [Reason("no_signal", 5.0, 3.0, "every group ...", "collapse")], 5)
    for action in ("warn", "stop", "intervene"):
        d = decide(empty, HealthSpec(action=action, empty_stop_steps=5), InterventionState(step=5, keep_ratio=0.25))
        assert d.action == "stop" and d.save_checkpoint and "empty_stop_steps" in d.message
    # a no_signal warning (before empty_stop_steps) is only logged
    warn = Verdict("warning", [Reason("no_signal", 3.0, 3.0, "every group ...")], 3)
    assert decide(warn, HealthSpec(action="stop"), InterventionState(step=3, keep_ratio=0.25)).action == "continue"


def test_a_filter_without_a_kept_fraction_is_not_lowered():
    # strategy top_p / min_p / top_k_abs: the runtime passes keep_ratio None; the intervention
    # then lowers only the learning rate (lr_factor 0.5) and never invents a keep_ratio change
    from ragen_cli.monitor.intervene import InterventionState, decide
    from ragen_cli.spec.health_spec import HealthSpec

    cfg = HealthSpec(action="intervene", lr_factor=0.5, rollback=False)
    d = decide(COLLAPSE, cfg, InterventionState(step=6, keep_ratio=None))
    assert d.action == "intervene" and d.keep_ratio is None and d.changes == {"lr_scale": 0.5}
