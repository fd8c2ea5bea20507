/* The pass manager: the one list of passes (passes.c), pipelines given as
 * comma-separated pass names, the verifier between passes, and --dump-after. Each pass
 * lives in its own file and is reached only through this table. What a pass reads and
 * what the passes offer besides the table is pass.h's, which the passes include: none of
 * them calls the manager. */
#ifndef AMP_PASSES_H
#define AMP_PASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/ir.h"
#include "passes/pass.h"

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
    /* Called after each pass that succeeded (before its dump and verification), e.g. to
     * time it; NULL: none. */
    void (*after_pass)(void *ctx, const char *pass_name);
    void *after_pass_ctx;
} AmpPipelineOptions;

/* The one pass-list parser (the CLI's --passes and amp_run_pipeline): LIST is
 * comma-separated pass names, spaces around each trimmed; "none", or a LIST that is empty
 * or blank, is the empty pipeline. Fills passes (cap entries) and *n. An unknown name, an
 * empty entry or more than cap passes is AMP_ERR_USAGE naming it (and the known passes). */
AmpCode amp_pipeline_parse(const char *list, const AmpPass **passes, size_t cap, size_t *n, AmpStatus *st);

/* 0 when dump_after is NULL or one of the n passes, else AMP_ERR_USAGE saying whether it
 * is no pass at all or one the pipeline lacks. */
AmpCode amp_pipeline_check_dump(const AmpPass *const *passes, size_t n, const char *dump_after, AmpStatus *st);

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

#endif
