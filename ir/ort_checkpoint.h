/* onnxruntime-training's checkpoint file (the `checkpoint` of an artifact set: a
 * FlatBuffers buffer, schema ort_training_checkpoint.fbs, identifier "ODTC"): the
 * parameters' values and, once onnxruntime has trained and saved, the optimizer's state.
 * Read by a small bounds-checked FlatBuffers walker of our own (ir/ort_checkpoint.c). */
#ifndef AMP_ORT_CHECKPOINT_H
#define AMP_ORT_CHECKPOINT_H

#include "ir/ir.h"

typedef struct AmpOrtParam {
    AmpTensor *value;        /* name, dtype, dims and raw bytes, in the model's arena */
    bool requires_grad;      /* trainable (ModuleState.requires_grad_params) or frozen */
    AmpTensor *moment[2];    /* AdamW's momentum0/momentum1 from the optimizer state, or NULL */
} AmpOrtParam;

typedef struct AmpOrtCheckpoint {
    AmpOrtParam *params; /* in the file's order; arena */
    size_t n_params;
    bool has_optimizer;  /* an optimizer group was saved: step and learning rate below */
    int64_t step;        /* optimizer steps taken */
    float learning_rate; /* the group's initial learning rate */
} AmpOrtCheckpoint;

/* Reads the checkpoint at path; tensors go to m's arena (the model that will hold them).
 * A file that is not such a checkpoint, or is damaged, or keeps its tensors in external
 * data (not supported), is an error naming the file and what is wrong. */
AmpCode amp_ort_checkpoint_read(AmpModel *m, const char *path, AmpOrtCheckpoint *out, AmpStatus *st);
/* The same from bytes in memory (what the file read gives; tests and fuzzers). */
AmpCode amp_ort_checkpoint_parse(AmpModel *m, const uint8_t *buf, size_t len, AmpOrtCheckpoint *out,
                                 AmpStatus *st);
/* The parameter named name, or NULL. */
const AmpOrtParam *amp_ort_checkpoint_find(const AmpOrtCheckpoint *ck, const char *name);

#endif
