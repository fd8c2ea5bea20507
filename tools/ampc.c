/* ampc, the command: `ampc MODEL -o OUT` loads an ONNX model, runs the pass pipeline,
 * verifies and saves it atomically; `ampc verify MODEL` checks a model and prints a summary;
 * `ampc run MODEL` runs it and `ampc bench MODEL` times it (tools/run.c). Errors are one
 * line on stderr ("ampc: ..."); the exit code is the AmpCode (status.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ampc/ampc.h"
#include "backend/backend.h"
#include "tools/cli_amp.h"
#include "tools/cli_options.h"
#include "tools/cli_usage.h"
#include "tools/dot.h"
#include "ir/front.h"
#include "ir/ir.h"
#include "ir/signals.h"
#include "passes/passes.h"
#include "runtime/conversion.h"
#include "tools/phases.h"
#include "tools/report.h"
#include "tools/cli_calib.h"
#include "tools/cli_export.h"
#include "tools/cli_grad.h"
#include "tools/cli_say.h"
#include "tools/run.h"



/* ---- messages (ampc_say and ampc_usage_error: tools/cli_say.c) ------------------- */

static int exit_code(AmpCode c) {
    return (c >= AMP_OK && c <= AMP_ERR_INTERNAL) ? (int)c : (int)AMP_ERR_INTERNAL;
}

/* Reports a failed library call. The library's message normally names the file already;
 * when it does not, `file` is put in front so the user always knows which one. */
static int fail_status(const AmpStatus *st, AmpCode code, const char *file) {
    const char *msg = st->msg[0] ? st->msg : amp_code_name(code);
    if (file && !strstr(msg, file))
        ampc_say("%s: %s", file, msg);
    else
        ampc_say("%s", msg);
    return exit_code(code);
}

/* ---- pass list ----------------------------------------------------------------- */

/* Checks LIST before anything is loaded, with the library's parser and check (the ones
 * amp_run_pipeline uses): every name must be a known pass, and `dump_after`, when given,
 * one of them. */
static int check_pass_list(const char *list, const char *dump_after) {
    const AmpPass *passes[256];
    size_t n = 0;
    AmpStatus st = {AMP_OK, ""};
    if (amp_pipeline_parse(list, passes, sizeof passes / sizeof *passes, &n, &st))
        return ampc_usage_error("--passes: %s", st.msg);
    if (amp_pipeline_check_dump(passes, n, dump_after, &st)) return ampc_usage_error("%s", st.msg);
    return AMP_OK;
}

/* ---- model summary --------------------------------------------------------------- */

typedef struct Summary {
    size_t graphs, nodes, values, initializers;
    uint64_t init_bytes;
} Summary;

static AmpCode count_graph(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    Summary *s = ctx;
    s->graphs++;
    s->nodes += g->n_nodes;
    for (size_t i = 0; i < g->n_values; i++)
        if (g->values[i] && g->values[i]->graph == g) s->values++; /* defined here */
    for (size_t i = 0; i < g->n_initializers; i++) {
        const AmpTensor *t = g->initializers[i];
        size_t bytes = 0;
        s->initializers++;
        if (t->dtype == AMP_DT_STRING) {
            for (size_t j = 0; j < t->n_string; j++) bytes += t->string_data[j].len;
        } else if (!amp_tensor_expected_bytes(t->dtype, t->nelem, &bytes)) {
            bytes = 0;
        }
        s->init_bytes += bytes;
    }
    return AMP_OK;
}

static AmpCode count_nodes(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    *(size_t *)ctx += g->n_nodes;
    return AMP_OK;
}

/* The nodes of every graph (what the success message reports: cheaper than summarize). */
static size_t node_count(AmpModel *m) {
    size_t n = 0;
    amp_model_walk(m, count_nodes, &n, NULL);
    return n;
}

static Summary summarize(AmpModel *m) {
    Summary s = {0, 0, 0, 0, 0};
    AmpStatus st = {AMP_OK, ""};
    amp_model_walk(m, count_graph, &s, &st);
    return s;
}

