/* External data files: confinement to the model's folder, mmap once per file, and
 * bounds checks, so a hostile `location`/`offset`/`length` gives an error, not a read
 * outside the file. */
/* openat(), readlinkat() and O_NOFOLLOW are POSIX.1-2008. */
#define _XOPEN_SOURCE 700
#include "ir/extdata.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/signals.h"

struct AmpMapping {
    AmpMapping *next;
    char *location; /* as written in the model */
    char *shown;    /* the file's path, for messages: the folder's and the location */
    const uint8_t *data;
    size_t len;
    dev_t dev; /* the file's identity, to know it under another name */
    ino_t ino;
    AmpSigEntry *sig; /* a SIGBUS inside the mapping: the file was cut short (signals.h) */
};

/* A new mapping entry of m for [data, data + len) of the file `shown` (copied), entered in
 * the signal handlers' table; NULL when out of memory (the caller unmaps). */
static AmpMapping *mapping_new(AmpModel *m, const void *data, size_t len, const char *shown, const char *location,
                               const struct stat *sb) {
    AmpMapping *mp = calloc(1, sizeof *mp);
    char *sh = strdup(shown ? shown : ""), *loc = location ? strdup(location) : NULL;
    if (!mp || !sh || (location && !loc)) {
        free(mp), free(sh), free(loc);
        return NULL;
    }
    mp->location = loc;
    mp->shown = sh;
    mp->data = data;
    mp->len = len;
    if (sb) mp->dev = sb->st_dev, mp->ino = sb->st_ino;
    mp->sig = amp_sig_mapping(data, len, sh);
    mp->next = m->mappings;
    m->mappings = mp;
    return mp;
}

AmpCode amp_extdata_check_location(const char *loc, AmpStatus *st) {
    if (!loc || !*loc) return amp_fail(st, AMP_ERR_INPUT, "external data location is empty");
    if (loc[0] == '/' || strchr(loc, '\\') || strchr(loc, ':'))
        return amp_fail(st, AMP_ERR_INPUT,
                        "external data location '%s' must be a relative path inside the model's folder",
                        loc);
    /* Reject any ".." component. */
    const char *p = loc;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return amp_fail(st, AMP_ERR_INPUT,
                            "external data location '%s' leaves the model's folder ('..')", loc);
        if (!end) break;
        p = end + 1;
    }
    return AMP_OK;
}

enum { BENEATH_MAX_DEPTH = 128, BENEATH_MAX_LINKS = 40 };

/* openat(dirfd, comp) failed with err: when comp is a symbolic link (ELOOP under
 * O_NOFOLLOW, or ENOTDIR / EMLINK on some systems) to a relative target, *rest becomes
 * target "/" what followed comp (rest + next), to resolve from dirfd; else the error. */
static AmpCode follow_link(int dirfd, const char *comp, int err, const char *loc, int *links, char **rest,
                           size_t next, AmpStatus *st) {
    char target[PATH_MAX];
    ssize_t tl = (err == ELOOP || err == ENOTDIR || err == EMLINK) ? readlinkat(dirfd, comp, target, sizeof target - 1)
                                                                   : -1;
    if (tl < 0) return amp_fail(st, AMP_ERR_INPUT, "external data file '%s': %s", loc, strerror(err));
    target[tl] = '\0';
    if (++*links > BENEATH_MAX_LINKS)
        return amp_fail(st, AMP_ERR_INPUT, "external data file '%s': %s", loc, strerror(ELOOP));
    if (tl == 0 || target[0] == '/')
        return amp_fail(st, AMP_ERR_INPUT, "external data file '%s' resolves outside the model's folder", loc);
    const char *after = *rest + next;
    size_t al = strlen(after), need = (size_t)tl + 1 + al + 1;
    char *nr = malloc(need);
    if (!nr) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(nr, target, (size_t)tl);
    nr[tl] = '/';
    memcpy(nr + tl + 1, after, al + 1);
    free(*rest);
    *rest = nr;
    return AMP_OK;
}

/* Opens `loc` beneath the folder `dir` and returns the descriptor in *out_fd. Every
 * component is opened with openat() relative to a descriptor already held, with
 * O_NOFOLLOW, so nothing is checked by name and then opened by name again: swapping a
 * component for a symlink at any moment cannot redirect the open outside the folder.
 * A symlink met on the way is read (readlinkat) and its target resolved the same way,
 * from the folder that holds it: an absolute target, or a ".." above the model's
 * folder, is refused. ".." pops our own stack of folder descriptors; the kernel never
 * resolves it. */
