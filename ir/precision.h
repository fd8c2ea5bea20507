/* The precision of a node as the model states it, read from the dtypes of its values,
 * for the report (--report) and the DOT picture (--dump-dot): works on any model,
 * converted by ampc or not, and needs nothing from the AMP pass. */
#ifndef AMP_PRECISION_H
#define AMP_PRECISION_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

typedef enum AmpPrecision {
    AMP_PREC_NONE = 0, /* no float32/float16/bfloat16 data (shape, integer, double ops) */
    AMP_PREC_FP32,     /* float32 data and no 16-bit data */
    AMP_PREC_FP16,     /* some float16 data (16-bit) */
    AMP_PREC_BF16,     /* some bfloat16 data and no float16 (16-bit) */
    AMP_PREC_CAST,     /* Cast or CastLike (ai.onnx): a category of its own */
    AMP_PREC__COUNT
} AmpPrecision;

/* The values that count are the float-slot inputs of the op table (ops.def; for an op
 * not in the table, every input) and every output. A node is 16-bit when one of them is
 * float16 or bfloat16, fp32 when one is float32 and none is 16-bit, else none. Values
 * whose type is unknown do not count. */
AmpPrecision amp_node_precision(const AmpNode *n);
static inline bool amp_precision_is_16(AmpPrecision p) {
    return p == AMP_PREC_FP16 || p == AMP_PREC_BF16;
}
const char *amp_precision_name(AmpPrecision p); /* "fp32", "fp16", "bf16", "cast", "none" */

/* Short dtype names for labels: fp32, fp16, bf16, fp64, else amp_dtype_name's. */
const char *amp_dtype_short_name(int dt);

/* A Cast's source and target dtypes (AMP_DT_UNDEFINED when unknown): the target from the
 * output's type, else Cast's `to` or CastLike's second input. False if n is no cast. */
bool amp_cast_dtypes(const AmpNode *n, int *from, int *to);
/* A cast between float32 and float16/bfloat16 (either way): what AMP inserts. */
bool amp_cast_is_amp(const AmpNode *n);

/* The one counting rule of "X of Y float nodes" and "N casts", shared by --report's first
 * line (report.c) and the amp pass's summary (the success line), so that the two agree:
 * a node of a group (below) counts nowhere; a cast (Cast, CastLike) between float32 and
 * float16/bfloat16 is one of N, any other cast is counted apart; every other node whose
 * precision (amp_node_precision) is fp32 or 16-bit is one of Y (Constant nodes included:
 * their output is float data), and one of X when it is 16-bit. */
typedef struct AmpFloatCounts {
    size_t float_nodes; /* Y */
    size_t converted;   /* X */
    size_t casts;       /* N */
    size_t other_casts; /* casts of other types, or of unknown ones */
} AmpFloatCounts;

/* Adds node n (not its bodies) to c and returns its precision; *group is n's group
 * (amp_node_group: then nothing is added and AMP_PREC_NONE returned), else -1. */
AmpPrecision amp_count_node(const AmpNode *n, AmpFloatCounts *c, int *group);
/* The counts over every node of m: main graph, If/Loop/Scan bodies, training graphs. */
void amp_count_model(const AmpModel *m, AmpFloatCounts *c);

/* Node groups: machinery ampc inserts that the report and the picture show as one
 * group rather than node by node: the nodes of one origin (AmpNode.origin, set by the pass
 * that made them). In a file the origin is the name: the pass names every node it adds
 * with the group's prefix (the loss-scaling pass, docs/design.md "Loss scaling and the
 * gradient check": "amp_loss_scale/..."), and the loader sets the origin from it. The
 * list is in precision.c (one place). */
#define AMP_LOSS_SCALE_PREFIX "amp_loss_scale"
typedef struct AmpNodeGroup {
    AmpOrigin origin;
    const char *prefix; /* node-name prefix of that origin's nodes in a file */
    const char *label;  /* shown in the report and as the cluster's label */
} AmpNodeGroup;

enum { AMP_MAX_NODE_GROUPS = 8 }; /* room in reports; precision.c checks the list fits */

size_t amp_node_group_count(void);
const AmpNodeGroup *amp_node_group_at(size_t i); /* NULL past the end */
/* The index of n's group (by its origin), or -1 when it belongs to none. */
int amp_node_group(const AmpNode *n);
/* The origin a loaded node named `name` has: that of the group whose prefix starts it
 * (the first matching entry), else AMP_ORIGIN_MODEL. */
AmpOrigin amp_origin_of_name(const char *name);

#endif
