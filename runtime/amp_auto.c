/* A session's settings: the variables of every session (AMP_BACKEND, AMP_TF32, AMP_AUTO,
 * AMP_THREADS, AMP_CUDA_*, AMP_SIM_*, AMP_DNNL, AMP_DATA_PARALLEL, AMP_COMM_TIMEOUT,
 * AMP_MPI_PLUGIN, AMP_NCCL_LIB) and, with AMP_AUTO on, those of the AMP options
 * (AMP_PRECISION, AMP_LOSS_SCALE, AMP_OPSET_UPGRADE, AMP_CALIBRATION, a statistics file of
 * `ampc calibrate` read at once, the eight list edit variables AMP_ALLOWLIST_ADD ...
 * AMP_DENYLIST_REMOVE, AMP_LOG_PATH), each read once per open by the options table the CLI
 * shares (passes/options.c), the session's options replacing them; then AMP_AUTO rewrites
 * the model in memory with the AMP pipeline, so an FP32 model trains in mixed precision
 * with no file and no code changed. */
#include "runtime/amp_auto.h"
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The C API's string fields, by the name the options table gives them (AmpOption.field):
 * each, when not NULL, replaces its variable. */
#define STRING_FIELD(f) {#f, offsetof(AmpSessionOptions, f)}
static const struct {
    const char *name;
    size_t at; /* offsetof in AmpSessionOptions */
} FIELDS[] = {
    STRING_FIELD(amp_auto),         STRING_FIELD(log_path),         STRING_FIELD(precision),
    STRING_FIELD(loss_scale),       STRING_FIELD(opset_upgrade),    STRING_FIELD(calibration),
    STRING_FIELD(allowlist_add),    STRING_FIELD(inferlist_add),    STRING_FIELD(clearlist_add),
    STRING_FIELD(denylist_add),     STRING_FIELD(allowlist_remove), STRING_FIELD(inferlist_remove),
    STRING_FIELD(clearlist_remove), STRING_FIELD(denylist_remove),
};

/* The fields that are not strings: each replaces its variable when set (not its zero,
 * AUTO or default). */
static bool backend_set(const AmpSessionOptions *o) {
    return o->backend != AMP_BACKEND_AUTO;
}
static bool tf32_set(const AmpSessionOptions *o) {
    return o->tf32;
}
static bool threads_set(const AmpSessionOptions *o) {
    return o->threads > 0;
}
static bool data_parallel_set(const AmpSessionOptions *o) {
    return o->data_parallel != AMP_DATA_PARALLEL_AUTO;
}
static bool comm_timeout_set(const AmpSessionOptions *o) {
    return o->comm_timeout > 0;
}
static const struct {
    const char *name;
    bool (*set)(const AmpSessionOptions *o);
} OTHER_FIELDS[] = {
    {"backend", backend_set},   {"tf32", tf32_set},           {"threads", threads_set},
    {"data_parallel", data_parallel_set}, {"comm_timeout", comm_timeout_set},
};

static bool replaced_by_field(const AmpSessionOptions *o, const char *field) {
    for (size_t i = 0; i < sizeof OTHER_FIELDS / sizeof *OTHER_FIELDS; i++)
        if (!strcmp(OTHER_FIELDS[i].name, field)) return OTHER_FIELDS[i].set(o);
    return false;
}

bool amp_auto_reads_field(const char *field) {
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++)
        if (!strcmp(FIELDS[i].name, field)) return true;
    for (size_t i = 0; i < sizeof OTHER_FIELDS / sizeof *OTHER_FIELDS; i++)
        if (!strcmp(OTHER_FIELDS[i].name, field)) return true;
    return false;
}

/* amp_options_read_env's get: the session option's field, else the variable (unless
 * ignore_env); a variable of the table with no field is read from the environment only. */
static const char *session_setting(void *ctx, const AmpOption *d, bool *from_field) {
    const AmpSessionOptions *o = ctx;
    for (size_t i = 0; d->field && i < sizeof FIELDS / sizeof *FIELDS; i++) {
        const char *value = *(const char *const *)((const char *)o + FIELDS[i].at);
        if (!strcmp(FIELDS[i].name, d->field) && value) return *from_field = true, value;
    }
    bool replaced = d->field && replaced_by_field(o, d->field);
    return o->ignore_env || replaced ? NULL : amp_option_getenv(NULL, d, from_field);
}

void amp_auto_config_free(AmpAutoConfig *c) {
    amp_options_free(&c->opts);
    free(c->log_path);
    memset(c, 0, sizeof *c);
}

