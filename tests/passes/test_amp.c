/* The amp pass (passes/amp*.c) on small hand-built graphs: each propagation rule of the
 * colouring (allow, deny forward through infer and upstream clear nodes, infer/clear
 * between allow nodes, allow through clear nodes, dropping allow where the op cannot take
 * the type), the casts (one per value and type, names, placement), graph inputs and
 * outputs (--keep-io-types and not), weights stored in 16 bits, user lists and levels,
 * --keep-fp32, --explain, the paint buckets and idempotence. Training rules, subgraphs
 * and the regression cases are in test_amp_train.c. */
#include "tests/passes/amp_test_util.h"
#include "passes/options.h"

static AmpStatus st;

/* x[4,4] -> op0 -> op1 ... -> y: a chain of `ops` named n0, n1, ... (MatMul i reads W<i>,
 * binary ops read the previous value twice). */
static AmpModel *chain(const char *const *ops, size_t n) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    char prev[32] = "x", cur[32], name[32], ins[80];
    for (size_t i = 0; i < n; i++) {
        snprintf(cur, sizeof cur, i + 1 == n ? "y" : "v%zu", i);
        snprintf(name, sizeof name, "n%zu", i);
        if (strcmp(ops[i], "MatMul") == 0) {
            char w[16];
            snprintf(w, sizeof w, "W%zu", i);
            w44(g, w);
            snprintf(ins, sizeof ins, "%s,%s", prev, w);
        } else if (strcmp(ops[i], "Add") == 0 || strcmp(ops[i], "Mul") == 0) {
            snprintf(ins, sizeof ins, "%s,%s", prev, prev);
        } else {
            snprintf(ins, sizeof ins, "%s", prev);
        }
        nd(g, ops[i], name, ins, cur);
        snprintf(prev, sizeof prev, "%s", cur);
    }
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    return m;
}

#define CHAIN(...) chain((const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

/* ---- painting --------------------------------------------------------------------- */

Test(amp_color, allow_op_alone_is_16_bit_with_casts_at_the_boundary) {
    AmpModel *m = CHAIN("MatMul");
    convert(m, NULL);
    AmpGraph *g = m->graph;
    cr_assert(is16(m, "n0"));
    cr_assert_eq(in_dt(m, "n0", 1), AMP_DT_FLOAT16, "the weight is stored in fp16");
    /* The input is cast at the top, the output cast back under its own name. */
    cr_assert_eq(dtype(val_of(g, "x")), AMP_DT_FLOAT);
    cr_assert_eq(dtype(val_of(g, "y")), AMP_DT_FLOAT);
    cr_assert_eq(g->first->op, AMP_OP_Cast);
    cr_assert_str_eq(g->first->outputs[0]->name, "x_to_fp16");
    cr_assert_str_eq(node_of(m, "n0")->outputs[0]->name, "y_fp16");
    cr_assert_eq(val_of(g, "y")->producer->op, AMP_OP_Cast);
    cr_assert_eq(count_op(g, "Cast"), 2);
    amp_model_free(m);
}

/* Shape and Size read only the shape: a 16-bit value needs no Cast back to float32 for
 * them (torchvision's attention exports read the projections' shapes: ViT-B/16 had 50
 * Casts, 24 of them full activations converted for a Shape), and a weight they read is
 * still stored in 16 bits. */
Test(amp_color, shape_and_size_read_16_bit_values_without_a_cast) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W0"), w44(g, "W1");
    nd(g, "MatMul", "mm0", "x,W0", "h");
    nd(g, "Shape", "shape", "h", "s");
    nd(g, "Size", "size", "W1", "n");
    nd(g, "Reshape", "reshape", "h,s", "r");
    nd(g, "MatMul", "mm1", "r,W1", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    rt_output(g, "n", AMP_DT_INT64, "");
    convert(m, NULL);
    cr_assert(is16(m, "mm0") && is16(m, "reshape") && is16(m, "mm1"));
    cr_assert_eq(in_dt(m, "shape", 0), AMP_DT_FLOAT16, "Shape reads the 16-bit h");
    cr_assert_eq(in_dt(m, "size", 0), AMP_DT_FLOAT16, "W1 is stored in 16 bits, Size reads it");
    cr_assert_eq(count_op(g, "Cast"), 2, "x in and y out only");
    amp_model_free(m);
}

