/* The AMP options and every AMP_* variable in one table (options.c): each one's spellings,
 * check and field, shared by the doors that set them: the CLI (--precision), the
 * environment (AMP_PRECISION, read by `ampc MODEL -o OUT`, by sessions, by every ampc
 * command: AmpOption.doors) and the C API's AmpSessionOptions fields (read as their
 * variable). A value is accepted or refused here, whichever door it came by, and a refused
 * one gets one message, "--flag 'VALUE': expected ..." or "VAR='VALUE': expected ..." (the
 * same but for the door's name), AMP_ERR_USAGE. Nothing else reads the environment: the
 * layers below (the backends, the CPU kernels, ir/threads.c) are handed the values.
 * Adding an option is one row there (and one in tools/cli_options.h for its --help text).
 *
 * The table sits in passes/, the lowest layer both its readers (the runtime and the
 * command) reach; the values of the runtime's own variables are only checked and stored
 * here (AMP_BACKEND's words are backend/backend.c's, which a test holds them to). */
#ifndef AMP_OPTIONS_H
#define AMP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/front.h"
#include "passes/pass.h"

/* The sessions' own settings, read by the same table (runtime/amp_auto.c hands them on to
 * the session, the backend it opens and the CPU kernels). Strings are the caller's. */
typedef struct AmpRunOptions {
    const char *backend;  /* AMP_BACKEND's word: "auto", "cpu", "cuda" or "sim"; NULL: not given */
    bool amp_auto;        /* AMP_AUTO */
    bool tf32;            /* AMP_TF32 */
    bool cuda_sync;       /* AMP_CUDA_SYNC */
    bool cuda_profile;    /* AMP_CUDA_PROFILE */
    const char *sim_lacks, *sim_refuses; /* AMP_SIM_LACKS, AMP_SIM_REFUSES: op types */
    bool no_dnnl;         /* AMP_DNNL=0 */
    const char *log_path; /* AMP_LOG_PATH */
    /* Data parallelism (runtime/session_dp.c): AMP_DATA_PARALLEL's word as ampc.h's
     * AMP_DATA_PARALLEL_* counts them (0 auto, 1 mpi, 2 off; session_dp.c holds the two
     * equal); AMP_COMM_TIMEOUT's seconds (0: not given); the files of AMP_MPI_PLUGIN and
     * AMP_NCCL_LIB, which existed when read. */
    int data_parallel;
    double comm_timeout;
    const char *mpi_plugin, *nccl_lib;
} AmpRunOptions;

/* Options as read, and the storage their lists need. Zero-initialised means defaults. */
typedef struct AmpOptions {
    AmpPassOptions po;      /* what the passes read; list_edits and keep_fp32 are set by
                               amp_options_finish to point below */
    AmpListEdit *edits;     /* malloc'd, in the order given */
    size_t n_edits;
    const char **keep;      /* malloc'd --keep-fp32 globs (the strings are the caller's) */
    size_t n_keep;
    double loss_scale_init; /* --loss-scale-init (0: not given) */
    struct AmpCalibStats *calib; /* --calibration / AMP_CALIBRATION, read when set (po.calib) */
    /* --precision auto / AMP_PRECISION=auto: amp_options_decide picks the type for the
     * device (po.precision stays 0 until then). */
    bool precision_auto;
    bool cpu_features_given; /* AMP_CPU_FEATURES (a test hook): cpu_features replaces the CPU's */
    unsigned cpu_features;
    /* After amp_options_decide: auto chose no 16-bit compute (the graph stays float32),
     * and why it chose what it chose (a static sentence; NULL when auto was not asked). */
    bool stay_fp32;
    const char *precision_why;
    int threads; /* AMP_THREADS (0: not given; more than 64 counts as 64 where it is used) */
    AmpRunOptions run;
    /* What a conversion runs and writes (`ampc MODEL -o OUT` and the C API's conversion):
     * --passes (NULL: the default pipeline), --external-data (an AmpExternalMode, 0: auto),
     * --no-value-info. */
    const char *passes;
    int external;
    bool no_value_info;
    uint64_t given; /* bit i: row i of the table was set (by a flag, a field or a variable) */
} AmpOptions;

typedef struct AmpOption AmpOption;
struct AmpOption {
    const char *name;   /* the CLI's long option without "--"; NULL: environment only */
    const char *env;    /* the AMP_AUTO variable; NULL: the CLI only */
    const char *expect; /* what a refused value's message says is expected */
    /* Stores v; false when v is refused (the message is then made from `expect`), or
     * with st set (code != AMP_OK) when the setter made its own message. */
    bool (*set)(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st);
    int arg;          /* the setter's own datum (a list option's AmpOpClass, ...) */
    unsigned doors;   /* AMP_DOOR_*: who reads the variable */
    /* The C API's AmpSessionOptions field that replaces the variable (the Python keyword
     * too), or NULL where a session has none; runtime/amp_auto.c reads it by this name. */
    const char *field;
    /* The option's name where it has no session field: the keyword of the Python package
     * and of amp_convert_option_set (amp_option_keyword: field, else this). */
    const char *keyword;
    /* A variable's entry in docs/env.md (tools/gen_cli_md.c): what it does (markdown); and a
     * value it takes and one it refuses, for that page and the test that walks the table
     * (tests/tools/test_env_doors.py). NULL for the CLI's own options. */
    const char *doc, *example, *refused;
};

/* Who reads a row's variable (AmpOption.doors). A flag given wins over its variable, which
 * is then not read; the list edits add up instead (the flags' first, then the variables'). */
