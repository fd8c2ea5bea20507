#!/usr/bin/env bash
# Every GPU check the open CUDA issues owe, in one call on a machine with a GPU, newest
# code first, each stage under its own time limit so that one hang costs one stage: the
# CUDA kernel tests, training steps on CUDA against the CPU (the fused kernels included),
# compute-sanitizer over a training step, the rest of the *_cuda tests, then the figures
# (FP32 against AMP training steps). A summary line per stage ends the output.
#
# usage (on the GPU machine, after `bash scripts/pack_tests.sh DIR` here and a checkout of
# the same commit there):
#   bash scripts/pack_tests.sh --exec DIR bash scripts/gpu_checks.sh [STAGE...]
# STAGE: kernels, train, sanitizer, cuda_tests, bench (default: all, in that order).
# Environment: STAGE_LIMIT (seconds per stage, default 150), JOBS (ctest, default nproc).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LIMIT=${STAGE_LIMIT:-150}
JOBS=${JOBS:-$(nproc)}
A=build/ampc
if [ "${1:-}" != "--one" ]; then # scratch of the whole run; a stage's child inherits it
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
fi
summary=()

stage() { # name: runs the function of that name in a child under the time limit
  local name=$1 t0 rc
  echo "=== $name"
  t0=$(date +%s)
  T=$T timeout "$LIMIT" bash "${BASH_SOURCE[0]}" --one "$name"
  rc=$?
  summary+=("$name: exit $rc in $(( $(date +%s) - t0 )) s")
}

kernels() { # the newest CUDA kernels first: optimizers, training ops, losses, then the op table
  (cd build && ctest --output-on-failure -j"$JOBS" -R '^cuda_test_cuda_(optim|grad|loss|dropout|coverage|reduce)' ) &&
    AMPC_TEST_CUDA_OPS_ONLY=Resize,ConvTranspose,Attention,com.microsoft:Attention,com.microsoft:MultiHeadAttention \
      build/tests/cuda_test_cuda_ops --jobs "$JOBS" &&
    build/tests/cuda_test_cuda_ops --jobs "$JOBS"
}

train() { # 50 training steps of every bundled training model, FP32 / fp16 / bf16, CUDA vs CPU
  python3 tests/runtime/test_fuse.py --ampc "$A" --device cuda --steps 50 --verbose
}

sanitizer() { # one AMP training step (fused check, gates, optimizer) under memcheck and racecheck
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { echo "no compute-sanitizer"; return 77; }
  "$A" models/mlp_train/model.onnx -o "$T/mlp_amp.onnx" >/dev/null &&
    "$cs" --tool memcheck --error-exitcode 9 "$A" run "$T/mlp_amp.onnx" --backend cuda --steps 3 \
      --inputs models/mlp_train/test_data_set_0 &&
    "$cs" --tool racecheck --error-exitcode 9 "$A" run "$T/mlp_amp.onnx" --backend cuda --steps 2 \
      --inputs models/mlp_train/test_data_set_0
}

cuda_tests() { # every other test of the suite on the CUDA backend
  (cd build && ctest --output-on-failure -j"$JOBS" -R '_cuda$' -E 'fuzz|runtime_test_fuse_py_cuda')
}

bench() { # FP32 against AMP training steps, interleaved (issue 20's figures)
  for m in amp_recipe gpt_decoder; do
    local args
    args=$(python3 -c "import json; print(' '.join(json.load(open('models/$m/train.json'))['grad']))")
    # shellcheck disable=SC2086
    "$A" grad "models/$m/model.onnx" -o "$T/$m.onnx" $args >/dev/null &&
      "$A" bench "$T/$m.onnx" --train --compare --backend cuda --iters 20 --warmup 3 \
        --inputs "models/$m/train_data"
  done
}

if [ "${1:-}" = "--one" ]; then # a stage, run by stage()
  T=${T:?}
  "$2"
  exit $?
fi

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(kernels train sanitizer cuda_tests bench)
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
for s in "${stages[@]}"; do
  case $s in
  kernels | train | sanitizer | cuda_tests | bench) stage "$s" ;;
  *) echo "gpu_checks.sh: unknown stage '$s'" >&2; exit 2 ;;
  esac
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
