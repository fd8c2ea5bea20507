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
 * result of instruction j. */
typedef enum AmpFusedOpcode {
    AMP_FOP_ADD = 1, AMP_FOP_SUB, AMP_FOP_MUL, AMP_FOP_DIV, AMP_FOP_POW, AMP_FOP_MAX, AMP_FOP_MIN,
    AMP_FOP_NEG, AMP_FOP_ABS, AMP_FOP_SQRT, AMP_FOP_RECIP, AMP_FOP_RELU, AMP_FOP_EXP, AMP_FOP_LOG,
    AMP_FOP_EQ, AMP_FOP_LT, AMP_FOP_GT, AMP_FOP_LE, AMP_FOP_GE,
    AMP_FOP_NOT, AMP_FOP_AND, AMP_FOP_OR, AMP_FOP_XOR,
    AMP_FOP_WHERE, AMP_FOP_CAST, AMP_FOP_ISNAN, AMP_FOP_ISINF, AMP_FOP_IDENT,
    AMP_FOP_TANH, AMP_FOP_ERF,
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