static void print_opsets(FILE *f, const AmpModel *m) {
    if (m->n_opsets == 0) fprintf(f, "none");
    for (size_t i = 0; i < m->n_opsets; i++) {
        const AmpOpset *o = &m->opsets[i];
        const char *d = (o->domain && o->domain[0]) ? o->domain : "ai.onnx";
        if (o->has_version)
            fprintf(f, "%s%s %" PRId64, i ? ", " : "", d, o->version);
        else
            fprintf(f, "%s%s ?", i ? ", " : "", d);
    }
}

/* ---- commands ------------------------------------------------------------------ */

static int finish_stdout(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        ampc_say("writing to stdout failed: %s", strerror(errno));
        return AMP_ERR_INTERNAL;
    }
    return AMP_OK;
}

/* ---- standard input and output ------------------------------------------------ */

/* MODEL "-" reads standard input: a usage error when that is a terminal (nobody types a
 * model in), else 0. */
static int check_stdin_model(const char *model) {
    if (strcmp(model, "-") == 0 && isatty(STDIN_FILENO))
        return ampc_usage_error("MODEL '-' reads standard input, which is a terminal: pipe or redirect a model into it");
    return 0;
}

/* Whether `st` is one of Linux's memory devices (major 1: /dev/null, /dev/zero,
 * /dev/full), which keep nothing: any number of outputs may go there at once. Told from
 * the device number, not by opening it (opening some devices has effects). */
static bool discarding_device(const struct stat *st) {
    return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1;
}

/* Whether two output paths name one file ("-" is standard output, and so is any path to
 * the file it is). */
static bool same_output(const char *x, const char *y) {
    struct stat a, b;
    bool ax = strcmp(x, "-") == 0, by = strcmp(y, "-") == 0;
    if (ax && by) return true;
    if (ax ? fstat(STDOUT_FILENO, &a) != 0 : stat(x, &a) != 0) return !ax && !by && strcmp(x, y) == 0;
    if (by ? fstat(STDOUT_FILENO, &b) != 0 : stat(y, &b) != 0) return false;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino && !discarding_device(&b);
}

/* ---- kernel coverage (verify) ------------------------------------------------------ */

/* Op types with their node counts, most nodes first once sorted. */
typedef struct OpCounts {
    const char *ops[128];
    size_t count[128];
    int n;
} OpCounts;

static void count_op(OpCounts *c, const AmpNode *n) {
    const char *op = n->op_type ? n->op_type : "?";
    int j = 0;
    while (j < c->n && strcmp(c->ops[j], op) != 0) j++;
    if (j == c->n && c->n < 128) c->ops[j] = op, c->count[c->n++] = 0;
    if (j < c->n) c->count[j]++;
}

static void print_counts(OpCounts *c) {
    for (int i = 1; i < c->n; i++) /* stable insertion sort, most nodes first */
        for (int j = i; j > 0 && c->count[j] > c->count[j - 1]; j--) {
            const char *o = c->ops[j];
            size_t k = c->count[j];
            c->ops[j] = c->ops[j - 1], c->count[j] = c->count[j - 1];
            c->ops[j - 1] = o, c->count[j - 1] = k;
        }
    for (int j = 0; j < c->n; j++) printf("%s %s x%zu", j ? "," : "", c->ops[j], c->count[j]);
}

/* Where a session on a device backend would run each node (amp_backend_place: the
 * executor's own predicates), and which nodes no backend has a kernel for. */
typedef struct Coverage {
    const AmpModel *m;
    AmpBackendKind kind;
    size_t nodes, taken;
    OpCounts fallback, none;
} Coverage;

static AmpCode cover_graph(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    Coverage *c = ctx;
    for (AmpNode *n = g->first; n; n = n->next) {
        /* If / Loop / Scan are the executor's own (their bodies are walked as graphs). */
        if (n->op == AMP_OP_If || n->op == AMP_OP_Loop || n->op == AMP_OP_Scan) continue;
        c->nodes++;
        switch (amp_backend_place(c->kind, c->m, n)) {
        case AMP_PLACE_DEVICE: c->taken++; break;
        case AMP_PLACE_FALLBACK: count_op(&c->fallback, n); break;
        case AMP_PLACE_NONE: count_op(&c->none, n); break;
        }
    }
    return AMP_OK;
}

