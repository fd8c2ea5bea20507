/* The "infer" pass: type and shape inference (ir/infer.c) as a pipeline step, so later
 * passes can rely on every value's type being filled where it can be known. */
#include "passes/pass.h"

AmpCode amp_pass_infer(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    (void)opt;
    return amp_infer_model(m, st);
}
