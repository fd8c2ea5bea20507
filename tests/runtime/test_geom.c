/* The prepared geometry (ops/geom.h, runtime/exec_geom.c): the executor makes a node's
 * geometry once for its input shapes and keeps it for every later run with those shapes,
 * makes it again when they change, and a placed output that disagrees with the geometry
 * (a shape function that disagrees with its op) is an internal error naming the node. */
#include <criterion/criterion.h>
#include <string.h>

#include "ops/gemm_attrs.h"
#include "ops/geom.h"
#include "ops/norm_attrs.h"
#include "runtime/exec.h"
#include "tests/runtime/rt_util.h"

/* Softmax -> ArgMax and ReduceMax: three nodes whose ops have a geometry function. */
static AmpModel *three_geoms(void) {
    AmpModel *m = rt_model(13);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "N,4");
    rt_node(g, "", "Softmax", "X", "S");
    rt_node(g, "", "ArgMax", "S", "A");
    rt_node(g, "", "ReduceMax", "S", "R");
    rt_output(g, "A", AMP_DT_INT64, "1,4");
    rt_output(g, "R", AMP_DT_FLOAT, "1,1");
    return m;
}

static size_t run_rows(AmpExec *e, int64_t rows) {
    float x[3 * 4];
    for (int i = 0; i < 12; i++) x[i] = (float)(i % 5);
    AmpBuf xb = {.dtype = AMP_DT_FLOAT, .rank = 2, .dims = {rows, 4}, .nelem = (uint64_t)rows * 4, .data = x};
    AmpNamedBuf in = {"X", xb};
    AmpBuf out[2];
    AmpStatus st = {0};
    cr_assert_eq(amp_exec_run(e, &in, 1, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[0].rank, 2);
    cr_assert_eq(out[0].dims[1], 4);
    amp_buf_free(&out[0]), amp_buf_free(&out[1]);
    AmpExecMemory mem;
    amp_exec_memory(e, &mem);
    return mem.geometries;
}

Test(geom, made_once_per_input_shapes) {
    AmpModel *m = three_geoms();
    AmpExec *e = NULL;
    AmpStatus st = {0};
    AmpExecOptions eo = {0};
    cr_assert_eq(amp_exec_prepare(m, m->graph, &eo, &e, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run_rows(e, 2), 3, "one geometry per node on the first run");
    cr_assert_eq(run_rows(e, 2), 3, "the same shapes: none made again");
    cr_assert_eq(run_rows(e, 2), 3);
    cr_assert_eq(run_rows(e, 3), 6, "new input shapes: each node's made again");
    cr_assert_eq(run_rows(e, 3), 6);
    cr_assert_eq(run_rows(e, 2), 9, "back to the first shapes: made again (one kept per node)");
    amp_exec_free(e);
    amp_model_free(m);
}

Test(geom, a_placed_output_that_disagrees_is_internal_naming_the_node) {
    AmpModel *m = three_geoms();
    const AmpNode *n = m->graph->first; /* the Softmax */
    cr_assert_eq(n->op, AMP_OP_Softmax);
    AmpStatus st = {0};
    void *attrs = NULL;
    cr_assert_eq(amp_softmax_prepare(n, 13, &attrs, &st), AMP_OK, "%s", st.msg);
    AmpKernelGeomFn fn;
    size_t size;
    amp_op_geom(n->op, &fn, &size);
    cr_assert(fn && size == sizeof(AmpSoftmaxGeom));
    float x[8] = {0}, y[10];
    AmpBuf xb = {.dtype = AMP_DT_FLOAT, .rank = 2, .dims = {2, 4}, .nelem = 8, .data = x};
    const AmpBuf *in[1] = {&xb};
    /* what a shape function that disagrees would place: [2, 5] for a [2, 4] Softmax */
    AmpBuf out[1] = {{.dtype = AMP_DT_FLOAT, .rank = 2, .dims = {2, 5}, .nelem = 10, .data = y}};
    AmpKernelCtx k = {.node = n, .opset = 13, .n_in = 1, .in = in, .n_out = 1, .out = out, .attrs = attrs, .st = &st};
    AmpSoftmaxGeom g;
    bool made = true;
    cr_assert_eq(fn(&k, &g, &made), AMP_ERR_INTERNAL);
    char want[96];
    snprintf(want, sizeof want, "node '%s' (Softmax)", n->name);
    cr_assert(strstr(st.msg, want), "the message names the node: %s", st.msg);
    cr_assert(strstr(st.msg, "the output placed is"), "%s", st.msg);
    /* placed as the geometry says: made, rows of 4 */
    out[0].dims[1] = 4, out[0].nelem = 8;
    st = (AmpStatus){0};
    cr_assert_eq(fn(&k, &g, &made), AMP_OK, "%s", st.msg);
    cr_assert(made);
    cr_assert_eq(g.outer, 2);
    cr_assert_eq(g.d, 4);
    cr_assert_eq(g.inner, 1);
    free(attrs);
    amp_model_free(m);
}

/* MatMul has no prepare function: its row is bare, so a kernel run alone (attrs NULL)
 * still gets its geometry: m, n, K, the output batch and each input's broadcast batch
 * strides in matrices, which the CPU's BLAS and oneDNN paths and CUDA's cuBLASLt read. */
Test(geom, matmul_batch_strides_from_a_bare_row) {
    AmpModel *m = rt_model(13);
    AmpGraph *g = m->graph;
    rt_input(g, "A", AMP_DT_FLOAT, "2,1,3,4");
    rt_input(g, "B", AMP_DT_FLOAT, "5,4,6");
    rt_node(g, "", "MatMul", "A,B", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "2,5,3,6");
    const AmpNode *n = g->first;
    cr_assert_eq(n->op, AMP_OP_MatMul);
    static float a[2 * 3 * 4], b[5 * 4 * 6], y[2 * 5 * 3 * 6];
    AmpBuf ab = {.dtype = AMP_DT_FLOAT, .rank = 4, .dims = {2, 1, 3, 4}, .nelem = 24, .data = a};
    AmpBuf bb = {.dtype = AMP_DT_FLOAT, .rank = 3, .dims = {5, 4, 6}, .nelem = 120, .data = b};
    const AmpBuf *in[2] = {&ab, &bb};
    AmpBuf out[1] = {{.dtype = AMP_DT_FLOAT, .rank = 4, .dims = {2, 5, 3, 6}, .nelem = 180, .data = y}};
    AmpStatus st = {0};
    AmpKernelCtx k = {.node = n, .opset = 13, .n_in = 2, .in = in, .n_out = 1, .out = out, .st = &st};
    AmpMatmulGeom own;
    const AmpMatmulGeom *mg;
    cr_assert_eq(amp_kernel_geom(&k, &own, (const void **)&mg), AMP_OK, "%s", st.msg);
    cr_assert_eq(mg->m, 3);
    cr_assert_eq(mg->n, 6);
    cr_assert_eq(mg->kk, 4);
    cr_assert_eq(mg->nb, 2);
    cr_assert(mg->batch[0] == 2 && mg->batch[1] == 5);
    cr_assert(mg->sa[0] == 1 && mg->sa[1] == 0, "A's batch (2, 1) repeats along the second axis");
    cr_assert(mg->sb[0] == 0 && mg->sb[1] == 1, "B's batch (5) repeats along the first");
    cr_assert(mg->nbatch == 10 && mg->na == 2 && mg->nbm == 5);
    /* a placed output the geometry disagrees with is internal, naming the node */
    out[0].dims[3] = 7;
    st = (AmpStatus){0};
    cr_assert_eq(amp_kernel_geom(&k, &own, (const void **)&mg), AMP_ERR_INTERNAL);
    cr_assert(strstr(st.msg, "the output placed is"), "%s", st.msg);
    amp_model_free(m);
}