AmpCode amp_auto_config(const AmpSessionOptions *o, AmpAutoConfig *c, AmpStatus *st) {
    static const AmpSessionOptions none = {0};
    if (!o) o = &none;
    memset(c, 0, sizeof *c);
    if (o->threads < 0)
        return amp_fail(st, AMP_ERR_USAGE, "threads %d: expected a whole number from 1 (0: the default)", o->threads);
    /* Every session's own settings, AMP_AUTO or not. */
    AmpCode rc = amp_options_read_env(&c->opts, session_setting, (void *)o, AMP_DOOR_SESSION, st);
    if (rc) {
        amp_auto_config_free(c);
        return rc;
    }
    const AmpRunOptions *r = &c->opts.run;
    c->backend = o->backend != AMP_BACKEND_AUTO || !r->backend ? (int)o->backend : amp_backend_parse(r->backend);
    if (c->backend < 0) return amp_fail(st, AMP_ERR_INTERNAL, "AMP_BACKEND '%s': no such backend", r->backend);
    c->tf32 = o->tf32 || r->tf32;
    c->enabled = r->amp_auto;
    c->threads = o->threads > 0 ? o->threads : c->opts.threads;
    c->be = (AmpBackendSettings){.tf32 = c->tf32,
                                 .sync_each = r->cuda_sync,
                                 .profile = r->cuda_profile,
                                 .lacks = r->sim_lacks,
                                 .refuses = r->sim_refuses,
                                 .nccl_lib = r->nccl_lib}; /* used only in a job (comm set at open) */
    c->no_dnnl = r->no_dnnl;
    if (!c->enabled) return AMP_OK;
    rc = amp_options_read_env(&c->opts, session_setting, (void *)o, AMP_DOOR_AMP, st);
    /* Sessions default to auto: the type the device runs fastest, or none. */
    if (!rc && !c->opts.po.precision) c->opts.precision_auto = true;
    if (!rc) amp_options_decide(&c->opts, amp_auto_device_class(c->backend));
    if (!rc) rc = amp_options_finish(&c->opts, st);
    const char *log = c->opts.run.log_path;
    if (!rc && log && !(c->log_path = strdup(log))) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (rc) amp_auto_config_free(c);
    return rc;
}

AmpDeviceClass amp_auto_device_class(int backend) {
    if (backend == AMP_BACKEND_CPU) return AMP_DEVICE_CPU;
    if (backend != AMP_BACKEND_AUTO) return AMP_DEVICE_GPU;
    /* auto: the first automatic backend whose device is usable, else the CPU (backend.h) */
    for (const AmpBackendEntry *const *e = amp_backend_registry; *e; e++)
        if ((*e)->automatic && (*e)->kind != AMP_BACKEND_CPU && amp_backend_usable((*e)->kind)) return AMP_DEVICE_GPU;
    return AMP_DEVICE_CPU;
}

const char *amp_auto_pipeline(void) {
    const char *d = amp_default_pipeline();
    return d && *d ? d : "none";
}

/* ---- applying ---------------------------------------------------------------------- */

static size_t count_casts(const AmpGraph *g) {
    size_t n = 0;
    for (const AmpNode *x = g->first; x; x = x->next) {
        n += x->op == AMP_OP_Cast;
        for (size_t k = 0; k < x->n_attrs; k++) {
            if (x->attrs[k].g) n += count_casts(x->attrs[k].g);
            for (size_t j = 0; j < x->attrs[k].n_graphs; j++) n += count_casts(x->attrs[k].graphs[j]);
        }
    }
    return n;
}

static size_t count_model_casts(const AmpModel *m) {
    size_t n = count_casts(m->graph);
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm) n += count_casts(m->training[i].algorithm);
        if (m->training[i].initialization) n += count_casts(m->training[i].initialization);
    }
    return n;
}

/* AMP_LOG_PATH may name a folder in a shared place such as /tmp, where another user
 * can plant symlinks: the folder is opened once without following a link in its last
 * component, and each log file is created beneath that descriptor with O_CREAT | O_EXCL
 * | O_NOFOLLOW after removing what had its name (a previous run's file, or a planted
 * link: unlinkat removes the link, never what it names). A link planted again between
 * the two makes the create fail; nothing is ever written through a link. */
typedef struct LogDir {
    int fd;
    const char *path;
} LogDir;

static AmpCode log_dir_open(LogDir *d, const char *path, AmpStatus *st) {
    d->path = path;
    d->fd = -1;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH='%s': cannot create the folder: %s", path, strerror(errno));
    d->fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0) {
        int err = errno;
        struct stat sb; /* only to name the error: Linux says ENOTDIR for a link, others ELOOP */
        if (err == ELOOP || (err == ENOTDIR && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)))
            return amp_fail(st, AMP_ERR_USAGE,
                            "AMP_LOG_PATH='%s' is a symbolic link, which is not followed; name the folder itself",
                            path);
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH='%s': cannot open the folder: %s", path, strerror(err));
    }
    return AMP_OK;
}

