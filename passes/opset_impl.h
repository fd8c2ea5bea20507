/* The opset upgrade's private parts (passes/opset_upgrade.c, passes/opset_adapters.c):
 * the ai.onnx version steps at which an op's meaning or signature changes, each with the
 * adapter that rewrites a node of the older form into the newer one. */
#ifndef AMP_OPSET_IMPL_H
#define AMP_OPSET_IMPL_H

#include <stdbool.h>

#include "passes/pass.h"

/* The highest ai.onnx opset the upgrade raises a model to: every step up to it is in the
 * table (opset_adapters.c), and onnxruntime runs it. */
enum { AMP_OPSET_UPGRADE_MAX = 22, AMP_OPSET_UPGRADE_MIN_FROM = 7 };

/* Adapts n (an ai.onnx node of the form before `version`) to the form from `version` on.
 * With apply false it only checks: NULL when it can, else why not (static text). With apply
 * true it rewrites n (n may be replaced by a new node); *err is set when out of memory. */
typedef const char *(*AmpOpsetAdapter)(AmpNode *n, bool apply, AmpCode *err);

typedef struct AmpOpsetStep {
    const char *op;        /* ai.onnx op type */
    int version;           /* the first opset of the new form */
    AmpOpsetAdapter adapt; /* NULL: no adapter (a model holding the op stays at its opset) */
} AmpOpsetStep;

/* The steps, sorted by version, then op. */
const AmpOpsetStep *amp_opset_steps(size_t *n);

#endif
