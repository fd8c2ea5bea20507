/* The CUDA optimizers (kernels/cuda/optim.c, optim.cu) against the CPU kernels, called
 * directly (so the fused update gate can be given): Adam, Momentum (standard, Nesterov)
 * and Adagrad over 130 tensors of odd sizes (empty, scalars, one element, around the
 * chunk size, ~100k; three launches, the first all float32, the others of mixed float32,
 * float16, bfloat16 and double tensors), some outputs not listed, for T = 0, 1, 2 with
 * each step's CPU outputs fed back; R as float32 or bfloat16, T as int64 or int32. Every
 * output within one unit in the last place of the CPU's (they compute the same double
 * arithmetic: equal in practice). The gate, a bool on the device: false gives the
 * ungated bytes; true leaves every output a bit copy of the input it replaces (a NaN
 * gradient included). Skips without a GPU. */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <string.h>

#include "kernels/cuda/convert.h"
#include "kernels/cuda/optim.h"
#include "tests/kernels/optim_test_util.h"

enum { F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, B = AMP_DT_BFLOAT16, D = AMP_DT_DOUBLE, NT = 130 };

static void need_gpu(void) {
    if (!amp_cuda_device_available()) cr_skip_test("no CUDA device");
}

/* A device copy of c's buffers: inputs uploaded, outputs allocated (where listed). */
typedef struct Dev {
    AmpBuf in[2 + 4 * OT_MAX], out[3 * OT_MAX];
    const AmpBuf *inp[2 + 4 * OT_MAX];
    cudaStream_t stream;
} Dev;

static Dev *dev_new(const OtCase *c) {
    Dev *d = calloc(1, sizeof *d);
    cr_assert_eq(cudaStreamCreate(&d->stream), cudaSuccess);
    for (int i = 0; i < c->n_in; i++) {
        d->in[i] = c->in[i];
        cr_assert_eq(cudaMalloc(&d->in[i].data, ot_bytes(&c->in[i]) + 8), cudaSuccess);
        d->inp[i] = &d->in[i];
    }
    for (int o = 0; o < c->n_out; o++) {
        d->out[o] = c->out[o];
        cr_assert_eq(cudaMalloc(&d->out[o].data, ot_bytes(&c->out[o]) + 8), cudaSuccess);
    }
    return d;
}

static void dev_upload(Dev *d, const OtCase *c) {
    for (int i = 0; i < c->n_in; i++)
        cr_assert_eq(cudaMemcpy(d->in[i].data, c->in[i].data, ot_bytes(&c->in[i]), cudaMemcpyHostToDevice), cudaSuccess);
}

static void dev_free(Dev *d, const OtCase *c) {
    for (int i = 0; i < c->n_in; i++) cudaFree(d->in[i].data);
    for (int o = 0; o < c->n_out; o++) cudaFree(d->out[o].data);
    cudaStreamDestroy(d->stream);
    free(d);
}

/* Runs the CUDA kernel of c's op on the device buffers (gate: a device bool or NULL),
 * outputs poisoned first; waits, then copies output o into host[o]. */
