/* `ampc run MODEL` and `ampc bench MODEL`: inference, or training steps, through the public
 * session API. Inputs come from --inputs DIR (ONNX TensorProto files input_0.pb, ... matched
 * by name, else by order) or are deterministic random data shaped by the model (symbolic
 * dims from --dim, index inputs within their range). run prints a line per step, then timing
 * and memory, and writes the last step's outputs with --outputs DIR; bench prints timings. */
#include "tools/run.h"
#include "tools/profile.h"
#include "tools/run_dp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ampc/ampc.h"
#include "runtime/observe.h"
#include "ir/half.h"
#include "passes/training.h"
#include "ir/ir.h"
#include "tools/cli_say.h"

typedef RunInputs Inputs;

void ampc_run_inputs_free(RunInputs *in) {
    for (size_t i = 0; i < in->n_owned; i++) free(in->owned[i]);
    free(in->owned);
    free(in->t);
    amp_model_free(in->scratch);
}

int ampc_run_fail(const AmpStatus *st, AmpCode c, const char *file) {
    const char *msg = st->msg[0] ? st->msg : amp_code_name(c);
    if (file && !strstr(msg, file)) ampc_say("%s: %s", file, msg);
    else ampc_say("%s", msg);
    return (c >= AMP_OK && c <= AMP_ERR_INTERNAL) ? (int)c : (int)AMP_ERR_INTERNAL;
}

/* Whatever was printed reached standard output (a full disk or /dev/full says so here, at
 * the latest: the printing itself is not checked line by line). */
int ampc_stdout_done(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return AMP_OK;
    ampc_say("writing to standard output failed: %s", strerror(errno));
    return AMP_ERR_INTERNAL;
}

/* ---- inputs from files -------------------------------------------------------------------- */

/* The whole of the regular file at path; NULL with *missing when there is none, else NULL
 * with st set. Opened without blocking: a FIFO (or a device) would otherwise wait forever
 * for a writer or never end, so anything but a regular file is refused, as MODEL is. */
static char *read_file(const char *path, size_t *len, bool *missing, AmpStatus *st) {
    *missing = false;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) *missing = true;
        else amp_fail(st, AMP_ERR_INPUT, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        amp_fail(st, AMP_ERR_INPUT, "%s: not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    if (!b) amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    else if (ferror(f)) {
        amp_fail(st, AMP_ERR_INPUT, "%s: %s", path, strerror(errno));
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n;
    return b;
}

static int find_input(const AmpSession *s, AmpMode mode, const char *name) {
    AmpIoInfo info;
    for (size_t i = 0; amp_session_input_info(s, mode, i, &info); i++)
        if (strcmp(info.name, name) == 0) return (int)i;
    return -1;
}

static AmpCode push(Inputs *in, const AmpTensorView *t, AmpStatus *st) {
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->t[i].name, t->name) == 0) return amp_fail(st, AMP_ERR_USAGE, "input '%s' given twice", t->name);
    AmpTensorView *p = realloc(in->t, (in->n + 1) * sizeof *p);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    in->t = p;
    in->t[in->n++] = *t;
    return AMP_OK;
}

/* After input_0.pb .. input_{n-1}.pb were read: any other input_*.pb in dir is refused (a
 * gap: input_2.pb without input_1.pb; or a name not of the form input_N.pb), so no file
 * given is silently left out. Other files (ONNX's output_N.pb beside them) are not inputs. */
