/* The CLI's option table made into getopt's and --help's forms, and which command takes
 * each option (split from ampc.c: what the command line may hold, apart from what each
 * command does with it). */
#include <stdio.h>
#include <string.h>

#include "tools/cli_usage.h"
#include "passes/options.h"
#include "passes/passes.h"
#include "tools/run.h"
#include "tools/cli_say.h"

static const OptRow opt_rows[] = {
#define AMPC_ROW(id, name, sh, arg, meta, help) {OPT_##id, name, sh, arg, meta, help},
    AMPC_OPTIONS(AMPC_ROW)
#undef AMPC_ROW
};
#define N_OPTS (sizeof opt_rows / sizeof opt_rows[0])
_Static_assert(N_OPTS == AMPC_N_OPTS, "AMPC_N_OPTS counts the option table");

const struct option ampc_long_opts[] = {
#define AMPC_LONG(id, name, sh, arg, meta, help) \
    {name, (arg) ? required_argument : no_argument, NULL, OPT_##id},
    AMPC_OPTIONS(AMPC_LONG)
#undef AMPC_LONG
    {NULL, 0, NULL, 0}};

void ampc_short_opts(char *out) {
    size_t k = 0;
    out[k++] = ':';
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!opt_rows[i].short_name) continue;
        out[k++] = (char)opt_rows[i].short_name;
        if (opt_rows[i].has_arg) out[k++] = ':';
    }
    out[k] = '\0';
}

/* "  HEAD  text", the text word-wrapped at 80 columns in a column of its own. */
static void print_wrapped(FILE *f, const char *head, const char *text) {
    enum { COL = 28, WIDTH = 80 };
    int col = fprintf(f, "  %s", head);
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w == 0) break;
        if (col > COL && col + 1 + (int)w > WIDTH) {
            fputc('\n', f);
            col = 0;
        }
        if (col < COL) {
            col += fprintf(f, "%*s", COL - col, "");
        } else {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
    }
    fputc('\n', f);
}

/* The commands: the CMD_ bit, the name, the synopsis (as --help prints it, after "usage: "
 * or its indent) and, for a command's own --help, the name its messages give it. */
typedef struct CmdRow {
    unsigned cmd;
    const char *name, *synopsis, *called;
} CmdRow;

static const CmdRow cmd_rows[] = {
    {CMD_CONVERT, "", /* the conversion: no command word */
     "ampc MODEL -o OUT [options]   rewrite MODEL and save it as OUT\n"
     "       ampc MODEL --print [options]  rewrite MODEL and print the IR, save nothing\n"
     "       ampc MODEL --report | --dump-dot FILE [options]\n"
     "                                     rewrite MODEL, show where 16 bits went\n",
     "'ampc MODEL -o OUT'"},
    {CMD_VERIFY, "verify",
     "ampc verify MODEL             load, verify and type-check MODEL; print a summary\n"
     "                                     and the nodes CUDA has no kernel for\n",
     "'ampc verify MODEL'"},
    {CMD_RUN, "run",
     "ampc run MODEL [--steps N] [--inputs DIR] [--outputs DIR] [--backend B]\n"
     "                      [--seed S] [--dim NAME=VALUE] [--loss NAME] [--load-state FILE]\n"
     "                      [--save-state FILE] [--max-iterations N] [--timeout SECONDS]\n"
     "                      [--no-fallback] [--no-fuse] [--tf32] [--threads N]\n"
     "                      [--optimizer FILE --checkpoint FILE [--lr LR]]\n"
     "                                     run inference, or N training steps; print each\n"
     "                                     step's loss (or the outputs), step time, memory;\n"
     "                                     a loss-scaled model: the scale, skipped steps\n",
     "'ampc run MODEL'"},
    {CMD_GRAD, "grad",
     "ampc grad MODEL -o TRAIN [--loss cross-entropy|mse|NAME] [--loss-output NAME]\n"
     "                      [--labels NAME] [--optimizer sgd|momentum|adam] [--lr X]\n"
     "                      [--momentum MU] [--beta1 B1] [--beta2 B2] [--eps E]\n"
     "                      [--weight-decay WD] [--freeze GLOB] [--train-mode]\n"
     "                                     make a training graph from an FP32 inference\n"
     "                                     model: loss, backward in standard ONNX ops, the\n"
     "                                     optimizer's update bindings (docs/grad.md)\n",
     "'ampc grad MODEL'"},
    {CMD_EXPORT, "export",
     "ampc export TRAIN -o INFER [--load-state CKPT] [--precision fp32|fp16|bf16|auto]\n"
     "                      [--loss NAME] [--optimizer FILE --checkpoint FILE [--lr LR]]\n"
     "                                     write the inference model of a training model:\n"
     "                                     its forward only (no loss, backward, optimizer,\n"
     "                                     loss scaling, training_info), the checkpoint's\n"
     "                                     weights, converted by the amp pass on request\n",
     "'ampc export TRAIN'"},
    {CMD_BENCH, "bench",
     "ampc bench MODEL [--iters N] [--warmup W] [--train] [--compare [--plot FILE]]\n"
     "                      [--inputs DIR] [--backend B]\n"
     "                      [--seed S] [--dim NAME=VALUE] [--max-iterations N] [--timeout SECONDS]\n"
     "                      [--no-fallback] [--no-fuse] [--tf32] [--threads N]\n"
     "                                     time W+N inference runs (or training steps,\n"
     "                                     handing out the loss alone, as a trainer does);\n"
     "                                     print the median, min, max and peak memory\n",
     "'ampc bench MODEL'"},
    {CMD_CALIBRATE, "calibrate",
     "ampc calibrate MODEL -o STATS [--inputs DIR]... [--steps N] [--seed S]\n"
     "                      [--dim NAME=VALUE] [--loss NAME] [--loss-scale-init S] [--backend B]\n"
     "                                     run the FP32 graph (CUDA where present) and record each\n"
     "                                     value's range (training: gradients at the loss\n"
     "                                     scale too); convert with --calibration STATS\n",
     "'ampc calibrate MODEL'"},
    {CMD_COMPARE, "compare",
     "ampc compare FP32 AMP [--inputs DIR] [--top N] [--seed S] [--dim NAME=VALUE]\n"
     "                                     run both once on the same inputs; print the\n"
     "                                     outputs' error and the 16-bit nodes ranked by\n"
     "                                     their own (local) error, with --keep-fp32 lines\n",
     "'ampc compare FP32 AMP'"},
};
#define N_CMDS (sizeof cmd_rows / sizeof cmd_rows[0])

