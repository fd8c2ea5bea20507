/* The saver's entry points: a model encoded (save.c) and written to a temporary file that
 * is renamed over the output only once everything is written (and synced, when it
 * replaces a file: output.c), with external data in `<output>.data` (or `<output>.1.data`,
 * below) when asked, or when one file would pass protobuf's 2 GB limit; or handed back as
 * bytes; and one tensor as a TensorProto. */
/* flock() and mmap() are not C11. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/extdata.h"
#include "ir/save_impl.h"
#include "ir/signals.h"

/* protobuf's hard limit for one message. */
#define AMP_PROTO_MAX ((size_t)INT32_MAX)
/* Models whose arena holds at least this much save into a reserved buffer. */
#define SAVE_RESERVE_MIN_ARENA ((size_t)16 << 20)
/* ... and from this much, into a mapping of their own; smaller ones into the heap. */
#define SAVE_POPULATE_MIN_ARENA ((size_t)1 << 20)
/* Room for the graph structure when AUTO decides on external data by tensor bytes. */
#define AMP_AUTO_LIMIT (AMP_PROTO_MAX - ((size_t)64 << 20))

static bool put_file(void *f, const void *d, size_t len) {
    return fwrite(d, 1, len, f) == len;
}

/* Hands the buffer to put in order, gaps in their places. */
static bool wbuf_put(AmpWBuf *b, bool (*put)(void *ctx, const void *d, size_t len), void *ctx) {
    size_t pos = 0;
    for (size_t i = 0; i < b->n_gaps; i++) {
        const AmpWGap *g = &b->gaps[i];
        if (g->at > pos && !put(ctx, b->data + pos, g->at - pos)) return false;
        if (g->narrow ? !amp_wbuf_put_narrow(b, g->narrow, put, ctx) : !put(ctx, g->data, g->len)) return false;
        pos = g->at;
    }
    return b->len == pos || put(ctx, b->data + pos, b->len - pos);
}

/* Writes the buffer, gaps in their places. */
static bool wbuf_write(AmpWBuf *b, FILE *f) {
    return wbuf_put(b, put_file, f);
}

static bool put_mem(void *ctx, const void *d, size_t len) {
    uint8_t **at = ctx;
    memcpy(*at, d, len);
    *at += len;
    return true;
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
        uint8_t *at = out + k;
        if (!g->narrow) memcpy(at, g->data, g->len);
        else if (!amp_wbuf_put_narrow(b, g->narrow, put_mem, &at)) {
            free(out);
            return NULL;
        }
        k += g->len;
        pos = g->at;
    }
    if (b->len > pos) memcpy(out + k, b->data + pos, b->len - pos);
    return out;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* A write that failed because a file the model maps was cut short under it (EFAULT from
 * the lost pages, where reading them raises SIGBUS: ir/signals.h) is the input's fault,
 * and says which file; AMP_OK when no mapped file shrank. */
static AmpCode input_cut_short(const AmpModel *m, AmpStatus *st) {
    const char *cut = amp_extdata_shrunk(m);
    return cut ? amp_fail(st, AMP_ERR_INPUT, "%s: " AMP_SIG_CUT_SHORT, cut) : AMP_OK;
}

/* A stream output, written once the verification beside the save (opt->commit) has
 * passed, so that a model that fails it writes nothing. */
static AmpCode write_stream(SaveCtx *c, const char *path, const AmpSaveOptions *opt, AmpStatus *st) {
    if (opt->commit && !opt->commit(opt->commit_ctx, st)) return st && st->code ? st->code : AMP_ERR_INTERNAL;
    FILE *f = amp_output_stream(path, st);
    if (!f) return st ? st->code : AMP_ERR_INPUT;
    bool ok = wbuf_write(&c->b, f) && fflush(f) == 0;
    int e = errno;
    ok = fclose(f) == 0 && ok;
    AmpCode rc = ok ? AMP_OK : input_cut_short(c->m, st);
    return ok || rc ? rc : amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", amp_output_shown(path), strerror(e));
}

