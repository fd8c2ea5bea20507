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
# STAGE: kernels, train, sanitizer, cuda_tests, nccl, bench (default: all, in that order).
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

nccl() { # issue 41: a one-rank NCCL communicator against none (the same losses and checkpoint bytes),
  # FP32 and fp16 (16-bit gradients packed and widened); then, with 2+ GPUs, N ranks against one
  # process on the whole batch. Needs the MPI plugin (libampc_mpi.so beside ampc).
  [ -e build/libampc_mpi.so ] || { echo "no build/libampc_mpi.so (build with libopenmpi-dev)"; return 77; }
  local run=() m=models/mlp_train amp rc=0 n
  if command -v mpirun >/dev/null; then run=(mpirun --allow-run-as-root -np 1 -x AMP_DATA_PARALLEL -x AMP_AUTO); fi
  (cd build && ctest --output-on-failure -R '^cuda_test_nccl_host$') || rc=1
  for amp in 0 1; do
    AMP_AUTO=$amp "$A" run $m/model.onnx --backend cuda --steps 5 --inputs $m/test_data_set_0 \
      --save-state "$T/none$amp.onnx" >"$T/none$amp.txt" || rc=1
    AMP_DATA_PARALLEL=mpi AMP_AUTO=$amp "${run[@]}" "$A" run $m/model.onnx --backend cuda --steps 5 \
      --inputs $m/test_data_set_0 --save-state "$T/nccl$amp.onnx" >"$T/nccl$amp.txt" 2>&1 || rc=1
    grep -q 'data parallel: 1 ranks' "$T/nccl$amp.txt" || { echo "AMP_AUTO=$amp: the one-rank job did not join"; rc=1; }
    grep -q 'gradients over nccl' "$T/nccl$amp.txt" || { echo "AMP_AUTO=$amp: NCCL did not carry the gradients"; rc=1; }
    ! grep 'NCCL not used' "$T/nccl$amp.txt" || rc=1 # the note of a job that reduces on the host instead
    diff <(grep '^step' "$T/none$amp.txt" | sed 's/ ([0-9.]* ms)//') \
      <(grep '^step' "$T/nccl$amp.txt" | sed 's/ ([0-9.]* ms)//') || { echo "AMP_AUTO=$amp: losses differ"; rc=1; }
    cmp "$T/none$amp.onnx" "$T/nccl$amp.onnx" || { echo "AMP_AUTO=$amp: checkpoints differ"; rc=1; }
    grep 'data parallel' "$T/nccl$amp.txt"
  done
  n=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$n" -ge 2 ] && command -v mpirun >/dev/null; then # 2 ranks on their own GPUs, each half the batch
    "$A" run $m/model.onnx --backend cuda --steps 5 --inputs $m/test_data_set_0 >"$T/one.txt" &&
      mpirun --allow-run-as-root -np 2 "$A" run $m/model.onnx --backend cuda --steps 5 \
        --inputs $m/test_data_set_0 >"$T/two.txt" || rc=1
    grep 'data parallel' "$T/two.txt"
    python3 - "$T/one.txt" "$T/two.txt" <<'PY' || rc=1
import re, sys
a, b = ([float(x) for x in re.findall(r"^step \d+: loss (\S+)", open(f).read(), re.M)] for f in sys.argv[1:])
print("one process:", a, "\n2 ranks:    ", b)
assert len(a) == len(b) == 5 and all(abs(x - y) <= 1e-5 * abs(x) + 1e-7 for x, y in zip(a, b)), "losses differ"
PY
  fi
  return $rc
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
[ ${#stages[@]} -gt 0 ] || stages=(kernels train sanitizer cuda_tests nccl bench)
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
for s in "${stages[@]}"; do
  case $s in
  kernels | train | sanitizer | cuda_tests | nccl | bench) stage "$s" ;;
  *) echo "gpu_checks.sh: unknown stage '$s'" >&2; exit 2 ;;
  esac
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
