#!/usr/bin/env python3
"""`--inputs DIR` reads every input file there or refuses (issue 43, items 4 and 11):
input_0.pb and input_2.pb without input_1.pb used to train on random labels with exit 0
(the reader stopped at the gap); a 0-byte input_1.pb failed with exit 3 naming no file.
Now: a gap is a usage error naming both files, an input_*.pb not named input_N.pb is
refused, an empty file is an input error naming it, and ONNX's output_N.pb beside the
inputs is still no input (a test_data_set_0 folder runs as before).

usage: test_inputs_dir.py --ampc PATH [--testdata DIR] [--verbose]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.path.join(ROOT, "models", "mlp_train", "test_data_set_0")
MODEL = os.path.join(ROOT, "models", "mlp_train", "model.onnx")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ampc_inputs_")
    passed = failed = 0
    cases = [  # files: name -> source file in DATA, or "" for an empty file
        ("a gap", {"input_0.pb": "input_0.pb", "input_2.pb": "input_1.pb"}, 2,
         ["input_2.pb is there but input_1.pb is missing"]),
        ("a name not input_N.pb", {"input_0.pb": "input_0.pb", "input_1.pb": "input_1.pb", "input_01.pb": "input_1.pb"},
         2, ["input_01.pb is not named input_N.pb"]),
        ("an empty input file", {"input_0.pb": "input_0.pb", "input_1.pb": ""}, 1, ["input_1.pb: an empty file"]),
        ("ONNX's test data set (output_0.pb beside)", {f: f for f in os.listdir(DATA)}, 0, ["loss"]),
    ]
    for label, files, code, want in cases:
        d = os.path.join(tmp, label.replace(" ", "_").replace("'", "").replace("(", "").replace(")", ""))
        os.makedirs(d)
        for name, src in files.items():
            if src:
                shutil.copy(os.path.join(DATA, src), os.path.join(d, name))
            else:
                open(os.path.join(d, name), "wb").close()
        r = subprocess.run([a.ampc, "run", MODEL, "--inputs", d, "--steps", "1"], capture_output=True, text=True)
        if a.verbose:
            print(r.stdout + r.stderr)
        text = r.stdout + r.stderr
        if r.returncode == code and all(w in text for w in want):
            passed += 1
            print(f"ok   {label}: exit {code}")
        else:
            failed += 1
            print(f"FAIL {label}: exit {r.returncode} (want {code}): {text.strip()[:300]}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
