/* Where a model's bytes come from (load.c decodes them): a file mapped read-only (its
 * folder is where external data is looked for), or a stream (a pipe, "-" for standard
 * input) read to its end. */
/* MAP_POPULATE is not POSIX. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/extdata.h"
#include "ir/load_impl.h"
#include "ir/signals.h"

/* A stream longer than protobuf's limit for one message is not a model (and a device
 * that never ends, /dev/zero, must not take all memory). */
#define AMP_STREAM_MAX ((size_t)INT32_MAX)

/* The whole of stream fd (a pipe, a FIFO, a device) read to its end into *data
 * (malloc'd); false with errno set when a read or the memory fails, EFBIG past
 * AMP_STREAM_MAX. */
static bool read_stream(int fd, uint8_t **data, size_t *len) {
    size_t cap = (size_t)1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    if (!b) return false;
    for (;;) {
        if (n > AMP_STREAM_MAX) {
            free(b);
            errno = EFBIG;
            return false;
        }
        if (n == cap) {
            uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                free(b);
                errno = ENOMEM;
                return false;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* A descriptor left non-blocking (standard input may be): wait for data, its
             * flags being shared with whoever gave it. */
            struct pollfd pfd = {fd, POLLIN, 0};
            if (poll(&pfd, 1, -1) >= 0 || errno == EINTR) continue;
        }
        if (got < 0) {
            int e = errno;
            free(b);
            errno = e;
            return false;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    *data = b;
    *len = n;
    return true;
}

const char *amp_model_path_shown(const char *path) {
    return strcmp(path, "-") == 0 ? "standard input" : path;
}

/* The bytes amp_model_load_file read: a file's mapping, or standard input's malloc'd copy. */
static void release_input(void *data, size_t len, bool std_in) {
    if (std_in) free(data);
    else if (data) munmap(data, len);
}

AmpCode amp_model_load_file(const char *path, const AmpLoadOptions *opt, AmpModel **out, AmpStatus *st) {
    *out = NULL;
    /* "-" is standard input, read as a stream from where it stands. */
    bool std_in = strcmp(path, "-") == 0;
    const char *shown = amp_model_path_shown(path);
    int fd = std_in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
                    : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block the open */
    if (fd < 0) return amp_fail(st, AMP_ERR_INPUT, "%s: cannot open: %s", shown, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return amp_fail(st, AMP_ERR_INPUT, "%s: %s", shown, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return amp_fail(st, AMP_ERR_INPUT, "%s: is a directory", shown);
    }
    /* A named FIFO or device could wait forever for a writer, or never end: only standard
     * input is read as a stream. */
    if (!std_in && !S_ISREG(sb.st_mode)) {
        close(fd);
        return amp_fail(st, AMP_ERR_INPUT, "%s: not a regular file (a stream is read as standard input, '-')", path);
    }
    size_t len = 0;
    void *data = NULL;
    if (!std_in && (len = (size_t)sb.st_size) > 0) {
        int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
        flags |= MAP_POPULATE; /* one call maps every page, rather than a fault per page */
#endif
        data = mmap(NULL, len, PROT_READ, flags, fd, 0);
        if (data == MAP_FAILED) {
            close(fd);
            return amp_fail(st, AMP_ERR_INTERNAL, "%s: mmap failed: %s", path, strerror(errno));
        }
    } else if (std_in) {
        /* A stream or not: read to its end from where it stands. */
        uint8_t *b;
        if (!read_stream(fd, &b, &len)) {
            int e = errno;
            close(fd);
            if (e == EFBIG)
                return amp_fail(st, AMP_ERR_INPUT, "%s: more than %zu bytes, protobuf's limit for one model", shown,
                                AMP_STREAM_MAX);
            return amp_fail(st, e == ENOMEM ? AMP_ERR_INTERNAL : AMP_ERR_INPUT, "%s: reading failed: %s", shown,
                            strerror(e));
        }
        data = b;
    }
    close(fd);

    /* The folder external data is resolved against; none for standard input, whose
     * model may then hold no external data. */
    char *dir = std_in ? NULL : strdup(path);
    if (!std_in && !dir) {
        release_input(data, len, std_in);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash == dir) slash[1] = '\0';
        else if (slash) *slash = '\0';
        else strcpy(dir, ".");
    }

    /* A file's mapping may be kept by the model (opt->borrow_raw); standard input's copy
     * is not (what it would save is the read, done already). While the load reads the
     * mapping, a SIGBUS in it is the file cut short under ampc (ir/signals.h). */
    bool borrow = opt && opt->borrow_raw && !std_in && data;
    AmpSigEntry *sig = std_in ? NULL : amp_sig_mapping(data, len, path);
    AmpCode rc = amp_load_bytes(data, len, dir, opt, borrow, out, st);
    if (!rc && borrow && !amp_extdata_keep(*out, data, len, path, &sb)) {
        amp_model_free(*out);
        *out = NULL;
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    amp_sig_forget(sig);
    if (rc || !borrow) release_input(data, len, std_in);
    free(dir);
    if (rc) {
        amp_status_prefix(st, "%s: ", shown);
        return rc;
    }
    (*out)->path = amp_arena_strdup(&(*out)->arena, path);
    return AMP_OK;
}
