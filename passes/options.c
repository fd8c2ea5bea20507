/* The AMP options' and variables' one table (options.h): spellings, ranges and fields, so
 * that the CLI, the environment and the C API accept and refuse the same values with the
 * same message. One parser per kind of value: yes_no, amp_parse_whole, amp_parse_real, op names. */
#include "passes/options.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "passes/calib.h"
#include "passes/opset_impl.h"

_Static_assert(AMP_OPSET_UPGRADE_MIN_FROM == 7 && AMP_OPSET_UPGRADE_MAX == 22, "the opset-upgrade row says 7 to 22");

AmpCode amp_option_refuse(AmpStatus *st, const char *label, const char *v, const char *expect) {
    bool var = label[0] != '-'; /* a variable: shown as the assignment */
    return amp_fail(st, AMP_ERR_USAGE, "%s%s'%.64s%s': expected %s", label, var ? "=" : " ", v,
                    strlen(v) > 64 ? "..." : "", expect);
}

/* ---- the values' forms ------------------------------------------------------------ */

bool amp_parse_real(const char *s, double lo, bool lo_open, double hi, bool hi_open, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    if (lo_open ? !(v > lo) : !(v >= lo)) return false;
    if (hi_open ? !(v < hi) : !(v <= hi)) return false;
    *out = v;
    return true;
}

bool amp_parse_whole(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (!(s[0] >= '0' && s[0] <= '9')) return false; /* strtoull would take spaces, '+' and '-' */
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool is(const char *s, const char *a) {
    return strcmp(s, a) == 0;
}

/* Yes or no: 1, true, on, yes (1) or 0, false, off, no (0), as written; -1 for anything
 * else. Every yes-or-no variable is read by this. */
static int yes_no(const char *v) {
    static const char *const yes[] = {"1", "true", "on", "yes"}, *const no[] = {"0", "false", "off", "no"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (is(v, yes[i])) return 1;
        if (is(v, no[i])) return 0;
    }
    return -1;
}

/* ---- setters ------------------------------------------------------------------------ */

static bool set_precision(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    /* torch's names too: torch.half, torch.float16, torch.bfloat16. */
    if (is(v, "fp16") || is(v, "float16") || is(v, "half")) o->po.precision = AMP_DT_FLOAT16;
    else if (is(v, "bf16") || is(v, "bfloat16")) o->po.precision = AMP_DT_BFLOAT16;
    else if (is(v, "auto")) o->po.precision = 0;
    else return false;
    o->precision_auto = is(v, "auto"); /* the last value given wins */
    return true;
}

static bool set_cpu_features(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    if (!amp_cpu_features_parse(v, &o->cpu_features)) return false;
    o->cpu_features_given = true;
    return true;
}

static bool set_threads(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    uint64_t n;
    if (!amp_parse_whole(v, 1, UINT64_MAX, &n)) return false;
    o->threads = n > INT32_MAX ? INT32_MAX : (int)n; /* the knob takes 64 at most (ir/threads.c) */
    return true;
}

/* The rows of the runtime's own settings store into a field of AmpOptions at offset
 * d->arg: a yes or no (bool), a text (const char *). */
static bool set_yes_no(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)label, (void)st;
    int y = yes_no(v);
    if (y >= 0) *(bool *)((char *)o + d->arg) = y;
    return y >= 0;
}

static bool set_text(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)label, (void)st;
    if (!v[0]) return false;
    *(const char **)((char *)o + d->arg) = v;
    return true;
}

/* AMP_DNNL: yes (the default) or no. */
static bool set_dnnl(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    int y = yes_no(v);
    if (y >= 0) o->run.no_dnnl = !y;
    return y >= 0;
}

/* A backend's name, as backend/backend.c's amp_backend_parse takes it (its names and these
 * are held equal by tests/runtime/test_amp_auto.c). */
