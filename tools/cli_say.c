/* The command's messages (tools/cli_say.h): one line each on stderr. A leaf: every file of
 * the command says through here and it calls none of them back. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/fail.h"
#include "tools/cli_say.h"

/* Prints "ampc: <message>" as exactly one line on stderr, whatever the message holds. */
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
    fprintf(stderr, "ampc: %s\n", buf);
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
