/* runs.c: a run's record (dt_run_init, notes) filled from dtrain's run.json and metrics.jsonl
 * (runs.h states the rules; load.c finds the run directories and opens their files, derive.c
 * derives the numbers). Every value comes from jansson's parse of one line and is checked for type
 * and range before it counts; anything else becomes a note. */
#include "config.h"

#include "report/runs.h"

#include <errno.h>
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

#define MAX_METRICS_BYTES (1024L << 20) /* metrics.jsonl: ~250 bytes a line; what is kept is smaller */
#define MAX_LINE_BYTES (1L << 20)       /* one metrics.jsonl line: a few hundred bytes in practice */
#define MAX_TEXT 256                   /* longest arch/dataset/device string kept */

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

int dt_run_init(dt_run *r, const char *source, const char *dir)
{
    memset(r, 0, sizeof *r);
    r->world_size = r->nodes = r->ranks_per_node = r->batch_per_rank = r->global_batch = r->epochs = r->opt_level = -1;
    r->desired_acc = r->img_s = r->epoch_time = r->train_time = NAN;
    r->best_top1 = r->best_top5 = r->time_to_acc = r->speedup = r->efficiency = NAN;
    r->best_top1_epoch = r->best_top5_epoch = r->acc_epoch = -1;
    r->baseline = -1;
    r->source = dup_str(source);
    r->dir = dup_str(dir);
    /* the name: dir's last component, without trailing slashes */
    size_t n = dir ? strlen(dir) : 0;
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    r->name = dir ? strndup(dir + b, n - b) : NULL;
    if (!r->source || !r->dir || !r->name) {
        dt_run_free(r);
        dt_error("out of memory for a run's names");
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

void dt_run_free(dt_run *r)
{
    free(r->source);
    free(r->dir);
    free(r->name);
    free(r->stem);
    free(r->arch);
    free(r->dataset);
    free(r->device);
    free(r->precision);
    for (int f = 0; f < DT_SETUP_N; f++)
        free(r->setup[f]);
    free(r->epoch_lines);
    free(r->step_lines);
    for (size_t i = 0; i < r->n_notes; i++) {
        free(r->notes[i].text);
        free(r->notes[i].detail);
    }
    free(r->notes);
    memset(r, 0, sizeof *r);
}

int dt_run_note_add(dt_run *r, int state, const char *detail, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (dt_grow((void **)&r->notes, &r->cap_notes, r->n_notes + 1, sizeof *r->notes)) {
        dt_error("out of memory for a note on %s", r->dir ? r->dir : "a run");
        return DT_ERR_NOMEM;
    }
    dt_run_note *n = r->notes;
    n[r->n_notes].text = strdup(text);
    n[r->n_notes].detail = detail ? strdup(detail) : NULL;
    if (!n[r->n_notes].text || (detail && !n[r->n_notes].detail)) {
        free(n[r->n_notes].text);
        free(n[r->n_notes].detail);
        dt_error("out of memory for a note on %s", r->dir ? r->dir : "a run");
        return DT_ERR_NOMEM;
    }
    r->n_notes++;
    if (state > r->state)
        r->state = state;
    return DT_OK;
}

/* a copy of a JSON string fit for a table cell: control characters become '?' */
static char *clean_copy(const char *s)
{
    char *c = strdup(s);
    if (c)
        for (char *p = c; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
    return c;
}

/* An optional string member: 1 and a copy in *out; 0 absent or null; -1 present but not a string of
 * 1..MAX_TEXT bytes. *out is NULL unless 1 (or when memory ran out: -2). */
static int get_text(json_t *o, const char *key, char **out)
{
    *out = NULL;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > MAX_TEXT ||
        strlen(json_string_value(v)) != json_string_length(v))
        return -1;
    *out = clean_copy(json_string_value(v));
    return *out ? 1 : -2;
}

/* An integer member in [lo, hi]: 1 and *out; 0 absent or null; -1 of another type or range. */
static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return -1;
    *out = json_integer_value(v);
    return 1;
}

/* A number member (integer or real) in [lo, hi]: 1 and *out; 0 absent or null (*out NaN); -1 other. */
static int get_num(json_t *o, const char *key, double lo, double hi, double *out)
{
    *out = NAN;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return -1;
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return -1;
    *out = x;
    return 1;
}

/* the directory's last component of a path, for a dataset named by its data directory */
static char *base_of(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    if (n == b || n - b > MAX_TEXT)
        return NULL;
    char *c = strndup(path + b, n - b);
    char *d = c ? clean_copy(c) : NULL;
    free(c);
    return d;
}

const char *const dt_setup_names[DT_SETUP_N] = {"recipe", "optimizer", "schedule", "crop",
                                                "augment", "mix", "ema", "ddp"};

/* A number member for a setup's text: 1 and *out; 0 absent; -1 not a finite number */
static int setup_num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return -1;
    *out = json_number_value(v);
    return 1;
}