static const CmdRow *cmd_row(unsigned cmd) {
    for (size_t i = 0; i < N_CMDS; i++)
        if (cmd_rows[i].cmd == cmd) return &cmd_rows[i];
    return &cmd_rows[0];
}

unsigned ampc_command_by_name(const char *name) {
    for (size_t i = 1; name && i < N_CMDS; i++)
        if (strcmp(name, cmd_rows[i].name) == 0) return cmd_rows[i].cmd;
    return 0;
}

const char *ampc_command_names(void) { return "verify, run, grad, export, bench, calibrate, compare"; }

/* --help's last part, after the options and passes. */
static const char ABOUT[] =
    "\n"
    "The model is loaded and checked, the passes run in order, the result is verified\n"
    "(unless --no-verify), printed (--print), summed up (--report), drawn (--dump-dot)\n"
    "and written to OUT: to a temporary file renamed over OUT once complete (and\n"
    "synced first when OUT exists), so a failure writes nothing and leaves MODEL as\n"
    "it was. Messages go to stderr, the IR and the report to stdout. MODEL '-' reads\n"
    "standard input to its end (a pipe, say; such a model may hold no external data);\n"
    "other than that, MODEL is a regular file. The report and\n"
    "the picture read precisions from the model's dtypes, so they describe any\n"
    "model, converted by ampc or not.\n"
    "\n"
    "'ampc run' trains when the model has a training algorithm (ONNX training_info) or\n"
    "an output named like a loss; it reads AMP_AUTO=1 (with AMP_LOG_PATH and the\n"
    "variables named '(variable: VAR)' above, which take the values their option takes,\n"
    "AMP_ALLOWLIST_REMOVE and the other removals too) and then rewrites the model in\n"
    "mixed precision in memory before running it; without --backend it reads\n"
    "AMP_BACKEND (cpu, cuda, auto or sim). 'ampc MODEL -o OUT' reads the conversion's\n"
    "variables too, after its flags, which win. Every AMP_* variable, who reads it and\n"
    "what it takes: docs/env.md. 'ampc bench' does the same as 'ampc run' but runs\n"
    "inference unless --train is given, and prints only the median, min and max time\n"
    "of the N timed runs (the W warm-up runs are not counted) and the peak memory.\n"
    "Timings of a shared machine vary: compare ratios taken in one go.\n"
    "\n"
    "A load uses up to as many threads as the CPUs ampc may run on (at most 8): one\n"
    "faults the model's memory in and, from three on, the others help with the nodes\n"
    "of a main graph of 4096 nodes or more; a graph of 10000 nodes or more is verified\n"
    "on a second thread while it is saved. AMP_THREADS=N sets the most threads ampc\n"
    "may use (1: one thread, no helper). The result is the same whatever the number.\n"
    "AMP_THREADS (or --threads N on run and bench, which wins) is also the CPU\n"
    "backend's thread count: oneDNN's OpenMP threads and OpenBLAS's are set from it\n"
    "(unset: their default, the CPUs the process may use).\n"
    "\n"
    "exit codes:\n"
    "  0  ok\n"
    "  1  bad input: the model is malformed or fails verification\n"
    "  2  usage: bad options or arguments\n"
    "  3  unsupported: valid, but ampc does not implement it\n"
    "  4  internal: a bug in ampc, or the system failed (I/O, memory)\n";

