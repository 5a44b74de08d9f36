"""A SIGKILLed trainer does not leave vLLM's engine processes behind (slow: one engine start).

Seen before the fix (docs/training.md, WebShop): after an OOM kill of `ragen train`, vLLM's
EngineCore and Worker processes lived on with their memory. The owner here is a subprocess that
builds a `VLLMBackend` on the tiny model and then waits; the test kills it with SIGKILL (no
handler can run) and expects every process it started to be gone soon after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("vllm")
psutil = pytest.importorskip("psutil")

OWNER = """
import sys, time
from ragen_cli.rollout.vllm_backend import VLLMBackend

if __name__ == "__main__":
    backend = VLLMBackend(sys.argv[1], "float32", max_model_len=256, kv_cache_gib=1)
    print("READY", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_engine_processes_end_with_a_sigkilled_owner(tiny_model_dir, tmp_path):
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    owner = subprocess.Popen([sys.executable, str(script), str(tiny_model_dir)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    children = []
    try:
        lines = iter(owner.stdout.readline, "")  # vLLM logs to stdout too
        assert any(line.strip() == "READY" for line in lines), "the engine did not start"
        children = psutil.Process(owner.pid).children(recursive=True)
        assert children, "vLLM on CPU runs its engine in child processes"
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        # poll interval 1 s, then SIGTERM to the engine core and its orderly shutdown
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, f"still running after the owner's SIGKILL: {[p.pid for p in alive]}"
    finally:
        for proc in children:
            if proc.is_running():
                proc.kill()
        if owner.poll() is None:
            owner.kill()
