/* Sparse tensors (SparseTensorProto: values, indices, dims) as the loader meets them. A
 * graph's sparse_initializer and Constant's sparse_value are made dense, which is what
 * ONNX says they mean: the model then reads (and saves) them as any initializer or
 * constant. Their values and indices are loaded as any TensorProto (load_msg.c's
 * amp_load_sparse_dense: this file reads no tensor, so it stays out of the loader's
 * recursion), so external data obeys the same rules: inside the model's folder, within the
 * file. (Kept as they were,
 * a sparse initializer was "undefined" to every node reading it, and one whose data lay
 * at `../secret.bin` was copied into OUT unchecked.) Any other sparse tensor, an
 * attribute of an op ampc does not know, stays packed as it was, unless its data is
 * external: ampc does not carry such data into its output, so that is unsupported. */
#include <stdio.h>
#include <string.h>

#include "ir/load_impl.h"

/* SparseTensorProto's fields. */
enum { SP_VALUES = 1, SP_INDICES = 2, SP_DIMS = 3 };
/* TensorProto's external_data and data_location. */
enum { SP_T_EXTERNAL = 13, SP_T_LOCATION = 14 };

/* Dense data past this many bytes is refused (unsupported) rather than made: a few
 * hundred bytes of sparse tensor can name dims of any size. */
#define AMP_SPARSE_DENSE_MAX ((size_t)1 << 31)

/* The fields of [p, p + len); dims read as varints, packed or not. */
AmpCode amp_load_sparse_fields(LoadCtx *c, const uint8_t *p, size_t len, const char *where, AmpSparse *s) {
    memset(s, 0, sizeof *s);
    const uint8_t *q = p, *end = p + len;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        if (f.num == SP_VALUES || f.num == SP_INDICES) {
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            ++*(f.num == SP_VALUES ? &s->n_values : &s->n_indices);
        } else if (f.num == SP_DIMS) {
            /* One dim (a varint), or packed dims (a length-delimited run of varints). */
            bool packed = f.wt == AMP_WT_LEN;
            if (!packed && f.wt != AMP_WT_VARINT) return amp_load_malformed(c);
            const uint8_t *d = packed ? f.data : NULL, *dend = packed ? f.data + f.len : NULL;
            for (bool more = true; more; more = packed && d < dend) {
                uint64_t v = f.v;
                if (packed && d == dend) break; /* no dims at all */
                if (packed && !amp_wire_varint(&d, dend, &v)) return amp_load_malformed(c);
                if (s->ndims == AMP_MAX_RANK_SPARSE)
                    return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: a sparse tensor of more than %d dims", where,
                                    AMP_MAX_RANK_SPARSE);
                s->dims[s->ndims++] = (int64_t)v;
            }
        }
    }
    if (r < 0) return amp_load_malformed(c);
    if (!s->n_values) return amp_fail(c->st, AMP_ERR_INPUT, "%s: a sparse tensor without values", where);
    AmpCode rc = amp_load_merged(c, p, end, SP_VALUES, s->n_values, &s->values, &s->values_len);
    if (!rc && s->n_indices) rc = amp_load_merged(c, p, end, SP_INDICES, s->n_indices, &s->indices, &s->indices_len);
    return rc;
}

/* The linear position of entry k of the indices (NNZ linear positions, or NNZ rows of
 * ndims coordinates), or -1 when outside the dims. */
static int64_t linear_index(const AmpSparse *s, const int64_t *idx, bool coords, uint64_t k) {
    if (!coords) return idx[k];
    int64_t lin = 0;
    for (size_t d = 0; d < s->ndims; d++) {
        int64_t x = idx[k * s->ndims + d];
        if (x < 0 || x >= s->dims[d]) return -1;
        lin = lin * s->dims[d] + x;
    }
    return lin;
}

