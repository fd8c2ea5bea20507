/* Helpers shared by the hostile-input tests (test_bad_input.c: whole files and the CLI;
 * test_bad_graph.c: what a well-formed file says): loading bytes and exercising what
 * loads, expecting a one-line input error that names the problem, deterministic random
 * bytes, and a model around one given tensor. Static functions: each test file includes
 * this once. */
#ifndef AMP_BAD_INPUT_UTIL_H
#define AMP_BAD_INPUT_UTIL_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

/* An assertion that sends Criterion nothing when it holds: the tests' loops make tens of
 * thousands of checks, and every cr_assert is an event for the runner. */
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) cr_assert_fail(__VA_ARGS__);                                          \
    } while (0)

/* What a loaded model must survive: save, verify, and reading every initializer's bytes
 * (which reads the typed fields, so an unchecked count shows up under ASan). */
static inline void exercise(AmpModel *m) {
    AmpStatus st = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (amp_model_save_bytes(m, &buf, &len, &st) == AMP_OK) free(buf);
    amp_status_clear(&st);
    (void)amp_verify_model(m, &st);
    for (size_t i = 0; i < m->graph->n_initializers; i++) {
        AmpBytes b;
        amp_status_clear(&st);
        (void)amp_tensor_bytes(m, m->graph->initializers[i], &b, &st);
    }
}

/* Loads bytes; a model that loads is exercised and freed. Returns the code and fills st. */
static inline AmpCode try_load(const void *buf, size_t len, const char *dir, AmpStatus *st) {
    AmpModel *m = NULL;
    amp_status_clear(st);
    AmpCode rc = amp_model_load_bytes(buf, len, dir, NULL, &m, st);
    if (rc == AMP_OK) {
        CHECK(m != NULL, "load returned OK but no model");
        exercise(m);
        amp_model_free(m);
    } else {
        CHECK(m == NULL, "load failed (%s) but handed back a model", st->msg);
        CHECK(st->msg[0] != 0, "load failed with code %d and an empty message", rc);
    }
    return rc;
}

/* The model must be rejected with AMP_ERR_INPUT (or `alt`, when nonzero), at load or by
 * the verifier, and the message must mention one of the NULL-terminated needles. */
static inline void expect_rejected_alt(const PbBuf *b, const char *dir, AmpCode alt, const char *what,
                                const char *const *needles) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_bytes(b->data, b->len, dir, NULL, &m, &st);
    const char *stage = "load";
    if (rc == AMP_OK) {
        stage = "verify";
        rc = amp_verify_model(m, &st);
        amp_model_free(m);
    } else {
        cr_assert_null(m, "%s: load failed but handed back a model", what);
    }
    cr_assert(rc == AMP_ERR_INPUT || (alt && rc == alt),
              "%s: expected an input error, got %s (%s) at %s", what, amp_code_name(rc), st.msg, stage);
    cr_assert_neq(st.msg[0], 0, "%s: empty error message", what);
    cr_assert_null(strchr(st.msg, '\n'), "%s: message has more than one line: %s", what, st.msg);
    bool found = needles[0] == NULL;
    for (size_t i = 0; needles[i]; i++)
        if (tu_contains(st.msg, needles[i])) found = true;
    cr_assert(found, "%s: message does not say what is wrong or where (wanted '%s'): %s", what,
              needles[0], st.msg);
    cr_log_info("%s -> %s at %s: %s", what, amp_code_name(rc), stage, st.msg);
}

#define EXPECT_REJECTED(b, what, ...)                                                      \
    do {                                                                                   \
        const char *const needles_[] = {__VA_ARGS__, NULL};                                \
        expect_rejected_alt((b), NULL, AMP_OK, (what), needles_);                          \
    } while (0)

/* xorshift64*: deterministic bytes for the random cases */
static inline uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* A model Y = Relu(T) whose only initializer T is given (TensorProto body, consumed). */
static inline void model_with_initializer(PbBuf *out, PbBuf *tensor) {
    PbBuf g = {0};
    const char *in[1] = {"T"}, *o[1] = {"Y"};
    onnx_node(&g, "Relu", "relu", 1, in, 1, o, NULL);
    pb_str(&g, G_NAME, "g");
    pb_msg(&g, G_INIT, tensor);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(out, &g, 13);
}

/* A float tensor "T" with the given dims and `raw_len` bytes of raw_data (or none if < 0). */
static inline void float_tensor(PbBuf *t, int ndims, const int64_t *dims, long raw_len) {
    onnx_tensor_head(t, "T", 1, ndims, dims);
    if (raw_len >= 0) {
        uint8_t *z = calloc((size_t)raw_len + 1, 1);
        pb_bytes(t, T_RAW, z, (size_t)raw_len);
        free(z);
    }
}

#endif