Test(amp_color, infer_between_allow_nodes_becomes_allow) {
    AmpModel *m = CHAIN("MatMul", "Add", "Sigmoid", "MatMul");
    convert(m, NULL);
    cr_assert(is16(m, "n1") && is16(m, "n2"), "Add and Sigmoid lie between two MatMuls");
    cr_assert_eq(count_op(m->graph, "Cast"), 2, "casts only at the graph boundary");
    amp_model_free(m);
}

/* A sinusoidal embedding: Cos and Sin of position x frequency stay fp32 (the angle keeps
 * too few bits in 16), and the projection MatMul of their concatenation is 16-bit. Before
 * Sin and Cos were in the op table nothing after them had a type, and that MatMul,
 * whose every input came from them, stayed fp32 (0 of 4 float nodes converted). */
Test(amp_color, sin_cos_stay_fp32_and_the_matmul_after_them_converts) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "pos", AMP_DT_FLOAT, "4,1");
    static const int64_t fd[2] = {1, 2}, wd[2] = {4, 4};
    weight(g, "inv_freq", 2, fd, NULL);
    weight(g, "W", 2, wd, NULL);
    nd(g, "Mul", "angle", "pos,inv_freq", "ang");
    nd(g, "Cos", "cos", "ang", "c");
    nd(g, "Sin", "sin", "ang", "s");
    attr_i(nd(g, "Concat", "cat", "c,s", "cs"), "axis", 1);
    nd(g, "MatMul", "proj", "cs,W", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert(is16(m, "proj"), "the MatMul after the embedding is 16-bit");
    cr_assert_not(is16(m, "cos"));
    cr_assert_not(is16(m, "sin"));
    cr_assert_eq(out_dt(m, "cos", 0), AMP_DT_FLOAT);
    cr_assert_eq(out_dt(m, "sin", 0), AMP_DT_FLOAT);
    amp_model_free(m);
}

/* Trilu (a causal mask) is clear: between 16-bit neighbours it is 16-bit too, and its k
 * input stays int64. */
Test(amp_color, trilu_follows_its_neighbours) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    static const int64_t one = 1;
    rt_init(g, "k", AMP_DT_INT64, 0, NULL, &one);
    nd(g, "MatMul", "mm", "x,W", "h");
    nd(g, "Trilu", "tri", "h,k", "t");
    nd(g, "MatMul", "mm2", "t,W", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4,4");
    convert(m, NULL);
    cr_assert(is16(m, "mm") && is16(m, "tri") && is16(m, "mm2"));
    cr_assert_eq(in_dt(m, "tri", 1), AMP_DT_INT64);
    cr_assert_eq(count_op(g, "Cast"), 2, "casts only at the graph boundary");
    amp_model_free(m);
}

Test(amp_color, infer_only_downstream_of_allow_stays_fp32) {
    AmpModel *m = CHAIN("MatMul", "Add", "Sigmoid");
    convert(m, NULL);
    cr_assert(is16(m, "n0"));
    cr_assert_not(is16(m, "n1"));
    cr_assert_not(is16(m, "n2"));
    amp_model_free(m);
}

Test(amp_color, clear_spreads_from_allow_both_ways) {
    AmpModel *m = CHAIN("Relu", "Transpose", "MatMul", "Relu", "Identity");
    convert(m, NULL);
    for (int i = 0; i < 5; i++) {
        char n[8];
        snprintf(n, sizeof n, "n%d", i);
        cr_assert(is16(m, n), "%s should follow the MatMul", n);
    }
    amp_model_free(m);
}

Test(amp_color, clear_spread_stops_at_infer_nodes) {
    AmpModel *m = CHAIN("MatMul", "Relu", "Sigmoid", "Relu");
    convert(m, NULL);
    cr_assert(is16(m, "n1"));
    cr_assert_not(is16(m, "n2"), "infer is not entered by the clear spread");
    cr_assert_not(is16(m, "n3"));
    amp_model_free(m);
}

Test(amp_color, deny_spreads_forward_through_infer_nodes) {
    /* Exp -> Add -> MatMul: the Add is upstream of allow but deny reached it first. */
    AmpModel *m = CHAIN("MatMul", "Exp", "Add", "MatMul");
    convert(m, NULL);
    cr_assert_not(is16(m, "n1"));
    cr_assert_not(is16(m, "n2"), "deny spreads forward through the infer node");
    cr_assert(is16(m, "n3"));
    amp_model_free(m);
}

