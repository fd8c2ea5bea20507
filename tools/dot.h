/* The Graphviz DOT picture of a model (ampc --dump-dot): nodes coloured by precision
 * (precision.h), casts drawn as arrows, edges labelled with dtypes, subgraphs and
 * training graphs as clusters, and an option that folds long chains into one box. */
#ifndef AMP_DOT_H
#define AMP_DOT_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"

typedef struct AmpDotOptions {
    /* Merge each maximal chain of nodes into one box "N nodes: Op1 → Op2 → …". Two
     * nodes a → b chain when a has one output, used once (by b, in the same graph) and
     * not a graph output, b has no other input than that one and initializers, both
     * have the same precision and group and neither has subgraphs. */
    bool collapse;
    bool initializers; /* draw initializers and their edges (hidden by default) */
    bool no_legend;    /* leave out the legend cluster */
} AmpDotOptions;

/* Writes the whole model (main graph, subgraphs, training graphs) as one digraph.
 * opt may be NULL (defaults: no collapse, no initializers, a legend). The output
 * depends only on the model and the options. Every name is escaped; names longer than
 * 60 bytes are cut. */
void amp_dot_model(FILE *f, const AmpModel *m, const AmpDotOptions *opt);

/* Same into `path` as every output is written (amp_output_write): a temporary file
 * beside it renamed over it once complete, so a failure leaves no partial file and
 * `path` as it was; a device or FIFO is written straight into. */
AmpCode amp_dot_model_file(const char *path, const AmpModel *m, const AmpDotOptions *opt,
                           AmpStatus *st);

#endif
