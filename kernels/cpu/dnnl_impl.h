/* What the oneDNN files share (kernels/cpu/dnnl.c: the library, its threads and the
 * matmul primitive; dnnl_conv.c: the convolutions): the C API reached through function
 * pointers, the engine, each thread's stream and buffers. Private to those two files; the
 * rest of the CPU backend uses dnnl.h. Only where AMPC_HAVE_DNNL. */
#ifndef AMP_DNNL_IMPL_H
#define AMP_DNNL_IMPL_H

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "kernels/cpu/dnnl.h"

/* The C API functions used, each reached through p_<name>, of its declared type (set by
 * amp_dnnl_enabled's load, dnnl.c). */
#define AMP_DNNL_FNS(X)                                                                                            \
    X(dnnl_engine_create)                                                                                          \
    X(dnnl_stream_create)                                                                                          \
    X(dnnl_stream_destroy)                                                                                         \
    X(dnnl_stream_wait)                                                                                            \
    X(dnnl_memory_desc_init_by_strides)                                                                            \
    X(dnnl_memory_desc_get_size)                                                                                   \
    X(dnnl_memory_create)                                                                                          \
    X(dnnl_memory_destroy)                                                                                         \
    X(dnnl_matmul_desc_init)                                                                                       \
    X(dnnl_primitive_attr_create)                                                                                  \
    X(dnnl_primitive_attr_destroy)                                                                                 \
    X(dnnl_primitive_attr_set_output_scales)                                                                       \
    X(dnnl_primitive_attr_set_scratchpad_mode)                                                                     \
    X(dnnl_primitive_attr_set_post_ops)                                                                            \
    X(dnnl_post_ops_create)                                                                                        \
    X(dnnl_post_ops_destroy)                                                                                       \
    X(dnnl_post_ops_append_sum)                                                                                    \
    X(dnnl_post_ops_append_eltwise)                                                                                \
    X(dnnl_primitive_desc_create)                                                                                  \
    X(dnnl_primitive_desc_destroy)                                                                                 \
    X(dnnl_primitive_desc_query_md)                                                                                \
    X(dnnl_primitive_desc_query)                                                                                   \
    X(dnnl_primitive_create)                                                                                       \
    X(dnnl_primitive_destroy)                                                                                      \
    X(dnnl_primitive_execute)                                                                                      \
    X(dnnl_memory_desc_init_by_tag)                                                                                \
    X(dnnl_memory_desc_equal)                                                                                      \
    X(dnnl_reorder_primitive_desc_create)                                                                          \
    X(dnnl_dilated_convolution_forward_desc_init)                                                                  \
    X(dnnl_dilated_convolution_backward_data_desc_init)                                                            \
    X(dnnl_dilated_convolution_backward_weights_desc_init)                                                         \
    X(dnnl_dilated_deconvolution_forward_desc_init)

#define AMP_DNNL_EXTERN(f) extern __typeof__(f) *p_##f;
AMP_DNNL_FNS(AMP_DNNL_EXTERN)

extern dnnl_engine_t amp_dnnl_engine; /* the process's one CPU engine */

/* A thread's stream and buffers, made on its first call and freed when it exits. */
typedef struct AmpDnnlTls {
    dnnl_stream_t stream;
    void *scratch;
    size_t cap;
    void *ws; /* the convolutions' reordered tensors */
    size_t ws_cap;
} AmpDnnlTls;

/* The calling thread's (NULL when it cannot be made). After amp_dnnl_enabled. */
AmpDnnlTls *amp_dnnl_tls(void);

/* The thread count primitives are made and run with (part of their cache keys): the CPU
 * backend's knob where set, applied to this thread's OpenMP, else OpenMP's default; -1
 * where unknown. */
int amp_dnnl_threads_now(void);

/* The primitive caches' size: hash buckets, and the most entries kept (past it a problem's
 * primitive is made for its call and freed after). */
enum { AMP_DNNL_BUCKETS = 256, AMP_DNNL_MAX_ENTRIES = 4096 };

static inline dnnl_data_type_t amp_dnnl_dt(int dt) {
    return dt == AMP_DT_BFLOAT16 ? dnnl_bf16 : dnnl_f32;
}

#endif
