/* Type inference for the data-movement ops: Reshape, Flatten, Transpose, Squeeze,
 * Unsqueeze, Concat, Split, Slice, Gather*, Expand, Tile, Pad, DepthToSpace,
 * SpaceToDepth, Resize. All keep input 0's dtype; the work is in the shapes. */
#include <math.h>
#include <string.h>

#include "ir/infer_impl.h"

static int dt0(AmpInferCtx *c) {
    return amp_inf_dtype(c, 0);
}

/* Reads an int list that moved from an attribute to input `slot` at opset `since`.
 * The count, or -1 when it is given but cannot be read, or -2 when it is absent. */
static int ints_arg(AmpInferCtx *c, int64_t since, int slot, const char *attr, int64_t *out,
                    int max) {
    const AmpNode *n = c->n;
    if (amp_inf_from_input(n, c->opset, since, slot)) {
        if (!amp_inf_has_input(n, slot)) return -2;
        return amp_inf_const_ints(c, n->inputs[slot], out, max);
    }
    if (!amp_node_attr(n, attr)) return -2;
    return amp_inf_attr_ints(n, attr, out, max);
}

/* The -1 of a Reshape target: input elements / the other target dims. Symbolic dims
 * that appear on both sides cancel (N*3*4 into (N, -1) gives 12); a single symbolic
 * dim left over on the input side becomes the answer. Unknown otherwise. */
static AmpCode solve_minus_one(const AmpNode *n, const AmpInfShape *in, const AmpInfShape *tgt, int at,
                               AmpDim *out, AmpStatus *st) {
    const char *params[AMP_INF_MAX_RANK];
    int np = 0;
    int64_t num = 1, den = 1;
    const int64_t cap = (int64_t)1 << 52;
    *out = amp_dim_unknown();
    for (int i = 0; i < in->rank; i++) {
        AmpDim d = in->d[i];
        if (d.value >= 0) {
            if (d.value == 0) return AMP_OK; /* empty tensor: any value fits */
            if (num > cap / d.value) return AMP_OK;
            num *= d.value;
        } else if (d.param) {
            params[np++] = d.param;
        } else {
            return AMP_OK;
        }
    }
    for (int i = 0; i < tgt->rank; i++) {
        if (i == at) continue;
        AmpDim d = tgt->d[i];
        if (d.value > 0) {
            if (den > cap / d.value) return AMP_OK;
            den *= d.value;
            continue;
        }
        if (d.value == 0 || !d.param) return AMP_OK;
        int j = 0;
        while (j < np && strcmp(params[j], d.param) != 0) j++;
        if (j == np) return AMP_OK; /* a symbol the input lacks */
        params[j] = params[--np];
    }
    if (num % den) {
        if (np == 0)
            return amp_inf_fail(n, st, "cannot reshape %lld elements with this shape", (long long)num);
        return AMP_OK;
    }
    if (np == 0) *out = amp_dim_of(num / den);
    else if (np == 1 && num == den) *out = (AmpDim){-1, params[0]};
    return AMP_OK;
}

