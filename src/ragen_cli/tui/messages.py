"""Messages between the watch widgets (one small module, harlequin style)."""

from __future__ import annotations

from textual.message import Message

from ragen_cli.tui.state import RunState


class RunUpdated(Message):
    """A run pane read new data from its run directory."""

    def __init__(self, state: RunState) -> None:
        super().__init__()
        self.state = state


class TrajectoryShown(Message):
    """The trajectory browser now shows trajectory `index` of `step`."""

    def __init__(self, step: int, index: int) -> None:
        super().__init__()
        self.step = step
        self.index = index
