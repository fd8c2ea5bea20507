/* The conversion report (ampc --report): how many float nodes are in 16 bits, how many
 * casts, what share of the matrix-product FLOPs runs in 16 bits, and a table per op
 * type. Read from the model's dtypes alone (precision.h), so it describes any model. */
#ifndef AMP_TOOLS_REPORT_H
#define AMP_TOOLS_REPORT_H

#include <stdio.h>

#include "ir/ir.h"
#include "ir/precision.h"

typedef struct AmpOpCount {
    const char *domain, *op_type;
    size_t nodes, n16, n32, none; /* by precision; n16 + n32 + none == nodes */
} AmpOpCount;

/* The AMP cast directions counted in AmpReport.cast_dirs. */
enum { AMP_CAST_32_TO_16, AMP_CAST_16_TO_32, AMP_CAST_32_TO_BF16, AMP_CAST_BF16_TO_32, AMP_CAST__DIRS };

typedef struct AmpReport {
    /* Over every graph: main, subgraphs (If/Loop/Scan bodies), training graphs. */
    size_t graphs, nodes;
    /* Nodes in a group (precision.h) are counted there and nowhere else. */
    size_t group_nodes[AMP_MAX_NODE_GROUPS];
    /* The first line, "converted X of Y float nodes using N casts": Y counts the nodes
     * with float32/16-bit data that are not casts; X those of them in 16 bits; N the
     * casts between float32 and float16/bfloat16. */
    size_t float_nodes, converted, casts;
    size_t cast_dirs[AMP_CAST__DIRS];
    size_t other_casts; /* casts of other types (int→float, ...), or of unknown types */
    /* Nodes with an input or output of unknown type: their precision may be understated
     * (the infer pass, in the default pipeline, fills the types in). */
    size_t untyped_nodes;
    /* FLOPs of MatMul, Gemm, Conv and ConvTranspose nodes with float data and fully
     * static shapes (2·M·N·K and the like; a bias is not counted); nodes whose shapes
     * are not static are skipped and counted. */
    size_t flop_nodes, flop_skipped;
    double flops, flops16;
    AmpOpCount *ops; /* one per op type (casts and grouped nodes left out), sorted by
                      * count (most first), then domain and name; malloc'd */
    size_t n_ops, cap_ops;
} AmpReport;


/* Fills r (which amp_report_free releases, also after a failure); fails only when out
 * of memory. */
AmpCode amp_report_model(const AmpModel *m, AmpReport *r, AmpStatus *st);
/* The first line is exactly "converted X of Y float nodes using N casts". */
void amp_report_print(FILE *f, const AmpReport *r);
void amp_report_free(AmpReport *r);

#endif
