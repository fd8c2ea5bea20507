/* External data files: confinement to the model's folder, mmap once per file, and
 * bounds checks, so a hostile `location`/`offset`/`length` gives an error, not a read
 * outside the file. */
/* realpath() is XSI. */
#define _XOPEN_SOURCE 700
#include "extdata.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct AmpMapping {
    AmpMapping *next;
    char *location; /* as written in the model */
    const uint8_t *data;
    size_t len;
};

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

static AmpCode map_file(AmpModel *m, const char *loc, AmpMapping **out, AmpStatus *st) {
    for (AmpMapping *mp = m->mappings; mp; mp = mp->next)
        if (strcmp(mp->location, loc) == 0) {
            *out = mp;
            return AMP_OK;
        }
    if (!m->dir)
        return amp_fail(st, AMP_ERR_INPUT,
                        "tensor data is external ('%s') but the model was not loaded from a file", loc);
    AmpCode rc = amp_extdata_check_location(loc, st);
    if (rc) return rc;

    size_t dl = strlen(m->dir), ll = strlen(loc);
    char *path = malloc(dl + ll + 2);
    if (!path) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(path, m->dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, loc, ll + 1);

    /* Symlinks may still point outside: compare real paths. */
    char real_dir[PATH_MAX], real_file[PATH_MAX];
    if (!realpath(m->dir, real_dir) || !realpath(path, real_file)) {
        rc = amp_fail(st, AMP_ERR_INPUT, "external data file '%s': %s", loc, strerror(errno));
        free(path);
        return rc;
    }
    free(path);
    size_t rdl = strlen(real_dir);
    if (strncmp(real_file, real_dir, rdl) != 0 || (real_file[rdl] != '/' && rdl != 1))
        return amp_fail(st, AMP_ERR_INPUT,
                        "external data file '%s' resolves outside the model's folder", loc);

    int fd = open(real_file, O_RDONLY | O_NONBLOCK); /* a FIFO must not block the open */
    if (fd < 0) return amp_fail(st, AMP_ERR_INPUT, "external data file '%s': %s", loc, strerror(errno));
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
    AmpMapping *mp = calloc(1, sizeof *mp);
    char *locdup = strdup(loc);
    if (!mp || !locdup) {
        free(mp);
        free(locdup);
        if (data) munmap((void *)data, len);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    mp->location = locdup;
    mp->data = data;
    mp->len = len;
    mp->next = m->mappings;
    m->mappings = mp;
    *out = mp;
    return AMP_OK;
}

AmpCode amp_extdata_map(AmpModel *m, const char *location, int64_t offset, int64_t length,
                        AmpBytes *out, AmpStatus *st) {
    AmpMapping *mp;
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

void amp_extdata_unmap_all(AmpModel *m) {
    AmpMapping *mp = m->mappings;
    while (mp) {
        AmpMapping *next = mp->next;
        if (mp->data) munmap((void *)mp->data, mp->len);
        free(mp->location);
        free(mp);
        mp = next;
    }
    m->mappings = NULL;
}