/* Per device kind (backend.h's kinds: CUDA), "cuda: T of N nodes have kernels; the CPU
 * fallback would run: Op xK, ...; no backend has a kernel for: Op xK (ampc run fails)"
 * (most nodes first), from the backends' supports checks alone (no device needed). A
 * build without the device: "cuda: (CUDA not built)", then, only when some node has no
 * CPU kernel either, "cpu: no kernel for: Op xK (ampc run fails)". */
static void print_device_coverage(AmpModel *m, const AmpBackendKindInfo *dev) {
    Coverage c = {.m = m, .kind = dev->kind};
    amp_model_walk(m, cover_graph, &c, NULL);
    if (!amp_backend_built(dev->kind)) {
        printf("%s: (%s not built)\n", dev->name, dev->title);
        if (c.none.n) {
            printf("cpu: no kernel for:");
            print_counts(&c.none);
            printf(" (ampc run fails)\n");
        }
        return;
    }
    printf("%s: %zu of %zu nodes have kernels", dev->name, c.taken, c.nodes);
    if (c.fallback.n) {
        printf("; the CPU fallback would run:");
        print_counts(&c.fallback);
    }
    if (c.none.n) {
        printf("; no backend has a kernel for:");
        print_counts(&c.none);
        printf(" (ampc run fails)");
    }
    printf("\n");
}

static void print_coverage(AmpModel *m) {
    size_t n_kinds = 0;
    const AmpBackendKindInfo *kinds = amp_backend_kinds(&n_kinds);
    for (size_t i = 0; i < n_kinds; i++)
        if (kinds[i].device) print_device_coverage(m, &kinds[i]);
}

/* ampc verify MODEL */
static int cmd_verify(int argc, char **argv) {
    const char *path = NULL;
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            ampc_print_command_help(stdout, AMPC_VERSION_STRING, CMD_VERIFY);
            return finish_stdout();
        }
        if (!dashdash && strcmp(a, "--") == 0) {
            dashdash = true;
            continue;
        }
        if (!dashdash && a[0] == '-' && a[1] != '\0')
            return ampc_usage_error("verify: unknown option '%s'", a);
        if (path) return ampc_usage_error("verify: one MODEL only, got '%s' too", a);
        path = a;
    }
    if (!path) return ampc_usage_error("verify: missing MODEL");
    int in_rc = ampc_command_env(); /* AMP_THREADS: the load's threads */
    if (in_rc) return in_rc;
    in_rc = check_stdin_model(path);
    if (in_rc) return in_rc;
    const char *shown = amp_model_path_shown(path);

    AmpStatus st = {AMP_OK, ""};
    AmpModel *m = NULL;
    AmpLoadOptions lo = {.skip_verify = false};
    AmpCode c = amp_model_load_file(path, &lo, &m, &st);
    if (c != AMP_OK) return fail_status(&st, c, shown);
    c = amp_verify_model(m, &st);
    if (c == AMP_OK) c = amp_infer_model(m, &st);
    if (c != AMP_OK) {
        int rc = fail_status(&st, c, shown);
        amp_model_free(m);
        return rc;
    }
    Summary s = summarize(m);
    printf("%s: ok: %zu nodes, %zu values, %zu initializers (%" PRIu64
           " bytes), %zu graphs, opsets ",
           shown, s.nodes, s.values, s.initializers, s.init_bytes, s.graphs);
    print_opsets(stdout, m);
    printf("\n");
    const AmpGraph *dup_g = NULL;
    const char *dup = NULL;
    if (amp_model_duplicate_node_name(m, &dup_g, &dup, &st) == AMP_OK && dup)
        printf("warning: node name '%s' is used by more than one node of graph '%s': onnxruntime refuses such a "
               "file (ampc's conversions give the later ones names of their own)\n",
               dup, dup_g->name ? dup_g->name : "");
    /* ONNX's Gradient nodes: expanded here as `ampc run` and the conversion expand them
     * (passes/gradient.c), so that the coverage below is of what would run. One that
     * cannot be expanded stays, and is reported as having no kernel. */
    if (amp_model_has_gradient(m)) {
        size_t n_grad = 0, n_made = 0;
        AmpStatus gst = {AMP_OK, ""};
        if (amp_expand_gradients(m, &n_grad, &n_made, &gst) == AMP_OK) {
            printf("gradient: %zu Gradient node%s expanded into %zu backward nodes (as ampc run and the conversion "
                   "expand them)\n", n_grad, n_grad == 1 ? "" : "s", n_made);
        } else {
            printf("%s (not expanded: ampc run fails on it)\n", gst.msg);
            amp_model_free(m); /* half expanded: the file's own graph again */
            m = NULL;
            if (amp_model_load_file(path, &lo, &m, &st) == AMP_OK) {
                AmpStatus ignored = {AMP_OK, ""};
                amp_infer_model(m, &ignored);
            }
        }
    }
    if (m) print_coverage(m);
    amp_model_free(m);
    return finish_stdout();
}

