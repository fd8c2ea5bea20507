/* CPU kernels of the executor's fused nodes (runtime/fuse.c): ai.ampc FusedElementwise, a
 * chain of elementwise nodes as one program evaluated per element (ops/fused_eval.h,
 * shared with the CUDA kernel, as the program's parsing and the checks of a run are:
 * ops/fused_check.h), and ai.ampc UnscaleCheck, the loss_scale pass's unscale and
 * finiteness check of many gradients at once. They are the reference of the CUDA kernels
 * and, run by the device simulator, give exactly the bytes of the nodes they replace. */
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/parallel.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd.h"
#include "ops/fused_check.h"

#define AMP_FUSED_ROUND_F16(x) amp_f16_to_f32(amp_f32_to_f16(x))
#define AMP_FUSED_ROUND_BF16(x) amp_bf16_to_f32(amp_f32_to_bf16(x))
#include "ops/fused_eval.h"

/* ---- FusedElementwise ---------------------------------------------------------------- */

static AmpFusedReg load(const AmpBuf *b, uint64_t i) {
    AmpFusedReg r;
    switch (b->dtype) {
    case AMP_DT_FLOAT: r.f = ((const float *)b->data)[i]; break;
    case AMP_DT_FLOAT16: r.f = amp_f16_to_f32(((const uint16_t *)b->data)[i]); break;
    case AMP_DT_BFLOAT16: r.f = amp_bf16_to_f32(((const uint16_t *)b->data)[i]); break;
    default: r.i = amp_buf_get_i64(b, i); break;
    }
    return r;
}

static void store(AmpBuf *b, uint64_t i, AmpFusedReg r) {
    switch (b->dtype) {
    case AMP_DT_FLOAT: ((float *)b->data)[i] = r.f; break;
    case AMP_DT_FLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_f16(r.f); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_bf16(r.f); break;
    default: amp_buf_set_i64(b, i, r.i); break;
    }
}

/* A program of float32 arithmetic (amp_fused_prog_f32_arith: the CPU's own fused chains,
 * an SGD update's Mul and Sub say) over one tensor set, in rows of BLK elements: each
 * instruction one row operation of the unfused kernels (amp_simd_row2_f32: their bits,
 * which are amp_fused_step's), not an interpreted step per element. Every row of a block
 * is read before its outputs are written, so an output may be an input (an update written
 * in place). False (nothing written) where it does not apply: no AVX-512, an input
 * broadcast along trailing dims, an instruction of two one-element operands, an output
 * that is an input. */
enum { BLK = 256 };

typedef struct RowsJob {
    const AmpFusedProg *p;
    const AmpBuf *const *in;
    AmpBuf **o;
    const int *step; /* per register: 1 along the elements, 0 one element for all */
    uint64_t nelem;
    AmpSimdOp sop[AMP_FUSED_MAX_INSTR];
} RowsJob;

/* Blocks [from, to) of the program's rows; the instructions' rows on this thread's stack
 * (48 KiB at most). */
static void rows_slice(void *ctx, int64_t from, int64_t to) {
    const RowsJob *jb = ctx;
    const AmpFusedProg *p = jb->p;
    float rows[AMP_FUSED_MAX_INSTR * BLK];
    for (uint64_t e = (uint64_t)from * BLK; e < (uint64_t)to * BLK && e < jb->nelem; e += BLK) {
        int64_t m = jb->nelem - e < BLK ? (int64_t)(jb->nelem - e) : BLK;
        const float *reg[AMP_FUSED_MAX_REG];
        for (int i = 0; i < p->n_in; i++) reg[i] = (const float *)jb->in[i]->data + (jb->step[i] ? e : 0);
        for (int j = 0; j < p->n_instr; j++) {
            const AmpFusedInstr *s = &p->ins[j];
            float *r = rows + (size_t)j * BLK;
            amp_simd_row2_f32(jb->sop[j], r, reg[s->a], jb->step[s->a], reg[s->b], jb->step[s->b], m);
            reg[p->n_in + j] = r;
        }
        for (int q = 0; q < p->n_out; q++)
            if (jb->o[q]) memcpy((float *)jb->o[q]->data + e, reg[p->out_reg[q]], (size_t)m * sizeof(float));
    }
}

