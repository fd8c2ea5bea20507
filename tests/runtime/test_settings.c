/* Every AMP_* variable a session reads goes through the options table (passes/options.c,
 * runtime/amp_auto.c; issue 39): yes-or-no variables take the same spellings (AMP_CUDA_SYNC
 * took "false" for on before), the backend's and the simulator's settings are handed to
 * the backend at open, and a session opened with ignore_env reads none of them
 * (AMP_SIM_LACKS and AMP_THREADS reached such sessions before). Criterion runs each test in
 * its own process, so setenv and the process-wide knobs stay inside the test. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/backend.h"
#include "runtime/amp_auto.h"
#include "ir/front.h"
#include "tests/runtime/rt_util.h"

/* Every variable of the table unset (ctest sets AMP_BACKEND for this file's _sim runs:
 * the tests here name their backend). */
static void unset_all(void) {
    for (size_t i = 0; amp_option_at(i); i++)
        if (amp_option_at(i)->env) unsetenv(amp_option_at(i)->env);
}

TestSuite(settings, .init = unset_all);

/* The yes-or-no variables: one parser, one set of spellings, one message. */
Test(settings, yes_or_no_variables_parse_alike) {
    static const char *const vars[] = {"AMP_AUTO", "AMP_TF32", "AMP_CUDA_SYNC", "AMP_CUDA_PROFILE", "AMP_DNNL"};
    static const char *const yes[] = {"1", "true", "on", "yes"}, *const no[] = {"0", "false", "off", "no"};
    for (size_t v = 0; v < sizeof vars / sizeof *vars; v++) {
        for (int on = 0; on < 2; on++) {
            for (size_t k = 0; k < 4; k++) {
                setenv(vars[v], on ? yes[k] : no[k], 1);
                AmpAutoConfig c;
                AmpStatus st = {0};
                cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
                bool got = v == 0 ? c.enabled : v == 1 ? c.tf32 : v == 2 ? c.be.sync_each : v == 3 ? c.be.profile
                                                                                                   : !c.no_dnnl;
                cr_assert_eq(got, on, "%s=%s", vars[v], on ? yes[k] : no[k]);
                if (v == 1) cr_assert_eq(c.be.tf32, on, "the backend is handed AMP_TF32");
                amp_auto_config_free(&c);
            }
        }
        static const char *const bad[] = {"maybe", "2", "TRUE", " 1"};
        for (size_t k = 0; k < 4; k++) {
            setenv(vars[v], bad[k], 1);
            AmpAutoConfig c;
            AmpStatus st = {0};
            cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_ERR_USAGE, "%s='%s' taken", vars[v], bad[k]);
            char want[64];
            snprintf(want, sizeof want, "%s='%s': expected 1 (", vars[v], bad[k]);
            cr_assert_not_null(strstr(st.msg, want), "%s", st.msg);
        }
        unsetenv(vars[v]);
    }
}

/* AMP_BACKEND's row takes exactly the names of the backends (backend/backend.c), and
 * --backend says what it says. */
