#!/usr/bin/env bash
# Cross-validated re-ranking: every re-ranker on both ranking sets, dev split. Each run
# also answers the item's QA version from the top TOP re-ranked passages with GENERATOR (the
# downstream measurement), so the re-ranking is paid for once. Resumable: re-run the same
# command to continue; runs land in $OUT/<set>-<reranker>, the report in $OUT/report.
#   N=200 MODEL=default THREADS=1 WORKERS=2 OUT=runs/rerank bash benchmarks/rerank.sh
# "none" is the retriever's own order (BM25 over the item's candidates), the input of the others.
# "crossval:support" is crossval with rerank.verdict=support (run directory <set>-crossval-support);
# a "+guard" suffix adds rerank.same_subject_check=true (<set>-crossval-support-guard).
# SET: space-separated config overrides for every run, e.g. SET="llm.prefix_cache=true" (crossval
# then reads each item's passages once for all detection rounds; see BENCHMARKS.md).
# The runs share their answering calls through $OUT/answer-cache (eval --answer-cache): give every
# run of a set the same SET, or their answers are keyed apart.
# OFFSET skips each set's first items (eval --offset): OFFSET=500 SETS=kre_conflict_rank is that
# set's SQuAD half (its first 500 items are MuSiQue). Give such runs their own OUT.
set -euo pipefail
N=${N:-200}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/rerank}
THREADS=${THREADS:-1}  # 1 when something else shares the CPU (llama.cpp collapses otherwise)
WORKERS=${WORKERS:-1}  # items in flight, each on its own copy of the model (2 on two cores)
TOP=${TOP:-3}
OFFSET=${OFFSET:-0}
GENERATOR=${GENERATOR:-vanilla}
SETS=${SETS:-"kre_conflict_rank ramdocs_rank"}
RERANKERS=${RERANKERS:-"none bi_encoder llm_judge listwise crossval"}
FAITHRAG=${FAITHRAG:-faithrag}
overrides=()
for override in ${SET:-}; do overrides+=(--set "$override"); done
mkdir -p "$OUT"
for set in $SETS; do
  for reranker in $RERANKERS; do
    rerank=() name=${reranker//[:+]/-} verdict=${reranker#*:}
    if [ "$reranker" != none ]; then rerank=(--rerank "${reranker%%[:+]*}"); fi
    if [[ $reranker == *:* ]]; then rerank+=(--set "rerank.verdict=${verdict%%+*}"); fi
    if [[ $reranker == *+guard ]]; then rerank+=(--set rerank.same_subject_check=true); fi
    start=$(date +%s)
    $FAITHRAG eval --dataset "$set" ${rerank[@]+"${rerank[@]}"} \
      ${overrides[@]+"${overrides[@]}"} --method "$GENERATOR" \
      --answer-top "$TOP" --answer-cache "$OUT/answer-cache" --limit "$N" --offset "$OFFSET" --model "$MODEL" --threads "$THREADS" --workers "$WORKERS" \
      --out "$OUT/$set-$name" --no-progress > "$OUT/$set-$name.summary.json"
    echo "$set $name $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
  done
done
$FAITHRAG report "$OUT" --out "$OUT/report"