/* An empty output buffer for model m (save.c grows it). Reserving address space for the
 * biggest possible output (so the buffer never moves) costs a few system calls and, on
 * huge pages, the zeroing of a whole 2 MiB page: worth it only when the output will be
 * big. The buffer holds the graph's structure and small tensors (big ones are written
 * from where they lie), which grow with the arena: about an eighth of the arena's bytes
 * on graphs of many small nodes (0.11-0.13 from 1k to 100k nodes), so an unreserved
 * buffer starts at a sixth, which most models do not outgrow (no copies as it grows;
 * pages the encoding never reaches are never touched). A small model's output (arena
 * under 1 MiB) goes into the heap instead: a mapping of its own, its pages mapped and
 * unmapped, cost a training model of 30 nodes a quarter of its save (0.25 -> 0.19 ms,
 * medians of 151 interleaved runs), and realloc copies little at that size. */
static void model_buffer(SaveCtx *c, const AmpModel *m, bool may_reserve) {
    size_t arena = m->arena.used_bytes;
    c->b.max = AMP_PROTO_MAX + 64;
    c->b.reserve = may_reserve && arena >= SAVE_RESERVE_MIN_ARENA;
    c->b.populate = may_reserve && !c->b.reserve && arena >= SAVE_POPULATE_MIN_ARENA;
    c->b.first_cap = arena / 6 < ((size_t)1 << 16) ? 0 : arena / 6;
}

/* The data file of a model saved with external data, and the one it replaces. A model and
 * its data are two files, and two renames cannot happen at once: were the new data renamed
 * over the name the old model reads, an interruption before the model's own rename would
 * leave the old model reading new weights. So the data file alternates between two names,
 * `<output>.data` and `<output>.1.data`: a save writes the one the model it replaces does
 * not reference, renames the model over the old one, and only then removes the old data.
 * Interrupted anywhere, the model on disk reads the data it was saved with (at worst an
 * unreferenced data file is left, which the next save reuses). The steps from choosing the
 * name to removing the old file hold a lock on the output's folder (flock), so concurrent
 * saves to one output take turns instead of each deciding from the same old model. */
typedef struct DataFiles {
    char *path[2]; /* `<output>.data`, `<output>.1.data` */
    int old;       /* which of them the model being replaced references; -1: neither */
    int now;       /* which of them this save writes */
    int lock_fd;   /* the output's folder, locked; -1: not (yet) locked */
    bool ready;
} DataFiles;

/* Does the model file at `model` reference the data file `name` (its base name)? The
 * external_data entry is looked for as the encoder (and onnx's) writes it: key
 * "location" (field 1), then the name (field 2). */
static bool references(const char *model, const char *name) {
    int fd = open(model, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd < 0) return false;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) {
        close(fd);
        return false;
    }
    size_t len = (size_t)sb.st_size;
    const uint8_t *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return false;
    uint8_t pat[16 + 256 + 2];
    size_t nl = strlen(name), n = 0;
    if (nl > 255) nl = 255; /* longer names do not fit a file name: never found */
    memcpy(pat, "\x0a\x08location\x12", 11);
    n = 11;
    if (nl >= 128) pat[n++] = (uint8_t)(0x80 | (nl & 0x7f)), pat[n++] = (uint8_t)(nl >> 7);
    else pat[n++] = (uint8_t)nl;
    memcpy(pat + n, name, nl);
    n += nl;
    bool found = false;
    for (size_t i = 0; !found && i + n <= len; i++) {
        const uint8_t *q = memchr(p + i, pat[0], len - n - i + 1);
        if (!q) break;
        i = (size_t)(q - p);
        found = memcmp(q, pat, n) == 0;
    }
    munmap((void *)p, len);
    return found;
}