static bool set_backend(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    static const char *const names[] = {"auto", "cpu", "cuda", "sim"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (is(v, names[i])) return o->run.backend = names[i], true;
    return false;
}

/* AMP_DATA_PARALLEL: the word's place in the list is ampc.h's AMP_DATA_PARALLEL_* value. */
static bool set_data_parallel(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    static const char *const modes[] = {"auto", "mpi", "off"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (is(v, modes[i])) return o->run.data_parallel = (int)i, true;
    return false;
}

static bool set_comm_timeout(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    return amp_parse_real(v, 0, true, DBL_MAX, false, &o->run.comm_timeout);
}

/* A file that exists, named by a path with a '/' (dlopen, which opens it, would look a bare
 * name up on the loader's path instead), stored as given at offset d->arg: a typo fails the
 * open that reads it, one process or many, not only the job that would load the file. */
static bool set_file(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)label, (void)st;
    struct stat sb;
    if (!strchr(v, '/') || stat(v, &sb) != 0 || S_ISDIR(sb.st_mode)) return false;
    *(const char **)((char *)o + d->arg) = v;
    return true;
}

/* Op types (the simulator's lists), checked as the list edits check theirs; stored as
 * given, at offset d->arg. */
static bool set_op_types(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    AmpListEdit *e = NULL;
    size_t n = 0;
    AmpCode rc = amp_list_edits_parse(label, v, AMP_CLASS_DENY, false, &e, &n, st);
    free(e);
    if (rc || !n) return false;
    *(const char **)((char *)o + d->arg) = v;
    return true;
}

static bool set_level(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    int l = amp_level_parse(v);
    if (l < 0) return false;
    o->po.level = (AmpLevel)l;
    return true;
}

static bool set_opset_upgrade(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    uint64_t n;
    if (amp_parse_whole(v, AMP_OPSET_UPGRADE_MIN_FROM, AMP_OPSET_UPGRADE_MAX, &n)) {
        o->po.opset_upgrade = AMP_OPSET_UPGRADE_AUTO;
        o->po.opset_upgrade_to = (int)n;
    } else if (is(v, "auto") || is(v, "never")) {
        o->po.opset_upgrade = is(v, "never") ? AMP_OPSET_UPGRADE_NEVER : AMP_OPSET_UPGRADE_AUTO;
        o->po.opset_upgrade_to = 0;
    } else {
        return false;
    }
    return true;
}

/* A list row's arg: the AmpOpClass, with REMOVE for the removals. */
enum { REMOVE = 0x100 };

static bool set_list(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    if (!v[0]) return false;
    return amp_list_edits_parse(label, v, (AmpOpClass)(d->arg & ~REMOVE), d->arg & REMOVE, &o->edits, &o->n_edits,
                                st) == AMP_OK;
}

static bool set_keep_fp32(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label;
    if (!v[0]) return false;
    const char **k = realloc(o->keep, (o->n_keep + 1) * sizeof *k);
    if (!k) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory"), false;
    o->keep = k;
    o->keep[o->n_keep++] = v;
    return true;
}

/* arg: the value of no_keep_io_types the flag sets. */
static bool set_keep_io(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)label, (void)v, (void)st;
    o->po.no_keep_io_types = d->arg;
    return true;
}

static bool set_loss(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    if (!v[0]) return false;
    o->po.loss = v;
    return true;
}

static bool set_loss_scale(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    double x;
    if (is(v, "dynamic")) o->po.loss_scale_mode = AMP_LOSS_SCALE_DYNAMIC;
    else if (is(v, "none")) o->po.loss_scale_mode = AMP_LOSS_SCALE_NONE;
    else if (amp_parse_real(v, 0, true, FLT_MAX, false, &x)) o->po.loss_scale_mode = AMP_LOSS_SCALE_STATIC, o->po.loss_scale = x;
    else return false;
    return true;
}

static bool set_scale_state(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    if (!is(v, "initializers") && !is(v, "inputs")) return false;
    o->po.loss_scale_state_inputs = is(v, "inputs");
    return true;
}

static bool set_scale_init(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    return amp_parse_real(v, 0, true, FLT_MAX, false, &o->loss_scale_init);
}

static bool set_growth_interval(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    uint64_t n;
    if (!amp_parse_whole(v, 1, INT32_MAX, &n)) return false;
    o->po.growth_interval = n;
    return true;
}