static void print_option(FILE *f, const OptRow *o) {
    char head[64];
    if (o->short_name)
        snprintf(head, sizeof head, "-%c, --%s%s%s", o->short_name, o->name, o->has_arg ? " " : "", o->meta);
    else
        snprintf(head, sizeof head, "    --%s%s%s", o->name, o->has_arg ? " " : "", o->meta);
    /* The variable of the library's option table that stands for it (docs/env.md). */
    const AmpOption *d = amp_option_find(o->name);
    char help[1024];
    snprintf(help, sizeof help, "%s%s%s%s", o->help, d && d->env ? " (variable: " : "", d && d->env ? d->env : "",
             d && d->env ? ")" : "");
    print_wrapped(f, head, help);
}

void ampc_print_usage(FILE *f) {
    for (size_t i = 0; i < N_CMDS; i++) fprintf(f, "%s%s", i ? "       " : "usage: ", cmd_rows[i].synopsis);
    fprintf(f, "       ampc COMMAND --help               one command's usage and options\n"
               "       ampc --help | --version\n");
}

void ampc_option_command_names(int val, char *buf, size_t len) {
    unsigned ok = ampc_option_commands(val);
    size_t k = 0;
    buf[0] = '\0';
    if (ok == CMD_ALL) snprintf(buf, len, "all");
    for (size_t i = 0; i < N_CMDS && ok != CMD_ALL; i++) {
        if (!(ok & cmd_rows[i].cmd)) continue;
        int w = snprintf(buf + k, len - k, "%s%s", k ? ", " : "", cmd_rows[i].name[0] ? cmd_rows[i].name : "convert");
        if (w > 0 && (size_t)w < len - k) k += (size_t)w;
    }
}

void ampc_print_help(FILE *f, const char *version) {
    fprintf(f, "ampc %s: automatic mixed precision for ONNX models\n\n", version);
    ampc_print_usage(f);
    fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < N_OPTS; i++) print_option(f, &opt_rows[i]);
    const char *dflt = amp_default_pipeline();
    fprintf(f, "\npasses (default pipeline: %s):\n", (dflt && dflt[0]) ? dflt : "none");
    size_t np = amp_pass_count();
    if (np == 0) fprintf(f, "  (none yet)\n");
    for (size_t i = 0; i < np; i++) {
        const AmpPass *p = amp_pass_at(i);
        if (p) print_wrapped(f, p->name, p->help ? p->help : "");
    }
    fputs(ABOUT, f);
}

void ampc_print_command_help(FILE *f, const char *version, unsigned cmd) {
    if (cmd == CMD_CONVERT) {
        ampc_print_help(f, version);
        return;
    }
    const CmdRow *c = cmd_row(cmd);
    fprintf(f, "ampc %s\n\nusage: %s\noptions:\n", version, c->synopsis);
    for (size_t i = 0; i < N_OPTS; i++)
        if (opt_rows[i].val == OPT_HELP || (ampc_option_commands(opt_rows[i].val) & cmd)) print_option(f, &opt_rows[i]);
    if (ampc_option_commands(OPT_PRECISION) & cmd || cmd == CMD_RUN || cmd == CMD_BENCH)
        fprintf(f, "\nThe conversion's options and variables, the passes, the environment and the exit\n"
                   "codes: 'ampc --help' and docs/cli.md.\n");
    else
        fprintf(f, "\nEverything else (the environment, the exit codes): 'ampc --help' and docs/cli.md.\n");
}

const OptRow *ampc_row_by_val(int val) {
    for (size_t i = 0; i < N_OPTS; i++)
        if (opt_rows[i].val == val || (opt_rows[i].short_name && opt_rows[i].short_name == val))
            return &opt_rows[i];
    return NULL;
}

