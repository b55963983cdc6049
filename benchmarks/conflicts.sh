#!/usr/bin/env bash
# The conflict report on labelled data: every measurement of benchmarks/bench_conflicts.py
# (context vs memory, passage vs passage, ambiguity, poisoning, RAMDocs answered with
# --on-conflict surface), dev split, the first items per class, all into one records file.
# About 100 positive and 100 negative items per detector: a detector measured on several sets
# takes its share of each, and the summary adds its row over all of them.
# Resumable: re-run the same command to continue; the summary covers whatever OUT holds.
#   MODEL=default THREADS=2 OUT=runs/conflicts bash benchmarks/conflicts.sh
# To extend the kept records instead of starting afresh, copy them in first:
#   mkdir -p runs/conflicts && cp results/conflicts/records.jsonl runs/conflicts/
# and keep them afterwards: cp runs/conflicts/records.jsonl runs/conflicts/summary.json results/conflicts/
# MEASUREMENTS picks and orders them ("command:dataset:items per class" words, the count N
# when left out); keep surface:ramdocs before ambiguity:ramdocs, which reads the items surface
# already ran. Two lanes on two cores: give each its own MEASUREMENTS and OUT (THREADS=1), then
# concatenate the records files into one OUT and run `bench_conflicts.py summary --out OUT`.
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/conflicts}
THREADS=${THREADS:-2}  # alone on the machine; 1 when other model jobs share it
PYTHON=${PYTHON:-python}
MEASUREMENTS=${MEASUREMENTS:-"passages:kre_conflict_rank:50 passages:ramdocs_rank:50
  surface:ramdocs ambiguity:ramdocs memory:kre_squad:50 memory:kre_musique:50
  poisoning:poisonedrag:34 poisoning:kre_squad:33 poisoning:kre_musique:33"}
mkdir -p "$OUT"
for measurement in $MEASUREMENTS; do
  IFS=: read -r command dataset items <<< "$measurement"
  start=$(date +%s)
  "$PYTHON" benchmarks/bench_conflicts.py "$command" --dataset "$dataset" \
    --limit "${items:-$N}" --model "$MODEL" --threads "$THREADS" --out "$OUT" \
    2>> "$OUT/progress.log" > /dev/null
  echo "$measurement $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
done
"$PYTHON" benchmarks/bench_conflicts.py summary --out "$OUT"
