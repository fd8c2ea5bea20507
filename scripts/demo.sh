#!/usr/bin/env bash
# The demo: installs dependencies, builds ampc, converts the bundled inference CNN
# (models/cnn_infer, or the model folder given as $1) and shows what happened: the verify
# summary, the IR, onnx.checker plus onnxruntime on the converted model against the
# reference outputs, ampc's own CPU executor running it, and a short training run of the
# bundled MLP (models/mlp_train), in FP32 and then converted to fp16 with loss scaling, and
# `ampc grad` making a training graph of the bundled GPT-style PyTorch export, trained in
# FP32 and in fp16.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS="${JOBS:-2}"
MODEL_DIR="${1:-models/cnn_infer}"
MODEL="$MODEL_DIR/model.onnx"
OUT="out/model_amp.onnx"

bash scripts/setup.sh
PY="$(command -v python3)"

echo "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build build -j"$JOBS" --target ampc
AMPC=build/ampc
mkdir -p out

echo
echo "== $AMPC --version"
"$AMPC" --version

echo
echo "== $AMPC verify $MODEL"
"$AMPC" verify "$MODEL"

echo
echo "== $AMPC $MODEL -o $OUT --print"
"$AMPC" "$MODEL" -o "$OUT" --print

echo
echo "== $AMPC verify $OUT"
"$AMPC" verify "$OUT"

echo
echo "== onnx.checker and onnxruntime on $OUT, against $MODEL_DIR/test_data_set_*"
"$PY" - "$MODEL" "$OUT" "$MODEL_DIR" <<'PYEOF'
import collections, glob, os, sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

src, out, folder = sys.argv[1:4]
ort.set_default_logger_severity(3)  # old opsets make onnxruntime chatty

def summary(path):
    m = onnx.load(path)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    types = collections.Counter(onnx.TensorProto.DataType.Name(t.data_type) for t in m.graph.initializer)
    return m, dict(ops), dict(types)

m_in, ops_in, w_in = summary(src)
m_out, ops_out, w_out = summary(out)
onnx.checker.check_model(m_out, full_check=True)
print(f"onnx.checker: {out} is valid ONNX")
print(f"ops     before {ops_in}  after {ops_out}")
print(f"weights before {w_in}  after {w_out}")
print(f"size    before {os.path.getsize(src)} bytes  after {os.path.getsize(out)} bytes")

def load_pb(p):
    t = onnx.TensorProto()
    with open(p, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)

sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
if not sets:
    print("no test_data_set_* beside the model: onnxruntime loaded it, nothing to compare")
worst = 0.0
for ds in sets:
    ins = sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    want = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
    # Older exporters list weights as graph inputs too; feed only what the data set has.
    feeds = {i.name: load_pb(p) for i, p in zip(sess.get_inputs(), ins)}
    got = sess.run(None, feeds)
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g, dtype=np.float64); w = np.asarray(w, dtype=np.float64)
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        rel = err / max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-30)
        worst = max(worst, rel)
        print(f"{os.path.basename(ds)} output {k}: shape {tuple(w.shape)}, max |error| {err:.3g} (relative {rel:.3g})")
tol = 1e-2  # fp16 keeps ~3 decimal digits; the reference is fp32
if worst > tol:
    sys.exit(f"FAILED: relative error {worst:.3g} exceeds {tol}")
print(f"onnxruntime: outputs match the FP32 reference within {tol} (relative)")
PYEOF

if [ -d "$MODEL_DIR/test_data_set_0" ]; then
  echo
  echo "== $AMPC run $OUT --inputs $MODEL_DIR/test_data_set_0 (ampc's CPU executor)"
  "$AMPC" run "$OUT" --inputs "$MODEL_DIR/test_data_set_0"
fi

echo
echo "== $AMPC run models/mlp_train/model.onnx --steps 20 (FP32 training: forward, loss, backward, Momentum)"
"$AMPC" run models/mlp_train/model.onnx --steps 20 --inputs models/mlp_train/test_data_set_0

echo
echo "== $AMPC models/mlp_train/model.onnx -o out/mlp_train_amp.onnx --growth-interval 5 (fp16 + dynamic loss scaling)"
"$AMPC" models/mlp_train/model.onnx -o out/mlp_train_amp.onnx --growth-interval 5
echo "== $AMPC run out/mlp_train_amp.onnx --steps 20 (the same training in mixed precision)"
"$AMPC" run out/mlp_train_amp.onnx --steps 20 --inputs models/mlp_train/test_data_set_0

G=models/gpt_decoder
echo
echo "== $AMPC grad $G/model.onnx -o out/gpt_train.onnx (a PyTorch export of a GPT-2-style decoder -> training graph, Adam)"
"$AMPC" grad "$G/model.onnx" -o out/gpt_train.onnx --optimizer adam --lr 1e-3 --freeze '*mask*'
echo "== $AMPC out/gpt_train.onnx -o out/gpt_train_amp.onnx (fp16 + dynamic loss scaling)"
"$AMPC" out/gpt_train.onnx -o out/gpt_train_amp.onnx
for m in out/gpt_train.onnx out/gpt_train_amp.onnx; do
  echo "== $AMPC run $m --steps 30 --inputs $G/train_data (every 10th step)"
  "$AMPC" run "$m" --steps 30 --inputs "$G/train_data" | grep -E '^step (1|10|20|30):|^step time'
done

echo
echo "demo: done; the converted model is $OUT"
