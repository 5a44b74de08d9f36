"""`ragen watch`: a live view of one or more run directories (Textual).

Each run directory gets a column (a `RunPane`); every `interval` seconds a Textual timer polls
each pane's directory for appended metrics / events and new trajectory files (no sleeping).
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer

from ragen_cli.tui.messages import RunUpdated
from ragen_cli.tui.state import RunState
from ragen_cli.tui.widgets.help import HelpScreen
from ragen_cli.tui.widgets.run_pane import RunPane
from ragen_cli.tui.widgets.trajectories import FILTERS, TrajectoryBrowser


class WatchApp(App[None]):
    CSS_PATH = "watch.tcss"
    TITLE = "ragen watch"
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("1", "tab('charts')", "charts"),
        Binding("2", "tab('events')", "events"),
        Binding("3", "tab('trajectories')", "trajectories"),
        Binding("f", "cycle_filter", "filter"),
        Binding("r", "reload", "reload"),
    ]

    def __init__(self, run_dirs: list[Path], interval: float = 0.5) -> None:
        super().__init__()
        if not run_dirs:
            raise ValueError("WatchApp needs at least one run directory")
        self.run_dirs = [Path(p) for p in run_dirs]
        self.interval = interval

    def compose(self) -> ComposeResult:
        with Horizontal(id="runs"):
            for i, path in enumerate(self.run_dirs):
                yield RunPane(RunState(path), id=f"run-{i}")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = ", ".join(p.name for p in self.run_dirs)
        self.set_interval(self.interval, self.poll_runs)

    def poll_runs(self) -> None:
        for pane in self.query(RunPane):
            pane.poll()

    def on_run_updated(self, message: RunUpdated) -> None:
        levels = [v.level for pane in self.query(RunPane) if (v := pane.state.verdict)]
        worst = "collapse" if "collapse" in levels else "warning" if "warning" in levels else "healthy"
        self.title = f"ragen watch [{worst}]"

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_tab(self, tab: str) -> None:
        for pane in self.query(RunPane):
            pane.show_tab(tab)

    def action_cycle_filter(self) -> None:
        for browser in self.query(TrajectoryBrowser):
            browser.set_mode(FILTERS[(FILTERS.index(browser.mode) + 1) % len(FILTERS)])

    def action_reload(self) -> None:
        for pane in self.query(RunPane):
            pane.reload()
