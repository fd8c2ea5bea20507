/* Conv, ConvTranspose and com.microsoft ConvGrad on oneDNN (kernels/cpu/dnnl_conv.c) against
 * the same kernels on the im2col + sgemm path they had before (AMP_DNNL=0), float32 and
 * bfloat16: groups, depthwise, strides, dilations, asymmetric pads, auto_pad, 1-D, 2-D
 * and 3-D, ConvTranspose's output_padding, ConvGrad's three outputs.
 *
 * oneDNN is switched off per process (amp_dnnl_set_off, before its first use), so each test forks: the
 * child, which has not touched oneDNN, runs every case with AMP_DNNL=0 into shared
 * memory; the parent then runs them on oneDNN and compares. Float32: within float32
 * reassociation (1e-5 of the output's largest magnitude). Bfloat16: both paths round the
 * float32 sum of the same bfloat16 products once to nearest even, so they differ by
 * reassociation and at most one bfloat16 ulp (2^-7 relative) where that tips a rounding.
 * Skipped where the build or the machine has no oneDNN. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE under -std=c11 */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/conv_impl.h"
#include "kernels/cpu/dnnl.h"
#include "tests/kernels/gemm_test_util.h"

TestSuite(dnnl_conv, .init = setup, .fini = teardown);

typedef enum { OP_CONV, OP_CONVT, OP_GRAD } OpKind;

typedef struct Prob {
    OpKind op;
    int nsp;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3], p0[3], p1[3], opad[3];
    bool bias;
    const char *auto_pad; /* NULL: explicit pads */
} Prob;

enum { MAX_PROBS = 32, MAX_OUT = 3 };
static const size_t SHM_BYTES = (size_t)64 << 20;

/* What the child leaves for the parent: per case and output, the kernel's return code,
 * the element count and the values as float32 at an offset into data. */
typedef struct Shared {
    int child_had_dnnl;
    int rc[MAX_PROBS];
    uint64_t n[MAX_PROBS][MAX_OUT], off[MAX_PROBS][MAX_OUT];
    uint64_t used;
    float data[];
} Shared;

static int64_t conv_out(const Prob *p, int i) {
    int64_t eff = (p->k[i] - 1) * p->d[i] + 1;
    if (p->auto_pad) return (p->in[i] + p->s[i] - 1) / p->s[i];
    return (p->in[i] + p->p0[i] + p->p1[i] - eff) / p->s[i] + 1;
}

static AmpBuf input(int dt, int rank, const int64_t *dims) {
    AmpBuf f = fbuf(rank, dims);
    if (dt == AMP_DT_FLOAT) return f;
    AmpBuf h = to16(&f, dt);
    free(f.data);
    return h;
}

static void as_f32(const AmpBuf *b, float *out) {
    if (b->dtype == AMP_DT_FLOAT) memcpy(out, b->data, b->nelem * sizeof *out);
    else amp_bf16_to_f32_n(out, b->data, b->nelem);
}

/* Runs case i in dtype dt with its own inputs (the random stream reseeded per case, so
 * the child and the parent draw the same), the outputs into o. */
static AmpCode run_prob(const Prob *p, int i, int dt, Outs *o, AmpStatus *st) {
    rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    int n = p->nsp, r = n + 2;
    int64_t xd[5] = {p->N, p->C}, wd[5], yd[5] = {p->N, p->M};
    if (p->op == OP_CONVT) wd[0] = p->C, wd[1] = p->M / p->group;
    else wd[0] = p->M, wd[1] = p->C / p->group;
    for (int j = 0; j < n; j++) xd[2 + j] = p->in[j], wd[2 + j] = p->k[j], yd[2 + j] = conv_out(p, j);
    AmpNode *node = mknode(p->op == OP_GRAD ? "com.microsoft" : "",
                           p->op == OP_CONV ? "Conv" : p->op == OP_CONVT ? "ConvTranspose" : "ConvGrad");
    int64_t pads[6], opad[3];
    for (int j = 0; j < n; j++) pads[j] = p->p0[j], pads[n + j] = p->p1[j], opad[j] = p->opad[j];
    attr_ints(node, "strides", n, p->s);
    attr_ints(node, "dilations", n, p->d);
    if (p->auto_pad) attr_str(node, "auto_pad", p->auto_pad);
    else attr_ints(node, "pads", 2 * n, pads);
    attr_int(node, "group", p->group);
    if (p->op == OP_CONVT) attr_ints(node, "output_padding", n, opad);
    AmpBuf x = input(dt, r, xd), w = input(dt, r, wd), b = input(dt, 1, &p->M), dy = {0};
    if (p->op == OP_GRAD) dy = input(dt, r, yd);
    const AmpBuf *in[3] = {&x, &w, &b}, *gin[3] = {&dy, &x, &w};
    AmpCode rc = p->op == OP_GRAD ? run(node, 3, gin, 3, o, st) : run(node, p->bias ? 3 : 2, in, 1, o, st);
    free(x.data), free(w.data), free(b.data), free(dy.data);
    return rc;
}

