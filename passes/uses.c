/* Bulk use-list edits (uses.h): one sweep compacts the source list while each moved slot
 * is appended to the target through amp_node_set_input (its old input cleared first, so
 * it removes nothing from the list being swept and only appends). */
#include "uses.h"

size_t amp_uses_move(AmpValue *from, AmpValue *to, bool (*move)(void *ctx, const AmpUse *u),
                     void *ctx) {
    if (from == to) return 0;
    size_t keep = 0, moved = 0, n = from->n_uses;
    for (size_t i = 0; i < n; i++) {
        AmpUse u = from->uses[i];
        if (!move || move(ctx, &u)) {
            u.node->inputs[u.slot] = NULL;
            amp_node_set_input(u.node, u.slot, to);
            moved++;
        } else {
            from->uses[keep++] = u;
        }
    }
    from->n_uses = keep;
    return moved;
}