static bool set_growth_factor(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    return amp_parse_real(v, 1, true, FLT_MAX, false, &o->po.growth_factor);
}

static bool set_backoff_factor(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    return amp_parse_real(v, 0, true, 1, true, &o->po.backoff_factor);
}

static bool set_calibration(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d;
    if (!v[0]) return false;
    if (o->calib) return amp_fail(st, AMP_ERR_USAGE, "%s: given twice", label), false;
    if (amp_calib_read(v, &o->calib, st)) return amp_status_prefix(st, "%s: ", label), false;
    o->po.calib = o->calib;
    return true;
}

static bool set_calib_max(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    return amp_parse_real(v, 0, true, HUGE_VAL, false, &o->po.calib_max_activation);
}

/* 0 turns the lower bound off (the field's -1; its 0 is the default). */
static bool set_calib_min(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    double x;
    if (!amp_parse_real(v, 0, false, HUGE_VAL, false, &x)) return false;
    o->po.calib_min_activation = x > 0 ? x : -1;
    return true;
}

/* A pipeline (checked by the conversion, runtime/conversion.c, and the command, with the
 * parser amp_run_pipeline uses, which sits above this table). */
static bool set_passes(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    o->passes = v; /* "": none, as "none" */
    return true;
}

static bool set_external(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)st;
    if (is(v, "auto")) o->external = AMP_SAVE_EXTERNAL_AUTO;
    else if (is(v, "always")) o->external = AMP_SAVE_EXTERNAL_ALWAYS;
    else if (is(v, "never")) o->external = AMP_SAVE_EXTERNAL_NEVER;
    else return false;
    return true;
}

static bool set_no_value_info(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    (void)d, (void)label, (void)v, (void)st;
    o->no_value_info = true;
    return true;
}

/* ---- the table ---------------------------------------------------------------------- */

#define OPS "op names, e.g. MatMul,Gemm or com.microsoft:FusedGemm"
/* The conversion's variables: `ampc MODEL -o OUT` reads them as AMP_AUTO sessions do. */
#define CONV (AMP_DOOR_CONVERT | AMP_DOOR_AMP)
/* A yes-or-no variable's values, after what 1 means. */
#define YES_NO(meaning) "1 (" meaning ") or 0 (true, on, yes and false, off, no too)"
#define AT(field) (int)offsetof(AmpOptions, field)
/* A library's file (set_file) at AmpOptions field `at`, `file` its usual name. */
#define LIBRARY_ROW(var, at, file, what)                                                                              \
    {NULL, var, "the path of a file that exists (with a '/')", set_file, AT(at), AMP_DOOR_SESSION,                    \
     .example = "./" file, .refused = "/nonexistent/" file,                                                           \
     .doc = what "; checked at every open, so a typo fails even a one-process run"}
/* Order matters where the environment is read in it: a session's own settings first (what
 * it read before reading any AMP option), list additions before removals, as TensorFlow
 * applies them. */