static AmpCode check_dir_rest(const char *dir, size_t n, AmpStatus *st) {
    DIR *d = opendir(dir);
    if (!d) return AMP_OK; /* the files were read: a folder that lists nothing is no gap */
    AmpCode rc = AMP_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        const char *name = e->d_name;
        if (strncmp(name, "input_", 6) != 0) continue;
        size_t len = strlen(name), k = 0, digits = 0;
        while (name[6 + digits] >= '0' && name[6 + digits] <= '9') k = k * 10 + (size_t)(name[6 + digits++] - '0');
        bool numbered = digits > 0 && digits < 10 && (digits == 1 || name[6] != '0') && strcmp(name + 6 + digits, ".pb") == 0;
        if (numbered && k < n) continue;
        if (numbered)
            rc = amp_fail(st, AMP_ERR_USAGE, "--inputs %s: %s is there but input_%zu.pb is missing: inputs are "
                          "input_0.pb, input_1.pb, ... with no gap", dir, name, n);
        else if (len > 3 && strcmp(name + len - 3, ".pb") == 0)
            rc = amp_fail(st, AMP_ERR_USAGE, "--inputs %s: %s is not named input_N.pb (N = 0, 1, ...)", dir, name);
    }
    closedir(d);
    return rc;
}

/* input_K.pb for K = 0, 1, ... until one is missing; then no other input_*.pb may be there. */
static AmpCode load_dir(const AmpSession *s, AmpMode mode, const char *dir, Inputs *in, AmpStatus *st) {
    if (!(in->scratch = amp_model_new())) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t k = 0;; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/input_%zu.pb", dir, k);
        size_t len = 0;
        bool missing;
        char *bytes = read_file(path, &len, &missing, st);
        if (!bytes) {
            if (!missing) return st->code;
            if (k == 0) return amp_fail(st, AMP_ERR_USAGE, "--inputs %s: no input_0.pb there", dir);
            return check_dir_rest(dir, k, st);
        }
        if (len == 0) {
            free(bytes);
            return amp_fail(st, AMP_ERR_INPUT, "%s: an empty file, not a TensorProto", path);
        }
        AmpTensor *t = NULL;
        AmpCode rc = amp_tensor_load_bytes(in->scratch, bytes, len, &t, st);
        free(bytes);
        if (rc) {
            amp_status_prefix(st, "%s: ", path);
            return rc;
        }
        /* By the tensor's name, else the k-th input that has no default. */
        const char *name = NULL;
        if (t->name && *t->name && find_input(s, mode, t->name) >= 0) name = t->name;
        AmpIoInfo info;
        for (size_t i = 0, r = 0; !name && amp_session_input_info(s, mode, i, &info); i++)
            if (!info.optional && r++ == k) name = info.name;
        if (!name) return amp_fail(st, AMP_ERR_USAGE, "%s: matches no input of the model", path);
        AmpBytes raw;
        if ((rc = amp_tensor_bytes(in->scratch, t, &raw, st))) return rc;
        if (t->ndims > AMP_TENSOR_MAX_RANK) return amp_fail(st, AMP_ERR_UNSUPPORTED, "%s: rank %zu", path, t->ndims);
        AmpTensorView v = {.name = name, .dtype = t->dtype, .rank = (int)t->ndims, .data = (void *)raw.data};
        for (size_t d = 0; d < t->ndims; d++) v.dims[d] = t->dims[d];
        if ((rc = push(in, &v, st))) return rc;
    }
}

/* ---- random inputs ------------------------------------------------------------------------ */