static void need_dnnl(void) {
    if (!amp_dnnl_enabled()) cr_skip_test("built without oneDNN, or libdnnl cannot be opened (AMP_DNNL=0?)");
}

/* Every case in dt on both paths, compared. */
static void compare(const Prob *probs, int np, int dt) {
    cr_assert_leq(np, MAX_PROBS);
    Shared *sh = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* the im2col path */
        amp_dnnl_set_off(); /* what a session does for AMP_DNNL=0 */
        sh->child_had_dnnl = amp_dnnl_enabled();
        uint64_t cap = (SHM_BYTES - sizeof *sh) / sizeof(float);
        for (int i = 0; i < np; i++) {
            Outs o;
            AmpStatus st;
            sh->rc[i] = run_prob(&probs[i], i, dt, &o, &st);
            for (int j = 0; j < MAX_OUT && !sh->rc[i]; j++) {
                if (!o.b[j].data || sh->used + o.b[j].nelem > cap) continue;
                as_f32(&o.b[j], sh->data + sh->used);
                sh->n[i][j] = o.b[j].nelem, sh->off[i][j] = sh->used;
                sh->used += o.b[j].nelem;
            }
            outs_free(&o);
        }
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the AMP_DNNL=0 child failed");
    cr_assert_not(sh->child_had_dnnl, "oneDNN was already open before the fork: no im2col reference");
    need_dnnl();
    for (int i = 0; i < np; i++) {
        Outs o;
        AmpStatus st;
        AmpCode rc = run_prob(&probs[i], i, dt, &o, &st);
        cr_assert_eq(rc, AMP_OK, "case %d: %s", i, st.msg);
        cr_assert_eq(sh->rc[i], AMP_OK, "case %d: the im2col path failed", i);
        for (int j = 0; j < MAX_OUT; j++) {
            if (!o.b[j].data) continue;
            cr_assert_eq(o.b[j].nelem, sh->n[i][j], "case %d output %d: %llu elements, im2col %llu", i, j,
                         (unsigned long long)o.b[j].nelem, (unsigned long long)sh->n[i][j]);
            cr_assert_eq(o.b[j].dtype, dt);
            float *got = malloc(o.b[j].nelem * sizeof *got);
            as_f32(&o.b[j], got);
            const float *want = sh->data + sh->off[i][j];
            double big = 0;
            for (uint64_t q = 0; q < o.b[j].nelem; q++) big = fmax(big, fabs(want[q]));
            for (uint64_t q = 0; q < o.b[j].nelem; q++) {
                double tol = 1e-5 * big + 1e-6;
                if (dt == AMP_DT_BFLOAT16) tol += fabs(want[q]) / 128.0;
                cr_assert_leq(fabs((double)got[q] - want[q]), tol, "case %d output %d [%llu]: oneDNN %g, im2col %g", i,
                              j, (unsigned long long)q, got[q], want[q]);
            }
            free(got);
        }
        outs_free(&o);
    }
    munmap(sh, SHM_BYTES);
}

#define P1(a) {a, 1, 1}
#define P2(a, b) {a, b, 1}
#define P3(a, b, c) {a, b, c}

