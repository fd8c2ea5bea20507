/* What a pass reads and what the passes offer: the options every pass may read, each
 * pass's entry point (called through the pass manager's table, passes.h), and the entry
 * points of the passes' work outside a pipeline (export, the Gradient op, the AMP op lists,
 * onnxruntime-training's artifacts). The passes include this, not passes.h: none of them
 * calls the manager. */
#ifndef AMP_PASS_H
#define AMP_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/ir.h"

/* One edit of the AMP pass's op lists (AMP_ALLOWLIST_ADD=MatMul, ..._REMOVE, and the same
 * for INFER, CLEAR and DENY), as TensorFlow's auto mixed precision reads them: additions
 * first, then removals; an op removed from the list it is in belongs to no list. */
typedef struct AmpListEdit {
    AmpOpId op;
    AmpOpClass list; /* ALLOW, INFER, CLEAR or DENY */
    bool remove;     /* false: add op to `list`; true: take it out of `list` */
} AmpListEdit;

typedef enum AmpLossScaleMode {
    AMP_LOSS_SCALE_DEFAULT = 0, /* dynamic for fp16, none for bf16 */
    AMP_LOSS_SCALE_DYNAMIC,     /* GradScaler semantics; loss_scale > 0 is the initial scale */
    AMP_LOSS_SCALE_STATIC,      /* a fixed scale: loss_scale */
    AMP_LOSS_SCALE_NONE
} AmpLossScaleMode;

/* TensorFlow's TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_LEVEL, applied after the list edits
 * (norms-16, ampc's own, to the default lists before them). */
typedef enum AmpLevel {
    AMP_LEVEL_DEFAULT = 0,
    AMP_LEVEL_TENSOR_CORES_ONLY,   /* only allow-list ops become 16-bit: infer and clear
                                      ops are in no list (fp32) */
    AMP_LEVEL_TREAT_INFER_AS_DENY, /* infer-list ops are deny */
    AMP_LEVEL_UNSAFE_FORCE_ALL,    /* every op of the four lists is allow (training rules,
                                      --keep-fp32 and the dtype checks still hold) */
    AMP_LEVEL_NORMS_16             /* LayerNormalization (and the decomposed LayerNorm and
                                      RMSNorm groups coloured as it) in the infer list, not
                                      deny: fewer casts, a 16-bit residual stream */
} AmpLevel;

/* "default", "tensor-cores-only", ... (-1 when unknown); and back. */
int amp_level_parse(const char *s);
const char *amp_level_name(AmpLevel l);

/* Whether the opset_upgrade pass may raise the model's ai.onnx opset for the 16-bit type
 * (--opset-upgrade, AMP_OPSET_UPGRADE). */
typedef enum AmpOpsetUpgrade { AMP_OPSET_UPGRADE_AUTO = 0, AMP_OPSET_UPGRADE_NEVER } AmpOpsetUpgrade;

/* One line of the AMP pass's diagnostics (a weight kept in fp32, the summary). */
typedef void (*AmpNotifyFn)(void *ctx, const char *line);

/* Options every pass may read. Zero-initialised (or a NULL pointer) means defaults;
 * passes that need more settings add fields here with a zero default. */
