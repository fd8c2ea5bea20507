/* AMP_AUTO at amp_session_open: with AMP_AUTO=1 the AMP pipeline rewrites the model in
 * memory and AMP_LOG_PATH receives the graph before and after; unset or 0 runs nothing and
 * writes nothing; bad AMP_PRECISION, AMP_LOSS_SCALE and list edits are usage errors naming
 * the variable (and every unknown op); session options replace the variables. Criterion
 * runs each test in its own process, so setenv stays inside the test. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "tests/ir/irtest_util.h"
#include "runtime/amp_auto.h"
#include "runtime/observe.h"
#include "tests/runtime/rt_util.h"

static char *logdir;

static void setup(void) {
    static const char *const vars[] = {"AMP_AUTO", "AMP_PRECISION", "AMP_LOG_PATH", "AMP_LOSS_SCALE",
                                       "AMP_ALLOWLIST_ADD", "AMP_ALLOWLIST_REMOVE", "AMP_INFERLIST_ADD",
                                       "AMP_INFERLIST_REMOVE", "AMP_CLEARLIST_ADD", "AMP_CLEARLIST_REMOVE",
                                       "AMP_DENYLIST_ADD", "AMP_DENYLIST_REMOVE", "AMP_OPSET_UPGRADE", "AMP_TF32",
                                       "AMP_CALIBRATION", "AMP_CPU_FEATURES", "AMP_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    char *base = tu_mkdtemp();
    cr_assert_not_null(base);
    logdir = tu_path(base, "amp_log"); /* not there yet: the session makes it */
    free(base);
}

static void teardown(void) {
    char *base = strdup(logdir);
    char *slash = strrchr(base, '/');
    *slash = '\0';
    tu_rmtree(base);
    free(base);
    free(logdir);
}

TestSuite(amp_auto, .init = setup, .fini = teardown);

static AmpCode open_mlp(const AmpSessionOptions *o, AmpSession **s, AmpStatus *st) {
    return rt_open(rt_matmul_relu(), o, s, st);
}

static bool logged(const char *name) {
    char *p = tu_path(logdir, name);
    bool ok = tu_exists(p);
    free(p);
    return ok;
}

Test(amp_auto, on_rewrites_and_logs_before_and_after) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_PRECISION", "fp16", 1); /* the default is auto: this machine's choice */
    setenv("AMP_LOG_PATH", logdir, 1);
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(open_mlp(NULL, &s, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert(stats.amp_applied);
    const char *files[] = {"before.onnx", "after.onnx", "before.txt", "after.txt", "summary.txt", "paint.txt"};
    for (size_t i = 0; i < 6; i++) cr_assert(logged(files[i]), "AMP_LOG_PATH lacks %s", files[i]);
    /* The dumps are models that load, and text that shows the graph. */
    char *p = tu_path(logdir, "after.onnx");
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(p, NULL, &m, &st), AMP_OK, "%s", st.msg);
    /* after.onnx lists the intermediate types, as `ampc -o` writes them: H is 16-bit. */
    bool h16 = false;
    for (size_t i = 0; i < m->graph->value_info.n; i++) {
        const AmpValueInfo *vi = &m->graph->value_info.items[i];
        if (strncmp(vi->value->name, "H", 1) == 0 && vi->loaded.dtype == AMP_DT_FLOAT16) h16 = true;
    }
    cr_assert(h16, "after.onnx has no float16 value_info for H (%zu entries)", m->graph->value_info.n);
    amp_model_free(m);
    free(p);
    p = tu_path(logdir, "before.txt");
    size_t len;
    char *txt = (char *)tu_read(p, &len);
    cr_assert_not_null(strstr(txt, "MatMul"), "%s", txt);
    free(txt);
    free(p);
    p = tu_path(logdir, "summary.txt");
    txt = (char *)tu_read(p, &len);
    cr_assert_not_null(strstr(txt, amp_auto_pipeline()), "%s", txt);
    cr_assert_not_null(strstr(txt, "float16"), "%s", txt);
    free(txt);
    free(p);
    /* The paint buckets: the lists in force and the nodes of each bucket. */
    p = tu_path(logdir, "paint.txt");
    txt = (char *)tu_read(p, &len);
    cr_assert_not_null(strstr(txt, "allow: MatMul"), "%s", txt);
    cr_assert_not_null(strstr(txt, "# allow (16-bit): 2 nodes"), "%s", txt);
    free(txt);
    free(p);
    /* The rewritten model still runs. */
    float x[6] = {1, 0, 0, 0, 1, 0};
    const int64_t xd[2] = {2, 3};
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 2, xd), out;
    cr_assert_eq(amp_session_run(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_float_eq(((float *)out.data)[0], 1, 1e-2);
    cr_assert_float_eq(((float *)out.data)[3], 4, 1e-2);
    amp_tensor_view_free(&out);
    amp_session_close(s);
}

Test(amp_auto, unset_or_zero_runs_nothing_and_writes_nothing) {
    const char *values[] = {NULL, "0", ""};
    for (size_t i = 0; i < 3; i++) {
        if (values[i]) setenv("AMP_AUTO", values[i], 1);
        setenv("AMP_LOG_PATH", logdir, 1);
        setenv("AMP_PRECISION", "not-a-precision", 1); /* not even read */
        AmpSession *s = NULL;
        AmpStatus st = {0};
        cr_assert_eq(open_mlp(NULL, &s, &st), AMP_OK, "%s", st.msg);
        AmpSessionStats stats;
        amp_session_stats(s, &stats);
        cr_assert_not(stats.amp_applied);
        cr_assert_not(tu_exists(logdir), "AMP_AUTO=%s wrote %s", values[i] ? values[i] : "(unset)", logdir);
        amp_session_close(s);
    }
}

static void expect_usage(const char *needle) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(open_mlp(NULL, &s, &st), AMP_ERR_USAGE, "expected a usage error about %s", needle);
    cr_assert_null(s);
    cr_assert_not_null(strstr(st.msg, needle), "the message should name %s: %s", needle, st.msg);
    cr_assert_not(tu_exists(logdir), "a failed open wrote %s", logdir);
}

