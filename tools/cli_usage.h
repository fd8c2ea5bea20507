/* The CLI's option table (cli_options.h) as getopt and --help use it, and which of the
 * commands takes each option (cli_usage.c). */
#ifndef AMPC_CLI_USAGE_H
#define AMPC_CLI_USAGE_H

#include <getopt.h>
#include <stdio.h>

#include "tools/cli_options.h"

typedef struct OptRow {
    int val;
    const char *name;
    int short_name;
    int has_arg;
    const char *meta, *help;
} OptRow;

/* How many rows the option table has. */
enum {
#define AMPC_COUNT(id, name, sh, arg, meta, help) AMPC_ONE_##id,
    AMPC_OPTIONS(AMPC_COUNT)
#undef AMPC_COUNT
    AMPC_N_OPTS
};

/* The commands, as bits: which of them takes an option (help and version: all). */
enum {
    CMD_CONVERT = 1,
    CMD_RUN = 2,
    CMD_BENCH = 4,
    CMD_GRAD = 8,
    CMD_CALIBRATE = 16,
    CMD_COMPARE = 32,
    CMD_EXPORT = 64,
    CMD_VERIFY = 128 /* takes no option but --help */
};
#define CMD_ALL (CMD_CONVERT | CMD_RUN | CMD_BENCH | CMD_GRAD | CMD_CALIBRATE | CMD_COMPARE | CMD_EXPORT)

/* getopt_long's table, ending in a zero row. */
extern const struct option ampc_long_opts[];
/* getopt's short options into out (2 * AMPC_N_OPTS + 2 bytes), ':' first (a missing
 * argument returns ':', so the message is ampc's). */
void ampc_short_opts(char *out);
/* `ampc --help`: usage, every option, the environment, exit codes. */
void ampc_print_help(FILE *f, const char *version);
/* Its usage lines: every command's synopsis ("usage: ampc MODEL -o OUT ..."). */
void ampc_print_usage(FILE *f);
/* The commands that take option val, by name ("convert, run, bench"; "all"), into buf. */
void ampc_option_command_names(int val, char *buf, size_t len);
/* `ampc COMMAND --help`: that command's synopsis and the options it takes (CMD_CONVERT:
 * all of ampc_print_help). */
void ampc_print_command_help(FILE *f, const char *version, unsigned cmd);
/* The CMD_ bit of a command word ("run"), 0 when it names none; the words, for messages. */
unsigned ampc_command_by_name(const char *name);
const char *ampc_command_names(void);

/* The row of an option (by its value or short letter), NULL when none. */
const OptRow *ampc_row_by_val(int val);
/* The usage error for an unknown or ambiguous long option ("--pass"). */
int ampc_unknown_long(const char *arg);
/* The CMD_ bits of the commands that take option val. */
unsigned ampc_option_commands(int val);
/* The usage error for option r given to command cmd, which does not take it. */
int ampc_wrong_command(const OptRow *r, unsigned cmd);

#endif
