"""One watched run: header over tabs (charts, events, trajectories); polls its directory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import TabbedContent, TabPane

from ragen_cli.tui.format import alarm_steps, intervention_steps
from ragen_cli.tui.messages import RunUpdated
from ragen_cli.tui.state import RunState
from ragen_cli.tui.widgets.charts import ChartsPanel
from ragen_cli.tui.widgets.events import EventLog
from ragen_cli.tui.widgets.header import RunHeader
from ragen_cli.tui.widgets.trajectories import TrajectoryBrowser


class RunPane(Vertical):
    def __init__(self, state: RunState, **kwargs) -> None:
        super().__init__(classes="run-pane", **kwargs)
        self.state = state
        self._drawn = (-1, 0)

    def compose(self) -> ComposeResult:
        yield RunHeader(classes="run-header")
        with TabbedContent(initial="charts"):
            with TabPane("Charts", id="charts"):
                yield ChartsPanel(classes="charts")
            with TabPane("Events", id="events"):
                yield EventLog(classes="events")
            with TabPane("Trajectories", id="trajectories"):
                yield TrajectoryBrowser(self.state.trajectories, classes="trajectories")

    def on_mount(self) -> None:
        self.poll()

    def poll(self) -> None:
        """Read new data; redraw what changed. The header re-renders every time (clock)."""
        try:
            header, charts = self.query_one(RunHeader), self.query_one(ChartsPanel)
            events, browser = self.query_one(EventLog), self.query_one(TrajectoryBrowser)
        except NoMatches:  # a timer tick while the app shuts down: children already removed
            return
        changed = self.state.poll()
        header.show(self.state)
        if not changed:
            return
        marks = alarm_steps(self.state.verdicts) + intervention_steps(self.state.events)
        if (self.state.version, len(marks)) != self._drawn:
            charts.draw(self.state.history, marks)
            self._drawn = (self.state.version, len(marks))
        events.show(self.state.events)
        browser.show_steps(self.state.traj_steps)
        self.post_message(RunUpdated(self.state))

    def reload(self) -> None:
        """Forget everything read so far and read the directory again."""
        self.state = RunState(self.state.run.path)
        self.query_one(TrajectoryBrowser).loader = self.state.trajectories
        self._drawn = (-1, 0)
        self.poll()

    def show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