/* 1 when v is a string of 1..max bytes (no NUL inside), the names run.json's setup fields hold */
static int short_string(json_t *v, size_t max)
{
    return json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= max &&
           strlen(json_string_value(v)) == json_string_length(v);
}

/* The setup field f's text from run.json j into buf: 1 present, 0 absent (an older dtrain), -1
 * present but not of its type (runs.h lists where each comes from) */
static int setup_text(json_t *j, int f, char *buf, size_t n)
{
    json_t *v = NULL, *o = NULL;
    double a = 0, b = 0;
    long long k = 0;
    int ga, gb;
    switch (f) {
    case DT_SETUP_RECIPE:
        if (!(v = json_object_get(j, "recipe")))
            return 0;
        if (!json_is_null(v) && !short_string(v, 64))
            return -1;
        snprintf(buf, n, "%s", json_is_null(v) ? "none" : json_string_value(v));
        return 1;
    case DT_SETUP_OPTIMIZER:
        if (!(o = json_object_get(j, "optimizer")))
            return 0;
        if (!short_string(v = json_object_get(o, "name"), 32))
            return -1;
        snprintf(buf, n, "%s%s", json_string_value(v), json_is_true(json_object_get(o, "nesterov")) ? " nesterov" : "");
        return 1;
    case DT_SETUP_SCHEDULE:
        if (!(v = json_object_get(j, "lr_schedule")))
            return 0;
        if (!short_string(v, 32))
            return -1;
        snprintf(buf, n, "%s", json_string_value(v));
        return 1;
    case DT_SETUP_CROP:
        if (!(o = json_object_get(j, "augmentation")))
            return 0;
        if (get_int(o, "train_crop_size", 1, 1000000, &k) != 1)
            return -1;
        snprintf(buf, n, "%lld", k);
        return 1;
    case DT_SETUP_AUGMENT: /* the policy (null: none), then random erasing's probability when above 0 */
        if (!(o = json_object_get(j, "augmentation")))
            return 0;
        v = json_object_get(o, "auto_augment");
        if (!json_is_object(o) || (v && !json_is_null(v) && !short_string(v, 32)) ||
            (ga = setup_num(o, "random_erase", &a)) < 0)
            return -1;
        if (short_string(v, 32))
            snprintf(buf, n, a > 0 ? "%s, erase %g" : "%s", json_string_value(v), a);
        else if (a > 0)
            snprintf(buf, n, "erase %g", a);
        else
            snprintf(buf, n, "none");
        return 1;
    case DT_SETUP_MIX: /* the alphas above 0 */
        if ((ga = setup_num(j, "mixup_alpha", &a)) < 0 || (gb = setup_num(j, "cutmix_alpha", &b)) < 0)
            return -1;
        if (!ga && !gb)
            return 0;
        if (a > 0 && b > 0)
            snprintf(buf, n, "mixup %g, cutmix %g", a, b);
        else if (a > 0 || b > 0)
            snprintf(buf, n, "%s %g", a > 0 ? "mixup" : "cutmix", a > 0 ? a : b);
        else
            snprintf(buf, n, "none");
        return 1;
    case DT_SETUP_EMA:
        if (!(v = json_object_get(j, "model_ema")))
            return 0;
        if (!json_is_null(v) && !json_is_object(v))
            return -1;
        snprintf(buf, n, "%s", json_is_null(v) ? "off" : "on");
        return 1;
    default: /* DT_SETUP_DDP */
        if (!(o = json_object_get(j, "ddp")))
            return 0;
        if (get_int(o, "accum_steps", 1, 1000000, &k) != 1)
            return -1;
        snprintf(buf, n, "accum %lld%s%s", k, json_is_true(json_object_get(o, "sync_bn")) ? ", sync-bn" : "",
                 json_is_false(json_object_get(o, "overlap")) ? ", no overlap" : "");
        return 1;
    }
}

