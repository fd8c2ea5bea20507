/* The device simulator (backend.h): its memory cannot be read from the host, its copies
 * and kernels refuse a pointer on the wrong side, and an executor over it runs a graph
 * with weights, control flow and outputs and gives every byte back. Together with the
 * suite run again under AMP_BACKEND=sim, this is the proof that the interpreter moves
 * every byte through the backend. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "kernels/cpu/backend_sim.h"
#include "runtime/exec.h"
#include "tests/runtime/rt_util.h"

#define I64s(...) ((const int64_t[]){__VA_ARGS__})

static void rt_attr_graph(AmpNode *n, const char *name, AmpGraph *body) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_GRAPH);
    cr_assert_not_null(a);
    a->g = body;
}

static AmpBackend *open_sim_with(const AmpBackendSettings *set) {
    AmpBackend *be = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_backend_sim_open(set, &be, &st), AMP_OK, "%s", st.msg);
    cr_assert_str_eq(be->name, "sim");
    return be;
}

static AmpBackend *open_sim(void) {
    static const AmpBackendSettings defaults = {0};
    return open_sim_with(&defaults);
}

/* A host read through a simulator pointer does not return: the child that tries dies
 * (a fault, or a sanitizer's report and exit), and never prints the byte. */
Test(sim, host_reads_of_device_memory_fault) {
    AmpBackend *be = open_sim();
    unsigned char *p = be->alloc(be, 16);
    cr_assert_not_null(p);
    AmpStatus st = {0};
    const unsigned char bytes[16] = {42};
    cr_assert_eq(be->copy_in(be, p, bytes, sizeof bytes, &st), AMP_OK, "%s", st.msg);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        volatile unsigned char c = p[0];
        _exit(c == 42 ? 0 : 3);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "the host read the device byte");
    unsigned char back[16] = {0};
    cr_assert_eq(be->copy_out(be, back, p, sizeof back, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(back[0], 42, "copy_out brings the byte back");
    be->free(be, p);
    cr_assert_eq(amp_backend_sim_live(be), 0);
    amp_backend_close(be);
}

Test(sim, copies_refuse_the_wrong_side) {
    AmpBackend *be = open_sim();
    void *d = be->alloc(be, 8), *d2 = be->alloc(be, 8);
    unsigned char h[8] = {0}, h2[8] = {0};
    AmpStatus st = {0};
    cr_assert_eq(be->copy_in(be, h, h2, 8, &st), AMP_ERR_INTERNAL, "copy_in into host memory");
    cr_assert_not_null(strstr(st.msg, "device simulator"), "%s", st.msg);
    amp_status_clear(&st);
    cr_assert_eq(be->copy_in(be, d, d2, 8, &st), AMP_ERR_INTERNAL, "copy_in from device memory");
    amp_status_clear(&st);
    cr_assert_eq(be->copy_out(be, d, d2, 8, &st), AMP_ERR_INTERNAL, "copy_out into device memory");
    amp_status_clear(&st);
    cr_assert_eq(be->copy_out(be, h, h2, 8, &st), AMP_ERR_INTERNAL, "copy_out from host memory");
    amp_status_clear(&st);
    cr_assert_eq(be->copy(be, d, h, 8, &st), AMP_ERR_INTERNAL, "copy from host memory");
    amp_status_clear(&st);
    cr_assert_eq(be->copy(be, d, d2, 8, &st), AMP_OK, "%s", st.msg);
    cr_assert_null(be->borrow_host, "the simulator reads no host memory in place");
    be->free(be, d);
    be->free(be, d2);
    cr_assert_eq(amp_backend_sim_live(be), 0);
    amp_backend_close(be);
    cr_assert_eq(amp_backend_sim_live(amp_backend_cpu()), SIZE_MAX, "the CPU is no simulator");
}

static AmpBuf *no_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    (void)ctx, (void)index, (void)dtype, (void)rank, (void)dims;
    amp_fail(st, AMP_ERR_INTERNAL, "not reached");
    return NULL;
}

/* A kernel handed a host buffer (an input the interpreter forgot to upload) is an error
 * naming the node, not a silent host read. */