static AmpCode open_beneath(const char *dir, const char *loc, int *out_fd, AmpStatus *st) {
    int stack[BENEATH_MAX_DEPTH];
    int depth = 0, links = 0, fd = -1;
    AmpCode rc = AMP_OK;
    /* The remaining path; a symlink's target is put in front of what follows it. */
    size_t cap = strlen(loc) + 1;
    char *rest = malloc(cap);
    if (!rest) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(rest, loc, cap);
    stack[0] = openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (stack[0] < 0) {
        rc = amp_fail(st, AMP_ERR_INPUT, "external data file '%s': model folder '%s': %s", loc, dir,
                      strerror(errno));
        free(rest);
        return rc;
    }
    size_t pos = 0;
    for (;;) {
        while (rest[pos] == '/') pos++;
        if (!rest[pos]) { /* "sub/" or a link to "." : the path names a folder */
            rc = amp_fail(st, AMP_ERR_INPUT, "external data file '%s' is not a regular file", loc);
            break;
        }
        char *comp = rest + pos;
        char *slash = strchr(comp, '/');
        size_t next = slash ? (size_t)(slash - rest) + 1 : strlen(rest);
        if (slash) *slash = '\0';
        bool last = true;
        for (size_t i = next; rest[i]; i++)
            if (rest[i] != '/') {
                last = false;
                break;
            }
        if (strcmp(comp, ".") == 0) {
            pos = next; /* a path ending in "." names a folder: refused above */
            continue;
        }
        if (strcmp(comp, "..") == 0) {
            if (depth == 0) {
                rc = amp_fail(st, AMP_ERR_INPUT,
                              "external data file '%s' resolves outside the model's folder", loc);
                break;
            }
            close(stack[depth--]);
            pos = next;
            continue;
        }
        int flags = last ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC /* a FIFO must not block */
                         : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        int nfd = openat(stack[depth], comp, flags);
        if (nfd < 0) {
            if ((rc = follow_link(stack[depth], comp, errno, loc, &links, &rest, next, st))) break;
            pos = 0;
            continue;
        }
        if (last) {
            fd = nfd;
            break;
        }
        if (depth + 1 >= BENEATH_MAX_DEPTH) {
            close(nfd);
            rc = amp_fail(st, AMP_ERR_INPUT, "external data file '%s' is nested too deeply", loc);
            break;
        }
        stack[++depth] = nfd;
        pos = next;
    }
    while (depth >= 0) close(stack[depth--]);
    free(rest);
    *out_fd = fd;
    return fd < 0 && rc == AMP_OK ? amp_fail(st, AMP_ERR_INPUT, "external data file '%s' not found", loc) : rc;
}

static AmpCode map_file(AmpModel *m, const char *loc, AmpMapping **out, AmpStatus *st) {
    for (AmpMapping *mp = m->mappings; mp; mp = mp->next)
        if (mp->location && strcmp(mp->location, loc) == 0) {
            *out = mp;
            return AMP_OK;
        }
    if (!m->dir)
        return amp_fail(st, AMP_ERR_INPUT,
                        "tensor data is external ('%s') but the model was not loaded from a file", loc);
    AmpCode rc = amp_extdata_check_location(loc, st);
    if (rc) return rc;
    int fd = -1;
    rc = open_beneath(m->dir, loc, &fd, st);
    if (rc) return rc;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return amp_fail(st, AMP_ERR_INPUT, "external data file '%s' is not a regular file", loc);
    }
    const uint8_t *data = NULL;
    size_t len = (size_t)sb.st_size;
    if (len > 0) {
        void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return amp_fail(st, AMP_ERR_INTERNAL, "mmap of '%s' failed: %s", loc, strerror(errno));
        }
        data = p;
    }
    close(fd);
    size_t sl = strlen(m->dir) + strlen(loc) + 2;
    char *shown = malloc(sl);
    if (shown) snprintf(shown, sl, "%s/%s", m->dir, loc);
    AmpMapping *mp = shown ? mapping_new(m, data, len, shown, loc, &sb) : NULL;
    free(shown);
    if (!mp) {
        if (data) munmap((void *)data, len);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    *out = mp;
    return AMP_OK;
}

const char *amp_extdata_reads(const AmpModel *m, const char *path) {
    struct stat sb;
    if (!m || !m->mappings || !path || stat(path, &sb) != 0) return NULL;
    for (const AmpMapping *mp = m->mappings; mp; mp = mp->next)
        if (mp->dev == sb.st_dev && mp->ino == sb.st_ino) return mp->location;
    return NULL;
}

AmpCode amp_extdata_map(AmpModel *m, const char *location, int64_t offset, int64_t length,
                        AmpBytes *out, AmpStatus *st) {
    AmpMapping *mp = NULL;
    AmpCode rc = map_file(m, location, &mp, st);
    if (rc) return rc;
    if (offset < 0 || (uint64_t)offset > mp->len)
        return amp_fail(st, AMP_ERR_INPUT,
                        "external data offset %lld is past the end of '%s' (%zu bytes)",
                        (long long)offset, location, mp->len);
    size_t avail = mp->len - (size_t)offset;
    size_t n = length < 0 ? avail : (size_t)length;
    if (length >= 0 && (uint64_t)length > avail)
        return amp_fail(st, AMP_ERR_INPUT,
                        "external data [%lld, +%lld) runs past the end of '%s' (%zu bytes)",
                        (long long)offset, (long long)length, location, mp->len);
    out->data = n ? mp->data + offset : NULL;
    out->len = n;
    return AMP_OK;
}

bool amp_extdata_keep(AmpModel *m, void *data, size_t len, const char *path, const struct stat *sb) {
    /* location NULL: no external data file has this name */
    return mapping_new(m, data, len, path, NULL, sb) != NULL;
}

const char *amp_extdata_shrunk(const AmpModel *m) {
    struct stat sb;
    for (const AmpMapping *mp = m->mappings; mp; mp = mp->next)
        if (stat(mp->shown, &sb) == 0 && sb.st_dev == mp->dev && sb.st_ino == mp->ino && (size_t)sb.st_size < mp->len)
            return mp->shown;
    return NULL;
}

void amp_extdata_unmap_all(AmpModel *m) {
    AmpMapping *mp = m->mappings;
    while (mp) {
        AmpMapping *next = mp->next;
        amp_sig_forget(mp->sig);
        if (mp->data) munmap((void *)mp->data, mp->len);
        free(mp->location);
        free(mp->shown);
        free(mp);
        mp = next;
    }
    m->mappings = NULL;
}
