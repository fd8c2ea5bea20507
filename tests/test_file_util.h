/* Shared by test executables: read a whole file into a malloc'd buffer. */
#ifndef AMP_TEST_FILE_UTIL_H
#define AMP_TEST_FILE_UTIL_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes (free() them) and *len, or NULL when it cannot be read. */
static inline char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

#endif
