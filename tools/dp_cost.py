#!/usr/bin/env python3
"""Data-parallel step-time model for machines no one here has (docs/parallel.md, "Past this
machine: a cost model"; issue 41).

Every rank runs the measured single-device step (forward, backward, optimizer) on its own
slice and then all-reduces the gradients. A ring all-reduce of S bytes over N ranks moves
2(N-1)/N x S bytes through each rank's link, so with the link's bus bandwidth B (nccl-tests'
"busbw", which is defined to make this factor disappear) it takes

    t_comm = 2(N-1)/N x S / B  +  calls x latency

(N=2: S/B; N=8: 1.75 S/B). Over H hosts of G devices each it is taken in two levels, as NCCL
does with one NIC per device: the intra-host all-reduce's traffic over the intra link, plus
each device's 1/G share all-reduced over H hosts on its own NIC:

    t_comm = 2(G-1)/G x S / B_intra  +  2(H-1)/H x (S/G) / B_inter  +  calls x latency_inter

ampc reduces the gradients as float32 (float16/bfloat16 ones widened) in AllReduceMean nodes,
buckets cut in backward order at 1 MiB (the first), then 4 MiB, or 32 gradients
(passes/allreduce.c), so S = 4 x parameters that get gradients and calls = their number of
nodes; `--model` counts both from a training graph (exactly from one the pass wrote, `ampc
--passes allreduce`; else the buckets are cut in the order the graph names the gradients).

Step times printed, per N:
  no overlap   fwd + bwd + opt + t_comm              (what ampc does today)
  overlap      fwd + max(bwd, t_comm) + opt          (ideal: every bucket reduced while the
                                                      backward runs, as DDP does)
  efficiency   single-device step / step             (samples/s per device against one)
Weak scaling (the default): each device keeps the measured per-device batch. `--strong`: the
measured step's batch is split over the N devices, compute taken as step/N (ideal).

Plain Python 3, no numpy, no onnx: the ONNX file is read with a small protobuf walker.

usage: dp_cost.py (--bytes S [--calls K] | --model TRAIN.onnx) --step-ms T[,T...]
                  [--fwd-ms F | --fwd-frac 0.333] [--opt-ms O]
                  [--link NAME=GBPS[:LATENCY_US]]... [--config NAME:N[xG]]... [--strong]
"""
import argparse
import math
import sys

BIG = 1 << 30  # "N grows without end"
CHUNK = 32  # gradients per AllReduceMean node (passes/allreduce.c CHUNK)
FIRST_BUCKET, BUCKET = 1 << 20, 4 << 20  # bytes (passes/allreduce.c FIRST_BUCKET_BYTES, BUCKET_BYTES)

# Link classes: bus bandwidth (GB/s, 1e9 bytes/s) and per-call latency (us). Published or
# measured figures, not ampc's: see docs/parallel.md for where each comes from.
LINKS = {
    "nvlink": (450.0, 10.0),  # 8 x H100 SXM, NVLink 4 + NVSwitch: nccl-tests busbw ~450-480
    "ib": (48.0, 30.0),       # 400 Gb/s NDR InfiniBand, one NIC per GPU: ~45-50 GB/s each
    "shm": (4.66, 10.0),      # this machine: Open MPI, 2 ranks, shared memory: 12.6 MB in 2.7 ms
}
# Default configurations: NAME:N is N devices on one link class; NAME:HxG is H hosts of G
# devices, G on nvlink inside a host and NAME between hosts.
CONFIGS = ["nvlink:1", "nvlink:2", "nvlink:8", "ib:2x8", "ib:4x8", "ib:16x8"]


# ---- the model --------------------------------------------------------------------------

def ring_factor(n):
    """Bytes through each rank's link per byte all-reduced by a ring of n ranks."""
    return 2.0 * (n - 1) / n if n > 1 else 0.0


def comm_ms(nbytes, calls, hosts, per_host, intra, inter):
    """All-reduce time (ms) of nbytes in `calls` collectives over hosts x per_host devices.
    intra, inter: (GB/s, latency us) of the link inside a host and between hosts."""
    if hosts * per_host <= 1:
        return 0.0
    t = ring_factor(per_host) * nbytes / (intra[0] * 1e9)
    t += ring_factor(hosts) * (nbytes / per_host) / (inter[0] * 1e9)
    latency = (inter if hosts > 1 else intra)[1]
    return t * 1e3 + calls * latency * 1e-3


def step(fwd, bwd, opt, comm):
    """(no overlap, ideal overlap) step times, ms."""
    return fwd + bwd + opt + comm, fwd + max(bwd, comm) + opt


def split(step_ms, fwd_ms, fwd_frac, opt_ms):
    """(fwd, bwd, opt) of a measured step: forward given or a fraction of step - optimizer."""
    rest = step_ms - opt_ms
    fwd = fwd_ms if fwd_ms is not None else rest * fwd_frac
    if fwd < 0 or fwd > rest:
        sys.exit(f"dp_cost: forward {fwd:g} ms does not fit a {step_ms:g} ms step (optimizer {opt_ms:g})")
    return fwd, rest - fwd, opt_ms