/* r->setup from run.json j: a field absent stays NULL; one of the wrong type is "?", compared with no
 * other run (r->setup_bad), with a note */
static int read_setup(dt_run *r, json_t *j)
{
    char buf[160];
    for (int f = 0; f < DT_SETUP_N; f++) {
        int got = setup_text(j, f, buf, sizeof buf);
        if (got < 0) {
            DT_TRY(dt_run_note_add(r, DT_RUN_OK, NULL, "run.json: the %s (setup) is invalid: compared with no "
                                   "other run", dt_setup_names[f]));
            r->setup_bad = 1;
            snprintf(buf, sizeof buf, "?");
        }
        if (got && !(r->setup[f] = clean_copy(buf)))
            return DT_ERR_NOMEM;
    }
    return DT_OK;
}

#define NOTE(...) DT_TRY(dt_run_note_add(r, __VA_ARGS__))

int dt_run_parse_config(dt_run *r, const char *text, size_t len)
{
    json_error_t err;
    json_t *j = json_loadb(text, len, 0, &err);
    int rc = DT_OK;
    if (!j) {
        NOTE(DT_RUN_SKIPPED, err.text, "run.json:%d: not valid JSON: run skipped", err.line);
        return DT_OK;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        NOTE(DT_RUN_SKIPPED, NULL, "run.json: not a JSON object: run skipped");
        return DT_OK;
    }
    /* the fields every row needs */
    long long ws = 0, bpr = 0, ep = 0, v;
    int got = get_text(j, "arch", &r->arch);
    const char *bad = got == -2 ? "" : got != 1 ? "arch" : get_int(j, "world_size", 1, 1000000, &ws) != 1 ? "world_size"
                    : get_int(j, "batch_per_rank", 1, 1000000000, &bpr) != 1                          ? "batch_per_rank"
                    : get_int(j, "epochs", 1, 10000000, &ep) != 1                                    ? "epochs"
                                                                                                      : NULL;
    if (got == -2) {
        rc = DT_ERR_NOMEM;
        goto out;
    }
    if (bad) {
        free(r->arch);
        r->arch = NULL;
        rc = dt_run_note_add(r, DT_RUN_SKIPPED, NULL, "run.json: \"%s\" missing or invalid: run skipped", bad);
        goto out;
    }
    r->world_size = (int)ws;
    r->batch_per_rank = (int)bpr;
    r->epochs = (int)ep;
    /* the others: absent shows as "?" or a dash; present but invalid also gets a note */
    static const char *const ints[] = {"nodes", "ranks_per_node", "global_batch"};
    int *const iout[] = {&r->nodes, &r->ranks_per_node, &r->global_batch};
    for (int i = 0; i < 3; i++) {
        int g = get_int(j, ints[i], 1, 1000000000, &v);
        if (g == 1)
            *iout[i] = (int)v;
        else if (g < 0 && (rc = dt_run_note_add(r, DT_RUN_OK, NULL, "run.json: \"%s\" invalid: not shown", ints[i])))
            goto out;
    }
    static const char *const texts[] = {"dataset", "device"};
    char **const tout[] = {&r->dataset, &r->device};
    for (int i = 0; i < 2; i++) {
        int g = get_text(j, texts[i], tout[i]);
        if (g == -2) {
            rc = DT_ERR_NOMEM;
            goto out;
        }
        if (g < 0 && (rc = dt_run_note_add(r, DT_RUN_OK, NULL, "run.json: \"%s\" invalid: shown as ?", texts[i])))
            goto out;
    }
    if (!r->dataset) { /* before dtrain wrote "dataset": the data directory's name, null when synthetic */
        json_t *d = json_object_get(j, "data");
        if (json_is_null(d))
            r->dataset = strdup("synthetic");
        else if (json_is_string(d) && strlen(json_string_value(d)) == json_string_length(d))
            r->dataset = base_of(json_string_value(d));
    }
    json_t *amp = json_object_get(j, "amp");
    const char *prec = "?";
    if (json_is_object(amp)) {
        if (get_int(amp, "opt_level", 0, 3, &v) == 1)
            r->opt_level = (int)v;
        json_t *p = json_object_get(amp, "precision");
        if (r->opt_level == 0)
            prec = "fp32";
        else if (json_is_string(p) && (!strcmp(json_string_value(p), "fp16") || !strcmp(json_string_value(p), "bf16")))
            prec = json_string_value(p);
        json_t *ls = json_object_get(amp, "loss_scale");
        r->dynamic_scale = json_is_string(ls) && !strcmp(json_string_value(ls), "dynamic");
    }
    double acc;
    int g = get_num(j, "desired_acc", 0, 100, &acc);
    if (g == 1 && acc > 0)
        r->desired_acc = acc;
    else if ((g < 0 || (g == 1 && acc <= 0)) &&
             (rc = dt_run_note_add(r, DT_RUN_OK, NULL, "run.json: \"desired_acc\" invalid: ignored")))
        goto out;
    long long se = 0;
    if (get_int(j, "start_epoch", 0, 10000000, &se) == 1)
        r->start_epoch = (int)se;
    if ((rc = read_setup(r, j)) != DT_OK)
        goto out;
    r->precision = strdup(prec);
    if (!r->dataset)
        r->dataset = strdup("?");
    if (!r->device)
        r->device = strdup("?");
    if (!r->precision || !r->dataset || !r->device) {
        rc = DT_ERR_NOMEM;
        goto out;
    }
    r->have_config = 1;
out:
    json_decref(j);
    if (rc == DT_ERR_NOMEM)
        dt_error("out of memory reading %s/run.json", r->dir ? r->dir : "a run");
    return rc;
}

