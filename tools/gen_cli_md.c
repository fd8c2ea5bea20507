/* docs/env.md and the tables of docs/cli.md from the command's option table
 * (tools/cli_options.h) and the options table of every AMP_* variable (passes/options.c),
 * as tools/gen_ops_md.c writes docs/ops.md from ir/ops.def:
 *
 *   gen_cli_md DOCS            writes DOCS/env.md whole, and in DOCS/cli.md what lies
 *                              between each "<!-- generated: NAME -->" line and its
 *                              "<!-- end generated: NAME -->" (NAME: usage, options); the
 *                              rest of cli.md is prose, edited by hand
 *                              (`cmake --build build --target cli_md`)
 *   gen_cli_md --check DOCS    exits 1 naming the first line where a file differs from what
 *                              the tables give (the test cli_md_current)
 *   gen_cli_md --rows          every variable's row, tab-separated: the variable, its doors
 *                              (convert, amp, session, command, export), a value it takes,
 *                              one it refuses, its flag (or -): what
 *                              tests/tools/test_env_doors.py walks */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/options.h"
#include "tools/cli_usage.h"
#include "tools/gen_md.h"

/* ---- env.md ----------------------------------------------------------------------------- */

static const char ENV_HEAD[] =
    "# Environment variables\n"
    "\n"
    "Generated from the options table (`passes/options.c`) by `tools/gen_cli_md.c` (`cmake --build\n"
    "build --target cli_md` rewrites this file and the generated tables of [cli.md](cli.md)); the\n"
    "test `cli_md_current` fails when they and the tables disagree.\n"
    "\n"
    "Every `AMP_*` variable is a row of that table and is read through it, nowhere else: the\n"
    "backends, the CPU kernels, the loader and the MPI and NCCL openers are handed the values\n"
    "by whoever read them. The one exception is the test hooks `AMP_TEST_*` of `ampc run`'s\n"
    "data parallelism (`tools/run_dp.c`: `AMP_TEST_DIE_AT_STEP`, `AMP_TEST_HANG_AT_STEP`,\n"
    "`AMP_TEST_RANK`, `AMP_TEST_SAVE_EVERY_RANK`, for `tests/runtime/test_data_parallel.py`),\n"
    "which are outside the table and not listed here. A row says:\n"
    "\n"
    "- **who reads it** (\"read by\"): *sessions*, every `amp_session_open` (and so `ampc run`,\n"
    "  `bench`, `calibrate`, `compare` and `export`), whether or not `AMP_AUTO` is on;\n"
    "  *`AMP_AUTO` sessions*, the sessions with `AMP_AUTO` on (with it unset or 0 none of these\n"
    "  is read, so a stale one cannot fail an open that rewrites nothing); *the conversion*,\n"
    "  `ampc MODEL -o OUT`, after its flags; *every command* of `ampc`; *export*, `ampc\n"
    "  export`'s `--precision auto`. The test `tools_test_env_doors_py` sets each variable to\n"
    "  the value shown and to a value it refuses, through each of its doors.\n"
    "- **what it takes**: the values its flag takes where it has one, checked by the same\n"
    "  parser. A refused value stops the door with a usage error naming the variable and the\n"
    "  value, the flag's message but for its name (`AMP_PRECISION='fp8': expected ...` where\n"
    "  the flag says `--precision 'fp8': expected ...`): exit 2 for `ampc`, `AMP_ERR_USAGE` from\n"
    "  `amp_session_open`. A yes-or-no variable takes `1`, `true`, `on`, `yes` or `0`, `false`,\n"
    "  `off`, `no`, as written, and refuses anything else.\n"
    "\n"
    "A variable set empty is unset. A flag given wins over its variable (`ampc MODEL -o OUT\n"
    "--precision fp16` under `AMP_PRECISION=bf16` writes float16); the list edits add up, the\n"
    "flags' first. A field of `AmpSessionOptions` replaces its variable (named in the table), and\n"
    "a session opened with `ignore_env` reads none of them.\n"
    "\n"
    "| variable | takes | read by | meaning |\n"
    "|---|---|---|---|\n";

/* Writes s with '|' escaped, for a cell of a markdown table. */
static void cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

static const struct {
    unsigned door;
    const char *md, *word; /* docs/env.md's words; --rows's */
} DOORS[] = {
    {AMP_DOOR_SESSION, "sessions", "session"},
    {AMP_DOOR_AMP, "`AMP_AUTO` sessions", "amp"},
    {AMP_DOOR_CONVERT, "the conversion", "convert"},
    {AMP_DOOR_COMMAND, "every command", "command"},
    {AMP_DOOR_EXPORT, "export", "export"},
};
enum { N_DOORS = sizeof DOORS / sizeof *DOORS };