static uint64_t next_rand(uint64_t *x) { /* splitmix64 */
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool dim_value(const RunArgs *a, const char *param, int64_t *out) {
    size_t n = strlen(param);
    for (int i = 0; i < a->n_dims; i++)
        if (strncmp(a->dims[i], param, n) == 0 && a->dims[i][n] == '=') {
            *out = strtoll(a->dims[i] + n + 1, NULL, 10);
            return true;
        }
    return false;
}

/* Whether a note about symbolic dim `param` was printed already (remembers a few). */
static bool noted(const char *param) {
    static const char *seen[32];
    static size_t n;
    for (size_t i = 0; i < n; i++)
        if (strcmp(seen[i], param) == 0) return true;
    if (n < 32) seen[n++] = param;
    return false;
}

static AmpCode random_input(const RunArgs *a, const AmpIoInfo *info, uint64_t *rng, Inputs *in, AmpStatus *st) {
    if (info->rank < 0)
        return amp_fail(st, AMP_ERR_USAGE, "input '%s' has no shape in the model: give its data with --inputs", info->name);
    if (info->rank > AMP_TENSOR_MAX_RANK)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "input '%s' has rank %d; the runtime takes up to %d", info->name,
                        info->rank, AMP_TENSOR_MAX_RANK);
    AmpTensorView v = {.name = info->name, .dtype = info->dtype, .rank = info->rank};
    uint64_t n = 1;
    for (int d = 0; d < info->rank; d++) {
        int64_t x = info->dims[d];
        if (x < 0) {
            const char *p = info->dim_params[d];
            if (!p || !dim_value(a, p, &x)) {
                x = 1;
                if (!p || !noted(p))
                    ampc_say("note: input '%s' dim %d%s%s%s is not fixed: using 1 (set it with --dim %s=VALUE)",
                             info->name, d, p ? " ('" : "", p ? p : "", p ? "')" : "", p ? p : "NAME");
            }
        }
        v.dims[d] = x;
        n *= (uint64_t)x;
    }
    size_t bytes;
    if (!amp_tensor_expected_bytes(v.dtype, n, &bytes) || v.dtype == AMP_DT_STRING || v.dtype == AMP_DT_UNDEFINED)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "input '%s': cannot make random %s data", info->name,
                        amp_dtype_name(v.dtype));
    void **o = realloc(in->owned, (in->n_owned + 1) * sizeof *o);
    if (!o) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    in->owned = o;
    if (!(v.data = in->owned[in->n_owned++] = malloc(bytes ? bytes : 1)))
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = next_rand(rng);
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0); /* [-1, 1) */
        /* Indices stay in their range; other integers are small. */
        int64_t k = info->index_bound > 0 ? (int64_t)(r % (uint64_t)info->index_bound) : (int64_t)(r % 4);
        switch (v.dtype) {
        case AMP_DT_FLOAT: ((float *)v.data)[i] = f; break;
        case AMP_DT_DOUBLE: ((double *)v.data)[i] = f; break;
        case AMP_DT_FLOAT16: ((uint16_t *)v.data)[i] = amp_f32_to_f16(f); break;
        case AMP_DT_BFLOAT16: ((uint16_t *)v.data)[i] = amp_f32_to_bf16(f); break;
        case AMP_DT_INT64: ((int64_t *)v.data)[i] = k; break;
        case AMP_DT_INT32: ((int32_t *)v.data)[i] = (int32_t)k; break;
        case AMP_DT_INT16: ((int16_t *)v.data)[i] = (int16_t)k; break;
        case AMP_DT_INT8: ((int8_t *)v.data)[i] = (int8_t)k; break;
        case AMP_DT_UINT64: ((uint64_t *)v.data)[i] = (uint64_t)k; break;
        case AMP_DT_UINT32: ((uint32_t *)v.data)[i] = (uint32_t)k; break;
        case AMP_DT_UINT16: ((uint16_t *)v.data)[i] = (uint16_t)k; break;
        case AMP_DT_UINT8: ((uint8_t *)v.data)[i] = (uint8_t)k; break;
        case AMP_DT_BOOL: ((uint8_t *)v.data)[i] = (uint8_t)(r & 1); break;
        default:
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "input '%s': cannot make random %s data", info->name,
                            amp_dtype_name(v.dtype));
        }
    }
    return push(in, &v, st);
}