Test(amp_color, deny_spreads_through_clear_nodes_upstream_of_infer) {
    /* Exp -> Relu -> Add -> MatMul: the Relu lies upstream of an infer node. */
    AmpModel *m = CHAIN("Exp", "Relu", "Add", "MatMul");
    convert(m, NULL);
    cr_assert_not(is16(m, "n1"));
    cr_assert_not(is16(m, "n2"));
    cr_assert(is16(m, "n3"));
    amp_model_free(m);
}

Test(amp_color, deny_does_not_spread_through_clear_nodes_before_allow) {
    /* Exp -> Relu -> MatMul: the Relu is not upstream of deny/infer: allow reaches it. */
    AmpModel *m = CHAIN("Exp", "Relu", "MatMul");
    convert(m, NULL);
    cr_assert_not(is16(m, "n0"));
    cr_assert(is16(m, "n1"));
    amp_model_free(m);
}

Test(amp_color, deny_does_not_spread_backwards) {
    AmpModel *m = CHAIN("MatMul", "Relu", "Exp");
    convert(m, NULL);
    cr_assert(is16(m, "n1"), "a clear node upstream of deny still follows the MatMul");
    cr_assert_not(is16(m, "n2"));
    cr_assert_eq(in_dt(m, "n2", 0), AMP_DT_FLOAT, "Exp reads float32 through a Cast");
    amp_model_free(m);
}

Test(amp_color, allow_is_dropped_where_the_opset_has_no_16_bit_type) {
    /* bfloat16 Conv needs opset 22; at 17 it stays float32, the MatMul does not. */
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,1,4,4");
    const int64_t wd[4] = {1, 1, 1, 1};
    weight(g, "K", 4, wd, NULL);
    nd(g, "Conv", "conv", "x,K", "c");
    nd(g, "Relu", "relu", "c", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpPassOptions po = {.precision = AMP_DT_BFLOAT16};
    convert(m, &po);
    cr_assert_not(is16(m, "conv"));
    cr_assert_not(is16(m, "relu"));
    cr_assert_eq(count_op(g, "Cast"), 0);
    amp_model_free(m);

    m = rt_model(22);
    g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,1,4,4");
    weight(g, "K", 4, wd, NULL);
    nd(g, "Conv", "conv", "x,K", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    convert(m, &po);
    cr_assert_eq(in_dt(m, "conv", 0), AMP_DT_BFLOAT16);
    amp_model_free(m);
}

Test(amp_color, only_float32_data_changes) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_INT32, "2,2");
    rt_input(g, "d", AMP_DT_DOUBLE, "2,2");
    nd(g, "MatMul", "imm", "a,a", "ai");
    nd(g, "MatMul", "dmm", "d,d", "dd");
    rt_output(g, "ai", AMP_DT_INT32, NULL);
    rt_output(g, "dd", AMP_DT_DOUBLE, NULL);
    convert(m, NULL);
    cr_assert_eq(in_dt(m, "imm", 0), AMP_DT_INT32);
    cr_assert_eq(in_dt(m, "dmm", 0), AMP_DT_DOUBLE);
    cr_assert_eq(count_op(g, "Cast"), 0);
    amp_model_free(m);
}

Test(amp_color, unknown_ops_read_their_inputs_unchanged) {
    AmpModel *m = CHAIN("MatMul", "Relu");
    AmpGraph *g = m->graph;
    nd_dom(g, "my.domain", "Mystery", "myst", "v0", "z");
    cr_assert(amp_model_import_opset(m, "my.domain", 1));
    rt_output(g, "z", AMP_DT_FLOAT, "2,4");
    convert(m, NULL);
    cr_assert_eq(in_dt(m, "myst", 0), AMP_DT_FLOAT, "the unknown op reads float32");
    cr_assert_eq(out_dt(m, "myst", 0), AMP_DT_FLOAT);
    cr_assert_str_eq(node_of(m, "myst")->inputs[0]->name, "v0", "its input keeps its name");
    amp_model_free(m);
}

/* ---- casts and graph boundaries -------------------------------------------------- */

