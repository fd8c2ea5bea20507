/* Tests of the ampc command as a user meets it: help, version, usage errors, converting,
 * verify, --print and --dump-after. The built binary (AMPC_BIN) is run with posix_spawn,
 * its stdout and stderr captured in temporary files, and its exit code, messages and
 * output files checked. Models come from Debian's libonnx-testdata. `ampc run` and
 * `ampc bench` are in test_cli_run.c. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/version.h"
#include "tools/cli_options.h"
#include "tests/ir/irtest_util.h"
#include "tests/tools/cli_test_util.h"
#include "ir/ir.h"
#include "passes/options.h"
#include "passes/passes.h"
#include "backend/backend.h"

TestSuite(cli, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

/* ---- helpers ---------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = read_all(from, &n);
    cr_assert_not_null(b, "cannot read %s", from);
    write_file(to, b, n);
    free(b);
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

/* Every row of the library's option table (passes/options.c) that names a CLI option has
 * one in the CLI's table, and the binary takes it: a row no flag reaches would be dead. */
Test(cli, option_table_rows_are_cli_options) {
    for (size_t i = 0; amp_option_at(i); i++) {
        const AmpOption *d = amp_option_at(i);
        cr_assert(d->name || d->env, "row %zu names no door", i);
        if (!d->name) continue;
        bool found = false;
        for (size_t k = 0; k < N_OPTS && !found; k++) found = strcmp(opts[k].name, d->name) == 0;
        cr_assert(found, "options.c row '%s' is no option of tools/cli_options.h", d->name);
        cr_assert_eq(amp_option_find(d->name), d);
        if (d->env) cr_assert_eq(amp_option_find(d->env), d);
    }
}

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
        while (p[2 + n] && (p[2 + n] == '-' || (p[2 + n] >= 'a' && p[2 + n] <= 'z') || (p[2 + n] >= '0' && p[2 + n] <= '9'))) n++;
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
    cr_assert_str_eq(r.out, "ampc " AMPC_VERSION_STRING "\n");
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

/* `ampc COMMAND --help` prints that command's synopsis and exactly the options it takes
 * (ampc_option_commands), not the whole manual; every command answers it. */
Test(cli, each_command_has_its_own_help) {
    static const struct {
        const char *cmd, *synopsis, *has, *lacks;
    } cases[] = {{"run", "ampc run MODEL", "--save-state", "--top"},
                 {"bench", "ampc bench MODEL", "--iters", "--save-state"},
                 {"grad", "ampc grad MODEL", "--freeze", "--steps"},
                 {"export", "ampc export TRAIN", "--load-state", "--iters"},
                 {"calibrate", "ampc calibrate MODEL", "--loss-scale-init", "--top"},
                 {"compare", "ampc compare FP32 AMP", "--top", "--steps"},
                 {"verify", "ampc verify MODEL", "--help", "--steps"}};
    Run full = run_ampc("--help", NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Run r = run_ampc(cases[i].cmd, "--help", NULL);
        cr_assert_eq(r.code, 0, "%s --help: %s", cases[i].cmd, r.err);
        cr_expect_not_null(strstr(r.out, cases[i].synopsis), "%s --help: %s", cases[i].cmd, r.out);
        cr_expect_not_null(strstr(r.out, cases[i].has), "%s --help lacks %s", cases[i].cmd, cases[i].has);
        cr_expect_null(strstr(r.out, cases[i].lacks), "%s --help lists %s", cases[i].cmd, cases[i].lacks);
        cr_expect_lt(strlen(r.out), strlen(full.out) / 2, "%s --help is most of the manual", cases[i].cmd);
        run_free(&r);
    }
    run_free(&full);
}

