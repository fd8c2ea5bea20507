/* Every AMP_* variable a session reads goes through the options table (passes/options.c,
 * runtime/amp_auto.c; issue 39): yes-or-no variables take the same spellings (AMP_CUDA_SYNC
 * took "false" for on before), the backend's and the simulator's settings are handed to
 * the backend at open, and a session opened with ignore_env reads none of them
 * (AMP_SIM_LACKS and AMP_THREADS reached such sessions before). Criterion runs each test in
 * its own process, so setenv and the process-wide knobs stay inside the test. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "runtime/amp_auto.h"
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
