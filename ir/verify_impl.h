/* Private to the verifier (verify.c walks the model, verify_op.c checks a node against its
 * op's rules, verify_train.c training_info's names and bindings; verify_common.c holds what
 * they share). */
#ifndef AMP_VERIFY_IMPL_H
#define AMP_VERIFY_IMPL_H

#include "ir/ir.h"

typedef struct Ctx {
    AmpModel *m;
    AmpStatus *st;
    size_t n_nodes; /* nodes walked, every graph */
    int64_t default_opset;  /* ai.onnx's version in opset_import; 0: not imported */
    bool default_imported;  /* ... or nothing is imported (IR versions 1 and 2) */
} Ctx;

/* ---- verify_common.c: what the three files share ---- */

/* Records "graph 'G': node 'N' (Op): <message>" (node may be NULL) and returns code. */
AmpCode AMP_PRINTF(5, 6) amp_verify_fail(Ctx *c, AmpCode code, const AmpGraph *g, const AmpNode *n, const char *fmt,
                                         ...);
#define vfail amp_verify_fail

/* A name for graph g in messages: its own, else where it hangs ("main",
 * "<owner node>.<attribute>", "training_info[i].algorithm"). */
void amp_verify_graph_label(const AmpModel *m, const AmpGraph *g, char *buf, size_t len);
/* ... and for node n: "node 'N' (Op)", or "node #id (domain:Op)" when it has no name. */
void amp_verify_node_label(const AmpNode *n, char *buf, size_t len);

/* Whether tensor t's shape is one the type `ty` declares: an unknown shape or dim takes
 * any; else the ranks and the known dims agree. */
bool amp_verify_shape_holds(const AmpType *ty, const AmpTensor *t);
/* A shape as "[2,3]" into buf: rank dims from `dims` (an unknown one is its dim_param, or
 * "?") or, when dims is NULL, from `values`. */
void amp_verify_dims_text(const AmpDim *dims, int rank, const int64_t *values, char *buf, size_t len);

/* The AttributeProto types known: 0 .. AMP_VERIFY_N_ATTR_TYPES - 1 (AmpAttrType). */
enum { AMP_VERIFY_N_ATTR_TYPES = AMP_ATTR_TYPE_PROTOS + 1 };
/* An attribute type's name as ONNX spells it ("INTS"), or "invalid". */
const char *amp_verify_attr_type_name(int t);

/* strcmp over two `const char *` elements, for qsort and bsearch. */
int amp_verify_cmp_str(const void *a, const void *b);
/* The first name that occurs twice in names[0..n), or NULL (*oom set when it could not
 * tell). */
const char *amp_verify_find_duplicate(const char **names, size_t n, bool *oom);

/* verify_train.c: training_info[i]'s algorithm output names and its two binding lists;
 * then binding keys across every training_info. AMP_OK or the first problem. */
AmpCode amp_verify_training_bindings(Ctx *c, size_t i);
AmpCode amp_verify_keys_across(Ctx *c);

/* verify_op.c: each AMP_OK, or the first problem recorded with amp_verify_fail. */
AmpCode amp_verify_arity(Ctx *c, const AmpGraph *g, const AmpNode *n);
AmpCode amp_verify_slot_dtypes(Ctx *c, const AmpGraph *g, const AmpNode *n);
AmpCode amp_verify_cast(Ctx *c, const AmpGraph *g, const AmpNode *n);
AmpCode amp_verify_legacy_broadcast(Ctx *c, const AmpGraph *g, const AmpNode *n);
AmpCode amp_verify_version_inputs(Ctx *c, const AmpGraph *g, const AmpNode *n);
AmpCode amp_verify_control_flow(Ctx *c, const AmpGraph *g, const AmpNode *n);

#endif