Test(amp_auto, bad_precision_names_the_variable) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_LOG_PATH", logdir, 1);
    setenv("AMP_PRECISION", "fp8", 1);
    expect_usage("AMP_PRECISION");
    expect_usage("fp8");
}

Test(amp_auto, bad_auto_value) {
    setenv("AMP_AUTO", "maybe", 1);
    expect_usage("AMP_AUTO");
}

Test(amp_auto, bad_loss_scale) {
    setenv("AMP_AUTO", "1", 1);
    /* 1e39 passes float32's largest, which the scale is stored in (as --loss-scale says). */
    const char *bad[] = {"abc", "-4", "0", "inf", "12x", "1e39"};
    for (size_t i = 0; i < 6; i++) {
        setenv("AMP_LOSS_SCALE", bad[i], 1);
        expect_usage("AMP_LOSS_SCALE");
    }
}

Test(amp_auto, unknown_ops_in_lists_are_named) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_ALLOWLIST_ADD", "MatMul, NoSuchOp,AlsoNotAnOp", 1);
    expect_usage("'NoSuchOp'");
    expect_usage("'AlsoNotAnOp'");
    expect_usage("AMP_ALLOWLIST_ADD");
    unsetenv("AMP_ALLOWLIST_ADD");
    setenv("AMP_DENYLIST_REMOVE", "Foo", 1);
    expect_usage("AMP_DENYLIST_REMOVE");
}

Test(amp_auto, settings_are_parsed_for_the_passes) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_PRECISION", "bf16", 1);
    setenv("AMP_LOSS_SCALE", "128", 1);
    setenv("AMP_ALLOWLIST_ADD", "Softmax,com.microsoft:FusedGemm", 1);
    setenv("AMP_DENYLIST_REMOVE", "Exp", 1);
    setenv("AMP_INFERLIST_ADD", "Adam", 1); /* ai.onnx.preview.training, found without a domain */
    AmpAutoConfig c;
    AmpStatus st = {0};
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert(c.enabled);
    cr_assert_eq(c.opts.po.precision, AMP_DT_BFLOAT16);
    cr_assert_eq(c.opts.po.loss_scale_mode, AMP_LOSS_SCALE_STATIC);
    cr_assert_float_eq(c.opts.po.loss_scale, 128, 0);
    cr_assert_eq(c.opts.n_edits, 4);
    cr_assert_eq(c.opts.edits[0].op, AMP_OP_Softmax);
    cr_assert_eq(c.opts.edits[0].list, AMP_CLASS_ALLOW);
    cr_assert_not(c.opts.edits[0].remove);
    cr_assert_eq(c.opts.edits[1].op, amp_op_lookup("com.microsoft", "FusedGemm"));
    cr_assert_eq(c.opts.edits[2].op, AMP_OP_Adam);
    cr_assert_eq(c.opts.edits[2].list, AMP_CLASS_INFER);
    cr_assert_eq(c.opts.edits[3].op, AMP_OP_Exp);
    cr_assert_eq(c.opts.edits[3].list, AMP_CLASS_DENY);
    cr_assert(c.opts.edits[3].remove, "removals come after additions");
    amp_auto_config_free(&c);

    setenv("AMP_LOSS_SCALE", "dynamic", 1);
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.po.loss_scale_mode, AMP_LOSS_SCALE_DYNAMIC);
    amp_auto_config_free(&c);
}

