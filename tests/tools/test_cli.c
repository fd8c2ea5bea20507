/* Tests of the ampc command as a user meets it: the built binary (AMPC_BIN) is run with
 * posix_spawn, its stdout and stderr captured in temporary files, and its exit code,
 * messages and output files checked. Models come from Debian's libonnx-testdata. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tools/cli_options.h"
#include "../runtime/rt_util.h"
#include "ir.h"
#include "passes.h"

extern char **environ;

#define ADD_MODEL AMPC_TESTDATA "/node/test_add/model.onnx"

/* ---- helpers ---------------------------------------------------------------------- */

static char tmpdir[512];

static void make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ampc_cli_XXXXXX", base && base[0] ? base : "/tmp");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp");
}

/* Removes `dir` and everything in it (the tests make folders for --outputs). */
static void remove_tree(const char *dir) {
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

static void remove_tmpdir(void) { remove_tree(tmpdir); }

TestSuite(cli, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

static const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static char *read_all(const char *path, size_t *len) {
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

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = read_all(from, &n);
    cr_assert_not_null(b, "cannot read %s", from);
    write_file(to, b, n);
    free(b);
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

typedef struct Run {
    int code; /* exit status, or 128 + signal */
    char *out, *err;
} Run;

/* Runs AMPC_BIN with the NULL-terminated arguments; stdin is /dev/null. */
static Run run_ampc(const char *arg0, ...) {
    const char *argv[32];
    int argc = 0;
    argv[argc++] = AMPC_BIN;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a; a = va_arg(ap, const char *)) {
        cr_assert_lt(argc, 31);
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;

    char out_path[600], err_path[600];
    tmp_path(out_path, sizeof out_path, ".stdout");
    tmp_path(err_path, sizeof err_path, ".stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
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
    r.out = read_all(out_path, NULL);
    r.err = read_all(err_path, NULL);
    cr_assert(r.out && r.err);
    unlink(out_path);
    unlink(err_path);
    return r;
}

static void run_free(Run *r) {
    free(r->out);
    free(r->err);
}

static size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* An error is one line: "ampc: ...\n". */
static void assert_one_error_line(const Run *r) {
    cr_assert_eq(count_lines(r->err), 1, "expected one stderr line, got:\n%s", r->err);
    cr_assert_eq(strncmp(r->err, "ampc: ", 6), 0, "stderr should start with 'ampc: ': %s",
                 r->err);
}

static void assert_loads(const char *path) {
    AmpModel *m = NULL;
    AmpStatus st = {AMP_OK, ""};
    AmpCode c = amp_model_load_file(path, NULL, &m, &st);
    cr_assert_eq(c, AMP_OK, "%s does not load again: %s", path, st.msg);
    cr_assert_not_null(m);
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s: %s", path, st.msg);
    amp_model_free(m);
}

/* Entries in the test's folder, temporaries included (the captured output is gone). */
static size_t count_files(void) {
    DIR *d = opendir(tmpdir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static const unsigned char garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34, 0x00,
                                        0x0a, 0xff, 0x7f, 'n',  'o',  't',  'o',  'n'};

/* ---- help and version --------------------------------------------------------------- */

typedef struct Opt {
    const char *name;
    int short_name, has_arg;
} Opt;

static const Opt opts[] = {
#define ROW(id, name, sh, arg, meta, help) {name, sh, arg},
    AMPC_OPTIONS(ROW)
#undef ROW
};
#define N_OPTS (sizeof opts / sizeof opts[0])

Test(cli, help_lists_every_option) {
    Run r = run_ampc("--help", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    const char *required[] = {"-o", "--passes", "--dump-after", "--print", "--external-data",
                              "--no-verify", "--version", "--help", "-q", "verify", "ampc run",
                              "--steps", "--inputs", "--backend", "--seed", "--dim", "--loss",
                              "--load-state", "--save-state", "--outputs", "ampc bench",
                              "--iters", "--warmup", "--train"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        cr_expect_not_null(strstr(r.out, required[i]), "--help does not mention %s",
                           required[i]);
    char buf[128];
    for (size_t i = 0; i < N_OPTS; i++) {
        snprintf(buf, sizeof buf, "--%s", opts[i].name);
        cr_expect_not_null(strstr(r.out, buf), "--help does not mention %s", buf);
        if (opts[i].short_name) {
            snprintf(buf, sizeof buf, "-%c,", opts[i].short_name);
            cr_expect_not_null(strstr(r.out, buf), "--help does not mention %s", buf);
        }
    }
    for (size_t i = 0; i < amp_pass_count(); i++)
        cr_expect_not_null(strstr(r.out, amp_pass_at(i)->name), "--help omits pass %s",
                           amp_pass_at(i)->name);
    for (int code = 0; code <= 4; code++) {
        snprintf(buf, sizeof buf, "  %d  ", code);
        cr_expect_not_null(strstr(r.out, buf), "--help does not explain exit code %d", code);
    }
    /* Truthful: every --word the help mentions is an option that exists. */
    for (const char *p = strstr(r.out, "--"); p; p = strstr(p + 2, "--")) {
        size_t n = 0;
        while (p[2 + n] && (p[2 + n] == '-' || (p[2 + n] >= 'a' && p[2 + n] <= 'z'))) n++;
        if (n == 0) continue;
        bool known = false;
        for (size_t i = 0; i < N_OPTS; i++)
            known |= strlen(opts[i].name) == n && strncmp(opts[i].name, p + 2, n) == 0;
        cr_expect(known, "--help mentions --%.*s, which is no option", (int)n, p + 2);
    }
    run_free(&r);

    Run h = run_ampc("-h", NULL);
    cr_assert_eq(h.code, 0);
    cr_assert_not_null(strstr(h.out, "--passes"));
    run_free(&h);
}

Test(cli, every_option_in_the_table_is_accepted) {
    for (size_t i = 0; i < N_OPTS; i++) {
        char name[128];
        snprintf(name, sizeof name, "--%s", opts[i].name);
        Run r = opts[i].has_arg ? run_ampc(name, "x", NULL) : run_ampc(name, NULL);
        cr_expect_null(strstr(r.err, "unknown option"), "%s rejected: %s", name, r.err);
        cr_expect_null(strstr(r.err, "takes no argument"), "%s rejected: %s", name, r.err);
        run_free(&r);
    }
}

Test(cli, version) {
    Run r = run_ampc("--version", NULL);
    cr_assert_eq(r.code, 0);
    cr_assert_str_eq(r.out, "ampc " AMPC_VERSION "\n");
    cr_assert_str_empty(r.err);
    run_free(&r);
}

/* ---- usage errors ----------------------------------------------------------------- */

Test(cli, no_arguments_is_usage_error) {
    Run r = run_ampc(NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "--help"), "no hint to run --help: %s", r.err);
    cr_assert_str_empty(r.out);
    run_free(&r);
}

Test(cli, unknown_option_is_usage_error) {
    Run r = run_ampc("--bogus-option", ADD_MODEL, NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "--bogus-option"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "--help"), "%s", r.err);
    run_free(&r);

    Run s = run_ampc("-Z", ADD_MODEL, NULL);
    cr_assert_eq(s.code, 2);
    assert_one_error_line(&s);
    cr_assert_not_null(strstr(s.err, "-Z"), "%s", s.err);
    run_free(&s);

    Run t = run_ampc("--print=yes", ADD_MODEL, NULL);
    cr_assert_eq(t.code, 2);
    assert_one_error_line(&t);
    run_free(&t);
}

Test(cli, missing_option_argument_is_usage_error) {
    Run r = run_ampc(ADD_MODEL, "-o", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "-o"), "%s", r.err);
    run_free(&r);

    Run s = run_ampc(ADD_MODEL, "--passes", NULL);
    cr_assert_eq(s.code, 2);
    assert_one_error_line(&s);
    cr_assert_not_null(strstr(s.err, "--passes"), "%s", s.err);
    run_free(&s);
}

Test(cli, converting_without_output_is_usage_error) {
    Run r = run_ampc(ADD_MODEL, NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "-o"), "should say to give -o: %s", r.err);
    run_free(&r);
}

Test(cli, two_models_is_usage_error) {
    Run r = run_ampc(ADD_MODEL, ADD_MODEL, "--print", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    run_free(&r);
}

Test(cli, unknown_pass_is_usage_error) {
    char out[600];
    tmp_path(out, sizeof out, "out.onnx");
    Run r = run_ampc(ADD_MODEL, "-o", out, "--passes", "bogus", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "bogus"), "should name the pass: %s", r.err);
    cr_assert_not(exists(out));
    run_free(&r);

    Run s = run_ampc(ADD_MODEL, "-o", out, "--passes", "", NULL);
    cr_assert_eq(s.code, 0, "--passes '' runs nothing: %s", s.err);
    run_free(&s);
    unlink(out);

    Run t = run_ampc(ADD_MODEL, "-o", out, "--passes", "none,", NULL);
    cr_assert_eq(t.code, 2);
    assert_one_error_line(&t);
    cr_assert_not(exists(out));
    run_free(&t);
}

Test(cli, dump_after_unknown_pass_is_usage_error) {
    Run r = run_ampc(ADD_MODEL, "--dump-after", "nosuchpass", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "nosuchpass"), "%s", r.err);
    run_free(&r);
}

Test(cli, dump_after_pass_outside_pipeline_is_usage_error) {
    if (amp_pass_count() == 0) cr_skip_test("no passes registered yet");
    Run r = run_ampc(ADD_MODEL, "--passes", "none", "--dump-after", amp_pass_at(0)->name,
                     NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, amp_pass_at(0)->name), "%s", r.err);
    run_free(&r);
}

Test(cli, dump_after_prints_ir) {
    if (amp_pass_count() == 0) cr_skip_test("no passes registered yet");
    const char *name = amp_pass_at(0)->name;
    Run r = run_ampc(ADD_MODEL, "--passes", name, "--dump-after", name, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "Add"), "no IR on stdout: %s", r.out);
    run_free(&r);
}

