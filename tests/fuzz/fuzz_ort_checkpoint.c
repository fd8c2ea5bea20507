/* libFuzzer target for onnxruntime-training's checkpoint reader (ir/ort_checkpoint.c):
 * any bytes parse or fail with a message, never a read out of bounds; what parses is
 * consistent (every tensor's bytes are what its dtype and dims say). Seeds: the bundled
 * checkpoints of models/ort_* (tests/fuzz/run_fuzz.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/ort_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void consistent(const AmpTensor *t) {
    size_t want;
    if (!t->name || !amp_tensor_expected_bytes(t->dtype, t->nelem, &want) || want != t->raw.len) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A copy of exactly `size` bytes: ASan sees any read past its end. */
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return 0;
    memcpy(b, data, size);
    AmpModel *m = amp_model_new();
    AmpOrtCheckpoint ck;
    AmpStatus st = {AMP_OK, ""};
    if (m && amp_ort_checkpoint_parse(m, b, size, &ck, &st) == AMP_OK) {
        for (size_t i = 0; i < ck.n_params; i++) {
            consistent(ck.params[i].value);
            for (int k = 0; k < 2; k++)
                if (ck.params[i].moment[k]) consistent(ck.params[i].moment[k]);
        }
    } else if (m && !st.msg[0])
        abort(); /* a failure always says why */
    amp_model_free(m);
    free(b);
    return 0;
}