typedef struct ConvertArgs {
    const char *model, *out, *dump_after, *dump_dot;
    const char *model_shown; /* what messages call MODEL ("standard input" for "-") */
    bool print, verify, quiet, report, time;
    const RunArgs *ort; /* --optimizer, --checkpoint, --lr */
    AmpDotOptions dot;
} ConvertArgs;

/* --report on stdout, then --dump-dot FILE (tools/report.c, tools/dot.c). */
static int inspect(const ConvertArgs *a, AmpModel *m) {
    AmpStatus st = {AMP_OK, ""};
    if (a->report) {
        AmpReport r;
        AmpCode c = amp_report_model(m, &r, &st);
        if (c == AMP_OK) amp_report_print(stdout, &r);
        amp_report_free(&r);
        if (c != AMP_OK) return fail_status(&st, c, a->model_shown);
    }
    if (a->dump_dot) {
        AmpCode c = amp_dot_model_file(a->dump_dot, m, &a->dot, &st);
        if (c != AMP_OK) return fail_status(&st, c, amp_output_shown(a->dump_dot));
    }
    return AMP_OK;
}

/* The AMP options as given (a global: what it holds stays reachable until exit). */
static AmpcAmp amp_args;

/* A conversion's model is left to the process's exit, as clang's driver leaves its
 * compilations (-disable-free): the kernel takes the arena's mappings back in one sweep
 * as the process ends, and unmapping them one by one just before only lengthens the run
 * (0.2 ms of a 1k-node conversion, 0.5 ms of a 10k one). Held here, it stays reachable
 * for valgrind. AddressSanitizer's builds free it all the same: LeakSanitizer does not
 * look inside the arena's mappings, so what they point to would read as leaked, and its
 * check must stay clean to catch real leaks. Error paths free as usual. */
static AmpModel *volatile model_left_to_exit; /* volatile: a write-only static is otherwise dropped */

static void leave_to_exit(AmpModel *m) {
#if defined(__SANITIZE_ADDRESS__)
    amp_model_free(m);
#else
    model_left_to_exit = m;
#endif
}