Test(settings, backend_names_are_the_backends) {
    const AmpOption *d = amp_option_find("AMP_BACKEND");
    cr_assert_not_null(d);
    cr_assert_str_eq(d->expect, AMP_BACKEND_NAMES);
    size_t n = 0;
    const AmpBackendKindInfo *kinds = amp_backend_kinds(&n);
    for (size_t i = 0; i < n; i++) {
        AmpOptions o = {0};
        AmpStatus st = {0};
        cr_assert_eq(amp_option_set(&o, d, d->env, kinds[i].name, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(amp_backend_parse(o.run.backend), (int)kinds[i].kind);
    }
    AmpOptions o = {0};
    AmpStatus st = {0};
    cr_assert_eq(amp_option_set(&o, d, d->env, "tpu", &st), AMP_ERR_USAGE);
}

/* The simulator's lists are op types, checked as the list edits' are, and reach the
 * simulator at open: the nodes it lacks run on the CPU fallback. */
Test(settings, sim_lists_reach_the_backend) {
    setenv("AMP_SIM_LACKS", "MatMul,Relu", 1);
    AmpSessionOptions o = {.backend = AMP_BACKEND_SIM};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(rt_matmul_relu(), &o, &s, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.fallback_nodes, 2, "%s", stats.fallback_ops);
    amp_session_close(s);
    setenv("AMP_SIM_LACKS", "MatMul,NoSuchOp", 1);
    cr_assert_eq(rt_open(rt_matmul_relu(), &o, &s, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "AMP_SIM_LACKS: unknown op 'NoSuchOp'"), "%s", st.msg);
}

/* ignore_env: every variable of the table set to a value it refuses, and still nothing is
 * read: no fallback, no thread count, no rewrite. Without ignore_env the same open fails. */
Test(settings, ignore_env_reads_no_variable) {
    for (size_t i = 0; amp_option_at(i); i++) {
        const AmpOption *d = amp_option_at(i);
        if (d->env && strcmp(d->env, "AMP_LOG_PATH")) setenv(d->env, "NoSuchValue!", 1); /* any folder name goes */
    }
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions plain = {.backend = AMP_BACKEND_SIM};
    cr_assert_eq(rt_open(rt_matmul_relu(), &plain, &s, &st), AMP_ERR_USAGE, "a refused variable fails a plain open");
    setenv("AMP_SIM_LACKS", "MatMul,Relu", 1);
    setenv("AMP_THREADS", "3", 1);
    AmpSessionOptions o = {.backend = AMP_BACKEND_SIM, .ignore_env = true};
    cr_assert_eq(rt_open(rt_matmul_relu(), &o, &s, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.fallback_nodes, 0, "AMP_SIM_LACKS reached an ignore_env session: %s", stats.fallback_ops);
    cr_assert_not(stats.amp_applied);
    int n = 0;
    cr_assert_not(amp_threads_requested(&n), "AMP_THREADS reached an ignore_env session: %d", n);
    cr_assert_not(amp_dnnl_set_off_asked(), "AMP_DNNL reached an ignore_env session");
    amp_session_close(s);
}

/* A session without ignore_env hands AMP_THREADS and AMP_DNNL=0 to the process's knobs. */
Test(settings, threads_and_dnnl_reach_the_knobs) {
    setenv("AMP_THREADS", "3", 1);
    setenv("AMP_DNNL", "off", 1);
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(rt_matmul_relu(), &o, &s, &st), AMP_OK, "%s", st.msg);
    int n = 0;
    cr_assert(amp_threads_requested(&n) && n == 3, "%d", n);
    cr_assert(amp_dnnl_set_off_asked());
    amp_session_close(s);
}

/* The data-parallel variables are rows of the table: read at every open into the session's
 * settings (AMP_NCCL_LIB on to the backend's), the fields replacing the first two, and a
 * library's file that does not exist (or a bare name, which dlopen would look up elsewhere)
 * refused with the table's message, in one process too. */
Test(settings, data_parallel_variables_reach_the_session) {
    char lib[] = "/tmp/ampc_settings_libXXXXXX";
    int fd = mkstemp(lib);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("AMP_DATA_PARALLEL", "mpi", 1);
    setenv("AMP_COMM_TIMEOUT", "7.5", 1);
    setenv("AMP_MPI_PLUGIN", lib, 1);
    setenv("AMP_NCCL_LIB", lib, 1);
    AmpAutoConfig c;
    AmpStatus st = {0};
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.run.data_parallel, AMP_DATA_PARALLEL_MPI);
    cr_assert_eq(c.opts.run.comm_timeout, 7.5);
    cr_assert_str_eq(c.opts.run.mpi_plugin, lib);
    cr_assert_str_eq(c.be.nccl_lib, lib);
    amp_auto_config_free(&c);
    /* the fields, when set, replace their variables, which are then not read */
    setenv("AMP_DATA_PARALLEL", "ranks", 1);
    setenv("AMP_COMM_TIMEOUT", "soon", 1);
    AmpSessionOptions o = {.data_parallel = AMP_DATA_PARALLEL_OFF, .comm_timeout = 2};
    cr_assert_eq(amp_auto_config(&o, &c, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(c.opts.run.data_parallel, AMP_DATA_PARALLEL_AUTO);
    cr_assert_eq(c.opts.run.comm_timeout, 0);
    amp_auto_config_free(&c);
    st = (AmpStatus){0};
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "AMP_DATA_PARALLEL='ranks': expected auto, mpi or off"), "%s", st.msg);
    unsetenv("AMP_DATA_PARALLEL");
    st = (AmpStatus){0};
    cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "AMP_COMM_TIMEOUT='soon': expected a number of seconds above 0"), "%s", st.msg);
    unsetenv("AMP_COMM_TIMEOUT");
    static const char *const bad[] = {"/nonexistent/libnccl.so.2", "libnccl.so.2", "/tmp"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        setenv("AMP_NCCL_LIB", bad[k], 1);
        st = (AmpStatus){0};
        cr_assert_eq(amp_auto_config(NULL, &c, &st), AMP_ERR_USAGE, "AMP_NCCL_LIB='%s' taken", bad[k]);
        char want[96];
        snprintf(want, sizeof want, "AMP_NCCL_LIB='%s': expected the path of a file that exists", bad[k]);
        cr_assert_not_null(strstr(st.msg, want), "%s", st.msg);
    }
    unlink(lib);
}