Test(cli, bad_external_data_mode_is_usage_error) {
    Run r = run_ampc(ADD_MODEL, "--print", "--external-data", "sometimes", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "sometimes"), "%s", r.err);
    run_free(&r);
}

static void write_training_model(const char *path);

Test(cli, bench_prints_times_and_memory) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    Run r = run_ampc("bench", ADD_MODEL, "--inputs", dir, "--iters", "5", "--warmup", "1", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "5 inference runs timed after 1 warm-up"), "%s", r.out);
    double med, lo, hi;
    const char *t = strstr(r.out, "time per run: median ");
    cr_assert_not_null(t, "%s", r.out);
    cr_assert_eq(sscanf(t, "time per run: median %lf ms, min %lf ms, max %lf ms", &med, &lo, &hi), 3, "%s", r.out);
    cr_assert(lo >= 0 && lo <= med && med <= hi, "min %g, median %g, max %g", lo, med, hi);
    cr_assert_not_null(strstr(r.out, "peak memory "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "intermediates "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "+ state "), "%s", r.out);
    cr_assert_null(strstr(r.out, "output '"), "bench prints no outputs: %s", r.out);
    run_free(&r);

    /* Defaults (random inputs), and training steps. */
    Run d = run_ampc("bench", ADD_MODEL, NULL);
    cr_assert_eq(d.code, 0, "%s", d.err);
    cr_assert_not_null(strstr(d.out, "20 inference runs timed after 3 warm-up"), "%s", d.out);
    run_free(&d);
    char path[600];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    Run tr = run_ampc("bench", path, "--train", "--iters", "2", "--dim", "N=8", NULL);
    cr_assert_eq(tr.code, 0, "%s", tr.err);
    cr_assert_not_null(strstr(tr.out, "2 training steps timed"), "%s", tr.out);
    cr_assert_not_null(strstr(tr.out, "time per step: median "), "%s", tr.out);
    run_free(&tr);
}

