/* Runs a fuzz target (fuzz_load.c or fuzz_convert.c, linked beside this file) once over
 * each file named, or each file of each folder named: the fuzzers' properties checked by
 * an ordinary build, without libFuzzer, so that a memory checker such as valgrind can
 * watch (AddressSanitizer does not see reads of uninitialized memory). Exit 0 when every
 * input was run; a broken property aborts, as in the fuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return 1;
            }
            buf = b;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of folder dir, in name order (so that runs are repeatable). */
static int run_dir(const char *dir, size_t *n_run) {
    DIR *d = opendir(dir);
    if (!d) return 1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (names[i] && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc |= run_file(path);
            (*n_run)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|FOLDER...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0;
    size_t n_run = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            rc |= run_dir(argv[i], &n_run);
        } else {
            rc |= run_file(argv[i]);
            n_run++;
        }
    }
    printf("replay: %zu inputs run\n", n_run);
    return rc;
}
