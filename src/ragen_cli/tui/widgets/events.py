"""Event log: start, health changes, interventions, checkpoints, validation, end."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import DataTable

from ragen_cli.tui.format import event_row

KIND_STYLE = {"health": "bold yellow", "intervention": "bold magenta", "error": "bold red", "end": "bold green"}


class EventLog(DataTable):
    """Appends rows for events it has not shown yet; starts over when the log was cut."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns("step", "time", "kind", "detail")
        self._shown = 0

    def show(self, events: list[dict]) -> None:
        if len(events) < self._shown:
            self.clear()
            self._shown = 0
        for ev in events[self._shown :]:
            step, kind, detail = event_row(ev)
            clock = time.strftime("%H:%M:%S", time.localtime(ev["time"])) if isinstance(ev.get("time"), (int, float)) else "-"
            self.add_row(step, clock, Text(kind, style=KIND_STYLE.get(kind, "")), Text(detail))
        self._shown = len(events)
