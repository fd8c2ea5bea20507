/* Bulk edits of use lists for passes that rewire many uses at once: moving a value's uses
 * one by one with amp_node_set_input costs O(uses) each, quadratic in a value's fan-out;
 * these do one sweep over the list. */
#ifndef AMP_USES_H
#define AMP_USES_H

#include <stdbool.h>

#include "ir/ir.h"

/* Moves every use of `from` for which move(ctx, use) is true (NULL: every use) to `to`.
 * Graph output entries are not touched. Out of memory: AMP_ERR_INTERNAL, nothing moved. */
AmpCode amp_uses_move(AmpValue *from, AmpValue *to, bool (*move)(void *ctx, const AmpUse *u),
                      void *ctx);

#endif
