#!/usr/bin/env python3
"""One front door per option (issue 27): the CLI (`ampc MODEL -o OUT --precision X`) and
AMP_AUTO's environment (`AMP_AUTO=1 AMP_PRECISION=X ampc run MODEL`) take the same values
and refuse the same ones with the same message, as both are parsed by one table
(passes/options.c). Each bad value below is refused by both doors with one exit code and
one message, the door's name aside ("--precision 'X'" against "AMP_PRECISION='X'"); each
good one is accepted by both. Also: the pass list takes spaces after its commas,
`ampc calibrate --loss-scale-init` is checked as the convert command's, a numeric flag
(--lr, --seed, --steps, ...) is checked alike by every command that takes it (one row of
tools/cli_values.c: `ampc grad --lr 2e6` passed while `ampc run --lr 2e6` was refused), and
--help names each option's variable.
Prints "N passed, M failed" last.

usage: test_option_parity.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

MODEL = os.path.join(ROOT, "models", "cnn_infer", "model.onnx")
HINT = re.compile(r" \(run 'ampc (?:[a-z]+ )?--help' for usage\)$")

# (CLI option, variable, value): refused by both.
BAD = [
    ("precision", "AMP_PRECISION", "fp8"),
    ("precision", "AMP_PRECISION", "FP16"),
    ("loss-scale", "AMP_LOSS_SCALE", "1e39"),  # past float32's largest: the flag refused it, the variable not
    ("loss-scale", "AMP_LOSS_SCALE", "-3"),
    ("loss-scale", "AMP_LOSS_SCALE", "inf"),
    ("loss-scale", "AMP_LOSS_SCALE", "12x"),
    ("opset-upgrade", "AMP_OPSET_UPGRADE", "sometimes"),
    ("opset-upgrade", "AMP_OPSET_UPGRADE", "23"),
    ("opset-upgrade", "AMP_OPSET_UPGRADE", "6"),
    ("allow", "AMP_ALLOWLIST_ADD", "NoSuchOp"),
    ("deny", "AMP_DENYLIST_ADD", "MatMul, Nope,AlsoNot"),
    ("calibration", "AMP_CALIBRATION", "/nonexistent/ampc.stats"),
]

# (CLI option, variable, value): accepted by both.
GOOD = [
    ("precision", "AMP_PRECISION", "fp16"),
    ("precision", "AMP_PRECISION", "float16"),
    ("precision", "AMP_PRECISION", "half"),  # refused by the flag before
    ("precision", "AMP_PRECISION", "bf16"),
    ("precision", "AMP_PRECISION", "bfloat16"),
    ("precision", "AMP_PRECISION", "auto"),
    ("loss-scale", "AMP_LOSS_SCALE", "dynamic"),
    ("loss-scale", "AMP_LOSS_SCALE", "none"),
    ("loss-scale", "AMP_LOSS_SCALE", "3e38"),
    ("opset-upgrade", "AMP_OPSET_UPGRADE", "never"),
    ("opset-upgrade", "AMP_OPSET_UPGRADE", "17"),  # refused by the variable before
    ("allow", "AMP_ALLOWLIST_ADD", "Conv, com.microsoft:FusedGemm"),
]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMP_")}
    env.update(extra)
    return env


def cli(ctx, flag, value):
    out = os.path.join(ctx["tmp"], "out.onnx")
    return subprocess.run([ctx["ampc"], MODEL, "-o", out, "-q", f"--{flag}", value], capture_output=True,
                          text=True, env=clean_env(), timeout=120)


def auto(ctx, var, value):
    return subprocess.run([ctx["ampc"], "run", MODEL, "--backend", "cpu", "--dim", "batch=1"], capture_output=True,
                          text=True, env=clean_env(AMP_AUTO="1", **{var: value}), timeout=120)


def message(r, label):
    """The one error line, the door's own parts taken out: "ampc: ", the model's name run
    puts before, the --help hint, and the label (flag or variable) made <OPT>."""
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ampc: ") and "note:" not in ln]
    assert len(lines) == 1, f"one error line expected: {r.stderr!r}"
    m = lines[0][len("ampc: "):]
    for prefix in (MODEL + ": ", os.path.relpath(MODEL) + ": "):
        if m.startswith(prefix):
            m = m[len(prefix):]
    m = HINT.sub("", m)
    return re.sub(r"^(--[a-z0-9-]+ |[A-Z_]+=)'", "<OPT>'", re.sub(r"^(--[a-z0-9-]+|[A-Z_]+):", "<OPT>:", m))


def bad_values(ctx):
    for flag, var, value in BAD:
        c, e = cli(ctx, flag, value), auto(ctx, var, value)
        assert c.returncode != 0 and c.returncode == e.returncode, \
            f"{flag}/{var} '{value}': exit {c.returncode} (CLI) and {e.returncode} (AMP_AUTO): {c.stderr}{e.stderr}"
        mc, me = message(c, flag), message(e, var)
        assert mc == me, f"'{value}': the CLI says {mc!r}, AMP_AUTO {me!r}"
        assert f"--{flag}" in c.stderr and var in e.stderr, f"each names its door: {c.stderr}{e.stderr}"


def good_values(ctx):
    for flag, var, value in GOOD:
        c, e = cli(ctx, flag, value), auto(ctx, var, value)
        assert c.returncode == 0, f"--{flag} '{value}' refused: {c.stderr}"
        assert e.returncode == 0, f"{var}='{value}' refused: {e.stderr}"


def pass_list_spaces(ctx):
    out = os.path.join(ctx["tmp"], "p.onnx")
    for ok in ["infer, amp", " infer ,amp ", "", " none "]:
        r = subprocess.run([ctx["ampc"], MODEL, "-o", out, "--passes", ok], capture_output=True, text=True,
                           env=clean_env(), timeout=120)
        assert r.returncode == 0, f"--passes '{ok}': {r.stderr}"
    r = subprocess.run([ctx["ampc"], MODEL, "-o", out, "--passes", "infer, ,amp"], capture_output=True, text=True,
                       env=clean_env(), timeout=120)
    assert r.returncode == 2 and "empty entry" in r.stderr, r.stderr


def backend(ctx):
    """`ampc run --backend` and AMP_BACKEND (the runtime's own option) refuse alike too."""
    for value in ["tpu", "CPU", ""]:
        c = subprocess.run([ctx["ampc"], "run", MODEL, "--backend", value], capture_output=True, text=True,
                           env=clean_env(), timeout=120)
        if not value:  # a variable set empty is unset: only the flag refuses ''
            assert c.returncode == 2 and "--backend ''" in c.stderr, c.stderr
            continue
        e = subprocess.run([ctx["ampc"], "run", MODEL, "--dim", "batch=1"], capture_output=True, text=True,
                           env=clean_env(AMP_BACKEND=value), timeout=120)
        assert c.returncode == 2 and e.returncode == 2, f"'{value}': {c.stderr}{e.stderr}"
        assert message(c, "") == message(e, ""), f"'{value}': {c.stderr} / {e.stderr}"


def calibrate_scale(ctx):
    """`ampc calibrate --loss-scale-init` is the convert command's option: one check (it took
    1e39, past float32's largest, before)."""
    stats = os.path.join(ctx["tmp"], "s.stats")
    for value in ["1e39", "0", "x"]:
        c = cli(ctx, "loss-scale-init", value)
        k = subprocess.run([ctx["ampc"], "calibrate", MODEL, "-o", stats, "--loss-scale-init", value],
                           capture_output=True, text=True, env=clean_env(), timeout=120)
        assert c.returncode == 2 and k.returncode == 2, f"'{value}': {c.stderr}{k.stderr}"
        assert message(c, "") == message(k, ""), f"'{value}': {c.stderr} / {k.stderr}"


# A numeric flag, a value it refuses and the commands that take it ("" is the conversion).
NUMERIC = [
    ("lr", "2e6", ["", "run", "bench", "grad", "export"]),
    ("lr", "0", ["", "run", "grad"]),
    ("seed", "-1", ["run", "bench", "calibrate", "compare"]),
    ("seed", "0x10", ["run", "calibrate"]),
    ("steps", "0", ["run", "calibrate"]),
    ("timeout", "0", ["run", "bench"]),
    ("max-iterations", "0", ["run", "bench"]),
    ("threads", "0", ["run", "bench"]),
]


def numeric_flags(ctx):
    """Each command refuses a numeric flag's bad value with one message (its hint aside)."""
    out = os.path.join(ctx["tmp"], "n.onnx")
    for flag, value, cmds in NUMERIC:
        said = set()
        for cmd in cmds:
            argv = [ctx["ampc"]] + ([cmd] if cmd else []) + [MODEL] + (["-o", out] if cmd in ("", "grad", "export")
                                                                       else [])
            argv += ([MODEL] if cmd == "compare" else []) + [f"--{flag}", value]
            r = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120)
            assert r.returncode == 2, f"ampc {cmd} --{flag} '{value}': exit {r.returncode}: {r.stderr}"
            said.add(message(r, flag))
        assert len(said) == 1, f"--{flag} '{value}': the commands disagree: {said}"
    r = subprocess.run([ctx["ampc"], "grad", MODEL, "-o", out, "--lr", "1e6", "-q"], capture_output=True, text=True,
                       env=clean_env(), timeout=120)
    assert r.returncode == 0, f"grad --lr 1e6, the top of the range: {r.stderr}"


def help_names_variables(ctx):
    h = subprocess.run([ctx["ampc"], "--help"], capture_output=True, text=True, timeout=60).stdout
    flat = " ".join(h.split())
    for flag, var, _ in BAD + GOOD:
        assert f"(variable: {var})" in flat, f"--help does not name {var}"
    assert "half" in flat and "bfloat16" in flat, "--help gives the precision's spellings"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = {"ampc": os.path.abspath(args.ampc), "tmp": tl.tempdir("ampc_opts_")}
    tests = [
        ("bad values: both doors refuse them with one message", bad_values),
        ("good values: both doors take them", good_values),
        ("--passes trims spaces as the library does", pass_list_spaces),
        ("--backend and AMP_BACKEND refuse alike", backend),
        ("calibrate's --loss-scale-init is convert's", calibrate_scale),
        ("numeric flags: every command checks them alike", numeric_flags),
        ("--help names each option's variable", help_names_variables),
    ]
    return tl.run(tests, ctx, verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
