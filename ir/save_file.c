/* The saver's entry points: a model encoded (save.c) and written to a temporary file that
 * is renamed over the output only once everything is written (and synced, when it
 * replaces a file: see replaces()), with external data in `<output>.data` when asked, or
 * when one file would pass protobuf's 2 GB limit; or handed back as bytes; and one tensor
 * as a TensorProto. */
/* realpath() is XSI. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "save_impl.h"

/* protobuf's hard limit for one message. */
#define AMP_PROTO_MAX ((size_t)INT32_MAX)
/* Models whose arena holds at least this much save into a reserved buffer. */
#define SAVE_RESERVE_MIN_ARENA ((size_t)16 << 20)
/* Room for the graph structure when AUTO decides on external data by tensor bytes. */
#define AMP_AUTO_LIMIT (AMP_PROTO_MAX - ((size_t)64 << 20))

/* Writes the buffer, gaps in their places. */
static bool wbuf_write(const AmpWBuf *b, FILE *f) {
    size_t pos = 0;
    for (size_t i = 0; i < b->n_gaps; i++) {
        const AmpWGap *g = &b->gaps[i];
        if (g->at > pos && fwrite(b->data + pos, 1, g->at - pos, f) != g->at - pos) return false;
        if (fwrite(g->data, 1, g->len, f) != g->len) return false;
        pos = g->at;
    }
    return b->len == pos || fwrite(b->data + pos, 1, b->len - pos, f) == b->len - pos;
}

/* The buffer as one malloc'd block (its own when there are no gaps). */
static uint8_t *wbuf_take(AmpWBuf *b, size_t *len) {
    *len = b->len + b->gap_bytes;
    if (!b->n_gaps && b->data) {
        uint8_t *d = b->data;
        b->data = NULL;
        return d;
    }
    uint8_t *out = malloc(*len ? *len : 1);
    if (!out) return NULL;
    size_t pos = 0, k = 0;
    for (size_t i = 0; i < b->n_gaps; i++) {
        const AmpWGap *g = &b->gaps[i];
        if (g->at > pos) memcpy(out + k, b->data + pos, g->at - pos);
        k += g->at - pos;
        memcpy(out + k, g->data, g->len);
        k += g->len;
        pos = g->at;
    }
    if (b->len > pos) memcpy(out + k, b->data + pos, b->len - pos);
    return out;
}

/* A new file beside `path` (so the final rename stays on one filesystem), created
 * O_EXCL with mode 0666 so the umask applies as it would to a plain fopen. */
static FILE *open_temp(const char *path, char **tmp_out, AmpStatus *st) {
    static unsigned long counter;
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory"), NULL;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, n, "%s.tmp.%ld.%lu", path, (long)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        amp_fail(st, AMP_ERR_INPUT, "%s: cannot create a file there: %s", path, strerror(errno));
        free(tmp);
        return NULL;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        amp_fail(st, AMP_ERR_INTERNAL, "%s: fdopen failed", path);
        return NULL;
    }
    *tmp_out = tmp;
    return f;
}

/* Flushes, syncs when asked, and closes; false (errno set) on any failure. */
static bool close_file(FILE *f, bool sync) {
    bool ok = fflush(f) == 0 && (!sync || fsync(fileno(f)) == 0);
    return fclose(f) == 0 && ok;
}

/* Whether a save replaces a file that is there now. Only then is the new data synced
 * before the rename: the rename is what could lose the old contents if the system went
 * down before the new data reached the disk. A new file, like a compiler's output, is
 * only made atomic: after a crash it may be missing or empty, never half-written, and
 * nothing that was there is lost. */
static bool replaces(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

AmpCode amp_output_target(const char *path, char **target, bool *stream, AmpStatus *st) {
    struct stat lsb, sb;
    *stream = false;
    const char *use = path;
    char *real = NULL;
    if (lstat(path, &lsb) == 0) {
        bool followed = S_ISLNK(lsb.st_mode) && stat(path, &sb) == 0;
        if (!followed) sb = lsb;
        if (S_ISDIR(sb.st_mode)) return amp_fail(st, AMP_ERR_INPUT, "%s: is a directory", path);
        if (followed && S_ISREG(sb.st_mode)) {
            if (!(real = realpath(path, NULL)))
                return amp_fail(st, AMP_ERR_INTERNAL, "%s: %s", path, strerror(errno));
            use = real;
        } else if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
            *stream = true;
        }
    }
    *target = real ? real : strdup(use);
    return *target ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
}

