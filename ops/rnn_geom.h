/* The geometry of the recurrent ops RNN, GRU and LSTM below every backend
 * (ops/rnn_geom.c): X's sequence, batch and input sizes under the layout, the hidden size,
 * every input's shape checked against them and the outputs' checked. The CPU kernels
 * (kernels/cpu/rnn.c) compute with it; their activations, clip and directions' order stay
 * their own attributes. */
#ifndef AMP_OPS_RNN_GEOM_H
#define AMP_OPS_RNN_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"

/* The attributes that shape the inputs and outputs, as a backend's prepare function
 * parses them: the first member of its attributes, which the geometry reads as these. */
typedef struct AmpRnnShapeAttrs {
    int ndir;        /* 1 or 2 (bidirectional) */
    int layout;      /* 0: X (seq, batch, input), Y (seq, ndir, batch, H); 1: X (batch, seq, input),
                        Y (batch, seq, ndir, H) */
    bool has_hidden; /* hidden_size given (else R's last dim) */
    int64_t hidden;
} AmpRnnShapeAttrs;

typedef struct AmpRnnGeom {
    int gates; /* gate blocks stacked in W and R: 1 (RNN), 3 (GRU), 4 (LSTM) */
    int64_t seq, batch, input, hidden;
} AmpRnnGeom;

/* RNN's, GRU's and LSTM's AmpKernelGeomFn (by the node's op): X, W and R present and
 * 3-D, at most 6 inputs and 2 outputs (LSTM: 8 and 3), hidden in (0, INT_MAX / 4], W (ndir,
 * gates * H, input), R (ndir, gates * H, H), B (ndir, 2 * gates * H), initial_h and
 * initial_c (ndir, batch, H) (layout 1: (batch, ndir, H)), P (ndir, 3 * H), sequence_lens
 * an integer (batch) (AMP_ERR_INPUT naming what differs); Y, Y_h and Y_c checked: X's
 * dtype, Y (seq, ndir, batch, H), Y_h and Y_c as initial_h. The dtypes each backend takes
 * and its size limits stay its kernel's checks. */
AmpCode amp_rnn_geom(AmpKernelCtx *k, void *geom, bool *made);

#endif
