/* libFuzzer target for the loader: any bytes load or fail cleanly, and what loads saves, reloads
 * and verifies. External data resolves against a scratch folder holding a real data file and a
 * symlink leading out of it, so those checks are fuzzed too (built by tests/fuzz/CMakeLists.txt). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];

static void remove_fuzz_dir(void) {
    char p[300];
    snprintf(p, sizeof p, "%s/weights.bin", fuzz_dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/evil.bin", fuzz_dir);
    unlink(p);
    rmdir(fuzz_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/ampc_fuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir)) {
        fuzz_dir[0] = 0;
        return 0;
    }
    /* weights.bin: 4 KiB of a known pattern, as seeds reference it (offset/length). */
    char p[300];
    snprintf(p, sizeof p, "%s/weights.bin", fuzz_dir);
    FILE *f = fopen(p, "wb");
    if (f) {
        for (int i = 0; i < 1024; i++) {
            float v = (float)i * 0.25f;
            fwrite(&v, sizeof v, 1, f);
        }
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/evil.bin", fuzz_dir);
    if (symlink("/etc/passwd", p) != 0) { /* best effort */
    }
    atexit(remove_fuzz_dir);
    return 0;
}

/* The main graph's nodes loaded by three threads in chunks of a few (ir/load_par.c): the
 * outcome must be the serial load's, message for message and byte for byte once saved. */
static void check_parallel(const uint8_t *data, size_t size, AmpCode rc, const AmpStatus *st, AmpModel *m) {
    static const AmpLoadOptions par = {.threads = 3, .parallel_min_nodes = 1};
    AmpStatus pst = {0};
    AmpModel *pm = NULL;
    AmpCode prc = amp_model_load_bytes(data, size, fuzz_dir[0] ? fuzz_dir : NULL, &par, &pm, &pst);
    if (prc != rc || strcmp(pst.msg, st->msg) != 0) {
        fprintf(stderr, "fuzz_load: serial load %d [%s], parallel %d [%s]\n", rc, st->msg, prc, pst.msg);
        abort();
    }
    if (rc != AMP_OK) return;
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    AmpStatus sa = {0}, sb = {0};
    AmpCode ra = amp_model_save_bytes(m, &a, &la, &sa), rb = amp_model_save_bytes(pm, &b, &lb, &sb);
    if (ra != rb || (ra == AMP_OK && (la != lb || memcmp(a, b, la) != 0))) {
        fprintf(stderr, "fuzz_load: the serial and the parallel load save differently\n");
        abort();
    }
    free(a);
    free(b);
    amp_model_free(pm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_bytes(data, size, fuzz_dir[0] ? fuzz_dir : NULL, NULL, &m, &st);
    check_parallel(data, size, rc, &st, m);
    if (rc != AMP_OK) {
        /* A failure must explain itself and hand back nothing; bad input is never an
         * internal error. (Names from the file may hold newlines: the CLI flattens the
         * message to one line, so that is not checked here.) */
        if (m || !st.msg[0] || rc == AMP_ERR_INTERNAL) {
            fprintf(stderr, "fuzz_load: bad failure report (code %d, model %p): [%s]\n", rc, (void *)m,
                    st.msg);
            abort();
        }
        return 0;
    }
    uint8_t *out = NULL;
    size_t len = 0;
    amp_status_clear(&st);
    if (amp_model_save_bytes(m, &out, &len, &st) == AMP_OK) {
        /* What was saved must load again (no external data left: save_bytes inlines it). */
        AmpModel *m2 = NULL;
        AmpStatus st2 = {0};
        if (amp_model_load_bytes(out, len, NULL, NULL, &m2, &st2) != AMP_OK) {
            fprintf(stderr, "fuzz_load: a saved model does not load again: %s\n", st2.msg);
            abort();
        }
        amp_model_free(m2);
        free(out);
    }
    amp_status_clear(&st);
    (void)amp_verify_model(m, &st);
    for (size_t i = 0; i < m->graph->n_initializers; i++) {
        AmpBytes b;
        amp_status_clear(&st);
        (void)amp_tensor_bytes(m, m->graph->initializers[i], &b, &st);
    }
    amp_model_free(m);
    return 0;
}
