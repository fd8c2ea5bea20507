/* Gradient rules of the ops that move data without arithmetic (reshapes, transposes,
 * concatenation, gathers) and of the sums and means over axes. */
#include "grad_impl.h"

#define B(c) ((c)->b)
#define IN(c, i) ((c)->n->inputs[i])
#define G(c) ((c)->gy[0])

void amp_grad_identity(AmpGradCtx *c) { c->gx[0] = G(c); }

/* Back to the input's float type. */
void amp_grad_cast(AmpGradCtx *c) {
    int dt = IN(c, 0)->type.dtype;
    c->gx[0] = dt == G(c)->type.dtype ? G(c) : amp_build_cast(B(c), "cast_d", G(c), dt);
}

/* Reshape, Flatten, Squeeze, Unsqueeze: the gradient is g in the input's shape. */
void amp_grad_reshape(AmpGradCtx *c) { c->gx[0] = amp_grad_reshape_like(c, G(c), IN(c, 0)); }

/* By the inverse permutation (default perm: the axes reversed, its own inverse). */
void amp_grad_transpose(AmpGradCtx *c) {
    int r = amp_grad_rank(c, IN(c, 0));
    if (r < 0) return;
    const AmpAttr *a = amp_node_attr(c->n, "perm");
    int64_t inv[64];
    if (r > 64 || (a && a->n_ints != (size_t)r)) {
        amp_grad_unsupported(c, "perm does not match the input's rank");
        return;
    }
    for (int i = 0; i < r; i++) {
        int64_t p = a ? a->ints[i] : r - 1 - i;
        if (p < 0 || p >= r) {
            amp_grad_unsupported(c, "perm out of range");
            return;
        }
        inv[p] = i;
    }
    c->gx[0] = amp_build_transpose(B(c), "transpose_d", G(c), inv, (size_t)r);
}

/* Split g along the axis into the inputs' sizes there, read at run time (Shape, then
 * Gather of the axis, Concat into Split's `split` input), so dynamic dims work. */
void amp_grad_concat(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpNode *n = c->n;
    int r = amp_grad_rank(c, G(c));
    if (r < 0) return;
    int64_t axis = amp_node_attr_int(n, "axis", 0);
    if (axis < 0) axis += r;
    if (n->n_inputs > 64) {
        amp_grad_unsupported(c, "more than 64 inputs");
        return;
    }
    AmpValue *sizes[64];
    AmpValue *ax = amp_build_ints(b, "concat_axis", &axis, 1);
    for (int i = 0; i < n->n_inputs; i++)
        sizes[i] = amp_build2(b, "Gather", "concat_size", amp_build1(b, "Shape", "concat_shape", IN(c, i)), ax);
    AmpNode *cat = amp_build_start(b, "Concat", "concat_sizes", sizes, n->n_inputs, 1);
    amp_build_attr_int(b, cat, "axis", 0);
    AmpValue *in[2] = {G(c), amp_build_end(b, cat)};
    AmpNode *split = amp_build_start(b, "Split", "concat_d", in, 2, n->n_inputs);
    amp_build_attr_int(b, split, "axis", axis);
    if (!amp_build_end(b, split)) return;
    for (int i = 0; i < n->n_inputs; i++)
        if (amp_grad_wants(c, i)) c->gx[i] = split->outputs[i];
}

/* Gather along axis 0 (embeddings): the rows of g added into zeros shaped like the data
 * at the indices, by ScatterND with reduction "add", so repeated indices sum. */
void amp_grad_gather(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    if (amp_node_attr_int(c->n, "axis", 0) != 0) {
        amp_grad_unsupported(c, "only axis 0 (embedding lookups) has a gradient rule yet");
        return;
    }
    AmpValue *data = IN(c, 0);
    AmpValue *zeros = amp_build_fill(b, "gather_zeros", amp_build1(b, "Shape", "gather_shape", data), data->type.dtype, 0.0);
    static const int64_t last[1] = {-1};
    AmpValue *idx = amp_build_axes_op(b, "Unsqueeze", "gather_idx", IN(c, 1), last, 1);
    AmpValue *sin[3] = {zeros, idx, G(c)};
    AmpNode *s = amp_build_start(b, "ScatterND", "gather_d", sin, 3, 1);
    amp_build_attr_string(b, s, "reduction", "add");
    c->gx[0] = amp_build_end(b, s);
}

/* g with the reduced axes put back (size 1), then expanded to the input's shape. */
static AmpValue *reduce_back(AmpGradCtx *c) {
    AmpValue *x = IN(c, 0), *g = G(c);
    int r = amp_grad_rank(c, x);
    int64_t axes[64];
    size_t n = 0;
    bool all = false;
    if (r < 0 || r > 64 || !amp_grad_reduce_axes(c, r, axes, &n, &all)) return NULL;
    if (!amp_node_attr_int(c->n, "keepdims", 1) && n)
        g = amp_build_axes_op(B(c), "Unsqueeze", "reduce_keep", g, axes, n);
    return amp_build2(B(c), "Expand", "reduce_d", g, amp_build1(B(c), "Shape", "reduce_shape", x));
}

void amp_grad_reduce_sum(AmpGradCtx *c) { c->gx[0] = reduce_back(c); }

/* The sum's gradient over the count of elements each output averaged (Size(x) / Size(out)). */
void amp_grad_reduce_mean(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *d = reduce_back(c);
    int dt = IN(c, 0)->type.dtype;
    AmpValue *nx = amp_build_cast(b, "mean_nx", amp_build1(b, "Size", "mean_sx", IN(c, 0)), dt);
    AmpValue *ny = amp_build_cast(b, "mean_ny", amp_build1(b, "Size", "mean_sy", c->n->outputs[0]), dt);
    c->gx[0] = amp_build2(b, "Div", "mean_d", d, amp_build2(b, "Div", "mean_n", nx, ny));
}