# ---- counting gradients in an ONNX file (protobuf wire format, no onnx package) ---------

def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of a message: ints for varints, bytes for the rest."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {w} not handled")
        yield f, w, v


def _packed(w, v):
    if w == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def _graphs(model):
    """The graph and training_info's graphs (ModelProto 7, 20; TrainingInfoProto 1, 2)."""
    for f, _, v in _fields(model):
        if f == 7:
            yield v
        elif f == 20:
            for g, _, gv in _fields(v):
                if g in (1, 2):
                    yield gv


def _shape(vi):
    """Static dims of a ValueInfoProto's tensor type, or None."""
    for f, _, t in _fields(vi):
        if f != 2:
            continue
        for g, _, tt in _fields(t):
            if g != 1:
                continue
            for h, _, sh in _fields(tt):
                if h != 2:
                    continue
                dims = []
                for k, _, d in _fields(sh):
                    if k == 1:
                        vals = {m: x for m, _, x in _fields(d)}
                        if not isinstance(vals.get(1), int):
                            return None
                        dims.append(vals[1])
                return dims
    return None


def _name(msg, field):
    return next((v.decode() for f, w, v in _fields(msg) if f == field and w == 2), "")


def scan(path):
    """Parameter dims (initializers, statically shaped inputs), value names made by nodes or
    graph outputs, and the AllReduceMean nodes' output lists, over every graph of the model."""
    with open(path, "rb") as fh:
        model = fh.read()
    dims, made, buckets = {}, [], []
    for g in _graphs(model):
        for f, _, v in _fields(g):
            if f == 5:  # initializer
                d = [x for k, w, x in _fields(v) if k == 1 for x in _packed(w, x)]
                dims[_name(v, 8)] = d
            elif f == 11:  # input (onnxruntime-training artifacts take parameters as inputs)
                s = _shape(v)
                if s is not None:
                    dims.setdefault(_name(v, 1), s)
            elif f == 12:  # output
                made.append(_name(v, 1))
            elif f == 1:  # node
                outs = [x.decode() for k, _, x in _fields(v) if k == 2]
                made.extend(outs)
                if _name(v, 4) == "AllReduceMean":
                    buckets.append(outs)
    return dims, made, buckets


def buckets_of(sizes):
    """The pass's buckets over gradients of these byte sizes, in order: each closes once it
    holds the bucket's bytes (the first FIRST_BUCKET, then BUCKET) or CHUNK gradients."""
    out, cur, nbytes = [], [], 0
    for b in sizes:
        cur.append(b)
        nbytes += b
        if len(cur) == CHUNK or nbytes >= (BUCKET if out else FIRST_BUCKET):
            out.append(cur)
            cur, nbytes = [], 0
    return out + [cur] if cur else out


def count_gradients(path):
    """(bytes all-reduced per step, calls, gradients) as ampc reduces them: float32, in the
    file's AllReduceMean nodes when it has them (`ampc --passes allreduce`), else every
    X_grad of a parameter X in buckets as the pass cuts them, in the graph's order."""
    dims, made, buckets = scan(path)

    def param(value):
        base = value[:value.rfind("_grad")] if "_grad" in value else None
        return base if base in dims else None

    if buckets:
        grads = [param(o) for b in buckets for o in b]
        calls = len(buckets)
    else:
        grads = list(dict.fromkeys(v[:-5] for v in made if v.endswith("_grad") and v[:-5] in dims))
        calls = len(buckets_of([4 * math.prod(dims[p]) for p in grads]))
    if not grads:
        sys.exit(f"dp_cost: {path}: no parameter gradients found (a training graph: `ampc grad`)")
    if None in grads:
        sys.exit(f"dp_cost: {path}: an AllReduceMean output is no parameter's X_grad; give --bytes")
    return 4 * sum(math.prod(dims[p]) for p in grads), calls, len(grads)


# ---- the table --------------------------------------------------------------------------

def parse_link(text):
    name, _, rest = text.partition("=")
    bw, _, lat = rest.partition(":")
    try:
        return name, (float(bw), float(lat) if lat else LINKS.get(name, (0, 0))[1])
    except ValueError:
        sys.exit(f"dp_cost: --link {text}: want NAME=GBPS[:LATENCY_US]")


def parse_config(text, links):
    name, _, n = text.partition(":")
    hosts, _, per = n.partition("x")
    if name not in links or not hosts.isdigit() or int(hosts) < 1 or (per and (not per.isdigit() or int(per) < 1)):
        sys.exit(f"dp_cost: --config {text}: want LINK:N or LINK:HOSTSxPER_HOST (links: {', '.join(links)})")
    if per:
        return name, int(hosts), int(per)
    return name, 1, int(hosts)


