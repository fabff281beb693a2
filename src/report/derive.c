/* derive.c: the run set after reading (runs.h): each run's numbers (throughput without warm-up,
 * epoch and training times, best accuracies, time to the desired accuracy), the runs' order, unique
 * names and file stems, and each row's baseline with speedup and efficiency. */
#include "config.h"

#include "report/runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

int dt_runs_append(dt_run_set *s, dt_run *r)
{
    DT_TRY(dt_grow((void **)&s->runs, &s->cap, s->n + 1, sizeof *s->runs));
    s->runs[s->n++] = *r;
    memset(r, 0, sizeof *r);
    return DT_OK;
}

int dt_run_in_table(const dt_run *r)
{
    return r->have_config && r->state != DT_RUN_SKIPPED && r->n_epoch_lines > 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of v[0..n) (sorted in place); NaN for n == 0 */
static double median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int derive(dt_run *r)
{
    size_t m = r->n_step_lines > r->n_epoch_lines ? r->n_step_lines : r->n_epoch_lines;
    double *v = malloc((m ? m : 1) * sizeof *v);
    if (!v)
        return DT_ERR_NOMEM;
    /* warm-up: the first print interval of each run of step lines of one epoch with rising epoch_step */
    for (size_t i = 0, start = 0; i < r->n_step_lines; i++) {
        const dt_run_step *a = &r->step_lines[i], *b = i + 1 < r->n_step_lines ? &r->step_lines[i + 1] : NULL;
        int ends = !b || b->epoch != a->epoch ||
                   (a->epoch_step >= 0 && b->epoch_step >= 0 && b->epoch_step <= a->epoch_step);
        if (ends) {
            r->step_lines[start].warmup = i > start; /* an epoch's only interval counts */
            start = i + 1;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < r->n_step_lines; i++)
        if (!r->step_lines[i].warmup)
            v[n++] = r->step_lines[i].img_per_s;
    if (!n)
        for (size_t i = 0; i < r->n_epoch_lines; i++)
            v[n++] = r->epoch_lines[i].img_per_s;
    r->img_s = median(v, n);
    double sum = 0, best1 = -1, best5 = -1;
    for (size_t i = 0; i < r->n_epoch_lines; i++) {
        const dt_run_epoch *e = &r->epoch_lines[i];
        v[i] = e->time_s;
        sum += e->time_s;
        if (isfinite(e->val_top1) && e->val_top1 > best1) {
            best1 = e->val_top1;
            r->best_top1_epoch = e->epoch;
        }
        if (isfinite(e->val_top5) && e->val_top5 > best5) {
            best5 = e->val_top5;
            r->best_top5_epoch = e->epoch;
        }
        if (isfinite(r->desired_acc) && r->acc_epoch < 0 && isfinite(e->val_top1) && e->val_top1 >= r->desired_acc) {
            r->acc_epoch = e->epoch;
            r->time_to_acc = sum;
        }
    }
    r->best_top1 = best1 >= 0 ? best1 : NAN;
    r->best_top5 = best5 >= 0 ? best5 : NAN;
    r->train_time = r->n_epoch_lines ? sum : NAN;
    r->epoch_time = median(v, r->n_epoch_lines);
    free(v);
    return DT_OK;
}

int dt_run_same_setup(const dt_run *a, const dt_run *b)
{
    if (a->setup_bad || b->setup_bad)
        return a == b;
    for (int f = 0; f < DT_SETUP_N; f++)
        if ((a->setup[f] == NULL) != (b->setup[f] == NULL) || (a->setup[f] && strcmp(a->setup[f], b->setup[f])))
            return 0;
    return 1;
}

/* runs one scaling study holds: a recipe, optimizer or schedule of its own is another study */
static int same_config(const dt_run *a, const dt_run *b)
{
    return !strcmp(a->arch, b->arch) && !strcmp(a->dataset, b->dataset) && !strcmp(a->device, b->device) &&
           a->batch_per_rank == b->batch_per_rank && a->opt_level == b->opt_level &&
           !strcmp(a->precision, b->precision) && dt_run_same_setup(a, b);
}

static int cmp_run(const void *pa, const void *pb)
{
    const dt_run *a = pa, *b = pb;
    int ta = dt_run_in_table(a), tb = dt_run_in_table(b), c;
    if (ta != tb)
        return tb - ta;
    if (ta) {
        if ((c = strcmp(a->arch, b->arch)) || (c = strcmp(a->dataset, b->dataset)))
            return c;
        if (a->world_size != b->world_size)
            return a->world_size < b->world_size ? -1 : 1;
        if ((c = strcmp(a->name, b->name)))
            return c;
    }
    return strcmp(a->dir, b->dir);
}

int dt_runs_compute(dt_run_set *s)
{
    /* names: a name two runs share becomes each one's dir */
    int *clash = calloc(s->n ? s->n : 1, sizeof *clash);
    if (!clash)
        return DT_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = i + 1; k < s->n; k++)
            if (!strcmp(s->runs[i].name, s->runs[k].name))
                clash[i] = clash[k] = 1;
    int rc = DT_OK;
    for (size_t i = 0; i < s->n && rc == DT_OK; i++) {
        dt_run *r = &s->runs[i];
        if (clash[i]) {
            char *d = strdup(r->dir);
            if (!d)
                rc = DT_ERR_NOMEM;
            else {
                free(r->name);
                r->name = d;
            }
        }
        if (rc == DT_OK && dt_run_in_table(r))
            rc = derive(r);
    }
    free(clash);
    if (rc != DT_OK) {
        dt_error("out of memory deriving the runs' numbers");
        return rc;
    }
    if (s->n > 1)
        qsort(s->runs, s->n, sizeof *s->runs, cmp_run);
    /* stems: [A-Za-z0-9._-] only, no leading dot, unique (a -2, -3, ... suffix) */
    for (size_t i = 0; i < s->n; i++) {
        dt_run *r = &s->runs[i];
        size_t n = strlen(r->name);
        char *st = malloc(n + 24);
        if (!st) {
            dt_error("out of memory");
            return DT_ERR_NOMEM;
        }
        for (size_t k = 0; k <= n; k++) {
            char c = r->name[k];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '_' || (c == '.' && k > 0);
            st[k] = k == n ? 0 : ok ? c : '_';
        }
        if (!n)
            strcpy(st, "run");
        size_t base = strlen(st);
        for (int suffix = 2;; suffix++) {
            int taken = 0;
            for (size_t k = 0; k < i && !taken; k++)
                taken = !strcmp(s->runs[k].stem, st);
            if (!taken)
                break;
            snprintf(st + base, 24, "-%d", suffix);
        }
        free(r->stem);
        r->stem = st;
    }
    /* baselines: the first row of the same config in this order is the one with the fewest ranks */
    for (size_t i = 0; i < s->n; i++) {
        dt_run *r = &s->runs[i];
        if (!dt_run_in_table(r) || !isfinite(r->img_s))
            continue;
        for (size_t k = 0; k < i; k++) {
            const dt_run *b = &s->runs[k];
            if (dt_run_in_table(b) && isfinite(b->img_s) && b->img_s > 0 && same_config(r, b)) {
                r->baseline = (long)k;
                r->speedup = r->img_s / b->img_s;
                r->efficiency = 100.0 * r->speedup * (double)b->world_size / (double)r->world_size;
                break;
            }
        }
    }
    return DT_OK;
}

void dt_runs_free(dt_run_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        dt_run_free(&s->runs[i]);
    free(s->runs);
    for (size_t i = 0; i < s->n_sources; i++)
        free(s->sources[i]);
    free(s->sources);
    memset(s, 0, sizeof *s);
}