static void run_gpu(const OtCase *c, Dev *d, const uint8_t *gate, void **host) {
    AmpCudaCtx dev = {.stream = d->stream};
    AmpBuf g = {.dtype = AMP_DT_BOOL, .nelem = 1, .data = (void *)gate};
    AmpStatus st = {0};
    for (int o = 0; o < c->n_out; o++) cudaMemset(d->out[o].data, 0xa5, ot_bytes(&c->out[o]));
    AmpKernelCtx k = {.node = c->n, .opset = 1, .n_in = c->n_in, .in = d->inp, .n_out = c->n_out, .out = d->out,
                      .attrs = c->attrs, .gate = gate ? &g : NULL, .dev = &dev, .st = &st};
    cr_assert_eq(amp_cuda_ops[c->n->op].fn(&k), AMP_OK, "%s", st.msg);
    cr_assert_eq(cudaStreamSynchronize(d->stream), cudaSuccess);
    for (int o = 0; o < c->n_out; o++)
        cr_assert_eq(cudaMemcpy(host[o], d->out[o].data, ot_bytes(&c->out[o]), cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Ordered bits of element i (equal floats, equal keys; neighbours differ by one). */
static int64_t key(int dt, const void *p, uint64_t i) {
    int64_t v;
    if (dt == D) memcpy(&v, (const char *)p + 8 * i, 8);
    else if (dt == F) {
        int32_t w;
        memcpy(&w, (const char *)p + 4 * i, 4);
        v = w;
    } else {
        int16_t w;
        memcpy(&w, (const char *)p + 2 * i, 2);
        v = w;
    }
    int64_t sign = dt == D ? INT64_MIN : dt == F ? INT32_MIN : INT16_MIN;
    return v < 0 ? sign - v : v;
}

/* got (the GPU's output o) within one ulp of the CPU's; NaN where the CPU has NaN. */
static void expect_close(const OtCase *c, int o, const void *got, const char *what) {
    const AmpBuf *ref = &c->out[o];
    AmpBuf g = *ref;
    g.data = (void *)got;
    int bad = 0;
    for (uint64_t i = 0; i < ref->nelem; i++) {
        double r = ot_get(ref, i), x = ot_get(&g, i);
        int64_t a = key(ref->dtype, ref->data, i), b = key(ref->dtype, got, i);
        uint64_t ulps = a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a; /* no overflow */
        bool ok = isnan(r) ? isnan(x) : !isnan(x) && ulps <= 1;
        if (!ok && bad++ < 3)
            cr_expect_fail("%s: output %d (%s) element %llu: %.17g, CPU %.17g", what, o, amp_dtype_name(ref->dtype),
                           (unsigned long long)i, x, r);
    }
}

/* 130 tensors: sizes cycling through odd ones; the first 60 all float32, then mixed. */
static OtCase *make(const char *op, const char *mode, int n_out, int64_t t) {
    static const int64_t cyc[10] = {1, 7, 0, AMP_CUDA_OPT_CHUNK - 1, AMP_CUDA_OPT_CHUNK, AMP_CUDA_OPT_CHUNK + 1, 2145,
                                    -1, 3 * AMP_CUDA_OPT_CHUNK + 7, 100003};
    static const int mixed[4][4] = {{H, H, F, F}, {B, B, B, B}, {D, D, D, D}, {F, B, H, D}};
    int64_t sizes[NT];
    int dts[NT][4];
    for (int i = 0; i < NT; i++) {
        sizes[i] = cyc[i % 10];
        for (int r = 0; r < 4; r++) dts[i][r] = i < 60 ? F : mixed[i % 4][r];
    }
    return ot_new(op, mode, NT, sizes, (const int (*)[4])dts, n_out, 0.01, t, 0xfeedu + (uint64_t)t);
}

static const char *const ops[4][2] = {{"Adam", NULL}, {"Momentum", "standard"}, {"Momentum", "nesterov"},
                                      {"Adagrad", NULL}};

static void **host_outs(const OtCase *c) {
    void **h = calloc((size_t)c->n_out, sizeof *h);
    for (int o = 0; o < c->n_out; o++) h[o] = malloc(ot_bytes(&c->out[o]) + 8);
    return h;
}

static void free_outs(const OtCase *c, void **h) {
    for (int o = 0; o < c->n_out; o++) free(h[o]);
    free(h);
}

/* Three steps (T = 0, 1, 2), each against the CPU, the CPU's outputs fed back. */
static void steps_against_cpu(const char *op, const char *mode, int n_out, int r_dt, int t_dt) {
    OtCase *c = make(op, mode, n_out, 0);
    if (r_dt != F) { /* R of another float type */
        double r = ot_get(&c->in[0], 0);
        free(c->in[0].data);
        c->in[0] = ot_buf(r_dt, -1);
        ot_put(&c->in[0], 0, r);
    }
    if (t_dt == AMP_DT_INT32) {
        free(c->in[1].data);
        c->in[1] = ot_buf(AMP_DT_INT32, -1);
    }
    Dev *d = dev_new(c);
    void **got = host_outs(c);
    for (int64_t t = 0; t < 3; t++) {
        if (t_dt == AMP_DT_INT32) ((int32_t *)c->in[1].data)[0] = (int32_t)t;
        else ((int64_t *)c->in[1].data)[0] = t;
        dev_upload(d, c);
        AmpStatus st;
        cr_assert_eq(ot_run_cpu(c, NULL, &st), AMP_OK, "%s", st.msg);
        run_gpu(c, d, NULL, got);
        char what[96];
        snprintf(what, sizeof what, "%s %s step %lld", op, mode ? mode : "", (long long)t);
        for (int o = 0; o < c->n_out; o++) expect_close(c, o, got[o], what);
        for (int o = 0; o < c->n_out; o++) /* feed the CPU's outputs back */
            memcpy((void *)ot_src(c, o)->data, c->out[o].data, ot_bytes(&c->out[o]));
    }
    free_outs(c, got);
    dev_free(d, c);
    ot_free(c);
}

Test(cuda_optim, adam_against_cpu, .timeout = 600) {
    need_gpu();
    steps_against_cpu("Adam", NULL, -1, F, AMP_DT_INT64);
    steps_against_cpu("Adam", NULL, 2 * NT + 5, B, AMP_DT_INT32); /* part of the second moments not listed */
}

Test(cuda_optim, momentum_against_cpu, .timeout = 600) {
    need_gpu();
    steps_against_cpu("Momentum", "standard", -1, F, AMP_DT_INT64);
    steps_against_cpu("Momentum", "nesterov", NT, F, AMP_DT_INT32); /* X_new only */
}

Test(cuda_optim, adagrad_against_cpu, .timeout = 600) {
    need_gpu();
    steps_against_cpu("Adagrad", NULL, -1, H, AMP_DT_INT64);
}

/* The gate on the device: false is the ungated update byte for byte; true copies every
 * replaced input into its output (a NaN gradient changes nothing). */
Test(cuda_optim, gate, .timeout = 600) {
    need_gpu();
    uint8_t *dgate;
    cr_assert_eq(cudaMalloc((void **)&dgate, 2), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dgate, (uint8_t[2]){0, 1}, 2, cudaMemcpyHostToDevice), cudaSuccess);
    for (int k = 0; k < 4; k++) {
        OtCase *c = make(ops[k][0], ops[k][1], -1, 2);
        ((float *)c->in[2 + c->N].data)[0] = NAN; /* the gradient of tensor 0 */
        Dev *d = dev_new(c);
        dev_upload(d, c);
        void **plain = host_outs(c), **got = host_outs(c);
        run_gpu(c, d, NULL, plain);
        run_gpu(c, d, dgate, got); /* false */
        for (int o = 0; o < c->n_out; o++)
            cr_expect_eq(memcmp(got[o], plain[o], ot_bytes(&c->out[o])), 0, "%s: gate false, output %d", ops[k][0], o);
        run_gpu(c, d, dgate + 1, got); /* true */
        for (int o = 0; o < c->n_out; o++)
            cr_expect_eq(memcmp(got[o], ot_src(c, o)->data, ot_bytes(&c->out[o])), 0, "%s: gate true, output %d",
                         ops[k][0], o);
        free_outs(c, plain), free_outs(c, got);
        dev_free(d, c);
        ot_free(c);
    }
    cudaFree(dgate);
}