Test(cli, bench_usage_errors) {
    const char *bad[][2] = {
        {"--iters", "0"}, {"--iters", "x"}, {"--warmup", "-1"}, {"--steps", "2"}, {"--outputs", "d"},
        {"--save-state", "f"}, {"-o", "x.onnx"}, {"--backend", "tpu"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_ampc("bench", ADD_MODEL, bad[i][0], bad[i][1], NULL);
        cr_expect_eq(r.code, 2, "bench %s %s: exit %d, %s", bad[i][0], bad[i][1], r.code, r.err);
        assert_one_error_line(&r);
        run_free(&r);
    }
    Run m = run_ampc("bench", NULL);
    cr_assert_eq(m.code, 2);
    assert_one_error_line(&m);
    run_free(&m);
    /* Bench-only options are refused elsewhere, naming the command that takes them. */
    Run c = run_ampc("run", ADD_MODEL, "--iters", "2", NULL);
    cr_assert_eq(c.code, 2);
    cr_assert_not_null(strstr(c.err, "ampc bench"), "%s", c.err);
    run_free(&c);
    Run t = run_ampc(ADD_MODEL, "--train", "--print", NULL);
    cr_assert_eq(t.code, 2);
    cr_assert_not_null(strstr(t.err, "ampc bench"), "%s", t.err);
    run_free(&t);
    Run b = run_ampc("bench", ADD_MODEL, "--backend", "cuda", NULL);
    cr_assert_eq(b.code, 3, "%s", b.err);
    assert_one_error_line(&b);
    run_free(&b);
}

Test(cli, run_usage_errors) {
    const char *bad[][4] = {
        {"--steps", "0"}, {"--steps", "x"}, {"--backend", "tpu"}, {"--dim", "N"}, {"--dim", "=3"},
        {"--dim", "N=-1"}, {"--seed", "-1"}, {"-o", "x.onnx"}, {"--passes", "none"},
        {"--outputs", ""}, {"--iters", "3"}, {"--train", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_ampc("run", ADD_MODEL, bad[i][0], bad[i][1], NULL);
        cr_expect_eq(r.code, 2, "run %s %s: exit %d, %s", bad[i][0], bad[i][1], r.code, r.err);
        assert_one_error_line(&r);
        run_free(&r);
    }
    Run m = run_ampc("run", NULL);
    cr_assert_eq(m.code, 2);
    assert_one_error_line(&m);
    run_free(&m);
    /* Run-only options are refused (not unknown) outside run. */
    Run c = run_ampc(ADD_MODEL, "--steps", "2", "--print", NULL);
    cr_assert_eq(c.code, 2);
    cr_assert_not_null(strstr(c.err, "ampc run"), "%s", c.err);
    run_free(&c);
    Run l = run_ampc("run", ADD_MODEL, "--loss", "nosuch", NULL);
    cr_assert_eq(l.code, 2, "%s", l.err);
    cr_assert_not_null(strstr(l.err, "nosuch"), "%s", l.err);
    run_free(&l);
}

Test(cli, run_bad_model_and_backend) {
    char in[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc("run", in, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "garbage.onnx"), "%s", r.err);
    run_free(&r);
    Run c = run_ampc("run", ADD_MODEL, "--backend", "cuda", NULL);
    cr_assert_eq(c.code, 3, "%s", c.err);
    assert_one_error_line(&c);
    run_free(&c);
    Run d = run_ampc("run", ADD_MODEL, "--inputs", tmpdir, NULL);
    cr_assert_eq(d.code, 2, "an empty folder: %s", d.err);
    cr_assert_not_null(strstr(d.err, "input_0.pb"), "%s", d.err);
    run_free(&d);
}

/* The first printed values of output 'name' ("output 'sum' float[3,4,5]: v0 v1 ..."). */
static int parse_values(const char *out, const char *name, double *v, int max) {
    char head[128];
    snprintf(head, sizeof head, "output '%s' ", name);
    const char *p = strstr(out, head);
    cr_assert_not_null(p, "no line for output %s in:\n%s", name, out);
    p = strchr(p, ':');
    cr_assert_not_null(p);
    p++;
    int n = 0;
    while (n < max) {
        char *end;
        double x = strtod(p, &end);
        if (end == p) break;
        v[n++] = x;
        p = end;
    }
    return n;
}

Test(cli, run_with_inputs_gives_the_expected_outputs) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    Run r = run_ampc("run", ADD_MODEL, "--inputs", dir, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "output 'sum' float[3,4,5]:"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "step time"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "peak memory"), "%s", r.out);
    double got[8];
    int n = parse_values(r.out, "sum", got, 8);
    cr_assert_eq(n, 8, "%s", r.out);
    /* The expected values, from output_0.pb. */
    AmpModel *m = amp_model_new();
    size_t len;
    char *bytes = read_all(AMPC_TESTDATA "/node/test_add/test_data_set_0/output_0.pb", &len);
    AmpTensor *t;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_tensor_load_bytes(m, bytes, len, &t, &st), AMP_OK, "%s", st.msg);
    AmpBytes raw;
    cr_assert_eq(amp_tensor_bytes(m, t, &raw, &st), AMP_OK);
    for (int i = 0; i < 8; i++) {
        float want;
        memcpy(&want, raw.data + 4 * i, 4);
        cr_assert_float_eq(got[i], want, 1e-6 + 1e-6 * (want < 0 ? -want : want), "element %d", i);
    }
    free(bytes);
    amp_model_free(m);
    run_free(&r);
}

