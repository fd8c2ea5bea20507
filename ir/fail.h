/* How library code fails: the builders of an AmpStatus (ir/status.c). Internal: a program
 * using the library reads the AmpStatus it is given (ampc/status.h) and never builds one. */
#ifndef AMP_FAIL_H
#define AMP_FAIL_H

#include "ampc/status.h"

#if defined(__GNUC__)
#define AMP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMP_PRINTF(f, a)
#endif

/* Records a failure in st (which may be NULL) unless one is recorded already, so the
 * innermost, most precise message wins. Returns code, to allow `return amp_fail(...)`. */
AmpCode amp_fail(AmpStatus *st, AmpCode code, const char *fmt, ...) AMP_PRINTF(3, 4);

/* Prefixes an already recorded message with context ("model.onnx: "). */
void amp_status_prefix(AmpStatus *st, const char *fmt, ...) AMP_PRINTF(2, 3);

#endif
