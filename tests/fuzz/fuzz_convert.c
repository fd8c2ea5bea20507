/* libFuzzer target for the conversion (built by tests/fuzz/CMakeLists.txt). Any model that
 * loads (and so passes the verifier) goes through the default pipeline with the verifier
 * after every pass, under options a hash of the input picks (float16 or bfloat16, the
 * level, --no-keep-io-types, the loss-scaling mode, an op moved to another list, a node
 * kept in fp32). The properties:
 * - a pass fails only with a message and never with an internal error (a graph a pass
 *   broke is one: "pass 'NAME' broke the graph"), but for running out of memory;
 * - the main graph's inputs and outputs keep their element types (but with
 *   --no-keep-io-types);
 * - what converted saves, loads again, and converting that changes nothing, byte for
 *   byte (docs/design.md, "The colouring lists and the
 *   rules beside them", rule 5: the pass is idempotent). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, AmpCode rc, const AmpStatus *st) {
    fprintf(stderr, "fuzz_convert: %s (code %d): [%s]\n", what, rc, st->msg);
    abort();
}

static uint32_t hash_of(const uint8_t *data, size_t size) {
    uint32_t h = 2166136261u; /* FNV-1a: a mutation anywhere may change what it picks */
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    return h;
}

/* The pass options h picks. */
static AmpPassOptions options_of(uint32_t h) {
    static const AmpLossScaleMode modes[4] = {AMP_LOSS_SCALE_DEFAULT, AMP_LOSS_SCALE_DYNAMIC,
                                              AMP_LOSS_SCALE_STATIC, AMP_LOSS_SCALE_NONE};
    AmpPassOptions po = {0};
    po.precision = h & 1 ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16;
    po.level = (AmpLevel)((h >> 1) & 3);
    po.no_keep_io_types = (h >> 3) & 1;
    po.loss_scale_mode = modes[(h >> 4) & 3];
    if (po.loss_scale_mode == AMP_LOSS_SCALE_STATIC) po.loss_scale = 1024;
    return po;
}

/* ... and, from the model's own nodes: one op moved to another list (--allow and the
 * like), one node kept in fp32 by name (--keep-fp32), each half the time. */
static void node_options(const AmpModel *m, uint32_t h, AmpPassOptions *po, AmpListEdit *edit, char *glob,
                         size_t glob_len, const char **globs) {
    const AmpGraph *g = m->graph;
    if (!g->n_nodes) return;
    size_t k = (h >> 6) % g->n_nodes;
    const AmpNode *n = g->first;
    while (k-- && n->next) n = n->next;
    if ((h >> 16) & 1 && n->op != AMP_OP_UNKNOWN) {
        *edit = (AmpListEdit){n->op, (AmpOpClass)(AMP_CLASS_ALLOW + ((h >> 17) & 3)), false};
        po->list_edits = edit;
        po->n_list_edits = 1;
    }
    if ((h >> 19) & 1 && n->name && strlen(n->name) < glob_len && !strpbrk(n->name, "*?[\\")) {
        strcpy(glob, n->name); /* the model is freed before the second conversion */
        globs[0] = glob;
        po->keep_fp32 = globs;
        po->n_keep_fp32 = 1;
    }
}

/* The default pipeline over m, checked; false when it failed as bad input may (why, in
 * *st). */
static bool convert(AmpModel *m, const AmpPassOptions *po, const char *what, AmpStatus *st) {
    AmpPipelineOptions pl = {.verify_each = true, .pass = po};
    amp_status_clear(st);
    AmpCode rc = amp_run_pipeline(m, NULL, &pl, st);
    if (rc == AMP_ERR_INTERNAL && !strstr(st->msg, "out of memory")) fail(what, rc, st);
    if (rc != AMP_OK && !st->msg[0]) fail("a pass failed without a message", rc, st);
    return rc == AMP_OK;
}