/* AMP_TF32 is yes or no as AMP_AUTO is: "false" turned TF32 on before (any value but "0"
 * did), and a typo went unnoticed. Read with AMP_AUTO unset too, as AMP_BACKEND is. */
Test(amp_auto, tf32_is_yes_or_no) {
    AmpAutoConfig c;
    AmpStatus st = {0};
    const char *const on[] = {"1", "yes", "true"}, *const off[] = {"0", "false", "off", ""};
    for (size_t i = 0; i < 3; i++) {
        setenv("AMP_TF32", on[i], 1);
        cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
        cr_assert(c.tf32, "AMP_TF32=%s", on[i]);
        amp_auto_config_free(&c);
    }
    for (size_t i = 0; i < 4; i++) {
        setenv("AMP_TF32", off[i], 1);
        cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
        cr_assert_not(c.tf32, "AMP_TF32=%s", off[i]);
        amp_auto_config_free(&c);
    }
    AmpSessionOptions opt = {.tf32 = true};
    cr_assert_eq(amp_auto_config(&opt, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert(c.tf32, "the option turns it on whatever the variable");
    amp_auto_config_free(&c);
    setenv("AMP_TF32", "maybe", 1);
    expect_usage("AMP_TF32='maybe'");
}

Test(amp_auto, opset_upgrade_setting) {
    setenv("AMP_AUTO", "1", 1);
    AmpAutoConfig c;
    AmpStatus st = {0};
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.po.opset_upgrade, AMP_OPSET_UPGRADE_AUTO, "auto by default");
    amp_auto_config_free(&c);
    setenv("AMP_OPSET_UPGRADE", "never", 1);
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.po.opset_upgrade, AMP_OPSET_UPGRADE_NEVER);
    amp_auto_config_free(&c);
    setenv("AMP_OPSET_UPGRADE", "17", 1); /* a number, as --opset-upgrade takes */
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.po.opset_upgrade, AMP_OPSET_UPGRADE_AUTO);
    cr_assert_eq(c.opts.po.opset_upgrade_to, 17);
    amp_auto_config_free(&c);
    setenv("AMP_OPSET_UPGRADE", "sometimes", 1);
    expect_usage("AMP_OPSET_UPGRADE");
    setenv("AMP_OPSET_UPGRADE", "23", 1);
    expect_usage("AMP_OPSET_UPGRADE");
}

Test(amp_auto, options_replace_the_environment) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_LOG_PATH", logdir, 1);
    setenv("AMP_PRECISION", "fp8", 1);
    AmpSessionOptions o = {.amp_auto = "0"};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_close(s);
    cr_assert_not(tu_exists(logdir));
    /* ignore_env: nothing is read at all. */
    AmpSessionOptions quiet = {.ignore_env = true};
    cr_assert_eq(open_mlp(&quiet, &s, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_not(stats.amp_applied);
    amp_session_close(s);
    /* An option's value is checked like the variable's. */
    AmpSessionOptions on = {.amp_auto = "1", .precision = "bf16", .ignore_env = true, .log_path = logdir};
    cr_assert_eq(open_mlp(&on, &s, &st), AMP_OK, "%s", st.msg);
    cr_assert(logged("after.onnx"));
    amp_session_close(s);
    AmpSessionOptions bad = {.amp_auto = "1", .precision = "fp64", .ignore_env = true};
    cr_assert_eq(open_mlp(&bad, &s, &st), AMP_ERR_USAGE);
    /* named as it came: the field */
    cr_assert_not_null(strstr(st.msg, "AmpSessionOptions.precision='fp64'"), "%s", st.msg);
}

Test(amp_auto, unwritable_log_path_is_an_error) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_LOG_PATH", "/nonexistent/deeper/log", 1);
    expect_usage("AMP_LOG_PATH");
}