/* Every input without a default that the files did not give gets random data. */
static AmpCode fill_random(const RunArgs *a, const AmpSession *s, AmpMode mode, Inputs *in, AmpStatus *st) {
    uint64_t rng = a->seed ? a->seed : 1;
    AmpIoInfo info;
    for (size_t i = 0; amp_session_input_info(s, mode, i, &info); i++) {
        if (info.optional) continue;
        bool given = false;
        for (size_t k = 0; k < in->n && !given; k++) given = strcmp(in->t[k].name, info.name) == 0;
        if (given) continue;
        if (a->inputs) ampc_say("note: input '%s' is not in %s: using random data", info.name, a->inputs);
        AmpCode rc = random_input(a, &info, &rng, in, st);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* ---- output ------------------------------------------------------------------------------- */

static size_t view_nelem(const AmpTensorView *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
    return n;
}

/* "output 'Y' float[3,4]: 0.1 0.2 ... (12 values)" */
static void print_output(const AmpTensorView *t) {
    printf("output '%s' %s[", t->name, amp_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) printf("%s%" PRId64, i ? "," : "", t->dims[i]);
    printf("]:");
    size_t n = view_nelem(t), show = n < 8 ? n : 8;
    bool printable = amp_dtype_is_float(t->dtype) ? amp_dtype_bits(t->dtype) >= 16 : t->dtype != AMP_DT_STRING;
    for (size_t i = 0; printable && i < show; i++) printf(" %.9g", amp_view_value(t, i));
    if (!printable) printf(" (%s values not shown)", amp_dtype_name(t->dtype));
    else if (show < n) printf(" ...");
    printf(" (%zu value%s)\n", n, n == 1 ? "" : "s");
}

int ampc_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double ampc_median_sorted(const double *v, size_t n) {
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ampc_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}


/* ---- --outputs DIR -------------------------------------------------------------------------- */

/* Creates `dir` and every missing folder above it (mkdir -p). */
static AmpCode make_dirs(const char *dir, AmpStatus *st) {
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(p, dir, n + 1);
    AmpCode rc = AMP_OK;
    for (size_t i = 1; i <= n && !rc; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = amp_fail(st, AMP_ERR_INPUT, "--outputs %s: cannot create the folder %s: %s", dir, p, strerror(errno));
        p[i] = c;
    }
    free(p);
    struct stat sb;
    if (!rc && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        rc = amp_fail(st, AMP_ERR_INPUT, "--outputs %s: not a folder", dir);
    return rc;
}

/* Bytes to write whole (amp_output_write). */
typedef struct Bytes {
    const uint8_t *data;
    size_t len;
} Bytes;

static bool write_bytes(void *ctx, FILE *f) {
    const Bytes *b = ctx;
    return fwrite(b->data, 1, b->len, f) == b->len;
}

/* DIR/output_K.pb for each output K: a TensorProto named after the output, its elements
 * in raw_data exactly as the session returned them (the conformance-data layout). */
static AmpCode write_outputs(const char *dir, const AmpTensorView *outs, size_t n, AmpStatus *st) {
    AmpCode rc = make_dirs(dir, st);
    AmpModel *m = rc ? NULL : amp_model_new();
    if (!rc && !m) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const AmpTensorView *v = &outs[i];
        int64_t dims[AMP_TENSOR_MAX_RANK];
        size_t bytes = 0;
        if (v->dtype == AMP_DT_STRING || !amp_tensor_expected_bytes(v->dtype, view_nelem(v), &bytes)) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "--outputs: output '%s' is %s, which cannot be written", v->name,
                          amp_dtype_name(v->dtype));
            break;
        }
        for (int d = 0; d < v->rank; d++) dims[d] = v->dims[d];
        AmpTensor t = {.name = v->name, .dtype = v->dtype, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW,
                       .ndims = (size_t)v->rank, .dims = dims, .nelem = view_nelem(v),
                       .raw = {(const uint8_t *)v->data, bytes}};
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/output_%zu.pb", dir, i);
        rc = amp_tensor_save_bytes(m, &t, &buf, &len, st);
        if (rc) amp_status_prefix(st, "%s: ", path);
        else rc = amp_output_write(path, write_bytes, &(Bytes){buf, len}, st);
        free(buf);
    }
    amp_model_free(m);
    return rc;
}

/* ---- ampc run ------------------------------------------------------------------------------- */

