/* Errors are never silent (issue 27): every pass, run on the bundled models with one
 * allocation made to fail, either fails with AMP_ERR_INTERNAL, "out of memory" and the
 * pass's name (the CLI's exit 4), or gives exactly the model it gives with memory to
 * spare. A pass that drops the failure and goes on leaves a different model behind while
 * reporting success: the case this test exists to catch.
 * Two kinds of failure are injected: the Nth malloc/calloc/realloc/strdup called from
 * ampc's code (this executable is linked with --wrap for them, see tests/CMakeLists.txt),
 * and the model's arena limited to a few bytes more than the pass was about to use. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"
#include "ir/ir.h"
#include "passes/passes.h"

/* ---- the allocation hook ---------------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static atomic_long calls;       /* allocations counted since the pass started */
static atomic_long fail_at = -1; /* the call that fails (0 is the first); -1: none */

static int inject(void) {
    long at = atomic_load(&fail_at);
    return at >= 0 && atomic_fetch_add(&calls, 1) == at;
}

void *__wrap_malloc(size_t n) { return inject() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return inject() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return inject() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return inject() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return inject() ? NULL : __real_strndup(s, n); }

/* Allocation `at` (counted from now) fails; LONG_MAX: none, only counted. */
static void fail_call(long at) {
    atomic_store(&calls, 0);
    atomic_store(&fail_at, at);
}

static void stop(void) { atomic_store(&fail_at, -1); }

/* ---- running a pass ------------------------------------------------------------------- */

typedef struct Case {
    const char *model;  /* under models/ */
    const char *before; /* passes run first in the same pipeline, with memory to spare */
    const char *pass;   /* the pass under test; "grad": amp_grad_model */
    bool bf16;          /* --precision bf16 (else fp16) */
    int opset;          /* --opset-upgrade-to (0: none) */
    bool grad_first;    /* made a training graph by amp_grad_model first */
    bool first_output;  /* only the first graph output kept: the rest is dead code */
} Case;

/* What to make fail once the passes before the one under test are done. */
typedef struct Inject {
    AmpModel *m;
    size_t n_before, done;
    long call;          /* >= 0: that allocation; LONG_MAX: none, only counted */
    size_t arena_extra; /* call < 0: the arena may grow this many bytes more */
    size_t arena0;      /* its size when the pass started */
} Inject;

static void arm(Inject *in) {
    in->arena0 = in->m->arena.used_bytes;
    if (in->call >= 0)
        fail_call(in->call);
    else
        in->m->arena.limit = in->m->arena.used_bytes + in->arena_extra;
}

static void after_pass(void *ctx, const char *name) {
    (void)name;
    Inject *in = ctx;
    if (++in->done == in->n_before) arm(in);
}

static const AmpGradOptions GRAD = {.loss = AMP_GRAD_LOSS_CROSS_ENTROPY, .optimizer = AMP_GRAD_OPT_ADAM};

static AmpModel *load(const Case *c) {
    char path[512];
    snprintf(path, sizeof path, "%s/../models/%s/model.onnx", AMPC_TEST_DIR, c->model);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    if (c->grad_first) cr_assert_eq(amp_grad_model(m, &GRAD, NULL, &st), AMP_OK, "%s", st.msg);
    for (size_t i = 1; c->first_output && i < m->graph->outputs.n; i++)
        m->graph->outputs.items[i].value->flags &= ~AMP_VALUE_OUTPUT;
    if (c->first_output) m->graph->outputs.n = 1;
    return m;
}

/* Runs c->before then c->pass over m (one pipeline, as ampc runs them: the passes after
 * infer see its types), with the failure of `in` armed for c->pass only. */
