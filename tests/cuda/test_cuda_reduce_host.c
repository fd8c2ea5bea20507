/* The CUDA Reduce kernels' axes input, on the CPU (no GPU needed): the prepare reads it
 * from the model where the model fixes it (a Constant node, as `ampc grad` writes for the
 * broadcast gradients' ReduceSum; an initializer no feed and no training update
 * replaces), so the kernel waits on no stream to read it back each run; otherwise (a
 * graph input, a fed or trained initializer, a computed value) -1: read when it runs. */
#include <criterion/criterion.h>

#include "kernels/cuda/reduce.h"
#include "tests/runtime/rt_util.h"

static AmpModel *m;

static void setup(void) {
    m = rt_model(18);
}

static void teardown(void) {
    amp_model_free(m);
}

TestSuite(cuda_reduce_host, .init = setup, .fini = teardown);

/* ReduceSum(x, axes) reading value `axes`. */
static AmpNode *reduce_of(const char *axes) {
    char ins[80];
    snprintf(ins, sizeof ins, "x,%s", axes);
    return rt_node(m->graph, "", "ReduceSum", ins, "y");
}

/* axes = Constant(value = int64 tensor of n elements, in its typed field). */
static void constant_tensor(const char *name, const int64_t *v, size_t n) {
    AmpNode *c = rt_node(m->graph, "", "Constant", "", name);
    AmpAttr *a = amp_node_add_attr(c, "value", AMP_ATTR_TENSOR);
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    t->dtype = AMP_DT_INT64;
    t->has = AMP_TENSOR_HAS_DTYPE;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = (int64_t)n;
    t->nelem = n;
    t->int64_data = amp_arena_memdup(&m->arena, v, n * sizeof *v + 1);
    t->n_int64 = n;
    a->t = t;
}

Test(cuda_reduce_host, fixed_by_the_model) {
    int64_t got[8];
    constant_tensor("c", (const int64_t[]){1, -1}, 2);
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("c"), got, 8), 2);
    cr_assert(got[0] == 1 && got[1] == -1);

    AmpNode *ci = rt_node(m->graph, "", "Constant", "", "ci");
    AmpAttr *a = amp_node_add_attr(ci, "value_ints", AMP_ATTR_INTS);
    static int64_t zero[] = {0};
    a->ints = zero;
    a->n_ints = 1;
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("ci"), got, 8), 1);
    cr_assert_eq(got[0], 0);

    /* initializers in ONNX's raw layout, int64 and int32 */
    rt_init(m->graph, "i64", AMP_DT_INT64, 1, (const int64_t[]){2}, (const int64_t[]){2, -3});
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("i64"), got, 8), 2);
    cr_assert(got[0] == 2 && got[1] == -3);
    rt_init(m->graph, "i32", AMP_DT_INT32, 1, (const int64_t[]){1}, (const int32_t[]){-2});
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("i32"), got, 8), 1);
    cr_assert_eq(got[0], -2);
    rt_init(m->graph, "none", AMP_DT_INT64, 1, (const int64_t[]){0}, (const int64_t[]){0});
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("none"), got, 8), 0);
}

Test(cuda_reduce_host, known_only_at_run) {
    int64_t got[8];
    rt_input(m->graph, "fed", AMP_DT_INT64, "1");
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("fed"), got, 8), -1, "a graph input");
    /* an initializer that is a graph input too: a feed replaces it */
    AmpValue *d = rt_init(m->graph, "dflt", AMP_DT_INT64, 1, (const int64_t[]){1}, (const int64_t[]){1});
    cr_assert_not_null(amp_graph_add_input(m->graph, d));
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("dflt"), got, 8), -1, "an initializer fed as an input");
    /* an initializer a training step rebinds */
    rt_init(m->graph, "bound", AMP_DT_INT64, 1, (const int64_t[]){1}, (const int64_t[]){1});
    rt_training(m);
    rt_bindings(m, false, "bound=bound_new");
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("bound"), got, 8), -1, "an updated initializer");
    /* computed, absent, too many, not 1-D */
    rt_node(m->graph, "", "Shape", "x", "shape");
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("shape"), got, 8), -1);
    cr_assert_eq(amp_reduce_fixed_axes(rt_node(m->graph, "", "ReduceSum", "x", "y2"), got, 8), -1);
    rt_init(m->graph, "many", AMP_DT_INT64, 1, (const int64_t[]){3}, (const int64_t[]){0, 1, 2});
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("many"), got, 2), -1);
    rt_init(m->graph, "flat", AMP_DT_INT64, 2, (const int64_t[]){1, 1}, (const int64_t[]){0});
    cr_assert_eq(amp_reduce_fixed_axes(reduce_of("flat"), got, 8), -1);
}
