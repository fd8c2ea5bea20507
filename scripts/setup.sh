#!/usr/bin/env bash
# Installs what ampc needs to build and test on Debian 12: the C toolchain, protobuf-c,
# ONNX's schema and conformance data, Criterion, and onnx/onnxruntime/numpy for the Python
# checks. Idempotent: a rerun on a ready machine checks and returns in about a second.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config
  libprotobuf-c-dev protobuf-c-compiler
  libonnx-dev libonnx-testdata
  libcriterion-dev libopenblas-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  graphviz clang libclang-rt-14-dev valgrind
  python3-pip
)
PY_PACKAGES=(onnx onnxruntime numpy)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: apt packages present"
fi

# python3 is whatever is first on PATH (on the CI machines, pyenv's 3.11 under /root/.pyenv).
if python3 -c "import onnx, onnxruntime, numpy" >/dev/null 2>&1; then
  echo "setup: python packages present ($(command -v python3))"
else
  echo "setup: pip installing ${PY_PACKAGES[*]} for $(command -v python3)"
  if ! python3 -m pip install -q "${PY_PACKAGES[@]}"; then
    # Debian's own python3 refuses pip installs outside a venv (PEP 668).
    python3 -m pip install -q --break-system-packages "${PY_PACKAGES[@]}"
  fi
  python3 -c "import onnx, onnxruntime, numpy"
fi

# onnxruntime-training, for tests/models/test_ort_training.py and tools/ort_train.py: its
# own venv (.venv-ort/), since it replaces onnxruntime and wants onnx 1.16 and numpy < 2.
# A 300 MB wheel; where it cannot be installed, that test skips and says why.
# AMPC_ORT_TRAINING=0 skips this step.
ORT_VENV="${AMPC_ORT_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv-ort}"
ORT_PACKAGES=("numpy<2" "onnx==1.16.2" "onnxruntime-training==1.19.2")
if [ "${AMPC_ORT_TRAINING:-1}" = "0" ]; then
  echo "setup: onnxruntime-training skipped (AMPC_ORT_TRAINING=0)"
elif "$ORT_VENV/bin/python" -c "from onnxruntime.capi._pybind_state import Module" >/dev/null 2>&1; then
  echo "setup: onnxruntime-training present ($ORT_VENV)"
else
  echo "setup: making $ORT_VENV with ${ORT_PACKAGES[*]}"
  if ! { python3 -m venv "$ORT_VENV" && "$ORT_VENV/bin/pip" install -q "${ORT_PACKAGES[@]}"; }; then
    echo "setup: WARNING: could not install onnxruntime-training; its tests will skip"
  fi
fi
