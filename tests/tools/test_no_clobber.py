#!/usr/bin/env python3
"""No output replaces a file the command still reads (issue 43, item 1): a model whose
weights live in `x.onnx.data`, converted with `-o x.onnx --external-data always`, used to
get its data file replaced by the output's (exit 0, the input no longer loaded). Checked:

- `-o x.onnx --external-data always` (the data file OUT implies is the input's) and
  `-o x.onnx.data` (OUT is the input's data file): exit 2, both names in the message, the
  data file byte for byte as it was, the input loads;
- `-o x.onnx` where an older x.onnx also reads x.onnx.data: the output is written and the
  data file, which the input still reads, is kept (it used to be removed with the model it
  belonged to);
- converting in place (`-o MODEL`, external data) still works;
- `ampc run M --save-state M`: exit 2, M intact (it used to become a 0-node checkpoint).

usage: test_no_clobber.py --ampc PATH [--testdata DIR] [--verbose]"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    a.ampc = os.path.abspath(a.ampc)  # the commands run in the temporary folder
    tmp = tempfile.mkdtemp(prefix="ampc_clobber_")
    passed = failed = 0

    def ampc(*args, cwd=tmp):
        r = subprocess.run([a.ampc, *args], capture_output=True, text=True, cwd=cwd)
        if a.verbose:
            print("$ ampc " + " ".join(args) + f" -> {r.returncode}\n" + r.stdout + r.stderr)
        return r

    def digest(name):
        with open(os.path.join(tmp, name), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def loads(name):
        r = ampc("verify", name)
        assert r.returncode == 0, f"{name} no longer loads: {r.stderr}"

    def fresh():
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        src = os.path.join(ROOT, "models", "cnn_infer", "model.onnx")
        r = ampc(src, "-o", "x.onnx", "--external-data", "always", "--passes", "none", "-q")
        assert r.returncode == 0, r.stderr
        os.rename(os.path.join(tmp, "x.onnx"), os.path.join(tmp, "model.onnx"))  # model.onnx reads x.onnx.data
        return digest("x.onnx.data")

    def case(label, fn):
        nonlocal passed, failed
        try:
            fn()
            passed += 1
            print(f"ok   {label}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {label}: {e}")

    def refused(args, label):
        def check():
            before = fresh()
            r = ampc("model.onnx", *args)
            assert r.returncode == 2, f"exit {r.returncode}: {r.stderr}"
            assert "x.onnx.data" in r.stderr and "reads" in r.stderr, r.stderr
            assert digest("x.onnx.data") == before, "the input's data file changed"
            loads("model.onnx")
        case(label, check)

    refused(["-o", "x.onnx", "--external-data", "always"], "-o x.onnx --external-data always: refused, input intact")
    refused(["-o", "x.onnx.data"], "-o the input's data file: refused, input intact")

    def kept():
        before = fresh()
        shutil.copy(os.path.join(tmp, "model.onnx"), os.path.join(tmp, "x.onnx"))  # an old x.onnx reading x.onnx.data
        r = ampc("model.onnx", "-o", "x.onnx", "-q")
        assert r.returncode == 0, r.stderr
        assert os.path.exists(os.path.join(tmp, "x.onnx.data")) and digest("x.onnx.data") == before, \
            "the data file the input reads was removed with the model it replaced"
        loads("model.onnx")
        loads("x.onnx")
    case("-o over a model sharing the input's data file: written, the data kept", kept)

    def in_place():
        fresh()
        r = ampc("model.onnx", "-o", "model.onnx", "--external-data", "always", "-q")
        assert r.returncode == 0, r.stderr
        loads("model.onnx")
    case("converting in place with external data still works", in_place)

    def save_state():
        src = os.path.join(ROOT, "models", "mlp_train", "model.onnx")
        shutil.copy(src, os.path.join(tmp, "train.onnx"))
        before = digest("train.onnx")
        r = ampc("run", "train.onnx", "--steps", "1", "--save-state", "train.onnx")
        assert r.returncode == 2, f"exit {r.returncode}: {r.stderr}"
        assert "--save-state" in r.stderr and "MODEL" in r.stderr, r.stderr
        assert digest("train.onnx") == before, "the training model changed"
    case("run --save-state MODEL: refused, the model intact", save_state)

    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
