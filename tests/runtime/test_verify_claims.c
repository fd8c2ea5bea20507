/* `ampc verify`'s claims about where a node would run (amp_backend_place: the device,
 * the CPU fallback, or no backend) come from the executor's own predicate
 * (amp_backend_takes): for every op of the op table, a node of it with float inputs is
 * claimed for the fallback exactly when the executor's prepare on the CPU finds a kernel
 * for it, and claimed for no backend exactly when that prepare fails naming the missing
 * kernel. ONNX's Gradient (not in the table: no kernel) is claimed for no backend until
 * the gradient pass expands it. Needs no GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "backend/backend.h"
#include "passes/passes.h"
#include "runtime/exec.h"
#include "tests/runtime/rt_util.h"

/* A model whose one node is op `id` of the table with its fewest inputs (at least one)
 * and outputs, every input a float32 [2, 3] graph input. */
static AmpModel *one_node(const char *domain, const char *op, int n_in, int n_out, AmpNode **node) {
    AmpModel *m = rt_model(22);
    m->opsets[2] = (AmpOpset){"com.microsoft", 1, true};
    m->n_opsets = 3;
    AmpGraph *g = m->graph;
    AmpNode *n = amp_node_new(g, domain, op, "n", n_in, n_out);
    cr_assert_not_null(n);
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        cr_assert_eq(amp_node_set_input(n, i, rt_input(g, name, AMP_DT_FLOAT, "2,3")), AMP_OK);
    }
    for (int k = 0; k < n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        amp_node_set_output(n, k, amp_graph_value(g, name));
    }
    amp_node_append(g, n);
    amp_graph_bind_ops(g);
    *node = n;
    return m;
}

/* What the executor's prepare on the CPU says of n's kernel: true when it fails naming
 * the missing kernel. */
static bool prepare_says_no_kernel(AmpModel *m) {
    AmpExecOptions eo = {.backend = amp_backend_cpu(), .no_plan = true};
    AmpExec *e = NULL;
    AmpStatus st = {0};
    AmpCode rc = amp_exec_prepare(m, m->graph, &eo, &e, &st);
    if (e) amp_exec_free(e);
    return rc == AMP_ERR_UNSUPPORTED && strstr(st.msg, "has no kernel for it") != NULL;
}

Test(verify_claims, every_op_claim_matches_the_executor) {
    size_t fallback = 0, none = 0, device = 0;
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *info = amp_op_info((AmpOpId)id);
        if (id == AMP_OP_If || id == AMP_OP_Loop || id == AMP_OP_Scan) continue; /* the executor's own */
        int n_in = info->min_inputs > 0 ? info->min_inputs : 1, n_out = info->min_outputs > 0 ? info->min_outputs : 1;
        AmpNode *n = NULL;
        AmpModel *m = one_node(info->domain, info->name, n_in, n_out, &n);
        AmpNodePlace place = amp_backend_place(AMP_BACKEND_CUDA, m, n);
        bool cpu = amp_backend_takes(amp_backend_cpu(), m, n);
        bool no_kernel = prepare_says_no_kernel(m);
        switch (place) {
        case AMP_PLACE_DEVICE: device++; break;
        case AMP_PLACE_FALLBACK:
            fallback++;
            cr_assert(cpu && !no_kernel, "verify claims the CPU fallback runs %s, but the executor finds no CPU kernel",
                      info->name);
            break;
        case AMP_PLACE_NONE:
            none++;
            cr_assert(!cpu && no_kernel, "verify claims no backend runs %s, but the executor %s", info->name,
                      no_kernel ? "agrees only in part" : "finds a kernel");
            break;
        }
        if (!amp_backend_built(AMP_BACKEND_CUDA)) cr_assert_neq(place, AMP_PLACE_DEVICE);
        amp_model_free(m);
    }
    printf("verify claims over %d ops: %zu on the device, %zu on the CPU fallback, %zu on no backend\n",
           AMP_OP__COUNT - 1, device, fallback, none);
    cr_assert_gt(fallback + device, 100);
}

Test(verify_claims, gradient_has_no_kernel_until_expanded) {
    AmpNode *n = NULL;
    AmpModel *m = one_node("ai.onnx.preview.training", "Gradient", 1, 1, &n);
    cr_assert_eq(n->op, AMP_OP_UNKNOWN);
    cr_assert_eq(amp_backend_place(AMP_BACKEND_CUDA, m, n), AMP_PLACE_NONE);
    cr_assert(prepare_says_no_kernel(m));
    amp_model_free(m);
}