/* A misplaced flag: one wording for every command, naming the commands that take it. */
Test(cli, misplaced_flag_has_one_wording) {
    static const struct {
        const char *cmd, *flag, *arg, *want;
    } cases[] = {
        {"run", "--top", "3", "option '--top' is not for 'ampc run MODEL': it is for 'ampc compare FP32 AMP'"},
        {"grad", "--steps", "3", "option '--steps' is not for 'ampc grad MODEL': it is for 'ampc run MODEL' and "
                                 "'ampc calibrate MODEL'"},
        {"compare", "--freeze", "x", "option '--freeze' is not for 'ampc compare FP32 AMP': it is for 'ampc grad MODEL'"},
        {NULL, "--iters", "3", "option '--iters' is not for 'ampc MODEL -o OUT': it is for 'ampc bench MODEL'"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Run r = cases[i].cmd ? run_ampc(cases[i].cmd, ADD_MODEL, cases[i].flag, cases[i].arg, NULL)
                             : run_ampc(ADD_MODEL, cases[i].flag, cases[i].arg, "-o", "x.onnx", NULL);
        cr_assert_eq(r.code, 2, "%s", r.err);
        assert_one_error_line(&r);
        cr_expect_not_null(strstr(r.err, cases[i].want), "want \"%s\", got %s", cases[i].want, r.err);
        run_free(&r);
    }
}

/* A mistyped command is named as a command, not taken for a model (a MODEL path with a '.'
 * or '/', or a bare word naming a file, still converts). */
Test(cli, unknown_command_is_named) {
    Run r = run_ampc("frobnicate", ADD_MODEL, NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "unknown command 'frobnicate'"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "verify, run, grad"), "%s", r.err);
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

/* Each test runs in a process of its own: the environment set here stays here. */
Test(cli, bad_amp_threads_is_usage_error) {
    /* (set empty, a variable is unset: every AMP_* variable alike) */
    static const char *const bad[] = {"two", "0", "-1", "3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("AMP_THREADS", bad[i], 1);
        Run r = run_ampc(ADD_MODEL, "--print", NULL);
        cr_assert_eq(r.code, 2, "AMP_THREADS='%s': exit %d", bad[i], r.code);
        assert_one_error_line(&r);
        cr_assert_not_null(strstr(r.err, "AMP_THREADS"), "%s", r.err);
        run_free(&r);
    }
    setenv("AMP_THREADS", "1", 1);
    Run r = run_ampc(ADD_MODEL, "--print", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
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

Test(cli, time_reports_each_phase) {
    char out[600];
    tmp_path(out, sizeof out, "add_timed.onnx");
    Run r = run_ampc("-q", "--time", ADD_MODEL, "-o", out, "--passes", "infer,cast_cleanup", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    static const char *const phases[] = {"load", "verify input", "pass infer", "pass cast_cleanup",
                                         "verify output", "save", "total"};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "ampc: time: %s ", phases[i]);
        cr_assert_not_null(strstr(r.err, want), "no '%s' line in:\n%s", want, r.err);
    }
    cr_assert_str_empty(r.out, "--time writes to stderr only");
    assert_loads(out);
    run_free(&r);
}

Test(cli, time_lines_come_before_an_error) {
    /* The phase lines wait to be printed until the run ends; one that stops on bad input
     * prints those of the phases done, then the error. */
    PbBuf g = {0}, m = {0}, attrs = {0};
    const char *in_names[1] = {"X"}, *out_names[1] = {"Y"};
    onnx_attr_int(&attrs, "to", 999); /* no such data type: the verifier refuses it */
    onnx_node(&g, "Cast", "bad_cast", 1, in_names, 1, out_names, &attrs);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    char in[600], out[600];
    tmp_path(in, sizeof in, "bad_cast.onnx");
    tmp_path(out, sizeof out, "bad_cast_out.onnx");
    write_file(in, m.data, m.len);
    pb_free(&m);
    Run r = run_ampc("--time", in, "-o", out, NULL);
    cr_assert_eq(r.code, 1, "stderr: %s", r.err);
    const char *load = strstr(r.err, "ampc: time: load ");
    const char *err = strstr(r.err, "not a valid data type");
    cr_assert_not_null(load, "no load line in:\n%s", r.err);
    cr_assert_not_null(err, "no error in:\n%s", r.err);
    cr_assert(load < err, "the load line comes first:\n%s", r.err);
    cr_assert_null(strstr(r.err, "ampc: time: total"), "no total for a run that failed:\n%s", r.err);
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
    cr_assert_eq(count_lines(r.out), 2, "a summary line and the CUDA coverage line: %s", r.out);
    cr_assert_not_null(strstr(r.out, "1 nodes"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "ai.onnx"), "%s", r.out);
    /* The CUDA backend's kernels, told without a device: an Add has one. */
    const char *cuda = amp_backend_built(AMP_BACKEND_CUDA) ? "\ncuda: 1 of 1 nodes have kernels\n" : "\ncuda: (CUDA not built)\n";
    cr_assert_not_null(strstr(r.out, cuda), "'%s' not in: %s", cuda + 1, r.out);
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

/* `ampc MODEL -o OUT --precision auto` decides for this machine and says so in its "wrote"
 * line; AMP_CPU_FEATURES (the test hook) stands for a CPU with or without bf16 dot products. */
Test(cli, precision_auto_says_what_it_chose) {
    char *dir = tu_mkdtemp();
    char *out = tu_path(dir, "out.onnx");
    bool bf16 = amp_cpu_features() & (AMP_CPU_AVX512_BF16 | AMP_CPU_AMX_BF16);
    unsetenv("AMP_CPU_FEATURES");
    Run r = run_ampc(ADD_MODEL, "-o", out, "--precision", "auto", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, bf16 ? "precision auto: bf16 (the CPU has bf16 dot products"
                                          : "precision auto: fp32, no amp pass (the CPU has no bf16"),
                       "%s", r.err);
    run_free(&r);
    setenv("AMP_CPU_FEATURES", "avx512_bf16", 1);
    r = run_ampc(ADD_MODEL, "-o", out, "--precision", "auto", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "precision auto: bf16"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "amp: bfloat16"), "%s", r.err);
    run_free(&r);
    setenv("AMP_CPU_FEATURES", "none", 1);
    r = run_ampc(ADD_MODEL, "-o", out, "--precision", "auto", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "precision auto: fp32, no amp pass (the CPU has no bf16 dot products"), "%s",
                       r.err);
    cr_assert_null(strstr(r.err, ",amp,"), "the amp pass ran: %s", r.err);
    run_free(&r);
    /* the test hook refuses what it does not know, as every variable does */
    setenv("AMP_CPU_FEATURES", "avx9", 1);
    r = run_ampc(ADD_MODEL, "-o", out, "--precision", "auto", NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "AMP_CPU_FEATURES='avx9': expected"), "%s", r.err);
    run_free(&r);
    unsetenv("AMP_CPU_FEATURES");
    tu_rmtree(dir);
    free(out);
    free(dir);
}

/* --threads on run and bench: AMP_THREADS's parser and message, the flag's name aside;
 * not a flag of the conversion. */
Test(cli, threads_flag) {
    Run r = run_ampc("bench", ADD_MODEL, "--threads", "0", NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "--threads '0': expected a whole number from 1"), "%s", r.err);
    run_free(&r);
    setenv("AMP_THREADS", "0", 1);
    r = run_ampc("bench", ADD_MODEL, NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "AMP_THREADS='0': expected a whole number from 1"), "%s", r.err);
    run_free(&r);
    unsetenv("AMP_THREADS");
    r = run_ampc("bench", ADD_MODEL, "--threads", "1", "--iters", "2", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    run_free(&r);
    r = run_ampc("run", ADD_MODEL, "--threads", "2", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    run_free(&r);
    r = run_ampc(ADD_MODEL, "--threads", "2", "-o", "/dev/null", NULL);
    cr_assert_eq(r.code, 2, "--threads is not the conversion's: %s", r.err);
    run_free(&r);
}
