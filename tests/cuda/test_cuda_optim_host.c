/* The host side of the CUDA optimizers (kernels/cuda/optim.c), on the CPU (no GPU needed):
 * the launch plan (tables within the kernel-parameter limit, at most
 * AMP_CUDA_OPT_MAX_TENSORS tensors each, in order, empty tensors left out) and the
 * kernel's mapping of a launch's chunks to (tensor, element range), replayed here over
 * the plan, which must cover every element of every tensor exactly once; the float32 fast
 * path's flag; the supports predicate; the table entries (the CPU's prepare); and the
 * node-level checks that fail before any launch. The numerics against the CPU kernels:
 * tests/cuda/test_cuda_optim.c and the optim table of test_cuda_ops.c (GPU only). */
#include <criterion/criterion.h>
#include <string.h>

#include "kernels/cuda/optim.h"
#include "tests/kernels/optim_test_util.h"

enum { F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, B = AMP_DT_BFLOAT16, D = AMP_DT_DOUBLE, I32 = AMP_DT_INT32,
       I64 = AMP_DT_INT64 };
#define CH AMP_CUDA_OPT_CHUNK

Test(cuda_optim_host, a_launch_fits_the_parameter_limit) {
    cr_assert_leq(sizeof(AmpCudaOptNode) + sizeof(AmpCudaOptTable), AMP_CUDA_OPT_PARAM_LIMIT);
    cr_assert_geq(AMP_CUDA_OPT_MAX_TENSORS, 32, "a launch takes a useful number of tensors");
}

/* n tensors of sizes[i % ns] elements (fake, distinct pointers), dtypes all float32 but
 * for tensor `other`, whose G is float16. */
static AmpCudaOptTensor *tensors(int n, const int64_t *sizes, int ns, int n_state, int other) {
    AmpCudaOptTensor *ts = calloc((size_t)n, sizeof *ts);
    for (int i = 0; i < n; i++) {
        ts[i].nelem = sizes[i % ns];
        for (int r = 0; r < 2 + n_state; r++) {
            ts[i].in[r] = (const void *)(uintptr_t)(0x10000 * (i + 1) + 0x100 * r);
            ts[i].dt[r] = i == other && r == 1 ? H : F;
        }
        for (int r = 0; r < 1 + n_state; r++) ts[i].out[r] = (void *)(uintptr_t)(0x10000 * (i + 1) + 0x1000 + 0x100 * r);
    }
    return ts;
}

/* Plans ts and replays the kernel's chunk walk; checks every element of every non-empty
 * tensor is visited exactly once, in tables as the plan promises. Returns the launches. */
static int plan_and_cover(const AmpCudaOptTensor *ts, int n, int other) {
    int64_t *seen = calloc((size_t)n, sizeof *seen); /* elements visited per tensor */
    int next = 0, launches = 0, last = -1, nonempty = 0;
    AmpCudaOptTable t;
    for (int i = 0; i < n; i++) nonempty += ts[i].nelem > 0;
    while (amp_cuda_opt_plan(ts, n, &next, &t) > 0) {
        launches++;
        cr_assert_leq(t.n, AMP_CUDA_OPT_MAX_TENSORS);
        int64_t prev = 0;
        bool has_other = false;
        for (int j = 0; j < t.n; j++) {
            /* which tensor of ts this is: by its X pointer, after the last one planned */
            int i = (int)(((uintptr_t)t.in[0][j] >> 16) - 1);
            cr_assert_gt(i, last, "tensors in order, each once");
            last = i;
            cr_assert_gt(ts[i].nelem, 0, "an empty tensor was planned");
            cr_assert_eq(t.nelem[j], ts[i].nelem);
            cr_assert_eq(t.chunk_end[j] - prev, (ts[i].nelem + CH - 1) / CH);
            prev = t.chunk_end[j];
            for (int r = 0; r < AMP_CUDA_OPT_IN; r++) cr_assert_eq(t.in[r][j], ts[i].in[r]);
            for (int r = 0; r < AMP_CUDA_OPT_OUT; r++) cr_assert_eq(t.out[r][j], ts[i].out[r]);
            cr_assert_eq(t.dt[1][j], ts[i].dt[1]);
            has_other = has_other || i == other;
        }
        cr_assert_eq(t.chunks, prev);
        cr_assert_eq(t.all_f32, !has_other, "the float32 flag of a launch %s tensor %d", has_other ? "with" : "without",
                     other);
        /* the kernel's walk: chunk c -> tensor amp_cuda_opt_find, range [b, e) */
        for (int64_t c = 0; c < t.chunks; c++) {
            int j = amp_cuda_opt_find(&t, c);
            cr_assert(j >= 0 && j < t.n);
            int64_t b = (c - (j ? t.chunk_end[j - 1] : 0)) * CH;
            int64_t e = b + CH < t.nelem[j] ? b + CH : t.nelem[j];
            int i = (int)(((uintptr_t)t.in[0][j] >> 16) - 1);
            cr_assert_eq(b, seen[i], "tensor %d: chunk at %lld, expected %lld", i, (long long)b, (long long)seen[i]);
            cr_assert_gt(e, b);
            seen[i] = e;
        }
    }
    cr_assert_eq(next, n, "the plan went through every tensor");
    for (int i = 0; i < n; i++) cr_assert_eq(seen[i], ts[i].nelem > 0 ? ts[i].nelem : 0, "tensor %d's elements", i);
    cr_assert_eq(launches, (nonempty + AMP_CUDA_OPT_MAX_TENSORS - 1) / AMP_CUDA_OPT_MAX_TENSORS);
    free(seen);
    return launches;
}

