/* Bulk use-list edits (uses.h): one sweep compacts the source list while each moved slot
 * is appended to the target (room for every use reserved first, so nothing can fail half
 * way and the use lists always match the nodes' inputs). */
#include "passes/uses.h"

AmpCode amp_uses_move(AmpValue *from, AmpValue *to, bool (*move)(void *ctx, const AmpUse *u),
                      void *ctx) {
    if (from == to) return AMP_OK;
    if (to && amp_value_reserve_uses(to, from->n_uses)) return AMP_ERR_INTERNAL;
    size_t keep = 0, n = from->n_uses;
    for (size_t i = 0; i < n; i++) {
        AmpUse u = from->uses[i];
        if (!move || move(ctx, &u)) {
            u.node->inputs[u.slot] = to;
            if (to) to->uses[to->n_uses++] = u;
        } else {
            from->uses[keep++] = u;
        }
    }
    from->n_uses = keep;
    return AMP_OK;
}
