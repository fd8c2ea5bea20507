/* ampc at the system's limits: an --inputs file that is a FIFO (refused, never waited on),
 * a `ulimit -f` smaller than the output (EFBIG reported, nothing left behind, instead of
 * death by SIGXFSZ), an output name near NAME_MAX (its temporary name must fit too), and
 * standard output on a full device (an error that says so). Each ampc runs in a child
 * with its own standard output, file size limit and an alarm, so a regression that
 * blocks ends as a failure, not a hung suite. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tools/cli_test_util.h"

TestSuite(cli_limits, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

#define CNN_MODEL AMPC_TEST_DIR "/../models/cnn_infer/model.onnx"

/* Runs AMPC_BIN with argv (NULL-terminated, without the program), standard output to
 * out_path, the file size limit fsize (0: none), killed by SIGALRM after 20 s. Returns
 * the exit status (128 + signal when killed); *err gets standard error (malloc'd). */
static int run_limited(const char *out_path, rlim_t fsize, char **err, const char *const *args) {
    const char *argv[16];
    int argc = 0;
    argv[argc++] = AMPC_BIN;
    for (; *args; args++) argv[argc++] = *args;
    argv[argc] = NULL;
    char err_path[600];
    tmp_path(err_path, sizeof err_path, ".stderr");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY), out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || e < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(e, 2) < 0) _exit(120);
        if (fsize) {
            struct rlimit rl = {fsize, fsize};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(121);
        }
        alarm(20); /* kept across exec */
        execv(AMPC_BIN, (char *const *)argv);
        _exit(122);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    *err = read_all(err_path, NULL);
    cr_assert_not_null(*err);
    unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static size_t entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

Test(cli_limits, an_input_file_that_is_a_fifo_is_refused) {
    char dir[600], fifo[700], out[600];
    tmp_path(dir, sizeof dir, "in");
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(fifo, sizeof fifo, "%s/input_0.pb", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    tmp_path(out, sizeof out, "stdout");
    char *err;
    const char *args[] = {"run", ADD_MODEL, "--inputs", dir, NULL};
    int code = run_limited(out, 0, &err, args);
    cr_assert_eq(code, 1, "exit %d (142: blocked on the FIFO): %s", code, err);
    cr_assert_not_null(strstr(err, "input_0.pb: not a regular file"), "%s", err);
    free(err);
}

Test(cli_limits, a_file_size_limit_is_an_error_and_leaves_nothing) {
    char dir[600], model[700], out[600];
    tmp_path(dir, sizeof dir, "small");
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(model, sizeof model, "%s/out.onnx", dir);
    tmp_path(out, sizeof out, "stdout");
    char *err;
    const char *args[] = {CNN_MODEL, "-o", model, "-q", NULL};
    int code = run_limited(out, 1024, &err, args);
    cr_assert_eq(code, 4, "exit %d (153: killed by SIGXFSZ): %s", code, err);
    cr_assert_not_null(strstr(err, "File too large"), "%s", err);
    cr_assert_eq(entries(dir), 0, "a temporary file was left behind");
    free(err);
}

Test(cli_limits, an_output_name_of_250_bytes_saves) {
    char name[256], model[1024], out[600];
    memset(name, 'a', 245);
    strcpy(name + 245, ".onnx");
    tmp_path(model, sizeof model, name);
    tmp_path(out, sizeof out, "stdout");
    char *err;
    const char *args[] = {CNN_MODEL, "-o", model, "-q", NULL};
    int code = run_limited(out, 0, &err, args);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert(exists(model));
    free(err);
}

static void full_stdout_is_an_error(const char *cmd) {
    if (access("/dev/full", W_OK) != 0) cr_skip_test("no /dev/full");
    char *err;
    const char *args[] = {cmd, ADD_MODEL, NULL};
    int code = run_limited("/dev/full", 0, &err, args);
    cr_assert_eq(code, 4, "exit %d: %s", code, err);
    cr_assert_not_null(strstr(err, "writing to standard output failed"), "ampc %s said: '%s'", cmd, err);
    free(err);
}

Test(cli_limits, run_to_a_full_stdout_says_so) {
    full_stdout_is_an_error("run");
}

Test(cli_limits, bench_to_a_full_stdout_says_so) {
    full_stdout_is_an_error("bench");
}
