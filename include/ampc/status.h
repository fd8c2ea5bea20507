/* AmpStatus: how every fallible library function reports failure.
 * A function returns an AmpCode and, on failure, fills the caller's AmpStatus with
 * one line naming the file, node and value concerned. Library code never exits. */
#ifndef AMP_STATUS_H
#define AMP_STATUS_H

/* What the library exports: the functions of these public headers and nothing else (the
 * library is compiled with hidden visibility and the installed libampc.a keeps only these
 * symbols global; docs/design.md, "The public library"). */
#if defined(__GNUC__)
#define AMP_API __attribute__((visibility("default")))
#else
#define AMP_API
#endif

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

/* Empties st (code AMP_OK, no message), for a status used again. */
AMP_API void amp_status_clear(AmpStatus *st);

/* "ok", "bad input", "usage", "unsupported" or "internal error". */
AMP_API const char *amp_code_name(AmpCode code);

#endif
