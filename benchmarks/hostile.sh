#!/usr/bin/env bash
# Anti-sycophancy verification on real hostile retrieval: for every setting (KRE
# musique and squad, RAMDocs, PoisonedRAG; see faithrag/eval/hostile_settings.py), clean and
# hostile retrieval, vanilla + the antisyco verifier; dev split, first N items. The verifier's
# draft is the vanilla pipeline's answer (same retrieval and prompt, every llama.cpp call starts
# from an empty cache), so the report gives vanilla RAG's accuracy, attack success and cost from
# the same run and items; PIPELINES="vanilla antisyco" also runs vanilla on its own.
# Resumable: re-run the same command to continue. Then the tables: `faithrag hostile report`.
#   N=100 MODEL=default THREADS=1 OUT=runs/hostile bash benchmarks/hostile.sh
# Keep the records in the repository: faithrag runs save runs/hostile --to results/hostile
# (and `faithrag runs restore` on a new machine before resuming).
set -euo pipefail
N=${N:-100}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/hostile}
SETTINGS=${SETTINGS:-"kre_musique kre_squad ramdocs poisonedrag"}
RETRIEVALS=${RETRIEVALS:-"clean hostile"}
PIPELINES=${PIPELINES:-antisyco}
THREADS=${THREADS:-1}  # llama.cpp collapses with 2 threads when the other core is busy
FAITHRAG=${FAITHRAG:-faithrag}
mkdir -p "$OUT"
for setting in $SETTINGS; do
  for retrieval in $RETRIEVALS; do
    for pipeline in $PIPELINES; do
      verify=()
      [ "$pipeline" = antisyco ] && verify=(--verify antisyco)
      start=$(date +%s)
      $FAITHRAG hostile run --setting "$setting" --retrieval "$retrieval" ${verify[@]+"${verify[@]}"} \
        --limit "$N" --model "$MODEL" --threads "$THREADS" --no-progress \
        --out "$OUT/$setting-$retrieval-$pipeline" > /dev/null
      echo "$setting $retrieval $pipeline $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
    done
  done
done
$FAITHRAG hostile report "$OUT" --out "$OUT/report.md" --json "$OUT/summary.json"
cat "$OUT/report.md"
