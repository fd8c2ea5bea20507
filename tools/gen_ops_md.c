/* docs/ops.md from the op table (ir/ops.def): `gen_ops_md FILE` writes it (the build
 * writes BUILD/docs/ops.md; `cmake --build build --target ops_md` the committed copy),
 * `gen_ops_md --check FILE` exits 1 naming the first line where FILE differs from what
 * the table gives (the test ops_md_current). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ops.h"
#include "tools/gen_md.h"

static const char HEAD[] =
    "# The op table\n\n"
    "Generated from `ir/ops.def` by `tools/gen_ops_md.c` (`cmake --build build --target\n"
    "ops_md` rewrites this file); the test `ops_md_current` fails when it and ops.def disagree.\n\n"
    "Classes (docs/design.md, \"The colouring lists and the rules beside them\"): **allow**\n"
    "always 16-bit; **infer** 16-bit only between 16-bit neighbours; **clear** no\n"
    "arithmetic, follows its neighbours; **deny** always fp32; **never** not touched (no\n"
    "float data, control flow, unknown ops). bf16 differs from fp16 only where bfloat16's\n"
    "fp32-sized exponent removes the reason for deny: ReduceMean and the instance/group\n"
    "normalisations (their kernels keep statistics in fp32) become infer, as in\n"
    "TensorFlow's oneDNN bf16 lists. LayerNormalization is deny in both (infer with\n"
    "`--level norms-16`).\n"
    "Ops not listed are kept as they are, class never, types from the model.\n\n"
    "**opsets**: the first ai.onnx opset whose schema takes float16 / bfloat16; the pass\n"
    "leaves the op fp32 below it (`none`: no opset does; `-`: not checked).\n\n"
    "| op | domain | fp16 | bf16 | opsets | why |\n|---|---|---|---|---|---|\n";

static void opset_text(int v, char *buf, size_t len) {
    if (v == AMP_OPSET_ANY) snprintf(buf, len, "-");
    else if (v == AMP_OPSET_NONE) snprintf(buf, len, "none");
    else snprintf(buf, len, "%d", v);
}

/* The whole file, in a malloc'ed string; NULL on OOM. */
static char *render(void) {
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    len += (size_t)snprintf(s, cap, "%s", HEAD);
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        char f16[16], b16[16], row[1024];
        opset_text(in->opset_fp16, f16, sizeof f16);
        opset_text(in->opset_bf16, b16, sizeof b16);
        int n = snprintf(row, sizeof row, "| %s | %s | %s | %s | %s / %s | %s |\n", in->name,
                         in->domain[0] ? in->domain : "ai.onnx", amp_op_class_name(in->fp16_class),
                         amp_op_class_name(in->bf16_class), f16, b16, in->doc);
        if (n < 0 || (size_t)n >= sizeof row) {
            free(s);
            return NULL;
        }
        if (len + (size_t)n + 1 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        memcpy(s + len, row, (size_t)n + 1);
        len += (size_t)n;
    }
    return s;
}

int main(int argc, char **argv) {
    int checking = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (argc != 2 + checking) {
        fprintf(stderr, "usage: gen_ops_md [--check] FILE\n");
        return 2;
    }
    char *md = render();
    if (!md) {
        fprintf(stderr, "gen_ops_md: out of memory\n");
        return 1;
    }
    int rc = 0;
    if (checking) {
        char *have = gen_md_read(argv[2]);
        if (!have) fprintf(stderr, "gen_ops_md: cannot read %s\n", argv[2]);
        rc = !have || gen_md_check(argv[2], have, md, "ir/ops.def", "ops_md");
        free(have);
    } else {
        FILE *f = fopen(argv[1], "wb");
        int bad = !f || fputs(md, f) < 0;
        if ((f && fclose(f) != 0) || bad) {
            fprintf(stderr, "gen_ops_md: cannot write %s\n", argv[1]);
            rc = 1;
        }
    }
    free(md);
    return rc;
}
