/* The fuse_norm pass and the amp pass's colouring of decomposed LayerNorm and GELU: the
 * pattern's edge cases (a centred value read outside the group, eps as a Constant node or
 * an initializer, axes -1 or rank-1, a mean over another axis, Mul(d, d) and Reciprocal
 * forms, GELU's orders, RMSNorm), on small graphs built here. */
#include "passes/fuse_impl.h"
#include "tests/passes/amp_test_util.h"

typedef struct LnForm {
    int64_t axes;       /* the ReduceMeans' axes */
    bool square_mul;    /* Mul(d, d) instead of Pow(d, 2) */
    bool reciprocal;    /* Mul(d, Reciprocal(s)) instead of Div(d, s) */
    bool eps_node;      /* eps from a Constant node, not an initializer */
    bool d_read_again;  /* the centred value is a graph output too */
    bool no_affine;     /* no gamma Mul, no beta Add */
    bool matmuls;       /* MatMul before and after, for the amp pass */
} LnForm;

static void axes(AmpNode *n, int64_t a) {
    AmpAttr *at = amp_node_add_attr(n, "axes", AMP_ATTR_INTS);
    cr_assert_not_null(at);
    at->ints = amp_arena_alloc(&n->graph->model->arena, sizeof *at->ints);
    at->ints[0] = a;
    at->n_ints = 1;
}

/* x [2, 8] -> decomposed LayerNorm over the last axis -> y. */
static AmpModel *ln_model(int64_t opset, LnForm f) {
    AmpModel *m = rt_model(opset);
    AmpGraph *g = m->graph;
    static const int64_t c[1] = {8};
    static const float gv = 1.5f, bv = 0.25f;
    rt_input(g, "x", AMP_DT_FLOAT, "2,8");
    const char *x = "x";
    if (f.matmuls) {
        static const int64_t d88[2] = {8, 8};
        weight(g, "W", 2, d88, NULL);
        nd(g, "MatMul", "mm_in", "x,W", "h");
        x = "h";
    }
    char ins[64];
    snprintf(ins, sizeof ins, "%s", x);
    axes(nd(g, "ReduceMean", "ln/rm1", ins, "mean"), f.axes);
    snprintf(ins, sizeof ins, "%s,mean", x);
    nd(g, "Sub", "ln/sub", ins, "d");
    if (f.square_mul) {
        nd(g, "Mul", "ln/sq", "d,d", "p");
    } else {
        rt_scalar_f(g, "two", 2.0f);
        nd(g, "Pow", "ln/sq", "d,two", "p");
    }
    axes(nd(g, "ReduceMean", "ln/rm2", "p", "var"), f.axes);
    if (f.eps_node) {
        AmpNode *k = nd(g, "Constant", "ln/eps", "", "eps");
        AmpAttr *a = amp_node_add_attr(k, "value_float", AMP_ATTR_FLOAT);
        a->f = 1e-5f;
        rt_type(m, k->outputs[0], AMP_DT_FLOAT, "");
    } else {
        rt_scalar_f(g, "eps", 1e-5f);
    }
    nd(g, "Add", "ln/add_eps", "var,eps", "ve");
    nd(g, "Sqrt", "ln/sqrt", "ve", "s");
    if (f.reciprocal) {
        nd(g, "Reciprocal", "ln/rcp", "s", "rs");
        nd(g, "Mul", "ln/div", "d,rs", "n");
    } else {
        nd(g, "Div", "ln/div", "d,s", "n");
    }
    const char *y = "n";
    if (!f.no_affine) {
        weight(g, "gamma", 1, c, &gv);
        weight(g, "beta", 1, c, &bv);
        nd(g, "Mul", "ln/gamma", "n,gamma", "ng");
        nd(g, "Add", "ln/beta", "ng,beta", "nb");
        y = "nb";
    }
    if (f.matmuls) {
        static const int64_t d88[2] = {8, 8};
        weight(g, "W2", 2, d88, NULL);
        snprintf(ins, sizeof ins, "%s,W2", y);
        nd(g, "MatMul", "mm_out", ins, "y");
    } else {
        nd(g, "Identity", "out", y, "y");
    }
    rt_output(g, "y", AMP_DT_FLOAT, "2,8");
    if (f.d_read_again) rt_output(g, "d", AMP_DT_FLOAT, "2,8");
    return m;
}

static AmpStatus st;

static void run_ok(AmpModel *m, const char *list, int precision) {
    AmpPassOptions po = {.precision = precision};
    cr_assert_eq(run_list(m, list, &po, &st), AMP_OK, "%s", st.msg);
}

