/* Output files, the one way every writer of ampc makes them (ir.h: "output files"): the
 * saver (save_file.c), the DOT writer (dot.c) and `ampc run --outputs` (tools/run.c).
 * Where an output goes (amp_output_target), a stream opened as it is (amp_output_stream),
 * a temporary file beside the target renamed over it once complete (AmpTempFile), and the
 * whole of it for a writer that has nothing to add between (amp_output_write). */
/* realpath() is XSI. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"

/* The longest file name (one path component) Linux's filesystems take. */
#define AMP_NAME_MAX ((size_t)255)

const char *amp_output_shown(const char *path) {
    return strcmp(path, "-") == 0 ? "standard output" : path;
}

AmpCode amp_output_target(const char *path, char **target, bool *stream, AmpStatus *st) {
    struct stat lsb, sb;
    *stream = strcmp(path, "-") == 0;
    const char *use = path;
    char *real = NULL;
    if (!*stream && lstat(path, &lsb) == 0) {
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
    /* Standard output through a descriptor of its own: closing it leaves fd 1 open. */
    int fd = strcmp(path, "-") == 0 ? fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0)
                                    : open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        amp_fail(st, AMP_ERR_INPUT, "%s: %s", amp_output_shown(path), strerror(e));
    }
    return f;
}

AmpCode amp_temp_open(AmpTempFile *t, const char *path, AmpStatus *st) {
    static unsigned long counter;
    *t = (AmpTempFile){0};
    t->path = path;
    /* Only a file that is there now is worth a sync: the rename is what could lose its
     * contents were the system to go down before the new data reached the disk. A new
     * file, like a compiler's output, is only made atomic: after a crash it may be
     * missing or empty, never half-written, and nothing that was there is lost. */
    struct stat sb;
    t->sync = lstat(path, &sb) == 0;
    size_t n = strlen(path) + 48;
    if (!(t->tmp = malloc(n))) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    /* The temporary name is the target's plus a suffix, the target's part cut short where
     * the whole would pass a file name's limit (a valid 250-byte name must still save). */
    const char *slash = strrchr(path, '/');
    size_t base_at = slash ? (size_t)(slash - path) + 1 : 0, base_len = strlen(path) - base_at;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        char suffix[48];
        int sl = snprintf(suffix, sizeof suffix, ".tmp.%ld.%lu", (long)getpid(), counter++);
        size_t keep = base_len + (size_t)sl > AMP_NAME_MAX ? AMP_NAME_MAX - (size_t)sl : base_len;
        snprintf(t->tmp, n, "%.*s%s", (int)(base_at + keep), path, suffix);
        fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        AmpCode rc = amp_fail(st, AMP_ERR_INPUT, "%s: cannot create a file there: %s", path, strerror(errno));
        free(t->tmp);
        t->tmp = NULL;
        return rc;
    }
    if (!(t->f = fdopen(fd, "wb"))) {
        close(fd);
        amp_temp_abort(t);
        return amp_fail(st, AMP_ERR_INTERNAL, "%s: fdopen failed", path);
    }
    return AMP_OK;
}

bool amp_temp_close(AmpTempFile *t, bool sync) {
    if (!t->f) return true;
    bool ok = !ferror(t->f) && fflush(t->f) == 0 && (!sync || fsync(fileno(t->f)) == 0);
    ok = fclose(t->f) == 0 && ok;
    t->f = NULL;
    return ok;
}

bool amp_temp_rename(AmpTempFile *t) {
    if (!t->tmp || rename(t->tmp, t->path) != 0) return false;
    free(t->tmp);
    t->tmp = NULL;
    return true;
}

void amp_temp_abort(AmpTempFile *t) {
    if (t->f) fclose(t->f);
    t->f = NULL;
    if (t->tmp) {
        unlink(t->tmp);
        free(t->tmp);
    }
    t->tmp = NULL;
}

AmpCode amp_output_write(const char *out_path, bool (*write)(void *ctx, FILE *f), void *ctx, AmpStatus *st) {
    char *path;
    bool stream;
    AmpCode rc = amp_output_target(out_path, &path, &stream, st);
    if (rc) return rc;
    if (stream) {
        FILE *f = amp_output_stream(path, st);
        if (!f) {
            rc = st ? st->code : AMP_ERR_INPUT;
        } else {
            bool ok = write(ctx, f) && !ferror(f) && fflush(f) == 0;
            ok = fclose(f) == 0 && ok;
            if (!ok)
                rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", amp_output_shown(path), strerror(errno));
        }
        free(path);
        return rc;
    }
    AmpTempFile t;
    if (!(rc = amp_temp_open(&t, path, st))) {
        bool ok = write(ctx, t.f);
        ok = amp_temp_close(&t, t.sync) && ok;
        if (!ok || !amp_temp_rename(&t))
            rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", path, strerror(errno));
        amp_temp_abort(&t);
    }
    free(path);
    return rc;
}
