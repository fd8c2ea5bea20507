/* The command's messages (tools/cli_say.h): one line each on stderr. A leaf: every file of
 * the command says through here and it calls none of them back. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/fail.h"
#include "tools/cli_say.h"

/* This process's rank in a data-parallel job (ampc_say_rank), 0 outside one. */
static int say_rank;

void ampc_say_rank(int rank) {
    say_rank = rank < 0 ? 0 : rank;
}

/* Prints "ampc: <message>" as exactly one line on stderr, whatever the message holds; on a
 * rank above 0 of a data-parallel job "ampc (rank N): ...", and its notes not at all (rank 0
 * says them for the job; an error may be a rank's own, so every rank says its errors). */
void ampc_say(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t') buf[i] = ' ';
    while (n > 0 && buf[n - 1] == ' ') buf[--n] = '\0';
    if (say_rank > 0 && strncmp(buf, "note:", 5) == 0) return;
    if (say_rank > 0) fprintf(stderr, "ampc (rank %d): %s\n", say_rank, buf);
    else fprintf(stderr, "ampc: %s\n", buf);
}

/* The command word of this run ("run"), for the hint of a usage error; "" for a conversion. */
static const char *usage_cmd = "";

void ampc_usage_command(const char *cmd) {
    usage_cmd = cmd;
}

/* A usage error: the message and the hint to run the command's --help, on one line. */
int ampc_usage_error(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ampc_say("%s (run 'ampc %s%s--help' for usage)", buf, usage_cmd, usage_cmd[0] ? " " : "");
    return AMP_ERR_USAGE;
}