/* ampc MODEL [-o OUT] ...: load, pipeline, verify, print, save. */
static int cmd_convert(const ConvertArgs *a) {
    char fp32_list[512]; /* the phases the C API's conversion runs too: runtime/conversion.h */
    const char *list = amp_convert_pipeline(&amp_args.o, amp_args.o.passes, fp32_list, sizeof fp32_list);

    PhaseTimer tm;
    ampc_phase_start(&tm, a->time);
    AmpStatus st = {AMP_OK, ""};
    AmpModel *m = NULL;
    /* The loader's checks, then the verifier on the input (timed apart). */
    AmpCode c = amp_convert_load(a->model, NULL, 0, NULL, &m, &st);
    if (c != AMP_OK) return fail_status(&st, c, a->model_shown);
    ampc_phase_done(&tm, "load", "");
    size_t nodes_before = 0, nodes_after = 0; /* for the summary line (the verifier counts) */
    c = amp_verify_model_counted(m, &nodes_before, &st);
    if (c != AMP_OK) {
        amp_model_free(m);
        ampc_phase_flush(&tm);
        return fail_status(&st, c, a->model_shown);
    }
    ampc_phase_done(&tm, "verify", "input");
    if (a->ort->ort_optimizer) { /* onnxruntime-training's artifacts as one training model */
        char line[512];
        c = amp_ort_import_files(m, a->ort->ort_optimizer, a->ort->ort_checkpoint, a->ort->lr, line, sizeof line, &st);
        if (c != AMP_OK) {
            amp_model_free(m);
            ampc_phase_flush(&tm);
            return fail_status(&st, c, a->model_shown);
        }
        if (!a->quiet) ampc_say("%s: %s", a->model_shown, line);
        ampc_phase_done(&tm, "ort import", "");
    }
    int arc = ampc_amp_check_explain(&amp_args, m, a->model_shown, list);
    if (arc) {
        amp_model_free(m);
        ampc_phase_flush(&tm);
        return arc;
    }
    ampc_phase_done(&tm, NULL, NULL);

    AmpPassOptions popt = amp_args.o.po; /* the amp pass's options (tools/cli_amp.c) */
    AmpPipelineOptions pl = {.verify_each = false,
                             .dump_after = a->dump_after,
                             .dump_to = stdout,
                             .pass = &popt};
    c = ampc_run_timed(m, list, &pl, &tm, &st);
    VerifyJob vj = {.m = m, .st = {AMP_OK, ""}};
    /* A second thread only where AMP_THREADS allows one. */
    if (c == AMP_OK && a->verify && a->out && !a->print && !a->report && !a->dump_dot &&
        m->graph->n_nodes >= AMPC_VERIFY_BESIDE_MIN_NODES && amp_threads() >= 2)
        ampc_verify_start(&vj, m);
    if (c == AMP_OK && a->verify && !vj.started) {
        c = amp_verify_model_counted(m, &nodes_after, &st);
        ampc_phase_done(&tm, "verify", "output");
    }
    if (c != AMP_OK) {
        ampc_phase_flush(&tm);
        int rc = fail_status(&st, c, a->model_shown);
        amp_model_free(m);
        return rc; /* nothing was written */
    }
    if (a->print) amp_print_model(stdout, m);

    int rc = inspect(a, m);
    if (rc == AMP_OK) rc = finish_stdout();
    ampc_phase_done(&tm, NULL, NULL);
    if (rc == AMP_OK && a->out) {
        AmpSaveOptions so = amp_convert_save_options((AmpExternalMode)amp_args.o.external, !amp_args.o.no_value_info);
        so.commit = vj.started ? ampc_verify_commit : NULL;
        so.commit_ctx = &vj;
        c = amp_model_save_file(m, a->out, &so, &st);
        /* A failed verification is the error to report, whatever the save did. */
        bool unverified = ampc_verify_join(&vj) != AMP_OK;
        if (unverified) c = vj.code, st = vj.st;
        ampc_phase_done(&tm, "save", "");
        if (vj.started) ampc_phase_line(&tm, "verify", "output (beside save)", vj.ms);
        if (c != AMP_OK) {
            rc = fail_status(&st, c, unverified ? a->model_shown : amp_output_shown(a->out));
        } else if (!a->quiet) {
            if (vj.started) nodes_after = vj.n_nodes;
            if (!a->verify) nodes_after = node_count(m);
            ampc_say("wrote %s: %zu nodes (%zu before), passes: %s%s%s", amp_output_shown(a->out), nodes_after,
                nodes_before, list, amp_args.summary[0] ? "; " : "", amp_args.summary);
        }
    }
    ampc_verify_join(&vj); /* when no save was tried (stdout failed) */
    leave_to_exit(m);
    ampc_phase_total(&tm);
    return rc;
}

/* ---- main ---------------------------------------------------------------------- */

/* Everything the command line says, per command. */
typedef struct Cli {
    unsigned cmd; /* CMD_CONVERT, CMD_RUN, ... */
    ConvertArgs a;
    RunArgs ra;
    GradArgs ga;
    ExportArgs ea;
    CalibArgs ca;
    bool help, version;
} Cli;