Test(cuda_optim_host, plan_covers_every_element_once) {
    const int64_t sizes[] = {1, 7, 0, CH - 1, CH, CH + 1, 2145, 3 * CH + 7, 0, 100003};
    int ns = (int)(sizeof sizes / sizeof sizes[0]);
    AmpCudaOptTensor *ts = tensors(130, sizes, ns, 2, 70);
    cr_expect_eq(plan_and_cover(ts, 130, 70), 3, "104 non-empty tensors: three launches");
    free(ts);
    ts = tensors(1, sizes + 9, 1, 1, -1);
    cr_expect_eq(plan_and_cover(ts, 1, -1), 1);
    free(ts);
    /* exactly one table's worth, then one more */
    ts = tensors(AMP_CUDA_OPT_MAX_TENSORS + 1, sizes, 1, 1, AMP_CUDA_OPT_MAX_TENSORS);
    cr_expect_eq(plan_and_cover(ts, AMP_CUDA_OPT_MAX_TENSORS, -1), 1);
    cr_expect_eq(plan_and_cover(ts, AMP_CUDA_OPT_MAX_TENSORS + 1, AMP_CUDA_OPT_MAX_TENSORS), 2);
    free(ts);
}

Test(cuda_optim_host, plan_of_empty_tensors_launches_nothing) {
    const int64_t zero[1] = {0};
    AmpCudaOptTensor *ts = tensors(100, zero, 1, 2, -1);
    AmpCudaOptTable t;
    int next = 0;
    cr_expect_eq(amp_cuda_opt_plan(ts, 100, &next, &t), 0);
    cr_expect_eq(next, 100);
    /* a full table followed only by empty tensors: the next call plans nothing */
    const int64_t some[2] = {5, 0};
    free(ts);
    ts = tensors(2 * AMP_CUDA_OPT_MAX_TENSORS, some, 2, 1, -1);
    next = 0;
    cr_expect_eq(amp_cuda_opt_plan(ts, 2 * AMP_CUDA_OPT_MAX_TENSORS, &next, &t), AMP_CUDA_OPT_MAX_TENSORS);
    cr_expect_eq(amp_cuda_opt_plan(ts, 2 * AMP_CUDA_OPT_MAX_TENSORS, &next, &t), 0);
    free(ts);
}

/* Momentum's absent second state keeps the float32 fast path. */
Test(cuda_optim_host, fast_path_flag_ignores_absent_state) {
    const int64_t n[1] = {10};
    AmpCudaOptTensor *ts = tensors(3, n, 1, 1, -1);
    for (int i = 0; i < 3; i++) ts[i].dt[3] = 0;
    AmpCudaOptTable t;
    int next = 0;
    cr_assert_eq(amp_cuda_opt_plan(ts, 3, &next, &t), 3);
    cr_expect(t.all_f32);
    ts[1].dt[2] = D;
    next = 0;
    amp_cuda_opt_plan(ts, 3, &next, &t);
    cr_expect_not(t.all_f32, "a double state");
    free(ts);
}

/* ---- the supports predicate and the table ---------------------------------------------- */

static bool supports(const char *op, int n_tensors, int n_out, int r_dt, int t_dt, int x_dt, int absent) {
    AmpModel *m = amp_model_new();
    int groups = !strcmp(op, "Adam") ? 4 : 3, n_in = 2 + groups * n_tensors;
    AmpNode *n = amp_node_new(m->graph, "ai.onnx.preview.training", op, "opt", n_in, n_out);
    cr_assert_not_null(n);
    int dts[64];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        n->inputs[i] = i == absent ? NULL : amp_graph_value(m->graph, name);
        dts[i] = i == 0 ? r_dt : i == 1 ? t_dt : i == 2 ? x_dt : F;
    }
    bool r = amp_cuda_supports_optimizer(n, 1, dts);
    amp_model_free(m);
    return r;
}