static AmpCode run(const Case *c, Inject *in, AmpStatus *st) {
    AmpPassOptions po = {.precision = c->bf16 ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16, .opset_upgrade_to = c->opset};
    AmpPipelineOptions o = {.pass = &po, .after_pass = after_pass, .after_pass_ctx = in};
    const AmpPass *passes[9];
    size_t n = 0;
    char list[128];
    snprintf(list, sizeof list, "%s", c->before);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        cr_assert(n < 8);
        cr_assert_not_null(passes[n++] = amp_pass_find(t), "%s", t);
    }
    in->n_before = n;
    in->done = 0;
    bool grad = strcmp(c->pass, "grad") == 0;
    if (!grad) cr_assert_not_null(passes[n++] = amp_pass_find(c->pass), "%s", c->pass);
    if (in->n_before == 0) arm(in);
    AmpCode rc = amp_run_passes(in->m, passes, n, &o, st);
    if (!rc && grad) {
        if ((rc = amp_grad_model(in->m, &GRAD, NULL, st))) amp_status_prefix(st, "grad: ");
    }
    stop();
    in->m->arena.limit = 0;
    return rc;
}

static uint8_t *save(AmpModel *m, size_t *len) {
    AmpStatus st = {0};
    uint8_t *b = NULL;
    cr_assert_eq(amp_model_save_bytes(m, &b, len, &st), AMP_OK, "%s", st.msg);
    return b;
}

/* One run with allocation `call` failing (call < 0: the arena limited to arena_extra
 * more bytes); checks the outcome against the reference. */
static void check_one(const Case *c, const uint8_t *ref, size_t ref_len, long call, size_t arena_extra,
                      const char *what) {
    Inject in = {.m = load(c), .call = call, .arena_extra = arena_extra};
    AmpStatus st = {0};
    AmpCode rc = run(c, &in, &st);
    char pass_name[64];
    snprintf(pass_name, sizeof pass_name, strcmp(c->pass, "grad") ? "pass '%s'" : "%s:", c->pass);
    if (rc) {
        cr_assert_eq(rc, AMP_ERR_INTERNAL, "%s %s, %s: code %d: %s", c->model, c->pass, what, rc, st.msg);
        cr_assert(strstr(st.msg, "out of memory"), "%s %s, %s: %s", c->model, c->pass, what, st.msg);
        cr_assert(strstr(st.msg, pass_name), "%s %s, %s: does not name the pass: %s", c->model, c->pass, what,
                  st.msg);
    } else {
        size_t len;
        uint8_t *out = save(in.m, &len);
        cr_assert(len == ref_len && memcmp(out, ref, len) == 0,
                  "%s %s, %s: the pass succeeded with a different model (an allocation failure dropped)",
                  c->model, c->pass, what);
        free(out);
    }
    amp_model_free(in.m);
}

/* Enough injection points to reach every allocation site of these small models, few
 * enough to keep the test to seconds: every call up to this many, else evenly spread. */
enum { MAX_POINTS = 160, ARENA_POINTS = 48 };

static void sweep(const Case *c) {
    Inject in = {.m = load(c), .call = LONG_MAX};
    AmpStatus st = {0};
    AmpCode rc = run(c, &in, &st);
    long n_calls = atomic_load(&calls);
    cr_assert_eq(rc, AMP_OK, "%s %s: %s", c->model, c->pass, st.msg);
    size_t arena_used = in.m->arena.used_bytes - in.arena0, ref_len;
    uint8_t *ref = save(in.m, &ref_len);
    amp_model_free(in.m);
    /* The pass must have had work to do, or the sweep proves nothing. */
    cr_assert(n_calls > 0 || arena_used > 0, "%s %s: the pass allocated nothing", c->model, c->pass);
    cr_log_info("%s %s: %ld allocations, %zu arena bytes", c->model, c->pass, n_calls, arena_used);

    long step = n_calls > MAX_POINTS ? n_calls / MAX_POINTS : 1;
    char what[64];
    for (long k = 0; k < n_calls; k += step) {
        snprintf(what, sizeof what, "allocation %ld of %ld failing", k, n_calls);
        check_one(c, ref, ref_len, k, 0, what);
    }
    for (size_t k = 0; k < ARENA_POINTS && arena_used; k++) {
        size_t extra = arena_used * k / ARENA_POINTS;
        snprintf(what, sizeof what, "arena limited to %zu of %zu more bytes", extra, arena_used);
        check_one(c, ref, ref_len, -1, extra, what);
    }
    free(ref);
}

