/* libFuzzer target for the executor (built by tests/fuzz/CMakeLists.txt). Any model that
 * loads and verifies opens as a session (the CPU backend, or the device simulator, and
 * AMP_AUTO's rewrite a quarter of the time, as a hash of the input picks) under caps on
 * work: Loop/Scan iterations (FR_MAX_ITERATIONS), the bytes of any one tensor
 * (FR_MAX_TENSOR_BYTES) and the time of a run (FR_TIMEOUT_S). Each input without a
 * default is given zeros of its declared shape (a symbolic or unknown dim: 1); a model
 * with an input that is not a tensor of known element type and rank, or whose zeros would
 * pass the cap, is skipped. The model then runs twice. The properties:
 * - open and run end with AMP_OK or an error with a message: no crash, no sanitizer
 *   report, no leak (any AmpCode is accepted; with AMPC_FUZZ_RUN_STRICT=1 in the
 *   environment, AMP_ERR_INTERNAL is a bug too, but for running out of memory);
 * - the second run, on the same inputs, ends as the first did (the same code; when both
 *   succeed, outputs of the same element types and shapes), but where either hit the time
 *   limit: a failed run leaves nothing behind that the next one trips on. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "ir/ir.h"

#define FR_MAX_ITERATIONS 1000
/* Small: the time limit is checked between nodes, and one kernel over a few million
 * elements (an AveragePool over 6 M floats) takes seconds under the sanitizers, 30 times
 * its time in the release build, past libFuzzer's 10 s timeout. */
#define FR_MAX_TENSOR_BYTES (UINT64_C(1) << 20)
#ifndef FR_TIMEOUT_S
#define FR_TIMEOUT_S 2.0 /* -DFR_TIMEOUT_S=1e-4 makes runs stop part way */
#endif
#define FR_MAX_INPUTS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool strict, verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *s = getenv("AMPC_FUZZ_RUN_STRICT");
    strict = s && *s && strcmp(s, "0") != 0;
    const char *v = getenv("AMPC_FUZZ_RUN_VERBOSE"); /* one line an input: how it ended */
    verbose = v && *v && strcmp(v, "0") != 0;
    return 0;
}

static void fail(const char *what, AmpCode rc, const AmpStatus *st) {
    fprintf(stderr, "fuzz_run: %s (code %d %s): [%s]\n", what, (int)rc, amp_code_name(rc), st->msg);
    abort();
}

/* A failed call must say why; in strict mode it must not be an internal error. */
static void check_failure(const char *what, AmpCode rc, const AmpStatus *st) {
    if (rc == AMP_OK) return;
    if (!st->msg[0]) fail(what, rc, st);
    if (strict && rc == AMP_ERR_INTERNAL && !strstr(st->msg, "out of memory")) fail(what, rc, st);
}

static uint32_t hash_of(const uint8_t *data, size_t size) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    return h;
}

typedef struct Run {
    AmpCode rc;
    bool timed_out;
    size_t n_out;
    AmpTensorView *out;
} Run;

static Run run_once(AmpSession *s, const AmpTensorView *in, size_t n_in, size_t n_out) {
    Run r = {0};
    AmpStatus st = {0};
    r.n_out = n_out;
    r.out = calloc(n_out ? n_out : 1, sizeof *r.out);
    if (!r.out) abort();
    r.rc = amp_session_run(s, in, n_in, NULL, n_out, r.out, &st);
    if (verbose) fprintf(stderr, "fuzz_run: run: %s %s\n", amp_code_name(r.rc), st.msg);
    check_failure("run", r.rc, &st);
    r.timed_out = r.rc != AMP_OK && strstr(st.msg, "time limit") != NULL;
    if (r.rc != AMP_OK)
        for (size_t i = 0; i < n_out; i++)
            if (r.out[i].data) {
                fprintf(stderr, "fuzz_run: output %zu left allocated after a failed run [%s]\n", i, st.msg);
                abort();
            }
    return r;
}

static void run_free(Run *r) {
    if (r->rc == AMP_OK)
        for (size_t i = 0; i < r->n_out; i++) amp_tensor_view_free(&r->out[i]);
    free(r->out);
}