/* The one LayerNormalization of m, checked: x, gamma, beta in; y's producer's input. */
static void fused_ln(AmpModel *m, int n_inputs) {
    cr_assert_eq(count_op(m->graph, "LayerNormalization"), 1);
    cr_assert_eq(count_op(m->graph, "ReduceMean") + count_op(m->graph, "Sqrt") + count_op(m->graph, "Constant"), 0);
    AmpNode *ln = node_of(m, "ln/LayerNormalization");
    cr_assert_eq(ln->n_inputs, n_inputs);
    cr_assert_str_eq(ln->inputs[0]->name, "x");
    cr_assert_eq(amp_node_attr_int(ln, "axis", 0), -1);
    cr_assert_float_eq(amp_node_attr_float(ln, "epsilon", 0), 1e-5f, 1e-9);
    cr_assert_str_eq(amp_node_attr_string(ln, "approximate", "-"), "-");
    cr_assert_not_null(ln->doc_string);
    cr_assert(strstr(ln->doc_string, "fused by ampc fuse_norm from ") == ln->doc_string, "%s", ln->doc_string);
    cr_assert(strstr(ln->doc_string, " nodes: ln/rm1, ln/sub, ln/sq, ln/rm2,"), "%s", ln->doc_string);
}

Test(fuse_norm, layernorm_fused_at_opset_17) {
    AmpModel *m = ln_model(17, (LnForm){.axes = -1});
    run_ok(m, "infer,fuse_norm", 0);
    fused_ln(m, 3);
    cr_assert_str_eq(node_of(m, "ln/LayerNormalization")->inputs[1]->name, "gamma");
    cr_assert_eq(node_of(m, "out")->inputs[0]->producer, node_of(m, "ln/LayerNormalization"));
    amp_model_free(m);
}

Test(fuse_norm, eps_constant_node_axes_rank_minus_1_mul_square_and_reciprocal) {
    AmpModel *m = ln_model(17, (LnForm){.axes = 1, .eps_node = true, .square_mul = true, .reciprocal = true});
    run_ok(m, "infer,fuse_norm", 0);
    fused_ln(m, 3); /* the eps Constant went with the group */
    amp_model_free(m);
}

Test(fuse_norm, no_gamma_gets_a_scale_of_ones) {
    AmpModel *m = ln_model(17, (LnForm){.axes = -1, .no_affine = true});
    run_ok(m, "infer,fuse_norm", 0);
    fused_ln(m, 2);
    const AmpValue *s = node_of(m, "ln/LayerNormalization")->inputs[1];
    cr_assert(s->initializer && s->initializer->nelem == 8);
    amp_model_free(m);
}

Test(fuse_norm, mean_over_another_axis_is_not_fused) {
    AmpModel *m = ln_model(17, (LnForm){.axes = 0});
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(count_op(m->graph, "LayerNormalization"), 0);
    cr_assert_eq(count_op(m->graph, "ReduceMean"), 2);
    amp_model_free(m);
}

Test(fuse_norm, centred_value_read_outside_the_group_is_not_fused) {
    AmpModel *m = ln_model(17, (LnForm){.axes = -1, .d_read_again = true});
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(count_op(m->graph, "LayerNormalization"), 0);
    amp_model_free(m);
}

Test(fuse_norm, below_opset_17_nothing_changes) {
    AmpModel *m = ln_model(14, (LnForm){.axes = -1});
    size_t before = m->graph->n_nodes;
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(m->graph->n_nodes, before);
    amp_model_free(m);
}

/* At opset 14 the group is coloured as LayerNormalization: float32 by default, as the op
 * is; with --level norms-16, its affine part 16-bit between the MatMuls, its statistics
 * float32. */