/* getopt_long takes unambiguous prefixes ("--pass"); an ambiguous one is named as such. */
int ampc_unknown_long(const char *arg) {
    const char *name = arg;
    while (*name == '-') name++;
    size_t len = strcspn(name, "=");
    char cands[256] = "";
    size_t k = 0, hits = 0;
    for (size_t i = 0; i < N_OPTS && len > 0; i++) {
        if (strncmp(opt_rows[i].name, name, len) != 0) continue;
        hits++;
        int w = snprintf(cands + k, sizeof cands - k, "%s--%s", k ? ", " : "", opt_rows[i].name);
        if (w > 0 && (size_t)w < sizeof cands - k) k += (size_t)w;
    }
    if (hits > 1) return ampc_usage_error("ambiguous option '%s' (could be %s)", arg, cands);
    return ampc_usage_error("unknown option '%s'", arg);
}

unsigned ampc_option_commands(int val) {
    switch (val) {
    case OPT_LOSS: return CMD_RUN | CMD_CONVERT | CMD_GRAD | CMD_CALIBRATE | CMD_EXPORT;
    case OPT_OUTPUT: return CMD_CONVERT | CMD_GRAD | CMD_CALIBRATE | CMD_EXPORT;
    case OPT_QUIET: return CMD_CONVERT | CMD_GRAD | CMD_EXPORT;
    case OPT_PRECISION: return CMD_CONVERT | CMD_EXPORT;
    case OPT_TOP: return CMD_COMPARE;
    case OPT_LOSS_SCALE_INIT: return CMD_CONVERT | CMD_CALIBRATE;
    case OPT_LOSS_OUTPUT:
    case OPT_CLASS_AXIS:
    case OPT_LABELS:
    case OPT_FREEZE:
    case OPT_MOMENTUM:
    case OPT_BETA1:
    case OPT_BETA2:
    case OPT_EPS:
    case OPT_WEIGHT_DECAY:
    case OPT_TRAIN_MODE: return CMD_GRAD;
    case OPT_STEPS: return CMD_RUN | CMD_CALIBRATE;
    case OPT_INPUTS:
    case OPT_SEED:
    case OPT_DIM: return CMD_RUN | CMD_BENCH | CMD_CALIBRATE | CMD_COMPARE;
    case OPT_LOAD_STATE: return CMD_RUN | CMD_EXPORT;
    case OPT_SAVE_STATE:
    case OPT_OUTPUTS: return CMD_RUN;
    case OPT_BACKEND: return CMD_RUN | CMD_BENCH | CMD_CALIBRATE;
    case OPT_INPUTS_PER_RANK: return CMD_RUN | CMD_BENCH;
    case OPT_MAX_ITERATIONS:
    case OPT_TIMEOUT:
    case OPT_NO_FALLBACK:
    case OPT_NO_FUSE:
    case OPT_TF32:
    case OPT_THREADS: return CMD_RUN | CMD_BENCH;
    case OPT_ITERS:
    case OPT_WARMUP:
    case OPT_TRAIN:
    case OPT_COMPARE:
    case OPT_PLOT:
    case OPT_PROFILE: return CMD_BENCH;
    case OPT_OPTIMIZER:
    case OPT_LR: return CMD_CONVERT | CMD_RUN | CMD_BENCH | CMD_GRAD | CMD_EXPORT;
    case OPT_CHECKPOINT: return CMD_CONVERT | CMD_RUN | CMD_BENCH | CMD_EXPORT;
    case OPT_HELP:
    case OPT_VERSION: return CMD_ALL;
    default: return CMD_CONVERT;
    }
}

/* "option '--steps' is only for 'ampc run MODEL'", or "... is not for 'ampc bench'". */
int ampc_wrong_command(const OptRow *r, unsigned cmd) {
    unsigned ok = ampc_option_commands(r->val);
    char list[512] = "";
    size_t n = 0, k = 0, total = 0;
    for (size_t i = 0; i < N_CMDS; i++) total += (ok & cmd_rows[i].cmd) != 0;
    for (size_t i = 0; i < N_CMDS; i++) {
        if (!(ok & cmd_rows[i].cmd)) continue;
        n++;
        int w = snprintf(list + k, sizeof list - k, "%s%s", n == 1 ? "" : n == total ? " and " : ", ", cmd_rows[i].called);
        if (w > 0 && (size_t)w < sizeof list - k) k += (size_t)w;
    }
    return ampc_usage_error("option '--%s' is not for %s: it is for %s", r->name, cmd_row(cmd)->called, list);
}