typedef struct AmpPassOptions {
    int precision; /* AmpDType the AMP pass targets: AMP_DT_FLOAT16 (0 = default) or
                      AMP_DT_BFLOAT16 */
    const AmpListEdit *list_edits; /* n_list_edits entries, in the order given */
    size_t n_list_edits;
    /* The loss-scaling pass (passes/loss_scale.c); zeros mean GradScaler's defaults. */
    AmpLossScaleMode loss_scale_mode;
    double loss_scale;     /* STATIC: the scale; DYNAMIC: the initial scale (0: 2^16) */
    int64_t growth_interval; /* DYNAMIC: clean steps before the scale grows (0: 2000) */
    double growth_factor;  /* DYNAMIC: > 1 (0: 2) */
    double backoff_factor; /* DYNAMIC: in (0, 1) (0: 0.5) */
    /* The scale and growth tracker as plain graph inputs (no initializer, no
     * update_binding): the caller feeds them and reads back amp_loss_scale_new /
     * amp_growth_tracker_new (onnxruntime's Module treats initializers as constants). */
    bool loss_scale_state_inputs;

    /* The AMP pass (passes/amp*.c). */
    AmpLevel level;
    const char *const *keep_fp32; /* n_keep_fp32 fnmatch(3) globs on node names: matching
                                     nodes stay fp32 (painted deny) */
    size_t n_keep_fp32;
    bool no_keep_io_types;        /* main-graph inputs and outputs may become 16-bit */
    const char *loss;             /* a training graph's loss value; NULL: the one scalar
                                     float output whose name contains "loss" */
    const char *const *explain_nodes; /* n_explain_nodes names: print the rule chain of every
                                         node of each name, in the order given ... */
    size_t n_explain_nodes;
    FILE *explain_out;            /* ... here (both needed) */
    FILE *paint_out;              /* the op lists and the nodes of each paint bucket */
    AmpOpsetUpgrade opset_upgrade; /* the opset_upgrade pass: auto (the default) or never */
    int opset_upgrade_to;          /* auto: raise to at least this opset too (0: only as needed) */
    /* Measured ranges (`ampc calibrate`, passes/calib.h): nodes reading or writing a value
     * whose recorded |x| passes calib_max_activation (0: AMP_CALIB_DEFAULT_MAX), or whose
     * non-zero largest |x| is below calib_min_activation (0: AMP_CALIB_DEFAULT_MIN, float16's
     * smallest normal; negative: no lower bound), stay fp32; a training graph's gradients
     * that would underflow are reported through notify. */
    const struct AmpCalibStats *calib;
    double calib_max_activation;
    double calib_min_activation;
    AmpNotifyFn notify;           /* weights kept in fp32, the one-line summary */
    void *notify_ctx;
} AmpPassOptions;

/* The loss scaling po asks for, its default decided here only: dynamic for fp16, none for
 * bf16 (float32's range); never AMP_LOSS_SCALE_DEFAULT (options.c). */
AmpLossScaleMode amp_loss_scale_mode(const AmpPassOptions *po);

