#!/usr/bin/env bash
# The GPU check (issue 25): on one H100, in at most 8 minutes, writes into $OUT at most 8 files:
#
#   summary.txt      one line per section: ok / failed (exit code) / timed out / skipped, seconds
#   env.txt          the GPU, torch, Python, and which of tailmem's packages this machine has
#   pytest_cuda.txt  the CUDA test paths: pytest -m 'not slow' -k cuda over the test files that
#                    mention CUDA (elsewhere those tests skip)
#   optim_step.txt   benchmarks/optim_step.py on the GPU: one Muon step of the 12 x 768 matrices,
#                    tailmem vs torch.optim.Muon vs AdamW
#   step_modes.txt   benchmarks/step_modes.py: tokens/s and MFU of a 160M training step (batch
#                    16 x 1024, vocab 50,304, bf16, compiled), AdamW vs hybrid Muon batched
#                    (tailmem's) and looped (torch.optim.Muon), and the optimiser's share of the
#                    step
#   ensemble.txt     benchmarks/ensemble_step.py: 3 seeds of the knowledge-qa cpu model (2 x 256)
#                    as one ensemble vs 3 single steps, fp32 and bf16 (on 2 CPU cores the
#                    ensemble did not pay: 0.84-0.95x; small models on a GPU are where it may)
#   qa_point.txt     update rule or learning rate at paper width (rule-or-rate's factorial on
#                    the 12 x 768 model, heads of 64, m = 10, batch 32 x 512, bf16, as many steps
#                    as give every rarest fact 4 exposures: at 16 every arm's rarest FTA was
#                    >= 0.95 on an H200, too saturated to compare): Muon-own (hidden 0.01, rest 1e-3),
#                    Muon-shared (1e-3 for every parameter), Adam-own (hidden 3e-4, rest 1e-3) and
#                    Adam-shared (1e-3), Muon at Moonlight's match_rms_adamw scale, one seed each:
#                    final FTA, the lag ratios and the share of Muon's edge the rate split recovers
#   qa_run.tar.gz    that run's folder (checkpoints dropped)
#
# Every section has its own time limit (they add up to 8 min 50 s; on an H200 the sections took
# about 5 min); one that fails or runs out keeps what it printed, says so in summary.txt, and the
# next one runs. GPU_CHECK_ONLY="ensemble knowledge-QA" runs only the sections whose names hold
# one of those words (to rerun what failed within a lease); the rest are listed as skipped.
# The GPU machine reaches no package registry: the script runs on that machine's own PyTorch
# with PYTHONPATH=src and skips (saying so) what needs a package it lacks.
#
#   OUT=/some/folder bash scripts/gpu_check.sh
#   GPU_CHECK_TOY=1 OUT=/tmp/x bash scripts/gpu_check.sh   # the same sections on the CPU at toy
#                                                          # sizes (tests/test_gpu_check.py)
set -u -o pipefail

: "${OUT:?set OUT to the folder the results go to}"
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg TAILMEM_CACHE="$WORK/cache"
PY=${PYTHON:-python}

if [ "${GPU_CHECK_TOY:-0}" = 1 ]; then
    DEVICE=cpu
    PYTEST_FILES=(tests/train/test_precision.py)
    OPTIM=(--set 2x128 --methods ns5 --no-distributed)
    STEP=(--size tiny --vocab 64 --seq 32 --batch 4 --precisions fp32 --modes eager --steps 1
          --warmup 1 --arms adamw,hybrid,hybrid_looped)
    QA=(--preset smoke)
    QA_PRESET=smoke QA_PRECISION=fp32 QA_SHAPE=""
    ENSEMBLE=(--size tiny --vocab 64 --seq 32 --batch 4 --repeats 1 --window 1)
    EXPOSURES=0.5
    # Each toy section takes 5-20 s on 2 cores at load 4; its limit is generous (a shared
    # machine can be far slower) and still under the test's own timeout, so a section that
    # hangs is reported here, by name, before the test gives up on the script.
    TOY_LIMIT=${GPU_CHECK_TOY_LIMIT:-300}
    LIMIT_PYTEST=$TOY_LIMIT LIMIT_OPTIM=$TOY_LIMIT LIMIT_STEP=$TOY_LIMIT
    LIMIT_ENSEMBLE=$((2 * TOY_LIMIT)) LIMIT_QA_DATA=$TOY_LIMIT LIMIT_QA=$TOY_LIMIT
    LIMIT_QA_SUMMARY=$TOY_LIMIT
else
    DEVICE=cuda
    mapfile -t PYTEST_FILES < <(grep -rli --include='test_*.py' cuda tests | sort)
    OPTIM=(--device cuda --set 12x768 --ffn both --repeats 3 --no-distributed)
    STEP=(--device cuda --size gpt-160m --vocab 50304 --seq 1024 --batch 16 --precisions bf16
          --modes compiled --arms adamw,hybrid,hybrid_looped --steps 5 --warmup 2 --threads 0)
    QA=(--preset paper data.m=10 train.batch_size=32 train.seq_len=512)
    QA_PRESET=paper QA_PRECISION=bf16
    QA_SHAPE="data.m: 10, train.batch_size: 32, train.seq_len: 512, train.eval_batch_size: 512, "
    ENSEMBLE=(--device cuda --members 3 --repeats 5 --window 5)
    EXPOSURES=4
    LIMIT_PYTEST=60 LIMIT_OPTIM=40 LIMIT_STEP=150 LIMIT_ENSEMBLE=50 LIMIT_QA_DATA=30
    LIMIT_QA=170 LIMIT_QA_SUMMARY=30
