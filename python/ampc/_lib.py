"""The binding: ctypes over libampc.so (include/ampc/ampc.h), found beside this package (where
`pip install` puts it) or at the path AMPC_LIBRARY names. ctypes releases the GIL for the
length of every call into the library."""
import ctypes
import glob
import os

from ctypes import POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint64, c_void_p

MAX_RANK = 8  # AMP_TENSOR_MAX_RANK
CALLER_PYTHON = 2  # AMP_CALLER_PYTHON


class Status(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * 1024)]


class TensorView(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int), ("dims", c_int64 * MAX_RANK),
                ("data", c_void_p)]


class IoInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int), ("dims", c_int64 * MAX_RANK),
                ("dim_params", c_char_p * MAX_RANK), ("optional", c_bool), ("index_bound", c_int64)]


# AmpSessionOptions, field for field (ampc.h); struct_size tells the library which it knows.
SESSION_STRING_FIELDS = ("amp_auto", "precision", "loss_scale", "opset_upgrade", "log_path", "calibration",
                         "allowlist_add", "allowlist_remove", "inferlist_add", "inferlist_remove",
                         "clearlist_add", "clearlist_remove", "denylist_add", "denylist_remove")


class SessionOptions(Structure):
    _fields_ = ([("struct_size", c_size_t), ("backend", c_int)] +
                [(f, c_char_p) for f in SESSION_STRING_FIELDS] +
                [("ignore_env", c_bool), ("seed", c_uint64), ("no_plan", c_bool), ("no_fuse", c_bool),
                 ("max_iterations", c_uint64), ("timeout_seconds", c_double), ("max_tensor_bytes", c_uint64),
                 ("no_fallback", c_bool), ("tf32", c_bool), ("ort_optimizer", c_char_p),
                 ("ort_checkpoint", c_char_p), ("learning_rate", c_double), ("threads", c_int),
                 ("data_parallel", c_int), ("comm_timeout", c_double), ("loss", c_char_p)])


class SessionStats(Structure):
    _fields_ = [("steps", c_uint64), ("intermediate_bytes", c_size_t), ("state_bytes", c_size_t),
                ("planned", c_bool), ("amp_applied", c_bool), ("values_sized", c_size_t),
                ("values_dynamic", c_size_t), ("syncs", c_size_t), ("fallback_nodes", c_size_t),
                ("fallback_ops", c_char_p), ("backend", c_char_p), ("host_reads", c_size_t),
                ("fused_nodes", c_size_t), ("absorbed_nodes", c_size_t), ("fused_ops", c_char_p),
                ("device_bytes", c_size_t), ("kernel_syncs", c_size_t), ("amp_precision", c_char_p),
                ("amp_precision_why", c_char_p),
                # filled by amp_session_stats_sized (after 0.1's fields)
                ("step_ms_last", c_double), ("step_ms_mean", c_double), ("run_ms_last", c_double),
                ("run_ms_mean", c_double), ("loss_name", c_char_p), ("loss", c_double), ("loss_scale", c_double),
                ("skipped_steps", c_uint64), ("peak_bytes", c_size_t)]


def _find():
    path = os.environ.get("AMPC_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libampc.so*")), key=len)
    if not found:
        raise ImportError(f"ampc: libampc.so is neither beside the package ({here}) nor named by AMPC_LIBRARY; "
                          "install the package with pip, or point AMPC_LIBRARY at a build's libampc.so")
    return found[0]


def _load():
    lib = ctypes.CDLL(_find())
    st = POINTER(Status)
    sess = c_void_p
    sig = {
        "amp_version": (c_char_p, []),
        "amp_set_front": (None, [c_int]),
        "amp_code_name": (c_char_p, [c_int]),
        "amp_free": (None, [c_void_p]),
        "amp_convert_options_new": (c_int, [POINTER(c_void_p), st]),
        "amp_convert_options_free": (None, [c_void_p]),
        "amp_convert_option_set": (c_int, [c_void_p, c_char_p, c_char_p, st]),
        "amp_convert_option_name": (c_char_p, [c_size_t, POINTER(c_bool)]),
        "amp_convert_bytes": (c_int, [c_char_p, c_size_t, c_char_p, c_void_p, POINTER(c_void_p), POINTER(c_size_t),
                                      POINTER(c_void_p), st]),
        "amp_convert_file": (c_int, [c_char_p, c_char_p, c_void_p, POINTER(c_void_p), st]),
        "amp_grad_options_new": (c_int, [POINTER(c_void_p), st]),
        "amp_grad_options_free": (None, [c_void_p]),
        "amp_grad_option_set": (c_int, [c_void_p, c_char_p, c_char_p, st]),
        "amp_grad_option_name": (c_char_p, [c_size_t, POINTER(c_bool)]),
        "amp_grad_bytes": (c_int, [c_char_p, c_size_t, c_char_p, c_void_p, POINTER(c_void_p), POINTER(c_size_t),
                                   POINTER(c_void_p), st]),
        "amp_grad_file": (c_int, [c_char_p, c_char_p, c_void_p, POINTER(c_void_p), st]),
        "amp_session_options_init": (None, [POINTER(SessionOptions)]),
        "amp_session_open": (c_int, [c_char_p, POINTER(SessionOptions), POINTER(sess), st]),
        "amp_session_open_bytes": (c_int, [c_char_p, c_size_t, c_char_p, POINTER(SessionOptions), POINTER(sess),
                                           st]),
        "amp_session_close": (None, [sess]),
        "amp_session_input_count": (c_size_t, [sess, c_int]),
        "amp_session_output_count": (c_size_t, [sess, c_int]),
        "amp_session_input_info": (c_bool, [sess, c_int, c_size_t, POINTER(IoInfo)]),
        "amp_session_output_info": (c_bool, [sess, c_int, c_size_t, POINTER(IoInfo)]),
        "amp_session_has_training_info": (c_bool, [sess]),
        "amp_session_run": (c_int, [sess, POINTER(TensorView), c_size_t, c_void_p, c_size_t, POINTER(TensorView),
                                    st]),
        "amp_session_train_step": (c_int, [sess, POINTER(TensorView), c_size_t, c_void_p, c_size_t,
                                           POINTER(TensorView), st]),
        "amp_tensor_view_bytes": (c_size_t, [POINTER(TensorView)]),
        "amp_tensor_view_free": (None, [POINTER(TensorView)]),
        "amp_session_state_save": (c_int, [sess, c_char_p, st]),
        "amp_session_state_load": (c_int, [sess, c_char_p, st]),
        "amp_session_stats_sized": (None, [sess, POINTER(SessionStats), c_size_t]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    lib.amp_set_front(CALLER_PYTHON)  # messages name options as keywords
    return lib


lib = _load()