Test(sim, a_host_input_is_named) {
    AmpBackend *be = open_sim();
    AmpModel *m = rt_model(17);
    rt_input(m->graph, "X", AMP_DT_FLOAT, "2");
    AmpNode *n = rt_node(m->graph, "", "Relu", "X", "Y");
    rt_output(m->graph, "Y", AMP_DT_FLOAT, "2");
    AmpBackendKernel k;
    AmpStatus st = {0};
    cr_assert_eq(be->prepare_node(be, n, 17, &k, &st), AMP_OK, "%s", st.msg);
    float x[2] = {-1, 2};
    AmpBuf in = {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {2}, .nelem = 2, .data = x};
    const AmpBuf *ins[1] = {&in};
    AmpKernelCtx ctx = {.node = n, .opset = 17, .n_in = 1, .in = ins, .n_out = 1, .alloc = no_alloc, .st = &st};
    cr_assert_eq(be->run_node(be, &k, &ctx), AMP_ERR_INTERNAL);
    cr_assert_not_null(strstr(st.msg, "is host memory"), "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, n->name), "%s", st.msg);
    amp_model_free(m);
    amp_backend_close(be);
}

/* An executor over the simulator: a weight (uploaded), an If whose condition is read back
 * with copy_out, a Loop whose counter is written with copy_in, outputs copied out. Twice
 * (the second run from the planned arena), then every allocation is given back. */
Test(sim, executor_runs_and_gives_everything_back) {
    AmpBackend *be = open_sim();
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_input(g, "C", AMP_DT_BOOL, "");
    const float w[3] = {1, 2, 3};
    rt_init(g, "W", AMP_DT_FLOAT, 1, I64s(3), w);
    rt_node(g, "", "Mul", "X,W", "XW");
    /* If C: XW + XW else XW * XW */
    AmpNode *iff = rt_node(g, "", "If", "C", "Z");
    AmpGraph *then_g = amp_graph_new(m, g), *else_g = amp_graph_new(m, g);
    rt_node(then_g, "", "Add", "XW,XW", "T");
    rt_output(then_g, "T", AMP_DT_FLOAT, "3");
    rt_node(else_g, "", "Mul", "XW,XW", "E");
    rt_output(else_g, "E", AMP_DT_FLOAT, "3");
    rt_attr_graph(iff, "then_branch", then_g);
    rt_attr_graph(iff, "else_branch", else_g);
    /* Loop 4 times from acc = Z: acc = acc + Z, so ACC = 5 Z */
    const int64_t four = 4;
    rt_init(g, "M", AMP_DT_INT64, 0, NULL, &four);
    AmpNode *loop = rt_node(g, "", "Loop", "M,,Z", "ACC");
    AmpGraph *body = amp_graph_new(m, g);
    rt_input(body, "i", AMP_DT_INT64, "");
    rt_input(body, "cond_in", AMP_DT_BOOL, "");
    rt_input(body, "acc", AMP_DT_FLOAT, "3");
    rt_node(body, "", "Identity", "cond_in", "cond_out");
    rt_node(body, "", "Add", "acc,Z", "acc_out");
    rt_output(body, "cond_out", AMP_DT_BOOL, "");
    rt_output(body, "acc_out", AMP_DT_FLOAT, "3");
    rt_attr_graph(loop, "body", body);
    rt_output(g, "ACC", AMP_DT_FLOAT, "3");

    AmpExec *e = NULL;
    AmpStatus st = {0};
    AmpExecOptions eo = {.backend = be};
    cr_assert_eq(amp_exec_prepare(m, g, &eo, &e, &st), AMP_OK, "%s", st.msg);
    float x[3] = {1, 1, 2};
    for (int run = 0; run < 3; run++) {
        uint8_t c = run != 1;
        AmpNamedBuf ins[2] = {
            {"X", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {3}, .nelem = 3, .data = x}},
            {"C", {.dtype = AMP_DT_BOOL, .rank = 0, .nelem = 1, .data = &c}},
        };
        AmpBuf out[1];
        cr_assert_eq(amp_exec_run(e, ins, 2, out, &st), AMP_OK, "%s", st.msg);
        const float *acc = out[0].data; /* host memory: copied out */
        for (int i = 0; i < 3; i++) {
            float xw = x[i] * w[i], z = c ? xw + xw : xw * xw;
            cr_assert_float_eq(acc[i], 5 * z, 1e-6, "run %d element %d", run, i);
        }
        amp_buf_free(&out[0]);
    }
    amp_exec_free(e);
    amp_model_free(m);
    cr_assert_eq(amp_backend_sim_live(be), 0, "every device buffer was given back");
    amp_backend_close(be);
}