/* The command named by argv[1] (CMD_CONVERT when none is). */
static unsigned command_of(int argc, char **argv) {
    unsigned cmd = argc >= 2 ? ampc_command_by_name(argv[1]) : 0;
    return cmd ? cmd : CMD_CONVERT;
}

/* Whether argv[1], not a command, reads as a mistyped one rather than a MODEL: a bare
 * word (letters and '-', no '.' or '/') that names no file, followed by more words. */
static bool unknown_command(int argc, char **argv) {
    if (argc < 3 || argv[1][0] == '-' || argv[1][0] == '\0' || ampc_command_by_name(argv[1])) return false;
    for (const char *p = argv[1]; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '-')) return false;
    struct stat sb;
    return stat(argv[1], &sb) != 0;
}

/* The usage error for what getopt_long returned as '?' or ':'. */
static int getopt_error(int ch, char **argv) {
    const OptRow *r = optopt ? ampc_row_by_val(optopt) : NULL;
    if (ch == '?') {
        if (r) return ampc_usage_error("option '--%s' takes no argument", r->name);
        if (optopt && optopt < OPT__FIRST) return ampc_usage_error("unknown option '-%c'", optopt);
        return ampc_unknown_long(argv[optind - 1]);
    }
    if (r && r->short_name == optopt)
        return ampc_usage_error("option '-%c' needs an argument (%s)", optopt, r->meta);
    if (r) return ampc_usage_error("option '--%s' needs an argument (%s)", r->name, r->meta);
    return ampc_usage_error("option '%s' needs an argument", argv[optind - 1]);
}

/* One option of the convert command (row r, value val). */
static int convert_option(Cli *c, const OptRow *r, int val, const char *arg) {
    ConvertArgs *a = &c->a;
    switch (val) {
    case OPT_OUTPUT: a->out = arg; return 0;
    case OPT_DUMP_AFTER: a->dump_after = arg; return 0;
    case OPT_PRINT: a->print = true; return 0;
    case OPT_REPORT: a->report = true; return 0;
    case OPT_DUMP_DOT: a->dump_dot = arg; return 0;
    case OPT_DOT_COLLAPSE: a->dot.collapse = true; return 0;
    case OPT_DOT_INITIALIZERS: a->dot.initializers = true; return 0;
    case OPT_NO_VERIFY: a->verify = false; return 0;
    case OPT_QUIET: a->quiet = true; return 0;
    case OPT_TIME: a->time = true; return 0;
    case OPT_OPTIMIZER:
    case OPT_CHECKPOINT:
    case OPT_LR: return ampc_parse_run_value(val, arg, &c->ra);
    default: {
        /* The AMP options (--precision, --allow, ...: tools/cli_amp.c, passes/options.c). */
        int rc = r ? ampc_amp_option(&amp_args, r->name, arg ? arg : "") : -1;
        return rc < 0 ? ampc_usage_error("internal: unhandled option %d", val) : rc;
    }
    }
}

/* Reads every option into c; 0 or the exit code of a usage error (printed). */
static int parse_options(Cli *c, int argc, char **argv) {
    /* ":" first: a missing argument returns ':' so the message is ours, not getopt's. */
    char shorts[2 * AMPC_N_OPTS + 2];
    ampc_short_opts(shorts);
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, shorts, ampc_long_opts, NULL)) != -1) {
        if (ch == '?' || ch == ':') return getopt_error(ch, argv);
        const OptRow *r = ampc_row_by_val(ch);
        int val = r ? r->val : 0, rc = 0;
        if (r && !(ampc_option_commands(val) & c->cmd)) return ampc_wrong_command(r, c->cmd);
        if (val == OPT_HELP) c->help = true;
        else if (val == OPT_VERSION) c->version = true;
        else if (c->cmd == CMD_GRAD) rc = ampc_parse_grad_value(val, optarg, &c->ga);
        else if (c->cmd == CMD_EXPORT) rc = ampc_parse_export_value(val, optarg, &c->ea, &c->ra);
        else if (c->cmd == CMD_CALIBRATE || c->cmd == CMD_COMPARE) rc = ampc_parse_calib_value(val, optarg, &c->ca);
        else if (c->cmd != CMD_CONVERT) rc = ampc_parse_run_value(val, optarg, &c->ra);
        else rc = convert_option(c, r, val, optarg);
        if (rc) return rc;
    }
    return 0;
}

