#!/bin/sh
# Runs the command given when this machine has a usable NVIDIA GPU, else exits 77, which
# ctest reports as skipped: the *_cuda tests run everywhere CI runs and skip without one.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "no CUDA device: skipped"
  exit 77
fi
exec "$@"