Test(fuse_norm, decomposed_layernorm_coloured_as_one_node) {
    for (int p = 0; p < 2; p++) {
        int dt = p ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16;
        AmpModel *m = ln_model(14, (LnForm){.axes = -1, .matmuls = true});
        run_ok(m, "infer,opset_upgrade,fuse_norm,amp,cast_cleanup,infer", dt);
        const char *all[] = {"ln/rm1", "ln/sub", "ln/sq", "ln/rm2", "ln/add_eps", "ln/sqrt", "ln/div", "ln/gamma",
                             "ln/beta"};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            cr_assert_eq(out_dt(m, all[i], 0), AMP_DT_FLOAT, "%s", all[i]);
        amp_model_free(m);

        m = ln_model(14, (LnForm){.axes = -1, .matmuls = true});
        AmpPassOptions po = {.precision = dt, .level = AMP_LEVEL_NORMS_16};
        cr_assert_eq(run_list(m, "infer,opset_upgrade,fuse_norm,amp,cast_cleanup,infer", &po, &st), AMP_OK, "%s",
                     st.msg);
        cr_assert_eq(out_dt(m, "ln/gamma", 0), dt);
        cr_assert_eq(out_dt(m, "ln/beta", 0), dt);
        cr_assert_eq(in_dt(m, "mm_out", 0), dt);
        const char *f32[] = {"ln/rm1", "ln/sub", "ln/sq", "ln/rm2", "ln/add_eps", "ln/sqrt", "ln/div"};
        for (size_t i = 0; i < sizeof f32 / sizeof *f32; i++)
            cr_assert_eq(out_dt(m, f32[i], 0), AMP_DT_FLOAT, "%s", f32[i]);
        cr_assert_eq(count_op(m->graph, "Cast"), 4); /* x to 16 bits, h to fp32, n to 16 bits, y to fp32 */
        amp_model_free(m);
    }
}

Test(fuse_norm, group_with_an_outside_reader_keeps_the_lists) {
    AmpModel *m = ln_model(14, (LnForm){.axes = -1, .matmuls = true, .d_read_again = true});
    run_ok(m, NULL, 0);
    cr_assert_eq(out_dt(m, "ln/gamma", 0), AMP_DT_FLOAT); /* deny spread from the Pow */
    amp_model_free(m);
}

