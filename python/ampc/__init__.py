"""ampc from Python: convert ONNX models to mixed precision, run and train them.

    import ampc
    model = ampc.convert("model.onnx", precision="fp16")        # an onnx.ModelProto
    ampc.convert_file("big.onnx", "big_amp.onnx", precision="bf16", keep_fp32=["head/*"])
    with ampc.Session("model.onnx", backend="cpu") as s:
        outputs = s.run({"x": x})                                # {name: numpy array}
    train = ampc.grad("model.onnx", loss="cross-entropy", optimizer="adam")  # `ampc grad`'s model
    with ampc.Session(train, backend="cpu", amp=True) as s:
        loss = s.train_step({"x": x, "labels": labels})          # a float

The keywords are the options of `ampc MODEL -o OUT`, named as ampc.h's conversion options
(`ampc.convert_options()` lists them), and of `ampc grad` (`ampc.grad_options()`), with the
same values and the same refusals. Every
failure raises ampc.Error (a subclass per ampc exit code) with ampc's one-line message.
The library is called through ctypes, which releases the GIL during each call: a Session is
used from one thread at a time (no locking inside); different sessions may run at once.
docs/python.md has the workflows."""
import ctypes
import os
import re

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Error", "InputError", "UsageError", "UnsupportedError", "InternalError", "Report", "IoInfo",
           "Session", "convert", "convert_bytes", "convert_file", "convert_options", "grad", "grad_bytes", "grad_file",
           "grad_options", "__version__"]

__version__ = lib.amp_version().decode()


# ---- errors ------------------------------------------------------------------------------

class Error(Exception):
    """A failed ampc call: .code is the AmpCode (ampc's exit code), .message its one line."""
    code = 4

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InputError(Error):
    """The model or data given is malformed (AMP_ERR_INPUT, exit 1)."""
    code = 1


class UsageError(Error):
    """Something meaningless was asked: a refused option value, a wrong input (exit 2)."""
    code = 2


class UnsupportedError(Error):
    """Valid, but ampc does not implement it (exit 3)."""
    code = 3


class InternalError(Error):
    """A bug in ampc, or the system failed: I/O, memory (exit 4)."""
    code = 4


_ERRORS = {1: InputError, 2: UsageError, 3: UnsupportedError, 4: InternalError}


def _check(rc, st):
    if rc:
        msg = st.msg.decode("utf-8", "replace") or lib.amp_code_name(rc).decode()
        raise _ERRORS.get(rc, Error)(msg, rc)


def _status():
    return _lib.Status(0, b"")


# ---- conversion --------------------------------------------------------------------------

def _names(name_at):
    out, i, takes = {}, 0, ctypes.c_bool()
    while True:
        name = name_at(i, ctypes.byref(takes))
        if name is None:
            return out
        out[name.decode()] = takes.value
        i += 1


def convert_options():
    """{name: takes_value} of every conversion keyword, in the options table's order."""
    return _names(lib.amp_convert_option_name)


def grad_options():
    """{name: takes_value} of every keyword of grad(), in the grad table's order (the flags
    of `ampc grad`: loss, optimizer, lr, freeze, train_mode, ...)."""
    return _names(lib.amp_grad_option_name)


class Report(str):
    """The conversion's summary, the text `ampc MODEL -o OUT` says after "wrote OUT:": its
    first line "N nodes (M before), passes: LIST; amp: ..." (nodes in 16 bits, casts, what
    stayed float32 and why), then the passes' other notices. .nodes, .nodes_before and
    .passes are read from the first line; .notices are the lines after it."""

    @property
    def nodes(self):
        return int(re.match(r"(\d+) nodes", self).group(1))

    @property
    def nodes_before(self):
        return int(re.match(r"\d+ nodes \((\d+) before\)", self).group(1))

    @property
    def passes(self):
        return re.search(r"passes: ([^;\n]*)", self).group(1).split(",")

    @property
    def notices(self):
        return self.split("\n")[1:]


class _Options:
    """An options object of the C API (AmpConvertOptions, or AmpGradSettings for `kind`
    "grad") filled from keywords (amp_convert_option_set, amp_grad_option_set)."""

    def __init__(self, options, kind="convert"):
        known = _names(getattr(lib, f"amp_{kind}_option_name"))
        self._free = getattr(lib, f"amp_{kind}_options_free")
        self._setter = getattr(lib, f"amp_{kind}_option_set")
        self.ptr = ctypes.c_void_p()
        st = _status()
        _check(getattr(lib, f"amp_{kind}_options_new")(ctypes.byref(self.ptr), ctypes.byref(st)), st)
        try:
            for name, value in options.items():
                self._keyword(known, name, value)
        except BaseException:
            self.close()
            raise

    def _keyword(self, known, name, value):
        if value is None:
            return
        if isinstance(value, bool):
            # keep_io_types=False is no_keep_io_types (and the other way round)
            twin = name[3:] if name.startswith("no_") else "no_" + name
            if known.get(name) is False and not value:
                if twin in known:
                    self._set(twin, None)
                return
            if known.get(name) is not False:
                value = "1" if value else "0"
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:  # the list options add up: one call per entry
            self._set(name, None if v is True else _text(v))

    def _set(self, name, value):
        st = _status()
        _check(self._setter(self.ptr, name.encode(), None if value is None else value.encode(), ctypes.byref(st)), st)

    def close(self):
        if self.ptr:
            self._free(self.ptr)
            self.ptr = ctypes.c_void_p()


