"""ampc.Session: a model opened for running and training (ampc.h's AmpSession)."""
import collections
import ctypes
import os

import numpy as np

from . import _check, _lib, _model_bytes, _status
from ._lib import lib

RUN, TRAIN = 0, 1  # AmpMode
BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2, "sim": 3}  # AmpBackendKind

# ONNX's TensorProto.DataType numbers and their numpy types. bfloat16 (16) has none in numpy:
# its outputs come back widened to float32 (exactly: every bf16 value is a float32 one), and a
# bf16 input takes float32 values (rounded to nearest even) or uint16 bit patterns.
BF16 = 16
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
          10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
ONNX_OF = {np.dtype(v): k for k, v in DTYPES.items()}
NAMES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
         10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}

IoInfo = collections.namedtuple("IoInfo", "name dtype shape optional")
IoInfo.__doc__ = """An input or output: its name, dtype ("float32", "float16", "bfloat16", ...;
None when the model does not say), shape (a tuple of ints, of the symbolic dims' names where a
dim is named, None where neither; None for the whole when the rank is unknown) and, for an
input, whether it has a default (an initializer)."""


def _info(raw):
    shape = None
    if raw.rank >= 0:
        shape = tuple(int(raw.dims[d]) if raw.dims[d] >= 0 else
                      (raw.dim_params[d].decode() if raw.dim_params[d] else None) for d in range(raw.rank))
    return IoInfo(raw.name.decode(), NAMES.get(raw.dtype), shape, bool(raw.optional))


