"""Keyboard help (`?`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """[b]ragen watch[/b]: keys

  [b]1[/b] charts   [b]2[/b] events   [b]3[/b] trajectories   (all run columns)
  [b]f[/b]          trajectory filter: all -> success -> failure
  [b]tab[/b]        next widget (step list, trajectory list, ...)
  [b]r[/b]          re-read every run directory from the start
  [b]?[/b]          this help (escape or ? closes it)
  [b]q[/b]          quit

Charts: vertical lines mark the steps where the health verdict
turned to WARNING (orange) or COLLAPSE (red), and interventions
(magenta). The Echo Trap signals are explained in docs/watch.md."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "close"), ("question_mark", "dismiss", "close"), ("q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(HELP, id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
