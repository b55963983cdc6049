#!/usr/bin/env bash
# The baselines on the six CSRAG sets,
# given-context mode, dev split. Resumable: re-run the same command to continue.
#   N=100 MODEL=default OUT=runs/baselines bash benchmarks/baselines.sh
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/baselines}
SETS=${SETS:-"faitheval_counterfactual kre_musique kre_squad cofaithfulqa_nq cofaithfulqa_hotpotqa cofaithfulqa_newsqa"}
METHODS=${METHODS:-"closed_book vanilla cot_json choice_scoring"}
THREADS=${THREADS:-2}  # 1 when something else shares the CPU (llama.cpp collapses otherwise)
FAITHRAG=${FAITHRAG:-faithrag}
for set in $SETS; do
  for method in $METHODS; do
    start=$(date +%s)
    $FAITHRAG eval --dataset "$set" --method "$method" --limit "$N" --model "$MODEL" \
      --threads "$THREADS" --out "$OUT/$set-$method" --no-progress
    echo "$set $method $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
  done
done
$FAITHRAG report "$OUT" --compare --out "$OUT/report"
