/* libFuzzer target for the conversion (built by tests/fuzz/CMakeLists.txt). Any model that
 * loads (and so passes the verifier) goes through the default pipeline, in float16 or
 * bfloat16 by the input's length, with the verifier after every pass. The properties:
 * - a pass fails only with a message and never with an internal error (a graph a pass
 *   broke is one: "pass 'NAME' broke the graph"), but for running out of memory;
 * - what converted saves, loads again, and converting that changes nothing, byte for
 *   byte (DESIGN.md: the pass is idempotent). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, AmpCode rc, const AmpStatus *st) {
    fprintf(stderr, "fuzz_convert: %s (code %d): [%s]\n", what, rc, st->msg);
    abort();
}

/* The default pipeline over m, checked; false when it failed as bad input may. */
static bool convert(AmpModel *m, int precision, const char *what) {
    AmpPassOptions po = {.precision = precision};
    AmpPipelineOptions pl = {.verify_each = true, .pass = &po};
    AmpStatus st = {0};
    AmpCode rc = amp_run_pipeline(m, NULL, &pl, &st);
    if (rc == AMP_ERR_INTERNAL && !strstr(st.msg, "out of memory")) fail(what, rc, &st);
    if (rc != AMP_OK && !st.msg[0]) fail("a pass failed without a message", rc, &st);
    return rc == AMP_OK;
}

static uint8_t *save(AmpModel *m, size_t *len) {
    uint8_t *out = NULL;
    AmpStatus st = {0};
    AmpCode rc = amp_model_save_bytes(m, &out, len, &st);
    if (rc != AMP_OK) fail("a converted model does not save", rc, &st);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    if (amp_model_load_bytes(data, size, NULL, NULL, &m, &st) != AMP_OK) return 0;
    int precision = size & 1 ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16;
    if (!convert(m, precision, "converting")) {
        amp_model_free(m);
        return 0;
    }
    size_t len1 = 0, len2 = 0;
    uint8_t *out1 = save(m, &len1);
    amp_model_free(m);

    AmpModel *m2 = NULL;
    amp_status_clear(&st);
    AmpCode rc = amp_model_load_bytes(out1, len1, NULL, NULL, &m2, &st);
    if (rc != AMP_OK) fail("a converted model does not load again", rc, &st);
    if (!convert(m2, precision, "converting the converted model")) {
        fprintf(stderr, "fuzz_convert: the converted model does not convert again\n");
        abort();
    }
    uint8_t *out2 = save(m2, &len2);
    amp_model_free(m2);
    if (len1 != len2 || memcmp(out1, out2, len1) != 0) {
        fprintf(stderr, "fuzz_convert: converting the converted model changed it (%zu -> %zu bytes)\n", len1, len2);
        abort();
    }
    free(out1);
    free(out2);
    return 0;
}