fi

: > "$OUT/summary.txt"
note() { echo "$*" >> "$OUT/summary.txt"; }

# wanted NAME: true unless GPU_CHECK_ONLY holds words and NAME contains none of them
wanted() {
    [ -z "${GPU_CHECK_ONLY:-}" ] && return 0
    local word
    for word in $GPU_CHECK_ONLY; do [[ $1 == *"$word"* ]] && return 0; done
    return 1
}

# section NAME LIMIT_S FILE COMMAND...: COMMAND's output into $OUT/FILE, its outcome in the summary
section() {
    local name=$1 limit=$2 file=$3 start=$SECONDS rc status
    shift 3
    if ! wanted "$name"; then
        note "$name: skipped (GPU_CHECK_ONLY=$GPU_CHECK_ONLY)"
        return
    fi
    timeout --kill-after=10 "$limit" "$@" >> "$OUT/$file" 2>&1
    rc=$?
    case $rc in
        0) status=ok ;;
        124 | 137) status="timed out after ${limit} s" ;;
        *) status="failed (exit $rc)" ;;
    esac
    note "$name: $status, $((SECONDS - start)) s -> $file"
}

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
    "$PY" - <<'EOF'
import importlib.util
import sys

import torch

print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA",
      torch.version.cuda, "| devices", torch.cuda.device_count())
for name in ("numpy", "scipy", "matplotlib", "yaml", "tqdm", "tokenizers", "safetensors", "rich",
             "pytest", "hypothesis", "triton"):
    print("have" if importlib.util.find_spec(name) else "MISSING", name)
EOF
} > "$OUT/env.txt" 2>&1
note "env: $(grep -c MISSING "$OUT/env.txt") missing package(s) -> env.txt"

if grep -q "^have pytest" "$OUT/env.txt"; then
    section "CUDA tests" "$LIMIT_PYTEST" pytest_cuda.txt "$PY" -m pytest -q -p no:cacheprovider \
        -m 'not slow' -k cuda "${PYTEST_FILES[@]}"
else
    echo "pytest is not installed here: the CUDA tests were not run" > "$OUT/pytest_cuda.txt"
    note "CUDA tests: skipped (no pytest) -> pytest_cuda.txt"
fi

section "optimiser step" "$LIMIT_OPTIM" optim_step.txt "$PY" benchmarks/optim_step.py \
    "${OPTIM[@]}"
section "160M step modes" "$LIMIT_STEP" step_modes.txt "$PY" benchmarks/step_modes.py \
    "${STEP[@]}"
section "ensemble step fp32" "$((LIMIT_ENSEMBLE / 2))" ensemble.txt "$PY" \
    benchmarks/ensemble_step.py "${ENSEMBLE[@]}"
section "ensemble step bf16" "$((LIMIT_ENSEMBLE / 2))" ensemble.txt "$PY" \
    benchmarks/ensemble_step.py "${ENSEMBLE[@]}" --bf16

if wanted knowledge-QA; then
    STEPS=$(timeout "$LIMIT_QA_DATA" "$PY" scripts/gpu_check_qa.py steps --exposures "$EXPOSURES" \
        --cache "$WORK/qa-data" "${QA[@]}" 2> "$WORK/steps.err")
    if [ -n "$STEPS" ]; then
        echo "steps for $EXPOSURES exposures per rarest fact: $STEPS" > "$OUT/qa_point.txt"
        cat > "$WORK/rule_or_rate.yaml" <<YAML
preset: $QA_PRESET
common: {seeds: 1, ffn: plain, ${QA_SHAPE}train.precision: $QA_PRECISION,
         train.device: $DEVICE, train.threads: null, train.steps: $STEPS,
         train.warmup_steps: $(((STEPS + 49) / 50)), train.eval_every: $(((STEPS + 14) / 15)),
         train.log_every: $(((STEPS + 19) / 20)), train.ckpt_every: 0,
         train.keep_checkpoints: none, optim.muon.scale: match_rms_adamw,
         cache_dir: $WORK/qa-data}
rules:
  muon: {kind: muon, label: Muon, own: [1.0e-2], shared: [1.0e-3]}
  adam: {kind: adam_split, label: Adam, own: [3.0e-4], shared: [1.0e-3]}
workers: 1
YAML
        section "knowledge-QA point" "$LIMIT_QA" qa_point.txt "$PY" -m tailmem run rule-or-rate \
            --config "$WORK/rule_or_rate.yaml" --out "$WORK/qa"
        section "knowledge-QA summary" "$LIMIT_QA_SUMMARY" qa_point.txt "$PY" scripts/gpu_check_qa.py \
            summary "$WORK/qa"
    else
        cat "$WORK/steps.err" > "$OUT/qa_point.txt"
        note "knowledge-QA point: failed (its data or length) -> qa_point.txt"
    fi
else
    note "knowledge-QA point: skipped (GPU_CHECK_ONLY=$GPU_CHECK_ONLY)"
fi
if [ -d "$WORK/qa" ]; then
    tar -czf "$OUT/qa_run.tar.gz" -C "$WORK" --exclude=ckpt --exclude=data qa
fi
