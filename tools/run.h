/* `ampc run` (tools/run.c): opens a model in a session and runs inference or N training
 * steps on data from --inputs DIR or deterministic random data, printing one line per step,
 * then the step time and peak memory. */
#ifndef AMPC_TOOLS_RUN_H
#define AMPC_TOOLS_RUN_H

#include <stdint.h>

enum { AMPC_RUN_MAX_DIMS = 64 };

typedef struct RunArgs {
    const char *model;
    long steps;          /* >= 1 */
    const char *inputs;  /* --inputs DIR, or NULL */
    int backend;         /* AmpBackendKind */
    uint64_t seed;
    const char *loss;    /* --loss NAME, or NULL */
    const char *load_state, *save_state; /* checkpoint files, or NULL */
    const char *dims[AMPC_RUN_MAX_DIMS]; /* --dim NAME=VALUE, as given */
    int n_dims;
} RunArgs;

/* Returns the exit code (an AmpCode); messages go to stderr via `say`. */
int ampc_cmd_run(const RunArgs *a);

/* Prints "ampc: <message>" as one line on stderr (defined in ampc.c). */
void ampc_say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
