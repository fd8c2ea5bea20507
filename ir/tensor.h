/* The runtime tensor (AmpBuf) and its shape helpers: below both runtime/ and kernels/, so
 * the interpreter and every backend share one definition without including each other.
 * An AmpBuf's `data` is a backend's pointer: host memory for the CPU, device memory
 * elsewhere; only a backend's own kernels and copies dereference it. */
#ifndef AMP_TENSOR_H
#define AMP_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

#define AMP_MAX_RANK 8

/* A runtime tensor: dims[rank], nelem = product of dims. */
typedef struct AmpBuf {
    int dtype; /* AmpDType */
    int rank;
    int64_t dims[AMP_MAX_RANK];
    uint64_t nelem;
    void *data; /* nelem elements in ONNX raw layout; may be NULL when nelem == 0 */
} AmpBuf;

uint64_t amp_shape_nelem(int rank, const int64_t *dims);
/* Bytes of b's elements (0 for a dtype with no byte size). */
size_t amp_buf_bytes(const AmpBuf *b);
/* Same dtype, rank and dims. */
bool amp_buf_same_shape(const AmpBuf *a, const AmpBuf *b);
/* "float[3,4]" into buf (len bytes). */
void amp_buf_describe(const AmpBuf *b, char *buf, size_t len);
/* float32, float16 or bfloat16: the storage types the float kernels take. */
bool amp_is_f32_family(int dtype);

/* Numpy-style broadcast of two shapes; false when they do not broadcast. */
bool amp_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out);
/* Element strides of an input of shape (rin, din) read at the indices of an output of
 * shape (rout, dout): 0 along broadcast axes. */
void amp_broadcast_strides(int rin, const int64_t *din, int rout, const int64_t *dout, int64_t *strides);

/* Normalises a possibly negative axis into [0, rank); false when out of range. */
bool amp_norm_axis(int64_t axis, int rank, int *out);

/* The elements Slice takes from an axis of `dim` elements, by the ONNX clamping rules
 * (negative start / end count from the end; then, for a positive step, start and end
 * clamped into [0, dim]; for a negative one start into [0, dim - 1], end into [-1, dim - 1]):
 * *first the index of the first (0 where none is taken) and *count how many. start and end
 * may be INT64_MIN / INT64_MAX ("to the end"); step 0 takes none. The one definition of
 * Slice's clamping: the shape function (ir/infer_shape.c), the shape arithmetic
 * (ir/infer_const.c) and every backend's kernel (ops/slice.c) call it. */
void amp_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count);

/* Host memory only: reads element i of an integer buffer (int8..int64, uint8..uint64,
 * bool) as int64. */
int64_t amp_buf_get_i64(const AmpBuf *b, uint64_t i);

/* A host AmpBuf view of a model tensor's canonical bytes (borrowed from the model). */
AmpCode amp_buf_from_tensor(AmpModel *m, AmpTensor *t, AmpBuf *out, AmpStatus *st);

/* Frees the data of a host buffer the runtime handed out (malloc'd). */
void amp_buf_free(AmpBuf *b);

#endif
