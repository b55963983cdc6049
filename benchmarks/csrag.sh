#!/usr/bin/env bash
# CSRAG measurements: main table, non-conflict check, ablations. Resumable: re-run the
# same command to continue; paraphrases and facts are cached, so ablations pay only for answers.
#   N=200 N_ABL=100 THREADS=1 WORKERS=2 OUT=runs/csrag bash benchmarks/csrag.sh [main|golden|ablations|grid|all]
#   N=200 THREADS=1 WORKERS=2 OUT=runs/csrag bash benchmarks/csrag.sh table
# (two items at a time on one thread each is the fastest arrangement on two cores)
# table (not part of all): the main table in the scored JSON mode as benchmarks/csrag_main_table.py
# reads it, column by column over the sets: closed-book, vanilla, csrag_json_scored on the
# original context, then on the KRE golden contexts, then the full method; each CSRAG run with
# its ablation grid, whose unbiased cell is the same-prompt baseline, and with lookup drafts.
# grid: csrag_choices on the original context with every ablation cell scored from one forward
# pass per item (csrag.ablation_grid), on every set and on the KRE golden contexts.
# The main part also runs the baselines; point BASE_OUT at an existing baselines directory
# (benchmarks/baselines.sh) to extend those runs instead of starting new ones.
set -euo pipefail
PART=${1:-all}
N=${N:-200}
N_ABL=${N_ABL:-100}
MODEL=${MODEL:-default}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-1}
OUT=${OUT:-runs/csrag}
BASE_OUT=${BASE_OUT:-$OUT/main}
FAITHRAG=${FAITHRAG:-faithrag}
PYTHON=${PYTHON:-python}
SETS=${SETS:-"faitheval_counterfactual kre_musique kre_squad cofaithfulqa_nq cofaithfulqa_hotpotqa cofaithfulqa_newsqa"}
BASELINES=${BASELINES:-"closed_book vanilla cot_json cot_json_scored"}
METHODS=${METHODS:-"csrag csrag_json_scored csrag_choices"}
# every CSRAG run: prompt-lookup drafts make the paraphrase step ~0.57x as long
CSRAG_ARGS=${CSRAG_ARGS:-"--set llm.lookup_tokens=10"}
GOLDEN=${GOLDEN:-"kre_musique kre_squad"}  # the sets with golden (non-conflict) contexts

run() {  # run DIR ARGS...: one resumable eval run, its wall time appended to timings.txt
  local dir=$1; shift
  local start; start=$(date +%s)
  $FAITHRAG eval --model "$MODEL" --threads "$THREADS" --workers "$WORKERS" --no-progress \
    --out "$dir" "$@"
  echo "$dir $(( $(date +%s) - start ))s" | tee -a "$OUT/timings.txt"
}
mkdir -p "$OUT"

if [[ $PART == main || $PART == all ]]; then
  for set in $SETS; do
    for method in $BASELINES; do
      run "$BASE_OUT/$set-$method" --dataset "$set" --method "$method" --limit "$N"
    done
    for method in $METHODS; do
      grid_args=()  # scored answers read every ablation cell off the same forward pass
      [[ $method != csrag ]] && grid_args=(--set csrag.ablation_grid=true)
      # shellcheck disable=SC2086
      run "$OUT/main/$set-$method" --dataset "$set" --method "$method" --limit "$N" \
        $CSRAG_ARGS "${grid_args[@]}"
    done
  done
fi

if [[ $PART == golden || $PART == all ]]; then  # KRE golden contexts: no conflict
  for set in $GOLDEN; do
    for method in cot_json cot_json_scored; do
      run "$OUT/golden/$set-$method" --dataset "$set" --context golden --method "$method" \
        --limit "$N"
    done
    # shellcheck disable=SC2086
    run "$OUT/golden/$set-csrag" --dataset "$set" --context golden --method csrag --limit "$N" \
      $CSRAG_ARGS
    # shellcheck disable=SC2086
    run "$OUT/golden/$set-csrag_json_scored" --dataset "$set" --context golden \
      --method csrag_json_scored --limit "$N" $CSRAG_ARGS --set csrag.ablation_grid=true
  done