/* One line's object into an epoch or step record. NULL when it checks, else the offending field. */
static const char *read_epoch(json_t *j, dt_run_epoch *e)
{
    long long v = -1;
    if (get_int(j, "epoch", 0, 10000000, &v) != 1)
        return "epoch";
    e->epoch = (int)v;
    v = -1;
    if (get_int(j, "step", 0, INT64_MAX, &v) < 0)
        return "step";
    e->step = v;
    if (get_num(j, "train_top1", 0, 100, &e->train_top1) != 1)
        return "train_top1";
    if (get_num(j, "train_top5", 0, 100, &e->train_top5) != 1)
        return "train_top5";
    if (get_num(j, "img_per_s", 0, 1e12, &e->img_per_s) != 1)
        return "img_per_s";
    if (get_num(j, "time_s", 0, 1e12, &e->time_s) != 1)
        return "time_s";
    if (get_num(j, "train_loss", -DBL_MAX, DBL_MAX, &e->train_loss) < 0)
        return "train_loss";
    if (get_num(j, "val_top1", 0, 100, &e->val_top1) < 0)
        return "val_top1";
    if (get_num(j, "val_top5", 0, 100, &e->val_top5) < 0)
        return "val_top5";
    if (get_num(j, "val_loss", -DBL_MAX, DBL_MAX, &e->val_loss) < 0)
        return "val_loss";
    if (get_num(j, "loss_scale", 1e-30, 1e30, &e->loss_scale) < 0)
        return "loss_scale";
    return NULL;
}

static const char *read_step(json_t *j, dt_run_step *s)
{
    long long v = -1;
    if (get_int(j, "epoch", 0, 10000000, &v) != 1)
        return "epoch";
    s->epoch = (int)v;
    v = -1;
    if (get_int(j, "epoch_step", 0, INT64_MAX, &v) < 0)
        return "epoch_step";
    s->epoch_step = v;
    v = -1;
    if (get_int(j, "step", 0, INT64_MAX, &v) < 0)
        return "step";
    s->step = v;
    if (get_num(j, "img_per_s", 0, 1e12, &s->img_per_s) != 1)
        return "img_per_s";
    if (get_num(j, "loss_scale", 1e-30, 1e30, &s->loss_scale) < 0)
        return "loss_scale";
    s->warmup = 0;
    return NULL;
}

/* dtrain's end line: why the run stopped */
static const char *read_end(json_t *j, dt_run *r)
{
    static const char *reasons[] = {"done", "max-steps", "desired-acc", "signal", "diverged"};
    const char *why = json_string_value(json_object_get(j, "reason"));
    size_t k = 0;
    while (why && k < sizeof reasons / sizeof reasons[0] && strcmp(why, reasons[k]))
        k++;
    if (!why || k == sizeof reasons / sizeof reasons[0])
        return "reason";
    long long epoch = -1, step = -1, sig = 0;
    if (get_int(j, "epoch", 0, 10000000, &epoch) != 1)
        return "epoch";
    if (get_int(j, "step", 0, INT64_MAX, &step) != 1)
        return "step";
    if (get_int(j, "signal", 0, 128, &sig) < 0)
        return "signal";
    snprintf(r->end_reason, sizeof r->end_reason, "%s", reasons[k]);
    r->end_epoch = (int)epoch;
    r->end_step = step;
    r->end_signal = (int)sig;
    return NULL;
}