/* A Reshape whose target is computed in the step (Abs of a constant: no shape function
 * follows Abs) cannot be sized by the plan: the executor sizes it when it is reached, from
 * the target copied out of the device (one sync per run), and places its output before
 * the kernel runs. Everything else is sized before the run. */
Test(sim, a_computed_reshape_target_is_read_back_once_per_run) {
    AmpBackend *be = open_sim();
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "6");
    const int64_t neg[2] = {-2, -3};
    rt_init(g, "T", AMP_DT_INT64, 1, I64s(2), neg);
    rt_node(g, "", "Abs", "T", "shape");
    rt_node(g, "", "Reshape", "X,shape", "R");
    rt_node(g, "", "Relu", "R", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "2,3");
    AmpExec *e = NULL;
    AmpStatus st = {0};
    AmpExecOptions eo = {.backend = be};
    cr_assert_eq(amp_exec_prepare(m, g, &eo, &e, &st), AMP_OK, "%s", st.msg);
    float x[6] = {-1, 2, -3, 4, -5, 6};
    for (int run = 0; run < 2; run++) {
        AmpNamedBuf in = {"X", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {6}, .nelem = 6, .data = x}};
        AmpBuf out;
        cr_assert_eq(amp_exec_run(e, &in, 1, &out, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(out.rank, 2);
        cr_assert_eq(out.dims[0], 2);
        cr_assert_eq(out.dims[1], 3);
        for (int i = 0; i < 6; i++) cr_assert_float_eq(((float *)out.data)[i], x[i] > 0 ? x[i] : 0, 0);
        amp_buf_free(&out);
        AmpExecMemory mem;
        amp_exec_memory(e, &mem);
        cr_assert_eq(mem.values_sized, 1, "only Abs's output is sized before the run (%zu)", mem.values_sized);
        cr_assert_eq(mem.values_dynamic, 2, "R and Y wait for the target (%zu)", mem.values_dynamic);
        cr_assert_eq(mem.late_nodes, 2, "Reshape and Relu are sized when reached (%zu)", mem.late_nodes);
        cr_assert_eq(mem.syncs, 1, "the target is copied out once (%zu)", mem.syncs);
    }
    amp_exec_free(e);
    amp_model_free(m);
    cr_assert_eq(amp_backend_sim_live(be), 0);
    amp_backend_close(be);
}

/* Opset 6 Add with broadcast=1 and axis=1 lines B (3) up with A's axis 1 of (2, 3, 4),
 * which numpy's rule refuses: the shape function gives A's shape, as the kernel does
 * (before, the shape function called it a broadcast error and the run failed). */
Test(sim, legacy_broadcast_with_axis_runs) {
    AmpBackend *be = open_sim();
    AmpModel *m = rt_model(6);
    AmpGraph *g = m->graph;
    rt_input(g, "A", AMP_DT_FLOAT, "2,3,4");
    rt_input(g, "B", AMP_DT_FLOAT, "3");
    AmpNode *add = rt_node(g, "", "Add", "A,B", "Y");
    amp_node_add_attr(add, "broadcast", AMP_ATTR_INT)->i = 1;
    amp_node_add_attr(add, "axis", AMP_ATTR_INT)->i = 1;
    rt_output(g, "Y", AMP_DT_FLOAT, "2,3,4");
    AmpExec *e = NULL;
    AmpStatus st = {0};
    AmpExecOptions eo = {.backend = be};
    cr_assert_eq(amp_exec_prepare(m, g, &eo, &e, &st), AMP_OK, "%s", st.msg);
    float a[24] = {0}, b[3] = {1, 2, 3};
    AmpNamedBuf ins[2] = {{"A", {.dtype = AMP_DT_FLOAT, .rank = 3, .dims = {2, 3, 4}, .nelem = 24, .data = a}},
                          {"B", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {3}, .nelem = 3, .data = b}}};
    AmpBuf out;
    cr_assert_eq(amp_exec_run(e, ins, 2, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out.rank, 3);
    for (int i = 0; i < 24; i++) cr_assert_eq(((float *)out.data)[i], b[(i / 4) % 3]);
    amp_buf_free(&out);
    AmpExecMemory mem;
    amp_exec_memory(e, &mem);
    cr_assert_eq(mem.values_dynamic, 0, "Y is sized before the run");
    amp_exec_free(e);
    amp_model_free(m);
    amp_backend_close(be);
}