static void compare(const Run *a, const Run *b) {
    if (a->timed_out || b->timed_out) return;
    if (a->rc != b->rc) {
        fprintf(stderr, "fuzz_run: the same run ended with %s, then %s\n", amp_code_name(a->rc), amp_code_name(b->rc));
        abort();
    }
    if (a->rc != AMP_OK) return;
    for (size_t i = 0; i < a->n_out; i++) {
        const AmpTensorView *x = &a->out[i], *y = &b->out[i];
        bool same = x->dtype == y->dtype && x->rank == y->rank;
        for (int d = 0; same && d < x->rank; d++) same = x->dims[d] == y->dims[d];
        if (!same) {
            fprintf(stderr, "fuzz_run: output %zu changed type or shape between two runs of the same inputs\n", i);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    if (amp_model_load_bytes(data, size, NULL, NULL, &m, &st) != AMP_OK) return 0;
    amp_status_clear(&st);
    bool ok = amp_verify_model(m, &st) == AMP_OK;
    if (ok) {
        AmpStatus ist = {0};
        amp_infer_model(m, &ist); /* must not crash; a model it cannot type may still run */
    }
    amp_model_free(m);
    if (!ok) return 0;

    uint32_t h = hash_of(data, size);
    AmpSessionOptions o = {.backend = h & 1 ? AMP_BACKEND_SIM : AMP_BACKEND_CPU,
                           .amp_auto = (h >> 1) & 3 ? "0" : "1",
                           .precision = (h >> 3) & 1 ? "bf16" : "fp16",
                           .ignore_env = true,
                           .max_iterations = FR_MAX_ITERATIONS,
                           .max_tensor_bytes = FR_MAX_TENSOR_BYTES,
                           .timeout_seconds = FR_TIMEOUT_S};
    AmpSession *s = NULL;
    amp_status_clear(&st);
    AmpCode rc = amp_session_open_bytes(data, size, NULL, &o, &s, &st);
    check_failure("open", rc, &st);
    if (verbose && rc) fprintf(stderr, "fuzz_run: open: %s %s\n", amp_code_name(rc), st.msg);
    if (rc != AMP_OK) return 0;

    size_t n_in = amp_session_input_count(s, AMP_MODE_RUN), n_out = amp_session_output_count(s, AMP_MODE_RUN);
    AmpTensorView in[FR_MAX_INPUTS];
    size_t n_given = 0;
    bool skip = n_in > FR_MAX_INPUTS;
    for (size_t i = 0; !skip && i < n_in; i++) {
        AmpIoInfo info;
        if (!amp_session_input_info(s, AMP_MODE_RUN, i, &info)) abort();
        if (info.optional) continue; /* the model's default */
        if (info.dtype == 0 || info.dtype == AMP_DT_STRING || info.rank < 0 || info.rank > AMP_TENSOR_MAX_RANK) {
            skip = true;
            break;
        }
        AmpTensorView *t = &in[n_given];
        memset(t, 0, sizeof *t);
        t->name = info.name;
        t->dtype = info.dtype;
        t->rank = info.rank;
        uint64_t nelem = 1;
        for (int d = 0; d < info.rank; d++) {
            t->dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
            if (t->dims[d] && nelem > FR_MAX_TENSOR_BYTES / (uint64_t)t->dims[d]) skip = true;
            else nelem *= (uint64_t)t->dims[d];
        }
        size_t bytes = skip ? 0 : amp_tensor_view_bytes(t);
        if (skip || (bytes == 0 && nelem) || bytes > FR_MAX_TENSOR_BYTES) {
            skip = true;
            break;
        }
        t->data = calloc(bytes ? bytes : 1, 1);
        if (!t->data) abort();
        n_given++;
    }
    if (verbose && skip) fprintf(stderr, "fuzz_run: skipped (inputs)\n");
    if (!skip) {
        Run a = run_once(s, in, n_given, n_out);
        Run b = run_once(s, in, n_given, n_out);
        compare(&a, &b);
        run_free(&a);
        run_free(&b);
    }
    for (size_t i = 0; i < n_given; i++) free(in[i].data);
    amp_session_close(s);
    return 0;
}