static int cmp_epoch(const void *a, const void *b)
{
    int x = ((const dt_run_epoch *)a)->epoch, y = ((const dt_run_epoch *)b)->epoch;
    return (x > y) - (x < y);
}

static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

/* The metrics reader's state between lines: dt_run_parse_metrics (a buffer) and
 * dt_run_read_metrics (a stream) cut the file into lines and hand each to reader_line. */
typedef struct metrics_reader {
    dt_run *r;
    size_t cap_epoch_lines, cap_step_lines, cap_line_no;
    long line, dups, dup_epoch, dup_first, dup_second;
    long *epoch_line_no; /* the line each kept epoch came from, for the duplicate note */
    int done;            /* a line ended the reading with a note (the run is skipped or partial) */
} metrics_reader;

static void reader_init(metrics_reader *m, dt_run *r)
{
    memset(m, 0, sizeof *m);
    m->r = r;
    m->dup_epoch = -1;
}

/* One line of n bytes without its newline; last: the file's last, with no newline after it; s NULL:
 * a line over MAX_LINE_BYTES, not kept. DT_OK (m->done set when the line ends the reading), or
 * DT_ERR_NOMEM. */
static int reader_line(metrics_reader *m, const char *s, size_t n, int last)
{
    dt_run *r = m->r;
    long line = ++m->line;
    if (!s) {
        m->done = 1;
        return dt_run_note_add(r, DT_RUN_SKIPPED, NULL, "metrics.jsonl:%ld: longer than %ld MiB: run skipped", line,
                               MAX_LINE_BYTES >> 20);
    }
    if (blank(s, n))
        return DT_OK;
    json_error_t err;
    json_t *j = json_loadb(s, n, 0, &err);
    const char *kind = j ? json_string_value(json_object_get(j, "kind")) : NULL;
    const char *bad = NULL;
    if (j && kind && !strcmp(kind, "epoch")) {
        dt_run_epoch e;
        if (!(bad = read_epoch(j, &e))) {
            size_t k = r->n_epoch_lines;
            while (k > 0 && r->epoch_lines[k - 1].epoch != e.epoch)
                k--;
            if (k > 0) { /* logged before: the last line counts */
                if (!m->dups++) {
                    m->dup_epoch = e.epoch;
                    m->dup_first = m->epoch_line_no[k - 1];
                    m->dup_second = line;
                }
                r->epoch_lines[k - 1] = e;
                m->epoch_line_no[k - 1] = line;
            } else if (dt_grow((void **)&r->epoch_lines, &m->cap_epoch_lines, r->n_epoch_lines + 1,
                               sizeof *r->epoch_lines) ||
                       dt_grow((void **)&m->epoch_line_no, &m->cap_line_no, r->n_epoch_lines + 1,
                               sizeof *m->epoch_line_no)) {
                json_decref(j);
                return DT_ERR_NOMEM;
            } else {
                m->epoch_line_no[r->n_epoch_lines] = line;
                r->epoch_lines[r->n_epoch_lines++] = e;
            }
        }
    } else if (j && kind && !strcmp(kind, "step")) {
        dt_run_step st;
        if (!(bad = read_step(j, &st))) {
            if (dt_grow((void **)&r->step_lines, &m->cap_step_lines, r->n_step_lines + 1, sizeof *r->step_lines)) {
                json_decref(j);
                return DT_ERR_NOMEM;
            }
            r->step_lines[r->n_step_lines++] = st;
        }
    } else if (j && kind && !strcmp(kind, "end")) {
        if (!(bad = read_end(j, r)))
            r->ended = 1;
    } else if (j && !kind) {
        bad = json_is_object(j) ? "kind" : "";
    }
    if (j && kind && (!strcmp(kind, "epoch") || !strcmp(kind, "step")))
        r->ended = 0; /* training went on after an end line: a resumed run */
    int parsed = j != NULL;
    json_decref(j);
    if (parsed && !bad)
        return DT_OK;
    m->done = 1;
    if (last) /* no newline yet: the line is being written, or the writer died */
        return dt_run_note_add(r, DT_RUN_PARTIAL, parsed ? NULL : err.text,
                               "metrics.jsonl:%ld: the last line is incomplete and was ignored", line);
    if (!parsed)
        return dt_run_note_add(r, DT_RUN_SKIPPED, err.text, "metrics.jsonl:%ld: not valid JSON: run skipped", line);
    if (!*bad)
        return dt_run_note_add(r, DT_RUN_SKIPPED, NULL, "metrics.jsonl:%ld: not a JSON object: run skipped", line);
    return dt_run_note_add(r, DT_RUN_SKIPPED, NULL, "metrics.jsonl:%ld: \"%s\" missing or invalid: run skipped", line,
                           bad);
}