static const AmpOption OPTIONS[] = {
    /* The sessions' own settings (runtime/amp_auto.c). */
    {"backend", "AMP_BACKEND", "cpu, cuda, auto or sim", set_backend, 0, AMP_DOOR_SESSION, .field = "backend",
     .example = "sim",
     .refused = "tpu",
     .doc = "the backend of a session whose backend option says `auto` (`ampc run`, `bench`, `calibrate` without "
            "`--backend`): `sim` is the device simulator, which the tests use to prove the runtime never reads "
            "device memory"},
    {"tf32", "AMP_TF32", YES_NO("CUDA may use TF32 for float32 GEMMs and convolutions"), set_yes_no, AT(run.tf32),
     AMP_DOOR_SESSION, .field = "tf32", .example = "1", .refused = "maybe",
     .doc = "CUDA: float32 GEMMs and convolutions may use TF32 tensor cores (`--tf32`, the session option `tf32`); "
            "the default is a true FP32 baseline"},
    {NULL, "AMP_AUTO", YES_NO("rewrite the model in mixed precision"), set_yes_no, AT(run.amp_auto), AMP_DOOR_SESSION,
     .field = "amp_auto", .example = "1", .refused = "maybe",
     .doc = "the session runs the AMP pipeline (the default pipeline) over the FP32 graph in memory when it opens "
            "it, the variables `AMP_AUTO` sessions read saying how (the session option `amp_auto`); unset or 0, "
            "none of those is read and nothing is rewritten"},
    /* The CPU backend's threads and the most a load may use: sessions read it whether or
     * not AMP_AUTO is on, ampc for every command; `ampc run/bench --threads` replaces it. */
    {"threads", "AMP_THREADS", "a whole number from 1", set_threads, 0, AMP_DOOR_SESSION | AMP_DOOR_COMMAND,
     .field = "threads", .example = "2", .refused = "two",
     .doc = "the CPU backend's thread count, oneDNN's OpenMP threads and OpenBLAS's (see "
            "[speed.md](speed.md#threads); unset: the CPUs the process may use), and the most threads a load or an "
            "`ampc` conversion may use (unset: those CPUs, at most 8; 1: the calling thread alone; with two or "
            "more a big model's memory is faulted in beside its load, and `ampc` verifies a converted graph of "
            "10000 nodes or more beside its save). More than 64 counts as 64; the model is the same whatever N"},
    {NULL, "AMP_CUDA_SYNC", YES_NO("wait for the device after every node"), set_yes_no, AT(run.cuda_sync),
     AMP_DOOR_SESSION, .keyword = "cuda_sync", .example = "1", .refused = "maybe",
     .doc = "CUDA, for debugging: wait for the device after every node, so that a kernel's failure names its node"},
    {NULL, "AMP_CUDA_PROFILE", YES_NO("time every node, print the device time per op at close"), set_yes_no,
     AT(run.cuda_profile), AMP_DOOR_SESSION, .keyword = "cuda_profile", .example = "1", .refused = "maybe",
     .doc = "CUDA: time every node with CUDA events and print, when the session closes, the device time per op "
            "type (stderr), each node's first call (planning, loading kernels) left out"},
    {NULL, "AMP_SIM_LACKS", "comma-separated op types", set_op_types, AT(run.sim_lacks), AMP_DOOR_SESSION,
     .keyword = "sim_lacks", .example = "MatMul,Relu", .refused = "NoSuchOp",
     .doc = "the device simulator, for the tests of the fallback: op types it claims to have no kernel for, which "
            "run on the CPU fallback with copies around them"},
    {NULL, "AMP_SIM_REFUSES", "comma-separated op types", set_op_types, AT(run.sim_refuses), AMP_DOOR_SESSION,
     .keyword = "sim_refuses", .example = "MatMul", .refused = "NoSuchOp",
     .doc = "the device simulator: op types whose kernels it takes at prepare but which refuse when they run, as a "
            "CUDA kernel does for a geometry its library cannot run (the node moves to the CPU fallback for good)"},
    {NULL, "AMP_DNNL", YES_NO("the CPU kernels may use oneDNN, the default"), set_dnnl, 0, AMP_DOOR_SESSION,
     .keyword = "dnnl", .example = "0", .refused = "maybe",
     .doc = "0: the CPU kernels use OpenBLAS for everything, not oneDNN. Process-wide, as the library is: it counts "
            "when a session sets it before oneDNN's first use"},
    /* Data parallelism (docs/parallel.md, runtime/session_dp.c): what a one-process run
     * cannot show, tests/runtime/test_data_parallel.py checks under mpirun. */
    {NULL, "AMP_DATA_PARALLEL", "auto, mpi or off", set_data_parallel, 0, AMP_DOOR_SESSION, .field = "data_parallel",
     .example = "off", .refused = "ranks",
     .doc = "whether a session joins an MPI job ([parallel.md](parallel.md)) when its option `data_parallel` is "
            "`AMP_DATA_PARALLEL_AUTO`: `auto` when an MPI launcher started more than one rank, `mpi` always (one "
            "rank on CUDA is then a one-rank NCCL communicator), `off` never"},
    {NULL, "AMP_COMM_TIMEOUT", "a number of seconds above 0", set_comm_timeout, 0, AMP_DOOR_SESSION,
     .field = "comm_timeout", .example = "30", .refused = "0",
     .doc = "how long a data-parallel collective waits for the other ranks before the job is ended naming the "
            "ranks that did not arrive (unset: 300; the session option `comm_timeout`)"},
    LIBRARY_ROW("AMP_MPI_PLUGIN", run.mpi_plugin, "libampc_mpi.so",
                "the MPI plugin a data-parallel session opens (unset: `libampc_mpi.so` beside the executable, beside "
                "`libampc.so`, then on the loader's path)"),
    LIBRARY_ROW("AMP_NCCL_LIB", run.nccl_lib, "libnccl.so.2",
                "CUDA: the NCCL library a data-parallel session loads (unset: `libnccl.so.2` on the loader's path, "
                "else beside the CUDA libraries the build found)"),
    {NULL, "AMP_LOG_PATH", "a folder", set_text, AT(run.log_path), AMP_DOOR_AMP, .field = "log_path",
     .example = "amp_log",
     .refused = "/proc/ampc-log",
     .doc = "a folder (made if needed) for `before.onnx`, `after.onnx`, `before.txt`, `after.txt`, `summary.txt` "
            "and `paint.txt` (the four op lists in force, then the nodes of each paint bucket); each is created "
            "anew (a file or symbolic link of that name is replaced, never written through), the folder itself may "
            "not be a symbolic link, and a folder that cannot be made or written fails the open (the session "
            "option `log_path`)"},
    /* The conversion's options. */
    {"precision", "AMP_PRECISION", "fp16 (or float16, half), bf16 (or bfloat16) or auto", set_precision, 0, CONV,
     .field = "precision", .example = "bf16", .refused = "fp8",
     .doc = "the 16-bit type, as `--precision` (sessions default to `auto`: [Precision auto](cli.md#precision-auto); "
            "the session option `precision`)"},
    /* A test hook: what auto decides on a CPU with these features (the CLI reads it too). */
    {NULL, "AMP_CPU_FEATURES", "none or a comma-separated list of avx512_bf16, amx_bf16, avx512_fp16, amx_fp16",
     set_cpu_features, 0, CONV | AMP_DOOR_EXPORT,
     .keyword = "cpu_features", .example = "avx512_bf16", .refused = "sse9",
     .doc = "a test hook: what `auto` takes the CPU to have, instead of what cpuid says"},
    {"level", NULL, "default, tensor-cores-only, treat-infer-as-deny, unsafe-force-all or norms-16", set_level, 0, 0,
     .keyword = "level", .doc = NULL},
    {"opset-upgrade", "AMP_OPSET_UPGRADE", "auto, never or an opset from 7 to 22", set_opset_upgrade, 0, CONV,
     .field = "opset_upgrade", .example = "22", .refused = "23",
     .doc = "as `--opset-upgrade` (the session option `opset_upgrade`)"},
    {"allow", "AMP_ALLOWLIST_ADD", OPS, set_list, AMP_CLASS_ALLOW, CONV, .field = "allowlist_add",
     .example = "Add", .refused = "NoSuchOp",
     .doc = "ops added to the allow list, as `--allow` (the session option `allowlist_add`)"},
    {"infer", "AMP_INFERLIST_ADD", OPS, set_list, AMP_CLASS_INFER, CONV, .field = "inferlist_add",
     .example = "Transpose", .refused = "NoSuchOp",
     .doc = "ops added to the infer list, as `--infer`"},
    {"clear", "AMP_CLEARLIST_ADD", OPS, set_list, AMP_CLASS_CLEAR, CONV, .field = "clearlist_add",
     .example = "MatMul", .refused = "NoSuchOp",
     .doc = "ops added to the clear list, as `--clear`"},
    {"deny", "AMP_DENYLIST_ADD", OPS, set_list, AMP_CLASS_DENY, CONV, .field = "denylist_add",
     .example = "MatMul", .refused = "NoSuchOp",
     .doc = "ops added to the deny list, as `--deny`"},
    {NULL, "AMP_ALLOWLIST_REMOVE", OPS, set_list, AMP_CLASS_ALLOW | REMOVE, CONV, .field = "allowlist_remove",
     .example = "MatMul", .refused = "NoSuchOp",
     .doc = "ops taken out of the allow list, after every addition (an op removed from its list is in none)"},
    {NULL, "AMP_INFERLIST_REMOVE", OPS, set_list, AMP_CLASS_INFER | REMOVE, CONV, .field = "inferlist_remove",
     .example = "Add",
     .refused = "NoSuchOp", .doc = "ops taken out of the infer list"},
    {NULL, "AMP_CLEARLIST_REMOVE", OPS, set_list, AMP_CLASS_CLEAR | REMOVE, CONV, .field = "clearlist_remove",
     .example = "Relu",
     .refused = "NoSuchOp", .doc = "ops taken out of the clear list"},
    {NULL, "AMP_DENYLIST_REMOVE", OPS, set_list, AMP_CLASS_DENY | REMOVE, CONV,
     .field = "denylist_remove", .example = "SoftmaxCrossEntropyLoss",
     .refused = "NoSuchOp", .doc = "ops taken out of the deny list"},
    {"keep-fp32", NULL, "a glob of node names, e.g. 'head/*'", set_keep_fp32, 0, 0,
     .keyword = "keep_fp32", .doc = NULL},
    {"keep-io-types", NULL, "nothing", set_keep_io, false, 0, .keyword = "keep_io_types", .doc = NULL},
    {"no-keep-io-types", NULL, "nothing", set_keep_io, true, 0, .keyword = "no_keep_io_types", .doc = NULL},
    {"loss", NULL, "the name of the loss value", set_loss, 0, 0, .keyword = "loss", .doc = NULL},
    {"loss-scale", "AMP_LOSS_SCALE", "dynamic, none or a positive number up to 3.4e38 (float32's largest)",
     set_loss_scale, 0, CONV, .field = "loss_scale", .example = "1024", .refused = "foo",
     .doc = "loss scaling of training graphs, as `--loss-scale` (the session option `loss_scale`)"},
    {"loss-scale-state", NULL, "initializers or inputs", set_scale_state, 0, 0,
     .keyword = "loss_scale_state", .doc = NULL},
    {"loss-scale-init", NULL, "a positive number up to 3.4e38 (float32's largest)", set_scale_init, 0, 0,
     .keyword = "loss_scale_init", .doc = NULL},
    {"growth-interval", NULL, "a whole number from 1 to 2147483647", set_growth_interval, 0, 0,
     .keyword = "growth_interval", .doc = NULL},
    {"growth-factor", NULL, "a number above 1, up to 3.4e38", set_growth_factor, 0, 0,
     .keyword = "growth_factor", .doc = NULL},
    {"backoff-factor", NULL, "a number between 0 and 1", set_backoff_factor, 0, 0,
     .keyword = "backoff_factor", .doc = NULL},
    {"calibration", "AMP_CALIBRATION", "a statistics file of 'ampc calibrate'", set_calibration, 0, CONV,
     .field = "calibration", .example = "model.stats", .refused = "/nonexistent/ampc.stats",
     .doc = "measured ranges, as `--calibration` (the session option `calibration`); a file that cannot be read is "
            "an error"},
    {"calib-max-activation", "AMP_CALIB_MAX_ACTIVATION", "a positive number", set_calib_max, 0, CONV,
     .example = "0.5", .refused = "-1", .keyword = "calib_max_activation", .doc = "as `--calib-max-activation`"},
    {"calib-min-activation", "AMP_CALIB_MIN_ACTIVATION", "a number >= 0 (0: off)", set_calib_min, 0, CONV,
     .example = "1", .refused = "x", .keyword = "calib_min_activation", .doc = "as `--calib-min-activation`"},
    /* What the conversion runs and how it writes the model. */
    {"passes", NULL, "a comma-separated list of passes, or none", set_passes, 0, 0, .keyword = "passes", .doc = NULL},
    {"external-data", NULL, "auto, always or never", set_external, 0, 0, .keyword = "external_data", .doc = NULL},
    {"no-value-info", NULL, "nothing", set_no_value_info, 0, 0, .keyword = "no_value_info", .doc = NULL},
};
#undef OPS
#undef CONV
#undef YES_NO
#undef AT
#undef LIBRARY_ROW
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0] };
_Static_assert(N_OPTIONS <= 64, "AmpOptions.given has a bit per row");

