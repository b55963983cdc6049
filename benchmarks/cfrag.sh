#!/usr/bin/env bash
# CF-RAG against the correlation trap. Dev split, smart EM, retrieval (top retrieval.k)
# over each item's own passages plus N injected distractors (passages of OTHER items of the set,
# most BM25-similar to the question, holding no gold alias: faithrag/eval/distractors.py).
#   1. vanilla vs cfrag on hotpotqa_distractor and popqa at N in {0, 2, 4, 8, 16};
#   2. the three ablations (no counterfactuals, no evidence division, no causal scoring) at
#      N = ABLATION_LEVEL;
#   3. reports: the robustness curve (main/report/distractors.png), a paired comparison at the
#      ablation level, and the per-stage speed breakdown (calls, tokens, seconds) at N = 0;
#   4. the draft-batching saving (drafts in one generate call vs M separate calls).
# Resumable: re-run the same command and finished items are skipped.
#   N=100 THREADS=1 WORKERS=2 OUT=runs/cfrag bash benchmarks/cfrag.sh
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
THREADS=${THREADS:-1}  # llama.cpp collapses with 2 threads when the other core is busy
WORKERS=${WORKERS:-2}  # items at once, one model copy each (THREADS threads per copy)
OUT=${OUT:-runs/cfrag}
SETS=${SETS:-"hotpotqa_distractor popqa"}
LEVELS=${LEVELS:-"0 2 4 8 16"}
ABLATION_LEVEL=${ABLATION_LEVEL:-16}
ABLATIONS=${ABLATIONS-"cfrag_no_counterfactuals cfrag_no_division cfrag_no_causal"}  # "" skips them
SCORER=${SCORER:-llm_judge}  # s(q, e) of the causal score: llm_judge | bi_encoder
BATCH_ITEMS=${BATCH_ITEMS:-2}  # items for the batching measurement (0 skips it)
FAITHRAG=${FAITHRAG:-faithrag}
PYTHON=${PYTHON:-python}
HERE=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$OUT/configs" "$OUT/main" "$OUT/ablations" "$OUT/speed"
config() {  # name, then extra "key = value" lines of the [cfrag] section
  local name=$1; shift
  printf '[cfrag]\nscorer = "%s"\n' "$SCORER" > "$OUT/configs/$name.toml"
  for line in "$@"; do echo "$line" >> "$OUT/configs/$name.toml"; done
}
config cfrag
config cfrag_no_counterfactuals "counterfactuals = false"
config cfrag_no_division "evidence_division = false"
config cfrag_no_causal "causal_scoring = false"

evaluate() {  # set, label (vanilla or a config name), level, parent dir
  local set=$1 label=$2 level=$3 dir="$4/$1-$2-d$3" method=cfrag args=()
  if [ "$label" = vanilla ]; then method=vanilla; else args=(--config "$OUT/configs/$label.toml"); fi
  local start; start=$(date +%s)
  $FAITHRAG eval --dataset "$set" --method "$method" --limit "$N" --model "$MODEL" \
    --threads "$THREADS" --workers "$WORKERS" --context item_retrieval \
    --distractors "$level" --metric smart_em --out "$dir" --no-progress "${args[@]}"
  echo "$set $label distractors=$level $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
}

for set in $SETS; do
  for level in $LEVELS; do
    evaluate "$set" vanilla "$level" "$OUT/main"
    evaluate "$set" cfrag "$level" "$OUT/main"
  done
  for ablation in $ABLATIONS; do
    evaluate "$set" "$ablation" "$ABLATION_LEVEL" "$OUT/ablations"
  done
done

$FAITHRAG report "$OUT/main" --out "$OUT/main/report"
compare=()
for set in $SETS; do
  compare+=("$OUT/main/$set-vanilla-d$ABLATION_LEVEL" "$OUT/main/$set-cfrag-d$ABLATION_LEVEL")
done
ablation_runs=()
if [ -n "$ABLATIONS" ]; then ablation_runs=("$OUT/ablations"); fi
$FAITHRAG report "${compare[@]}" ${ablation_runs[@]+"${ablation_runs[@]}"} --compare \
  --out "$OUT/ablations/report"

# Speed at N = 0: per-stage seconds, calls and tokens from the traces of the runs above (bench
# resumes the finished run, so only its rate calibration costs time).
for set in $SETS; do
  for label in vanilla cfrag; do
    method=cfrag args=()
    if [ "$label" = vanilla ]; then method=vanilla; else args=(--config "$OUT/configs/cfrag.toml"); fi
    $FAITHRAG bench --dataset "$set" --method "$method" --limit "$N" --model "$MODEL" \
      --threads "$THREADS" --context item_retrieval --distractors 0 --metric smart_em \
      --out "$OUT/main/$set-$label-d0" --json "$OUT/speed/$set-$label.json" "${args[@]}" \
      | tee "$OUT/speed/$set-$label.txt"
  done
done

if [ "$BATCH_ITEMS" -gt 0 ]; then
  $PYTHON "$HERE/bench_prompt_sharing.py" cfrag-batching --dataset "$(echo "$SETS" | cut -d' ' -f1)" \
    --items "$BATCH_ITEMS" --model "$MODEL" --threads "$THREADS" \
    --distractors "$ABLATION_LEVEL" --json "$OUT/speed/batching.json"
fi