/* The main graph's inputs and outputs (k = 0, 1) and their element types (-1: not a tensor). */
typedef struct Io {
    size_t n;
    const char **name;
    int *dtype;
    int *k;
} Io;

static Io io_of(const AmpModel *m) {
    const AmpValueInfoList *l[2] = {&m->graph->inputs, &m->graph->outputs};
    Io io = {0, NULL, NULL, NULL};
    size_t cap = l[0]->n + l[1]->n + 1;
    io.name = malloc(cap * sizeof *io.name);
    io.dtype = malloc(cap * sizeof *io.dtype);
    io.k = malloc(cap * sizeof *io.k);
    if (!io.name || !io.dtype || !io.k) abort();
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < l[k]->n; i++) {
            const AmpValue *v = l[k]->items[i].value;
            io.name[io.n] = v ? v->name : "";
            io.dtype[io.n] = v && v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : -1;
            io.k[io.n++] = k;
        }
    return io;
}

static void io_free(Io *io) {
    free(io->name);
    free(io->dtype);
    free(io->k);
}

/* Every input and output of `before` is one of `after` (same side, same name) with the
 * same element type, or any type where `before` had none or UNDEFINED (a Gradient node's outputs are
 * typed once it is expanded); the names are the model's: they live as long as it does. */
static void check_io(const Io *before, const Io *after) {
    for (size_t i = 0; i < before->n; i++) {
        size_t j = 0;
        while (j < after->n && (after->k[j] != before->k[i] || strcmp(after->name[j], before->name[i]) != 0)) j++;
        if (j == after->n || (before->dtype[i] > 0 && after->dtype[j] != before->dtype[i])) {
            fprintf(stderr, "fuzz_convert: graph %s '%s' was %d, is %s%d\n", before->k[i] ? "output" : "input",
                    before->name[i], before->dtype[i], j == after->n ? "gone " : "", j == after->n ? 0 : after->dtype[j]);
            abort();
        }
    }
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
    uint32_t h = hash_of(data, size);
    AmpPassOptions po = options_of(h);
    AmpListEdit edit;
    char glob[256];
    const char *globs[1];
    node_options(m, h, &po, &edit, glob, sizeof glob, globs);
    /* Types as inference gives them: the loader leaves undeclared ones unknown. */
    AmpStatus ist = {0};
    bool typed = amp_infer_model(m, &ist) == AMP_OK;
    Io before = io_of(m);
    if (!convert(m, &po, "converting", &st)) {
        io_free(&before);
        amp_model_free(m);
        return 0;
    }
    if (typed && !po.no_keep_io_types) {
        Io after = io_of(m);
        check_io(&before, &after);
        io_free(&after);
    }
    io_free(&before);
    size_t len1 = 0, len2 = 0;
    uint8_t *out1 = save(m, &len1);
    amp_model_free(m);

    AmpModel *m2 = NULL;
    amp_status_clear(&st);
    AmpCode rc = amp_model_load_bytes(out1, len1, NULL, NULL, &m2, &st);
    if (rc != AMP_OK) fail("a converted model does not load again", rc, &st);
    if (!convert(m2, &po, "converting the converted model", &st))
        fail("the converted model does not convert again", st.code, &st);
    uint8_t *out2 = save(m2, &len2);
    amp_model_free(m2);
    if (len1 != len2 || memcmp(out1, out2, len1) != 0) {
        fprintf(stderr, "fuzz_convert: converting the converted model changed it (%zu -> %zu bytes)\n", len1, len2);
        const char *dump = getenv("AMPC_FUZZ_DUMP"); /* a folder: both conversions written there */
        for (int k = 0; dump && k < 2; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/converted_%d.onnx", dump, k + 1);
            FILE *f = fopen(path, "wb");
            if (f) fwrite(k ? out2 : out1, 1, k ? len2 : len1, f), fclose(f);
        }
        abort();
    }
    free(out1);
    free(out2);
    return 0;
}
