/* The op table: one row per op the project knows, in ir/ops.def (an X-macro). Every
 * other part (AMP lists, opsets, type inference, attributes, kernels, gradient rules)
 * keys on AmpOpId. Adding an op means adding one row there plus its kernel body. */
#ifndef AMP_OPS_H
#define AMP_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ir/fail.h"

struct AmpNode;
/* The context an infer function reads its inputs' types from and writes its outputs'
 * types to (ir/infer_impl.h): the model's own values, or concrete shapes (ir/shape.h). */
typedef struct AmpInferCtx AmpInferCtx;

/* How the AMP pass treats an op (docs/design.md, "The colouring lists and the rules
 * beside them"). */
typedef enum AmpOpClass {
    AMP_CLASS_NEVER = 0, /* not touched: no float data, or unknown */
    AMP_CLASS_ALLOW,     /* always 16-bit */
    AMP_CLASS_INFER,     /* 16-bit only between 16-bit neighbours */
    AMP_CLASS_CLEAR,     /* no arithmetic; follows its neighbours */
    AMP_CLASS_DENY       /* always fp32 */
} AmpOpClass;

/* Sets the types of the context's node's outputs from its inputs and attributes. */
typedef AmpCode (*AmpInferFn)(AmpInferCtx *c);

/* ops.def rows read (its header comment says what each column means):
 *   AMP_OP(Id, "domain", "Name", fp16 class, bf16 class, OPSETS(fp16, bf16),
 *          INPUTS(min, max), OUTPUTS(min, max), float input slots, infer fn,
 *          ATTRS(A("name", TYPE) ...), "doc")
 * The infer functions are declared in infer_impl.h; the kernels are in each backend's
 * own table (kernels/cpu/table.c, kernels/cuda/table.c). A file that includes ops.def
 * defines AMP_OP with these 12 parameters (or `id, ...`) and the helpers of the columns
 * it expands; a column it does not expand needs none. */

/* OPSETS(fp16, bf16) values: not checked, and no opset takes the type. */
#define AMP_OPSET_ANY 0
#define AMP_OPSET_NONE INT32_MAX

/* Bit i set: input slot i carries float data that may change precision. */
#define AMP_SLOTS_NONE 0u
#define AMP_SLOTS_ALL 0xFFFFFFFFu
#define AMP_SLOT(i) (1u << (i))

typedef enum AmpOpId {
    AMP_OP_UNKNOWN = 0,
#define AMP_OP(id, ...) AMP_OP_##id,
#include "ir/ops.def"
#undef AMP_OP
    AMP_OP__COUNT
} AmpOpId;

typedef struct AmpOpInfo {
    const char *domain; /* "" for ai.onnx, "com.microsoft", "ai.onnx.preview.training" */
    const char *name;
    AmpOpClass fp16_class, bf16_class;
    int opset_fp16, opset_bf16; /* first ai.onnx opset taking the type; AMP_OPSET_ANY/NONE */
    uint32_t float_inputs;
    int min_inputs, max_inputs;   /* max -1: variadic */
    int min_outputs, max_outputs; /* max -1: variadic */
    AmpInferFn infer; /* NULL: outputs keep the types the model declares */
    const char *doc;  /* one line: why the op has its class */
} AmpOpInfo;

/* AMP_OP__COUNT rows, by AmpOpId (row 0: AMP_OP_UNKNOWN); read it through amp_op_info. */
extern const AmpOpInfo amp_op_table[];

/* An id out of range reads as AMP_OP_UNKNOWN. */
static inline const AmpOpInfo *amp_op_info(AmpOpId id) {
    return &amp_op_table[(unsigned)id < AMP_OP__COUNT ? id : AMP_OP_UNKNOWN];
}
/* Whether domain d is the default one: NULL, "" and "ai.onnx" all mean it. */
static inline bool amp_domain_is_default(const char *d) {
    return !d || !*d || strcmp(d, "ai.onnx") == 0;
}
/* The op of (domain, name), the domain taken as amp_domain_is_default does. */
AmpOpId amp_op_lookup(const char *domain, const char *name);
const char *amp_op_class_name(AmpOpClass c);

/* Whether op's output shapes depend on data computed in the step (ops.def's
 * AMP_SHAPE_FROM_DATA list: NonZero, If, Loop, Scan), so that they can only be known
 * after running it. */
bool amp_op_shape_from_data(AmpOpId op);

/* ONNX AttributeProto.AttributeType: ops.def's ATTRS column names one per attribute
 * (A("axis", INT) is AMP_ATTR_INT), and AmpAttr.type (ir.h) holds one. */
typedef enum AmpAttrType {
    AMP_ATTR_UNDEFINED = 0,
    AMP_ATTR_FLOAT = 1,
    AMP_ATTR_INT = 2,
    AMP_ATTR_STRING = 3,
    AMP_ATTR_TENSOR = 4,
    AMP_ATTR_GRAPH = 5,
    AMP_ATTR_FLOATS = 6,
    AMP_ATTR_INTS = 7,
    AMP_ATTR_STRINGS = 8,
    AMP_ATTR_TENSORS = 9,
    AMP_ATTR_GRAPHS = 10,
    AMP_ATTR_SPARSE_TENSOR = 11,
    AMP_ATTR_SPARSE_TENSORS = 12,
    AMP_ATTR_TYPE_PROTO = 13,
    AMP_ATTR_TYPE_PROTOS = 14
} AmpAttrType;

/* What ops.def's ATTRS column says of attribute `attr_name` of op id at opset `version`
 * (the model's import of the op's domain; 0: not known, any version will do): */
enum {
    AMP_OP_ATTR_ANY = -1,     /* the op or the attribute is not described: any type */
    AMP_OP_ATTR_OTHER = -2,   /* the op has it, but not in this version: [*since, *until) */
    AMP_OP_ATTR_UNKNOWN = -3, /* no version of the op has it (ai.onnx and training ops) */
};
/* The AttributeProto type (AmpAttrType value, >= 0) it must have, or one of the above. */
int amp_op_attr_type(AmpOpId id, const char *attr_name, int64_t version, int *since, int *until);

/* An attribute of the CPU plan's fused com.microsoft ConvGrad without W (runtime/
 * fuse_wgrad.c; no model's): INT 1, dW is float32 whatever X's type (bfloat16 inputs:
 * oneDNN's float32 sums, not rounded to bfloat16). */
#define AMP_CONV_GRAD_DW_F32 "ampc_dw_float32"

#endif