/* X (3) carried through a Loop of trip count M (dtype, rank m_rank: 1 with n_m elements,
 * or 0), whose body doubles it (dbl) or passes it on; ACC the result. */
static AmpModel *loop_model(int m_dtype, int m_rank, int64_t n_m, const void *m_data, bool dbl) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_init(g, "M", m_dtype, m_rank, I64s(n_m), m_data);
    AmpNode *loop = rt_node(g, "", "Loop", "M,,X", "ACC");
    AmpGraph *body = amp_graph_new(m, g);
    rt_input(body, "i", AMP_DT_INT64, "");
    rt_input(body, "cond_in", AMP_DT_BOOL, "");
    rt_input(body, "acc", AMP_DT_FLOAT, "3");
    rt_node(body, "", "Identity", "cond_in", "cond_out");
    rt_node(body, "", dbl ? "Add" : "Identity", dbl ? "acc,acc" : "acc", "acc_out");
    rt_output(body, "cond_out", AMP_DT_BOOL, "");
    rt_output(body, "acc_out", AMP_DT_FLOAT, "3");
    rt_attr_graph(loop, "body", body);
    rt_output(g, "ACC", AMP_DT_FLOAT, "3");
    return m;
}

static AmpCode run_loop_with_m(AmpBackend *be, int dtype, int64_t n_m, const void *m_data, AmpStatus *st) {
    AmpModel *m = loop_model(dtype, 1, n_m, m_data, true);
    AmpGraph *g = m->graph;
    AmpExec *e = NULL;
    AmpExecOptions eo = {.backend = be};
    AmpCode rc = amp_exec_prepare(m, g, &eo, &e, st);
    float x[3] = {1, 2, 3};
    AmpNamedBuf in = {"X", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {3}, .nelem = 3, .data = x}};
    AmpBuf out = {0};
    if (!rc) rc = amp_exec_run(e, &in, 1, &out, st);
    if (!rc) {
        for (int i = 0; i < 3; i++) cr_assert_float_eq(((float *)out.data)[i], 8 * x[i], 0, "three doublings");
        amp_buf_free(&out);
    }
    amp_exec_free(e);
    amp_model_free(m);
    return rc;
}

/* Loop's trip count is read back from the device as one integer element: an empty M, or
 * a float M (3.0 is not three iterations), is an input error naming the node, never a
 * read past the tensor or a silent zero (issue "Hostile inputs, round 2", point 4). */