/* The convert command's checks of its options as a whole, then the run. */
static int convert(ConvertArgs *a, const RunArgs *ra) {
    a->model_shown = amp_model_path_shown(a->model);
    if (a->out && a->out[0] == '\0') return ampc_usage_error("-o: OUT is an empty path");
    if (a->dump_dot && a->dump_dot[0] == '\0') return ampc_usage_error("--dump-dot: FILE is an empty path");
    if (!a->dump_dot && (a->dot.collapse || a->dot.initializers))
        return ampc_usage_error("--%s needs --dump-dot FILE", a->dot.collapse ? "dot-collapse" : "dot-initializers");
    amp_args.quiet = a->quiet;
    int arc = ampc_amp_finish(&amp_args);
    if (arc) return arc;
    if (!a->out && !a->print && !a->dump_after && !a->report && !a->dump_dot && !amp_args.n_explain)
        return ampc_usage_error("nothing to do: give -o OUT to write the converted model "
                           "(or --print / --dump-after PASS / --report / --dump-dot FILE / --explain "
                           "NODE to only look at it)");
    /* Standard output carries the text (--print, --report, --explain, --dump-after) or one
     * file, never two things: a model or a picture with text in it is neither. */
    const char *text = a->print ? "--print" : a->report ? "--report" : amp_args.n_explain ? "--explain"
                     : a->dump_after ? "--dump-after" : NULL;
    bool model_out = a->out && same_output(a->out, "-"), dot_out = a->dump_dot && same_output(a->dump_dot, "-");
    if (a->out && a->dump_dot && same_output(a->out, a->dump_dot))
        return ampc_usage_error("-o and --dump-dot name the same file ('%s')", a->out);
    if ((model_out || dot_out) && text)
        return ampc_usage_error("%s '%s' is standard output, where %s prints too: write it to a file",
                           model_out ? "-o" : "--dump-dot", model_out ? a->out : a->dump_dot, text);
    if (model_out && isatty(STDOUT_FILENO))
        return ampc_usage_error("-o '%s': standard output is a terminal: redirect it to a file or a pipe", a->out);

    const char *list = amp_args.o.passes ? amp_args.o.passes : amp_default_pipeline();
    int rc = check_pass_list(list ? list : "none", a->dump_after);
    if (rc != AMP_OK) return rc;
    a->ort = ra;
    return cmd_convert(a);
}

/* After the options: MODEL (and compare's AMP), the checks all commands share, then the
 * command. */
