"""Ending a process without interpreter teardown (shared by the CLI and the launcher's workers).

With vLLM's native threads alive, interpreter teardown aborted finished runs ("terminate called
without an active exception", exit 134); `end_process` flushes the streams and calls `os._exit`.
"""

from __future__ import annotations

import os
import sys


def end_process(code: int) -> None:
    """Flush the standard streams and end the process with `code`, skipping teardown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