const AmpOption *amp_option_at(size_t i) {
    return i < N_OPTIONS ? &OPTIONS[i] : NULL;
}

const char *amp_option_keyword(const AmpOption *d) {
    return d->field ? d->field : d->keyword;
}

const AmpOption *amp_option_by_keyword(const char *name) {
    for (size_t i = 0; name && i < N_OPTIONS; i++)
        if (amp_option_keyword(&OPTIONS[i]) && is(amp_option_keyword(&OPTIONS[i]), name)) return &OPTIONS[i];
    return NULL;
}

bool amp_option_converts(const AmpOption *d) {
    return (d->doors & AMP_DOOR_CONVERT) || (d->name && !d->doors);
}

bool amp_option_adds_up(const AmpOption *d) {
    return d->set == set_list;
}

const AmpOption *amp_option_find(const char *name) {
    for (size_t i = 0; name && i < N_OPTIONS; i++)
        if ((OPTIONS[i].name && is(OPTIONS[i].name, name)) || (OPTIONS[i].env && is(OPTIONS[i].env, name)))
            return &OPTIONS[i];
    return NULL;
}

/* ---- the caller's door, in messages ------------------------------------------------- */

/* Session options outside the table (no variable): their flag in `ampc run` and field. */
static const struct {
    const char *flag, *field;
} SESSION_ONLY[] = {
    {"optimizer", "ort_optimizer"},  {"checkpoint", "ort_checkpoint"}, {"lr", "learning_rate"},
    {"timeout", "timeout_seconds"},  {"max-iterations", "max_iterations"}, {"no-fuse", "no_fuse"},
    {"no-fallback", "no_fallback"},  {"seed", "seed"},
};