static void log_dir_close(LogDir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

/* A new file `name` in the log folder, open for writing in *out. */
static AmpCode log_create(const LogDir *d, const char *name, FILE **out, AmpStatus *st) {
    *out = NULL;
    if (unlinkat(d->fd, name, 0) != 0 && errno != ENOENT)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH: cannot replace %s/%s: %s", d->path, name, strerror(errno));
    int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return amp_fail(st, AMP_ERR_USAGE, "AMP_LOG_PATH: cannot create %s/%s: %s", d->path, name, strerror(errno));
    if (!(*out = fdopen(fd, "w"))) {
        close(fd);
        return amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: %s/%s: %s", d->path, name, strerror(errno));
    }
    return AMP_OK;
}

static AmpCode log_close(const LogDir *d, const char *name, FILE *f, bool ok, AmpStatus *st) {
    ok = fclose(f) == 0 && ok;
    return ok ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: writing %s/%s failed", d->path, name);
}

/* Writes <stem>.onnx (one file: a model over protobuf's 2 GB limit is an error here, as
 * external data would be a second file to create; value_info as `ampc -o` writes it) and
 * <stem>.txt (amp_print_model). */
static AmpCode log_model(AmpModel *m, const LogDir *d, const char *stem, AmpStatus *st) {
    char name[32];
    snprintf(name, sizeof name, "%s.onnx", stem);
    uint8_t *bytes;
    size_t len;
    AmpSaveOptions so = {.value_info = true};
    AmpCode rc = amp_model_save_bytes_opt(m, &so, &bytes, &len, st);
    if (rc) {
        amp_status_prefix(st, "AMP_LOG_PATH: %s: ", name);
        return rc;
    }
    FILE *f;
    rc = log_create(d, name, &f, st);
    if (rc) {
        free(bytes);
        return rc;
    }
    bool ok = fwrite(bytes, 1, len, f) == len;
    free(bytes);
    if ((rc = log_close(d, name, f, ok, st))) return rc;
    snprintf(name, sizeof name, "%s.txt", stem);
    if ((rc = log_create(d, name, &f, st))) return rc;
    amp_print_model(f, m);
    return log_close(d, name, f, true, st);
}

static size_t count_nodes(const AmpModel *m) {
    size_t n = m->graph->n_nodes;
    for (size_t i = 0; i < m->n_training; i++)
        if (m->training[i].algorithm) n += m->training[i].algorithm->n_nodes;
    return n;
}

static AmpCode apply(AmpModel *m, const AmpAutoConfig *c, const LogDir *log, bool *applied, AmpStatus *st) {
    AmpCode rc;
    if (log && (rc = log_model(m, log, "before", st))) return rc;
    size_t nodes_before = count_nodes(m), casts_before = count_model_casts(m);
    AmpPassOptions po = c->opts.po;
    FILE *paint = NULL;
    if (log) {
        if ((rc = log_create(log, "paint.txt", &paint, st))) return rc;
        po.paint_out = paint; /* the op lists in force and the nodes of each paint bucket */
    }
    AmpPipelineOptions pl = {.pass = &po};
    const char *list = amp_auto_pipeline();
    rc = amp_run_pipeline(m, list, &pl, st);
    if (paint && fclose(paint) != 0 && !rc)
        rc = amp_fail(st, AMP_ERR_INTERNAL, "AMP_LOG_PATH: writing paint.txt failed");
    if (!rc) rc = amp_verify_model(m, st);
    if (rc) {
        amp_status_prefix(st, "AMP_AUTO (pipeline '%s'): ", list);
        return rc;
    }
    *applied = true;
    if (log) {
        if ((rc = log_model(m, log, "after", st))) return rc;
        FILE *f;
        if ((rc = log_create(log, "summary.txt", &f, st))) return rc;
        bool ok = fprintf(f, "pipeline: %s\nprecision: %s%s%s%s\nlist edits: %zu\nnodes: %zu before, %zu after\n"
                             "casts: %zu before, %zu after\n",
                          list, amp_dtype_name(c->opts.po.precision ? c->opts.po.precision : AMP_DT_FLOAT16),
                          c->opts.precision_why ? " (auto: " : "", c->opts.precision_why ? c->opts.precision_why : "",
                          c->opts.precision_why ? ")" : "",
                          c->opts.n_edits, nodes_before, count_nodes(m),
                          casts_before, count_model_casts(m)) > 0;
        if ((rc = log_close(log, "summary.txt", f, ok, st))) return rc;
    }
    return AMP_OK;
}

/* The log's summary of a session auto kept in float32: nothing else is logged. */
static AmpCode log_fp32(const AmpAutoConfig *c, AmpStatus *st) {
    LogDir log;
    AmpCode rc = log_dir_open(&log, c->log_path, st);
    FILE *f = NULL;
    if (!rc) rc = log_create(&log, "summary.txt", &f, st);
    if (!rc) {
        bool ok = fprintf(f, "pipeline: none\nprecision: fp32 (auto: %s)\n", c->opts.precision_why) > 0;
        rc = log_close(&log, "summary.txt", f, ok, st);
    }
    log_dir_close(&log);
    return rc;
}

AmpCode amp_auto_apply(AmpModel *m, const AmpAutoConfig *c, bool *applied, AmpStatus *st) {
    *applied = false;
    if (!c->enabled) return AMP_OK;
    if (c->opts.stay_fp32) return c->log_path ? log_fp32(c, st) : AMP_OK;
    if (!c->log_path) return apply(m, c, NULL, applied, st);
    LogDir log;
    AmpCode rc = log_dir_open(&log, c->log_path, st);
    if (!rc) rc = apply(m, c, &log, applied, st);
    log_dir_close(&log);
    return rc;
}
