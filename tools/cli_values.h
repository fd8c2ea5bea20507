/* The values of the command's numeric flags (tools/cli_values.c): one row per flag, its
 * range and what its message says is expected, checked by one parser per kind (the options
 * table's: amp_parse_whole, amp_parse_real), whichever command takes the flag: `--lr` is
 * checked alike by grad, run, bench, export and the conversion. A refused value is
 * "--flag 'VALUE': expected ...", the options table's message (passes/options.c), exit 2. */
#ifndef AMPC_TOOLS_CLI_VALUES_H
#define AMPC_TOOLS_CLI_VALUES_H

#include <stdint.h>

#include "passes/options.h"

/* The whole number of flag opt (an OPT_ value of tools/cli_options.h) in arg: 0, or the
 * exit code of a usage error (printed). */
int ampc_flag_whole(int opt, const char *arg, uint64_t *out);
/* The same for a real number. */
int ampc_flag_real(int opt, const char *arg, double *out);
/* A flag that stands for a row of the options table (`row`, its option or variable name:
 * --threads for AMP_THREADS, --backend, calibrate's --loss-scale-init): arg set into *o by
 * that row, as the variable is; 0 or the exit code of a usage error (printed). */
int ampc_flag_table(const char *row, int opt, const char *arg, AmpOptions *o);

#endif
