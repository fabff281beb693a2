/* profile.c: the profile's timers and report (DT_PROFILE; model.h, dt_model_prof_mark). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layer.h"
#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/grow.h"
#include "util/log.h"

/* The profile (model.h): the step's marks, each a timer and the kind of the time before it (-1:
 * none, the step's first), and the totals over the steps ended. Timers are made as marks need them
 * and kept for the next steps (never inside a capture: no profiled step is captured). */
struct dt_prof {
    const dt_backend *tb; /* whose timers: the model's backend's, else dt_backend_cpu's (the host clock) */
    dt_timer **timer;
    int *before;          /* [i]: the kind of the time from mark i - 1 to mark i */
    size_t cap_timer, cap_before; /* their room (grow.h) */
    int n, made;          /* marks this step, timers made */
    int kind;             /* the kind of the work issued since the last mark (-1: no mark yet this step) */
    int broken;           /* out of memory for a timer: the profile stopped (said once) */
    int64_t steps;
    double ms[DT_PROF_KINDS];
    unsigned char seen[DT_PROF_KINDS];
};

/* a mark: the time from the last one is the current kind's, and what follows kind's */
void dt_model_prof_record(dt_model *m, int kind)
{
    struct dt_prof *p = m->prof;
    if (!p) {
        if (!(p = m->prof = calloc(1, sizeof *p)))
            return;
        p->tb = m->be->timer_create ? m->be : &dt_backend_cpu;
        p->kind = -1;
    }
    if (p->broken)
        return;
    if (p->n == p->made) {
        size_t need = (size_t)p->made + 1;
        if (dt_grow((void **)&p->timer, &p->cap_timer, need, sizeof *p->timer) != DT_OK ||
            dt_grow((void **)&p->before, &p->cap_before, need, sizeof *p->before) != DT_OK ||
            !(p->timer[p->made] = p->tb->timer_create())) {
            dt_warn("profile: out of memory for its timers: the profile stops here");
            p->broken = 1;
            return;
        }
        p->made++;
    }
    p->tb->timer_record(p->timer[p->n]);
    p->before[p->n++] = p->kind;
    p->kind = kind;
}

void dt_model_prof_mark(dt_model *m, int kind)
{
    if (m->profiling && kind >= 0 && (!m->prof || m->prof->kind != kind))
        dt_model_prof_record(m, kind);
}


void dt_model_prof_step_end(dt_model *m)
{
    struct dt_prof *p = m->prof;
    if (!p || p->kind < 0 || p->broken)
        return;
    dt_model_prof_record(m, -1); /* the last kind's end */
    if (p->broken)
        return;
    for (int i = 1; i < p->n; i++) { /* timer_ms waits for the later mark: the step's work is done */
        int k = p->before[i];
        p->ms[k] += p->tb->timer_ms(p->timer[i - 1], p->timer[i]);
        p->seen[k] = 1;
    }
    p->n = 0;
    p->steps++;
}
/* the profile's name for kind k (a row of the report) into buf */
static const char *prof_kind_name(int k, char *buf, size_t n)
{
    static const char *const rest[] = {"conv_dgrad", "input_upload", "input_normalize", "loss", "ddp_pack",
                                       "ddp_unpack", "amp_scaler", "optimizer", "other"};
    _Static_assert(sizeof rest / sizeof rest[0] == DT_PROF_KINDS - DT_PROF_CONV_DGRAD, "a name per kind");
    if (k >= DT_PROF_CONV_DGRAD)
        return rest[k - DT_PROF_CONV_DGRAD];
    if (k == DT_PROF_BWD + DT_OP_CONV)
        return "conv_wgrad";
    snprintf(buf, n, "%s_%s", dt_kind_names[k % DT_OP_KINDS], k < DT_PROF_BWD ? "fwd" : "bwd");
    return buf;
}

void dt_model_profile_report(dt_model *m, FILE *f)
{
    struct dt_prof *p = m->prof;
    dt_model_prof_step_end(m); /* a step in progress (a caller that ends none) */
    if (!p || !p->steps) {
        fprintf(f, "profile: no step was profiled\n");
        return;
    }
    int order[DT_PROF_KINDS], n = 0;
    double total = 0;
    for (int k = 0; k < DT_PROF_KINDS; k++)
        if (p->seen[k]) {
            total += p->ms[k];
            int j = n++;
            for (; j > 0 && p->ms[order[j - 1]] < p->ms[k]; j--) /* the most time first */
                order[j] = order[j - 1];
            order[j] = k;
        }
    const double steps = (double)p->steps;
    fprintf(f, "profile: %lld step%s, ms per step by kind (%s timers)\n", (long long)p->steps,
            p->steps == 1 ? "" : "s", p->tb->name);
    fprintf(f, "%-20s %10s %7s\n", "kind", "ms/step", "share");
    for (int i = 0; i < n; i++) {
        char buf[40];
        int k = order[i];
        fprintf(f, "%-20s %10.3f %6.1f%%\n", prof_kind_name(k, buf, sizeof buf), p->ms[k] / steps,
                total > 0 ? 100 * p->ms[k] / total : 0.0);
    }
    fprintf(f, "%-20s %10.3f %6.1f%%\n", "total", total / steps, total > 0 ? 100.0 : 0.0);
    p->steps = 0;
    memset(p->ms, 0, sizeof p->ms);
    memset(p->seen, 0, sizeof p->seen);
}

void dt_model_prof_free(dt_model *m)
{
    if (!m->prof)
        return;
    for (int i = 0; i < m->prof->made; i++)
        m->prof->tb->timer_destroy(m->prof->timer[i]);
    free(m->prof->timer);
    free(m->prof->before);
    free(m->prof);
    m->prof = NULL;
}
