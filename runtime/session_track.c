/* What a session's runs and training steps report (amp_session_stats' later fields): the
 * training loss and which output holds it (the rule `ampc run` prints it by), the loss scale,
 * the steps loss scaling skipped, the time of the steps and runs. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "ir/half.h"
#include "passes/options.h"
#include "passes/training.h"
#include "runtime/observe.h"
#include "runtime/session_impl.h"

double amp_view_value(const AmpTensorView *t, size_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case AMP_DT_FLOAT: return ((const float *)p)[i];
    case AMP_DT_DOUBLE: return ((const double *)p)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_INT64: return (double)((const int64_t *)p)[i];
    case AMP_DT_INT32: return ((const int32_t *)p)[i];
    case AMP_DT_INT16: return ((const int16_t *)p)[i];
    case AMP_DT_INT8: return ((const int8_t *)p)[i];
    case AMP_DT_UINT64: return (double)((const uint64_t *)p)[i];
    case AMP_DT_UINT32: return ((const uint32_t *)p)[i];
    case AMP_DT_UINT16: return ((const uint16_t *)p)[i];
    case AMP_DT_UINT8:
    case AMP_DT_BOOL: return ((const uint8_t *)p)[i];
    default: return 0;
    }
}

int amp_session_find_loss(const AmpSession *s, const char *name, AmpStatus *st) {
    AmpIoInfo info;
    int found = -1, n_found = 0;
    char names[512] = "";
    for (size_t i = 0; amp_session_output_info(s, AMP_MODE_TRAIN, i, &info); i++) {
        if (name) {
            if (strcmp(info.name, name) == 0) return (int)i;
            continue;
        }
        bool scalar = true; /* rank 0, all dims 1, or not known */
        for (int d = 0; d < info.rank && scalar; d++) scalar = info.dims[d] == 1;
        if (!strstr(info.name, "loss") || amp_is_loss_scale_name(info.name) || !scalar ||
            (info.dtype && !amp_dtype_is_float(info.dtype)))
            continue;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s'%s'", n_found ? ", " : "", info.name);
        found = (int)i;
        n_found++;
    }
    if (name) {
        amp_fail(st, AMP_ERR_USAGE, "%s: the model has no output of that name", AMP_OPT_SAY("loss", name));
        return -2;
    }
    if (n_found > 1) {
        amp_fail(st, AMP_ERR_USAGE, "several outputs could be the loss (%s): choose one with %s", names,
                 AMP_OPT_SAY("loss", "NAME"));
        return -2;
    }
    return found;
}

/* The index of output `name` among the training outputs, or -1. */
static int train_output(const AmpSession *s, const char *name) {
    for (size_t i = 0; i < s->io[AMP_MODE_TRAIN].n_out; i++)
        if (strcmp(s->io[AMP_MODE_TRAIN].out[i].name, name) == 0) return (int)i;
    return -1;
}

AmpCode amp_session_track_init(AmpSession *s, const char *loss, AmpStatus *st) {
    AmpStatus ignored = {0}; /* no loss, or several: the session still runs, reporting none */
    int l = amp_session_find_loss(s, loss, loss ? st : &ignored);
    if (l == -2 && loss) return st ? st->code : AMP_ERR_USAGE;
    s->tracked[AMP_TRACK_LOSS] = l;
    s->tracked[AMP_TRACK_SCALE] = train_output(s, AMP_LS_SCALE_NEW);
    s->tracked[AMP_TRACK_FOUND_INF] = train_output(s, AMP_LS_FOUND_INF);
    s->loss = s->loss_scale = NAN;
    return AMP_OK;
}

static size_t nelem(const AmpTensorView *t) {
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= (size_t)t->dims[d];
    return n;
}

/* The first element of tracked output k among the fetched ones (NaN when not there). */
static double tracked(const AmpSession *s, int k, const size_t *idx, const AmpTensorView *outs, size_t n) {
    for (size_t j = 0; s->tracked[k] >= 0 && j < n; j++)
        if (idx[j] == (size_t)s->tracked[k] && outs[j].data && nelem(&outs[j]))
            return amp_view_value(&outs[j], 0);
    return NAN;
}

void amp_session_track_step(AmpSession *s, const size_t *idx, size_t n_idx, const AmpTensorView *outs, double ms) {
    s->loss = tracked(s, AMP_TRACK_LOSS, idx, outs, n_idx);
    s->loss_scale = tracked(s, AMP_TRACK_SCALE, idx, outs, n_idx);
    double inf = tracked(s, AMP_TRACK_FOUND_INF, idx, outs, n_idx);
    if (inf != 0 && !isnan(inf)) s->skipped_steps++;
    amp_session_track_time(&s->step_time, ms);
}

void amp_session_track_time(AmpTimes *t, double ms) {
    t->last = ms;
    t->sum += ms;
    t->n++;
}

/* The current loss scale: its state entry's value, else the last step's (NaN: none). */
static double loss_scale(const AmpSession *s) {
    AmpTensorView v;
    for (size_t i = 0; i < s->n_state; i++)
        if (strcmp(s->state[i].name, AMP_LS_SCALE) == 0 && amp_session_state_at(s, i, &v) && nelem(&v))
            return amp_view_value(&v, 0);
    return s->loss_scale;
}

void amp_session_stats_sized(const AmpSession *s, AmpSessionStats *out, size_t size) {
    AmpSessionStats all;
    amp_session_stats_base(s, &all);
    all.peak_bytes = all.intermediate_bytes + all.state_bytes;
    all.step_ms_last = s->step_time.last;
    all.step_ms_mean = s->step_time.n ? s->step_time.sum / (double)s->step_time.n : 0;
    all.run_ms_last = s->run_time.last;
    all.run_ms_mean = s->run_time.n ? s->run_time.sum / (double)s->run_time.n : 0;
    int l = s->tracked[AMP_TRACK_LOSS];
    all.loss_name = l >= 0 ? s->io[AMP_MODE_TRAIN].out[l].name : "";
    all.loss = s->loss;
    all.loss_scale = loss_scale(s);
    all.skipped_steps = s->skipped_steps;
    memcpy(out, &all, size < sizeof all ? size : sizeof all);
}
