/* AmpStatus: how every fallible library function reports failure.
 * A function returns an AmpCode and, on failure, fills the caller's AmpStatus with
 * one line naming the file, node and value concerned. Library code never exits. */
#ifndef AMP_STATUS_H
#define AMP_STATUS_H

/* The values double as the CLI's exit codes (docs/design.md, "Errors, memory and
 * untrusted input"). */
typedef enum AmpCode {
    AMP_OK = 0,
    AMP_ERR_INPUT = 1,       /* the model or data given is malformed */
    AMP_ERR_USAGE = 2,       /* the caller asked for something meaningless */
    AMP_ERR_UNSUPPORTED = 3, /* valid, but ampc does not implement it */
    AMP_ERR_INTERNAL = 4     /* a bug in ampc, or the system failed (I/O, memory) */
} AmpCode;

typedef struct AmpStatus {
    AmpCode code;
    char msg[1024];
} AmpStatus;

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

void amp_status_clear(AmpStatus *st);

const char *amp_code_name(AmpCode code);

#endif
