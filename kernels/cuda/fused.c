/* CUDA node kernels of the executor's fused nodes (runtime/fuse.c): the program and the
 * checks are the CPU reference's (ops/fused_check.h, shared), the launches fused.cu's. */
#include <string.h>

#include "ops/fused_check.h"
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/fused.h"

static unsigned char reg_class(int dtype) {
    switch (dtype) {
    case AMP_DT_FLOAT: case AMP_DT_FLOAT16: case AMP_DT_BFLOAT16: return 1; /* AMP_FCLASS_F */
    case AMP_DT_INT32: case AMP_DT_INT64: return 2;                        /* AMP_FCLASS_I */
    default: return 3;                                                      /* AMP_FCLASS_B */
    }
}

AmpCode amp_cuda_fused_elementwise(AmpKernelCtx *k) {
    const AmpFusedProg *p = k->attrs;
    if (k->n_in > AMP_CUDA_FUSED_PTRS || k->n_out > AMP_CUDA_FUSED_PTRS || p->tensors > AMP_CUDA_FUSED_PTRS)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "more than %d inputs or outputs", AMP_CUDA_FUSED_PTRS);
    AmpBuf *out[AMP_CUDA_FUSED_PTRS];
    AmpCode rc = amp_fused_check(k, p, out);
    if (rc) return rc;
    AmpCudaFusedArgs a;
    memset(&a, 0, sizeof a);
    a.n_in = p->n_in, a.n_instr = p->n_instr, a.n_out = p->n_out, a.tensors = p->tensors;
    for (int t = 0; t < p->tensors; t++) {
        a.start[t] = a.total;
        a.nelem[t] = k->in[t * p->n_in + p->shape_input]->nelem;
        a.total += a.nelem[t];
    }
    for (int i = 0; i < k->n_in; i++) {
        a.in_n[i] = k->in[i]->nelem;
        a.in[i] = k->in[i]->data;
    }
    for (int o = 0; o < k->n_out; o++) a.out[o] = out[o] ? out[o]->data : NULL;
    for (int i = 0; i < p->n_in; i++) {
        a.in_dtype[i] = p->in_dtype[i];
        a.cls[i] = reg_class(p->in_dtype[i]);
    }
    for (int j = 0; j < p->n_instr; j++) {
        const AmpFusedInstr *in = &p->ins[j];
        uint8_t w[5] = {in->op, in->dtype, in->a, in->b, in->c};
        memcpy(a.code[j], w, sizeof w);
        a.cls[p->n_in + j] = reg_class(in->dtype);
    }
    for (int o = 0; o < p->n_out; o++) {
        a.out_reg[o] = p->out_reg[o];
        a.out_dtype[o] = p->out_dtype[o];
    }
    return amp_cuda_check(k, amp_cuda_fused_elementwise_launch(&a, amp_cuda_ctx(k)->stream), "fused elementwise");
}

AmpCode amp_cuda_unscale_check(AmpKernelCtx *k) {
    int N = k->n_in - 2;
    if (N > AMP_CUDA_UC_MAX) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "more than %d gradients", AMP_CUDA_UC_MAX);
    AmpBuf *out[AMP_CUDA_UC_MAX + 1];
    AmpCode rc = amp_unscale_check_io(k, out);
    if (rc) return rc;
    AmpCudaUnscaleArgs a;
    memset(&a, 0, sizeof a);
    a.n = N;
    for (int j = 0; j < N; j++) {
        a.x[j] = k->in[2 + j]->data;
        a.g[j] = out[j]->data;
        a.nelem[j] = k->in[2 + j]->nelem;
        a.x_dtype[j] = (uint8_t)k->in[2 + j]->dtype;
    }
    a.inv = k->in[0]->data;
    a.before = k->in[1] ? k->in[1]->data : NULL;
    a.found = out[N]->data;
    return amp_cuda_check(k, amp_cuda_unscale_check_launch(&a, amp_cuda_ctx(k)->stream), "unscale and check");
}

/* Taken whenever the executor made them: prepare and the checks above refuse the rest. */
bool amp_cuda_supports_fused(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset, (void)in_dtypes;
    if (n->op == AMP_OP_Ampc_UnscaleCheck) return n->n_inputs - 2 <= AMP_CUDA_UC_MAX;
    return n->n_inputs <= AMP_CUDA_FUSED_PTRS && n->n_outputs <= AMP_CUDA_FUSED_PTRS;
}