FILE *amp_output_stream(const char *path, AmpStatus *st) {
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        amp_fail(st, AMP_ERR_INPUT, "%s: %s", path, strerror(e));
    }
    return f;
}

/* A stream output, written once the verification beside the save (opt->commit) has
 * passed, so that a model that fails it writes nothing. */
static AmpCode write_stream(SaveCtx *c, const char *path, const AmpSaveOptions *opt, AmpStatus *st) {
    if (opt->commit && !opt->commit(opt->commit_ctx, st)) return st && st->code ? st->code : AMP_ERR_INTERNAL;
    FILE *f = amp_output_stream(path, st);
    if (!f) return st ? st->code : AMP_ERR_INPUT;
    bool ok = wbuf_write(&c->b, f);
    ok = close_file(f, false) && ok;
    return ok ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", path, strerror(errno));
}

/* An empty output buffer for model m (save.c grows it). Reserving address space for the
 * biggest possible output (so the buffer never moves) costs a few system calls and, on
 * huge pages, the zeroing of a whole 2 MiB page: worth it only when the output will be
 * big. The buffer holds the graph's structure and small tensors (big ones are written
 * from where they lie), which grow with the arena: about an eighth of the arena's bytes
 * on graphs of many small nodes (0.11-0.13 from 1k to 100k nodes), so an unreserved
 * buffer starts at a sixth, which most models do not outgrow (no copies as it grows;
 * pages the encoding never reaches are never touched). */
static void model_buffer(SaveCtx *c, const AmpModel *m, bool may_reserve) {
    size_t arena = m->arena.used_bytes;
    c->b.max = AMP_PROTO_MAX + 64;
    c->b.reserve = may_reserve && arena >= SAVE_RESERVE_MIN_ARENA;
    c->b.populate = may_reserve && !c->b.reserve;
    c->b.first_cap = arena / 6 < ((size_t)1 << 16) ? 0 : arena / 6;
}

/* Why an encoding failed: too big for one message, or out of memory / I/O. */
static AmpCode encode_failed(const SaveCtx *c, const char *what) {
    if (c->b.over)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED,
                        "%s%sthe model is over %zu bytes, protobuf's 2 GB limit; save with external data",
                        what ? what : "", what ? ": " : "", AMP_PROTO_MAX);
    return amp_fail(c->st, AMP_ERR_INTERNAL, "%s%sbuilding the output failed (out of memory or I/O error)",
                    what ? what : "", what ? ": " : "");
}