/* A training model opened with AMP_AUTO=1 is loss-scaled too (the default pipeline): the
 * scale is state, and AMP_LOSS_SCALE picks the mode. */
Test(amp_auto, training_models_get_loss_scaling) {
    static const char *const modes[] = {NULL, "dynamic", "512", "none"};
    for (size_t k = 0; k < 4; k++) {
        setenv("AMP_AUTO", "1", 1);
        setenv("AMP_PRECISION", "fp16", 1); /* fp16's default scaling is dynamic (auto may pick bf16: none) */
        if (modes[k]) setenv("AMP_LOSS_SCALE", modes[k], 1);
        AmpSession *s = NULL;
        AmpStatus st = {0};
        cr_assert_eq(amp_session_open(AMPC_TEST_DIR "/../models/mlp_train/model.onnx", NULL, &s, &st), AMP_OK, "%s",
                     st.msg);
        AmpTensorView v;
        bool found = rt_state_find(s, "amp_loss_scale", &v);
        if (k < 2) {
            cr_assert(found, "mode %s: the scale is state", modes[k] ? modes[k] : "default");
            cr_assert_eq(*(const float *)v.data, 65536.0f);
        } else {
            cr_assert_not(found, "mode %s: no scale in the state", modes[k]);
        }
        amp_session_close(s);
    }
}

/* ---- precision auto (the default of AMP_AUTO sessions) and the thread knob ---------- */

/* Whether /proc/cpuinfo lists flag `f` (Linux's word for the CPU feature). */
static bool cpuinfo_has(const char *f) {
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) return false;
    char line[16384];
    bool yes = false;
    size_t n = strlen(f);
    while (!yes && fgets(line, sizeof line, fp)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *p = strstr(line, f); p && !yes; p = strstr(p + 1, f))
            yes = (p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || !p[n]);
        break;
    }
    fclose(fp);
    return yes;
}

/* The one decision, as a function of the device class and the CPU's features. */
Test(amp_auto, precision_auto_decides_by_device_and_cpu_features) {
    const char *why = NULL;
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_GPU, 0, &why), AMP_DT_FLOAT16);
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_GPU, AMP_CPU_AVX512_BF16, &why), AMP_DT_FLOAT16);
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_CPU, AMP_CPU_AVX512_BF16, &why), AMP_DT_BFLOAT16);
    cr_assert_not_null(strstr(why, "AVX512-BF16"), "%s", why);
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_CPU, AMP_CPU_AMX_BF16, &why), AMP_DT_BFLOAT16);
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_CPU, 0, &why), AMP_DT_FLOAT);
    cr_assert_not_null(strstr(why, "stays float32"), "%s", why);
    /* fp16 arithmetic alone gives the CPU kernels nothing: still float32 */
    cr_assert_eq(amp_precision_auto(AMP_DEVICE_CPU, AMP_CPU_AVX512_FP16 | AMP_CPU_AMX_FP16, &why), AMP_DT_FLOAT);
    /* This machine: cpuid agrees with the kernel's flags. */
    unsigned f = amp_cpu_features();
    cr_assert_eq(!!(f & AMP_CPU_AVX512_BF16), cpuinfo_has("avx512_bf16"), "features %#x", f);
    cr_assert_eq(!!(f & AMP_CPU_AMX_BF16), cpuinfo_has("amx_bf16"), "features %#x", f);
    unsigned parsed = 99;
    cr_assert(amp_cpu_features_parse("none", &parsed) && parsed == 0);
    cr_assert(amp_cpu_features_parse("amx_bf16,avx512_bf16", &parsed) &&
              parsed == (AMP_CPU_AMX_BF16 | AMP_CPU_AVX512_BF16));
    cr_assert(!amp_cpu_features_parse("avx512_bf16,", &parsed) && !amp_cpu_features_parse("sse", &parsed) &&
              !amp_cpu_features_parse("", &parsed));
}

