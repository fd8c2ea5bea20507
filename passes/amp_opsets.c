/* ONNX schema facts the AMP pass needs: the first ai.onnx opset at which each op accepts
 * float16 and bfloat16 (e.g. Conv takes bfloat16 only from opset 22). They live in the
 * op's row (ir/ops.def, OPSETS column); tests/passes/test_amp_corpus.py checks them
 * against the installed onnx. */
#include "passes/amp_impl.h"

void amp_op_min_opsets_16(int dtype, int out[AMP_OP__COUNT]) {
    for (int op = 0; op < AMP_OP__COUNT; op++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)op);
        out[op] = dtype == AMP_DT_BFLOAT16 ? in->opset_bf16 : in->opset_fp16;
    }
}
