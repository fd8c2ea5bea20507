/* The runtime tensor's helpers (tensor.h): sizes, shapes, broadcasting, axes, and host
 * views of a model's tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"

uint64_t amp_shape_nelem(int rank, const int64_t *dims) {
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    return n;
}

size_t amp_buf_bytes(const AmpBuf *b) {
    size_t n = 0;
    amp_tensor_expected_bytes(b->dtype, b->nelem, &n);
    return n;
}

bool amp_is_f32_family(int dtype) {
    return dtype == AMP_DT_FLOAT || dtype == AMP_DT_FLOAT16 || dtype == AMP_DT_BFLOAT16;
}

bool amp_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out) {
    int r = ra > rb ? ra : rb;
    if (r > AMP_MAX_RANK) return false;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

void amp_broadcast_strides(int rin, const int64_t *din, int rout, const int64_t *dout, int64_t *strides) {
    int64_t s = 1;
    for (int i = rout - 1; i >= 0; i--) {
        int j = i - (rout - rin);
        if (j < 0) {
            strides[i] = 0;
            continue;
        }
        strides[i] = din[j] == 1 && dout[i] != 1 ? 0 : s;
        s *= din[j];
    }
}

int64_t amp_buf_get_i64(const AmpBuf *b, uint64_t i) {
    switch (b->dtype) {
    case AMP_DT_INT64: return ((const int64_t *)b->data)[i];
    case AMP_DT_INT32: return ((const int32_t *)b->data)[i];
    case AMP_DT_INT16: return ((const int16_t *)b->data)[i];
    case AMP_DT_INT8: return ((const int8_t *)b->data)[i];
    case AMP_DT_UINT64: return (int64_t)((const uint64_t *)b->data)[i];
    case AMP_DT_UINT32: return ((const uint32_t *)b->data)[i];
    case AMP_DT_UINT16: return ((const uint16_t *)b->data)[i];
    case AMP_DT_UINT8:
    case AMP_DT_BOOL: return ((const uint8_t *)b->data)[i];
    default: return 0;
    }
}

bool amp_norm_axis(int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

void amp_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count) {
    int64_t s = start, e = end, n = 0;
    if (s < 0) s += dim; /* no overflow: dim >= 0 */
    if (e < 0) e += dim;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        n = e > s ? 1 + (e - s - 1) / step : 0;
    } else if (step < 0) {
        s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        uint64_t ast = (uint64_t)0 - (uint64_t)step; /* |step| without overflow at INT64_MIN */
        n = s > e ? 1 + (int64_t)((uint64_t)(s - e - 1) / ast) : 0;
    }
    *first = n ? s : 0;
    *count = n;
}

void amp_buf_free(AmpBuf *b) {
    free(b->data);
    b->data = NULL;
}

AmpCode amp_buf_from_tensor(AmpModel *m, AmpTensor *t, AmpBuf *out, AmpStatus *st) {
    if (t->ndims > AMP_MAX_RANK)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "tensor '%s' has rank %zu; the executor takes up to %d",
                        t->name ? t->name : "", t->ndims, AMP_MAX_RANK);
    AmpBytes bytes;
    AmpCode rc = amp_tensor_bytes(m, t, &bytes, st);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = (int)t->ndims;
    for (size_t i = 0; i < t->ndims; i++) out->dims[i] = t->dims[i];
    out->nelem = t->nelem;
    out->data = (void *)bytes.data;
    return AMP_OK;
}

void amp_buf_describe(const AmpBuf *b, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "%s[", amp_dtype_name(b->dtype));
    for (int i = 0; i < b->rank && k + 24 < len; i++) {
        int w = snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)b->dims[i]);
        if (w > 0) k += (size_t)w;
    }
    if (k + 2 < len) buf[k] = ']', buf[k + 1] = '\0';
}

bool amp_buf_same_shape(const AmpBuf *a, const AmpBuf *b) {
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}