AmpCode amp_load_sparse_make(LoadCtx *c, const AmpSparse *s, AmpTensor *vals, AmpTensor *idx, const char *where,
                             AmpTensor **out) {
    AmpCode rc;
    const char *name = vals->name ? vals->name : "";
    /* The dense shape, and the bytes it takes. */
    uint64_t nelem = 1;
    for (size_t d = 0; d < s->ndims; d++) {
        if (s->dims[d] < 0)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: sparse tensor '%s' has negative dim %lld", where, name,
                            (long long)s->dims[d]);
        if (s->dims[d] && nelem > (uint64_t)INT64_MAX / (uint64_t)s->dims[d]) nelem = UINT64_MAX;
        else nelem *= (uint64_t)s->dims[d];
    }
    size_t esize = amp_dtype_bits(vals->dtype) / 8;
    if (!esize || amp_dtype_bits(vals->dtype) % 8)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: sparse tensor '%s' holds %s values, which ampc does not "
                        "make dense", where, name, amp_dtype_name(vals->dtype));
    if (nelem > AMP_SPARSE_DENSE_MAX / esize)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: sparse tensor '%s' would take over %zu bytes dense; ampc "
                        "makes sparse tensors dense, up to that size", where, name, AMP_SPARSE_DENSE_MAX);
    /* values: [NNZ]; indices: int64 [NNZ] (linear positions) or [NNZ, rank] (coordinates). */
    uint64_t nnz = vals->ndims == 1 ? (uint64_t)vals->dims[0] : UINT64_MAX;
    if (nnz == UINT64_MAX)
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: sparse tensor '%s': its values have %zu dims; they must have one "
                        "(NNZ)", where, name, vals->ndims);
    bool coords = idx && idx->ndims == 2;
    if (nnz && (!idx || idx->dtype != AMP_DT_INT64 || (idx->ndims != 1 && idx->ndims != 2) ||
                (uint64_t)idx->dims[0] != nnz || (coords && (uint64_t)idx->dims[1] != s->ndims)))
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: sparse tensor '%s': its indices must be int64 of shape [%llu] or "
                        "[%llu, %zu]", where, name, (unsigned long long)nnz, (unsigned long long)nnz, s->ndims);
    AmpBytes vb = {0}, ib = {0};
    if ((rc = amp_tensor_bytes(c->m, vals, &vb, c->st)) || (idx && (rc = amp_tensor_bytes(c->m, idx, &ib, c->st))))
        return rc;
    /* The dense tensor, zero where no index names an element. */
    AmpTensor *t = amp_arena_alloc(c->arena, sizeof *t);
    size_t bytes = (size_t)nelem * esize;
    uint8_t *data = bytes ? amp_arena_alloc(c->arena, bytes) : NULL;
    int64_t *dims = s->ndims ? amp_arena_calloc(c->arena, s->ndims, sizeof *dims) : NULL;
    int64_t *ix = nnz ? amp_arena_alloc_raw(c->arena, (size_t)nnz * (coords ? s->ndims : 1) * sizeof *ix) : NULL;
    if (!t || (bytes && !data) || (s->ndims && !dims) || (nnz && !ix)) return amp_load_oom(c);
    if (nnz) memcpy(ix, ib.data, (size_t)nnz * (coords ? s->ndims : 1) * sizeof *ix); /* raw data may lie unaligned */
    int64_t prev = -1;
    for (uint64_t k = 0; k < nnz; k++) {
        int64_t lin = linear_index(s, ix, coords, k);
        if (lin < 0 || (uint64_t)lin >= nelem)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: sparse tensor '%s': index %llu names no element of its %llu",
                            where, name, (unsigned long long)k, (unsigned long long)nelem);
        /* As onnx.checker has it: in ascending order, none twice. */
        if (lin <= prev)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: sparse tensor '%s': index %llu is not after the one before it "
                            "(indices ascend, none twice)", where, name, (unsigned long long)k);
        prev = lin;
        memcpy(data + (size_t)lin * esize, vb.data + (size_t)k * esize, esize);
    }
    if (s->ndims) memcpy(dims, s->dims, s->ndims * sizeof *dims);
    t->name = vals->name;
    t->doc_string = vals->doc_string;
    t->dtype = vals->dtype;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = s->ndims;
    t->dims = dims;
    t->nelem = nelem;
    t->raw = (AmpBytes){data, bytes};
    *out = t;
    return AMP_OK;
}

/* Whether TensorProto [p, p + len) keeps its data in a file. */
static bool tensor_external(const uint8_t *p, size_t len) {
    const uint8_t *q = p, *end = p + len;
    AmpWireField f;
    while (amp_wire_next(&q, end, &f) > 0)
        if ((f.num == SP_T_LOCATION && f.wt == AMP_WT_VARINT && f.v == 1) || f.num == SP_T_EXTERNAL) return true;
    return false;
}

AmpCode amp_load_sparse_check(LoadCtx *c, const uint8_t *p, size_t len, const char *where) {
    const uint8_t *q = p, *end = p + len;
    AmpWireField f;
    while (amp_wire_next(&q, end, &f) > 0)
        if ((f.num == SP_VALUES || f.num == SP_INDICES) && f.wt == AMP_WT_LEN && tensor_external(f.data, f.len))
            return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: a sparse tensor whose %s lie in an external file, "
                            "which ampc would not carry into its output", where,
                            f.num == SP_VALUES ? "values" : "indices");
    return AMP_OK;
}