/* A TensorProto file parsed with the IR's loader; the tensor lives in *m. */
static AmpTensor *load_tensor_file(const char *path, AmpModel **m, AmpBytes *raw) {
    size_t len = 0;
    char *bytes = read_all(path, &len);
    cr_assert_not_null(bytes, "cannot read %s", path);
    *m = amp_model_new();
    AmpTensor *t = NULL;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_tensor_load_bytes(*m, bytes, len, &t, &st), AMP_OK, "%s: %s", path, st.msg);
    cr_assert_eq(amp_tensor_bytes(*m, t, raw, &st), AMP_OK, "%s: %s", path, st.msg);
    free(bytes);
    return t;
}

/* Add is exact in fp32, so the written file is the conformance file, byte for byte. */
Test(cli, run_outputs_are_the_conformance_files) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    char out[600], file[700];
    tmp_path(out, sizeof out, "outs/nested");
    Run r = run_ampc("run", ADD_MODEL, "--inputs", dir, "--outputs", out, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "output 'sum' float[3,4,5]:"), "the outputs are still printed: %s", r.out);
    snprintf(file, sizeof file, "%s/output_0.pb", out);
    size_t n_got = 0, n_want = 0;
    char *got = read_all(file, &n_got), *want = read_all(AMPC_TESTDATA "/node/test_add/test_data_set_0/output_0.pb", &n_want);
    cr_assert_not_null(got, "no %s", file);
    cr_assert_not_null(want);
    cr_assert_eq(n_got, n_want, "%zu bytes, the conformance file has %zu", n_got, n_want);
    cr_assert_eq(memcmp(got, want, n_got), 0, "%s differs from the conformance output_0.pb", file);
    free(got);
    free(want);
    run_free(&r);

    /* Run again into the same folder: the file is replaced, no temporary is left. */
    Run a = run_ampc("run", ADD_MODEL, "--seed", "3", "--outputs", out, NULL);
    cr_assert_eq(a.code, 0, "%s", a.err);
    DIR *d = opendir(out);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            cr_expect_str_eq(e->d_name, "output_0.pb");
            n++;
        }
    closedir(d);
    cr_assert_eq(n, 1);
    double shown[8];
    cr_assert_eq(parse_values(a.out, "sum", shown, 8), 8);
    AmpModel *m;
    AmpBytes raw;
    AmpTensor *t = load_tensor_file(file, &m, &raw);
    cr_assert_str_eq(t->name, "sum");
    cr_assert_eq(t->dtype, AMP_DT_FLOAT);
    cr_assert_eq(t->ndims, 3);
    cr_assert_eq(raw.len, 60 * 4);
    for (int i = 0; i < 8; i++) {
        float f;
        memcpy(&f, raw.data + 4 * i, 4);
        cr_assert_eq((float)shown[i], f, "element %d: printed %.9g, written %.9g", i, shown[i], (double)f);
    }
    amp_model_free(m);
    run_free(&a);
}

