/* The conversion's phases: --time's timer and the verification beside the save
 * (phases.h). */
#include "tools/phases.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void clocks(double t[2]) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t[0] = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    t[1] = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ampc_phase_start(PhaseTimer *t, bool on) {
    memset(t, 0, sizeof *t);
    t->on = on;
    if (on) {
        clocks(t->start);
        t->last[0] = t->start[0], t->last[1] = t->start[1];
    }
}

static void print_line(const char *label, const double ms[2]) {
    fprintf(stderr, "ampc: time: %-28s %10.2f ms  (cpu %10.2f ms)\n", label, ms[0], ms[1]);
}

void ampc_phase_flush(PhaseTimer *t) {
    for (int i = 0; i < t->n_lines; i++) print_line(t->lines[i].label, t->lines[i].ms);
    t->n_lines = 0;
}

void ampc_phase_line(PhaseTimer *t, const char *what, const char *name, const double ms[2]) {
    if (!t->on) return;
    if (t->n_lines == AMPC_PHASE_LINES) ampc_phase_flush(t); /* a long pipeline */
    PhaseLine *l = &t->lines[t->n_lines++];
    snprintf(l->label, sizeof l->label, "%s%s%s", what, name && *name ? " " : "", name ? name : "");
    l->ms[0] = ms[0], l->ms[1] = ms[1];
}

void ampc_phase_done(PhaseTimer *t, const char *what, const char *name) {
    if (!t->on) return;
    double now[2], ms[2];
    clocks(now);
    for (int i = 0; i < 2; i++) {
        ms[i] = (now[i] - t->last[i]) * 1e3;
        if (!what) t->other[i] += ms[i];
        t->last[i] = now[i];
    }
    if (what) ampc_phase_line(t, what, name, ms);
}

void ampc_phase_total(PhaseTimer *t) {
    if (!t->on) return;
    double now[2], ms[2];
    clocks(now);
    for (int i = 0; i < 2; i++) ms[i] = (now[i] - t->start[i]) * 1e3;
    ampc_phase_flush(t);
    print_line("other", t->other);
    print_line("total", ms);
}

static void pass_timed(void *ctx, const char *name) {
    ampc_phase_done(ctx, "pass", name);
}

AmpCode ampc_run_timed(AmpModel *m, const char *list, const AmpPipelineOptions *pl, PhaseTimer *t,
                       AmpStatus *st) {
    AmpPipelineOptions o = *pl;
    if (t->on) {
        o.after_pass = pass_timed;
        o.after_pass_ctx = t;
    }
    return amp_run_pipeline(m, list, &o, st);
}

/* ---- the verification beside the save ------------------------------------------ */

static void *verify_job(void *arg) {
    VerifyJob *j = arg;
    double t0[2], t1[2];
    clocks(t0);
    j->code = amp_verify_model_counted(j->m, &j->n_nodes, &j->st);
    clocks(t1);
    for (int i = 0; i < 2; i++) j->ms[i] = (t1[i] - t0[i]) * 1e3;
    return NULL;
}

bool ampc_verify_start(VerifyJob *j, AmpModel *m) {
    memset(j, 0, sizeof *j);
    j->m = m;
    j->started = pthread_create(&j->thread, NULL, verify_job, j) == 0;
    return j->started;
}

AmpCode ampc_verify_join(VerifyJob *j) {
    if (j->started && !j->joined) {
        pthread_join(j->thread, NULL);
        j->joined = true;
    }
    return j->code;
}

bool ampc_verify_commit(void *job, AmpStatus *st) {
    VerifyJob *j = job;
    if (ampc_verify_join(j) == AMP_OK) return true;
    if (st) *st = j->st;
    return false;
}