static AmpCode data_files_init(DataFiles *d, const char *path, AmpStatus *st) {
    *d = (DataFiles){.old = -1, .lock_fd = -1};
    size_t n = strlen(path) + 8;
    if (!(d->path[0] = malloc(n)) || !(d->path[1] = malloc(n))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    snprintf(d->path[0], n, "%s.data", path);
    snprintf(d->path[1], n, "%s.1.data", path);
    return AMP_OK;
}

/* Locks the output's folder and decides which data file the replaced model (`path`)
 * references. Without a lock (a folder it may not read) the save goes on unlocked. */
static void data_files_prepare(DataFiles *d, const char *path) {
    if (d->ready) return;
    d->ready = true;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    if (dir) {
        d->lock_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->lock_fd >= 0 && flock(d->lock_fd, LOCK_EX) != 0) {
            close(d->lock_fd);
            d->lock_fd = -1;
        }
        free(dir);
    }
    struct stat sb;
    for (int i = 0; i < 2 && d->old < 0; i++)
        if (lstat(d->path[i], &sb) == 0 && references(path, base_name(d->path[i]))) d->old = i;
    d->now = d->old == 0 ? 1 : 0;
}

static void data_files_free(DataFiles *d) {
    if (d->lock_fd >= 0) close(d->lock_fd); /* releases the lock */
    free(d->path[0]);
    free(d->path[1]);
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
    /* No output replaces a file the model still reads: its external data (OUT named as
     * one, or the data file OUT's name implies). Its own model file may be OUT: the model
     * is whole in memory, and the rename leaves the old file to the mapping. */
    const char *reads = stream ? NULL : amp_extdata_reads(m, path);
    if (reads) {
        rc = amp_fail(st, AMP_ERR_USAGE, "%s is the external data file '%s' the model reads: writing it would destroy "
                      "the input; write the output elsewhere", amp_output_shown(out_path), reads);
        free(path);
        return rc;
    }
    struct stat in_sb, out_sb;
    bool in_place = m->path && stat(m->path, &in_sb) == 0 && stat(path, &out_sb) == 0 && in_sb.st_dev == out_sb.st_dev &&
                    in_sb.st_ino == out_sb.st_ino;
    SaveCtx c;
    amp_save_init(&c, m, st);
    c.external_min = opt->external_min_bytes;
    c.value_info = opt->value_info;
    model_buffer(&c, m, true);
    AmpTempFile out = {0}, data = {0};
    DataFiles df;
    struct stat sb;
    if ((rc = data_files_init(&df, path, st))) goto out;
    /* Temporary files of this output and its data that processes which died (SIGKILL, a
     * crash) left behind. */
    if (!stream) amp_temp_clean_stale((const char *const[]){path, df.path[0], df.path[1]}, 3);
    /* An existing data file may be the replaced model's, to remove once it is replaced. */
    if (!stream && (opt->external == AMP_SAVE_EXTERNAL_ALWAYS || lstat(df.path[0], &sb) == 0 ||
                    lstat(df.path[1], &sb) == 0))
        data_files_prepare(&df, path);
    /* AUTO tries one file first; its tensors passing the limit restart it with a data file. */
    c.auto_external = opt->external == AMP_SAVE_EXTERNAL_AUTO;
    c.auto_limit = AMP_AUTO_LIMIT;
    for (bool external = opt->external == AMP_SAVE_EXTERNAL_ALWAYS;;) {
        if (external && stream) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED,
                          "%s: not a regular file, and this model's external data needs a file to sit beside",
                          amp_output_shown(out_path));
            goto out;
        }
        if (external) {
            data_files_prepare(&df, path);
            if ((reads = amp_extdata_reads(m, df.path[df.now]))) {
                rc = amp_fail(st, AMP_ERR_USAGE,
                              "%s: its data file %s is the external data file '%s' the model reads: writing it "
                              "would destroy the input; write the output elsewhere (or convert in place: -o MODEL)",
                              amp_output_shown(out_path), df.path[df.now], reads);
                goto out;
            }
            c.data_name = base_name(df.path[df.now]);
            if ((rc = amp_temp_open(&data, df.path[df.now], st))) goto out;
            c.data_file = data.f;
        }
        amp_save_model(&c);
        if (!c.restart) break;
        amp_wbuf_free(&c.b);
        model_buffer(&c, m, true);
        c.restart = c.auto_external = false;
        external = true;
    }
    if (c.failed || c.b.failed) {
        if (!(rc = input_cut_short(m, st))) rc = encode_failed(&c, amp_output_shown(path));
        goto out;
    }
    if (c.b.len + c.b.gap_bytes > AMP_PROTO_MAX) {
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED,
                      "%s: the model is %zu bytes, over protobuf's 2 GB limit; save with external data",
                      amp_output_shown(path),
                      c.b.len + c.b.gap_bytes);
        goto out;
    }
    if (stream) {
        rc = write_stream(&c, path, opt, st);
        goto out;
    }
    if ((rc = amp_temp_open(&out, path, st))) goto out;
    /* Both files are synced when either replaces one. */
    bool sync = out.sync || (data.tmp && data.sync);
    /* The buffer is written in a few big pieces: unbuffered, each is one write(2). */
    bool ok = setvbuf(out.f, NULL, _IONBF, 0) == 0 && wbuf_write(&c.b, out.f);
    ok = amp_temp_close(&out, sync) && ok;
    if (ok) ok = amp_temp_close(&data, sync);
    c.data_file = NULL;
    if (ok && opt->commit && !opt->commit(opt->commit_ctx, st)) {
        rc = st && st->code ? st->code : AMP_ERR_INTERNAL;
        goto out;
    }
    /* A data file nothing was big enough to move into is not kept (the abort below). */
    bool data_renamed = false;
    if (ok && data.tmp && c.data_off > 0) ok = data_renamed = amp_temp_rename(&data);
    if (!ok || !amp_temp_rename(&out)) {
        int e = errno;
        /* The old model stays, with its own data; the new data file is nobody's. */
        if (data_renamed) unlink(df.path[df.now]);
        if (!(rc = input_cut_short(m, st))) rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", path, strerror(e));
    } else if (df.old >= 0 && (in_place || !amp_extdata_reads(m, df.path[df.old]))) {
        /* The replaced model's data (never df.now); kept when another file, the input,
         * still reads it. */
        unlink(df.path[df.old]);
    }
