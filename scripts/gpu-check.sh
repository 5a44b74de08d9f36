#!/usr/bin/env bash
# The CUDA path end to end on a GPU machine, in a few minutes: prints one JSON line of results
# (python -m ragen_cli.gpucheck; docs/training.md, "Checking a GPU machine").
#
#   bash scripts/gpu-check.sh                       # this python, packages already installed
#   bash scripts/gpu-check.sh --wheels DIR          # a machine without a package registry
#   bash scripts/gpu-check.sh --device cpu          # the dry mode (what the test suite runs)
#
# --wheels DIR installs every wheel in DIR with --no-index --no-deps into this python (the
# packages ragen needs that the machine lacks: deepspeed, pydantic, ... and ragen itself as a
# wheel; without one, this checkout is installed with --no-deps --no-build-isolation), and uses
# DIR/cache, when there, as RAGEN_CACHE (the checks' model). scripts/gpu-prepare.sh DIR makes such
# a folder on a machine with a registry. The torch, transformers and peft already there are kept.
# Checks that cannot run (no vLLM, no DeepSpeed, sleep mode without CUDA) are skipped and say why.
# Options: --python PY (default: $PYTHON or python3), --timeout S (default 480; the exit code is
# 124 when it is reached), --only a,b (a subset of update_full, update_lora, update_zero2,
# hf_rollouts, resume, resume_zero2, vllm). Exit 0 when every check that ran passed, 1 otherwise,
# 2 for bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=""
DEVICE=auto
LIMIT=480
ONLY=""
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS=${2:?--wheels needs a directory}; shift 2 ;;
    --device) DEVICE=${2:?--device needs auto, cuda or cpu}; shift 2 ;;
    --python) PY=${2:?--python needs an interpreter}; shift 2 ;;
    --timeout) LIMIT=${2:?--timeout needs seconds}; shift 2 ;;
    --only) ONLY=${2:?--only needs check names}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$DEVICE" in auto|cuda|cpu) ;; *) echo "gpu-check: --device must be auto, cuda or cpu, not $DEVICE" >&2; exit 2 ;; esac
if [ -n "$WHEELS" ]; then
  [ -d "$WHEELS" ] || { echo "gpu-check: no such wheel directory: $WHEELS" >&2; exit 2; }
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  [ ${#wheels[@]} -gt 0 ] || { echo "gpu-check: no .whl files in $WHEELS" >&2; exit 2; }
  echo "gpu-check: installing ${#wheels[@]} wheels from $WHEELS (no index, no dependencies)" >&2
  "$PY" -m pip install -q --no-index --no-deps "${wheels[@]}"
  if [ -d "$WHEELS/cache" ] && [ -z "${RAGEN_CACHE:-}" ]; then
    export RAGEN_CACHE
    RAGEN_CACHE=$(cd "$WHEELS/cache" && pwd)
  fi
  ragen_wheels=("$WHEELS"/ragen_cli-*.whl)
  if [ ${#ragen_wheels[@]} -eq 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e .
  fi
fi
exec timeout "$LIMIT" "$PY" -m ragen_cli.gpucheck --device "$DEVICE" ${ONLY:+--only "$ONLY"}