Test(cli, run_outputs_errors_write_nothing) {
    char file[600], out[600], in[600];
    /* DIR is a file: bad input, one line naming it. */
    tmp_path(file, sizeof file, "a_file");
    write_file(file, "x", 1);
    Run r = run_ampc("run", ADD_MODEL, "--outputs", file, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "a_file"), "%s", r.err);
    run_free(&r);
    /* A run that fails creates no folder. */
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    tmp_path(out, sizeof out, "never");
    Run g = run_ampc("run", in, "--outputs", out, NULL);
    cr_assert_eq(g.code, 1, "%s", g.err);
    cr_assert_not(exists(out), "a failed run made %s", out);
    run_free(&g);
    cr_assert_eq(count_files(), 2, "leftover files in %s", tmpdir);
}

/* A loss model: output_0.pb is the last step's loss, the value printed for that step. */
Test(cli, run_outputs_of_a_training_step) {
    char path[600], out[600], file[700];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    tmp_path(out, sizeof out, "outs");
    Run r = run_ampc("run", path, "--steps", "2", "--dim", "N=8", "--outputs", out, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *p = strstr(r.out, "step 2: loss ");
    cr_assert_not_null(p, "%s", r.out);
    float printed = strtof(p + 13, NULL);
    snprintf(file, sizeof file, "%s/output_0.pb", out);
    AmpModel *m;
    AmpBytes raw;
    AmpTensor *t = load_tensor_file(file, &m, &raw);
    cr_assert_str_eq(t->name, "loss");
    cr_assert_eq(t->dtype, AMP_DT_FLOAT);
    cr_assert_eq(t->ndims, 0);
    cr_assert_eq(raw.len, 4);
    float f;
    memcpy(&f, raw.data, 4);
    cr_assert_eq(f, printed, "written %.9g, printed %.9g (%%.9g identifies a float)", (double)f, (double)printed);
    amp_model_free(m);
    snprintf(file, sizeof file, "%s/output_1.pb", out);
    cr_assert_not(exists(file), "the model has one output");
    run_free(&r);
}

Test(cli, run_random_inputs_are_deterministic) {
    Run a = run_ampc("run", ADD_MODEL, "--seed", "7", NULL);
    Run b = run_ampc("run", ADD_MODEL, "--seed", "7", "--steps", "3", NULL);
    Run c = run_ampc("run", ADD_MODEL, "--seed", "8", NULL);
    cr_assert_eq(a.code, 0, "%s", a.err);
    cr_assert_eq(b.code, 0, "%s", b.err);
    double va[8], vb[8], vc[8];
    cr_assert_eq(parse_values(a.out, "sum", va, 8), 8);
    cr_assert_eq(parse_values(b.out, "sum", vb, 8), 8);
    cr_assert_eq(parse_values(c.out, "sum", vc, 8), 8);
    cr_assert_eq(memcmp(va, vb, sizeof va), 0, "same seed, other data:\n%s\n%s", a.out, b.out);
    cr_assert_neq(memcmp(va, vc, sizeof va), 0, "another seed, same data");
    cr_assert_not_null(strstr(b.out, "median of 3"), "%s", b.out);
    run_free(&a);
    run_free(&b);
    run_free(&c);
}

/* A model with a loss and no training_info (backward would be in the main graph):
 * scores = MatMul(X, W) with X float[N,4], labels int64[N] that must lie in [0, 3),
 * loss = SoftmaxCrossEntropyLoss(scores, labels). */
static void write_training_model(const char *path) {
    AmpModel *m = amp_model_new();
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    g->name = "train";
    AmpArena *ar = &m->arena;
    AmpValue *x = amp_graph_value(g, "X"), *lab = amp_graph_value(g, "labels");
    AmpDim *xd = amp_arena_calloc(ar, 2, sizeof *xd), *ld = amp_arena_calloc(ar, 1, sizeof *ld);
    xd[0] = (AmpDim){-1, "N"}, xd[1] = (AmpDim){4, NULL}, ld[0] = (AmpDim){-1, "N"};
    x->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 2, xd};
    lab->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_INT64, 1, ld};
    amp_graph_add_input(g, x);
    amp_graph_add_input(g, lab);
    static const float w[12] = {0.1f, -0.2f, 0.3f, 0.0f, 0.2f, -0.1f, -0.3f, 0.1f, 0.05f, 0.2f, 0.1f, -0.2f};
    static const int64_t wdims[2] = {4, 3};
    AmpTensor *t = amp_arena_calloc(ar, 1, sizeof *t);
    *t = (AmpTensor){.dtype = AMP_DT_FLOAT, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW, .ndims = 2,
                     .dims = amp_arena_memdup(ar, wdims, sizeof wdims), .nelem = 12,
                     .raw = {amp_arena_memdup(ar, w, sizeof w), sizeof w}};
    AmpValue *wv = amp_graph_value(g, "W");
    amp_graph_add_initializer(g, wv, t);
    AmpNode *mm = amp_node_new(g, "", "MatMul", "mm", 2, 1);
    amp_node_set_input(mm, 0, x);
    amp_node_set_input(mm, 1, wv);
    amp_node_set_output(mm, 0, amp_graph_value(g, "scores"));
    amp_node_append(g, mm);
    AmpNode *sce = amp_node_new(g, "", "SoftmaxCrossEntropyLoss", "sce", 2, 1);
    amp_node_set_input(sce, 0, amp_graph_value(g, "scores"));
    amp_node_set_input(sce, 1, lab);
    amp_node_set_output(sce, 0, amp_graph_value(g, "loss"));
    amp_node_append(g, sce);
    amp_graph_add_output(g, amp_graph_value(g, "loss"));
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(m, path, NULL, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

Test(cli, run_loss_model_prints_a_loss_per_step) {
    char path[600];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    for (int seed = 1; seed <= 5; seed++) {
        char s[16];
        snprintf(s, sizeof s, "%d", seed);
        Run r = run_ampc("run", path, "--steps", "3", "--dim", "N=16", "--seed", s, NULL);
        cr_assert_eq(r.code, 0, "seed %d: %s", seed, r.err); /* labels out of [0, 3) would fail the kernel */
        cr_assert_str_empty(r.err, "with --dim N=16 there is no note: %s", r.err);
        int lines = 0;
        for (const char *p = r.out; (p = strstr(p, ": loss ")); p++) lines++;
        cr_assert_eq(lines, 3, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "step 3: loss "), "%s", r.out);
        cr_assert_not_null(strstr(r.out, "peak memory"), "%s", r.out);
        run_free(&r);
    }
    /* Without --dim the symbolic batch is 1, with a note on stderr. */
    Run n = run_ampc("run", path, NULL);
    cr_assert_eq(n.code, 0, "%s", n.err);
    cr_assert_not_null(strstr(n.err, "--dim N="), "%s", n.err);
    run_free(&n);
}

