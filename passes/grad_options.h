/* `ampc grad`'s options in one table (grad_options.c): each one's flag, keyword and check, for
 * the two doors that set them, the command's flags (tools/cli_grad.c: --optimizer adam) and
 * the C API's grad options set by name (runtime/grad_api.c, the Python package's keywords:
 * optimizer="adam"). A value is accepted or refused here whichever door it came by, with one
 * message: "--lr 'x': expected ..." for the command, "lr='x': expected ..." for a keyword
 * (amp_option_refuse), AMP_ERR_USAGE. Adding an option is one row there (and one in
 * tools/cli_options.h for the command's --help text). */
#ifndef AMP_GRAD_OPTIONS_H
#define AMP_GRAD_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "passes/grad.h"

/* The options as set, and the storage their lists need. Zero-initialised means defaults. */
typedef struct AmpGradArgs {
    AmpGradOptions opt; /* what amp_grad_model reads; opt.freeze points at `freeze` */
    const char **freeze; /* malloc'd --freeze globs (the strings are the caller's) */
    size_t n_freeze;
} AmpGradArgs;

typedef struct AmpGradFlag AmpGradFlag;

/* The table, in order; NULL past the end. */
const AmpGradFlag *amp_grad_flag_at(size_t i);
/* The row of flag `name` ("class-axis") or of keyword `name` ("class_axis"); NULL when none. */
const AmpGradFlag *amp_grad_flag_find(const char *name);
const char *amp_grad_flag_name(const AmpGradFlag *d);    /* "class-axis" */
const char *amp_grad_flag_keyword(const AmpGradFlag *d); /* "class_axis" */
/* Whether the row takes a value (--train-mode takes none). */
bool amp_grad_flag_takes_value(const AmpGradFlag *d);

/* Sets row d from value v, which came by `label` ("--lr", or the keyword "lr"). A list row
 * (freeze) adds up, the others replace. */
AmpCode amp_grad_arg_set(AmpGradArgs *g, const AmpGradFlag *d, const char *label, const char *v, AmpStatus *st);
/* The number of the real-valued row of flag `flag` ("lr") in v, checked by that row, as
 * another command's flag of the same name takes it (`ampc run --lr`: one range whichever
 * command reads it); the message names `label`. */
AmpCode amp_grad_real(const char *flag, const char *label, const char *v, double *out, AmpStatus *st);
/* After every option was set: what only the whole can tell (--momentum without
 * --optimizer momentum ...), named for the caller's front (ir/front.h). */
AmpCode amp_grad_args_check(const AmpGradArgs *g, AmpStatus *st);
void amp_grad_args_free(AmpGradArgs *g);

/* What amp_grad_model did, in words: "loss 'loss', 4 parameters with gradients and Adam
 * updates, 8 optimizer state tensors; 61 nodes added" (`ampc grad` says it before
 * " -> OUT"). Returns buf. */
const char *amp_grad_summary_text(const AmpGradSummary *sum, const AmpGradOptions *o, char *buf, size_t n);

#endif
