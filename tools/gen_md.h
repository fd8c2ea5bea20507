/* What the generators of docs/ (tools/gen_ops_md.c, tools/gen_cli_md.c) share: reading a
 * committed file, and the staleness check of their --check mode. */
#ifndef AMPC_TOOLS_GEN_MD_H
#define AMPC_TOOLS_GEN_MD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file at path, malloc'd and NUL-terminated; NULL when it cannot be read. */
static inline char *gen_md_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL, buf[4096];
    size_t len = 0, n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        char *t = realloc(s, len + n + 1);
        if (!t) break;
        s = t;
        memcpy(s + len, buf, n);
        len += n;
    }
    fclose(f);
    if (s) s[len] = '\0';
    return s ? s : calloc(1, 1);
}

/* 0 when `have` (path's contents) is `want`; else 1, naming on stderr the first line that
 * differs, what `source` gives there, and the build target that rewrites the file. */
static inline int gen_md_check(const char *path, const char *have, const char *want, const char *source,
                               const char *target) {
    if (strcmp(have, want) == 0) return 0;
    size_t i = 0, line = 1, start = 0;
    for (; have[i] && have[i] == want[i]; i++)
        if (have[i] == '\n') line++, start = i + 1;
    const char *nl = strchr(want + start, '\n');
    fprintf(stderr, "%s differs from %s at line %zu; the table gives:\n%.*s\n"
                    "(regenerate it: cmake --build build --target %s)\n",
            path, source, line, nl ? (int)(nl - want - start) : (int)strlen(want + start), want + start, target);
    return 1;
}

#endif
