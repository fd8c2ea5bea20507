/* The memory planner: given each intermediate's size and live interval [first, last]
 * (node indices, inclusive), assigns offsets into one arena so that no two buffers whose
 * intervals overlap share a byte. Greedy by size (largest first, lowest free offset). */
#ifndef AMP_PLAN_H
#define AMP_PLAN_H

#include <stddef.h>

#include "ir/fail.h"

typedef struct AmpPlanItem {
    size_t size;       /* bytes; 0 takes no space (offset 0) */
    int first, last;   /* live from node `first` to node `last`, both included */
    size_t offset;     /* filled by amp_plan_offsets */
} AmpPlanItem;

/* Fills every item's offset (each a multiple of `align`, a power of two; 0 means 64) and
 * the arena size (the end of the highest item, rounded up to `align`). An item with
 * last < first, or sizes that overflow, is AMP_ERR_INTERNAL. */
AmpCode amp_plan_offsets(AmpPlanItem *items, size_t n, size_t align, size_t *arena_bytes,
                         AmpStatus *st);

/* The most bytes live at one node (sizes rounded up to `align`): no arena can be smaller. */
size_t amp_plan_max_live(const AmpPlanItem *items, size_t n, size_t align);

#endif
