/* The session's node hook, values copied out as float32, and one node run alone on the
 * CPU (observe.h): what `ampc calibrate` and `ampc compare` read a run with. */
#include "runtime/observe.h"

#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "runtime/session_impl.h"

AmpModel *amp_session_model(AmpSession *s) {
    return s->m;
}

void amp_session_set_hook(AmpSession *s, AmpExecHook fn, void *ctx) {
    amp_exec_set_hook(s->main, fn, ctx);
}

AmpCode amp_exec_value_f32(AmpExec *e, const AmpValue *v, AmpBuf *out, AmpStatus *st) {
    memset(out, 0, sizeof *out);
    const AmpBuf *b = amp_exec_value(e, v);
    if (!b) return amp_fail(st, AMP_ERR_UNSUPPORTED, "value '%s' is not held", v->name);
    if (b->dtype != AMP_DT_FLOAT && b->dtype != AMP_DT_FLOAT16 && b->dtype != AMP_DT_BFLOAT16 &&
        b->dtype != AMP_DT_DOUBLE)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "value '%s' is not a float value", v->name);
    size_t bytes = amp_buf_bytes(b), n = (size_t)b->nelem;
    void *raw = malloc(bytes ? bytes : 1);
    float *f = malloc(n ? n * sizeof *f : 1);
    AmpCode rc = raw && f ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpBackend *be = amp_exec_backend(e);
    if (!rc && bytes) rc = be->copy_out(be, raw, b->data, bytes, st);
    if (!rc) {
        if (b->dtype == AMP_DT_FLOAT) memcpy(f, raw, n * sizeof *f);
        else if (b->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f, raw, n);
        else if (b->dtype == AMP_DT_BFLOAT16) amp_bf16_to_f32_n(f, raw, n);
        else
            for (size_t i = 0; i < n; i++) f[i] = (float)((const double *)raw)[i];
        *out = *b;
        out->dtype = AMP_DT_FLOAT;
        out->data = f;
        f = NULL;
    }
    free(raw);
    free(f);
    return rc;
}

/* Outputs are placed by the caller: a kernel that asks anyway gets nothing. */
static AmpBuf *no_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    const AmpNode *n = ctx;
    (void)dtype, (void)rank, (void)dims;
    amp_fail(st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): output %d has a shape only its data tells", n->name ? n->name : "",
             n->op_type, index);
    return NULL;
}

AmpCode amp_run_node_alone(const AmpModel *m, const AmpNode *n, const AmpBuf *const *in, AmpBuf *out,
                           AmpStatus *st) {
    AmpBackend *be = amp_backend_cpu();
    AmpBackendKernel kern = {0};
    int64_t opset = amp_model_opset(m, n->domain);
    AmpCode rc = be->prepare_node(be, n, opset, &kern, st);
    if (!rc) {
        uint64_t rng = 1;
        AmpKernelCtx k = {
            .node = n,
            .opset = opset,
            .n_in = n->n_inputs,
            .in = in,
            .n_out = n->n_outputs,
            .out = out,
            .alloc = no_alloc,
            .alloc_ctx = (void *)n,
            .rng = &rng,
            .st = st,
        };
        rc = be->run_node(be, &kern, &k);
    }
    if (be->release_node) be->release_node(be, &kern);
    return rc;
}