out:
    amp_temp_abort(&out);
    amp_temp_abort(&data);
    data_files_free(&df);
    free(path);
    amp_wbuf_free(&c.b);
    return rc;
}

AmpCode amp_model_save_bytes(AmpModel *m, uint8_t **out, size_t *len, AmpStatus *st) {
    return amp_model_save_bytes_opt(m, NULL, out, len, st);
}

AmpCode amp_model_save_bytes_opt(AmpModel *m, const AmpSaveOptions *opt, uint8_t **out, size_t *len, AmpStatus *st) {
    *out = NULL;
    *len = 0;
    SaveCtx c;
    amp_save_init(&c, m, st);
    c.value_info = opt && opt->value_info;
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

AmpCode amp_model_save_visit(AmpModel *m, bool (*put)(void *ctx, const void *d, size_t len), void *ctx,
                             AmpStatus *st) {
    SaveCtx c;
    amp_save_init(&c, m, st);
    c.b.max = 0; /* no limit: nothing here is a protobuf message to be parsed back */
    amp_save_model(&c);
    AmpCode rc = AMP_OK;
    if (c.failed || c.b.failed) rc = encode_failed(&c, NULL);
    else if (!wbuf_put(&c.b, put, ctx) && !(rc = input_cut_short(m, st)))
        rc = amp_fail(st, AMP_ERR_INTERNAL, "handing the model's bytes on failed");
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