const char *ampc_amp_note(const AmpSessionStats *s, char *buf, size_t len) {
    if (!s->amp_precision || !s->amp_precision[0]) return "";
    bool why = s->amp_precision_why && s->amp_precision_why[0];
    snprintf(buf, len, ", AMP_AUTO %s (%s%s%s)", s->amp_applied ? "rewrite applied" : "rewrote nothing",
             s->amp_precision, why ? "; precision auto: " : "", why ? s->amp_precision_why : "");
    return buf;
}

AmpCode ampc_run_inputs(const RunArgs *a, const AmpSession *s, AmpMode mode, RunInputs *in, AmpStatus *st) {
    if (a->inputs && a->inputs_per_rank)
        return amp_fail(st, AMP_ERR_USAGE, "--inputs and --inputs-per-rank: give one of them");
    char buf[4096];
    const char *dir = ampc_dp_inputs_dir(a, s, buf, sizeof buf);
    AmpCode rc = dir ? load_dir(s, mode, dir, in, st) : AMP_OK;
    if (!rc) rc = fill_random(a, s, mode, in, st);
    /* one folder for every rank (or random data, the same on each): each takes its slice */
    return rc || a->inputs_per_rank ? rc : ampc_dp_slice(s, mode, in, st);
}

AmpSessionOptions ampc_session_options(const RunArgs *a) {
    AmpSessionOptions so = {.backend = (AmpBackendKind)a->backend,
                            .seed = a->seed,
                            .max_iterations = a->max_iterations,
                            .timeout_seconds = a->timeout,
                            .no_fallback = a->no_fallback,
                            .no_fuse = a->no_fuse,
                            .tf32 = a->tf32,
                            .ort_optimizer = a->ort_optimizer,
                            .ort_checkpoint = a->ort_checkpoint,
                            .learning_rate = a->lr,
                            .threads = a->threads};
    return so;
}

/* The index of output `name` among mode's outputs, or -1. */
static int output_index(const AmpSession *s, AmpMode mode, const char *name) {
    AmpIoInfo info;
    for (size_t i = 0; amp_session_output_info(s, mode, i, &info); i++)
        if (strcmp(info.name, name) == 0) return (int)i;
    return -1;
}