AmpCode amp_model_save_file(AmpModel *m, const char *out_path, const AmpSaveOptions *opt, AmpStatus *st) {
    AmpSaveOptions dflt = {.external = AMP_SAVE_EXTERNAL_AUTO, .external_min_bytes = 1024};
    if (!opt) opt = &dflt;
    char *path;
    bool stream;
    AmpCode rc = amp_output_target(out_path, &path, &stream, st);
    if (rc) return rc;
    SaveCtx c;
    amp_save_init(&c, m, st);
    c.external_min = opt->external_min_bytes;
    model_buffer(&c, m, true);
    char *tmp = NULL, *data_tmp = NULL, *data_path = NULL;
    FILE *f = NULL;
    size_t n = strlen(path) + 6;
    if (!(data_path = malloc(n))) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto out;
    }
    snprintf(data_path, n, "%s.data", path);
    c.data_name = base_name(data_path);
    /* AUTO tries one file first; its tensors passing the limit restart it with a data file. */
    c.auto_external = opt->external == AMP_SAVE_EXTERNAL_AUTO;
    c.auto_limit = AMP_AUTO_LIMIT;
    for (bool external = opt->external == AMP_SAVE_EXTERNAL_ALWAYS;;) {
        if (external && stream) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED,
                          "%s: not a regular file, and this model's external data needs a file to sit beside", out_path);
            goto out;
        }
        if (external && !(c.data_file = open_temp(data_path, &data_tmp, st))) {
            rc = st ? st->code : AMP_ERR_INTERNAL;
            goto out;
        }
        amp_save_model(&c);
        if (!c.restart) break;
        amp_wbuf_free(&c.b);
        model_buffer(&c, m, true);
        c.restart = c.auto_external = false;
        external = true;
    }
    if (c.failed || c.b.failed) {
        rc = encode_failed(&c, path);
        goto out;
    }
    if (c.b.len + c.b.gap_bytes > AMP_PROTO_MAX) {
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED,
                      "%s: the model is %zu bytes, over protobuf's 2 GB limit; save with external data", path,
                      c.b.len + c.b.gap_bytes);
        goto out;
    }
    if (stream) {
        rc = write_stream(&c, path, opt, st);
        goto out;
    }
    if (!(f = open_temp(path, &tmp, st))) {
        rc = st ? st->code : AMP_ERR_INTERNAL;
        goto out;
    }
    bool sync = replaces(path) || (data_tmp && replaces(data_path));
    bool ok = wbuf_write(&c.b, f);
    ok = close_file(f, sync) && ok;
    f = NULL;
    if (ok && c.data_file) {
        ok = close_file(c.data_file, sync);
        c.data_file = NULL;
    }
    if (ok && opt->commit && !opt->commit(opt->commit_ctx, st)) {
        rc = st && st->code ? st->code : AMP_ERR_INTERNAL;
        goto out;
    }
    if (ok && data_tmp) {
        if (c.data_off == 0) /* nothing was big enough to move out: no data file */
            unlink(data_tmp);
        else
            ok = rename(data_tmp, data_path) == 0;
        if (ok) {
            free(data_tmp);
            data_tmp = NULL;
        }
    }
    if (!ok || rename(tmp, path) != 0) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", path, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
out:
    if (f) fclose(f);
    if (tmp) unlink(tmp), free(tmp);
    if (c.data_file) fclose(c.data_file);
    if (data_tmp) unlink(data_tmp), free(data_tmp);
    free(data_path);
    free(path);
    amp_wbuf_free(&c.b);
    return rc;
}

AmpCode amp_model_save_bytes(AmpModel *m, uint8_t **out, size_t *len, AmpStatus *st) {
    *out = NULL;
    *len = 0;
    SaveCtx c;
    amp_save_init(&c, m, st);
    model_buffer(&c, m, false);
    amp_save_model(&c);
    AmpCode rc = AMP_OK;
    if (c.failed || c.b.failed) rc = encode_failed(&c, NULL);
    else if (c.b.len + c.b.gap_bytes > AMP_PROTO_MAX)
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "the model is %zu bytes, over protobuf's 2 GB limit",
                      c.b.len + c.b.gap_bytes);
    else if (!(*out = wbuf_take(&c.b, len)) && (*len || !(*out = malloc(1))))
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (rc) *len = 0;
    amp_wbuf_free(&c.b);
    return rc;
}

AmpCode amp_tensor_save_bytes(AmpModel *m, AmpTensor *t, uint8_t **out, size_t *len, AmpStatus *st) {
    *out = NULL;
    *len = 0;
    SaveCtx c;
    amp_save_init(&c, m, st);
    c.b.max = AMP_PROTO_MAX + 64;
    amp_save_tensor(&c, t, false);
    AmpCode rc = AMP_OK;
    if (c.failed || (c.b.failed && !c.b.over))
        rc = amp_fail(st, AMP_ERR_INTERNAL, "tensor '%s': building the output failed (out of memory)",
                      t->name ? t->name : "");
    else if (c.b.over || c.b.len + c.b.gap_bytes > AMP_PROTO_MAX)
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "tensor '%s' is over protobuf's 2 GB limit", t->name ? t->name : "");
    else if (!(*out = wbuf_take(&c.b, len)) && (*len || !(*out = malloc(1))))
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (rc) *len = 0;
    amp_wbuf_free(&c.b);
    return rc;
}
