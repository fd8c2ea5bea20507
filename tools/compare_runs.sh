#!/usr/bin/env bash
# Two ampc binaries, one answer: `ampc run` over the bundled models (fp32 and AMP_AUTO=1;
# models/mlp_train for 20 training steps), each binary on the CPU and each on the device
# simulator, comparing what the two print on the same backend (timings left out), every
# --outputs file and the --save-state checkpoint, byte for byte. A refactor of the
# executor must leave all of them the same. (Old on the CPU against new on the simulator
# is no comparison since AMP_AUTO's precision became `auto`: the simulator stands for a
# CUDA device and picks float16, the CPU bfloat16.) Prints one line per case; exit 1 if
# any differs. (A 'fallback:' line, under AMP_SIM_LACKS, is ignored.)
#
# usage: tools/compare_runs.sh OLD_AMPC NEW_AMPC
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=${1:?usage: compare_runs.sh OLD_AMPC NEW_AMPC}
B=${2:?usage: compare_runs.sh OLD_AMPC NEW_AMPC}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
clean() { sed -E 's/\([0-9.]+ ms\)//; s/^step time.*//; /^fallback: /d'; }
fail=0
for m in models/cnn_infer models/mlp_grads models/mlp_train; do
  steps=1
  [ "$m" = models/mlp_train ] && steps=20
  for auto in 0 1; do
    for be in cpu sim; do
      rm -rf "$T"/a_out "$T"/b_out "$T"/a.ckpt "$T"/b.ckpt
      AMP_AUTO=$auto "$A" run $m/model.onnx --steps $steps --backend $be --inputs $m/test_data_set_0 \
        --outputs "$T"/a_out --save-state "$T"/a.ckpt 2>&1 | clean > "$T"/a.txt
      AMP_AUTO=$auto "$B" run $m/model.onnx --steps $steps --backend $be --inputs $m/test_data_set_0 \
        --outputs "$T"/b_out --save-state "$T"/b.ckpt 2>&1 | clean > "$T"/b.txt
      r=same
      cmp -s "$T"/a.txt "$T"/b.txt || r="PRINTS DIFFER"
      for f in "$T"/a_out/*; do cmp -s "$f" "$T/b_out/$(basename "$f")" || r="$r; $(basename "$f") DIFFERS"; done
      [ -f "$T"/a.ckpt ] && { cmp -s "$T"/a.ckpt "$T"/b.ckpt || r="$r; CHECKPOINT DIFFERS"; }
      echo "$m AMP_AUTO=$auto, both on $be: $r ($(ls "$T"/a_out | wc -l) outputs, $(grep -c loss "$T"/a.txt) loss lines)"
      [ "$r" = same ] || fail=1
    done
  done
done
exit $fail