/* Whether the paths a and b name one existing file (device and inode). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int ampc_cmd_run(const RunArgs *a) {
    AmpStatus st = {AMP_OK, ""};
    /* No output replaces a file the command was asked to read (--load-state may be the
     * --save-state: it is read whole before the steps, and the save is atomic). */
    const struct {
        const char *path, *what;
    } reads[] = {{a->model, "MODEL"}, {a->ort_optimizer, "--optimizer"}, {a->ort_checkpoint, "--checkpoint"}};
    for (size_t i = 0; a->save_state && i < sizeof reads / sizeof *reads; i++)
        if (same_file(a->save_state, reads[i].path))
            return ampc_usage_error("--save-state '%s' is %s ('%s'), which this run reads: saving the state there "
                                    "would destroy it; save it elsewhere", a->save_state, reads[i].what, reads[i].path);
    AmpSessionOptions so = ampc_session_options(a);
    AmpSession *s = NULL;
    AmpCode rc = amp_session_open(a->model, &so, &s, &st);
    if (rc) return ampc_run_fail(&st, rc, a->model);
    ampc_dp_quiet(s);

    int loss = amp_session_find_loss(s, a->loss, &st);
    bool training = loss >= 0 || amp_session_has_training_info(s);
    if (loss == -2 || (training && loss < 0)) {
        if (loss != -2)
            amp_fail(&st, AMP_ERR_USAGE, "the model trains but no output is named like a loss: choose one with --loss NAME");
        int code = ampc_dp_fail(s, ampc_run_fail(&st, st.code, a->model));
        amp_session_close(s);
        return code;
    }
    AmpMode mode = training ? AMP_MODE_TRAIN : AMP_MODE_RUN;
    if (!a->ort_optimizer) /* onnxruntime-training's training model, run alone */
        for (size_t i = 0; i < amp_session_input_count(s, mode); i++) {
            AmpIoInfo info;
            size_t len = amp_session_input_info(s, mode, i, &info) ? strlen(info.name) : 0;
            if (len > 25 && strcmp(info.name + len - 25, "_grad.accumulation.buffer") == 0) {
                ampc_say("note: this is onnxruntime-training's training model (gradient accumulators, parameters as "
                         "inputs): nothing updates its parameters; to train it, give --optimizer "
                         "optimizer_model.onnx --checkpoint checkpoint");
                break;
            }
        }
    Inputs in = {0};
    const char *failed_file = a->model;
    if (a->load_state && (rc = amp_session_state_load(s, a->load_state, &st))) failed_file = a->load_state;
    if (!rc) rc = ampc_run_inputs(a, s, mode, &in, &st);
    struct stat sb; /* an --outputs that can never be a folder fails before the steps */
    if (!rc && a->outputs && stat(a->outputs, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        rc = amp_fail(&st, AMP_ERR_INPUT, "--outputs %s: not a folder", a->outputs);
        failed_file = a->outputs;
    }

    size_t n_out = amp_session_output_count(s, mode);
    int scale_new = output_index(s, mode, AMP_LS_SCALE_NEW), found_inf = output_index(s, mode, AMP_LS_FOUND_INF);
    AmpTensorView *outs = calloc(n_out ? n_out : 1, sizeof *outs);
    double *ms = calloc((size_t)a->steps, sizeof *ms);
    if (!rc && (!outs || !ms)) rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
    /* A training step hands out what is printed: the loss and the loss-scaling pass's scale
     * and found_inf (every gradient copied out would be a pass over the weights no trainer
     * makes); every output on the step whose outputs --outputs writes. */
    const char *few_names[3];
    int few_at[3], n_few = 0;
    AmpTensorView few[3];
    const int wanted[3] = {loss, scale_new, found_inf};
    for (int k = 0; training && k < 3; k++) {
        AmpIoInfo info;
        if (wanted[k] >= 0 && amp_session_output_info(s, mode, (size_t)wanted[k], &info))
            few_names[n_few] = info.name, few_at[n_few++] = wanted[k];
    }
    for (long step = 0; !rc && step < a->steps; step++) {
        ampc_dp_test_hooks(s, step + 1);
        bool all = !training || n_few == 0 || (step == a->steps - 1 && a->outputs);
        double t0 = ampc_now_ms();
        if (!all) {
            memset(few, 0, sizeof few);
            rc = amp_session_train_step(s, in.t, in.n, few_names, (size_t)n_few, few, &st);
        } else {
            rc = training ? amp_session_train_step(s, in.t, in.n, NULL, n_out, outs, &st)
                          : amp_session_run(s, in.t, in.n, NULL, n_out, outs, &st);
        }
        ms[step] = ampc_now_ms() - t0;
        for (int k = 0; !all && k < n_few; k++) outs[few_at[k]] = few[k]; /* (freed below with the rest) */
        if (rc) break;
        if (training) {
            const AmpTensorView *l = &outs[loss];
            double v = ampc_dp_loss(s, view_nelem(l) ? amp_view_value(l, 0) : 0.0, &st); /* the whole batch's */
            AmpSessionStats now;
            amp_session_stats(s, &now); /* counts on from a loaded checkpoint's step */
            printf("step %" PRIu64 ": loss %.9g (%.3f ms)", now.steps, v, ms[step]);
            /* A loss-scaled graph (the loss_scale pass): the scale for the next step, and
             * whether this one was skipped. */
            if (scale_new >= 0 && view_nelem(&outs[scale_new]))
                printf(", loss scale %.9g", amp_view_value(&outs[scale_new], 0));
            if (found_inf >= 0 && view_nelem(&outs[found_inf]) && amp_view_value(&outs[found_inf], 0) != 0)
                printf(" (inf/NaN gradients: update skipped)");
            putchar('\n');
        } else if (step == 0) {
            for (size_t i = 0; i < n_out; i++) print_output(&outs[i]);
        }
        if (step == a->steps - 1 && a->outputs && ampc_dp_writes(s) && (rc = write_outputs(a->outputs, outs, n_out, &st)))
            failed_file = a->outputs;
        for (size_t i = 0; i < n_out; i++) amp_tensor_view_free(&outs[i]);
    }
    char copy[4096];
    const char *save = ampc_dp_writes(s) ? a->save_state : ampc_dp_rank_copy(s, a->save_state, copy, sizeof copy);
    if (!rc && save && (rc = amp_session_state_save(s, save, &st))) failed_file = save;
    int code = AMP_OK;
    if (rc) {
        code = ampc_dp_fail(s, ampc_run_fail(&st, rc, failed_file));
    } else {
        qsort(ms, (size_t)a->steps, sizeof *ms, ampc_cmp_double);
        AmpSessionStats stats;
        char note[512];
        amp_session_stats_sized(s, &stats, sizeof stats);
        printf("step time %.3f ms (median of %ld %s), peak memory %zu bytes (intermediates %zu + state %zu), "
               "backend %s%s\n",
               ms[a->steps / 2], a->steps, training ? "training steps" : "runs",
               stats.peak_bytes, stats.intermediate_bytes, stats.state_bytes,
               stats.backend, ampc_amp_note(&stats, note, sizeof note));
        if (stats.fallback_nodes)
            printf("fallback: %zu node%s the %s backend lacks ran on the CPU: %s\n", stats.fallback_nodes,
                   stats.fallback_nodes == 1 ? "" : "s", stats.backend, stats.fallback_ops);
        if (stats.fused_nodes)
            printf("fused: %zu nodes ran as %zu fused kernel%s (%s)\n", stats.absorbed_nodes, stats.fused_nodes,
                   stats.fused_nodes == 1 ? "" : "s", stats.fused_ops);
        if (stats.device_bytes)
            printf("device memory: %.1f MiB held by the session (weights, arena, cached buffers, library "
                   "workspaces; cudaMemGetInfo), %zu small inputs read back by kernels\n",
                   (double)stats.device_bytes / (1 << 20), stats.kernel_syncs);
        ampc_dp_summary(s, a->steps);
        code = ampc_stdout_done();
    }
    free(ms);
    free(outs);
    ampc_run_inputs_free(&in);
    amp_session_close(s);
    return code;
}

