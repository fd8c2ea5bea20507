/* The command's messages, for every file of `ampc` (tools/cli_say.c): errors and notes are
 * one line on stderr, "ampc: ..."; a usage error ends with the hint to run --help. */
#ifndef AMPC_TOOLS_CLI_SAY_H
#define AMPC_TOOLS_CLI_SAY_H

/* Prints "ampc: <message>" as one line on stderr (newlines and tabs become spaces; on ranks
 * above 0 see ampc_say_rank). */
void ampc_say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* This process's rank in a data-parallel job (tools/run_dp.c, once the session joined it):
 * above 0, messages read "ampc (rank N): ..." and notes are left to rank 0. */
void ampc_say_rank(int rank);

/* The command word of this run ("run"), named in the hint of a usage error; none for a
 * conversion. */
void ampc_usage_command(const char *cmd);

/* A usage error: the message and the hint to run --help, on one line of stderr; returns
 * AMP_ERR_USAGE. */
int ampc_usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
