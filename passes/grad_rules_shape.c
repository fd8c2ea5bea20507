/* Gradient rules of the ops that move data without arithmetic (reshapes, transposes,
 * concatenation, gathers) and of the sums and means over axes. */
#include "passes/grad_impl.h"

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

/* By the inverse permutation (default perm: the axes reversed, its own inverse). perm
 * gives the rank where inference could not (a Reshape to a computed shape). */
void amp_grad_transpose(AmpGradCtx *c) {
    const AmpAttr *a = amp_node_attr(c->n, "perm");
    int r = a && a->n_ints <= 64 ? (int)a->n_ints : amp_grad_rank(c, IN(c, 0));
    if (r < 0) return;
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
 * at the indices, by ScatterND with reduction "add", so repeated indices sum. Along
 * another axis: the same gather of the data's element indices says where each element of
 * g goes (amp_grad_scatter_back). */
void amp_grad_gather(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *data = IN(c, 0);
    int64_t axis = amp_node_attr_int(c->n, "axis", 0);
    if (axis != 0) {
        AmpValue *in[2] = {amp_grad_iota_like(c, data), IN(c, 1)};
        AmpNode *n = amp_build_start(b, "Gather", "gather_from", in, 2, 1);
        amp_build_attr_int(b, n, "axis", axis);
        c->gx[0] = amp_grad_scatter_back(c, G(c), amp_build_end(b, n), data);
        return;
    }
    AmpValue *zeros = amp_build_fill(b, "gather_zeros", amp_build1(b, "Shape", "gather_shape", data), data->type.dtype, 0.0);
    static const int64_t last[1] = {-1};
    AmpValue *idx = amp_build_axes_op(b, "Unsqueeze", "gather_idx", IN(c, 1), last, 1);
    AmpValue *sin[3] = {zeros, idx, G(c)};
    AmpNode *s = amp_build_start(b, "ScatterND", "gather_d", sin, 3, 1);
    amp_build_attr_string(b, s, "reduction", "add");
    c->gx[0] = amp_build_end(b, s);
}

/* The node run again on x's element indices in place of input 0 (its other inputs and
 * attributes kept): where each output element came from. */
static AmpValue *moved_indices(AmpGradCtx *c, const char *what) {
    AmpNode *n = c->n;
    AmpValue *in[8] = {0};
    if (n->n_inputs > 8) {
        amp_grad_unsupported(c, "more than 8 inputs");
        return NULL;
    }
    in[0] = amp_grad_iota_like(c, IN(c, 0));
    for (int i = 1; i < n->n_inputs; i++) in[i] = n->inputs[i];
    AmpNode *m = amp_build_start(B(c), n->op_type, what, in, n->n_inputs, 1);
    amp_grad_copy_attrs(c, m);
    return amp_build_end(B(c), m);
}

/* Slice (any starts, ends, axes, steps, negative ones too) and Tile: g scattered back to
 * where its elements were read (a tiled element gets the sum of its copies). */
void amp_grad_slice(AmpGradCtx *c) { c->gx[0] = amp_grad_scatter_back(c, G(c), moved_indices(c, "slice_from"), IN(c, 0)); }
void amp_grad_tile(AmpGradCtx *c) { c->gx[0] = amp_grad_scatter_back(c, G(c), moved_indices(c, "tile_from"), IN(c, 0)); }

/* Broadcast: summed back over the axes it grew. */
void amp_grad_expand(AmpGradCtx *c) { c->gx[0] = amp_grad_unbroadcast(c, G(c), IN(c, 0)); }

/* The outputs' gradients concatenated along the axis (zeros for an output the loss does
 * not read), whatever gave the sizes (the `split` input or attribute, num_outputs, equal
 * parts). */
void amp_grad_split(AmpGradCtx *c) {
    AmpNode *n = c->n;
    int r = amp_grad_rank(c, IN(c, 0));
    if (r < 0) return;
    if (n->n_outputs > 16) {
        amp_grad_unsupported(c, "more than 16 outputs");
        return;
    }
    int64_t axis = amp_node_attr_int(n, "axis", 0);
    if (axis < 0) axis += r;
    AmpValue *parts[16];
    for (int k = 0; k < n->n_outputs; k++) parts[k] = c->gy[k] ? c->gy[k] : amp_grad_zeros_like(c, n->outputs[k]);
    AmpNode *cat = amp_build_start(B(c), "Concat", "split_d", parts, n->n_outputs, 1);
    amp_build_attr_int(B(c), cat, "axis", axis);
    c->gx[0] = amp_build_end(B(c), cat);
}

/* out = Where(cond, x, y): g goes to x where cond holds, to y elsewhere. */
void amp_grad_where(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *zero = amp_grad_scalar_like(c, G(c), 0.0);
    for (int i = 1; i <= 2; i++) {
        if (!amp_grad_wants(c, i)) continue;
        AmpValue *in[3] = {IN(c, 0), i == 1 ? G(c) : zero, i == 1 ? zero : G(c)};
        AmpValue *d = amp_build_end(b, amp_build_start(b, "Where", "where_d", in, 3, 1));
        c->gx[i] = amp_grad_unbroadcast(c, d, IN(c, i));
    }
}

/* Whether v is a constant boolean false (an initializer or a Constant node's output). */
static bool const_false(AmpValue *v) {
    AmpTensor *t = NULL;
    if (v->flags & AMP_VALUE_INITIALIZER)
        t = v->initializer;
    else if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        t = a ? a->t : NULL;
    }
    AmpBytes bytes;
    AmpStatus st = {AMP_OK, ""};
    if (!t || t->dtype != AMP_DT_BOOL || t->nelem != 1 || amp_tensor_bytes(v->graph->model, t, &bytes, &st)) return false;
    return bytes.len == 1 && bytes.data[0] == 0;
}

