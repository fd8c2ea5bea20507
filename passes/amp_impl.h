/* The AMP pass's private state, shared by its files: amp.c (the entry: options, the
 * training rules, the summary), amp_color.c (painting nodes allow / deny), amp_cast.c
 * (casts and 16-bit types), amp_weights.c (weights stored in 16 bits), amp_explain.c
 * (--explain and the paint buckets), amp_opsets.c (which opsets take 16-bit types),
 * amp_range.c and amp_calib.c (static and measured ranges). */
#ifndef AMP_AMP_IMPL_H
#define AMP_AMP_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "passes/pass.h"
#include "passes/uses.h"

enum { AMP_NO_NODE = UINT32_MAX };

typedef enum AmpPaint { AMP_PAINT_NONE = 0, AMP_PAINT_ALLOW, AMP_PAINT_DENY } AmpPaint;

/* Why a node got its paint: the last rule that set it (--explain prints the chain). */
typedef enum AmpWhy {
    AMP_WHY_NONE = 0,   /* never painted: keeps its precision */
    AMP_WHY_LIST,       /* its op's list: allow or deny */
    AMP_WHY_KEEP_FP32,  /* matched a --keep-fp32 glob (detail) */
    AMP_WHY_LOSS,       /* the loss op or downstream of it (detail: the loss) */
    AMP_WHY_OPTIMIZER,  /* an optimizer op */
    AMP_WHY_UPDATE,     /* produces a value bound by training_info (detail: its name) */
    AMP_WHY_LOSS_SCALE, /* a node of the loss-scaling pass (name "amp_loss_scale/...") */
    AMP_WHY_SEED,       /* reads the backward seed <loss>_grad (detail: its name) */
    AMP_WHY_RANGE,      /* reads a value beyond the 16-bit range (detail: the constant) */
    AMP_WHY_INTEGERS,   /* a product reading positions (a Range cast to float, a folded
                           arange: rotary embeddings' angles), which 16 bits hold exactly
                           only up to 2048 (float16) or 256 (bfloat16) (detail: its name) */
    AMP_WHY_CALIB,      /* reads or writes a value whose measured |x| passed the threshold
                           (detail: "calibration: max |x| ... > ...") */
    AMP_WHY_TABLE,      /* a Gather from a weight table (embeddings) of an inference graph */
    AMP_WHY_DENY_FWD,   /* deny spread forward from `from` */
    AMP_WHY_BETWEEN,    /* downstream of allow (reached from `down_from`) and upstream of
                           the allow node reached through `from` */
    AMP_WHY_CLEAR_PROP, /* allow spread through clear nodes from `from` */
    AMP_WHY_STATS       /* the statistics of a decomposed LayerNorm painted 16-bit */
} AmpWhy;

/* Why a node cannot compute in 16 bits (0: it can). */
typedef enum AmpInelig {
    AMP_ELIGIBLE = 0,
    AMP_INELIG_CLASS,       /* unknown op, or in no list */
    AMP_INELIG_NO_SLOTS,    /* the op table marks no float data input */
    AMP_INELIG_NO_F32,      /* no float data input is float32 */
    AMP_INELIG_TYPE,        /* a float data input is not float32 (16-bit already, double) */
    AMP_INELIG_UNKNOWN,     /* a float data input's type is unknown */
    AMP_INELIG_OPSET,       /* the op takes the 16-bit type only from a later opset */
    AMP_INELIG_CAST_OPSET   /* bfloat16 needs Cast-13: the model imports an older opset */
} AmpInelig;

/* Traversal sets of TensorFlow's algorithm (AmpNodeInfo.flags). */
enum {
    AMP_NF_UPSTREAM = 1u << 0,   /* deny/infer node, or clear node upstream of one */
    AMP_NF_DOWN_ALLOW = 1u << 1, /* allow node, or clear/infer node downstream of one */
    AMP_NF_UP_ALLOW = 1u << 2,   /* visited going upstream from an allow node */
    AMP_NF_CLEAR_SEEN = 1u << 3, /* visited by the spread through clear nodes */
    AMP_NF_FORCED = 1u << 4,     /* painted deny by a rule above the lists */
    AMP_NF_STATS = 1u << 5       /* computes a decomposed LayerNorm's statistics or division */
};

/* One node of the model (main graph, subgraphs, training graphs). */
typedef struct AmpNodeInfo {
    AmpNode *node;
    uint32_t from, down_from; /* indices of the neighbours a spread came from */
    const char *detail;       /* glob, loss or bound value named by `why` */
    unsigned char cls;        /* AmpOpClass after edits and level */
    unsigned char paint;      /* AmpPaint */
    unsigned char why;        /* AmpWhy */
    unsigned char inelig;     /* AmpInelig */
    unsigned char flags;      /* AMP_NF_* */
    unsigned char group;      /* AmpFuseKind of the decomposed op it is part of, or 0 */
} AmpNodeInfo;

typedef struct AmpCastMap AmpCastMap; /* (graph, value) -> its 16-bit copy; amp_cast.c */

/* A graph of the model and where its own nodes are in AmpRun.ni (in list order). */
typedef struct AmpRunGraph {
    AmpGraph *g;
    size_t first, n;    /* r->ni[first, first + n) */
    size_t n_constants; /* Constant nodes among them (amp_weights looks at those) */
} AmpRunGraph;