/* x [2, 8] -> GELU -> y, erf form (Mul by 1/sqrt2, 0.5 first) or tanh form (x * x * x). */
static AmpModel *gelu_model(int64_t opset, bool tanh_form) {
    AmpModel *m = rt_model(opset);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,8");
    rt_scalar_f(g, "one", 1.0f);
    rt_scalar_f(g, "half", 0.5f);
    if (tanh_form) {
        rt_scalar_f(g, "c", 0.044715f);
        rt_scalar_f(g, "k", 0.7978845608f);
        nd(g, "Mul", "g/xx", "x,x", "xx");
        nd(g, "Mul", "g/xxx", "x,xx", "x3");
        nd(g, "Mul", "g/c", "c,x3", "cx3");
        nd(g, "Add", "g/inner", "x,cx3", "in");
        nd(g, "Mul", "g/k", "in,k", "kin");
        nd(g, "Tanh", "g/t", "kin", "t");
    } else {
        rt_scalar_f(g, "r2", 0.70710678f);
        nd(g, "Mul", "g/scale", "x,r2", "xs");
        nd(g, "Erf", "g/t", "xs", "t");
    }
    nd(g, "Add", "g/one", "t,one", "a");
    nd(g, "Mul", "g/half", "x,half", "hx");
    nd(g, "Mul", "g/out", "hx,a", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,8");
    return m;
}

Test(fuse_norm, gelu_fused_at_opset_20_both_forms) {
    for (int t = 0; t < 2; t++) {
        AmpModel *m = gelu_model(20, t);
        run_ok(m, "infer,fuse_norm", 0);
        cr_assert_eq(m->graph->n_nodes, 1, "form %d", t);
        AmpNode *n = m->graph->first;
        cr_assert_str_eq(n->op_type, "Gelu");
        cr_assert_str_eq(n->name, "g/Gelu");
        cr_assert_str_eq(amp_node_attr_string(n, "approximate", "none"), t ? "tanh" : "none");
        cr_assert_str_eq(n->outputs[0]->name, "y");
        amp_model_free(m);
    }
}

Test(fuse_norm, gelu_below_opset_20_stays) {
    AmpModel *m = gelu_model(17, true);
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(count_op(m->graph, "Gelu"), 0);
    cr_assert_eq(count_op(m->graph, "Tanh"), 1);
    amp_model_free(m);
}

Test(fuse_norm, gelu_with_a_wrong_constant_is_not_fused) {
    AmpModel *m = gelu_model(20, false);
    AmpValue *h = val_of(m->graph, "half");
    float q = 0.25f;
    h->initializer->raw.data = amp_arena_memdup(&m->arena, &q, 4);
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(count_op(m->graph, "Gelu"), 0);
    amp_model_free(m);
}

/* ---- RMSNorm (T5, LLaMA) -----------------------------------------------------------------
 * x [2, 8] -> MatMul -> h -> Cast(to float) c -> Pow(c, 2) -> ReduceMean -> Add(eps) ->
 * Sqrt -> Div(1, s) -> Mul(c, r) -> Cast(to float) -> Mul(gamma) -> MatMul -> y: as
 * LlamaRMSNorm's `x.to(float32)` ... `weight * x.to(input_dtype)` exports. */
static AmpModel *rms_model(void) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    static const int64_t c8[1] = {8}, d88[2] = {8, 8};
    static const float gv = 1.5f;
    rt_input(g, "x", AMP_DT_FLOAT, "2,8");
    weight(g, "W", 2, d88, NULL);
    nd(g, "MatMul", "mm_in", "x,W", "h");
    attr_i(nd(g, "Cast", "rms/cast_in", "h", "c"), "to", AMP_DT_FLOAT);
    rt_scalar_f(g, "two", 2.0f);
    nd(g, "Pow", "rms/pow", "c,two", "p");
    axes(nd(g, "ReduceMean", "rms/mean", "p", "var"), -1);
    rt_scalar_f(g, "eps", 1e-6f);
    nd(g, "Add", "rms/add_eps", "var,eps", "ve");
    nd(g, "Sqrt", "rms/sqrt", "ve", "s");
    rt_scalar_f(g, "one", 1.0f);
    nd(g, "Div", "rms/inv", "one,s", "r");
    nd(g, "Mul", "rms/norm", "c,r", "n");
    attr_i(nd(g, "Cast", "rms/cast_out", "n", "nc"), "to", AMP_DT_FLOAT);
    weight(g, "gamma", 1, c8, &gv);
    nd(g, "Mul", "rms/gamma", "gamma,nc", "ng");
    weight(g, "W2", 2, d88, NULL);
    nd(g, "MatMul", "mm_out", "ng,W2", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,8");
    return m;
}

Test(fuse_norm, rmsnorm_found_its_noop_casts_dropped_and_coloured_as_a_norm) {
    AmpModel *m = rms_model();
    AmpFuseGroup grp;
    cr_assert(amp_fuse_match(m, node_of(m, "rms/pow"), &grp));
    cr_assert_eq(grp.kind, AMP_FUSE_RMSNORM);
    cr_assert_eq(grp.n, 6); /* pow, mean, add, sqrt, div(1, s), mul(c, r): gamma is after the Cast */
    run_ok(m, "infer,fuse_norm", 0);
    cr_assert_eq(count_op(m->graph, "Cast"), 0, "the no-op Casts around the group go");
    cr_assert(amp_fuse_match(m, node_of(m, "rms/pow"), &grp));
    cr_assert_eq(grp.n, 7, "with gamma's Mul now");
    cr_assert_eq(grp.n_stats, 6);
    cr_assert_float_eq(grp.eps, 1e-6, 1e-12);
    amp_model_free(m);

    for (int p = 0; p < 2; p++) {
        int dt = p ? AMP_DT_BFLOAT16 : AMP_DT_FLOAT16;
        const char *stats[] = {"rms/pow", "rms/mean", "rms/add_eps", "rms/sqrt", "rms/inv", "rms/norm"};
        /* Default: the whole norm float32, as LayerNormalization. */
        m = rms_model();
        run_ok(m, "infer,opset_upgrade,fuse_norm,amp,cast_cleanup,infer", dt);
        for (size_t i = 0; i < sizeof stats / sizeof *stats; i++)
            cr_assert_eq(out_dt(m, stats[i], 0), AMP_DT_FLOAT, "%s", stats[i]);
        cr_assert_eq(out_dt(m, "rms/gamma", 0), AMP_DT_FLOAT);
        amp_model_free(m);
        /* norms-16: gamma's Mul 16-bit between the MatMuls, the statistics float32. */
        m = rms_model();
        AmpPassOptions po = {.precision = dt, .level = AMP_LEVEL_NORMS_16};
        cr_assert_eq(run_list(m, "infer,opset_upgrade,fuse_norm,amp,cast_cleanup,infer", &po, &st), AMP_OK, "%s",
                     st.msg);
        for (size_t i = 0; i < sizeof stats / sizeof *stats; i++)
            cr_assert_eq(out_dt(m, stats[i], 0), AMP_DT_FLOAT, "%s", stats[i]);
        cr_assert_eq(out_dt(m, "rms/gamma", 0), dt);
        cr_assert_eq(in_dt(m, "mm_out", 0), dt);
        amp_model_free(m);
    }
}
