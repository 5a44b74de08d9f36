"""Run header: name, spec summary, progress, elapsed / ETA and the health verdict in colour."""

from __future__ import annotations

import time

from textual.widgets import Static

from ragen_cli.tui.format import escape, header_markup, problems_markup
from ragen_cli.tui.state import RunState


class RunHeader(Static):
    """Two lines about one run; `show(state)` re-renders (called on every poll: the clock moves)."""

    def show(self, state: RunState, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if state.deleted and not state.history:
            self.update(f"[b]{escape(str(state.run.path))}[/b]\n[red]the run directory was deleted[/]")
            return
        if not state.exists and not state.deleted:
            self.update(f"[b]waiting for run {escape(str(state.run.path))} ...[/b]\n[dim]the directory does not exist yet[/]")
            return
        info = state.info
        if info is None and not state.history:
            self.update(f"[b]{escape(state.run.name)}[/b]\n[dim]waiting for run data ...[/]")
            return
        name = info.name if info else state.run.name
        desc = info.description if info else ""
        if info and info.note:
            desc += f"  ({info.note})"
        total = info.total_steps if info else None
        text = header_markup(name, desc, state.history, total, state.events, state.verdict, now)
        if state.deleted:
            text += "\n[red]the run directory was deleted: showing what was read before[/]"
        self.update(text + problems_markup(state.problems))
        self.set_class(bool(state.verdict and state.verdict.level == "collapse"), "-collapse")
        self.set_class(bool(state.verdict and state.verdict.level == "warning"), "-warning")
