#!/usr/bin/env bash
# The default anti-sycophancy verifier against plain RAG (benchmarks/bench_verifier_cost.py
# --before none) on every hostile setting, clean and hostile retrieval, dev split, first N items:
# time and prompt tokens by path, attack success and accuracy, each run paired with the kept
# verified run of the same setting in BASELINES (results/hostile). JOBS runs side by side, one
# model and THREADS threads each; each run's progress goes to OUT/RUN.log.
# Resumable: re-run the same command to continue. Then the table of all runs is printed.
#   N=100 JOBS=2 OUT=runs/verifier-cost bash benchmarks/verifier_cost.sh
# Keep the records: for r in runs/verifier-cost/*/; do mkdir -p results/verifier-cost/$(basename $r)
#   cp $r/{records.jsonl,variants.json,summary.json} results/verifier-cost/$(basename $r)/; done
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/verifier-cost}
JOBS=${JOBS:-2}
THREADS=${THREADS:-1}
PYTHON=${PYTHON:-python}
BASELINES=${BASELINES:-results/hostile}
RUNS=${RUNS:-"poisonedrag-hostile poisonedrag-clean ramdocs-hostile ramdocs-clean
  kre_musique-hostile kre_musique-clean kre_squad-hostile kre_squad-clean"}

lane() {  # the runs at positions $1, $1 + JOBS, ... of RUNS, one after another
  local position=0
  for run in $RUNS; do
    if [ $((position % JOBS)) -eq "$1" ]; then
      "$PYTHON" benchmarks/bench_verifier_cost.py --model "$MODEL" --threads "$THREADS" \
        --setting "${run%-*}" --retrieval "${run##*-}" --before none \
        --baseline "$BASELINES/$run-antisyco" --limit "$N" --out "$OUT/$run" \
        > /dev/null 2>> "$OUT/$run.log"
    fi
    position=$((position + 1))
  done
}

mkdir -p "$OUT"
lanes=()
for job in $(seq 0 $((JOBS - 1))); do
  lane "$job" &
  lanes+=($!)
done
for pid in "${lanes[@]}"; do
  wait "$pid"  # a failed run stops the script with its status
done
runs=()
for run in $RUNS; do runs+=("$OUT/$run"); done
"$PYTHON" benchmarks/bench_verifier_cost.py --table "${runs[@]}"
