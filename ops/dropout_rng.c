/* Dropout's attributes, every backend's (ops/dropout_rng.h). */
#include <stdlib.h>

#include "ops/dropout_rng.h"

AmpCode amp_ew_prepare_dropout(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpDropoutAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->ratio = opset < 12 ? amp_node_attr_float(n, "ratio", 0.5f) : 0.5;
    const AmpAttr *seed = amp_node_attr(n, "seed");
    a->has_seed = seed && seed->type == AMP_ATTR_INT;
    a->seed = a->has_seed ? seed->i : 0;
    *attrs = a;
    return AMP_OK;
}