/* Every row of the options table that names a session field names one a session reads. */
Test(settings, every_field_of_the_table_is_read) {
    size_t n = 0;
    for (size_t i = 0; amp_option_at(i); i++) {
        const AmpOption *d = amp_option_at(i);
        if (!d->field) continue;
        cr_assert(amp_auto_reads_field(d->field), "%s's field %s is not read by sessions", d->env, d->field);
        cr_assert_not_null(d->env, "field %s without a variable", d->field);
        n++;
    }
    cr_assert_geq(n, 17, "only %zu rows name their field", n);
    cr_assert_not(amp_auto_reads_field("no_such_field"));
}

/* The library's messages name an option in the words of the caller's front end. */
Test(settings, options_are_said_through_the_callers_door) {
    char buf[192];
    amp_front_set(AMP_FRONT_CLI);
    cr_assert_str_eq(amp_option_say("loss-scale", "none", buf, sizeof buf), "--loss-scale none");
    cr_assert_str_eq(amp_option_say("optimizer", NULL, buf, sizeof buf), "--optimizer");
    amp_front_set(AMP_FRONT_C);
    cr_assert_str_eq(amp_option_say("loss-scale", "none", buf, sizeof buf),
                     "loss_scale = \"none\" (AmpSessionOptions; or AMP_LOSS_SCALE=none)");
    cr_assert_str_eq(amp_option_say("optimizer", NULL, buf, sizeof buf), "ort_optimizer (AmpSessionOptions)");
    cr_assert_str_eq(amp_option_say("no-fallback", NULL, buf, sizeof buf), "no_fallback (AmpSessionOptions)");
    /* Only the command has it: its flag whatever the front. */
    cr_assert_str_eq(amp_option_say("keep-fp32", "NODE", buf, sizeof buf), "--keep-fp32 NODE");
    amp_front_set(AMP_FRONT_PYTHON);
    cr_assert_str_eq(amp_option_say("precision", "bf16", buf, sizeof buf), "precision=\"bf16\" (or AMP_PRECISION=bf16)");
    cr_assert_str_eq(amp_option_say("timeout", NULL, buf, sizeof buf), "timeout_seconds");
    /* A row with no session field: its keyword, which the package and amp_convert_option_set take. */
    cr_assert_str_eq(amp_option_say("keep-fp32", "NODE", buf, sizeof buf), "keep_fp32=\"NODE\"");
    /* A buffer too small is cut, never overrun. */
    char small[8];
    cr_assert_eq(strlen(amp_option_say("loss-scale", "none", small, sizeof small)), sizeof small - 1);
    amp_front_set(AMP_FRONT_C);
}

/* A session's failure tells a C program which field to set: a node the simulator lacks
 * while no_fallback is set names the C field, not ampc's flag. */
Test(settings, a_sessions_message_names_the_field) {
    AmpSessionOptions o = AMP_SESSION_OPTIONS_INIT;
    o.backend = AMP_BACKEND_SIM;
    o.ignore_env = true;
    o.timeout_seconds = 1e-9;
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(rt_matmul_relu(), &o, &s, &st), AMP_OK, "%s", st.msg);
    float x[6] = {1, 2, 3, 4, 5, 6};
    const int64_t xd[2] = {2, 3};
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 2, xd), out = {0};
    AmpCode rc = AMP_OK;
    for (int i = 0; i < 100 && !rc; i++) {
        rc = amp_session_run(s, &in, 1, NULL, 1, &out, &st);
        amp_tensor_view_free(&out);
    }
    cr_assert_eq(rc, AMP_ERR_UNSUPPORTED, "a 1 ns limit stops a run: %s", st.msg);
    cr_assert(strstr(st.msg, "timeout_seconds (AmpSessionOptions)") && !strstr(st.msg, "--timeout"), "%s", st.msg);
    amp_session_close(s);
}

/* A refused value is named as it came: the session's field, or the variable. */
Test(settings, a_refused_value_names_its_door) {
    AmpSessionOptions o = AMP_SESSION_OPTIONS_INIT;
    o.backend = AMP_BACKEND_CPU;
    o.amp_auto = "1";
    o.precision = "fp8";
    AmpAutoConfig c;
    AmpStatus st = {0};
    cr_assert_eq(amp_auto_config(&o, &c, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "AmpSessionOptions.precision='fp8': expected"), "%s", st.msg);
    o.precision = NULL;
    setenv("AMP_PRECISION", "fp8", 1);
    st = (AmpStatus){0};
    cr_assert_eq(amp_auto_config(&o, &c, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "AMP_PRECISION='fp8': expected"), "%s", st.msg);
}