/* ---- ampc bench ----------------------------------------------------------------------------- */

const char *ampc_bench_loss(const RunArgs *a, const AmpSession *s) {
    AmpStatus st = {AMP_OK, ""};
    AmpIoInfo info;
    int loss = amp_session_find_loss(s, a->loss, &st);
    return loss >= 0 && amp_session_output_info(s, AMP_MODE_TRAIN, (size_t)loss, &info) ? info.name : NULL;
}

int ampc_cmd_bench(const RunArgs *a) {
    AmpStatus st = {AMP_OK, ""};
    AmpSessionOptions so = ampc_session_options(a);
    AmpSession *s = NULL;
    AmpCode rc = amp_session_open(a->model, &so, &s, &st);
    if (rc) return ampc_run_fail(&st, rc, a->model);
    ampc_dp_quiet(s);
    AmpMode mode = a->train ? AMP_MODE_TRAIN : AMP_MODE_RUN;
    Inputs in = {0};
    rc = ampc_run_inputs(a, s, mode, &in, &st);
    size_t n_out = amp_session_output_count(s, mode);
    const char *loss_name[1] = {a->train ? ampc_bench_loss(a, s) : NULL};
    if (loss_name[0]) n_out = 1;
    AmpTensorView *outs = calloc(n_out ? n_out : 1, sizeof *outs);
    double *ms = calloc((size_t)a->iters, sizeof *ms), *dev = calloc((size_t)a->iters, sizeof *dev);
    if (!rc && (!outs || !ms || !dev)) rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
    AmpcProfile *prof = NULL;
    /* Each run is timed around the session call alone: outputs are freed outside it. */
    for (long i = 0; !rc && i < a->warmup + a->iters; i++) {
        if (i == a->warmup && a->profile && !(prof = ampc_profile_new(s)))
            rc = amp_fail(&st, AMP_ERR_INTERNAL, "out of memory");
        if (prof) ampc_profile_begin_run(prof);
        double t0 = ampc_now_ms();
        rc = a->train ? amp_session_train_step(s, in.t, in.n, loss_name[0] ? loss_name : NULL, n_out, outs, &st)
                      : amp_session_run(s, in.t, in.n, NULL, n_out, outs, &st);
        double t = ampc_now_ms() - t0;
        if (rc) break;
        if (prof) ampc_profile_end_run(prof, t);
        double dt = amp_session_device_ms(s);
        if (i >= a->warmup) ms[i - a->warmup] = t, dev[i - a->warmup] = dt;
        for (size_t k = 0; k < n_out; k++) amp_tensor_view_free(&outs[k]);
    }
    int code = AMP_OK;
    if (rc) {
        code = ampc_dp_fail(s, ampc_run_fail(&st, rc, a->model));
    } else {
        size_t n = (size_t)a->iters;
        qsort(ms, n, sizeof *ms, ampc_cmp_double);
        double median = ampc_median_sorted(ms, n);
        AmpSessionStats stats;
        char note[512];
        amp_session_stats_sized(s, &stats, sizeof stats);
        const char *what = a->train ? "training step" : "inference run";
        printf("bench %s: %ld %s%s timed after %ld warm-up, backend %s%s\n", a->model, a->iters, what,
               a->iters == 1 ? "" : "s", a->warmup, stats.backend, ampc_amp_note(&stats, note, sizeof note));
        printf("time per %s: median %.4f ms, min %.4f ms, max %.4f ms\n", a->train ? "step" : "run", median, ms[0],
               ms[n - 1]);
        if (dev[0] >= 0) { /* a device that times its kernels */
            qsort(dev, n, sizeof *dev, ampc_cmp_double);
            printf("device time per %s: median %.4f ms, min %.4f ms (the kernels alone: inputs in and outputs out "
                   "excluded)\n",
                   a->train ? "step" : "run", ampc_median_sorted(dev, n), dev[0]);
        }
        printf("peak memory %zu bytes (intermediates %zu + state %zu)\n", stats.peak_bytes, stats.intermediate_bytes,
               stats.state_bytes);
        printf("plan: %zu of %zu intermediates sized before the %s, %zu values read back per %s\n", stats.values_sized,
               stats.values_sized + stats.values_dynamic, a->train ? "step" : "run", stats.syncs,
               a->train ? "step" : "run");
        if (stats.fallback_nodes)
            printf("fallback: %zu node%s the %s backend lacks ran on the CPU: %s\n", stats.fallback_nodes,
                   stats.fallback_nodes == 1 ? "" : "s", stats.backend, stats.fallback_ops);
        if (stats.fused_nodes)
            printf("fused: %zu nodes ran as %zu fused kernel%s (%s)\n", stats.absorbed_nodes, stats.fused_nodes,
                   stats.fused_nodes == 1 ? "" : "s", stats.fused_ops);
        if (stats.device_bytes)
            printf("device memory: %.1f MiB held by the session (weights, arena, cached buffers, library "
                   "workspaces; cudaMemGetInfo), %zu small inputs read back by kernels\n",
                   (double)stats.device_bytes / (1 << 20), stats.kernel_syncs);
        ampc_dp_summary(s, a->warmup + a->iters);
        if (prof) ampc_profile_print(stdout, prof, stats.backend, 15);
        code = ampc_stdout_done();
    }
    ampc_profile_free(prof);
    free(ms);
    free(dev);
    free(outs);
    ampc_run_inputs_free(&in);
    amp_session_close(s);
    return code;
}
