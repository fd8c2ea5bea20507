/* The recurrent ops' geometry (ops/rnn_geom.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ops/kernel_out.h"
#include "ops/rnn_geom.h"

/* AMP_ERR_INPUT naming `what` unless b, an optional input (NULL: not given), has the
 * shape (rank dims). */
static AmpCode check_shape(AmpKernelCtx *k, const AmpBuf *b, const char *what, int rank, const int64_t *dims) {
    if (!b) return AMP_OK;
    bool ok = b->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = b->dims[i] == dims[i];
    if (ok) return AMP_OK;
    char got[160] = "", want[160] = "";
    for (int i = 0; i < b->rank && i < AMP_MAX_RANK; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)b->dims[i]);
    for (int i = 0; i < rank; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)dims[i]);
    return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has shape (%s); expected (%s)", what, got, want);
}

AmpCode amp_rnn_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpRnnGeom *g = geom;
    const AmpRnnShapeAttrs *at = k->attrs;
    bool lstm = k->node->op == AMP_OP_LSTM;
    g->gates = lstm ? 4 : k->node->op == AMP_OP_GRU ? 3 : 1;
    int max_in = lstm ? 8 : 6, max_out = lstm ? 3 : 2;
    if (k->n_in < 3 || !k->in[0] || !k->in[1] || !k->in[2])
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X, W and R are required");
    if (k->n_in > max_in || k->n_out > max_out)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%d inputs and %d outputs; at most %d and %d", k->n_in, k->n_out,
                               max_in, max_out);
    const AmpBuf *x = k->in[0], *w = k->in[1], *r = k->in[2];
    if (x->rank != 3 || w->rank != 3 || r->rank != 3)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X, W and R must have rank 3 (got %d, %d, %d)", x->rank, w->rank,
                               r->rank);
    const int layout = at->layout, ndir = at->ndir;
    g->seq = x->dims[layout ? 1 : 0];
    g->batch = x->dims[layout ? 0 : 1];
    g->input = x->dims[2];
    g->hidden = at->has_hidden ? at->hidden : r->dims[2];
    if (g->hidden <= 0 || g->hidden > INT_MAX / 4)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "hidden_size %lld is out of range", (long long)g->hidden);
    int64_t gh = g->gates * g->hidden, h = g->hidden;
    const AmpBuf *in[8] = {0};
    for (int i = 3; i < k->n_in; i++) in[i] = k->in[i];
    int64_t hdims[3] = {ndir, g->batch, h};
    if (layout) hdims[0] = g->batch, hdims[1] = ndir;
    AmpCode rc;
    if ((rc = check_shape(k, w, "W", 3, (const int64_t[]){ndir, gh, g->input})) ||
        (rc = check_shape(k, r, "R", 3, (const int64_t[]){ndir, gh, h})) ||
        (rc = check_shape(k, in[3], "B", 2, (const int64_t[]){ndir, 2 * gh})) ||
        (rc = check_shape(k, in[5], "initial_h", 3, hdims)) || (rc = check_shape(k, in[6], "initial_c", 3, hdims)) ||
        (rc = check_shape(k, in[7], "P", 2, (const int64_t[]){ndir, 3 * h})))
        return rc;
    const AmpBuf *sl = in[4];
    if (sl && (!amp_dtype_is_int(sl->dtype) || sl->rank != 1 || sl->dims[0] != g->batch))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "sequence_lens must be an integer tensor of shape (%lld)",
                               (long long)g->batch);
    int64_t ydims[4] = {g->seq, ndir, g->batch, h};
    if (layout) ydims[0] = g->batch, ydims[1] = g->seq, ydims[2] = ndir;
    for (int i = 0; i < k->n_out; i++) /* Y, Y_h, Y_c, in X's type, where listed */
        if ((rc = amp_geom_check(k, i, x->dtype, i ? 3 : 4, i ? hdims : ydims))) return rc;
    return AMP_OK;
}