const char *amp_option_say(const char *flag, const char *value, char *buf, size_t n) {
    const AmpOption *d = amp_option_find(flag);
    const char *field = d ? d->field : NULL, *env = d ? d->env : NULL;
    /* Python's keywords name every row; a C program sets only the session's fields. */
    if (d && !field && amp_front() == AMP_FRONT_PYTHON) field = d->keyword;
    for (size_t i = 0; !d && i < sizeof SESSION_ONLY / sizeof *SESSION_ONLY; i++)
        if (is(SESSION_ONLY[i].flag, flag)) field = SESSION_ONLY[i].field;
    AmpFront front = amp_front();
    if (front == AMP_FRONT_CLI || !field) {
        snprintf(buf, n, "--%s%s%s", flag, value ? " " : "", value ? value : "");
        return buf;
    }
    const char *eq = front == AMP_FRONT_PYTHON ? "=" : " = ";
    int k = value ? snprintf(buf, n, "%s%s\"%s\"", field, eq, value) : snprintf(buf, n, "%s", field);
    if (k < 0 || (size_t)k >= n) return buf;
    const char *what = front == AMP_FRONT_C ? "AmpSessionOptions" : NULL;
    if (env && value)
        snprintf(buf + k, n - (size_t)k, " (%s%sor %s=%s)", what ? what : "", what ? "; " : "", env, value);
    else if (what)
        snprintf(buf + k, n - (size_t)k, " (%s)", what);
    return buf;
}

