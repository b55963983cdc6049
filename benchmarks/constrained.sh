#!/usr/bin/env bash
# Constrained decoding (llm.constrain) against the same runs unconstrained, dev split, the
# default model: every run twice, "on" (the schema or grammar each structured reply asks for)
# and "off" (--set llm.constrain=false, the replies read by the tolerant parsers alone).
# Resumable: re-run the same command to continue. Then the table:
#   python benchmarks/constrained_table.py runs/constrained
#   N=200 N_OFF=100 N_RANK=100 N_RANK_OFF=50 N_VERIFY=100 THREADS=1 OUT=runs/constrained bash benchmarks/constrained.sh [answers|crossval|verifier|all]
# answers: cot_json and csrag in the paper's JSON mode (the bias on every generated token,
#   original context: csrag.enhance_context=false) on faitheval_counterfactual and kre_musique,
#   N items each; the "off" runs take N_OFF items (default N), the same first items.
# crossval: crossval re-ranking with each verdict (pairwise, support) on ramdocs_rank, N_RANK
#   items, answering from the top 3 re-ranked passages with vanilla, with llm.prefix_cache=true
#   (the question and passages kept between detection rounds), as benchmarks/rerank.sh;
#   the "off" runs take N_RANK_OFF items (default N_RANK), the same first items.
# verifier: the anti-sycophancy verifier on the first N_VERIFY items of PoisonedRAG, hostile
#   retrieval (`faithrag hostile run`, as benchmarks/hostile.sh).
# SIDES="on" or "off" runs one side only; PARTS run in the order given.
# Two lanes on two cores: start the command twice with different PARTS or SIDES (runs of the
# same directory must not run at once).
set -euo pipefail
PARTS=${1:-all}
[[ $PARTS == all ]] && PARTS="answers verifier crossval"
N=${N:-200}
N_OFF=${N_OFF:-$N}
N_RANK=${N_RANK:-100}
N_RANK_OFF=${N_RANK_OFF:-$N_RANK}
N_VERIFY=${N_VERIFY:-100}
MODEL=${MODEL:-default}
THREADS=${THREADS:-1}  # llama.cpp collapses with 2 threads when the other core is busy
OUT=${OUT:-runs/constrained}
SIDES=${SIDES:-"on off"}
SETS=${SETS:-"faitheval_counterfactual kre_musique"}
VERDICTS=${VERDICTS:-"pairwise support"}
FAITHRAG=${FAITHRAG:-faithrag}
mkdir -p "$OUT"

timed() {  # timed NAME COMMAND...: run it, its wall time appended to timings.txt
  local name=$1; shift
  local start; start=$(date +%s)
  "$@" > /dev/null
  echo "$name $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
}

for part in $PARTS; do
  for side in $SIDES; do
    constrain=(--set "llm.constrain=$([[ $side == on ]] && echo true || echo false)")
    case $part in
      answers)
        limit=$N; [[ $side == off ]] && limit=$N_OFF
        for set in $SETS; do
          timed "$set-cot_json-$side" $FAITHRAG eval --dataset "$set" --method cot_json \
            --limit "$limit" --model "$MODEL" --threads "$THREADS" --no-progress \
            "${constrain[@]}" --out "$OUT/$set-cot_json-$side"
          timed "$set-csrag-$side" $FAITHRAG eval --dataset "$set" --method csrag \
            --set csrag.enhance_context=false --limit "$limit" --model "$MODEL" \
            --threads "$THREADS" --no-progress "${constrain[@]}" --out "$OUT/$set-csrag-$side"
        done ;;
      crossval)
        limit=$N_RANK; [[ $side == off ]] && limit=$N_RANK_OFF
        for verdict in $VERDICTS; do
          timed "ramdocs_rank-crossval-$verdict-$side" $FAITHRAG eval --dataset ramdocs_rank \
            --rerank crossval --set "rerank.verdict=$verdict" --set llm.prefix_cache=true \
            --method vanilla --answer-top 3 \
            --answer-cache "$OUT/answer-cache" --limit "$limit" --model "$MODEL" \
            --threads "$THREADS" --no-progress "${constrain[@]}" \
            --out "$OUT/ramdocs_rank-crossval-$verdict-$side"
        done ;;
      verifier)
        timed "poisonedrag-hostile-antisyco-$side" $FAITHRAG hostile run --setting poisonedrag \
          --retrieval hostile --verify antisyco --limit "$N_VERIFY" --model "$MODEL" \
          --threads "$THREADS" --no-progress "${constrain[@]}" \
          --out "$OUT/poisonedrag-hostile-antisyco-$side" ;;
      *) echo "constrained.sh: unknown part '$part' (answers, crossval, verifier or all)" >&2
         exit 2 ;;
    esac
  done
done