/* After the last line (or the one that ended the reading; rc: how reading went): the duplicate
 * note, the order of the epochs, and whether the run is complete, stopped or in progress. */
static int reader_finish(metrics_reader *m, int rc)
{
    dt_run *r = m->r;
    if (rc == DT_OK && m->dups && !m->done)
        rc = dt_run_note_add(r, DT_RUN_OK, NULL,
                             "%ld epoch line%s repeated (the first: epoch %ld at lines %ld and %ld); "
                             "the last of each counts",
                             m->dups, m->dups > 1 ? "s" : "", m->dup_epoch, m->dup_first, m->dup_second);
    free(m->epoch_line_no);
    m->epoch_line_no = NULL;
    if (rc == DT_ERR_NOMEM)
        dt_error("out of memory reading %s/metrics.jsonl", r->dir ? r->dir : "a run");
    if (rc != DT_OK)
        return rc;
    if (r->state == DT_RUN_SKIPPED) { /* no number from a file that did not check */
        r->n_epoch_lines = r->n_step_lines = 0;
        return DT_OK;
    }
    if (r->n_epoch_lines > 1)
        qsort(r->epoch_lines, r->n_epoch_lines, sizeof *r->epoch_lines, cmp_epoch);
    char how[128] = ""; /* a stop dtrain wrote down */
    if (r->ended && !strcmp(r->end_reason, "signal"))
        snprintf(how, sizeof how, "stopped by signal %d at epoch %d, step %lld (resumable)", r->end_signal,
                 r->end_epoch, r->end_step);
    else if (r->ended && !strcmp(r->end_reason, "max-steps"))
        snprintf(how, sizeof how, "stopped by --max-steps at epoch %d, step %lld", r->end_epoch, r->end_step);
    else if (r->ended && !strcmp(r->end_reason, "diverged"))
        snprintf(how, sizeof how, "diverged (NaN or inf) at epoch %d, step %lld", r->end_epoch, r->end_step);
    if (!r->n_epoch_lines)
        return dt_run_note_add(r, DT_RUN_PARTIAL, NULL, "%s%sno complete epoch yet (%zu print interval%s logged): no row",
                               how, *how ? "; " : "", r->n_step_lines, r->n_step_lines == 1 ? "" : "s");
    /* epochs missing from the record: the lines are sorted, each epoch once */
    int last = r->epoch_lines[r->n_epoch_lines - 1].epoch, first_gap = -1, gaps = 0;
    for (int e = r->start_epoch, k = 0; e < last; e++) {
        while (k < (int)r->n_epoch_lines && r->epoch_lines[k].epoch < e)
            k++;
        if (k < (int)r->n_epoch_lines && r->epoch_lines[k].epoch == e)
            continue;
        first_gap = first_gap < 0 ? e : first_gap;
        gaps++;
    }
    if (gaps && (rc = dt_run_note_add(r, DT_RUN_OK, NULL,
                                      "%d epoch%s missing from metrics.jsonl (the first: epoch %d): a record was lost; "
                                      "the times leave %s out",
                                      gaps, gaps > 1 ? "s" : "", first_gap, gaps > 1 ? "them" : "it")) != DT_OK)
        return rc;
    int done = r->epochs > 0 && last >= r->epochs - 1;
    for (size_t i = 0; i < r->n_epoch_lines && !done && isfinite(r->desired_acc); i++)
        done = isfinite(r->epoch_lines[i].val_top1) && r->epoch_lines[i].val_top1 >= r->desired_acc;
    if (!done && r->have_config && *how) {
        r->stopped = 1;
        return dt_run_note_add(r, DT_RUN_PARTIAL, NULL, "%s: %zu of %d epochs logged", how, r->n_epoch_lines,
                               r->epochs);
    }
    if (!done && r->have_config) {
        r->in_progress = 1;
        return dt_run_note_add(r, DT_RUN_PARTIAL, NULL, "in progress (or killed before its end line): %zu of %d epochs "
                               "logged", r->n_epoch_lines, r->epochs);
    }
    return DT_OK;
}

