/* Output files, the one way every writer of ampc makes them (ir.h: "output files"): the
 * saver (save_file.c), the DOT writer (dot.c) and `ampc run --outputs` (tools/run.c).
 * Where an output goes (amp_output_target), a stream opened as it is (amp_output_stream),
 * a temporary file beside the target renamed over it once complete (AmpTempFile), and the
 * whole of it for a writer that has nothing to add between (amp_output_write). */
/* realpath() is XSI; flock() is BSD's. */
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "ir/signals.h"

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
    /* No signal between creating the file and entering it in the handlers' table. */
    sigset_t held;
    amp_sig_hold(&held);
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        char suffix[48];
        int sl = snprintf(suffix, sizeof suffix, ".tmp.%ld.%lu", (long)getpid(), counter++);
        size_t keep = base_len + (size_t)sl > AMP_NAME_MAX ? AMP_NAME_MAX - (size_t)sl : base_len;
        snprintf(t->tmp, n, "%.*s%s", (int)(base_at + keep), path, suffix);
        fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    int err = errno;
    if (fd >= 0) t->sig = amp_sig_temp(t->tmp);
    amp_sig_release(&held);
    if (fd < 0) {
        AmpCode rc = amp_fail(st, AMP_ERR_INPUT, "%s: cannot create a file there: %s", path, strerror(err));
        free(t->tmp);
        t->tmp = NULL;
        return rc;
    }
    /* Held while it is written: amp_temp_clean_stale leaves a locked file alone. */
    (void)flock(fd, LOCK_EX | LOCK_NB);
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
    amp_sig_forget(t->sig);
    t->sig = NULL;
    free(t->tmp);
    t->tmp = NULL;
    return true;
}

void amp_temp_abort(AmpTempFile *t) {
    if (t->f) fclose(t->f);
    t->f = NULL;
    if (t->tmp) {
        unlink(t->tmp);
        amp_sig_forget(t->sig);
        free(t->tmp);
    }
    t->sig = NULL;
    t->tmp = NULL;
}

/* Whether directory entry `name` is a temporary file amp_temp_open made for the target
 * whose base name is base[0..base_len), and of which process (*pid). */
static bool temp_of(const char *name, const char *base, size_t base_len, long *pid) {
    size_t len = strlen(name), i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--; /* the counter */
    if (i == len || i == 0 || name[i - 1] != '.') return false;
    size_t j = --i;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--; /* the pid */
    if (i == j || i < 5 || memcmp(name + i - 5, ".tmp.", 5) != 0) return false;
    size_t sl = len - (i - 5); /* ".tmp.<pid>.<n>", cut from the target's name as amp_temp_open cuts it */
    size_t keep = base_len + sl > AMP_NAME_MAX ? AMP_NAME_MAX - sl : base_len;
    if (i - 5 != keep || memcmp(name, base, keep) != 0) return false;
    /* A pid of at most 10 digits and in pid_t's range: kill(2) never sees 0 or a negative
     * number, which would name a process group or every process. */
    if (j - i > 10) return false;
    *pid = strtol(name + i, NULL, 10);
    return *pid > 0 && *pid <= INT32_MAX;
}

void amp_temp_clean_stale(const char *const *targets, size_t n) {
    if (!n || !targets[0]) return;
    const char *slash = strrchr(targets[0], '/');
    char *dir = slash ? strndup(targets[0], (size_t)(slash - targets[0]) + 1) : strdup(".");
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d) return;
    long self = (long)getpid();
    for (struct dirent *e; (e = readdir(d));) {
        long pid = 0;
        bool ours = false;
        for (size_t k = 0; k < n && !ours; k++) {
            const char *s = strrchr(targets[k], '/'), *base = s ? s + 1 : targets[k];
            ours = temp_of(e->d_name, base, strlen(base), &pid);
        }
        /* A live process's file, or one that may be (kill answers other than "no such
         * process"), or this process's own, stays. */
        if (!ours || pid == self || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat sb;
        /* ... and so does one some process holds: a writer in another pid namespace. */
        if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
        if (fd >= 0) close(fd);
    }
    closedir(d);
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
    amp_temp_clean_stale((const char *const[]){path}, 1);
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