AmpCode amp_infer_reshape(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    AmpInfVal vals[AMP_INF_MAX_RANK];
    int k;
    bool have_in = amp_inf_shape(c, 0, &in);
    s.rank = -1;
    if ((opset > 0 && opset < 5) || (opset == 0 && !amp_inf_has_input(n, 1))) { /* Reshape-1 */
        int64_t sh[AMP_INF_MAX_RANK];
        k = amp_inf_attr_ints(n, "shape", sh, AMP_INF_MAX_RANK);
        for (int i = 0; i < k; i++) vals[i] = (AmpInfVal){true, sh[i], NULL};
    } else {
        k = amp_inf_has_input(n, 1) ? amp_inf_value_ints(c, n->inputs[1], vals, AMP_INF_MAX_RANK) : -1;
    }
    if (k < 0) {
        /* Values unknown: the rank is still the length of the shape input. */
        const AmpType *t = amp_inf_in(c, 1);
        if (t && t->rank == 1 && t->dims[0].value >= 0) amp_shape_unknown_dims(&s, (int)t->dims[0].value);
        return amp_inf_set(c, 0, dt0(c), &s);
    }
    bool allowzero = amp_node_attr_int(n, "allowzero", 0) != 0;
    int infer_at = -1;
    s.rank = k;
    for (int i = 0; i < k; i++) {
        AmpInfVal v = vals[i];
        if (!v.known) {
            s.d[i] = (AmpDim){-1, v.param};
        } else if (v.v == 0 && !allowzero) {
            s.d[i] = (have_in && i < in.rank) ? in.d[i] : amp_dim_unknown();
        } else if (v.v == -1) {
            if (infer_at >= 0) return amp_inf_fail(n, st, "shape has more than one -1");
            infer_at = i;
            s.d[i] = amp_dim_unknown();
        } else if (v.v < 0) {
            return amp_inf_fail(n, st, "shape has the invalid value %lld", (long long)v.v);
        } else {
            s.d[i] = amp_dim_of(v.v);
        }
    }
    if (infer_at >= 0 && have_in) {
        AmpDim rest;
        AmpCode rc = solve_minus_one(n, &in, &s, infer_at, &rest, st);
        if (rc) return rc;
        s.d[infer_at] = rest;
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_flatten(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = 2;
    s.d[0] = s.d[1] = amp_dim_unknown();
    if (amp_inf_shape(c, 0, &in)) {
        int64_t axis = amp_node_attr_int(n, "axis", 1);
        if (axis < 0) axis += in.rank;
        if (axis < 0 || axis > in.rank) return amp_inf_fail(n, st, "axis out of range");
        AmpDim a = amp_dim_of(1), b = amp_dim_of(1);
        for (int i = 0; i < in.rank; i++) {
            if (i < axis) a = amp_dim_mul(a, in.d[i]);
            else b = amp_dim_mul(b, in.d[i]);
        }
        s.d[0] = a;
        s.d[1] = b;
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_transpose(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &in)) {
        int64_t perm[AMP_INF_MAX_RANK];
        int k = amp_inf_attr_ints(n, "perm", perm, AMP_INF_MAX_RANK);
        if (k < 0) {
            for (int i = 0; i < in.rank; i++) perm[i] = in.rank - 1 - i;
            k = in.rank;
        }
        if (k != in.rank) return amp_inf_fail(n, st, "perm has %d entries for rank %d", k, in.rank);
        s.rank = k;
        for (int i = 0; i < k; i++) {
            int p = amp_inf_axis(perm[i], in.rank);
            if (p < 0) return amp_inf_fail(n, st, "perm entry %lld out of range", (long long)perm[i]);
            s.d[i] = in.d[p];
        }
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_squeeze(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    int64_t axes[AMP_INF_MAX_RANK];
    s.rank = -1;
    int k = ints_arg(c, 13, 1, "axes", axes, AMP_INF_MAX_RANK);
    if (amp_inf_shape(c, 0, &in) && k != -1) {
        bool drop[AMP_INF_MAX_RANK] = {false};
        bool ok = true;
        if (k == -2) { /* no axes: every dim of size 1, so every dim must be known */
            for (int i = 0; i < in.rank; i++) {
                if (!amp_dim_known(in.d[i])) ok = false;
                drop[i] = in.d[i].value == 1;
            }
        }
        for (int i = 0; i < k; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            if (a < 0) return amp_inf_fail(n, st, "axis %lld out of range", (long long)axes[i]);
            if (amp_dim_known(in.d[a]) && in.d[a].value != 1)
                return amp_inf_fail(n, st, "cannot squeeze axis %d of size %lld", a,
                                    (long long)in.d[a].value);
            drop[a] = true;
        }
        if (ok) {
            s.rank = 0;
            for (int i = 0; i < in.rank; i++)
                if (!drop[i]) s.d[s.rank++] = in.d[i];
        }
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_unsqueeze(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    int64_t axes[AMP_INF_MAX_RANK];
    s.rank = -1;
    int k = ints_arg(c, 13, 1, "axes", axes, AMP_INF_MAX_RANK);
    if (k >= 0 && amp_inf_shape(c, 0, &in) && in.rank + k <= AMP_INF_MAX_RANK) {
        int r = in.rank + k;
        bool ins[AMP_INF_MAX_RANK] = {false};
        for (int i = 0; i < k; i++) {
            int a = amp_inf_axis(axes[i], r);
            if (a < 0 || ins[a]) return amp_inf_fail(n, st, "bad axis %lld", (long long)axes[i]);
            ins[a] = true;
        }
        s.rank = r;
        for (int i = 0, j = 0; i < r; i++) s.d[i] = ins[i] ? amp_dim_of(1) : in.d[j++];
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_concat(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape s, b;
    s.rank = -1;
    int dt = AMP_DT_UNDEFINED;
    for (int i = 0; i < n->n_inputs && dt == AMP_DT_UNDEFINED; i++) dt = amp_inf_dtype(c, i);
    /* The rank is the first known one; the axis dim is a sum only if all are known. */
    int rank = -1;
    for (int i = 0; i < n->n_inputs && rank < 0; i++)
        if (amp_inf_shape(c, i, &b)) rank = b.rank;
    if (rank >= 0) {
        int ax = amp_inf_axis(amp_node_attr_int(n, "axis", 0), rank);
        if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", rank);
        amp_shape_unknown_dims(&s, rank);
        AmpDim sum = amp_dim_of(0);
        for (int i = 0; i < n->n_inputs; i++) {
            if (!amp_inf_has_input(n, i)) continue;
            if (!amp_inf_shape(c, i, &b)) {
                sum = amp_dim_unknown();
                continue;
            }
            if (b.rank != rank)
                return amp_inf_fail(n, st, "inputs of rank %d and %d", rank, b.rank);
            for (int d = 0; d < rank; d++)
                if (d != ax) s.d[d] = amp_dim_merge(s.d[d], b.d[d]);
            /* amp_dim_add makes an overflow unknown; known dims past int64 are an error
             * (empty inputs may have any dims) */
            if (amp_dim_known(sum) && amp_dim_known(b.d[ax]) && b.d[ax].value > INT64_MAX - sum.value)
                return amp_inf_fail(n, st, "the axis dims overflow int64 at input %d", i);
            sum = amp_dim_add(sum, b.d[ax]);
        }
        s.d[ax] = sum;
    }
    return amp_inf_set(c, 0, dt, &s);
}

AmpCode amp_infer_split(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in;
    int dt = dt0(c);
    int nout = n->n_outputs;
    if (!amp_inf_shape(c, 0, &in) || nout <= 0) {
        for (int i = 0; i < nout; i++) {
            AmpCode rc = amp_inf_set(c, i, dt, NULL);
            if (rc) return rc;
        }
        return AMP_OK;
    }
    int ax = amp_inf_axis(amp_node_attr_int(n, "axis", 0), in.rank);
    if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", in.rank);
    int64_t split[256];
    int k = nout <= 256 ? ints_arg(c, 13, 1, "split", split, nout) : -1;
    AmpDim total = in.d[ax];
    for (int i = 0; i < nout; i++) {
        AmpInfShape s = in;
        AmpDim d = amp_dim_unknown();
        if (k >= 0) {
            if (k != nout) return amp_inf_fail(n, st, "split has %d entries for %d outputs", k, nout);
            d = amp_dim_of(split[i]);
        } else if (k == -2 && amp_dim_known(total) && amp_inf_small(total.value)) {
            /* Equal parts; opset 18's num_outputs allows a smaller last part. */
            int64_t part = total.value / nout + (total.value % nout != 0);
            if (total.value % nout == 0) d = amp_dim_of(total.value / nout);
            else if (opset == 0 || opset >= 18)
                d = amp_dim_of(i < nout - 1 ? part : total.value - part * (nout - 1));
        }
        s.d[ax] = d;
        AmpCode rc = amp_inf_set(c, i, dt, &s);
        if (rc) return rc;
    }
    return AMP_OK;
}

AmpCode amp_infer_slice(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (!amp_inf_shape(c, 0, &in)) return amp_inf_set(c, 0, dt0(c), NULL);
    s = in;
    int64_t starts[AMP_INF_MAX_RANK], ends[AMP_INF_MAX_RANK], axes[AMP_INF_MAX_RANK],
        steps[AMP_INF_MAX_RANK];
    int ks, ke, ka, kp;
    bool from_inputs = amp_inf_from_input(n, opset, 10, 1);
    if (from_inputs) {
        ks = amp_inf_has_input(n, 1) ? amp_inf_const_ints(c, n->inputs[1], starts, AMP_INF_MAX_RANK) : -1;
        ke = amp_inf_has_input(n, 2) ? amp_inf_const_ints(c, n->inputs[2], ends, AMP_INF_MAX_RANK) : -1;
        ka = amp_inf_has_input(n, 3) ? amp_inf_const_ints(c, n->inputs[3], axes, AMP_INF_MAX_RANK) : -2;
        kp = amp_inf_has_input(n, 4) ? amp_inf_const_ints(c, n->inputs[4], steps, AMP_INF_MAX_RANK) : -2;
    } else {
        ks = amp_inf_attr_ints(n, "starts", starts, AMP_INF_MAX_RANK);
        ke = amp_inf_attr_ints(n, "ends", ends, AMP_INF_MAX_RANK);
        ka = amp_node_attr(n, "axes") ? amp_inf_attr_ints(n, "axes", axes, AMP_INF_MAX_RANK) : -2;
        kp = -2;
    }
    if (ka == -1) { /* axes given but unknown: any dim may change */
        amp_shape_unknown_dims(&s, in.rank);
        return amp_inf_set(c, 0, dt0(c), &s);
    }
    int cnt = ks >= 0 ? ks : ke >= 0 ? ke : -1;
    if (ka == -2) { /* default axes 0..len-1; the length from whatever is known */
        if (cnt < 0) {
            const AmpType *t = amp_inf_in(c, 1);
            cnt = (t && t->rank == 1 && t->dims[0].value >= 0) ? (int)t->dims[0].value : -1;
        }
        if (cnt < 0 || cnt > in.rank) {
            amp_shape_unknown_dims(&s, in.rank);
            return amp_inf_set(c, 0, dt0(c), &s);
        }
        ka = cnt;
        for (int i = 0; i < ka; i++) axes[i] = i;
    }
    bool known = ks == ka && ke == ka && (kp == -2 || kp == ka);
    for (int i = 0; i < ka; i++) {
        int a = amp_inf_axis(axes[i], in.rank);
        if (a < 0) return amp_inf_fail(n, st, "axis %lld out of range", (long long)axes[i]);
        int64_t step = kp == -2 ? 1 : steps[i];
        if (known && step == 0) return amp_inf_fail(n, st, "step 0 on axis %d", a);
        int64_t first, count;
        if (known && amp_dim_known(in.d[a])) {
            amp_slice_range(in.d[a].value, starts[i], ends[i], step, &first, &count);
            s.d[a] = amp_dim_of(count);
        } else
            s.d[a] = amp_dim_unknown();
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* Gather: data[:axis] + indices.shape + data[axis+1:]. */
AmpCode amp_infer_gather(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape data, idx, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &data) && amp_inf_shape(c, 1, &idx) &&
        data.rank - 1 + idx.rank <= AMP_INF_MAX_RANK) {
        int ax = amp_inf_axis(amp_node_attr_int(n, "axis", 0), data.rank);
        if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", data.rank);
        s.rank = 0;
        for (int i = 0; i < ax; i++) s.d[s.rank++] = data.d[i];
        for (int i = 0; i < idx.rank; i++) s.d[s.rank++] = idx.d[i];
        for (int i = ax + 1; i < data.rank; i++) s.d[s.rank++] = data.d[i];
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_gather_elements(AmpInferCtx *c) {
    AmpInfShape idx;
    amp_inf_shape(c, 1, &idx);
    return amp_inf_set(c, 0, dt0(c), &idx);
}

/* GatherND: indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]. */
AmpCode amp_infer_gather_nd(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape data, idx, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &data) && amp_inf_shape(c, 1, &idx) && idx.rank >= 1 &&
        amp_dim_known(idx.d[idx.rank - 1])) {
        int64_t b = amp_node_attr_int(n, "batch_dims", 0);
        int64_t last = idx.d[idx.rank - 1].value;
        if (b < 0 || b > data.rank || last > data.rank - b)
            return amp_inf_fail(n, st, "indices reach past the data's rank %d", data.rank);
        s.rank = 0;
        for (int i = 0; i < idx.rank - 1; i++) s.d[s.rank++] = idx.d[i];
        for (int64_t i = b + last; i < data.rank && s.rank < AMP_INF_MAX_RANK; i++)
            s.d[s.rank++] = data.d[i];
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* Expand: broadcast of the input and the target shape (rank only if values unknown). */
AmpCode amp_infer_expand(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, tgt, s;
    s.rank = -1;
    AmpInfVal vals[AMP_INF_MAX_RANK];
    int k = amp_inf_has_input(n, 1) ? amp_inf_value_ints(c, n->inputs[1], vals, AMP_INF_MAX_RANK) : -1;
    bool have_in = amp_inf_shape(c, 0, &in);
    if (k >= 0) {
        tgt.rank = k;
        for (int i = 0; i < k; i++)
            tgt.d[i] = vals[i].known ? amp_dim_of(vals[i].v) : (AmpDim){-1, vals[i].param};
        if (have_in) {
            s = in;
            AmpCode rc = amp_inf_broadcast_into(n, &s, &tgt, st);
            if (rc) return rc;
        }
    } else if (have_in) {
        const AmpType *t = amp_inf_in(c, 1);
        if (t && t->rank == 1 && t->dims[0].value >= 0)
            amp_shape_unknown_dims(&s, in.rank > t->dims[0].value ? in.rank : (int)t->dims[0].value);
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_tile(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &in)) {
        int64_t rep[AMP_INF_MAX_RANK];
        int k = amp_inf_has_input(n, 1) ? amp_inf_const_ints(c, n->inputs[1], rep, AMP_INF_MAX_RANK) : -1;
        s = in;
        if (k >= 0 && k != in.rank) return amp_inf_fail(n, st, "repeats has %d entries for rank %d", k, in.rank);
        for (int i = 0; i < in.rank; i++)
            s.d[i] = k >= 0 ? amp_dim_mul(in.d[i], amp_dim_of(rep[i] < 0 ? -1 : rep[i])) : amp_dim_unknown();
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

/* Pad: pads as attribute (before 11; `paddings` in Pad-1) or input, axes input (18+). */
AmpCode amp_infer_pad(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (!amp_inf_shape(c, 0, &in)) return amp_inf_set(c, 0, dt0(c), NULL);
    int64_t pads[2 * AMP_INF_MAX_RANK], axes[AMP_INF_MAX_RANK];
    int kp = ints_arg(c, 11, 1, "pads", pads, 2 * AMP_INF_MAX_RANK);
    if (kp == -2 && !amp_inf_from_input(n, opset, 11, 1))
        kp = amp_inf_attr_ints(n, "paddings", pads, 2 * AMP_INF_MAX_RANK);
    int ka = amp_inf_has_input(n, 3) ? amp_inf_const_ints(c, n->inputs[3], axes, AMP_INF_MAX_RANK) : -2;
    s = in;
    if (kp < 0 || ka == -1) {
        amp_shape_unknown_dims(&s, in.rank);
        return amp_inf_set(c, 0, dt0(c), &s);
    }
    if (ka == -2) {
        ka = in.rank;
        for (int i = 0; i < ka; i++) axes[i] = i;
    }
    if (kp != 2 * ka) return amp_inf_fail(n, st, "pads has %d entries for %d axes", kp, ka);
    for (int i = 0; i < ka; i++) {
        int a = amp_inf_axis(axes[i], in.rank);
        if (a < 0) return amp_inf_fail(n, st, "axis %lld out of range", (long long)axes[i]);
        /* The axis may be up to INT64_MAX (an empty tensor); pads past +-2^61 are the
         * kernel's error, so their sum stays defined and only the last add is checked. */
        const int64_t lim = INT64_C(1) << 61;
        if (!amp_dim_known(in.d[a]) || pads[i] > lim || pads[i] < -lim || pads[i + ka] > lim ||
            pads[i + ka] < -lim) {
            s.d[a] = amp_dim_unknown();
            continue;
        }
        int64_t grow = pads[i] + pads[i + ka];
        if (grow > 0 && in.d[a].value > INT64_MAX - grow)
            return amp_inf_fail(n, st, "pads on axis %d overflow int64 (%lld + %lld)", a, (long long)in.d[a].value,
                                (long long)grow);
        int64_t v = in.d[a].value + grow;
        s.d[a] = v >= 0 ? amp_dim_of(v) : amp_dim_unknown();
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

static AmpCode space_depth(AmpInferCtx *c, bool to_space) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &in)) {
        if (in.rank != 4) return amp_inf_fail(n, st, "input must have rank 4, not %d", in.rank);
        int64_t b = amp_node_attr_int(n, "blocksize", 0);
        if (b <= 0 || b > (1 << 20)) return amp_inf_fail(n, st, "blocksize %lld out of range", (long long)b);
        AmpDim bb = amp_dim_of(b * b), b1 = amp_dim_of(b);
        s = in;
        if (to_space) {
            s.d[1] = amp_dim_known(in.d[1]) ? amp_dim_of(in.d[1].value / (b * b)) : amp_dim_unknown();
            s.d[2] = amp_dim_mul(in.d[2], b1);
            s.d[3] = amp_dim_mul(in.d[3], b1);
        } else {
            s.d[1] = amp_dim_mul(in.d[1], bb);
            s.d[2] = amp_dim_known(in.d[2]) ? amp_dim_of(in.d[2].value / b) : amp_dim_unknown();
            s.d[3] = amp_dim_known(in.d[3]) ? amp_dim_of(in.d[3].value / b) : amp_dim_unknown();
        }
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}

AmpCode amp_infer_depth_to_space(AmpInferCtx *c) {
    return space_depth(c, true);
}

AmpCode amp_infer_space_to_depth(AmpInferCtx *c) {
    return space_depth(c, false);
}

/* Resize: sizes if given, else floor(dim * scale); `axes` (opset 18) selects dims.
 * Opset 10 had inputs (X, scales); 11+ (X, roi, scales, sizes). */
AmpCode amp_infer_resize(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    if (!amp_inf_shape(c, 0, &in)) return amp_inf_set(c, 0, dt0(c), NULL);
    int scales_slot = (opset > 0 && opset < 11) ? 1 : 2;
    int64_t axes[AMP_INF_MAX_RANK], sizes[AMP_INF_MAX_RANK];
    double scales[AMP_INF_MAX_RANK];
    int ka = amp_inf_attr_ints(n, "axes", axes, AMP_INF_MAX_RANK);
    if (ka < 0) {
        ka = in.rank;
        for (int i = 0; i < ka; i++) axes[i] = i;
    }
    s = in;
    const char *policy = amp_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    int kz = amp_inf_has_input(n, 3) && scales_slot == 2
                 ? amp_inf_const_ints(c, n->inputs[3], sizes, AMP_INF_MAX_RANK)
                 : -1;
    int kc = amp_inf_has_input(n, scales_slot)
                 ? amp_inf_const_doubles(c, n->inputs[scales_slot], scales, AMP_INF_MAX_RANK)
                 : -1;
    bool larger = strcmp(policy, "not_larger") == 0, smaller = strcmp(policy, "not_smaller") == 0;
    if (kz == ka && !larger && !smaller) {
        for (int i = 0; i < ka; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            if (a < 0) return amp_inf_fail(n, st, "axis out of range");
            s.d[a] = sizes[i] >= 0 ? amp_dim_of(sizes[i]) : amp_dim_unknown();
        }
    } else if (kz == ka && ka > 0) {
        /* One scale for every resized axis, the smallest (not_larger) or largest
         * (not_smaller) of sizes[i] / dim, and each output round(scale * dim), half up, as
         * the reference and the CPU kernel (kernels/cpu/resize.c) compute it. */
        double sc = 0;
        bool known = true;
        for (int i = 0; i < ka && known; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            if (a < 0) return amp_inf_fail(n, st, "axis out of range");
            known = amp_dim_known(in.d[a]) && in.d[a].value > 0 && sizes[i] >= 0;
            double r = known ? (double)sizes[i] / (double)in.d[a].value : 0;
            sc = i == 0 ? r : larger ? fmin(sc, r) : fmax(sc, r);
        }
        for (int i = 0; i < ka; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            double v = known ? floor(sc * (double)in.d[a].value + 0.5) : -1;
            s.d[a] = (v >= 0 && v < 9.0e15) ? amp_dim_of((int64_t)v) : amp_dim_unknown();
        }
    } else if (kc == ka && kc > 0) {
        for (int i = 0; i < ka; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            if (a < 0) return amp_inf_fail(n, st, "axis out of range");
            double v = amp_dim_known(in.d[a]) ? floor((double)in.d[a].value * scales[i]) : -1;
            s.d[a] = (v >= 0 && v < 9.0e15) ? amp_dim_of((int64_t)v) : amp_dim_unknown();
        }
    } else {
        for (int i = 0; i < ka; i++) {
            int a = amp_inf_axis(axes[i], in.rank);
            if (a >= 0) s.d[a] = amp_dim_unknown();
        }
    }
    return amp_inf_set(c, 0, dt0(c), &s);
}
