/* Helpers shared by the command-line tests (test_cli.c: help, usage, convert, verify,
 * print; test_cli_run.c: ampc run and ampc bench): a temporary folder per test (the
 * suite's .init and .fini), files in it, and running the built binary (AMPC_BIN) with
 * posix_spawn, its stdout and stderr captured in temporary files. Static functions: each
 * test file is its own executable and includes this once. */
#ifndef AMP_CLI_TEST_UTIL_H
#define AMP_CLI_TEST_UTIL_H

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define ADD_MODEL AMPC_TESTDATA "/node/test_add/model.onnx"

/* The test's folder: made by make_tmpdir (the suite's .init), removed by remove_tmpdir
 * (its .fini). */
static char tmpdir[512];

static inline void make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ampc_cli_XXXXXX", base && base[0] ? base : "/tmp");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp");
}

/* Removes `dir` and everything in it (the tests make folders for --outputs). */
static inline void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline void remove_tmpdir(void) { remove_tree(tmpdir); }

static inline const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static inline char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    cr_assert_not_null(b);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            b = realloc(b, cap + 1);
            cr_assert_not_null(b);
        }
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

static inline void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static inline bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

typedef struct Run {
    int code; /* exit status, or 128 + signal */
    char *out, *err;
    size_t out_len; /* stdout's bytes (a model written there holds NULs) */
} Run;

/* Runs AMPC_BIN with the arguments of ap (NULL-terminated), stdin from in_path. */
static inline Run run_ampc_va(const char *in_path, const char *arg0, va_list ap) {
    const char *argv[32];
    int argc = 0;
    argv[argc++] = AMPC_BIN;
    for (const char *a = arg0; a; a = va_arg(ap, const char *)) {
        cr_assert_lt(argc, 31);
        argv[argc++] = a;
    }
    argv[argc] = NULL;

    char out_path[600], err_path[600];
    tmp_path(out_path, sizeof out_path, ".stdout");
    tmp_path(err_path, sizeof err_path, ".stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int e = posix_spawn(&pid, AMPC_BIN, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(e, 0, "posix_spawn %s: %s", AMPC_BIN, strerror(e));
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);

    Run r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_all(out_path, &r.out_len);
    r.err = read_all(err_path, NULL);
    cr_assert(r.out && r.err);
    unlink(out_path);
    unlink(err_path);
    return r;
}

/* Runs AMPC_BIN with the NULL-terminated arguments; stdin is /dev/null. */
static inline Run run_ampc(const char *arg0, ...) {
    va_list ap;
    va_start(ap, arg0);
    Run r = run_ampc_va("/dev/null", arg0, ap);
    va_end(ap);
    return r;
}

/* The same with stdin read from in_path. */
static inline Run run_ampc_stdin(const char *in_path, const char *arg0, ...) {
    va_list ap;
    va_start(ap, arg0);
    Run r = run_ampc_va(in_path, arg0, ap);
    va_end(ap);
    return r;
}

static inline void run_free(Run *r) {
    free(r->out);
    free(r->err);
}

static inline size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* An error is one line: "ampc: ...\n". */
static inline void assert_one_error_line(const Run *r) {
    cr_assert_eq(count_lines(r->err), 1, "expected one stderr line, got:\n%s", r->err);
    cr_assert_eq(strncmp(r->err, "ampc: ", 6), 0, "stderr should start with 'ampc: ': %s",
                 r->err);
}

/* Entries in the test's folder, temporaries included (the captured output is gone). */
static inline size_t count_files(void) {
    DIR *d = opendir(tmpdir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

/* Bytes that are no ONNX model. */
static const unsigned char garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34, 0x00,
                                        0x0a, 0xff, 0x7f, 'n',  'o',  't',  'o',  'n'};

#endif