/* The passes themselves (one file each); called through the pass manager's table (passes.h). */
AmpCode amp_pass_infer(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
AmpCode amp_pass_dce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
AmpCode amp_pass_amp(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
AmpCode amp_pass_loss_scale(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
AmpCode amp_pass_cast_cleanup(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
/* Data parallel (allreduce.c): each parameter gradient "X_grad" of a training graph (before
 * the loss_scale pass's unscale, where the graph has it) becomes the output of an ai.ampc
 * AllReduceMean node reading what its producer now writes, "X_grad_local"; a no-op on
 * inference graphs and on a graph that has the nodes already. */
AmpCode amp_pass_allreduce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
/* Raises the ai.onnx opset when the 16-bit type needs a newer one (opset_upgrade.c). */
AmpCode amp_pass_opset_upgrade(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
/* Decomposed LayerNorm and GELU become the op where the opset has it (fuse_norm.c). */
AmpCode amp_pass_fuse_norm(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);

/* The inference model of a training model (export.c; `ampc export`, amp_session_export):
 * the main graph's forward, cut to the inference outputs (the main outputs that are not the
 * loss, a gradient, loss-scaling state or computed from them; when none is left, the
 * scores the loss op reads), without training_info, with every node, graph input and
 * initializer they do not need removed, and BatchNormalization / Dropout in their
 * inference form. The weights are the model's initializers as they are. */
typedef struct AmpExportSummary {
    bool training;              /* the model was a training graph */
    const char *loss;           /* the loss cut away (NULL: none in the main graph) */
    const char *scores;         /* not NULL: the output is the loss op's scores, named so */
    size_t n_outputs;           /* the inference outputs */
    size_t outputs_removed, nodes_removed, inputs_removed, initializers_removed;
    size_t training_infos_removed;
    size_t nodes_to_inference;  /* BatchNormalization / Dropout made inference-form */
} AmpExportSummary;
/* loss: the loss's name (NULL: found as the amp pass finds it); sum may be NULL. No
 * inference output left is AMP_ERR_INPUT naming why. */
AmpCode amp_export_model(AmpModel *m, const char *loss, AmpExportSummary *sum, AmpStatus *st);
/* A model converted already (a 16-bit forward reading float32 weights through Casts) made
 * to store them in `dtype` (AMP_DT_FLOAT16 or AMP_DT_BFLOAT16): each float32 initializer
 * that only Casts to dtype read becomes a dtype initializer (the Cast's rounding, done
 * once), the Casts gone. *n_folded (may be NULL): how many. */
AmpCode amp_export_fold_weight_casts(AmpModel *m, int dtype, size_t *n_folded, AmpStatus *st);
/* The same as a pass ("export"; opt->loss names the loss). */
AmpCode amp_pass_export(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);

/* ONNX's Gradient op (ai.onnx.preview.training) expanded into backward nodes by the
 * gradient rules of `ampc grad` (gradient.c); a model without one is left as it is. */
AmpCode amp_pass_gradient(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
/* The same, saying how many Gradient nodes it expanded and how many nodes it made (either
 * may be NULL). A Gradient is expanded in the main graph (the forward: the main graph) or
 * in a training algorithm (the forward: the main graph, then the algorithm, as ONNX runs
 * a training step); elsewhere it is AMP_ERR_UNSUPPORTED. An input that is not the value
 * its symbol (xs[i], zs[i]) names is AMP_ERR_UNSUPPORTED naming the node. On failure m is
 * to be dropped. */
AmpCode amp_expand_gradients(AmpModel *m, size_t *n_expanded, size_t *n_nodes, AmpStatus *st);
/* Whether m has a Gradient node anywhere, and whether n is one. */
bool amp_model_has_gradient(AmpModel *m);
bool amp_is_gradient_node(const AmpNode *n);

/* ---- the AMP op lists (amp_lists.c), shared by the CLI and AMP_AUTO ----------------- */

/* "MatMul" (ai.onnx first, then com.microsoft and ai.onnx.preview.training) or
 * "domain:Name"; AMP_OP_UNKNOWN when the op table has no such op. */
AmpOpId amp_op_find_name(const char *name);
/* Appends (realloc) to *edits one edit per op of `s`, a comma-separated list of op names
 * ("MatMul, com.microsoft:FusedGemm"); `what` names the source in messages
 * ("AMP_ALLOWLIST_ADD", "--allow"). Unknown names are AMP_ERR_USAGE naming them all. */
AmpCode amp_list_edits_parse(const char *what, const char *s, AmpOpClass list, bool remove,
                             AmpListEdit **edits, size_t *n, AmpStatus *st);
/* An op added to two different lists is AMP_ERR_USAGE naming the op and both lists. */
AmpCode amp_list_edits_check(const AmpListEdit *e, size_t n, AmpStatus *st);
/* The class of every op after the edits and the level, for `precision`
 * (cls has AMP_OP__COUNT entries; AMP_CLASS_NEVER is "in no list"). */
AmpCode amp_op_classes(int precision, const AmpListEdit *e, size_t n, AmpLevel level,
                       AmpOpClass *cls, AmpStatus *st);

/* onnxruntime-training's artifacts as one standard ONNX training model (ort_import.c):
 * m is their training_model.onnx as loaded; its parameters take the values of the
 * checkpoint file (onnxruntime's FlatBuffers checkpoint), its gradient accumulators go,
 * and a training_info runs the optimizer model's AdamWOptimizer as standard ops per
 * parameter (update_binding for the parameters, moments and step; gated on amp_found_inf
 * when m is already loss-scaled). learning_rate > 0 replaces the checkpoint's (else its
 * own, else onnxruntime's 0.001). summary (may be NULL) gets one line saying what was
 * done. An artifact set it cannot import wholly is an error naming what is wrong. */
AmpCode amp_ort_import(AmpModel *m, const AmpModel *optimizer, const char *checkpoint, double learning_rate,
                       char *summary, size_t summary_len, AmpStatus *st);
/* The same with the optimizer model read from optimizer_path. */
AmpCode amp_ort_import_files(AmpModel *m, const char *optimizer_path, const char *checkpoint, double learning_rate,
                             char *summary, size_t summary_len, AmpStatus *st);

#endif
