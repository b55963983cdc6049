#!/usr/bin/env bash
# The conflict report on labelled data: every measurement of benchmarks/bench_conflicts.py
# (context vs memory, passage vs passage, ambiguity, poisoning, RAMDocs answered with
# --on-conflict surface), dev split, first N items per class, all into one records file.
# Resumable: re-run the same command to continue; the summary covers whatever OUT holds.
#   N=100 MODEL=default THREADS=2 OUT=runs/conflicts bash benchmarks/conflicts.sh
# To extend the kept records instead of starting afresh, copy them in first:
#   mkdir -p runs/conflicts && cp results/conflicts/records.jsonl runs/conflicts/
# and keep them afterwards: cp runs/conflicts/records.jsonl runs/conflicts/summary.json results/conflicts/
# MEASUREMENTS picks and orders them ("command:dataset" words); keep surface:ramdocs before
# ambiguity:ramdocs, which reads the items surface already ran.
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/conflicts}
THREADS=${THREADS:-2}  # alone on the machine; 1 when other model jobs share it
PYTHON=${PYTHON:-python}
MEASUREMENTS=${MEASUREMENTS:-"passages:kre_conflict_rank poisoning:poisonedrag surface:ramdocs
  ambiguity:ramdocs memory:kre_musique memory:kre_squad passages:ramdocs_rank poisoning:kre_squad
  poisoning:kre_musique"}
mkdir -p "$OUT"
for measurement in $MEASUREMENTS; do
  start=$(date +%s)
  "$PYTHON" benchmarks/bench_conflicts.py "${measurement%%:*}" --dataset "${measurement#*:}" \
    --limit "$N" --model "$MODEL" --threads "$THREADS" --out "$OUT" 2>> "$OUT/progress.log" \
    > /dev/null
  echo "$measurement $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
done
"$PYTHON" benchmarks/bench_conflicts.py summary --out "$OUT"