static int dispatch(Cli *c, int argc, char **argv) {
    unsigned cmd = c->cmd;
    const char *what = cmd == CMD_RUN ? "run: " : cmd == CMD_BENCH ? "bench: " : cmd == CMD_GRAD ? "grad: "
                     : cmd == CMD_CALIBRATE ? "calibrate: " : cmd == CMD_COMPARE ? "compare: "
                     : cmd == CMD_EXPORT ? "export: " : "";
    if (optind >= argc)
        return ampc_usage_error("%smissing %s", what, cmd == CMD_COMPARE ? "FP32" : cmd == CMD_EXPORT ? "TRAIN" : "MODEL");
    const char *model = argv[optind];
    if (cmd == CMD_COMPARE) {
        if (optind + 1 >= argc) return ampc_usage_error("compare: missing AMP, the converted model");
        if (optind + 2 < argc) return ampc_usage_error("compare: unexpected argument '%s'", argv[optind + 2]);
        if (c->ca.n_dirs > 1) return ampc_usage_error("compare: one --inputs DIR");
        c->ca.run.model = model;
        c->ca.amp = argv[optind + 1];
        return ampc_cmd_compare(&c->ca);
    }
    if (optind + 1 < argc) return ampc_usage_error("%sunexpected argument '%s'", what, argv[optind + 1]);
    if (model[0] == '\0') return ampc_usage_error("%sMODEL is an empty path", what);
    /* AMP_THREADS through its row of the options table: refused as sessions refuse it. */
    int env_rc = ampc_command_env();
    if (env_rc) return env_rc;
    int in_rc = check_stdin_model(model);
    if (in_rc) return in_rc;
    const RunArgs *ra = &c->ra;
    if (!ra->ort_optimizer && (ra->ort_checkpoint || ra->lr > 0))
        return ampc_usage_error("%s%s is for onnxruntime-training artifacts, with --optimizer", what,
                                ra->ort_checkpoint ? "--checkpoint" : "--lr");
    if (ra->ort_optimizer && !ra->ort_checkpoint)
        return ampc_usage_error("%s--optimizer needs --checkpoint FILE: the parameters' values", what);
    switch (cmd) {
    case CMD_CALIBRATE: c->ca.run.model = model; return ampc_cmd_calibrate(&c->ca);
    case CMD_GRAD: c->ga.model = model; return ampc_cmd_grad(&c->ga);
    case CMD_EXPORT: c->ea.model = model; return ampc_cmd_export(&c->ea, &c->ra);
    case CMD_RUN: c->ra.model = model; return ampc_cmd_run(&c->ra);
    case CMD_BENCH:
        c->ra.model = model;
        if (c->ra.plot && !c->ra.compare) return ampc_usage_error("--plot draws what --compare times: give both");
        if (c->ra.profile && c->ra.compare)
            return ampc_usage_error("--profile times one session: give it without --compare (with AMP_AUTO=1 for the AMP one)");
        return c->ra.compare ? ampc_cmd_bench_compare(&c->ra) : ampc_cmd_bench(&c->ra);
    default: c->a.model = model; return convert(&c->a, &c->ra);
    }
}

/* glibc hands every allocation over 128 KiB to mmap and every free heap top over 2x that
 * back to the kernel, so a run or training step that allocates and frees the same
 * megabytes each time (the outputs handed to the caller, a kernel's float32 copy of a
 * 16-bit input) faulted them in again, zeroed by the kernel, every time: a quarter of an
 * MLP training step on the CPU (measured with perf; docs/speed.md). ampc keeps freed
 * memory up to 1 GiB for reuse instead, as PyTorch's and onnxruntime's CPU allocators
 * keep theirs. The library leaves malloc alone: this is the program's choice. */
static void keep_freed_memory(void) {
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest: bigger blocks still map */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int main(int argc, char **argv) {
    /* The library's messages name options as this command's flags (ir/front.h). */
    amp_front_set(AMP_FRONT_CLI);
    /* A write past `ulimit -f` fails with EFBIG, reported and cleaned up like any failed
     * write, instead of killing ampc with its temporary files left behind. */
    signal(SIGXFSZ, SIG_IGN);
    keep_freed_memory();
    /* Interrupted (SIGINT, SIGTERM...), ampc removes the temporary files it was writing
     * before it dies of the signal; an input cut short under it ends it as an input error
     * (ir/signals.h). */
    amp_sig_install("ampc");
    if (argc >= 2 && ampc_command_by_name(argv[1])) ampc_usage_command(argv[1]);
    if (argc >= 2 && strcmp(argv[1], "verify") == 0) return cmd_verify(argc - 1, argv + 1);
    if (unknown_command(argc, argv))
        return ampc_usage_error("unknown command '%s' (the commands: %s; or MODEL, a file, to convert it)", argv[1],
                                ampc_command_names());
    Cli c = {.cmd = command_of(argc, argv),
              .a = {.verify = true},
              .ra = {.steps = 1, .backend = AMP_BACKEND_AUTO, .iters = 20, .warmup = 3},
              .ca = {.run = {.steps = 1, .backend = AMP_BACKEND_AUTO}}};
    if (c.cmd != CMD_CONVERT) argc--, argv++; /* parse "run ..." as if "run" were the program */
    int rc = parse_options(&c, argc, argv);
    if (rc) return rc;
    if (c.help || c.version) {
        if (c.help) ampc_print_command_help(stdout, AMPC_VERSION_STRING, c.cmd);
        else printf("ampc %s\n", AMPC_VERSION_STRING);
        return finish_stdout();
    }
    return dispatch(&c, argc, argv);
}