AmpCode amp_option_set(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st) {
    AmpStatus own = {AMP_OK, ""}; /* the setter's own message, if it made one */
    if (d->set(o, d, label, v ? v : "", &own)) return o->given |= (uint64_t)1 << (d - OPTIONS), AMP_OK;
    if (own.code != AMP_OK) return amp_fail(st, own.code, "%s", own.msg);
    return amp_option_refuse(st, label, v ? v : "", d->expect);
}

AmpCode amp_options_read_env(AmpOptions *o, AmpOptionGetFn get, void *ctx, unsigned door, AmpStatus *st) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const AmpOption *d = &OPTIONS[i];
        if (!d->env || !(d->doors & door)) continue;
        if ((o->given >> i & 1) && !amp_option_adds_up(d)) continue; /* its flag wins */
        bool from_field = false;
        const char *v = get(ctx, d, &from_field);
        /* A refused value is named as it came: the variable, or the session's field (C:
         * AmpSessionOptions.loss_scale; Python: its keyword). */
        char field[96];
        if (from_field && d->field)
            snprintf(field, sizeof field, "%s%s", amp_front() == AMP_FRONT_C ? "AmpSessionOptions." : "", d->field);
        AmpCode rc = v && *v ? amp_option_set(o, d, from_field && d->field ? field : d->env, v, st) : AMP_OK;
        if (rc) return rc;
    }
    return AMP_OK;
}