def rows(nbytes, calls, parts, configs, links, strong):
    """One dict per configuration: devices, comm, no-overlap and overlap steps, efficiencies.
    parts: the one-device step's (fwd, bwd, opt) ms; strong scaling divides fwd and bwd by N
    (the optimizer updates every parameter on every rank whatever the batch)."""
    out = []
    for name, hosts, per in configs:
        n = hosts * per
        intra = links["nvlink"] if hosts > 1 else links[name]
        c = comm_ms(nbytes, calls, hosts, per, intra, links[name])
        fwd, bwd, opt = parts
        if strong:
            fwd, bwd = fwd / n, bwd / n
        plain, overlap = step(fwd, bwd, opt, c)
        compute = fwd + bwd + opt  # the step with free communication
        out.append(dict(config=f"{name}:{hosts}x{per}" if hosts > 1 else f"{name}:{per}", n=n, comm=c,
                        plain=plain, overlap=overlap, eff_plain=compute / plain, eff_overlap=compute / overlap,
                        bwd=bwd, compute=compute))
    return out


def crossover(nbytes, calls, parts, name, per, links, strong, limit=1 << 16):
    """The smallest N (hosts x per, or per-device count on one link when per is 0) at which
    the all-reduce takes as long as the compute (no overlap) and as the backward (overlap);
    None where it never does up to `limit` devices."""
    found = [None, None]
    k = 2
    while k * max(per, 1) <= limit and None in found:
        cfg = (name, k, per) if per else (name, 1, k)
        r = rows(nbytes, calls, parts, [cfg], links, strong)[0]
        for i, bar in enumerate((r["compute"], r["bwd"])):
            if found[i] is None and r["comm"] >= bar:
                found[i] = r["n"]
        k *= 2
    return found


def _at(n):
    return f"N = {n}" if n else "at no N up to 65536"


def report(args, nbytes, calls, links, configs):
    print(f"gradients: {nbytes:,.0f} bytes (float32) in {calls} all-reduce call{'s' * (calls != 1)} per step")
    print("links: " + ", ".join(f"{k} {v[0]:g} GB/s + {v[1]:g} us/call" for k, v in links.items()))
    scaling = "strong: the step's batch split over N" if args.strong else "weak: per-device batch fixed"
    for t in args.step_ms:
        parts = split(t, args.fwd_ms, args.fwd_frac, args.opt_ms)
        print(f"\nstep {t:g} ms on one device = forward {parts[0]:.3g} + backward {parts[1]:.3g} + optimizer "
              f"{parts[2]:.3g} ms ({scaling})")
        print(f"{'config':<12} {'N':>5} {'comm ms':>9} {'no overlap':>11} {'eff':>6} {'overlap':>9} {'eff':>6}"
              f"  comm/compute")
        for r in rows(nbytes, calls, parts, configs, links, args.strong):
            print(f"{r['config']:<12} {r['n']:>5} {r['comm']:>9.3f} {r['plain']:>11.3f} {r['eff_plain']:>6.1%}"
                  f" {r['overlap']:>9.3f} {r['eff_overlap']:>6.1%}  {r['comm'] / r['compute']:.3f}")
        for name, per in dict.fromkeys((c[0], c[2] if c[1] > 1 else 0) for c in configs):
            where = f"{name}, hosts of {per}" if per else name
            if args.strong:
                a, b = crossover(nbytes, calls, parts, name, per, links, True)
                print(f"comm >= compute ({where}): {_at(a)}; comm >= backward: {_at(b)}")
            else:  # per-device work fixed: comm grows to a limit, so the question is the step time
                lim = rows(nbytes, calls, parts, [(name, BIG, per) if per else (name, 1, BIG)], links, False)[0]
                print(f"comm ({where}) tends to {lim['comm']:.3f} ms as N grows: it equals compute for a one-device"
                      f" step of {lim['comm']:.3f} ms or less (with overlap: a backward that short)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--bytes", type=float, help="gradient bytes all-reduced per step")
    src.add_argument("--model", help="a training graph: count its gradients as ampc reduces them")
    ap.add_argument("--calls", type=int, help="all-reduce calls per step (with --bytes; default 1)")
    ap.add_argument("--step-ms", type=lambda s: [float(x) for x in s.split(",")], required=True,
                    help="measured one-device training step(s), ms, comma-separated")
    ap.add_argument("--fwd-ms", type=float, help="the forward's share of the step, ms (measured)")
    ap.add_argument("--fwd-frac", type=float, default=1 / 3,
                    help="else the forward's fraction of step - optimizer (default 1/3: backward = 2 x forward)")
    ap.add_argument("--opt-ms", type=float, default=0.0, help="the optimizer's share, ms (default 0)")
    ap.add_argument("--link", action="append", default=[], help="NAME=GBPS[:LATENCY_US], adds or overrides")
    ap.add_argument("--config", action="append", default=[], help="LINK:N or LINK:HOSTSxPER_HOST (repeatable)")
    ap.add_argument("--strong", action="store_true", help="strong scaling: split the measured step's batch")
    args = ap.parse_args(argv)
    links = dict(LINKS)
    links.update(parse_link(x) for x in args.link)
    configs = [parse_config(c, links) for c in (args.config or CONFIGS)]
    if args.model:
        nbytes, calls, n = count_gradients(args.model)
        print(f"{args.model}: {n} parameter gradients")
    else:
        nbytes, calls = args.bytes, args.calls or 1
    report(args, nbytes, calls, links, configs)


if __name__ == "__main__":
    main()
