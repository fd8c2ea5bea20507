/* `ampc grad`'s work, shared by the command (tools/cli_grad.c) and the C API (ampc.h:
 * amp_grad_bytes, amp_grad_file; runtime/grad_api.c): one path from the inference model to the
 * training model's bytes, so that the same model and options make the same bytes whichever
 * door they came by. */
#ifndef AMP_GRAD_API_H
#define AMP_GRAD_API_H

#include <stddef.h>

#include "ir/ir.h"
#include "passes/grad_options.h"

/* Loads the model (path, or when path is NULL len bytes at data with external data in dir),
 * checks g as a whole (amp_grad_args_check), appends the loss, backward and optimizer
 * (amp_grad_model), verifies, and saves to file dst (atomically, external data beside it
 * when over 2 GB) or, when dst is NULL, into *out (*out_len bytes, malloc'd). summary (n
 * bytes) gets what was done, amp_grad_summary_text's line. */
AmpCode amp_grad_run(const char *path, const void *data, size_t len, const char *dir, const AmpGradArgs *g,
                     const char *dst, void **out, size_t *out_len, char *summary, size_t n, AmpStatus *st);

#endif
