"""Trajectory browser: pick a step and a trajectory, read its turns; filter success / failure."""

from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Select, Static

from ragen_cli.tui.format import filter_trajectories, trajectory_markup
from ragen_cli.tui.messages import TrajectoryShown

FILTERS = ("all", "success", "failure")


class TrajectoryBrowser(Horizontal):
    """`loader(step)` returns that step's trajectories; `show_steps(steps)` on every poll."""

    def __init__(self, loader: Callable[[int], list[dict]], **kwargs) -> None:
        super().__init__(**kwargs)
        self.loader = loader
        self.steps: list[int] = []
        self.step: int | None = None
        self.mode = "all"
        self.trajs: list[dict] = []
        self.rows: list[int] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="traj-side"):
            yield Select([], prompt="step", allow_blank=True, id="traj-step")
            yield Select([(f, f) for f in FILTERS], value="all", allow_blank=False, id="traj-filter")
            yield DataTable(id="traj-list", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(classes="traj-detail"):
            yield Static("no trajectories yet", id="traj-text")

    def on_mount(self) -> None:
        self.query_one("#traj-list", DataTable).add_columns("#", "group", "reward", "ok")

    def show_steps(self, steps: list[int]) -> None:
        """New trajectory files: refresh the step list; follow the newest step unless one was picked."""
        if steps == self.steps:
            return
        follow = self.step is None or (self.steps and self.step == self.steps[-1])
        self.steps = list(steps)
        select = self.query_one("#traj-step", Select)
        with self.prevent(Select.Changed):
            select.set_options([(f"step {s}", s) for s in steps])
        target = self.step if not follow and self.step in steps else (steps[-1] if steps else None)
        if target is not None:
            select.value = target
            self.load_step(target)

    def load_step(self, step: int) -> None:
        self.step = step
        self.trajs = self.loader(step)
        self.fill_list()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.query_one("#traj-filter", Select).value = mode
        self.fill_list()

    def fill_list(self) -> None:
        table = self.query_one("#traj-list", DataTable)
        table.clear()
        self.rows = filter_trajectories(self.trajs, self.mode)
        for i in self.rows:
            t = self.trajs[i]
            ok = Text("yes", style="green") if t.get("success") else Text("no", style="red")
            table.add_row(str(i), str(t.get("group", "-")), f"{float(t.get('reward', 0.0)):.3g}", ok)
        if self.rows:
            self.show_trajectory(self.rows[0])
        elif self.step is None:
            self.query_one("#traj-text", Static).update("no trajectories yet")
        else:
            which = "" if self.mode == "all" else f"{self.mode} "
            self.query_one("#traj-text", Static).update(f"no {which}trajectories at step {self.step}")

    def show_trajectory(self, index: int) -> None:
        self.query_one("#traj-text", Static).update(trajectory_markup(self.trajs[index]))
        if self.step is not None:
            self.post_message(TrajectoryShown(self.step, index))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "traj-step" and isinstance(event.value, int) and event.value != self.step:
            self.load_step(event.value)
        elif event.select.id == "traj-filter" and event.value in FILTERS and event.value != self.mode:
            self.mode = str(event.value)
            self.fill_list()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.rows):
            self.show_trajectory(self.rows[event.cursor_row])
