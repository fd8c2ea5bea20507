/* Private to the saver: its state, shared by save.c (the encoder: model, graphs, nodes,
 * tensors) and save_file.c (the entry points: files written atomically, external data,
 * byte buffers). */
#ifndef AMP_SAVE_IMPL_H
#define AMP_SAVE_IMPL_H

#include <stdio.h>

#include "ir/ir.h"
#include "ir/wire.h"

typedef struct SaveCtx {
    AmpModel *m;
    AmpStatus *st;
    AmpWBuf b;             /* the encoded model */
    FILE *data_file;       /* open while tensor data goes to an external file */
    size_t external_min;   /* ... for tensors at least this big */
    const char *data_name; /* its name relative to the model */
    uint64_t data_off;
    /* AUTO external data: the bytes of the tensors met so far (initializers and tensor
     * attributes); past auto_limit the encoding stops and restarts with a data file. */
    bool auto_external, restart;
    uint64_t tensor_bytes, auto_limit;
    bool failed; /* a tensor's bytes or a data file write failed */
    bool value_info; /* AmpSaveOptions.value_info */
    /* Which repeated scalar fields the schema declares packed. */
    bool packed_dims, packed_float, packed_int32, packed_int64, packed_double, packed_uint64;
    bool packed_floats, packed_ints;
} SaveCtx;

void amp_save_init(SaveCtx *c, AmpModel *m, AmpStatus *st);
/* Encodes the whole model into c->b. */
void amp_save_model(SaveCtx *c);
/* Encodes t's fields (a TensorProto without key and length) into c->b; `counted` tensors
 * count towards the AUTO external-data limit. */
void amp_save_tensor(SaveCtx *c, AmpTensor *t, bool counted);
/* Makes deferred 16-bit weight t's bytes a chunk at a time (b->chunk) and hands each to
 * put; false when put fails or out of memory. */
bool amp_wbuf_put_narrow(AmpWBuf *b, const AmpTensor *t, bool (*put)(void *ctx, const void *d, size_t len),
                         void *ctx);

#endif
