#!/usr/bin/env bash
# The CUDA backend's figures (issue "CUDA executor, part 1"), on a machine with a GPU:
# FP32 against AMP (ampc's fp16 conversion) with `ampc bench --backend cuda`, on the
# bundled CNN and on the models tools/make_bench_models.py writes (ResNet-50 batch 64, a
# BERT-base encoder batch 32 x 128), and a 4096^3 fp16 GEMM through the backend.
#
# usage: scripts/bench_cuda.sh DIR [ITERS]    (DIR: where make_bench_models.py wrote them;
#                                              models missing there are skipped)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=${1:?usage: bench_cuda.sh DIR [ITERS]}
ITERS=${2:-20}
A=build/ampc
bench() { # label model [env...]
  local label=$1 model=$2
  shift 2
  echo "== $label"
  env "$@" "$A" bench "$model" --backend cuda --iters "$ITERS" --warmup 3 2>&1 | grep -v '^ampc: note'

}
for m in models/cnn_infer/model.onnx "$D/resnet50.onnx" "$D/bert.onnx"; do
  [ -f "$m" ] || { echo "== $m: missing, skipped"; continue; }
  name=$(basename "$(dirname "$m")")
  [ "$name" = "$(basename "$D")" ] && name=$(basename "$m" .onnx)
  "$A" "$m" -o "$D/${name}_amp.onnx" >/dev/null || { echo "== $name: conversion failed"; continue; }
  bench "$name fp32" "$m"
  bench "$name fp32, TF32 allowed" "$m" AMP_TF32=1
  bench "$name AMP fp16" "$D/${name}_amp.onnx"
  for v in "$m" "$D/${name}_amp.onnx"; do # where the device time goes
    echo "== $(basename "$v") device time by op (AMP_CUDA_PROFILE, 5 runs + 1 warm-up)"
    AMP_CUDA_PROFILE=1 "$A" bench "$v" --backend cuda --iters 5 --warmup 1 2>&1 | grep -A8 '^AMP_CUDA_PROFILE'
  done
done
if [ -f "$D/gemm4096.onnx" ]; then
  out=$(bench "gemm 4096^3 fp16" "$D/gemm4096.onnx")
  echo "$out"
  AMP_CUDA_PROFILE=1 "$A" bench "$D/gemm4096.onnx" --backend cuda --iters 5 --warmup 1 2>&1 | grep -A3 '^AMP_CUDA_PROFILE'
  ms=$(echo "$out" | sed -n 's/^time per run: median \([0-9.]*\) ms.*/\1/p')
  dms=$(echo "$out" | sed -n 's/^device time per run: median \([0-9.]*\) ms.*/\1/p')
  # the run includes copying A in (32 MiB) and Y out (32 MiB); the device time is the GEMM's
  [ -n "$ms" ] && awk -v ms="$ms" -v dms="${dms:-0}" 'BEGIN { printf "gemm 4096^3: %.1f TFLOP/s per run with the copies in and out, %.1f TFLOP/s on the device (H100 SXM dense fp16 peak: 989)\n", 2 * 4096^3 / (ms * 1e-3) / 1e12, dms > 0 ? 2 * 4096^3 / (dms * 1e-3) / 1e12 : 0 }'
fi