typedef struct AmpRun {
    AmpModel *m;
    const AmpPassOptions *opt;
    AmpStatus *st;
    int dt;               /* AMP_DT_FLOAT16 or AMP_DT_BFLOAT16 */
    const char *dt_short; /* "fp16" or "bf16": the suffix of names the pass makes */
    AmpOpClass cls[AMP_OP__COUNT];
    int min_opset[AMP_OP__COUNT]; /* amp_op_min_opsets_16 for dt */
    int64_t opset_default;        /* the model's ai.onnx opset (amp_collect); -1 before */
    AmpNodeInfo *ni;              /* every node; AmpNode.mark is its index + 1 (left so) */
    size_t n, cap;
    AmpRunGraph *graphs;          /* every graph, outer ones first (amp_model_walk's order) */
    size_t n_graphs, cap_graphs;
    bool training;
    AmpValue *loss;       /* training graphs only */
    /* Counts for the summary. */
    size_t n_float, n_16, n_casts, n_weights16, n_weights_kept;
    size_t n_range;           /* nodes kept float32 for values beyond the 16-bit range */
    const char *range_first;  /* the first such constant (amp_range.c's detail) */
    size_t n_calib;           /* nodes kept float32 by measured ranges (amp_calib.c) */
    size_t n_ints;            /* products of integers cast to float kept float32 */
    const char *ints_first;   /* the first one's name */
    const char *calib_first;  /* the first one's detail */
    /* What the range rule knows of the values it met, among them the largest magnitude of
     * each float32 initializer read, which the weights rule then need not scan again. */
    struct AmpRangeMap *scanned;
} AmpRun;

/* The node's index in r->ni, or AMP_NO_NODE for a node the pass made. */
static inline uint32_t amp_idx(const AmpNode *n) {
    return n->mark > 0 ? (uint32_t)(n->mark - 1) : AMP_NO_NODE;
}

/* Whether input `slot` of n carries float data that may change precision. */
bool amp_float_slot(const AmpNode *n, int slot);
static inline bool amp_is_f32(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR && v->type.dtype == AMP_DT_FLOAT;
}
/* Whether a node of graph `in` reads values of g as if it were one of g's: the same graph,
 * or g the main graph and `in` a training algorithm (ONNX runs a step as the main graph
 * concatenated with the algorithm: the colouring spreads across, and a 16-bit value of
 * the main graph serves the algorithm's 16-bit readers as it would serve its own). */
bool amp_same_step(const AmpModel *m, const AmpGraph *in, const AmpGraph *g);
/* Whether use (n, slot) reads its value as 16-bit data: n is painted allow, in `g` (or in a
 * training algorithm, for g the main graph: a step runs them as one graph). */
bool amp_reads_16(const AmpRun *r, const AmpGraph *g, const AmpNode *n, int slot);
/* Whether n's input `slot` is read for its shape only (Shape, Size): any type serves, so a
 * 16-bit value needs no Cast back to float32 for it. */
bool amp_reads_shape_only(const AmpNode *n, int slot);

/* amp_opsets.c: for every op, the first ai.onnx opset at which it takes `dtype` (float16
 * or bfloat16), from ops.def's OPSETS column: 0 (AMP_OPSET_ANY) for ops not checked,
 * INT32_MAX (AMP_OPSET_NONE) for never. */
void amp_op_min_opsets_16(int dtype, int out[AMP_OP__COUNT]);

AmpCode amp_collect(AmpRun *r);                 /* amp_color.c: fills r->ni */
/* amp_color.c: the rule above the lists that the node itself decides (an optimizer op, a
 * node of the loss-scaling pass), AMP_WHY_NONE for none; amp_collect applies it on its
 * visit. */
AmpWhy amp_own_rule(const AmpNode *n);
AmpCode amp_color(AmpRun *r);                   /* the painting, in TF's order; out of memory is an error */
/* amp_range.c: readers of values beyond the 16-bit range are forced deny; how many, and
 * the first constant found beyond range (NULL: none). */
AmpCode amp_range_rule(AmpRun *r, size_t *n_forced, const char **first);
/* amp_range.c: allow-list nodes (MatMul, Gemm, ...) reading positions as float data (a
 * Range's integers moved and cast to float, or a constant arange past the 16-bit type's
 * exact integers) are forced deny; how many (the first in *first). */
AmpCode amp_integers_rule(AmpRun *r, size_t *n_forced, const char **first);
/* The largest magnitude (float32 bits) of float32 initializer v, when the range rule
 * scanned it; amp_range_free frees what it keeps. */
bool amp_range_most(const AmpRun *r, const AmpValue *v, uint32_t *most);
void amp_range_free(AmpRun *r);
/* amp_calib.c: nodes reading or writing a value whose measured |x| (opt->calib) passes
 * opt->calib_max_activation, or stays below opt->calib_min_activation, are forced deny;
 * how many, and the first one's detail. */
AmpCode amp_calib_rule(AmpRun *r, size_t *n_forced, const char **first);
AmpInelig amp_eligibility(const AmpRun *r, const AmpNode *n, AmpOpClass c);
AmpCode amp_rewrite(AmpRun *r);                 /* amp_cast.c */
AmpCode amp_weights(AmpRun *r, const AmpRunGraph *rg); /* amp_weights.c: before rg->g is rewritten */
/* Whether a 16-bit node of g reads v as float data and every other reader reads only its
 * shape. */
bool amp_read_only_by_16(const AmpRun *r, const AmpGraph *g, const AmpValue *v);
void amp_explain(const AmpRun *r, const char *name, FILE *f); /* amp_explain.c */
void amp_paint_buckets(const AmpRun *r, FILE *f);
const char *amp_inelig_text(const AmpRun *r, const AmpNode *n, AmpInelig why, char *buf, size_t len);

#endif