fi

if [[ $PART == ablations || $PART == all ]]; then  # the paper's ablation shape, on FaithEval
  abl() { local name=$1; shift
    # shellcheck disable=SC2086
    run "$OUT/ablations/$name" --dataset faitheval_counterfactual --method csrag \
      --limit "$N_ABL" $CSRAG_ARGS "$@"; }
  abl enhanced+control
  abl original+control --set csrag.enhance_context=false
  abl enhanced+no-control --set csrag.alpha=0 --set csrag.beta=0
  abl original+no-control --set csrag.enhance_context=false --set csrag.alpha=0 \
    --set csrag.beta=0
  abl boost-only --set csrag.alpha=0                  # also alpha=0
  abl suppress-only --set csrag.beta=0                # also beta=0
  for a in -3 -5; do abl "alpha=$a" --set "csrag.alpha=$a"; done
  for b in 1 5; do abl "beta=$b" --set "csrag.beta=$b"; done
  abl no-stopword-filter --set csrag.filter_stopwords=false
  # csrag_json_scored: every cell but the context comes from the main run's grid
  run "$OUT/ablations/json_scored-original" --dataset faitheval_counterfactual \
    --method csrag_json_scored --limit "$N_ABL" --set csrag.enhance_context=false \
    --set csrag.ablation_grid=true
fi

if [[ $PART == table ]]; then
  for method in closed_book vanilla; do
    for set in $SETS; do
      run "$OUT/table/$set-$method" --dataset "$set" --method "$method" --limit "$N"
    done
  done
  scored() { local dir=$1; shift
    # shellcheck disable=SC2086
    run "$OUT/table/$dir" --method csrag_json_scored --limit "$N" $CSRAG_ARGS \
      --set csrag.ablation_grid=true "$@"; }
  for set in $SETS; do
    scored "$set-csrag_json_scored-original" --dataset "$set" --set csrag.enhance_context=false
  done
  for set in $GOLDEN; do
    scored "$set-golden-csrag_json_scored-original" --dataset "$set" --context golden \
      --set csrag.enhance_context=false
  done
  for set in $SETS; do scored "$set-csrag_json_scored" --dataset "$set"; done
fi

if [[ $PART == grid || $PART == all ]]; then
  grid() { local name=$1; shift
    run "$OUT/grid/$name" --method csrag_choices --limit "$N" --set csrag.enhance_context=false \
      --set csrag.ablation_grid=true "$@"; }
  for set in $SETS; do grid "$set" --dataset "$set"; done
  for set in $GOLDEN; do grid "$set-golden" --dataset "$set" --context golden; done
fi

[[ -d $OUT/table ]] && $PYTHON benchmarks/csrag_main_table.py "$OUT/table" > "$OUT/table/main-table.md"
[[ -d $OUT/grid ]] && $FAITHRAG report --cells "$OUT"/grid/*/ > "$OUT/grid/report.md"
scored=$(compgen -G "$OUT/main/*-csrag_choices"; compgen -G "$OUT/main/*-csrag_json_scored") || true
# shellcheck disable=SC2086
[[ -n $scored ]] && $FAITHRAG report --cells $scored > "$OUT/main/grid-report.md"
[[ -d $OUT/main ]] && $FAITHRAG report "$BASE_OUT" "$OUT/main" --compare --out "$OUT/report-main"
[[ -d $OUT/golden ]] && $FAITHRAG report "$OUT/golden" --compare --out "$OUT/report-golden"
[[ -d $OUT/ablations/json_scored-original ]] &&
  $FAITHRAG report --cells "$OUT/ablations/json_scored-original" > "$OUT/ablations/grid-report.md"
[[ -d $OUT/ablations ]] && $FAITHRAG report "$OUT/ablations" --out "$OUT/report-ablations"
exit 0