const char *amp_option_getenv(void *ctx, const AmpOption *d, bool *from_field) {
    (void)ctx, (void)from_field;
    return getenv(d->env);
}

int amp_precision_auto(AmpDeviceClass dev, unsigned f, const char **why) {
    if (dev == AMP_DEVICE_GPU) {
        *why = "a GPU computes fp16 on its tensor cores";
        return AMP_DT_FLOAT16;
    }
    if (f & (AMP_CPU_AVX512_BF16 | AMP_CPU_AMX_BF16)) {
        *why = f & AMP_CPU_AVX512_BF16 ? "the CPU has bf16 dot products (AVX512-BF16)"
                                       : "the CPU has bf16 dot products (AMX-BF16)";
        return AMP_DT_BFLOAT16;
    }
    *why = "the CPU has no bf16 dot products (AVX512-BF16, AMX-BF16): 16-bit values would only be widened to "
           "float32 there, slower than float32 alone (fp16 too), so the graph stays float32";
    return AMP_DT_FLOAT;
}

void amp_options_decide(AmpOptions *o, AmpDeviceClass dev) {
    if (!o->precision_auto) return;
    int dt = amp_precision_auto(dev, o->cpu_features_given ? o->cpu_features : amp_cpu_features(),
                                &o->precision_why);
    o->stay_fp32 = dt == AMP_DT_FLOAT;
    o->po.precision = o->stay_fp32 ? 0 : dt;
}

AmpLossScaleMode amp_loss_scale_mode(const AmpPassOptions *po) {
    if (po->loss_scale_mode != AMP_LOSS_SCALE_DEFAULT) return po->loss_scale_mode;
    return po->precision == AMP_DT_BFLOAT16 ? AMP_LOSS_SCALE_NONE : AMP_LOSS_SCALE_DYNAMIC;
}

AmpCode amp_options_finish(AmpOptions *o, AmpStatus *st) {
    AmpCode rc = amp_list_edits_check(o->edits, o->n_edits, st);
    if (rc) return rc;
    /* The dynamic-scaling settings mean nothing without dynamic scaling: say so. */
    bool dyn_opts = o->loss_scale_init > 0 || o->po.growth_interval || o->po.growth_factor > 0 ||
                    o->po.backoff_factor > 0;
    if (dyn_opts && amp_loss_scale_mode(&o->po) != AMP_LOSS_SCALE_DYNAMIC)
        return amp_fail(st, AMP_ERR_USAGE,
                        "--loss-scale-init, --growth-interval, --growth-factor and --backoff-factor set "
                        "dynamic loss scaling, which is off here (%s); add --loss-scale dynamic",
                        o->po.loss_scale_mode == AMP_LOSS_SCALE_DEFAULT ? "bf16 needs none by default"
                                                                        : "--loss-scale is not dynamic");
    if (o->loss_scale_init > 0) o->po.loss_scale = o->loss_scale_init;
    o->po.list_edits = o->edits;
    o->po.n_list_edits = o->n_edits;
    o->po.keep_fp32 = o->keep;
    o->po.n_keep_fp32 = o->n_keep;
    return AMP_OK;
}

void amp_options_free(AmpOptions *o) {
    free(o->edits);
    free(o->keep);
    amp_calib_free(o->calib);
    memset(o, 0, sizeof *o);
}
