/* The command's numeric flags (cli_values.h): each one's range, in one table. */
#include "tools/cli_values.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "passes/grad_options.h"
#include "passes/options.h"
#include "tools/cli_say.h"
#include "tools/cli_usage.h"

typedef struct Number {
    int opt;                /* OPT_ */
    bool whole;             /* a whole number in [min, max], else a real one between lo and hi */
    uint64_t min, max;
    double lo, hi;
    bool lo_open, hi_open;  /* an open end excludes its bound */
    const char *expect;     /* what a refused value's message says is expected */
} Number;

#define WHOLE(opt, a, b, e) {opt, true, a, b, 0, 0, false, false, e}
#define REAL(opt, a, a_open, b, b_open, e) {opt, false, 0, 0, a, b, a_open, b_open, e}
static const Number NUMBERS[] = {
    WHOLE(OPT_STEPS, 1, 100000000, "a whole number from 1 to 100000000"),
    WHOLE(OPT_ITERS, 1, 100000000, "a whole number from 1 to 100000000"),
    WHOLE(OPT_WARMUP, 0, 100000000, "a whole number from 0 to 100000000"),
    WHOLE(OPT_SEED, 0, UINT64_MAX, "a whole number from 0"),
    WHOLE(OPT_MAX_ITERATIONS, 1, UINT64_MAX, "a whole number from 1"),
    WHOLE(OPT_TOP, 1, 1000000, "a whole number from 1 to 1000000"),
    REAL(OPT_TIMEOUT, 0, true, 1e9, false, "a number of seconds above 0, up to 1e9"),
    /* --lr and grad's optimizer numbers: their rows of the grad table (passes/grad_options.c). */
};
#undef WHOLE
#undef REAL

static const Number *number(int opt) {
    for (size_t i = 0; i < sizeof NUMBERS / sizeof *NUMBERS; i++)
        if (NUMBERS[i].opt == opt) return &NUMBERS[i];
    return NULL;
}

/* "--flag" of option opt. */
static const char *label(int opt, char *buf, size_t len) {
    const OptRow *r = ampc_row_by_val(opt);
    snprintf(buf, len, "--%s", r ? r->name : "?");
    return buf;
}

/* "--flag 'arg': expected ...", the options table's message. */
static int refuse(int opt, const Number *n, const char *arg) {
    char buf[64];
    AmpStatus st = {AMP_OK, ""};
    amp_option_refuse(&st, label(opt, buf, sizeof buf), arg, n ? n->expect : "(internal: no range for this option)");
    return ampc_usage_error("%s", st.msg);
}

int ampc_flag_whole(int opt, const char *arg, uint64_t *out) {
    const Number *n = number(opt);
    if (!n || !n->whole || !amp_parse_whole(arg, n->min, n->max, out)) return refuse(opt, n, arg);
    return 0;
}

int ampc_flag_table(const char *row, int opt, const char *arg, AmpOptions *o) {
    char buf[64];
    AmpStatus st = {AMP_OK, ""};
    return amp_option_set(o, amp_option_find(row), label(opt, buf, sizeof buf), arg, &st) ? ampc_usage_error("%s", st.msg)
                                                                                           : 0;
}

int ampc_flag_real(int opt, const char *arg, double *out) {
    const Number *n = number(opt);
    const OptRow *r = ampc_row_by_val(opt);
    if (!n && r && amp_grad_flag_find(r->name)) {
        char buf[64];
        AmpStatus st = {AMP_OK, ""};
        return amp_grad_real(r->name, label(opt, buf, sizeof buf), arg, out, &st) ? ampc_usage_error("%s", st.msg) : 0;
    }
    if (!n || n->whole || !amp_parse_real(arg, n->lo, n->lo_open, n->hi, n->hi_open, out)) return refuse(opt, n, arg);
    return 0;
}