static const Prob conv_probs[] = {
    /* 3x3, pad 1, bias */
    {OP_CONV, 2, 2, 16, 32, 1, P2(9, 10), P2(3, 3), P2(1, 1), P2(1, 1), P2(1, 1), P2(1, 1), {0}, true, NULL},
    /* groups 4, stride 2, dilation 2, asymmetric pads */
    {OP_CONV, 2, 1, 8, 12, 4, P2(21, 19), P2(3, 2), P2(2, 2), P2(2, 2), P2(0, 2), P2(1, 1), {0}, true, NULL},
    /* depthwise 3x3, stride 2 */
    {OP_CONV, 2, 2, 16, 16, 16, P2(12, 12), P2(3, 3), P2(2, 2), P2(1, 1), P2(1, 1), P2(1, 1), {0}, false, NULL},
    /* 1-D: kernel 4, stride 3, dilation 2, pads (2, 1) */
    {OP_CONV, 1, 2, 5, 7, 1, P1(110), P1(4), P1(3), P1(2), P1(2), P1(1), {0}, true, NULL},
    /* 3-D */
    {OP_CONV, 3, 2, 4, 6, 2, P3(5, 7, 6), P3(2, 3, 3), P3(1, 2, 1), P3(1, 1, 2), P3(1, 0, 1), P3(0, 1, 1), {0}, true,
     NULL},
    /* 1x1 */
    {OP_CONV, 2, 2, 32, 16, 1, P2(7, 7), P2(1, 1), P2(1, 1), P2(1, 1), P2(0, 0), P2(0, 0), {0}, false, NULL},
    /* ResNet's stem: 7x7, stride 2, pad 3, 3 input channels */
    {OP_CONV, 2, 1, 3, 16, 1, P2(32, 32), P2(7, 7), P2(2, 2), P2(1, 1), P2(3, 3), P2(3, 3), {0}, true, NULL},
    /* auto_pad SAME_UPPER, stride 2 */
    {OP_CONV, 2, 1, 8, 8, 1, P2(17, 17), P2(3, 3), P2(2, 2), P2(1, 1), {0}, {0}, {0}, false, "SAME_UPPER"},
    /* a pad larger than the window reaches (the end pad oneDNN never reads) */
    {OP_CONV, 2, 8, 4, 4, 1, P2(6, 6), P2(2, 2), P2(3, 3), P2(1, 1), P2(0, 0), P2(2, 2), {0}, true, NULL},
};

static const Prob convt_probs[] = {
    /* 3x3, stride 2, pad 1, output_padding 1, bias */
    {OP_CONVT, 2, 2, 16, 8, 1, P2(6, 6), P2(3, 3), P2(2, 2), P2(1, 1), P2(1, 1), P2(1, 1), P2(1, 1), true, NULL},
    /* groups 2, strides (2, 3), dilations (1, 2), asymmetric pads */
    {OP_CONVT, 2, 4, 8, 6, 2, P2(5, 4), P2(3, 2), P2(2, 3), P2(1, 2), P2(0, 1), P2(1, 0), P2(0, 2), true, NULL},
    /* depthwise */
    {OP_CONVT, 2, 1, 8, 8, 8, P2(9, 9), P2(3, 3), P2(2, 2), P2(1, 1), P2(1, 1), P2(1, 1), P2(0, 0), false, NULL},
    /* 1-D, output_padding 1 */
    {OP_CONVT, 1, 2, 3, 5, 1, P1(40), P1(4), P1(2), P1(1), P1(1), P1(2), P1(1), false, NULL},
    /* 3-D */
    {OP_CONVT, 3, 2, 4, 4, 1, P3(3, 4, 3), P3(2, 2, 3), P3(2, 2, 1), P3(1, 1, 1), P3(0, 1, 0), P3(0, 0, 1), P3(1, 0, 0),
     true, NULL},
};