Test(amp_cast, one_cast_per_value_shared_by_every_reader) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    w44(g, "W");
    nd(g, "MatMul", "a", "x,W", "ya");
    nd(g, "MatMul", "b", "x,W", "yb");
    nd(g, "Exp", "e", "x", "ye");
    rt_output(g, "ya", AMP_DT_FLOAT, NULL);
    rt_output(g, "yb", AMP_DT_FLOAT, NULL);
    rt_output(g, "ye", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert_eq(casts_of(g, "x"), 1);
    cr_assert_str_eq(node_of(m, "a")->inputs[0]->name, "x_to_fp16");
    cr_assert_eq(node_of(m, "a")->inputs[0], node_of(m, "b")->inputs[0]);
    cr_assert_str_eq(node_of(m, "e")->inputs[0]->name, "x", "the fp32 reader reads x itself");
    amp_model_free(m);
}

Test(amp_cast, value_read_in_fp32_and_16_bits_keeps_its_name_in_fp32) {
    AmpModel *m = CHAIN("MatMul", "Relu", "MatMul");
    AmpGraph *g = m->graph;
    nd(g, "Exp", "e", "v0", "z"); /* v0, the first MatMul's output, also read by Exp */
    rt_output(g, "z", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    AmpValue *v0 = val_of(g, "v0");
    cr_assert_eq(dtype(v0), AMP_DT_FLOAT);
    cr_assert_eq(v0->producer->op, AMP_OP_Cast);
    cr_assert_str_eq(node_of(m, "n0")->outputs[0]->name, "v0_fp16");
    cr_assert_str_eq(node_of(m, "n1")->inputs[0]->name, "v0_fp16");
    cr_assert_str_eq(node_of(m, "e")->inputs[0]->name, "v0");
    /* The cast back comes right after its producer. */
    cr_assert_eq(node_of(m, "n0")->next, v0->producer);
    amp_model_free(m);
}

Test(amp_cast, no_keep_io_types_makes_inputs_and_outputs_16_bit) {
    AmpModel *m = CHAIN("MatMul", "Relu");
    AmpGraph *g = m->graph;
    nd(g, "Exp", "e", "x", "z"); /* x also read in fp32 */
    rt_output(g, "z", AMP_DT_FLOAT, NULL);
    AmpPassOptions po = {.no_keep_io_types = true};
    convert(m, &po);
    cr_assert_eq(dtype(val_of(g, "x")), AMP_DT_FLOAT16);
    cr_assert_eq(dtype(val_of(g, "y")), AMP_DT_FLOAT16);
    cr_assert_eq(dtype(val_of(g, "z")), AMP_DT_FLOAT);
    cr_assert_str_eq(node_of(m, "e")->inputs[0]->name, "x_to_fp32");
    cr_assert_eq(count_op(g, "Cast"), 1);
    amp_model_free(m);
}

Test(amp_cast, shape_and_index_inputs_are_never_cast) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    w44(g, "W");
    const int64_t shape[2] = {4, 2}, sd[1] = {2};
    rt_init(g, "shape", AMP_DT_INT64, 1, sd, shape);
    const int64_t idx[2] = {1, 0};
    rt_init(g, "idx", AMP_DT_INT64, 1, sd, idx);
    nd(g, "MatMul", "mm", "x,W", "h");
    nd(g, "Reshape", "reshape", "h,shape", "r");
    nd(g, "Gather", "gather", "r,idx", "gt");
    nd(g, "MatMul", "mm2", "gt,gt", "y"); /* [2,2] @ ... needs square: gt is [2,2] */
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert(is16(m, "reshape") && is16(m, "gather"));
    cr_assert_eq(in_dt(m, "reshape", 1), AMP_DT_INT64);
    cr_assert_str_eq(node_of(m, "reshape")->inputs[1]->name, "shape");
    cr_assert_eq(in_dt(m, "gather", 1), AMP_DT_INT64);
    amp_model_free(m);
}

/* ---- weights ---------------------------------------------------------------------- */

Test(amp_weights, stored_in_16_bits_when_only_16_bit_nodes_read_them) {
    AmpModel *m = CHAIN("MatMul");
    AmpValue *w = val_of(m->graph, "W0");
    convert(m, NULL);
    cr_assert_eq(w->initializer->dtype, AMP_DT_FLOAT16);
    cr_assert_eq(w->initializer->raw.len, 16 * 2);
    cr_assert_eq(casts_of(m->graph, "W0"), 0);
    /* The values are the float32 ones rounded: 0.5 * (i % 7 - 3). */
    const uint16_t *h = (const uint16_t *)w->initializer->raw.data;
    cr_assert_eq(h[0], 0xBE00); /* -1.5 */
    cr_assert_eq(h[3], 0x0000);
    amp_model_free(m);
}

