/* The conversion, `ampc MODEL -o OUT`'s and the C API's (amp_convert_file, amp_convert_bytes:
 * runtime/conversion.c): one set of phases both call, so that the same model and options make
 * the same bytes whichever door they came by. The command puts its own between them (timing,
 * --print, --report, --explain, onnxruntime-training's import, the verification beside the
 * save); the library runs them in a row. */
#ifndef AMP_CONVERT_H
#define AMP_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "passes/options.h"

/* After every option was set (and the caller's variables read): decides `precision auto`
 * for the machine this runs on (a usable GPU, else this CPU), writes what it chose into
 * summary ("precision auto: bf16 (why)"; "" when auto was not asked), then checks the
 * options as a whole (amp_options_finish). */
AmpCode amp_convert_ready(AmpOptions *o, char *summary, size_t n, AmpStatus *st);

/* The pipeline to run: `list` (NULL: the default pipeline; "": none), less the amp and
 * loss_scale passes when precision auto chose no 16-bit compute (written into buf then). */
const char *amp_convert_pipeline(const AmpOptions *o, const char *list, char *buf, size_t len);

/* The conversion's load: path (or, when path is NULL, len bytes at data with external data
 * in dir) through the loader's checks, weights left in the input's mapping (nothing runs
 * the model). The verifier comes next (amp_verify_model_counted: the command times it
 * apart). */
AmpCode amp_convert_load(const char *path, const void *data, size_t len, const char *dir, AmpModel **out,
                         AmpStatus *st);

/* The conversion's save options: external data as asked (tensors from 1 KiB on), the types
 * of intermediates unless value_info is false. */
AmpSaveOptions amp_convert_save_options(AmpExternalMode external, bool value_info);

/* Whether a pass's notice is one of the conversion's summary (the amp, loss_scale and
 * gradient passes' lines, which the "wrote" line carries) rather than a notice apart. */
bool amp_convert_is_summary(const char *line);

/* The option values a C API options object keeps (the tables' setters keep pointers to the
 * strings they are given): amp_keep_copy appends a copy of value ("" for NULL) and returns
 * it, or NULL when out of memory; amp_keep_free frees them all. */
typedef struct AmpKept {
    char **s;
    size_t n;
} AmpKept;
const char *amp_keep_copy(AmpKept *k, const char *value);
void amp_keep_free(AmpKept *k);
/* An options object's refusal of a name its table lacks: "no WHAT option 'NAME' (the
 * options: ...)", listing at(0), at(1), ... (amp_convert_option_name's form), AMP_ERR_USAGE. */
AmpCode amp_refuse_unknown(AmpStatus *st, const char *what, const char *name, const char *(*at)(size_t, bool *));

#endif