static bool f32_rows(const AmpFusedProg *p, const AmpBuf *const *in, AmpBuf **o, uint64_t nelem) {
    static const AmpSimdOp sop[] = {[AMP_FOP_ADD] = AMP_SIMD_ADD, [AMP_FOP_SUB] = AMP_SIMD_SUB,
                                    [AMP_FOP_MUL] = AMP_SIMD_MUL, [AMP_FOP_DIV] = AMP_SIMD_DIV};
    int64_t code[5 * AMP_FUSED_MAX_INSTR], dt[AMP_FUSED_MAX_IN];
    int step[AMP_FUSED_MAX_REG];
    for (int i = 0; i < p->n_in; i++) {
        dt[i] = p->in_dtype[i], step[i] = in[i]->nelem == nelem;
        if (!step[i] && in[i]->nelem != 1) return false; /* a trailing-dims broadcast */
    }
    for (int j = 0; j < p->n_instr; j++) {
        const AmpFusedInstr *s = &p->ins[j];
        int64_t c[5] = {s->op, s->dtype, s->a, s->b, s->c};
        memcpy(code + 5 * j, c, sizeof c);
        step[p->n_in + j] = 1;
    }
    if (!amp_simd_have() || !amp_fused_prog_f32_arith(code, p->n_instr, dt, p->n_in)) return false;
    for (int j = 0; j < p->n_instr; j++)
        if (!step[p->ins[j].a] && !step[p->ins[j].b]) return false;
    for (int q = 0; q < p->n_out; q++)
        if (p->out_reg[q] < p->n_in) return false;
    RowsJob job = {.p = p, .in = in, .o = o, .step = step, .nelem = nelem};
    for (int j = 0; j < p->n_instr; j++) job.sop[j] = sop[p->ins[j].op];
    /* blocks of BLK elements, sliced over the CPU's threads (each block computed alike
     * whichever thread runs it) */
    amp_parallel_for((int64_t)((nelem + BLK - 1) / BLK), (1 << 15) / BLK, 1, rows_slice, &job);
    return true;
}

AmpCode amp_cpu_fused_elementwise(AmpKernelCtx *k) {
    const AmpFusedProg *p = k->attrs;
    AmpBuf *out[AMP_FUSED_MAX_OUT * 8], **outp = out;
    if (k->n_out > (int)(sizeof out / sizeof out[0]) && !(outp = malloc((size_t)k->n_out * sizeof *outp)))
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = amp_fused_check(k, p, outp);
    uint8_t cls[AMP_FUSED_MAX_REG];
    for (int i = 0; i < p->n_in; i++) cls[i] = (uint8_t)amp_fused_class(p->in_dtype[i]);
    for (int j = 0; j < p->n_instr; j++) cls[p->n_in + j] = (uint8_t)amp_fused_class(p->ins[j].dtype);
    for (int t = 0; t < p->tensors && !rc; t++) {
        const AmpBuf *const *in = k->in + t * p->n_in;
        AmpBuf **o = outp + t * p->n_out;
        uint64_t nelem = in[p->shape_input]->nelem;
        if (f32_rows(p, in, o, nelem)) continue;
        AmpFusedReg r[AMP_FUSED_MAX_REG];
        for (uint64_t e = 0; e < nelem; e++) {
            for (int i = 0; i < p->n_in; i++) r[i] = load(in[i], in[i]->nelem == nelem ? e : e % in[i]->nelem);
            for (int j = 0; j < p->n_instr; j++) r[p->n_in + j] = amp_fused_step(&p->ins[j], r, cls);
            for (int q = 0; q < p->n_out; q++)
                if (o[q]) store(o[q], e, r[p->out_reg[q]]);
        }
    }
    if (outp != out) free(outp);
    return rc;
}

/* ---- UnscaleCheck -------------------------------------------------------------------- */

AmpCode amp_cpu_unscale_check(AmpKernelCtx *k) {
    int N = k->n_in - 2;
    AmpBuf **out = malloc((size_t)(N > 0 ? N + 1 : 1) * sizeof *out);
    if (!out) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = amp_unscale_check_io(k, out);
    if (!rc) {
        float s = ((const float *)k->in[0]->data)[0];
        bool found = k->in[1] && ((const uint8_t *)k->in[1]->data)[0];
        for (int j = 0; j < N; j++) {
            const AmpBuf *x = k->in[2 + j];
            float *g = out[j]->data;
            for (uint64_t e = 0; e < x->nelem; e++) {
                g[e] = load(x, e).f * s;
                found |= !isfinite(g[e]);
            }
        }
        ((uint8_t *)out[N]->data)[0] = found;
    }
    free(out);
    return rc;
}