static void env_row(FILE *f, const AmpOption *d) {
    fprintf(f, "| `%s` | ", d->env);
    cell(f, d->expect);
    fprintf(f, " (e.g. `%s`) | ", d->example);
    bool first = true;
    for (size_t i = 0; i < N_DOORS; i++)
        if (d->doors & DOORS[i].door) fprintf(f, "%s%s", first ? "" : ", ", DOORS[i].md), first = false;
    if (d->name) fprintf(f, amp_option_adds_up(d) ? " (after `--%s`: both count)" : " (`--%s` wins)", d->name);
    fputs(" | ", f);
    cell(f, d->doc);
    fputs(" |\n", f);
}

static void render_env(FILE *f) {
    fputs(ENV_HEAD, f);
    for (size_t i = 0; amp_option_at(i); i++)
        if (amp_option_at(i)->env) env_row(f, amp_option_at(i));
}

/* ---- cli.md's generated parts --------------------------------------------------------- */

static void render_usage(FILE *f) {
    fputs("```\n", f);
    ampc_print_usage(f);
    fputs("```\n", f);
}

static void render_options(FILE *f) {
    fputs("| option | commands | meaning |\n|---|---|---|\n", f);
    for (int val = OPT__FIRST + 1; val < OPT__END; val++) {
        const OptRow *r = ampc_row_by_val(val);
        char cmds[256];
        ampc_option_command_names(val, cmds, sizeof cmds);
        fputs("| ", f);
        if (r->short_name) fprintf(f, "`-%c`, ", r->short_name);
        fprintf(f, "`--%s%s%s` | %s | ", r->name, r->has_arg ? " " : "", r->meta, cmds);
        cell(f, r->help);
        const AmpOption *d = amp_option_find(r->name);
        if (d && d->env) fprintf(f, " (variable: [`%s`](env.md))", d->env);
        fputs(" |\n", f);
    }
}

static const struct {
    const char *name;
    void (*render)(FILE *f);
} REGIONS[] = {{"usage", render_usage}, {"options", render_options}};

/* ---- files ------------------------------------------------------------------------------ */

/* cli.md as the tables give it: `have` with each generated part rendered anew; NULL (with
 * a message) when a part's markers are missing. */
static char *render_cli(const char *have, const char *path) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) return NULL;
    const char *p = have;
    for (size_t i = 0; i < sizeof REGIONS / sizeof *REGIONS; i++) {
        char begin[64], end[64];
        snprintf(begin, sizeof begin, "<!-- generated: %s -->\n", REGIONS[i].name);
        snprintf(end, sizeof end, "<!-- end generated: %s -->\n", REGIONS[i].name);
        const char *b = strstr(p, begin), *e = b ? strstr(b, end) : NULL;
        if (!e) {
            fprintf(stderr, "gen_cli_md: %s lacks '%.*s' or its end, in this order\n", path, (int)strlen(begin) - 1,
                    begin);
            fclose(f);
            free(out);
            return NULL;
        }
        fwrite(p, 1, (size_t)(b - p) + strlen(begin), f);
        REGIONS[i].render(f);
        p = e;
    }
    fputs(p, f);
    fclose(f);
    return out;
}

static char *render_whole(void (*render)(FILE *f)) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) return NULL;
    render(f);
    fclose(f);
    return out;
}

static int write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    int bad = !f || fputs(s, f) < 0;
    if ((f && fclose(f) != 0) || bad) {
        fprintf(stderr, "gen_cli_md: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* Each variable's row for the test: VAR, doors, a value taken, one refused, --flag or -. */
static void rows(void) {
    for (size_t i = 0; amp_option_at(i); i++) {
        const AmpOption *d = amp_option_at(i);
        if (!d->env) continue;
        printf("%s\t", d->env);
        bool first = true;
        for (size_t k = 0; k < N_DOORS; k++)
            if (d->doors & DOORS[k].door) printf("%s%s", first ? "" : ",", DOORS[k].word), first = false;
        printf("\t%s\t%s\t%s%s\n", d->example, d->refused, d->name ? "--" : "-", d->name ? d->name : "");
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--rows") == 0) {
        rows();
        return fflush(stdout) != 0;
    }
    int checking = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (argc != 2 + checking) {
        fprintf(stderr, "usage: gen_cli_md [--check] DOCS | gen_cli_md --rows\n");
        return 2;
    }
    const char *dir = argv[1 + checking];
    char env_path[4096], cli_path[4096];
    snprintf(env_path, sizeof env_path, "%s/env.md", dir);
    snprintf(cli_path, sizeof cli_path, "%s/cli.md", dir);
    char *cli_have = gen_md_read(cli_path), *env_have = gen_md_read(env_path);
    if (!cli_have) {
        fprintf(stderr, "gen_cli_md: cannot read %s\n", cli_path);
        free(env_have);
        return 1;
    }
    char *cli = render_cli(cli_have, cli_path), *env = render_whole(render_env);
    int rc = !cli || !env;
    if (!rc && checking) {
        rc = gen_md_check(cli_path, cli_have, cli, "the option tables", "cli_md");
        rc |= gen_md_check(env_path, env_have ? env_have : "", env, "passes/options.c", "cli_md");
    } else if (!rc) {
        rc = write_file(cli_path, cli) | write_file(env_path, env);
    }
    free(cli), free(env), free(cli_have), free(env_have);
    return rc;
}