static int note_too_big(dt_run *r)
{
    return dt_run_note_add(r, DT_RUN_SKIPPED, NULL, "metrics.jsonl: over %ld GiB: run skipped", MAX_METRICS_BYTES >> 30);
}

int dt_run_parse_metrics(dt_run *r, const char *data, size_t len)
{
    metrics_reader m;
    reader_init(&m, r);
    int rc = DT_OK;
    if (len > (size_t)MAX_METRICS_BYTES) {
        rc = note_too_big(r);
        m.done = 1;
    }
    for (size_t pos = 0; pos < len && rc == DT_OK && !m.done;) {
        const char *p = data + pos, *nl = memchr(p, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - p) : len - pos;
        pos += n + (nl ? 1 : 0);
        rc = reader_line(&m, n > MAX_LINE_BYTES ? NULL : p, n, !nl);
    }
    return reader_finish(&m, rc);
}

/* Adds p[0..n) to the line being put together (*line, *len of *cap bytes), or marks it over-long
 * (*over) past MAX_LINE_BYTES, keeping nothing more of it. DT_OK or DT_ERR_NOMEM. */
static int hold(char **line, size_t *len, size_t *cap, int *over, const char *p, size_t n)
{
    if (*over)
        return DT_OK;
    if (n > MAX_LINE_BYTES - *len) {
        *over = 1;
        return DT_OK;
    }
    /* *len + n <= MAX_LINE_BYTES, a power of two: the room dt_grow doubles up from 16 stays within it */
    if (dt_grow((void **)line, cap, *len + n, 1) != DT_OK)
        return DT_ERR_NOMEM;
    memcpy(*line + *len, p, n);
    *len += n;
    return DT_OK;
}

int dt_run_read_metrics(dt_run *r, FILE *f, size_t chunk)
{
    metrics_reader m;
    reader_init(&m, r);
    if (!chunk)
        chunk = 65536;
    char *in = malloc(chunk), *line = NULL;
    size_t len = 0, cap = 0;      /* the line being put together from reads */
    unsigned long long total = 0; /* bytes read */
    int over = 0, rc = in ? DT_OK : DT_ERR_NOMEM;
    struct stat st; /* a file known too big is not read at all */
    if (rc == DT_OK && fileno(f) >= 0 && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_size > MAX_METRICS_BYTES) {
        rc = note_too_big(r);
        m.done = 1;
    }
    while (rc == DT_OK && !m.done) {
        size_t got = fread(in, 1, chunk, f);
        if (got == 0) {
            if (ferror(f)) {
                rc = dt_run_note_add(r, DT_RUN_SKIPPED, strerror(errno), "metrics.jsonl: cannot be read: run skipped");
                m.done = 1;
            }
            break;
        }
        if ((total += got) > (unsigned long long)MAX_METRICS_BYTES) { /* a file still growing */
            rc = note_too_big(r);
            m.done = 1;
            break;
        }
        for (size_t i = 0; i < got && rc == DT_OK && !m.done;) {
            const char *p = in + i, *nl = memchr(p, '\n', got - i);
            size_t n = nl ? (size_t)(nl - p) : got - i;
            i += n + (nl ? 1 : 0);
            if (nl && !len) { /* a whole line in this read */
                rc = reader_line(&m, n > MAX_LINE_BYTES ? NULL : p, n, 0);
                continue;
            }
            rc = hold(&line, &len, &cap, &over, p, n);
            if (rc == DT_OK && over) /* the run is skipped: the rest of the line is not read */
                rc = reader_line(&m, NULL, len, 0);
            else if (rc == DT_OK && nl) {
                rc = reader_line(&m, line, len, 0);
                len = 0;
            }
        }
    }
    if (rc == DT_OK && !m.done && len) /* the last line, without its newline */
        rc = reader_line(&m, line, len, 1);
    free(in);
    free(line);
    return reader_finish(&m, rc);
}
