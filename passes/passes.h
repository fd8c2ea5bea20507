/* The pass manager: the one list of passes (passes.c), pipelines given as
 * comma-separated pass names, the verifier between passes, and --dump-after. Each pass
 * lives in its own file and is reached only through this table. */
#ifndef AMP_PASSES_H
#define AMP_PASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir.h"

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

/* Options every pass may read. Zero-initialised (or a NULL pointer) means defaults;
 * passes that need more settings add fields here with a zero default. */
typedef struct AmpPassOptions {
    int precision; /* AmpDType the AMP pass targets: AMP_DT_FLOAT16 (0 = default) or
                      AMP_DT_BFLOAT16 */
    const AmpListEdit *list_edits; /* n_list_edits entries, in the order given */
    size_t n_list_edits;
    AmpLossScaleMode loss_scale_mode;
    double loss_scale; /* STATIC: the scale; DYNAMIC: the initial scale (0: 2^16) */
} AmpPassOptions;

typedef struct AmpPass {
    const char *name; /* as written in a pipeline: "infer", "dce" */
    const char *help; /* one line for --help */
    AmpCode (*run)(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
} AmpPass;

/* The registered passes, in the order of the table in passes.c. */
const AmpPass *amp_pass_find(const char *name); /* NULL when unknown */
size_t amp_pass_count(void);
const AmpPass *amp_pass_at(size_t i); /* NULL when i >= amp_pass_count() */

/* The pipeline run when the user names none. */
const char *amp_default_pipeline(void);

typedef struct AmpPipelineOptions {
    bool verify_each;             /* amp_verify_model on the input and after every pass */
    const char *dump_after;       /* a pass name in the list: print the IR after it runs */
    FILE *dump_to;                /* where dumps go; NULL is stdout */
    const AmpPassOptions *pass;   /* NULL: defaults */
} AmpPipelineOptions;

/* Runs `list` ("infer,dce"; "none" runs nothing; NULL is the default pipeline) over m.
 * The whole list is checked before anything runs: an unknown pass name, an empty entry,
 * or a dump_after naming no pass of the list is AMP_ERR_USAGE. A pass's failure comes back
 * prefixed "pass 'NAME': "; with verify_each, a model that is already invalid fails with
 * AMP_ERR_INPUT ("input model: ..."), and a graph a pass broke with AMP_ERR_INTERNAL
 * ("pass 'NAME' broke the graph: ..."). opt may be NULL. */
AmpCode amp_run_pipeline(AmpModel *m, const char *list, const AmpPipelineOptions *opt,
                         AmpStatus *st);

/* The same over an explicit array of passes (not necessarily registered ones; tests use
 * it to run a deliberately broken pass). */
AmpCode amp_run_passes(AmpModel *m, const AmpPass *const *passes, size_t n,
                       const AmpPipelineOptions *opt, AmpStatus *st);

/* The passes themselves (one file each); called through the table. */
AmpCode amp_pass_infer(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);
AmpCode amp_pass_dce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st);

#endif