Test(sim, loop_trip_count_must_be_one_integer) {
    AmpBackend *be = open_sim();
    AmpStatus st = {0};
    const int64_t three = 3;
    cr_assert_eq(run_loop_with_m(be, AMP_DT_INT64, 1, &three, &st), AMP_OK, "%s", st.msg);
    const float three_f = 3.0f;
    amp_status_clear(&st);
    cr_assert_eq(run_loop_with_m(be, AMP_DT_FLOAT, 1, &three_f, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "trip count"), "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "Loop"), "%s", st.msg);
    amp_status_clear(&st);
    cr_assert_eq(run_loop_with_m(be, AMP_DT_INT64, 0, &three, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "int64[0]"), "%s", st.msg);
    cr_assert_eq(amp_backend_sim_live(be), 0);
    amp_backend_close(be);
}

/* The caps on work: a Loop of 2^40 iterations stops past max_iterations, and past the
 * run's deadline, naming the cap, and give every buffer back. */
static AmpModel *big_loop(void) {
    const int64_t huge = (int64_t)1 << 40;
    return loop_model(AMP_DT_INT64, 0, 0, &huge, false);
}

Test(sim, caps_on_iterations_and_time) {
    AmpBackend *be = open_sim();
    AmpModel *m = big_loop();
    float x[3] = {1, 2, 3};
    AmpNamedBuf in = {"X", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {3}, .nelem = 3, .data = x}};
    AmpBuf out;
    AmpStatus st = {0};
    AmpExec *e = NULL;
    AmpExecOptions eo = {.backend = be, .max_iterations = 100};
    cr_assert_eq(amp_exec_prepare(m, m->graph, &eo, &e, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_exec_run(e, &in, 1, &out, &st), AMP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(st.msg, "more than 100 iterations"), "%s", st.msg);
    amp_exec_free(e);
    /* A deadline 50 ms away stops the same loop within a second. */
    double deadline = 0;
    eo = (AmpExecOptions){.backend = be, .deadline = &deadline};
    cr_assert_eq(amp_exec_prepare(m, m->graph, &eo, &e, &st), AMP_OK, "%s", st.msg);
    double t0 = amp_exec_clock();
    deadline = t0 + 0.05;
    amp_status_clear(&st);
    cr_assert_eq(amp_exec_run(e, &in, 1, &out, &st), AMP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(st.msg, "time limit"), "%s", st.msg);
    cr_assert_lt(amp_exec_clock() - t0, 1.0, "the loop ran on past its deadline");
    amp_exec_free(e);
    amp_model_free(m);
    cr_assert_eq(amp_backend_sim_live(be), 0, "a stopped run gives every buffer back");
    amp_backend_close(be);
}

/* A device kernel that refuses the shapes it meets when it runs (AMP_ERR_UNSUPPORTED: a
 * geometry cuDNN cannot do) hands its node to the CPU fallback for good: the run goes on
 * with the right result, the node counts as fallen back, and without a fallback the
 * refusal is the run's error, naming the node. */
Test(sim, a_kernel_refused_at_run_time_falls_back) {
    AmpBackend *be = open_sim_with(&(AmpBackendSettings){.refuses = "Mul"});
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    const float w[3] = {1, 2, 3};
    rt_init(g, "W", AMP_DT_FLOAT, 1, I64s(3), w);
    rt_node(g, "", "Mul", "X,W", "XW");
    rt_node(g, "", "Add", "XW,X", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "3");
    for (int with_fallback = 1; with_fallback >= 0; with_fallback--) {
        AmpExec *e = NULL;
        AmpStatus st = {0};
        AmpExecOptions eo = {.backend = be, .fallback = with_fallback ? amp_backend_cpu() : NULL};
        cr_assert_eq(amp_exec_prepare(m, g, &eo, &e, &st), AMP_OK, "%s", st.msg);
        float x[3] = {1, -2, 4};
        AmpNamedBuf ins[1] = {{"X", {.dtype = AMP_DT_FLOAT, .rank = 1, .dims = {3}, .nelem = 3, .data = x}}};
        for (int run = 0; run < 2; run++) {
            AmpBuf out[1];
            AmpCode rc = amp_exec_run(e, ins, 1, out, &st);
            if (!with_fallback) {
                cr_assert_eq(rc, AMP_ERR_UNSUPPORTED);
                cr_assert(strstr(st.msg, "(Mul)") && strstr(st.msg, "AMP_SIM_REFUSES"), "%s", st.msg);
                break;
            }
            cr_assert_eq(rc, AMP_OK, "run %d: %s", run, st.msg);
            for (int i = 0; i < 3; i++) cr_assert_float_eq(((float *)out[0].data)[i], x[i] * w[i] + x[i], 1e-6);
            amp_buf_free(&out[0]);
            AmpExecMemory mem;
            amp_exec_memory(e, &mem);
            cr_assert_eq(mem.fallback_nodes, 1, "run %d", run);
            char ops[64];
            amp_exec_fallback_ops((const AmpExec *const[]){e}, 1, ops, sizeof ops);
            cr_assert_str_eq(ops, "Mul x1");
        }
        amp_exec_free(e);
    }
    amp_model_free(m);
    cr_assert_eq(amp_backend_sim_live(be), 0, "every device buffer was given back");
    amp_backend_close(be);
}