/* AMP_AUTO=1 with no AMP_PRECISION on the CPU backend: this machine's choice, said in the stats. */
Test(amp_auto, sessions_default_to_auto) {
    setenv("AMP_AUTO", "1", 1);
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    bool bf16 = amp_cpu_features() & (AMP_CPU_AVX512_BF16 | AMP_CPU_AMX_BF16);
    cr_assert_str_eq(stats.amp_precision, bf16 ? "bf16" : "fp32");
    cr_assert_eq(stats.amp_applied, bf16);
    cr_assert(stats.amp_precision_why[0], "auto says why");
    amp_session_close(s);
    /* ... and "auto" is a value of AMP_PRECISION and of the field too */
    setenv("AMP_PRECISION", "auto", 1);
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.amp_precision, bf16 ? "bf16" : "fp32");
    amp_session_close(s);
    /* an explicit type wins, and no reason is given */
    o.precision = "fp16";
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.amp_precision, "fp16");
    cr_assert_str_eq(stats.amp_precision_why, "");
    cr_assert(stats.amp_applied);
    amp_session_close(s);
}

/* The test hook AMP_CPU_FEATURES stands for the CPU: with bf16 dot products bf16; with none,
 * no rewrite at all, and the stats and the log's summary say why. */
Test(amp_auto, auto_on_a_cpu_without_bf16_stays_fp32) {
    setenv("AMP_AUTO", "1", 1);
    setenv("AMP_CPU_FEATURES", "avx512_bf16", 1);
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionStats stats;
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.amp_precision, "bf16");
    cr_assert(stats.amp_applied);
    amp_session_close(s);

    setenv("AMP_CPU_FEATURES", "none", 1);
    setenv("AMP_LOG_PATH", logdir, 1);
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.amp_precision, "fp32");
    cr_assert(!stats.amp_applied);
    cr_assert_not_null(strstr(stats.amp_precision_why, "no bf16 dot products"), "%s", stats.amp_precision_why);
    /* the model is as it was: float32 throughout, no Cast */
    const AmpModel *m = amp_session_model(s);
    for (const AmpNode *n = m->graph->first; n; n = n->next) cr_assert_neq(n->op, AMP_OP_Cast);
    amp_session_close(s);
    char *p = tu_path(logdir, "summary.txt");
    size_t len;
    char *txt = (char *)tu_read(p, &len);
    cr_assert_not_null(txt);
    cr_assert_not_null(strstr(txt, "precision: fp32 (auto: the CPU has no bf16"), "%s", txt);
    free(txt);
    free(p);
    cr_assert(!logged("after.onnx"), "nothing rewritten, nothing dumped");

    /* the GPU-class backends (the simulator stands for one) keep fp16, whatever the CPU */
    o.backend = AMP_BACKEND_SIM;
    unsetenv("AMP_LOG_PATH");
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.amp_precision, "fp16");
    amp_session_close(s);

    /* a bad value is refused as every variable of the table is */
    setenv("AMP_CPU_FEATURES", "sse9", 1);
    o.backend = AMP_BACKEND_CPU;
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "AMP_CPU_FEATURES='sse9': expected"), "%s", st.msg);
}

/* AMP_THREADS: one parser and one message, for sessions as for ampc; ignore_env ignores
 * it; the threads option replaces it. */
Test(amp_auto, threads_one_knob) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    setenv("AMP_THREADS", "two", 1);
    cr_assert_eq(open_mlp(NULL, &s, &st), AMP_ERR_USAGE);
    cr_assert_str_eq(st.msg, "AMP_THREADS='two': expected a whole number from 1");
    AmpSessionOptions o = {.ignore_env = true};
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_close(s);
    o = (AmpSessionOptions){.threads = 3};
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_OK, "%s", st.msg); /* the option wins over the bad variable */
    int n = 0;
    cr_assert(amp_threads_requested(&n) && n == 3, "%d", n);
    cr_assert_eq(amp_threads(), 3);
    amp_session_close(s);
    o.threads = -2;
    cr_assert_eq(open_mlp(&o, &s, &st), AMP_ERR_USAGE);
    /* The variable reaches the knob through a session's open, not by itself. */
    amp_threads_set(0);
    setenv("AMP_THREADS", "1", 1);
    cr_assert_eq(amp_threads(), amp_cpus_available() > 8 ? 8 : amp_cpus_available(), "ir reads no variable");
    cr_assert_eq(open_mlp(NULL, &s, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_threads(), 1);
    amp_session_close(s);
    unsetenv("AMP_THREADS");
}
