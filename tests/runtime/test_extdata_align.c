/* External data at an offset that is no multiple of the element's size (issue 43, item 9:
 * offsets 1, 2, 3 and 5 into the data file, which onnx's writers and hand-made files can
 * give): the loader copies such a tensor to aligned memory, so the kernels, which read a
 * tensor as an array of its elements, never read one in place. The sanitized build runs
 * this test: UBSan reported misaligned float loads in the kernels before (here every
 * build checks the pointer too, so it failed in the plain build as well). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampc/ampc.h"
#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

/* Y = X + W (float [2,3]) and Z = D + V (double [2]), W and V external in w.bin at
 * `off_w` and `off_v`. */
static char *write_model(size_t off_w, size_t off_v) {
    char *dir = tu_mkdtemp();
    const int64_t xd[2] = {2, 3}, dd[1] = {2};
    float w[6];
    double v[2] = {0.25, -8.5};
    for (int i = 0; i < 6; i++) w[i] = (float)i * 1.5f - 2.0f;
    size_t len = off_v + sizeof v > off_w + sizeof w ? off_v + sizeof v : off_w + sizeof w;
    uint8_t *bin = calloc(1, len);
    cr_assert_not_null(bin);
    memcpy(bin + off_w, w, sizeof w);
    memcpy(bin + off_v, v, sizeof v);
    char *bp = tu_path(dir, "w.bin");
    cr_assert(tu_write(bp, bin, len));
    PbBuf g = {0}, tw = {0}, tv = {0}, model = {0};
    onnx_tensor_head(&tw, "W", 1, 2, xd);
    onnx_tensor_external(&tw, "w.bin", (int64_t)off_w, (int64_t)sizeof w);
    onnx_tensor_head(&tv, "V", 11, 1, dd);
    onnx_tensor_external(&tv, "w.bin", (int64_t)off_v, (int64_t)sizeof v);
    const char *a[2] = {"X", "W"}, *y[1] = {"Y"}, *b[2] = {"D", "V"}, *z[1] = {"Z"};
    onnx_node(&g, "Add", "add_w", 2, a, 1, y, NULL);
    onnx_node(&g, "Add", "add_v", 2, b, 1, z, NULL);
    pb_str(&g, G_NAME, "align");
    pb_msg(&g, G_INIT, &tw);
    pb_msg(&g, G_INIT, &tv);
    onnx_vi(&g, G_INPUT, "X", 1, 2, xd);
    onnx_vi(&g, G_INPUT, "D", 11, 1, dd);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 2, xd);
    onnx_vi(&g, G_OUTPUT, "Z", 11, 1, dd);
    onnx_model(&model, &g, 13);
    char *mp = tu_path(dir, "model.onnx");
    cr_assert(tu_write(mp, model.data, model.len));
    pb_free(&model);
    free(bin), free(bp), free(mp);
    return dir;
}

/* The model at mp loaded, and where the bytes of W and V lie. */
static AmpModel *load_wv(const char *mp, AmpBytes *wb, AmpBytes *vb) {
    AmpModel *m = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_model_load_file(mp, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_tensor_bytes(m, amp_graph_lookup(m->graph, "W")->initializer, wb, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_tensor_bytes(m, amp_graph_lookup(m->graph, "V")->initializer, vb, &st), AMP_OK, "%s", st.msg);
    return m;
}

static void check_offsets(size_t off_w, size_t off_v) {
    char *dir = write_model(off_w, off_v), *mp = tu_path(dir, "model.onnx");
    /* The loaded tensors lie aligned for their elements. */
    AmpBytes wb, vb;
    AmpModel *m = load_wv(mp, &wb, &vb);
    AmpStatus st = {0};
    cr_expect_eq((uintptr_t)wb.data % 4, 0, "W at offset %zu lies at %p, not float-aligned", off_w, (void *)wb.data);
    cr_expect_eq((uintptr_t)vb.data % 8, 0, "V at offset %zu lies at %p, not double-aligned", off_v, (void *)vb.data);
    float w0;
    memcpy(&w0, wb.data, 4);
    cr_expect_eq(w0, -2.0f, "W[0] read back as %g", w0);
    amp_model_free(m);
    /* ... and the kernels compute with them (under UBSan: without misaligned loads). */
    AmpSession *s = NULL;
    cr_assert_eq(amp_session_open(mp, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[6] = {1, 1, 1, 1, 1, 1};
    double d[2] = {1, 2};
    const int64_t xd[2] = {2, 3}, dd[1] = {2};
    AmpTensorView in[2] = {{.name = "X", .dtype = AMP_DT_FLOAT, .data = x, .rank = 2},
                           {.name = "D", .dtype = AMP_DT_DOUBLE, .data = d, .rank = 1}};
    memcpy(in[0].dims, xd, sizeof xd);
    memcpy(in[1].dims, dd, sizeof dd);
    AmpTensorView out[2];
    const char *names[2] = {"Y", "Z"};
    cr_assert_eq(amp_session_run(s, in, 2, names, 2, out, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(((float *)out[0].data)[i], (float)i * 1.5f - 2.0f + 1.0f, "Y[%d] at offset %zu", i, off_w);
    cr_expect_eq(((double *)out[1].data)[0], 1.25);
    cr_expect_eq(((double *)out[1].data)[1], -6.5);
    amp_tensor_view_free(&out[0]);
    amp_tensor_view_free(&out[1]);
    amp_session_close(s);
    tu_rmtree(dir);
    free(dir), free(mp);
}

Test(extdata_align, offsets_of_1_2_3_and_5_bytes) {
    static const size_t offs[][2] = {{1, 32}, {2, 36}, {3, 44}, {5, 33}, {64, 4}};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) check_offsets(offs[i][0], offs[i][1]);
}

Test(extdata_align, aligned_offsets_stay_in_the_mapping) {
    /* No copy where none is needed: the tensor's bytes are those of the file's mapping
     * (4-aligned W at 4, 8-aligned V at 64), as the converter's speed relies on. */
    char *dir = write_model(4, 64), *mp = tu_path(dir, "model.onnx");
    AmpBytes wb, vb;
    AmpModel *m = load_wv(mp, &wb, &vb);
    cr_expect_eq((uintptr_t)vb.data - (uintptr_t)wb.data, 60, "W and V are not where the file's mapping has them");
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir), free(mp);
}