/* Dropout of an inference export (no training_mode input, or a constant false one) is the
 * identity. One that drops (--train-mode makes it so, with its mask output):
 * g * mask / (1 - ratio), the forward's own mask (g where training_mode is false at run
 * time). */
void amp_grad_dropout(AmpGradCtx *c) {
    AmpNode *n = c->n;
    if (n->n_inputs <= 2 || !n->inputs[2] || const_false(n->inputs[2])) {
        c->gx[0] = G(c);
        return;
    }
    AmpValue *mask = n->n_outputs > 1 ? n->outputs[1] : NULL;
    if (!mask) {
        amp_grad_unsupported(c, "training_mode may be true and the mask is not an output (--train-mode adds it)");
        return;
    }
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *ratio = n->inputs[1] ? n->inputs[1] : amp_grad_scalar_like(c, x, 0.5);
    if (ratio->type.dtype != x->type.dtype) ratio = amp_build_cast(b, "dropout_ratio", ratio, x->type.dtype);
    AmpValue *one = amp_grad_scalar_like(c, x, 1.0);
    /* A training_mode false at run time keeps everything unscaled (the mask all ones). */
    AmpValue *win[3] = {n->inputs[2], amp_build2(b, "Sub", "dropout_p", one, ratio), one};
    AmpValue *keep = amp_build_end(b, amp_build_start(b, "Where", "dropout_keep", win, 3, 1));
    AmpValue *kept = amp_build2(b, "Mul", "dropout_gm", G(c), amp_build_cast(b, "dropout_mask", mask, x->type.dtype));
    c->gx[0] = amp_build2(b, "Div", "dropout_d", kept, keep);
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

/* ReduceMax / ReduceMin: g split equally among the elements equal to the output (a tie
 * of k elements gives each g / k, as PyTorch's amax / amin). */
void amp_grad_reduce_max(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *y = c->n->outputs[0];
    int r = amp_grad_rank(c, x);
    int64_t axes[64];
    size_t n = 0;
    bool all = false;
    if (r < 0 || r > 64 || !amp_grad_reduce_axes(c, r, axes, &n, &all)) return;
    if (!amp_node_attr_int(c->n, "keepdims", 1) && n) y = amp_build_axes_op(b, "Unsqueeze", "rmax_keep", y, axes, n);
    AmpValue *hit = amp_build_cast(b, "rmax_hit", amp_build2(b, "Equal", "rmax_eq", x, y), x->type.dtype);
    AmpValue *count = amp_build_reduce(b, "ReduceSum", "rmax_count", hit, axes, n, 1);
    c->gx[0] = amp_build2(b, "Mul", "rmax_d", reduce_back(c), amp_build2(b, "Div", "rmax_share", hit, count));
}