static char notices[2048];

static void note(void *ctx, const char *line) {
    (void)ctx;
    strncat(notices, line, sizeof notices - strlen(notices) - 2);
    strcat(notices, "\n");
}

/* A weight float16 cannot hold keeps its reader in float32 (cast, it would be inf: the
 * product too); the summary names it. */
Test(amp_weights, out_of_range_weights_keep_their_readers_fp32_and_are_reported) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    static const int64_t d[2] = {4, 4};
    const float big = 1e5f;
    weight(g, "BIG", 2, d, &big);
    nd(g, "MatMul", "mm", "x,BIG", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    notices[0] = '\0';
    AmpPassOptions po = {.notify = note};
    convert(m, &po);
    cr_assert_eq(val_of(g, "BIG")->initializer->dtype, AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "BIG"), 0);
    cr_assert(!is16(m, "mm"));
    cr_assert_not_null(strstr(notices, "1 node kept in float32 for values beyond float16's range (from "
                                       "initializer 'BIG' (100000))"), "%s", notices);
    amp_model_free(m);
    /* bfloat16 holds 1e5. */
    m = model();
    g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    weight(g, "BIG", 2, d, &big);
    nd(g, "MatMul", "mm", "x,BIG", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    po.precision = AMP_DT_BFLOAT16;
    convert(m, &po);
    cr_assert_eq(val_of(g, "BIG")->initializer->dtype, AMP_DT_BFLOAT16);
    amp_model_free(m);
}

