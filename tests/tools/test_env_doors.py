#!/usr/bin/env python3
"""One door for every variable (issue 39): walks the options table (passes/options.c, as
`gen_cli_md --rows` lists it) and sets every AMP_* variable, through each door its row
names, to the value the row says it takes and to the one it says it refuses:

- refused: the door stops with a usage error naming the variable and the value (exit 2;
  a statistics file that cannot be read is bad input, exit 1, as --calibration's);
- taken: the door runs (exit 0) and the value shows: what it prints and writes differs from
  the same run without the variable. Never ignored: `AMP_PRECISION=bf16 ampc MODEL -o OUT`
  wrote float16 before, and `AMP_PRECISION=fp8` passed.

The doors: `convert` (ampc MODEL -o OUT), `session` (ampc run: every session), `amp`
(AMP_AUTO=1 ampc run), `command` (ampc verify: every command), `export` (ampc export
--precision auto). A few variables act where this machine cannot see them (CUDA's, the CPU's
thread count and oneDNN switch, data parallelism's outside an MPI job): UNSEEN names them
and why; tests/runtime/test_settings.c follows their values to the backend's settings and
the CPU's knobs, tests/runtime/test_data_parallel.py the data-parallel ones under mpirun. A variable added to the
table with no door, or whose value shows nowhere and is not in UNSEEN, fails this test.
Prints "N passed, M failed" last.

usage: test_env_doors.py --ampc PATH [--testdata DIR] [--verbose]
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

TRAIN = os.path.join(ROOT, "models", "mlp_train", "model.onnx")
STATS = "mlp.stats"  # `ampc calibrate`'s, copied into each run's folder that names one

# Each door: the command (after "ampc") and the variables around it.
DOORS = {
    # --explain: the colouring's reasons, where a list edit shows even when the output is the same
    "convert": (["TRAIN", "-o", "out.onnx", "--explain", "loss/SoftmaxCrossEntropyLoss"], {}),
    "session": (["run", "TRAIN", "--steps", "2"], {}),
    "amp": (["run", "TRAIN", "--steps", "2"], {"AMP_AUTO": "1", "AMP_PRECISION": "fp16", "AMP_LOG_PATH": "log"}),
    "command": (["verify", "TRAIN"], {}),
    "export": (["export", "TRAIN", "-o", "out.onnx", "--precision", "auto"], {}),
}

# What a variable needs around it to show, the value of the run it is compared with (None:
# unset), and the conversion's command where it differs.
NEEDS = {
    # what auto decides by (with none, no amp pass runs: nothing to --explain)
    "AMP_CPU_FEATURES": ({"AMP_PRECISION": "auto"}, "none", ["TRAIN", "-o", "out.onnx"]),
    "AMP_SIM_LACKS": ({"AMP_BACKEND": "sim"}, None, None),
    "AMP_SIM_REFUSES": ({"AMP_BACKEND": "sim"}, None, None),
    "AMP_CALIBRATION": ({"AMP_CALIB_MAX_ACTIVATION": "0.5"}, None, None),  # so that the ranges bite
    "AMP_CALIB_MAX_ACTIVATION": ({"AMP_CALIBRATION": STATS}, None, None),
    "AMP_CALIB_MIN_ACTIVATION": ({"AMP_CALIBRATION": STATS}, None, None),
}
NO_NEEDS = ({}, None, None)

# Taken, but not visible on a machine without a GPU: where the value goes instead.
UNSEEN = {
    "AMP_TF32": "CUDA's GEMMs only (the backend's settings: test_settings.c)",
    "AMP_CUDA_SYNC": "CUDA only (the backend's settings: test_settings.c)",
    "AMP_CUDA_PROFILE": "CUDA only (the backend's settings: test_settings.c)",
    "AMP_DNNL": "the CPU's oneDNN switch: same results (test_settings.c, kernels_test_dnnl_conv)",
    "AMP_THREADS": "the thread knob: the same results whatever N (test_settings.c, tools_test_cli_amp)",
    # data parallelism: a process no MPI launcher started joins no job, whatever these say
    "AMP_DATA_PARALLEL": "joining an MPI job (test_data_parallel.py: t_one_rank's mpi, t_env_mode's off)",
    "AMP_COMM_TIMEOUT": "a job's collectives' deadline (test_data_parallel.py: t_hangs' 3 s)",
    "AMP_MPI_PLUGIN": "the plugin a job opens (test_data_parallel.py: t_env_mode; test_settings.c)",
    "AMP_NCCL_LIB": "CUDA's NCCL, in a job (the backend's settings: test_settings.c; tests/cuda/test_nccl_host.c)",
}

# A refused value's exit code where it is not 2.
REFUSED_CODE = {"AMP_CALIBRATION": 1}


def table(ampc):
    gen = os.path.join(os.path.dirname(ampc), "gen_cli_md")
    out = subprocess.run([gen, "--rows"], capture_output=True, text=True, check=True, timeout=60).stdout
    rows = []
    for line in out.splitlines():
        var, doors, example, refused, flag = line.split("\t")
        rows.append({"var": var, "doors": doors.split(",") if doors else [], "example": example,
                     "refused": refused, "flag": None if flag == "-" else flag})
    return rows


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMP_")}
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


def clean_text(s):
    """What a run says, less what differs between two runs of the same thing (timings)."""
    s = re.sub(r"\([0-9.]+ ms\)", "", s)
    return "\n".join(ln for ln in s.splitlines() if not ln.startswith(("step time", "time ")))


def run(ctx, door, env, argv=None):
    """The door's command in a fresh folder with `env`: (exit code, stderr, what it showed:
    its messages and every file it wrote, by name and bytes)."""
    ctx["n"] += 1
    d = os.path.join(ctx["tmp"], f"r{ctx['n']}")
    os.makedirs(d)
    made = set()  # files a value names, which the run did not write
    for v in env.values():
        if v and v.endswith(".stats") and "/" not in v:  # a statistics file: the model's, made once
            shutil.copy(ctx["stats"], os.path.join(d, v))
        elif v and v.startswith("./"):  # a file the row wants to exist (a library's path): empty
            open(os.path.join(d, v), "wb").close()
            made.add(os.path.normpath(v))
    argv = argv if argv and door == "convert" else DOORS[door][0]
    r = subprocess.run([ctx["ampc"]] + [TRAIN if a == "TRAIN" else a for a in argv], cwd=d, capture_output=True,
                       text=True, env=clean_env(env), timeout=300)
    shown = [clean_text(r.stdout), clean_text(r.stderr)]
    for base, _, files in sorted(os.walk(d)):
        for f in sorted(files):
            p = os.path.join(base, f)
            if f.endswith(".stats") or os.path.relpath(p, d) in made:
                continue
            with open(p, "rb") as fh:
                data = fh.read()
            shown.append((os.path.relpath(p, d), data if not f.endswith(".txt") else clean_text(data.decode())))
    shutil.rmtree(d)
    return r.returncode, r.stderr, shown


def every_variable_has_a_door(ctx):
    for row in ctx["rows"]:
        assert row["doors"], f"{row['var']}: no door reads it"
        for door in row["doors"]:
            assert door in DOORS, f"{row['var']}: door '{door}' unknown to this test"
    assert {r["var"] for r in ctx["rows"]} >= set(UNSEEN) | set(NEEDS), "UNSEEN/NEEDS name variables the table lacks"


def refused_everywhere(ctx):
    for row in ctx["rows"]:
        for door in row["doors"]:
            needs, _, argv = NEEDS.get(row["var"], NO_NEEDS)
            env = {**DOORS[door][1], **needs, row["var"]: row["refused"]}
            code, err, _ = run(ctx, door, env, argv)
            want = REFUSED_CODE.get(row["var"], 2)
            assert code == want, f"{door}: {row['var']}='{row['refused']}': exit {code}, not {want}: {err}"
            named = f"{row['var']}='{row['refused']}'" in err or f"{row['var']}:" in err
            assert named, f"{door}: {row['var']}='{row['refused']}' refused without naming it: {err}"
            ctx["notes"].append(f"{door:8} {row['var']}='{row['refused']}' -> exit {code}")


def taken_and_applied(ctx):
    for row in ctx["rows"]:
        for door in row["doors"]:
            needs, baseline, argv = NEEDS.get(row["var"], NO_NEEDS)
            around = {**DOORS[door][1], **needs}
            code0, err0, base = run(ctx, door, {**around, row["var"]: baseline}, argv)
            assert code0 == 0, f"{door}: the run without {row['var']} failed: {err0}"
            code, err, shown = run(ctx, door, {**around, row["var"]: row["example"]}, argv)
            assert code == 0, f"{door}: {row['var']}='{row['example']}' refused: {err}"
            if row["var"] in UNSEEN:
                ctx["notes"].append(f"{door:8} {row['var']}='{row['example']}' taken; {UNSEEN[row['var']]}")
                continue
            assert shown != base, f"{door}: {row['var']}='{row['example']}' ignored: the run shows nothing else"
            ctx["notes"].append(f"{door:8} {row['var']}='{row['example']}' applied")


def flags_win(ctx):
    """A flag given wins over its variable: --precision fp16 under AMP_PRECISION=bf16."""
    _, _, a = run(ctx, "convert", {"AMP_PRECISION": "bf16"})
    _, _, b = run(ctx, "convert", {"AMP_PRECISION": "bf16"}, DOORS["convert"][0] + ["--precision", "fp16"])
    _, _, c = run(ctx, "convert", {"AMP_PRECISION": "fp16"})
    assert b == c and a != c, "--precision fp16 did not win over AMP_PRECISION=bf16"


def main():
    args = tl.args(__doc__)
    ampc = os.path.abspath(args.ampc)
    tmp = tl.tempdir("ampc_env_doors_")
    stats = os.path.join(tmp, STATS)
    subprocess.run([ampc, "calibrate", TRAIN, "-o", stats, "--backend", "cpu"], check=True, capture_output=True,
                   env=clean_env({}), timeout=300)
    ctx = {"ampc": ampc, "tmp": tmp, "stats": stats, "rows": table(ampc), "n": 0, "notes": []}
    tests = [
        ("every variable of the table has a door this test knows", every_variable_has_a_door),
        ("every variable refused at every door, named", refused_everywhere),
        ("every variable taken and applied at every door", taken_and_applied),
        ("a flag wins over its variable", flags_win),
    ]
    rc = tl.run(tests, ctx, verbose=args.verbose)
    if args.verbose:
        print("\n".join(ctx["notes"]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
