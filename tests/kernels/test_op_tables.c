/* The backends' op tables held together (kernels/cpu/table.c, kernels/cuda/table.c; the
 * op's facts are ir/ops.def's, which names no kernel). The CPU is the reference: every op
 * with a CUDA entry has a CPU kernel, and every op with a CPU kernel has a CUDA entry or
 * a reason below why it runs on the CPU fallback on a GPU, so that a new op (and a reason
 * that no longer holds) shows here; the float unary ops' rows are the lines of
 * ops/unary.def, each with its CPU row, and its CUDA row or reason. The CUDA table is read
 * as text, so that the CPU-only build checks it too (tests/cuda/test_cuda_table_host.c
 * checks the linked table in a CUDA build). */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "ops/ew_common.h" /* the prepares ops/unary.def names */

/* AMP_OP_<Id>'s Id, as the tables name it. */
static const char *const OP_ID[AMP_OP__COUNT] = {
#define AMP_OP(id, ...) [AMP_OP_##id] = #id,
#include "ir/ops.def"
#undef AMP_OP
};

/* The lines of ops/unary.def: the op, its prepare, whether CUDA runs it, whether it has an
 * integer form, whether the fused programs take it. */
static const struct {
    AmpOpId op;
    AmpKernelPrepareFn prepare;
    bool cuda, ints, fuse;
} UNARY[] = {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    {AMP_OP_##Id, PREPARE, CUDA, AMP_UNARY_INT_##TYPES, FUSE},
#include "ops/unary.def"
#undef AMP_UNARY
};
#define N_UNARY (sizeof UNARY / sizeof UNARY[0])

#define FALLBACK_RARE "rare in exported models: the CPU fallback runs it"
#define FALLBACK_UNARY "a unary function rare in exported models: the CPU fallback runs it (a CUDA kernel is " \
                       "its line's CUDA column in ops/unary.def set to 1, and a case in tests/cuda/cuda_ops_cases.h)"

/* Why an op with a CPU kernel has no entry in kernels/cuda/table.c. */
static const char *const cuda_absent_reason[AMP_OP__COUNT] = {
    [AMP_OP_Einsum] = "an equation parsed into loops on the CPU; no cuBLASLt plan for it yet",
    [AMP_OP_LSTM] = "a recurrence over time steps; cuDNN's RNN API is not wired: the CPU fallback runs it",
    [AMP_OP_GRU] = "a recurrence over time steps; cuDNN's RNN API is not wired: the CPU fallback runs it",
    [AMP_OP_RNN] = "a recurrence over time steps; cuDNN's RNN API is not wired: the CPU fallback runs it",
    [AMP_OP_Ms_FusedGemm] = "com.microsoft FusedGemm (Gemm plus an activation) " FALLBACK_RARE,
    [AMP_OP_Ms_AdamWOptimizer] = "ORT's AdamW of an onnxblock optimizer graph: the CPU fallback runs it "
                                 "(the CUDA optimizers are Adam, Momentum and Adagrad)",
    [AMP_OP_Ms_SGDOptimizerV2] = "ORT's SGD of an onnxblock optimizer graph: the CPU fallback runs it",
    [AMP_OP_Mod] = "integer and fmod semantics per dtype, " FALLBACK_RARE,
    [AMP_OP_Tan] = FALLBACK_UNARY,
    [AMP_OP_Asin] = FALLBACK_UNARY,
    [AMP_OP_Acos] = FALLBACK_UNARY,
    [AMP_OP_Atan] = FALLBACK_UNARY,
    [AMP_OP_Sinh] = FALLBACK_UNARY,
    [AMP_OP_Cosh] = FALLBACK_UNARY,
    [AMP_OP_Asinh] = FALLBACK_UNARY,
    [AMP_OP_Acosh] = FALLBACK_UNARY,
    [AMP_OP_Atanh] = FALLBACK_UNARY,
    [AMP_OP_Celu] = FALLBACK_UNARY,
    [AMP_OP_Shrink] = FALLBACK_UNARY,
    [AMP_OP_Softsign] = FALLBACK_UNARY,
    [AMP_OP_ThresholdedRelu] = FALLBACK_UNARY,
    [AMP_OP_Hardmax] = "a one-hot of each row's maximum, " FALLBACK_RARE,
    [AMP_OP_Ms_ConcatTraining] = "com.microsoft ConcatTraining (Concat plus its split sizes), " FALLBACK_RARE,
    [AMP_OP_Trilu] = "data movement " FALLBACK_RARE,
    [AMP_OP_DepthToSpace] = "data movement " FALLBACK_RARE,
    [AMP_OP_SpaceToDepth] = "data movement " FALLBACK_RARE,
    [AMP_OP_GatherND] = "an index gather " FALLBACK_RARE,
    [AMP_OP_TopK] = "a sort along an axis: the CPU fallback runs it",
    [AMP_OP_CumSum] = "a scan along an axis: the CPU fallback runs it",
    [AMP_OP_LpNormalization] = "a normalization " FALLBACK_RARE,
    [AMP_OP_LRN] = "a normalization " FALLBACK_RARE,
    [AMP_OP_Ampc_ConvEpilogue] = "the CPU's oneDNN post-ops: only the CPU backend asks the plan for it "
                                  "(AmpBackend.fuse_cpu); CUDA runs Conv, Add and Relu apart",
    [AMP_OP_Ampc_SubScaled] = "one pass for a CPU's SGD update: only the CPU backend asks the plan for it "
                               "(AmpBackend.fuse_cpu); CUDA fuses the update as a FusedElementwise chain",
    [AMP_OP_NonZero] = "its output's shape is the data's (AMP_SHAPE_FROM_DATA): the CPU fallback runs it, and the "
                       "step reads the count back",
};

static AmpOpId op_by_id(const char *s, size_t n) {
    for (int op = 1; op < AMP_OP__COUNT; op++)
        if (OP_ID[op] && strlen(OP_ID[op]) == n && memcmp(OP_ID[op], s, n) == 0) return (AmpOpId)op;
    return AMP_OP_UNKNOWN;
}

/* has[op]: kernels/cuda/table.c has an entry `[AMP_OP_<Id>] = {...}` (comments and
 * preprocessor lines left out; an entry follows the table's `{` or the previous entry's
 * `,`), or the table includes ops/unary.def and the op's line there has CUDA 1 (the table
 * expands those lines); returns the number of entries. */
static int cuda_entries(bool *has) {
    const char *path = AMPC_TEST_DIR "/../kernels/cuda/table.c";
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    cr_assert(n < sizeof text - 1, "%s is larger than the test reads", path);
    text[n] = '\0';
    for (char *c = strstr(text, "/*"); c; c = strstr(c, "/*")) { /* blank the comments */
        char *e = strstr(c + 2, "*/");
        cr_assert(e, "an unclosed comment in %s", path);
        memset(c, ' ', (size_t)(e + 2 - c));
    }
    bool unary_def = strstr(text, "#include \"ops/unary.def\"") != NULL;
    for (char *c = text; *c; c++) { /* blank the preprocessor lines (with their continuations) */
        if (*c != '#' || (c > text && c[-1] != '\n')) continue;
        for (char prev = 0; *c && (*c != '\n' || prev == '\\'); c++) prev = *c, *c = ' ';
        if (!*c) break;
    }
    int entries = 0;
    for (const char *c = strstr(text, "[AMP_OP_"); c; c = strstr(c + 1, "[AMP_OP_")) {
        const char *id = c + 8, *end = strchr(id, ']');
        cr_assert(end, "an unclosed [AMP_OP_ in %s", path);
        const char *before = c;
        while (before > text && strchr(" \t\n", before[-1])) before--;
        if (before == text || (before[-1] != '{' && before[-1] != ',')) continue; /* amp_cuda_ops[AMP_OP__COUNT] */
        AmpOpId op = op_by_id(id, (size_t)(end - id));
        cr_assert(op != AMP_OP_UNKNOWN, "%s names AMP_OP_%.*s, which ir/ops.def lacks", path, (int)(end - id), id);
        cr_assert(!has[op], "%s has two entries for %s", path, OP_ID[op]);
        has[op] = true;
        entries++;
    }
    if (unary_def)
        for (size_t i = 0; i < N_UNARY; i++) {
            if (!UNARY[i].cuda) continue;
            cr_assert(!has[UNARY[i].op], "%s has an entry of its own and one from ops/unary.def", path);
            has[UNARY[i].op] = true;
            entries++;
        }
    return entries;
}

Test(op_tables, the_cuda_table_is_read) {
    bool has[AMP_OP__COUNT] = {false};
    int n = cuda_entries(has);
    cr_expect_gt(n, 100, "only %d entries read from kernels/cuda/table.c", n);
    cr_expect(has[AMP_OP_Conv] && has[AMP_OP_Softplus] && has[AMP_OP_Ampc_FusedElementwise]);
    cr_expect(!has[AMP_OP_TopK]);
}

Test(op_tables, every_cuda_op_has_a_cpu_kernel) {
    bool has[AMP_OP__COUNT] = {false};
    cuda_entries(has);
    for (int op = 1; op < AMP_OP__COUNT; op++)
        if (has[op])
            cr_expect(amp_cpu_kernel((AmpOpId)op) != NULL,
                      "%s has a CUDA entry but no CPU kernel (kernels/cpu/table.c): the CPU is the reference",
                      OP_ID[op]);
}

Test(op_tables, every_cpu_op_has_a_cuda_entry_or_a_reason) {
    bool has[AMP_OP__COUNT] = {false};
    cuda_entries(has);
    for (int op = 1; op < AMP_OP__COUNT; op++) {
        if (!amp_cpu_kernel((AmpOpId)op)) continue;
        cr_expect(has[op] || cuda_absent_reason[op],
                  "%s has a CPU kernel but neither an entry in kernels/cuda/table.c nor a reason in "
                  "cuda_absent_reason[] (tests/kernels/test_op_tables.c)",
                  OP_ID[op]);
    }
}

Test(op_tables, every_reason_still_holds) {
    bool has[AMP_OP__COUNT] = {false};
    cuda_entries(has);
    for (int op = 1; op < AMP_OP__COUNT; op++) {
        if (!cuda_absent_reason[op]) continue;
        cr_expect(!has[op], "%s has a CUDA entry now: drop its line in cuda_absent_reason[]", OP_ID[op]);
        cr_expect(amp_cpu_kernel((AmpOpId)op) != NULL, "%s has no CPU kernel: it needs no reason", OP_ID[op]);
    }
}

Test(op_tables, the_cpu_table) {
    int kernels = 0;
    for (int op = 0; op < AMP_OP__COUNT; op++) {
        kernels += amp_cpu_ops[op].run != NULL;
        cr_expect(amp_cpu_ops[op].run || !amp_cpu_ops[op].prepare, "%s has a prepare but no kernel",
                  op ? OP_ID[op] : "row 0");
        cr_expect_eq(amp_cpu_kernel((AmpOpId)op), amp_cpu_ops[op].run);
        cr_expect_eq(amp_cpu_kernel_prepare((AmpOpId)op), amp_cpu_ops[op].prepare);
    }
    cr_expect(!amp_cpu_ops[AMP_OP_UNKNOWN].run);
    /* The executor runs the bodies of the control-flow ops itself. */
    cr_expect(!amp_cpu_kernel(AMP_OP_If) && !amp_cpu_kernel(AMP_OP_Loop) && !amp_cpu_kernel(AMP_OP_Scan));
    cr_expect_eq(kernels, AMP_OP__COUNT - 1 - 3, "%d CPU kernels: every op but If, Loop and Scan has one", kernels);
    cr_expect_null(amp_cpu_kernel((AmpOpId)AMP_OP__COUNT));
}

/* ops/unary.def is the one list of the float unary ops: every line is one op, run on the
 * CPU by the generic kernel with the line's prepare, and on CUDA by a row of
 * kernels/cuda/table.c (its CUDA column 1) or else with a reason above; no other op is
 * routed to the generic kernel. */
Test(op_tables, every_unary_def_line_has_its_rows) {
    bool has[AMP_OP__COUNT] = {false}, listed[AMP_OP__COUNT] = {false};
    cuda_entries(has);
    cr_expect_gt(N_UNARY, 30);
    for (size_t i = 0; i < N_UNARY; i++) {
        AmpOpId op = UNARY[i].op;
        cr_expect(!listed[op], "%s has two lines in ops/unary.def", OP_ID[op]);
        listed[op] = true;
        cr_expect_eq(amp_cpu_ops[op].run, amp_ew_unary, "%s: the CPU row is not the generic unary kernel", OP_ID[op]);
        cr_expect_eq(amp_cpu_ops[op].prepare, UNARY[i].prepare, "%s: the CPU row's prepare is not its line's",
                     OP_ID[op]);
        if (UNARY[i].cuda) {
            cr_expect(has[op], "%s: CUDA 1 in ops/unary.def, but no row in kernels/cuda/table.c", OP_ID[op]);
            cr_expect(!cuda_absent_reason[op], "%s: CUDA 1 in ops/unary.def: drop its cuda_absent_reason[]", OP_ID[op]);
        } else {
            cr_expect(!has[op], "%s: CUDA 0 in ops/unary.def, but a row in kernels/cuda/table.c", OP_ID[op]);
            cr_expect(cuda_absent_reason[op], "%s: CUDA 0 in ops/unary.def needs a reason in cuda_absent_reason[]",
                      OP_ID[op]);
        }
    }
    for (int op = 0; op < AMP_OP__COUNT; op++)
        if (amp_cpu_ops[op].run == amp_ew_unary)
            cr_expect(listed[op], "%s runs the generic unary kernel but has no line in ops/unary.def", OP_ID[op]);
}

/* Fusing a unary op is its line's FUSE column, nothing else: the runtime's fusion, the
 * programs' check and their interpreter on both backends expand ops/unary.def
 * (tests/runtime/test_fuse.c runs every FUSE line fused against the CPU, and refuses a
 * program with a line that does not fuse). A fused instruction computes FEXPR in float32
 * with no attributes: only a float-only line without a prepare may fuse. */
Test(op_tables, a_unary_op_fuses_by_its_line_alone) {
    int fused = 0;
    for (size_t i = 0; i < N_UNARY; i++) {
        if (!UNARY[i].fuse) continue;
        fused++;
        cr_expect(!UNARY[i].prepare, "%s: FUSE 1, but the fused programs read no attributes", OP_ID[UNARY[i].op]);
        cr_expect(!UNARY[i].ints, "%s: FUSE 1, but the fused programs compute unary ops in float", OP_ID[UNARY[i].op]);
    }
    cr_expect_geq(fused, 6, "Sqrt, Reciprocal, Exp, Log, Tanh and Erf fuse");
}