Test(cuda_optim_host, supports_what_the_kernel_takes) {
    cr_expect(supports("Adam", 2, 6, F, I64, F, -1));
    cr_expect(supports("Adam", 2, 2, F, I32, H, -1), "fewer outputs, int32 T, a float16 X");
    cr_expect(supports("Momentum", 3, 6, H, I64, B, -1));
    cr_expect(supports("Adagrad", 1, 2, D, I64, D, -1));
    cr_expect_not(supports("Adam", 2, 7, F, I64, F, -1), "more outputs than the op has");
    cr_expect_not(supports("Adam", 2, 6, I64, I64, F, -1), "an integer R");
    cr_expect_not(supports("Adam", 2, 6, F, F, F, -1), "a float T");
    cr_expect_not(supports("Adam", 2, 6, F, AMP_DT_INT8, F, -1), "an int8 T: the CPU's");
    cr_expect_not(supports("Momentum", 1, 2, F, I64, I32, -1), "an integer X");
    cr_expect_not(supports("Adagrad", 2, 4, F, I64, F, 5), "an absent gradient");
    cr_expect_not(supports("Adam", 2, 6, F, I64, AMP_DT_UNDEFINED, -1), "an unknown type");
}

Test(cuda_optim_host, table_entries_use_the_cpu_prepare) {
    const AmpOpId ops[3] = {AMP_OP_Adam, AMP_OP_Momentum, AMP_OP_Adagrad};
    const AmpKernelFn fns[3] = {amp_cuda_adam, amp_cuda_momentum, amp_cuda_adagrad};
    for (int i = 0; i < 3; i++) {
        const AmpCudaOp *op = &amp_cuda_ops[ops[i]];
        cr_expect_eq(op->fn, fns[i]);
        cr_expect_eq(op->prepare, amp_optimizer_prepare);
        cr_expect_eq(op->supports, amp_cuda_supports_optimizer);
        cr_expect(amp_kernel_takes_gate(ops[i]), "the executor folds gates into it");
    }
}

/* ---- node-level checks that fail before a launch (host buffers stand in) ---------------- */

static AmpCode run_cuda(OtCase *c, const AmpBuf *gate, AmpStatus *st) {
    AmpCudaCtx dev = {0};
    amp_status_clear(st);
    AmpKernelCtx k = {.node = c->n, .opset = 1, .n_in = c->n_in, .in = c->inp, .n_out = c->n_out, .out = c->out,
                      .attrs = c->attrs, .gate = gate, .dev = &dev, .st = st};
    return amp_cuda_ops[c->n->op].fn(&k);
}

Test(cuda_optim_host, node_checks_before_any_launch) {
    const int64_t sizes[2] = {0, 0}; /* nothing to launch when the checks pass */
    const int dts[2][4] = {{F, F, F, F}, {H, H, F, F}};
    AmpStatus st;
    OtCase *c = ot_new("Adam", NULL, 2, sizes, dts, -1, 0.1, 1, 7);
    cr_expect_eq(run_cuda(c, NULL, &st), AMP_OK, "%s", st.msg);
    uint8_t on = 1;
    AmpBuf gate = {.dtype = AMP_DT_BOOL, .nelem = 1, .data = &on};
    cr_expect_eq(run_cuda(c, &gate, &st), AMP_OK, "%s", st.msg);
    gate.dtype = AMP_DT_UINT8;
    cr_expect_eq(run_cuda(c, &gate, &st), AMP_ERR_INPUT, "a gate of another type");
    c->in[3].dims[0] = 1, c->in[3].nelem = 1; /* X of tensor 1 unlike its gradient */
    cr_expect_eq(run_cuda(c, NULL, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "same shape"), "%s", st.msg);
    c->in[3].dims[0] = 0, c->in[3].nelem = 0;
    int8_t t8 = 1;
    AmpBuf keep = c->in[1];
    c->in[1] = (AmpBuf){.dtype = AMP_DT_INT8, .nelem = 1, .data = &t8};
    cr_expect_eq(run_cuda(c, NULL, &st), AMP_ERR_UNSUPPORTED, "an int8 T falls back to the CPU");
    c->in[1] = keep;
    c->in[0].dtype = AMP_DT_INT64;
    cr_expect_eq(run_cuda(c, NULL, &st), AMP_ERR_INPUT, "an integer R");
    c->in[0].dtype = F;
    c->n_in = 9; /* not R, T and groups of four */
    cr_expect_eq(run_cuda(c, NULL, &st), AMP_ERR_INPUT);
    c->n_in = 10;
    ot_free(c);
}