Test(amp_weights, weights_also_read_in_fp32_stay_fp32_with_one_cast) {
    AmpModel *m = CHAIN("MatMul");
    AmpGraph *g = m->graph;
    nd(g, "Exp", "e", "W0", "z");
    rt_output(g, "z", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    cr_assert_eq(val_of(g, "W0")->initializer->dtype, AMP_DT_FLOAT);
    cr_assert_eq(casts_of(g, "W0"), 1);
    amp_model_free(m);
}

/* ---- user lists, levels, --keep-fp32 ------------------------------------------------ */

Test(amp_lists, edits_move_ops_between_lists) {
    AmpListEdit e[2] = {{AMP_OP_MatMul, AMP_CLASS_DENY, false}, {AMP_OP_Exp, AMP_CLASS_ALLOW, false}};
    AmpModel *m = CHAIN("MatMul", "Exp");
    AmpPassOptions po = {.list_edits = e, .n_list_edits = 2};
    convert(m, &po);
    cr_assert_not(is16(m, "n0"));
    cr_assert(is16(m, "n1"));
    amp_model_free(m);
}

Test(amp_lists, an_op_in_two_lists_is_an_error_naming_it) {
    AmpListEdit e[2] = {{AMP_OP_Exp, AMP_CLASS_ALLOW, false}, {AMP_OP_Exp, AMP_CLASS_DENY, false}};
    AmpModel *m = CHAIN("Exp");
    AmpPassOptions po = {.list_edits = e, .n_list_edits = 2};
    cr_assert_eq(run_list(m, NULL, &po, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'Exp'"), "%s", st.msg);
    amp_model_free(m);
}

Test(amp_lists, removal_leaves_an_op_in_no_list) {
    AmpListEdit e[1] = {{AMP_OP_Relu, AMP_CLASS_CLEAR, true}};
    AmpModel *m = CHAIN("MatMul", "Relu", "MatMul");
    AmpPassOptions po = {.list_edits = e, .n_list_edits = 1};
    convert(m, &po);
    cr_assert_not(is16(m, "n1"));
    cr_assert(is16(m, "n0") && is16(m, "n2"));
    amp_model_free(m);
}

Test(amp_lists, env_and_parse_helpers) {
    AmpListEdit *e = NULL;
    size_t n = 0;
    amp_status_clear(&st);
    cr_assert_eq(amp_list_edits_parse("--allow", "Exp, com.microsoft:FusedGemm,Adam", AMP_CLASS_ALLOW, false, &e, &n, &st),
                 AMP_OK, "%s", st.msg);
    cr_assert_eq(n, 3);
    cr_assert_eq(e[1].op, amp_op_lookup("com.microsoft", "FusedGemm"));
    cr_assert_eq(amp_list_edits_parse("--deny", "Nope", AMP_CLASS_DENY, false, &e, &n, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'Nope'"));
    amp_status_clear(&st);
    free(e);
    /* The variables, through the option table (passes/options.c): after the flags. */
    AmpOptions o = {0};
    cr_assert_eq(amp_option_set(&o, amp_option_find("deny"), "--deny", "Exp", &st), AMP_OK, "%s", st.msg);
    setenv("AMP_ALLOWLIST_ADD", "Exp", 1);
    cr_assert_eq(amp_options_read_env(&o, amp_option_getenv, NULL, AMP_DOOR_CONVERT, &st), AMP_OK, "%s", st.msg);
    unsetenv("AMP_ALLOWLIST_ADD");
    cr_assert_eq(o.n_edits, 2);
    cr_assert_eq(o.edits[1].list, AMP_CLASS_ALLOW);
    cr_assert_eq(amp_options_finish(&o, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "Exp"), "%s", st.msg);
    amp_options_free(&o);
}

Test(amp_lists, levels) {
    AmpModel *m = CHAIN("MatMul", "Relu", "Add", "MatMul", "Exp");
    AmpPassOptions po = {.level = AMP_LEVEL_TENSOR_CORES_ONLY};
    convert(m, &po);
    cr_assert(is16(m, "n0") && is16(m, "n3"));
    cr_assert_not(is16(m, "n1"), "clear ops are in no list");
    cr_assert_not(is16(m, "n2"));
    amp_model_free(m);

    m = CHAIN("MatMul", "Relu", "Add", "MatMul", "Exp");
    po.level = AMP_LEVEL_TREAT_INFER_AS_DENY;
    convert(m, &po);
    cr_assert_not(is16(m, "n2"), "infer is deny");
    cr_assert(is16(m, "n1"));
    amp_model_free(m);

    m = CHAIN("MatMul", "Relu", "Add", "MatMul", "Exp");
    po.level = AMP_LEVEL_UNSAFE_FORCE_ALL;
    convert(m, &po);
    for (int i = 0; i < 5; i++) {
        char n[8];
        snprintf(n, sizeof n, "n%d", i);
        cr_assert(is16(m, n), "%s", n);
    }
    amp_model_free(m);
    cr_assert_eq(amp_level_parse("treat-infer-as-deny"), AMP_LEVEL_TREAT_INFER_AS_DENY);
    cr_assert_eq(amp_level_parse("TENSOR"), -1);
}

Test(amp_lists, keep_fp32_globs_paint_deny) {
    AmpModel *m = CHAIN("MatMul", "Relu", "MatMul");
    node_of(m, "n2")->name = "head/matmul";
    const char *globs[1] = {"head/*"};
    AmpPassOptions po = {.keep_fp32 = globs, .n_keep_fp32 = 1};
    convert(m, &po);
    cr_assert_not(is16(m, "head/matmul"));
    cr_assert(is16(m, "n0") && is16(m, "n1"));
    amp_model_free(m);
}

/* ---- explain, paint buckets, idempotence ------------------------------------------------ */

Test(amp_explain, prints_the_chain_of_rules) {
    AmpModel *m = CHAIN("MatMul", "Add", "Relu", "MatMul", "Exp");
    Captured c;
    capture_begin(&c);
    AmpPassOptions po = {.explain_nodes = (const char *const[]){"n2"}, .n_explain_nodes = 1, .explain_out = c.f};
    convert(m, &po);
    const char *t = capture_end(&c);
    cr_assert_not_null(strstr(t, "node 'n2' (Relu) in graph 'main': float16"), "%s", t);
    cr_assert_not_null(strstr(t, "Relu is in the clear list"), "%s", t);
    cr_assert_not_null(strstr(t, "because of 'n1' (Add)"), "%s", t);
    cr_assert_not_null(strstr(t, "because of 'n0' (MatMul)"), "%s", t);
    cr_assert_not_null(strstr(t, "an op of the allow list"), "%s", t);
    free(c.text);
    amp_model_free(m);

    m = CHAIN("MatMul", "Relu", "MatMul");
    node_of(m, "n2")->name = "head";
    const char *globs[1] = {"he*"};
    capture_begin(&c);
    AmpPassOptions p2 = {.explain_nodes = (const char *const[]){"head"}, .n_explain_nodes = 1, .explain_out = c.f, .keep_fp32 = globs, .n_keep_fp32 = 1};
    convert(m, &p2);
    t = capture_end(&c);
    cr_assert_not_null(strstr(t, "--keep-fp32 'he*'"), "%s", t);
    free(c.text);
    amp_model_free(m);
}

Test(amp_explain, paint_buckets_list_lists_and_nodes) {
    AmpModel *m = CHAIN("MatMul", "Exp", "Sigmoid");
    Captured c;
    capture_begin(&c);
    AmpPassOptions po = {.paint_out = c.f};
    convert(m, &po);
    const char *t = capture_end(&c);
    cr_assert_not_null(strstr(t, "allow: MatMul Gemm"), "%s", t);
    cr_assert_not_null(strstr(t, "# allow (16-bit): 1 nodes\n'n0' (MatMul)"), "%s", t);
    cr_assert_not_null(strstr(t, "# deny (float32): 2 nodes\n'n1' (Exp)\n'n2' (Sigmoid)"), "%s", t);
    free(c.text);
    amp_model_free(m);
}

Test(amp_pass, converting_twice_changes_nothing) {
    AmpModel *m = CHAIN("Relu", "MatMul", "Add", "Exp", "Add", "MatMul", "Softmax", "MatMul");
    nd(m->graph, "Exp", "extra", "v1", "z");
    rt_output(m->graph, "z", AMP_DT_FLOAT, NULL);
    convert(m, NULL);
    size_t n1, n2;
    uint8_t *a = saved(m, &n1);
    convert(m, NULL);
    uint8_t *b = saved(m, &n2);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(a, b, n1), 0, "the second conversion changed the model");
    free(a);
    free(b);
    amp_model_free(m);
}

Test(amp_pass, summary_counts_nodes_and_casts) {
    AmpModel *m = CHAIN("MatMul", "Relu", "Exp");
    notices[0] = '\0';
    AmpPassOptions po = {.notify = note};
    convert(m, &po);
    cr_assert_not_null(strstr(notices, "amp: float16: 2 of 3 float nodes in 16 bits, 2 casts, 1 weights stored in 16 bits"),
                       "%s", notices);
    amp_model_free(m);
}

Test(amp_pass, bad_precision_is_a_usage_error) {
    AmpModel *m = CHAIN("MatMul");
    AmpPassOptions po = {.precision = AMP_DT_DOUBLE};
    cr_assert_eq(run_list(m, NULL, &po, &st), AMP_ERR_USAGE);
    amp_model_free(m);
}

/* ---- the pipeline's inference ---------------------------------------------------- */

/* The amp pass skips its own inference only right after the pipeline's "infer" pass, and
 * then converts exactly as when it infers itself. */
Test(amp_pipeline, an_infer_pass_just_before_changes_nothing) {
    AmpModel *a = CHAIN("MatMul", "Add", "Softmax", "MatMul", "Relu");
    AmpModel *b = CHAIN("MatMul", "Add", "Softmax", "MatMul", "Relu");
    cr_assert_eq(run_list(a, "infer,amp,cast_cleanup", NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run_list(b, "amp,cast_cleanup", NULL, &st), AMP_OK, "%s", st.msg);
    Captured pa, pb;
    capture_begin(&pa);
    amp_print_model(pa.f, a);
    capture_begin(&pb);
    amp_print_model(pb.f, b);
    cr_assert_str_eq(capture_end(&pa), capture_end(&pb));
    cr_assert(is16(a, "n0") && is16(a, "n3"));
    free(pa.text);
    free(pb.text);
    amp_model_free(a);
    amp_model_free(b);
}

/* After a pipeline the graph may be edited (here: nodes whose values have no type yet),
 * so the next pipeline's amp pass must infer again, though the last pass was "infer". */
Test(amp_pipeline, infers_again_after_an_edit_between_pipelines) {
    AmpModel *m = CHAIN("Relu");
    cr_assert_eq(run_list(m, "infer", NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert_not(m->types_inferred, "the flag does not outlive its pipeline");
    AmpGraph *g = m->graph;
    w44(g, "Wl");
    nd(g, "Relu", "late_relu", "x", "r");
    nd(g, "MatMul", "late_mm", "r,Wl", "z");
    rt_output(g, "z", AMP_DT_FLOAT, NULL);
    cr_assert_eq(val_of(g, "r")->type.kind, AMP_TYPE_NONE);
    cr_assert_eq(run_list(m, "amp,cast_cleanup", NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert(is16(m, "late_mm"), "the MatMul reading a value typed only by inference is converted");
    amp_model_free(m);
}