/* ---- bad input ---------------------------------------------------------------------- */

Test(cli, missing_file_is_bad_input) {
    char in[600], out[600];
    tmp_path(in, sizeof in, "no_such_model.onnx");
    tmp_path(out, sizeof out, "out.onnx");
    Run r = run_ampc(in, "-o", out, NULL);
    cr_assert_eq(r.code, 1, "stderr: %s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "no_such_model.onnx"), "should name the file: %s", r.err);
    cr_assert_not(exists(out));
    run_free(&r);
}

Test(cli, garbage_file_is_bad_input) {
    char in[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc(in, "--print", NULL);
    cr_assert_eq(r.code, 1, "stderr: %s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "garbage.onnx"), "should name the file: %s", r.err);
    run_free(&r);
}

Test(cli, failure_writes_nothing) {
    char in[600], out[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    tmp_path(out, sizeof out, "out.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc(in, "-o", out, NULL);
    cr_assert_eq(r.code, 1);
    cr_assert_not(exists(out), "a failed run left %s", out);
    run_free(&r);

    /* An existing output is left exactly as it was. */
    write_file(out, "keep", 4);
    Run s = run_ampc(in, "-o", out, NULL);
    cr_assert_eq(s.code, 1);
    char *kept = read_all(out, NULL);
    cr_assert_str_eq(kept, "keep");
    free(kept);
    run_free(&s);

    /* Only the two files this test made are in the folder: no temporary is left. */
    cr_assert_eq(count_files(), 2, "leftover files in %s", tmpdir);
}

Test(cli, unwritable_output_is_one_error_line) {
    char out[600];
    tmp_path(out, sizeof out, "no_such_folder/out.onnx");
    Run r = run_ampc(ADD_MODEL, "-o", out, NULL);
    cr_assert_neq(r.code, 0);
    cr_assert_lt(r.code, 5);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "no_such_folder/out.onnx"), "%s", r.err);
    cr_assert_eq(count_files(), 0, "leftover files in %s", tmpdir);
    run_free(&r);
}

Test(cli, garbage_output_in_place_is_untouched) {
    char in[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc(in, "-o", in, NULL);
    cr_assert_eq(r.code, 1);
    size_t n = 0;
    char *b = read_all(in, &n);
    cr_assert_eq(n, sizeof garbage);
    cr_assert_eq(memcmp(b, garbage, n), 0, "the input was changed by a failed run");
    free(b);
    run_free(&r);
}

/* ---- working runs ------------------------------------------------------------------- */

Test(cli, convert_writes_a_model_that_loads) {
    char out[600];
    tmp_path(out, sizeof out, "add_amp.onnx");
    Run r = run_ampc(ADD_MODEL, "-o", out, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_leq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(exists(out));
    assert_loads(out);
    run_free(&r);
}

Test(cli, quiet_says_nothing) {
    char out[600];
    tmp_path(out, sizeof out, "add_amp.onnx");
    Run r = run_ampc("-q", ADD_MODEL, "-o", out, "--external-data", "never", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_str_empty(r.out);
    assert_loads(out);
    run_free(&r);
}

Test(cli, no_passes_no_verify) {
    char out[600];
    tmp_path(out, sizeof out, "add_same.onnx");
    Run r = run_ampc(ADD_MODEL, "--passes", "none", "--no-verify", "-o", out, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    assert_loads(out);
    run_free(&r);
}

Test(cli, output_may_be_the_input) {
    char path[600];
    tmp_path(path, sizeof path, "model.onnx");
    copy_file(ADD_MODEL, path);
    Run r = run_ampc(path, "-o", path, "-q", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    assert_loads(path);
    cr_assert_eq(count_files(), 1, "leftover files in %s", tmpdir);
    run_free(&r);
}

Test(cli, print_shows_the_ir) {
    Run r = run_ampc(ADD_MODEL, "--print", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "Add"), "--print output lacks the op: %s", r.out);
    run_free(&r);

    Run s = run_ampc("--print", "--passes", "none", ADD_MODEL, NULL);
    cr_assert_eq(s.code, 0, "stderr: %s", s.err);
    cr_assert_not_null(strstr(s.out, "Add"));
    run_free(&s);
}

Test(cli, verify_good_model) {
    Run r = run_ampc("verify", ADD_MODEL, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_eq(count_lines(r.out), 1, "one summary line: %s", r.out);
    cr_assert_not_null(strstr(r.out, "1 nodes"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "ai.onnx"), "%s", r.out);
    run_free(&r);
}

Test(cli, verify_bad_model) {
    char in[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc("verify", in, NULL);
    cr_assert_eq(r.code, 1);
    assert_one_error_line(&r);
    cr_assert_str_empty(r.out);
    run_free(&r);

    Run s = run_ampc("verify", NULL);
    cr_assert_eq(s.code, 2);
    assert_one_error_line(&s);
    run_free(&s);
}

/* training_info: loss = mean((X*W - T)^2); the algorithm steps W by lr * dloss/dW. */
Test(cli, run_training_info_model_learns) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d3[1] = {3};
    const float w[3] = {0.5f, -0.5f, 1.0f};
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_input(g, "T", AMP_DT_FLOAT, "3");
    rt_init(g, "W", AMP_DT_FLOAT, 1, d3, w);
    rt_node(g, "", "Mul", "X,W", "P");
    rt_node(g, "", "Sub", "P,T", "D");
    rt_node(g, "", "Mul", "D,D", "DD");
    amp_node_add_attr(rt_node(g, "", "ReduceMean", "DD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    AmpGraph *a = rt_training(m);
    rt_scalar_f(a, "c", 0.2f * 2.0f / 3.0f);
    rt_node(a, "", "Mul", "D,X", "G0");
    rt_node(a, "", "Mul", "G0,c", "S");
    rt_node(a, "", "Sub", "W,S", "W_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "3");
    rt_bindings(m, false, "W=W_new");
    char path[600];
    tmp_path(path, sizeof path, "sgd.onnx");
    rt_save(m, path);
    Run r = run_ampc("run", path, "--steps", "6", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    double prev = 1e30;
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, ": loss ")); p++, n++) {
        double l = strtod(p + 7, NULL);
        cr_assert_lt(l, prev, "the loss does not fall:\n%s", r.out);
        prev = l;
    }
    cr_assert_eq(n, 6, "%s", r.out);

    /* Two steps, a checkpoint, two more from it: the same steps 3 and 4, bit for bit. */
    char ck[600];
    tmp_path(ck, sizeof ck, "ck.onnx");
    Run sv = run_ampc("run", path, "--steps", "2", "--save-state", ck, NULL);
    cr_assert_eq(sv.code, 0, "%s", sv.err);
    Run b = run_ampc("run", path, "--steps", "2", "--load-state", ck, NULL);
    cr_assert_eq(b.code, 0, "%s", b.err);
    for (int k = 3; k <= 4; k++) {
        char head[32];
        snprintf(head, sizeof head, "step %d: loss ", k);
        const char *x = strstr(r.out, head), *y = strstr(b.out, head);
        cr_assert(x && y, "no '%s' in\n%s\n%s", head, r.out, b.out);
        cr_assert_eq(strcspn(x, "("), strcspn(y, "("));
        cr_assert_eq(strncmp(x, y, strcspn(x, "(")), 0, "after the load:\n%s\nstraight through:\n%s", b.out, r.out);
    }
    /* --outputs: the main graph's output, then the algorithm's (W after the last step). */
    char outs[600], f0[700], f1[700];
    tmp_path(outs, sizeof outs, "outs");
    Run o = run_ampc("run", path, "--steps", "2", "--outputs", outs, NULL);
    cr_assert_eq(o.code, 0, "%s", o.err);
    snprintf(f0, sizeof f0, "%s/output_0.pb", outs);
    snprintf(f1, sizeof f1, "%s/output_1.pb", outs);
    AmpModel *m0, *m1;
    AmpBytes r0, r1;
    cr_assert_str_eq(load_tensor_file(f0, &m0, &r0)->name, "loss");
    AmpTensor *wt = load_tensor_file(f1, &m1, &r1);
    cr_assert_str_eq(wt->name, "W_new");
    cr_assert_eq(r1.len, 3 * sizeof(float));
    float w2[3];
    memcpy(w2, r1.data, sizeof w2);
    cr_assert(w2[0] != w[0] || w2[1] != w[1] || w2[2] != w[2], "W did not change in two steps");
    amp_model_free(m0);
    amp_model_free(m1);
    run_free(&o);

    Run c = run_ampc("run", path, "--load-state", ADD_MODEL, NULL);
    cr_assert_eq(c.code, 1, "not a checkpoint: %s", c.err);
    assert_one_error_line(&c);
    run_free(&sv);
    run_free(&b);
    run_free(&c);
    run_free(&r);
}