/* The default pipeline's passes, dce and `ampc grad`, each on models that give it work
 * (the sweep checks the pass allocated): the passes before it run with memory to spare. */
#define UP "infer,opset_upgrade"
#define TO_AMP UP ",fuse_norm"
static const Case INFER[] = {{.model = "mlp_cls", .before = "", .pass = "infer"}, {.model = "hf_bert14", .before = "", .pass = "infer"}};
static const Case DCE[] = {{.model = "mlp_grads", .before = "infer", .pass = "dce", .first_output = true},
                           {.model = "resnet_cnn", .before = "infer", .pass = "dce", .grad_first = true, .first_output = true}};
static const Case UPGRADE[] = {{.model = "hf_bert14", .before = "infer", .pass = "opset_upgrade", .opset = 20}};
static const Case FUSE[] = {{.model = "hf_bert14", .before = UP, .pass = "fuse_norm", .opset = 20}, {.model = "hf_bert", .before = UP, .pass = "fuse_norm", .opset = 20}};
static const Case AMP[] = {{.model = "hf_bert", .before = TO_AMP, .pass = "amp"},          {.model = "hf_bert14", .before = TO_AMP, .pass = "amp"},
                           {.model = "resnet_cnn", .before = TO_AMP, .pass = "amp"},       {.model = "mlp_train", .before = TO_AMP, .pass = "amp"},
                           {.model = "gpt_decoder", .before = TO_AMP, .pass = "amp"},      {.model = "resnet_cnn", .before = TO_AMP, .pass = "amp", .bf16 = true},
                           {.model = "mlp_cls", .before = TO_AMP, .pass = "amp", .grad_first = true}};
static const Case SCALE[] = {{.model = "mlp_cls", .before = TO_AMP ",amp", .pass = "loss_scale", .grad_first = true},
                             {.model = "resnet_cnn", .before = TO_AMP ",amp", .pass = "loss_scale", .grad_first = true},
                             {.model = "mlp_grads", .before = TO_AMP ",amp", .pass = "loss_scale"}};
static const Case CLEANUP[] = {{.model = "hf_bert", .before = TO_AMP ",amp", .pass = "cast_cleanup"},
                               {.model = "gpt_decoder", .before = TO_AMP ",amp", .pass = "cast_cleanup"},
                               {.model = "mlp_cls", .before = TO_AMP ",amp,loss_scale", .pass = "cast_cleanup", .grad_first = true}};
static const Case GRAD_CASES[] = {{.model = "mlp_cls", .before = "", .pass = "grad"}, {.model = "resnet_cnn", .before = "", .pass = "grad"}};

#define SWEEP_ALL(cases)                                                                  \
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) sweep(&cases[i])

Test(pass_oom, infer, .timeout = 600) { SWEEP_ALL(INFER); }
Test(pass_oom, dce, .timeout = 600) { SWEEP_ALL(DCE); }
Test(pass_oom, opset_upgrade, .timeout = 600) { SWEEP_ALL(UPGRADE); }
Test(pass_oom, fuse_norm, .timeout = 600) { SWEEP_ALL(FUSE); }
Test(pass_oom, amp, .timeout = 600) { SWEEP_ALL(AMP); }
Test(pass_oom, loss_scale, .timeout = 600) { SWEEP_ALL(SCALE); }
Test(pass_oom, cast_cleanup, .timeout = 600) { SWEEP_ALL(CLEANUP); }
Test(pass_oom, grad, .timeout = 600) { SWEEP_ALL(GRAD_CASES); }