enum {
    AMP_DOOR_CONVERT = 1u << 0, /* `ampc MODEL -o OUT`, after its flags */
    AMP_DOOR_AMP = 1u << 1,     /* sessions with AMP_AUTO on (runtime/amp_auto.c) */
    AMP_DOOR_SESSION = 1u << 2, /* every session, at open, AMP_AUTO or not */
    AMP_DOOR_COMMAND = 1u << 3, /* every ampc command, before it runs (tools/cli_amp.c) */
    AMP_DOOR_EXPORT = 1u << 4,  /* `ampc export`, for its --precision auto */
};

/* The table, in order; NULL past the end. */
const AmpOption *amp_option_at(size_t i);
/* The row of CLI option `name` ("precision"), or of variable `name` ("AMP_PRECISION");
 * NULL when none. */
const AmpOption *amp_option_find(const char *name);

/* The row's keyword, the name the Python package and amp_convert_option_set take: its
 * session field, else its own keyword ("keep_fp32"). */
const char *amp_option_keyword(const AmpOption *d);
/* The row of keyword `name` ("loss_scale"); NULL when none. */
const AmpOption *amp_option_by_keyword(const char *name);
/* Whether `ampc MODEL -o OUT` takes the row: a flag of its own, or a variable it reads
 * (AMP_DOOR_CONVERT); amp_convert_option_set takes the same rows. */
bool amp_option_converts(const AmpOption *d);

/* Whether d's values add up (the list edits: flags' and variable's alike) rather than the
 * last one winning (a flag given then wins over the variable). */
bool amp_option_adds_up(const AmpOption *d);
/* Sets option d from value v, which came by `label` ("--precision" or "AMP_PRECISION").
 * An empty v is refused like any bad value (the environment's doors skip blank values
 * before: a variable set empty is unset). */
AmpCode amp_option_set(AmpOptions *o, const AmpOption *d, const char *label, const char *v, AmpStatus *st);
/* The table's parsers of numbers, which the command's own flags use too (tools/cli_values.c):
 * a real number, finite, in [lo, hi] (an open end excludes its bound); a whole number
 * written in decimal digits (no sign, no space), in [lo, hi]. False when s is anything
 * else. */
bool amp_parse_real(const char *s, double lo, bool lo_open, double hi, bool hi_open, double *out);
bool amp_parse_whole(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* The message of a refused value: "LABEL 'V': expected EXPECT" ("LABEL='V'" when LABEL is
 * a variable), AMP_ERR_USAGE. For options outside the table (AMP_BACKEND, --backend) too. */
AmpCode amp_option_refuse(AmpStatus *st, const char *label, const char *v, const char *expect);

/* An option, by its CLI name ("loss-scale") and a value to give it (NULL: the option alone),
 * as the caller's front end (ir/front.h) spells it, into buf: `--loss-scale none`; for the C API
 * `loss_scale = "none" (AmpSessionOptions; or AMP_LOSS_SCALE=none)`; for Python
 * `loss_scale="none" (or AMP_LOSS_SCALE=none)`. An option only the command has (no field,
 * no variable) is its flag whatever the front. Returns buf. */
const char *amp_option_say(const char *flag, const char *value, char *buf, size_t n);
/* The same into a buffer that lives until the end of the enclosing block: for a message's
 * argument, amp_fail(st, code, "...; convert with %s", AMP_OPT_SAY("loss-scale", "none")). */
#define AMP_OPT_SAY(flag, value) amp_option_say((flag), (value), (char[192]){0}, 192)

/* The environment's door: for each row whose variable `door` (an AMP_DOOR_ bit) reads, in
 * table order, the value get(ctx, row) gives; NULL or "" is unset. A row already set (by
 * its flag) is skipped, but for the list edits, which add up. */
typedef const char *(*AmpOptionGetFn)(void *ctx, const AmpOption *d, bool *from_field);
AmpCode amp_options_read_env(AmpOptions *o, AmpOptionGetFn get, void *ctx, unsigned door, AmpStatus *st);
/* The get of amp_options_read_env that reads the process's environment. */
const char *amp_option_getenv(void *ctx, const AmpOption *d, bool *from_field);

/* The class of device a precision is chosen for: the CPU backend computes on this
 * machine's CPU; every other backend (a GPU, or the simulator standing for one) is a GPU. */
typedef enum AmpDeviceClass { AMP_DEVICE_CPU = 0, AMP_DEVICE_GPU = 1 } AmpDeviceClass;

/* `--precision auto`'s one decision, for every door (ampc's conversion, `ampc export`,
 * AMP_AUTO sessions): the 16-bit type the device runs fastest, given the CPU's features
 * (ir.h: AMP_CPU_*, amp_cpu_features). A GPU: AMP_DT_FLOAT16 (tensor cores). A CPU with
 * bf16 dot products (AVX512-BF16 or AMX-BF16): AMP_DT_BFLOAT16. A CPU without them:
 * AMP_DT_FLOAT, no 16-bit compute at all, since 16-bit values would only be widened to
 * float32 and multiplied there (fp16 too: the CPU kernels have no AVX512-FP16 or AMX-FP16
 * path, so it gains nothing either). *why: one sentence saying so (static). */
int amp_precision_auto(AmpDeviceClass dev, unsigned cpu_features, const char **why);

/* When o asks for auto: decides it for dev (the CPU's features are AMP_CPU_FEATURES's when
 * given, else this machine's) and sets po.precision, or stay_fp32, and precision_why.
 * Before amp_options_finish (the loss-scale default follows the type). */
void amp_options_decide(AmpOptions *o, AmpDeviceClass dev);

/* After every option was set: checks what only the whole can tell (an op added to two
 * lists; dynamic-scaling settings while scaling is not dynamic) and points po at the
 * lists. AMP_ERR_USAGE with a message otherwise. */
AmpCode amp_options_finish(AmpOptions *o, AmpStatus *st);
void amp_options_free(AmpOptions *o);

#endif