def _to_bf16_bits(a):
    """float32 -> bfloat16 bits, rounded to nearest even (NaN kept a NaN)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FC0), rounded)


def _from_view(v):
    n = lib.amp_tensor_view_bytes(ctypes.byref(v))
    shape = tuple(int(v.dims[d]) for d in range(v.rank))
    raw = ctypes.string_at(v.data, n) if n else b""
    if v.dtype == BF16:
        bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    dt = DTYPES.get(v.dtype)
    if dt is None:
        raise _lib_error(f"output '{v.name.decode()}': ONNX dtype {v.dtype} has no numpy type here")
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy()


def _lib_error(msg):
    from . import UnsupportedError
    return UnsupportedError(msg)


# AmpSessionOptions.data_parallel by the words of AMP_DATA_PARALLEL (ampc.h: AMP_DATA_PARALLEL_*).
DATA_PARALLEL = {"auto": 0, "mpi": 1, "off": 2}


class Session:
    """A model opened for running (and training): ampc.Session(model, backend="cpu", amp=False,
    precision=None, **options), model an onnx.ModelProto, a path or bytes.

    backend: "cpu", "cuda", "sim" (the device simulator) or "auto" (CUDA when there is a
    device, else the CPU). amp=True rewrites the model in mixed precision as it opens
    (AMP_AUTO), precision and the AMP keywords (loss_scale, allowlist_add, ... as
    ampc.h's AmpSessionOptions names them) saying how; the session keywords too (seed,
    no_fuse, no_fallback, timeout_seconds, threads, data_parallel ("auto", "mpi" or "off", the
    words of the variable AMP_DATA_PARALLEL, or ampc.h's AMP_DATA_PARALLEL_* numbers 0, 1, 2),
    comm_timeout, ...). No AMP_* variable is read unless ignore_env=False (docs/env.md: the
    keywords that are session fields replace their variables). One thread at a time per
    session."""

    _s = None  # the AmpSession (set by a successful open)

    def __init__(self, model, backend="auto", amp=False, precision=None, ignore_env=True, **options):
        if backend not in BACKENDS:
            from . import UsageError
            raise UsageError(f"backend='{backend}': expected cpu, cuda, auto or sim", 2)
        self._s = ctypes.c_void_p()
        o = _lib.SessionOptions()
        lib.amp_session_options_init(ctypes.byref(o))
        o.backend = BACKENDS[backend]
        o.ignore_env = bool(ignore_env)
        keep = []  # the strings' bytes, alive through the open
        settings = dict(options, amp_auto="1" if amp else "0")
        if precision is not None:
            settings["precision"] = precision
        fields = {f for f, _ in _lib.SessionOptions._fields_} - {"struct_size", "backend", "ignore_env"}
        for name, value in settings.items():
            if name not in fields:
                raise TypeError(f"ampc.Session: no option '{name}' (the options: {', '.join(sorted(fields))})")
            if value is None:
                continue
            if name == "data_parallel" and isinstance(value, str):
                if value not in DATA_PARALLEL:  # the table's words and message (docs/env.md)
                    from . import UsageError
                    raise UsageError(f"data_parallel='{value}': expected auto, mpi or off", 2)
                value = DATA_PARALLEL[value]
            if name in _lib.SESSION_STRING_FIELDS or name in ("ort_optimizer", "ort_checkpoint", "loss"):
                if isinstance(value, (list, tuple)):
                    value = ",".join(map(str, value))
                keep.append(os.fspath(value).encode() if isinstance(value, os.PathLike) else str(value).encode())
                value = keep[-1]
            setattr(o, name, value)
        st = _status()
        if isinstance(model, (str, os.PathLike)):
            rc = lib.amp_session_open(os.fsencode(model), ctypes.byref(o), ctypes.byref(self._s), ctypes.byref(st))
        else:
            data, _ = _model_bytes(model)
            rc = lib.amp_session_open_bytes(data, len(data), None, ctypes.byref(o), ctypes.byref(self._s),
                                            ctypes.byref(st))
        _check(rc, st)

    # -- life ------------------------------------------------------------------------------
    def close(self):
        """Closes the session (also when it is collected); it may not be used after."""
        if self._s:
            lib.amp_session_close(self._s)
            self._s = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _open(self):
        if not self._s:
            from . import UsageError
            raise UsageError("the session is closed", 2)
        return self._s

    # -- what it takes and gives ---------------------------------------------------------
    def _infos(self, count, info, mode):
        s = self._open()
        out = []
        for i in range(count(s, mode)):
            raw = _lib.IoInfo()
            if info(s, mode, i, ctypes.byref(raw)):
                out.append(_info(raw))
        return out

    @property
    def inputs(self):
        """The main graph's inputs, as IoInfo."""
        return self._infos(lib.amp_session_input_count, lib.amp_session_input_info, RUN)

    @property
    def outputs(self):
        return self._infos(lib.amp_session_output_count, lib.amp_session_output_info, RUN)

    @property
    def train_inputs(self):
        """What a training step takes: the inputs, then the training algorithms' own."""
        return self._infos(lib.amp_session_input_count, lib.amp_session_input_info, TRAIN)

    @property
    def train_outputs(self):
        return self._infos(lib.amp_session_output_count, lib.amp_session_output_info, TRAIN)

    # -- running ---------------------------------------------------------------------------
    def _call(self, fn, mode, feed):
        s = self._open()
        declared = {}
        for i in range(lib.amp_session_input_count(s, mode)):
            raw = _lib.IoInfo()
            if lib.amp_session_input_info(s, mode, i, ctypes.byref(raw)):
                declared[raw.name.decode()] = raw.dtype
        views = (_lib.TensorView * max(len(feed), 1))()
        keep = []
        for k, (name, value) in enumerate(feed.items()):
            a = np.asarray(value)
            dt = declared.get(name, 0)
            if dt == BF16:
                a = a if a.dtype == np.uint16 else _to_bf16_bits(a)
            elif dt in DTYPES:
                a = a.astype(DTYPES[dt], copy=False)
            elif a.dtype not in ONNX_OF:
                from . import UsageError
                raise UsageError(f"input '{name}': numpy dtype {a.dtype} has no ONNX type here", 2)
            a = np.ascontiguousarray(a)
            if a.ndim > _lib.MAX_RANK:
                from . import UsageError
                raise UsageError(f"input '{name}': rank {a.ndim} is over {_lib.MAX_RANK}", 2)
            keep.append((name.encode(), a))
            v = views[k]
            v.name, v.dtype, v.rank = keep[-1][0], BF16 if dt == BF16 else ONNX_OF[a.dtype], a.ndim
            for d in range(a.ndim):
                v.dims[d] = a.shape[d]
            v.data = a.ctypes.data_as(ctypes.c_void_p)
        n_out = lib.amp_session_output_count(s, mode)
        outs = (_lib.TensorView * max(n_out, 1))()
        st = _status()
        rc = fn(s, views, len(feed), None, n_out, outs, ctypes.byref(st))
        _check(rc, st)
        result = {}
        try:
            for i in range(n_out):
                result[outs[i].name.decode()] = _from_view(outs[i])
        finally:
            for i in range(n_out):
                lib.amp_tensor_view_free(ctypes.byref(outs[i]))
        return result

    def run(self, feed):
        """Runs the model: feed {input name: array} -> {output name: numpy array}, every
        output in the model's order. float16 outputs are numpy float16; bfloat16 ones come
        back widened to float32 (exactly)."""
        return self._call(lib.amp_session_run, RUN, feed)

    def train_step(self, feed, return_outputs=False):
        """One training step (ampc.h, amp_session_train_step): with training_info the weights
        and optimizer state are updated in place. Returns the step's loss as a float (the
        output stats["loss_name"] names: Session's loss=NAME, else the one scalar float output
        named like a loss, as `ampc run` prints it), or (loss, {output name: array}, every
        training output) with return_outputs=True. A loss-scaled step whose gradients
        overflowed returns its loss too; stats["skipped_steps"] counts it."""
        name = self._stats().loss_name
        if not name:
            from . import UsageError
            raise UsageError("no training output is the loss (none, or several, is a scalar float output named like a "
                             "loss): name it with ampc.Session(..., loss=\"NAME\")", 2)
        outputs = self._call(lib.amp_session_train_step, TRAIN, feed)
        loss = float(np.asarray(outputs[name.decode()], dtype=np.float64).reshape(-1)[0])
        return (loss, outputs) if return_outputs else loss

    # -- state -----------------------------------------------------------------------------
    def save_state(self, path):
        """Writes the weights, optimizer and loss-scale state and step counter (an ONNX file)."""
        st = _status()
        _check(lib.amp_session_state_save(self._open(), os.fsencode(path), ctypes.byref(st)), st)

    def load_state(self, path):
        st = _status()
        _check(lib.amp_session_state_load(self._open(), os.fsencode(path), ctypes.byref(st)), st)

    @property
    def has_training_info(self):
        return bool(lib.amp_session_has_training_info(self._open()))

    def _stats(self):
        raw = _lib.SessionStats()
        lib.amp_session_stats_sized(self._open(), ctypes.byref(raw), ctypes.sizeof(raw))
        return raw

    @property
    def stats(self):
        """ampc.h's AmpSessionStats as a dict: steps, skipped_steps (loss scaling's overflowed
        steps), loss (the last step's) and loss_name, loss_scale (NaN without loss scaling),
        step_ms_last / step_ms_mean and run_ms_last / run_ms_mean (the library's wall time of
        train_step and run), peak_bytes (intermediate_bytes + state_bytes), device_bytes,
        fallback_nodes and fallback_ops, backend, amp_applied, amp_precision, ..."""
        raw = self._stats()
        out = {}
        for name, kind in raw._fields_:
            v = getattr(raw, name)
            out[name] = (v or b"").decode() if kind is ctypes.c_char_p else v
        return out
