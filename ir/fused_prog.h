/* The program of an ai.ampc FusedElementwise node: the contract between the executor's
 * fusion (runtime/fuse.c writes it) and the kernels that run it (ops/fused_eval.h,
 * shared by the CPU and CUDA kernels). Attributes of the node:
 *   program     INTS, 5 per instruction: opcode, result dtype (AmpDType), operands a, b, c
 *               (registers: 0 .. n_inputs-1 are the inputs, n_inputs + j instruction j's
 *               result; unused operands 0);
 *   in_dtypes   INTS, the dtype each input holds;
 *   outputs     INTS, the register each output stores; out_dtypes INTS, their dtypes;
 *   shape_input INT, the input whose shape every output has (the others hold as many
 *               elements, or one, broadcast);
 *   tensors     INT (default 1): the program runs over that many sets of tensors in one
 *               launch (the same arithmetic for every parameter of a model): the node's
 *               inputs are `tensors` groups of len(in_dtypes), its outputs `tensors`
 *               groups of len(outputs), set t's outputs shaped as its own shape input.
 * Plain C with no dependencies, so CUDA sources include it too. */
#ifndef AMP_IR_FUSED_PROG_H
#define AMP_IR_FUSED_PROG_H

#include <stdint.h>

/* Limits of one program (the node's attributes are checked against them at prepare). */
enum { AMP_FUSED_MAX_IN = 16, AMP_FUSED_MAX_OUT = 8, AMP_FUSED_MAX_INSTR = 48 };
#define AMP_FUSED_MAX_REG (AMP_FUSED_MAX_IN + AMP_FUSED_MAX_INSTR)

/* The instructions. Operands name registers: 0 .. n_in-1 are the inputs, n_in + j the
 * result of instruction j. AMP_FOP_UNARY is every float unary op that fuses, one
 * instruction: operand a its input, operand b the op (its AmpOpId, not a register), which
 * ops/unary.def's FUSE column admits and whose FEXPR computes it (ops/fused_eval.h). The
 * numbers are the programs' (a FusedElementwise node in a file is run as written); those
 * of the unary ops that had instructions of their own (10, 11, 13, 14, 29, 30: Sqrt,
 * Reciprocal, Exp, Log, Tanh, Erf) are no instruction now. */
typedef enum AmpFusedOpcode {
    AMP_FOP_ADD = 1, AMP_FOP_SUB = 2, AMP_FOP_MUL = 3, AMP_FOP_DIV = 4, AMP_FOP_POW = 5, AMP_FOP_MAX = 6,
    AMP_FOP_MIN = 7, AMP_FOP_NEG = 8, AMP_FOP_ABS = 9, AMP_FOP_RELU = 12,
    AMP_FOP_EQ = 15, AMP_FOP_LT = 16, AMP_FOP_GT = 17, AMP_FOP_LE = 18, AMP_FOP_GE = 19,
    AMP_FOP_NOT = 20, AMP_FOP_AND = 21, AMP_FOP_OR = 22, AMP_FOP_XOR = 23,
    AMP_FOP_WHERE = 24, AMP_FOP_CAST = 25, AMP_FOP_ISNAN = 26, AMP_FOP_ISINF = 27, AMP_FOP_IDENT = 28,
    AMP_FOP_UNARY = 31,
    AMP_FOP__COUNT
} AmpFusedOpcode;

typedef struct AmpFusedInstr {
    uint8_t op;    /* AmpFusedOpcode */
    uint8_t dtype; /* the result's AmpDType */
    uint8_t a, b, c; /* operand registers (unused ones 0) */
} AmpFusedInstr;

/* A checked program (kernels/cpu/fused.c: amp_fused_prepare builds it from the node). */
typedef struct AmpFusedProg {
    int n_in, n_instr, n_out; /* per tensor set */
    int tensors;              /* sets of tensors the node runs the program over */
    uint8_t in_dtype[AMP_FUSED_MAX_IN];   /* what each input must hold */
    uint8_t out_reg[AMP_FUSED_MAX_OUT];   /* the register each output stores */
    uint8_t out_dtype[AMP_FUSED_MAX_OUT];
    int shape_input;                      /* the input whose shape every output has */
    AmpFusedInstr ins[AMP_FUSED_MAX_INSTR];
} AmpFusedProg;

/* Whether a program is float32 arithmetic alone: every input float32, every instruction
 * an Add, Sub, Mul or Div of float32 result whose operands are registers before it (code:
 * 5 ints per instruction, as the attribute). The CPU runs those in vector rows
 * (kernels/cpu/fused.c), and only those fuse for it. */
static inline int amp_fused_prog_f32_arith(const int64_t *code, int n_instr, const int64_t *in_dt, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (in_dt[i] != 1 /* AMP_DT_FLOAT */) return 0;
    for (int j = 0; j < n_instr; j++) {
        const int64_t *c = code + 5 * j;
        if (c[0] < AMP_FOP_ADD || c[0] > AMP_FOP_DIV || c[1] != 1 || c[2] < 0 || c[3] < 0 || c[2] >= n_in + j ||
            c[3] >= n_in + j)
            return 0;
    }
    return 1;
}

#endif