def _text(v):
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return str(v)


def _model_bytes(model):
    """(bytes, folder of its external data or None) of a ModelProto, a path or bytes."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as f:
            return f.read(), os.path.dirname(os.path.abspath(path))
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString(), None
    raise TypeError(f"ampc: a model is an onnx.ModelProto, a path or bytes, not {type(model).__name__}")


def convert_bytes(model, precision=None, **options):
    """As convert(), but the converted model's serialized bytes: (bytes, Report). Needs no
    onnx package."""
    return _bytes_call("convert", model, _with_precision(precision, options), Report)


def _with_precision(precision, options):
    return options if precision is None else dict(options, precision=precision)


def _bytes_call(kind, model, options, report):
    """amp_KIND_bytes on model with options: (bytes, report(summary))."""
    data, folder = _model_bytes(model)
    opts = _Options(options, kind)
    out, out_len, summary, st = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p(), _status()
    try:
        rc = getattr(lib, f"amp_{kind}_bytes")(data, len(data), folder.encode() if folder else None, opts.ptr,
                                               ctypes.byref(out), ctypes.byref(out_len), ctypes.byref(summary),
                                               ctypes.byref(st))
        _check(rc, st)
        return ctypes.string_at(out, out_len.value), report(ctypes.string_at(summary).decode())
    finally:
        opts.close()
        lib.amp_free(out)
        lib.amp_free(summary)


def _file_call(kind, src, dst, options, report):
    opts = _Options(options, kind)
    summary, st = ctypes.c_void_p(), _status()
    try:
        rc = getattr(lib, f"amp_{kind}_file")(os.fsencode(src), os.fsencode(dst), opts.ptr, ctypes.byref(summary),
                                              ctypes.byref(st))
        _check(rc, st)
        return report(ctypes.string_at(summary).decode())
    finally:
        opts.close()
        lib.amp_free(summary)


def _proto(data, what):
    try:
        import onnx
    except ImportError as e:
        raise ImportError(f"ampc.{what} returns an onnx.ModelProto, which needs the onnx package "
                          f"(pip install onnx); ampc.{what}_bytes and ampc.{what}_file do without") from e
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    return proto


def convert(model, precision=None, return_report=False, **options):
    """Converts model (an onnx.ModelProto, a path or bytes) to mixed precision as
    `ampc MODEL -o OUT --precision PRECISION ...` does: precision "fp16", "bf16" or "auto"
    (the default: this machine's best), the other keywords those of convert_options() (True
    for an option that takes no value; a list for several values of a list option).
    Returns the onnx.ModelProto, or (ModelProto, Report) with return_report=True. The output
    is byte for byte the command's. Models over 2 GB: convert_file()."""
    data, report = convert_bytes(model, precision, **options)
    proto = _proto(data, "convert")
    return (proto, report) if return_report else proto


def convert_file(src, dst, precision=None, **options):
    """Converts file src into file dst (written atomically; external data beside dst when
    over 2 GB, src's read from beside it), options as convert(). Returns the Report."""
    return _file_call("convert", src, dst, _with_precision(precision, options), Report)


# ---- training graphs (ampc grad) ---------------------------------------------------------

def grad_bytes(model, loss=None, optimizer=None, **options):
    """As grad(), but the training model's serialized bytes: (bytes, summary str). Needs no
    onnx package."""
    return _bytes_call("grad", model, dict(options, loss=loss, optimizer=optimizer), str)


def grad(model, loss=None, optimizer=None, return_report=False, **options):
    """The training model of an inference model (an onnx.ModelProto, a path or bytes), as
    `ampc grad MODEL -o TRAIN --loss LOSS --optimizer OPTIMIZER ...` makes it: a loss, the
    backward and the optimizer's updates bound by a TrainingInfoProto (docs/grad.md). loss:
    "cross-entropy" (the default), "mse" or the name of a scalar output; optimizer: "sgd" (the
    default), "momentum" or "adam"; the other keywords those of grad_options() (lr, momentum,
    beta1, beta2, eps, weight_decay, loss_output, labels, class_axis, freeze: a glob or a
    list, train_mode=True). Returns the onnx.ModelProto, or (ModelProto, summary) with
    return_report=True; byte for byte the command's output. Models over 2 GB: grad_file()."""
    data, report = grad_bytes(model, loss, optimizer, **options)
    proto = _proto(data, "grad")
    return (proto, report) if return_report else proto


def grad_file(src, dst, loss=None, optimizer=None, **options):
    """grad() from file src into file dst (written atomically; external data beside dst when
    over 2 GB, src's read from beside it). Returns the summary."""
    return _file_call("grad", src, dst, dict(options, loss=loss, optimizer=optimizer), str)


from ._session import IoInfo, Session  # noqa: E402  (it uses the errors above)
