/* Pad's attributes and geometry, every backend's (ops/pad.h). */
#include <string.h>

#include "ops/cast_engine.h" /* amp_sh_convert */
#include "ops/kernel_out.h"
#include "ops/pad.h"
#include "ops/slice.h" /* amp_axis_once */

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

const char *amp_pad_mode_name(int mode) {
    return mode >= 0 && mode < 4 ? pad_modes[mode] : "?";
}

int amp_pad_mode(const AmpNode *n) {
    const char *ms = amp_node_attr_string(n, "mode", "constant");
    for (int i = 0; i < 4; i++)
        if (strcmp(ms, pad_modes[i]) == 0) return i;
    return -1;
}

AmpCode amp_pad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpPadAttrs a = {.mode = amp_pad_mode(n)};
    if (a.mode < 0)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown mode '%s'", amp_node_attr_string(n, "mode", "constant"));
    if (opset < 11) {
        a.pads_name = amp_node_attr(n, "pads") ? "pads" : "paddings";
        const AmpAttr *pa = amp_node_attr(n, a.pads_name);
        a.np = pa ? pa->n_ints : 0;
        for (size_t i = 0; i < a.np && i < 2 * AMP_MAX_RANK; i++) a.pads[i] = pa->ints[i];
        a.value = amp_node_attr_float(n, "value", 0.0f);
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_pad_attr_values(AmpKernelCtx *k, const AmpPadAttrs *at, const AmpBuf *x, int64_t *pads, size_t *np,
                            void *cval) {
    int r = x->rank;
    if (at->np > 2 * (size_t)r)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %zu values, at most %zu allowed", at->pads_name, at->np,
                               2 * (size_t)r);
    *np = at->np;
    memcpy(pads, at->pads, at->np * sizeof *pads);
    float v = at->value;
    if (v != 0.0f && at->mode == AMP_PAD_CONSTANT) {
        if (!amp_sh_convertible(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
        return amp_sh_convert(k, &v, AMP_DT_FLOAT, cval, x->dtype, 1);
    }
    return AMP_OK;
}

AmpCode amp_pad_geom(AmpKernelCtx *k, int mode, const AmpBuf *x, const int64_t *pads, size_t np, const int64_t *axes,
                     size_t na, int64_t *before, int64_t *dims) {
    int r = x->rank;
    int64_t every[AMP_MAX_RANK], after[AMP_MAX_RANK] = {0};
    if (na) {
        if (np != 2 * na) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for %zu axes", np, na);
    } else {
        if (np != 2 * (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for rank %d", np, r);
        na = (size_t)r;
        for (int d = 0; d < r; d++) every[d] = d;
        axes = every;
    }
    bool seen[AMP_MAX_RANK] = {false};
    for (int d = 0; d < r; d++) before[d] = 0;
    for (size_t i = 0; i < na; i++) {
        int a;
        AmpCode rc = amp_axis_once(k, axes[i], r, seen, &a);
        if (rc) return rc;
        before[a] = pads[i], after[a] = pads[i + na];
    }
    const int64_t lim = INT64_C(1) << 61;
    for (int d = 0; d < r; d++) {
        if (before[d] > lim || before[d] < -lim || after[d] > lim || after[d] < -lim)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d are too large", d);
        /* |before + after| <= 2^62, but the axis itself may be up to INT64_MAX (empty) */
        int64_t grow = before[d] + after[d];
        if (grow > 0 && x->dims[d] > INT64_MAX - grow)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d overflow int64 (%lld + %lld)", d,
                                   (long long)x->dims[d], (long long)grow);
        dims[d] = x->dims[d] + grow;
        if (dims[d] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d crop more than the axis holds", d);
        if (dims[d] > 0 && x->dims[d] == 0 && mode != AMP_PAD_CONSTANT)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "cannot %s-pad the empty axis %d", pad_modes[mode], d);
    }
    return AMP_OK;
}