static const Prob grad_probs[] = {
    {OP_GRAD, 2, 2, 8, 16, 1, P2(8, 9), P2(3, 3), P2(1, 1), P2(1, 1), P2(1, 1), P2(1, 1), {0}, true, NULL},
    {OP_GRAD, 2, 1, 8, 12, 2, P2(11, 9), P2(3, 2), P2(2, 2), P2(2, 1), P2(0, 2), P2(1, 1), {0}, true, NULL},
    {OP_GRAD, 2, 2, 8, 8, 8, P2(10, 10), P2(3, 3), P2(2, 2), P2(1, 1), P2(1, 1), P2(1, 1), {0}, true, NULL},
    {OP_GRAD, 1, 2, 5, 7, 1, P1(23), P1(4), P1(3), P1(2), P1(2), P1(1), {0}, true, NULL},
    {OP_GRAD, 3, 1, 4, 6, 1, P3(5, 6, 6), P3(2, 3, 3), P3(1, 2, 1), P3(1, 1, 1), P3(1, 0, 1), P3(0, 1, 1), {0}, true,
     NULL},
    {OP_GRAD, 2, 2, 16, 8, 1, P2(7, 7), P2(1, 1), P2(1, 1), P2(1, 1), P2(0, 0), P2(0, 0), {0}, true, NULL},
};

#define NPROBS(a) ((int)(sizeof(a) / sizeof *(a)))

Test(dnnl_conv, conv_float32) {
    compare(conv_probs, NPROBS(conv_probs), AMP_DT_FLOAT);
}
Test(dnnl_conv, conv_bfloat16) {
    compare(conv_probs, NPROBS(conv_probs), AMP_DT_BFLOAT16);
}
Test(dnnl_conv, conv_transpose_float32) {
    compare(convt_probs, NPROBS(convt_probs), AMP_DT_FLOAT);
}
Test(dnnl_conv, conv_transpose_bfloat16) {
    compare(convt_probs, NPROBS(convt_probs), AMP_DT_BFLOAT16);
}
Test(dnnl_conv, conv_grad_float32) {
    compare(grad_probs, NPROBS(grad_probs), AMP_DT_FLOAT);
}
Test(dnnl_conv, conv_grad_bfloat16) {
    compare(grad_probs, NPROBS(grad_probs), AMP_DT_BFLOAT16);
}

/* The comparisons above are only worth something where oneDNN took the cases (each has
 * n * positions >= 64 and a window no larger than them, conv.c's rule): it must take the
 * ordinary ones in float32 (bfloat16 too where the CPU has avx512_bf16). */
Test(dnnl_conv, takes_the_common_cases) {
    need_dnnl();
    bool bf16 = __builtin_cpu_supports("avx512bf16");
    for (int dt = 0; dt < 2; dt++) {
        int type = dt ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT;
        if (dt && !bf16) continue;
        int kinds[4] = {AMP_DNNL_CONV_FWD, AMP_DNNL_DECONV_FWD, AMP_DNNL_CONV_BWD_DATA, AMP_DNNL_CONV_BWD_WEIGHTS};
        for (int kk = 0; kk < 4; kk++) {
            AmpConvGeom g;
            memset(&g, 0, sizeof g);
            g.nsp = 2;
            for (int i = 0; i < 2; i++) g.in[i] = 8, g.kern[i] = 3, g.out[i] = 8, g.stride[i] = 1, g.dil[i] = 1,
                                       g.pad0[i] = 1, g.pad1[i] = 1;
            AmpDnnlConv p;
            cr_assert(amp_conv_dnnl_desc(kinds[kk], type, 2, 16, 16, 2, &g, true, &p));
            size_t es = dt ? 2 : 4, act = 2 * 16 * 64 * es, wei = 16 * 8 * 9 * es;
            void *a = calloc(1, act), *b = calloc(1, act), *w = calloc(1, wei), *bias = calloc(16, 4);
            AmpDnnlConvIO io = {.src = a, .wei = w, .bias = bias, .diff_dst = b, .dst = b, .diff_src = a,
                                .diff_wei = w, .diff_bias = bias};
            if (kinds[kk] == AMP_DNNL_CONV_BWD_DATA) p.bias = false;
            cr_assert(amp_dnnl_conv(&p, &io), "kind %d, %s", kinds[kk], dt ? "bfloat16" : "float32");
            free(a), free(b), free(w), free(bias);
        }
    }
}
