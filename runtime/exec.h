/* The graph interpreter under the session: runs one graph of a model node by node on
 * the CPU kernels (kernel chosen once per node at prepare), frees each intermediate
 * after its last use, and runs If / Loop bodies with access to the enclosing values. */
#ifndef AMP_EXEC_H
#define AMP_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"
#include "kernels.h"

typedef struct AmpExec AmpExec;

typedef struct AmpNamedBuf {
    const char *name;
    AmpBuf buf; /* borrowed: the executor never writes or frees input data */
} AmpNamedBuf;

typedef struct AmpExecOptions {
    bool training;     /* Dropout masks and BatchNorm statistics as in training */
    uint64_t seed;     /* for ops that draw random numbers */
} AmpExecOptions;

/* Prepares g (a graph of m) for running: every node gets its kernel, or the call fails
 * with AMP_ERR_UNSUPPORTED naming the first op the CPU backend cannot run. */
AmpCode amp_exec_prepare(AmpModel *m, AmpGraph *g, const AmpExecOptions *opt, AmpExec **out,
                         AmpStatus *st);

/* Runs the graph. Inputs are matched to graph inputs by name; a graph input that is
 * also an initializer may be left out (its initializer is used). outputs[i] receives
 * graph output i with malloc'd data the caller frees (amp_buf_free). */
AmpCode amp_exec_run(AmpExec *e, const AmpNamedBuf *inputs, size_t n_inputs, AmpBuf *outputs,
                     AmpStatus *st);

void amp_exec_free(AmpExec *e);

/* Frees data of a buffer returned by amp_exec_run. */
void amp_buf_free(AmpBuf *b);

/* An AmpBuf view of a tensor's canonical bytes (borrowed from the model). */
AmpCode amp_buf_from_tensor(AmpModel *m, AmpTensor *t, AmpBuf *out, AmpStatus *st);

#endif
