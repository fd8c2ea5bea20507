/* ampc and standard input and output: MODEL '-' reads standard input to its end (a FIFO
 * named as MODEL is refused); -o - and --dump-dot - write to standard output; standard
 * output carries one thing (a model, a picture or text), and a model goes neither to a
 * terminal nor from one. */
/* posix_openpt and the pseudo-terminal calls are XSI. */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tools/cli_test_util.h"

TestSuite(cli_stdio, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

#define CNN_MODEL AMPC_TEST_DIR "/../models/cnn_infer/model.onnx"

/* The converted model as `ampc MODEL -o FILE` writes it (the reference bytes). */
static char *converted(size_t *len) {
    char out[600];
    tmp_path(out, sizeof out, "ref.onnx");
    Run r = run_ampc(CNN_MODEL, "-o", out, "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    run_free(&r);
    char *b = read_all(out, len);
    cr_assert_not_null(b);
    cr_assert_gt(*len, 0);
    return b;
}

static void assert_file_is(const char *path, const char *want, size_t n) {
    size_t len = 0;
    char *got = read_all(path, &len);
    cr_assert_not_null(got, "%s was not written", path);
    cr_assert(len == n && memcmp(got, want, n) == 0, "%s: %zu bytes, not the %zu expected", path, len, n);
    free(got);
}

Test(cli_stdio, dash_output_is_standard_output) {
    size_t n;
    char *ref = converted(&n);
    Run r = run_ampc(CNN_MODEL, "-o", "-", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(r.out_len == n && memcmp(r.out, ref, n) == 0, "stdout: %zu bytes, not the model's %zu", r.out_len, n);
    cr_assert_not_null(strstr(r.err, "ampc: wrote standard output: 10 nodes (8 before)"), "%s", r.err);
    char dash[600];
    cr_assert(!exists(tmp_path(dash, sizeof dash, "-")), "a file named '-' was made");
    run_free(&r);
    free(ref);
}

Test(cli_stdio, dash_model_is_standard_input) {
    size_t n;
    char *ref = converted(&n);
    char out[600];
    tmp_path(out, sizeof out, "from_stdin.onnx");
    Run r = run_ampc_stdin(CNN_MODEL, "-", "-o", out, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    run_free(&r);
    assert_file_is(out, ref, n);
    /* A whole filter: standard input to standard output. */
    Run f = run_ampc_stdin(CNN_MODEL, "-", "-o", "-", "-q", NULL);
    cr_assert_eq(f.code, 0, "%s", f.err);
    cr_assert(f.out_len == n && memcmp(f.out, ref, n) == 0, "stdout: %zu bytes", f.out_len);
    run_free(&f);
    Run v = run_ampc_stdin(CNN_MODEL, "verify", "-", NULL);
    cr_assert_eq(v.code, 0, "%s", v.err);
    cr_assert_not_null(strstr(v.out, "standard input: ok: 8 nodes"), "%s", v.out);
    run_free(&v);
    free(ref);
}

Test(cli_stdio, bad_standard_input_is_named) {
    char out[600], junk[600];
    tmp_path(out, sizeof out, "never.onnx");
    Run r = run_ampc_stdin("/dev/null", "-", "-o", out, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "ampc: standard input: the file is empty"), "%s", r.err);
    run_free(&r);
    write_file(tmp_path(junk, sizeof junk, "junk.bin"), "\xff\xff\xff", 3);
    Run j = run_ampc_stdin(junk, "-", "-o", out, NULL);
    cr_assert_eq(j.code, 1, "%s", j.err);
    assert_one_error_line(&j);
    cr_assert_not_null(strstr(j.err, "ampc: standard input: not an ONNX model"), "%s", j.err);
    run_free(&j);
    cr_assert(!exists(out));
}

/* A child that writes the model into the FIFO at `path` (opening it waits for ampc). */
static pid_t fifo_writer(const char *path, const char *model) {
    size_t n = 0;
    char *data = read_all(model, &n);
    cr_assert_not_null(data);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY);
        size_t off = 0;
        while (fd >= 0 && off < n) {
            ssize_t w = write(fd, data + off, n - off);
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        _exit(fd >= 0 && off == n ? 0 : 1);
    }
    free(data);
    return pid;
}

/* A FIFO named as MODEL is refused at once (it could wait forever for a writer); the
 * same FIFO as standard input is read to its end. */
Test(cli_stdio, a_fifo_is_read_as_standard_input_only) {
    size_t n;
    char *ref = converted(&n);
    char fifo[600], out[600];
    tmp_path(fifo, sizeof fifo, "model.fifo");
    tmp_path(out, sizeof out, "from_fifo.onnx");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    Run r = run_ampc(fifo, "-o", out, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "not a regular file (a stream is read as standard input, '-')"), "%s", r.err);
    run_free(&r);
    cr_assert(!exists(out));
    pid_t w = fifo_writer(fifo, CNN_MODEL);
    Run s = run_ampc_stdin(fifo, "-", "-o", "-", "-q", NULL);
    int status = 0;
    cr_assert_eq(waitpid(w, &status, 0), w);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed");
    cr_assert_eq(s.code, 0, "%s", s.err);
    cr_assert(s.out_len == n && memcmp(s.out, ref, n) == 0, "stdout: %zu bytes", s.out_len);
    run_free(&s);
    free(ref);
}

Test(cli_stdio, dash_dot_is_standard_output) {
    Run r = run_ampc(CNN_MODEL, "--dump-dot", "-", "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_eq(strncmp(r.out, "digraph ampc {", 14), 0, "%.80s", r.out);
    cr_assert_eq(r.out[r.out_len - 2], '}', "the picture is whole");
    run_free(&r);
}

/* Standard output carries one thing: each pairing is a usage error, and nothing is written. */
Test(cli_stdio, standard_output_is_never_shared) {
    char out[600], dev_stdout[] = "/dev/stdout";
    tmp_path(out, sizeof out, "never.onnx");
    static const char *const text[][2] = {{"--report", NULL}, {"--print", NULL}, {"--explain", "conv1/Conv"}};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        const char *const *t = text[i];
        Run r = run_ampc(CNN_MODEL, "-o", "-", t[0], t[1], NULL);
        cr_assert_eq(r.code, 2, "-o - %s: exit %d: %s", t[0], r.code, r.err);
        assert_one_error_line(&r);
        cr_assert_not_null(strstr(r.err, t[0]), "%s", r.err);
        cr_assert_eq(r.out_len, 0, "something went to stdout");
        run_free(&r);
        Run d = run_ampc(CNN_MODEL, "--dump-dot", dev_stdout, t[0], t[1], NULL);
        cr_assert_eq(d.code, 2, "--dump-dot /dev/stdout %s: exit %d: %s", t[0], d.code, d.err);
        cr_assert_eq(d.out_len, 0, "something went to stdout");
        run_free(&d);
    }
    Run b = run_ampc(CNN_MODEL, "-o", "-", "--dump-dot", "-", NULL);
    cr_assert_eq(b.code, 2, "%s", b.err);
    cr_assert_not_null(strstr(b.err, "the same file"), "%s", b.err);
    run_free(&b);
    Run s = run_ampc(CNN_MODEL, "-o", out, "--dump-dot", out, NULL);
    cr_assert_eq(s.code, 2, "%s", s.err);
    assert_one_error_line(&s);
    cr_assert_not_null(strstr(s.err, "-o and --dump-dot name the same file"), "%s", s.err);
    run_free(&s);
    cr_assert(!exists(out));
    /* /dev/null discards: any number of outputs may go there. */
    Run z = run_ampc(CNN_MODEL, "-o", "/dev/null", "--dump-dot", "/dev/null", "-q", NULL);
    cr_assert_eq(z.code, 0, "%s", z.err);
    run_free(&z);
}

Test(cli_stdio, a_model_is_not_read_from_a_terminal) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0 || !ptsname(m)) {
        if (m >= 0) close(m);
        cr_skip_test("no pseudo-terminal here");
    }
    char tty[256];
    snprintf(tty, sizeof tty, "%s", ptsname(m));
    char out[600];
    tmp_path(out, sizeof out, "never.onnx");
    Run r = run_ampc_stdin(tty, "-", "-o", out, NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "standard input, which is a terminal"), "%s", r.err);
    run_free(&r);
    close(m);
    cr_assert(!exists(out));
}
