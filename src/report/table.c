/* table.c: the Markdown, CSV and JSON reports and the SVG plots of a run set (table.h). The plots
 * written and the plots linked come from the same predicates here, so a link never dangles. */
#include "config.h"

#include "report/table.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg.h"
#include "util/check.h"
#include "util/log.h"

#define DASH "\xe2\x80\x94" /* an em dash: nothing to show */

/* --- the tables: runs [i0, i1) of one (arch, dataset) ------------------------------------------ */

static size_t group_end(const dt_run_set *s, size_t i0)
{
    size_t i = i0 + 1;
    while (i < s->n && dt_run_in_table(&s->runs[i]) && !strcmp(s->runs[i].arch, s->runs[i0].arch) &&
           !strcmp(s->runs[i].dataset, s->runs[i0].dataset))
        i++;
    return i;
}

static void safe_name(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (; in[k] && k + 1 < n; k++) {
        char c = in[k];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                 (c == '.' && k > 0);
        out[k] = ok ? c : '_';
    }
    out[k] = 0;
}

/* "<arch>-<dataset>", file-name safe, "-2", "-3" ... after an earlier table with the same */
static void group_stem(const dt_run_set *s, size_t i0, char *out, size_t n)
{
    char want[600], other[600];
    snprintf(want, sizeof want, "%s-%s", s->runs[i0].arch, s->runs[i0].dataset);
    safe_name(want, out, n);
    int same = 0;
    for (size_t i = 0; i < i0 && dt_run_in_table(&s->runs[i]); i = group_end(s, i)) {
        snprintf(want, sizeof want, "%s-%s", s->runs[i].arch, s->runs[i].dataset);
        safe_name(want, other, sizeof other);
        same += !strcmp(other, out);
    }
    if (same && strlen(out) + 12 < n)
        snprintf(out + strlen(out), n - strlen(out), "-%d", same + 1);
}

/* one scaling study within a table (derive.c's rule for the baseline) */
static int same_config(const dt_run *a, const dt_run *b)
{
    return !strcmp(a->device, b->device) && a->batch_per_rank == b->batch_per_rank && a->opt_level == b->opt_level &&
           !strcmp(a->precision, b->precision) && dt_run_same_setup(a, b);
}

/* The setup fields (runs.h) whose text is not the same over the table's runs [i0, i1): differ[f]
 * set for each; returns how many. 0: one setup, no column for it. */
static int setups_differ(const dt_run_set *s, size_t i0, size_t i1, int differ[DT_SETUP_N])
{
    int n = 0;
    for (int f = 0; f < DT_SETUP_N; f++) {
        differ[f] = 0;
        for (size_t i = i0 + 1; i < i1 && !differ[f]; i++) {
            const char *a = s->runs[i0].setup[f], *b = s->runs[i].setup[f];
            differ[f] = (a == NULL) != (b == NULL) || (a && strcmp(a, b)) || s->runs[i].setup_bad;
        }
        differ[f] |= i1 > i0 + 1 && s->runs[i0].setup_bad;
        n += differ[f];
    }
    return n;
}

/* "optimizer adamw; schedule cosine": the fields set in which (all when NULL), "?" where run.json
 * does not say; "" when none */
static void fmt_setup(char *b, size_t n, const dt_run *r, const int *which)
{
    size_t len = 0;
    b[0] = 0;
    for (int f = 0; f < DT_SETUP_N && len < n; f++)
        if (!which || which[f]) {
            int w = snprintf(b + len, n - len, "%s%s %s", len ? "; " : "", dt_setup_names[f],
                             r->setup[f] ? r->setup[f] : "?");
            len += w > 0 ? (size_t)w : 0;
        }
}

static int rated(const dt_run *r)
{
    return isfinite(r->img_s) && r->img_s > 0;
}

/* the index of the first run of i's configuration in [i0, i1) with a rate; i itself when first */
static size_t config_first(const dt_run_set *s, size_t i0, size_t i)
{
    for (size_t k = i0; k < i; k++)
        if (rated(&s->runs[k]) && same_config(&s->runs[k], &s->runs[i]))
            return k;
    return i;
}

/* 1 when the configuration starting at run f has runs of more than one size */
static int config_scales(const dt_run_set *s, size_t f, size_t i1)
{
    for (size_t k = f + 1; k < i1; k++)
        if (rated(&s->runs[k]) && same_config(&s->runs[k], &s->runs[f]) &&
            s->runs[k].world_size != s->runs[f].world_size)
            return 1;
    return 0;
}

static int has_throughput(const dt_run_set *s, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++)
        if (rated(&s->runs[i]) && config_first(s, i0, i) == i && config_scales(s, i, i1))
            return 1;
    return 0;
}

/* The loss scale's points: step lines (x = global step), a restart's replayed steps replacing the
 * ones they repeat; without any, epoch lines (x = their step). Returns the count; x, y hold
 * n_step_lines + n_epoch_lines. */
static size_t loss_points(const dt_run *r, double *x, double *y)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_step_lines; i++) {
        const dt_run_step *t = &r->step_lines[i];
        if (t->step < 0 || !isfinite(t->loss_scale))
            continue;
        while (n > 0 && x[n - 1] >= (double)t->step)
            n--;
        x[n] = (double)t->step;
        y[n++] = t->loss_scale;
    }
    if (n) /* else from the epoch lines */
        return n;
    for (size_t k = 0; k < r->n_epoch_lines; k++)
        if (r->epoch_lines[k].step >= 0 && isfinite(r->epoch_lines[k].loss_scale) &&
            (!n || x[n - 1] < (double)r->epoch_lines[k].step)) {
            x[n] = (double)r->epoch_lines[k].step;
            y[n++] = r->epoch_lines[k].loss_scale;
        }
    return n;
}

static int wants_loss_scale(const dt_run *r)
{
    int not_one = 0, any = 0;
    for (size_t i = 0; i < r->n_step_lines; i++)
        if (r->step_lines[i].step >= 0 && isfinite(r->step_lines[i].loss_scale)) {
            any = 1;
            not_one |= r->step_lines[i].loss_scale != 1;
        }
    for (size_t i = 0; i < r->n_epoch_lines; i++)
        if (isfinite(r->epoch_lines[i].loss_scale)) {
            any |= r->epoch_lines[i].step >= 0;
            not_one |= r->epoch_lines[i].loss_scale != 1;
        }
    return any && (r->dynamic_scale || not_one);
}

/* --- Markdown ---------------------------------------------------------------------------------- */

/* text in a table cell, heading or link text: Markdown's specials escaped, controls as '?' */
static void md_text(FILE *f, const char *t)
{
    for (; *t; t++) {
        unsigned char c = (unsigned char)*t;
        if (c < 0x20 || c == 0x7f)
            fputc('?', f);
        else {
            if (strchr("\\`*_[]<>|#!~", c))
                fputc('\\', f);
            fputc(c, f);
        }
    }
}

/* a link target: the plots' folder and a file, percent-encoded outside [A-Za-z0-9._~/-] */
static void md_href(FILE *f, const char *dir, const char *file)
{
    char path[8400];
    if (!strcmp(dir, "."))
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/%s", dir, file);
    for (const char *p = path; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._~/-", c))
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

static void fmt_dur(char *b, size_t n, double s)
{
    if (!isfinite(s) || s < 0) {
        snprintf(b, n, DASH);
        return;
    }
    if (s < 59.95) {
        snprintf(b, n, "%.1f s", s);
        return;
    }
    long t = lround(s);
    if (t < 3600)
        snprintf(b, n, "%ldm %02lds", t / 60, t % 60);
    else {
        long m = lround(s / 60);
        snprintf(b, n, "%ldh %02ldm", m / 60, m % 60);
    }
}

static void fmt_num(char *b, size_t n, double x, int digits, const char *unit)
{
    if (isfinite(x))
        snprintf(b, n, "%.*f%s", digits, x, unit);
    else
        snprintf(b, n, DASH);
}

static void fmt_best(char *b, size_t n, double x, int epoch)
{
    if (isfinite(x))
        snprintf(b, n, "%.2f (%d)", x, epoch);
    else
        snprintf(b, n, DASH);
}

static void fmt_opt(char *b, size_t n, const dt_run *r)
{
    if (r->opt_level < 0)
        snprintf(b, n, "?");
    else if (r->opt_level == 0)
        snprintf(b, n, "O0");
    else
        snprintf(b, n, "O%d %s", r->opt_level, r->precision);
}

/* 1 when the ranks are GPUs: dtrain's CUDA device, one GPU per rank */
static int on_gpus(const dt_run *r)
{
    return !strcmp(r->device, "cuda");
}

/* 1 when run.json's layout holds for every node: its ranks_per_node is rank 0's node's count, so
 * nodes x that is the world size only when the ranks are spread evenly (or look so) */
static int even_layout(const dt_run *r)
{
    return r->nodes > 0 && r->ranks_per_node > 0 && (long long)r->nodes * r->ranks_per_node == r->world_size;
}

/* the ranks column: "8 GPUs (2 x 4)", "2 ranks (1 x 2)", "3 ranks (2 nodes, uneven)", "4 GPUs (?)" */
static void fmt_ranks(char *b, size_t n, const dt_run *r)
{
    const char *unit = on_gpus(r) ? (r->world_size == 1 ? "GPU" : "GPUs") : (r->world_size == 1 ? "rank" : "ranks");
    if (even_layout(r))
        snprintf(b, n, "%d %s (%d x %d)", r->world_size, unit, r->nodes, r->ranks_per_node);
    else if (r->nodes > 0)
        snprintf(b, n, "%d %s (%d node%s%s)", r->world_size, unit, r->nodes, r->nodes == 1 ? "" : "s",
                 r->ranks_per_node > 0 ? ", uneven" : "");
    else
        snprintf(b, n, "%d %s (?)", r->world_size, unit);
}

static void md_row(FILE *f, const dt_run *r, int acc_column, const int *differ)
{
    char c[8][64];
    fputs("| ", f);
    md_text(f, r->name);
    if (r->in_progress)
        fputs(" (in progress)", f);
    else if (r->stopped)
        fputs(" (stopped)", f);
    fmt_ranks(c[0], sizeof c[0], r);
    fprintf(f, " | %s | ", c[0]);
    md_text(f, r->device);
    if (r->global_batch > 0)
        snprintf(c[0], sizeof c[0], "%d", r->global_batch);
    else
        snprintf(c[0], sizeof c[0], DASH);
    fmt_opt(c[1], sizeof c[1], r);
    fprintf(f, " | %d | %s | %s", r->batch_per_rank, c[0], c[1]);
    if (differ) { /* the table holds several setups: what this run's is */
        char setup[1200];
        fmt_setup(setup, sizeof setup, r, differ);
        fputs(" | ", f);
        md_text(f, setup);
    }
    fprintf(f, " | %zu/%d", r->n_epoch_lines, r->epochs);
    fmt_num(c[0], sizeof c[0], r->img_s, 1, "");
    fmt_num(c[1], sizeof c[1], r->speedup, 2, "x");
    fmt_num(c[2], sizeof c[2], r->efficiency, 1, "%");
    fmt_dur(c[3], sizeof c[3], r->epoch_time);
    fmt_dur(c[4], sizeof c[4], r->train_time);
    fmt_best(c[5], sizeof c[5], r->best_top1, r->best_top1_epoch);
    fmt_best(c[6], sizeof c[6], r->best_top5, r->best_top5_epoch);
    fprintf(f, " | %s | %s | %s | %s | %s | %s | %s |", c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
    if (acc_column) {
        if (!isfinite(r->desired_acc))
            fputs(" " DASH " |", f);
        else if (r->acc_epoch < 0)
            fprintf(f, " not reached (%g%%) |", r->desired_acc);
        else {
            fmt_dur(c[7], sizeof c[7], r->time_to_acc);
            fprintf(f, " %s (%g%% at %d) |", c[7], r->desired_acc, r->acc_epoch);
        }
    }
    fputc('\n', f);
}

static void md_plots(FILE *f, const dt_run_set *s, size_t i0, size_t i1, const char *href)
{
    char file[700];
    if (has_throughput(s, i0, i1)) {
        group_stem(s, i0, file, sizeof file - 32);
        strcat(file, "-throughput.svg");
        fputs("\n![", f);
        md_text(f, s->runs[i0].arch);
        fputs(" on ", f);
        md_text(f, s->runs[i0].dataset);
        fputs(": train img/s against ranks](", f);
        md_href(f, href, file);
        fputs(")\n", f);
    }
    static const char *const kinds[][2] = {{"top1", "top-1"}, {"top5", "top-5"}, {"loss-scale", "loss scale"}};
    for (size_t i = i0; i < i1; i++) {
        const dt_run *r = &s->runs[i];
        fputs("\n", f);
        md_text(f, r->name);
        fputc(':', f);
        for (int k = 0; k < 3; k++) {
            if (k == 2 && !wants_loss_scale(r))
                continue;
            snprintf(file, sizeof file, "%s-%s.svg", r->stem, kinds[k][0]);
            fputs(" ![", f);
            md_text(f, r->name);
            fprintf(f, " %s](", kinds[k][1]);
            md_href(f, href, file);
            fputc(')', f);
        }
        fputc('\n', f);
    }
}

static int cmp_dir(const void *a, const void *b)
{
    return strcmp((*(const dt_run *const *)a)->dir, (*(const dt_run *const *)b)->dir);
}

static int finish(FILE *out, const char *what)
{
    if (fflush(out) != 0 || ferror(out)) {
        dt_error("writing the %s report: %s", what, strerror(errno));
        return DT_ERR_SYS;
    }
    return DT_OK;
}

int dt_report_md(FILE *f, const dt_run_set *s, const dt_report_opts *o)
{
    struct tm tm;
    char date[32] = "?";
    if (gmtime_r(&o->date, &tm))
        strftime(date, sizeof date, "%Y-%m-%d", &tm);
    fputs("# Training results\n\nRuns under ", f);
    for (size_t i = 0; i < s->n_sources; i++) {
        fputs(i ? ", " : "", f);
        md_text(f, s->sources[i]);
    }
    fprintf(f, "; report of %s (UTC).\n\n", date);
    fputs("Train img/s is the median over the print intervals, each epoch's first (warm-up) left out. Speed-up "
          "and efficiency compare a run with the run of fewest ranks of the same arch, dataset, device, per-rank "
          "batch, opt level and setup (" DASH " for that run itself, or when it is alone); the setup is the "
          "recipe, optimizer, lr schedule, crop, augmentation, mixup/cutmix, EMA and DDP settings, shown in a "
          "column where a table's runs differ in it. Times are training seconds "
          "(validation left out). Epochs count from 0, as dtrain logs them; best top-1 and top-5 are validation "
          "accuracies, with their epoch.\n",
          f);
    size_t i0 = 0;
    for (; i0 < s->n && dt_run_in_table(&s->runs[i0]);) {
        size_t i1 = group_end(s, i0);
        int acc = 0, differ[DT_SETUP_N], setups = setups_differ(s, i0, i1, differ) > 0;
        for (size_t i = i0; i < i1; i++)
            acc |= isfinite(s->runs[i].desired_acc);
        fputs("\n## ", f);
        md_text(f, s->runs[i0].arch);
        fputs(" on ", f);
        md_text(f, s->runs[i0].dataset);
        fputs("\n\n| run | ranks (nodes x per node) | device | batch/rank | global batch | opt level | ", f);
        fputs(setups ? "setup | epochs | " : "epochs | ", f);
        fputs("train img/s | "
              "speed-up | efficiency | time/epoch | train time | best top-1 % (epoch) | best top-5 % (epoch) |",
              f);
        fputs(acc ? " time to desired top-1 |\n" : "\n", f);
        fputs(setups ? "|:---|---:|:---|---:|---:|:---|:---|" : "|:---|---:|:---|---:|---:|:---|", f);
        fputs("---:|---:|---:|---:|---:|---:|---:|---:|", f);
        fputs(acc ? "---:|\n" : "\n", f);
        for (size_t i = i0; i < i1; i++)
            md_row(f, &s->runs[i], acc, setups ? differ : NULL);
        if (setups) /* never one study of runs that train differently */
            fputs("\nThese runs differ in setup: each setup is a study of its own, with its own baseline; rows of "
                  "different setups are not compared (\"?\": their run.json does not say).\n",
                  f);
        if (o->plots_href)
            md_plots(f, s, i0, i1, o->plots_href);
        i0 = i1;
    }
    if (!i0)
        fputs("\nNo run has a complete epoch yet.\n", f);
    const dt_run **noted = malloc((s->n ? s->n : 1) * sizeof *noted);
    if (!noted) {
        dt_error("out of memory writing the report");
        return DT_ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->runs[i].n_notes)
            noted[n++] = &s->runs[i];
    qsort(noted, n, sizeof *noted, cmp_dir);
    if (n)
        fputs("\n## Skipped or partial runs\n\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs("- ", f);
        md_text(f, noted[i]->dir);
        for (size_t k = 0; k < noted[i]->n_notes; k++) {
            fputs(k ? "; " : ": ", f);
            md_text(f, noted[i]->notes[k].text);
        }
        fputc('\n', f);
    }
    free(noted);
    return finish(f, "Markdown");
}

/* --- CSV and JSON ------------------------------------------------------------------------------ */

static const char *const state_names[] = {"ok", "partial", "skipped"};

static void csv_text(FILE *f, const char *t)
{
    if (!t || !strpbrk(t, ",\"\r\n")) {
        fputs(t ? t : "", f);
        return;
    }
    fputc('"', f);
    for (; *t; t++) {
        if (*t == '"')
            fputc('"', f);
        fputc(*t, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, ",%.10g", x);
    else
        fputc(',', f);
}

static void csv_int(FILE *f, long long v)
{
    if (v >= 0)
        fprintf(f, ",%lld", v);
    else
        fputc(',', f);
}

int dt_report_csv(FILE *f, const dt_run_set *s)
{
    fputs("run,dir,arch,dataset,device,nodes,ranks_per_node,ranks,batch_per_rank,global_batch,opt_level,precision,"
          "epochs_done,epochs,state,in_progress,img_per_s,speedup,efficiency_pct,baseline,epoch_time_s,train_time_s,"
          "best_top1,best_top1_epoch,best_top5,best_top5_epoch,desired_acc,time_to_acc_s,acc_epoch,recipe,setup,"
          "notes\n",
          f);
    for (size_t i = 0; i < s->n; i++) {
        const dt_run *r = &s->runs[i];
        int row = dt_run_in_table(r);
        csv_text(f, r->name);
        const char *t[] = {r->dir, r->arch, r->dataset, r->device};
        for (int k = 0; k < 4; k++) {
            fputc(',', f);
            csv_text(f, t[k]);
        }
        csv_int(f, r->nodes);
        csv_int(f, even_layout(r) ? r->ranks_per_node : -1);
        csv_int(f, r->world_size);
        csv_int(f, r->batch_per_rank);
        csv_int(f, r->global_batch);
        csv_int(f, r->opt_level);
        fputc(',', f);
        csv_text(f, r->precision);
        csv_int(f, row ? (long long)r->n_epoch_lines : -1);
        csv_int(f, r->epochs);
        fprintf(f, ",%s,%d", state_names[r->state], r->in_progress);
        csv_num(f, r->img_s);
        csv_num(f, r->speedup);
        csv_num(f, r->efficiency);
        fputc(',', f);
        csv_text(f, r->baseline >= 0 ? s->runs[r->baseline].name : NULL);
        csv_num(f, r->epoch_time);
        csv_num(f, r->train_time);
        csv_num(f, r->best_top1);
        csv_int(f, r->best_top1_epoch);
        csv_num(f, r->best_top5);
        csv_int(f, r->best_top5_epoch);
        csv_num(f, r->desired_acc);
        csv_num(f, r->time_to_acc);
        csv_int(f, r->acc_epoch);
        char setup[1200];
        fmt_setup(setup, sizeof setup, r, NULL);
        fputc(',', f);
        csv_text(f, r->setup[DT_SETUP_RECIPE]);
        fputc(',', f);
        csv_text(f, r->have_config ? setup : NULL);
        fputc(',', f);
        size_t len = 1;
        for (size_t k = 0; k < r->n_notes; k++)
            len += strlen(r->notes[k].text) + 2;
        char *notes = calloc(len, 1);
        if (!notes) {
            dt_error("out of memory writing the report");
            return DT_ERR_NOMEM;
        }
        for (size_t k = 0; k < r->n_notes; k++) {
            if (k)
                strcat(notes, "; ");
            strcat(notes, r->notes[k].text);
        }
        csv_text(f, notes);
        free(notes);
        fputc('\n', f);
    }
    return finish(f, "CSV");
}

/* a JSON string of t, or null; bytes that are not UTF-8 (a directory's name) become '?' */
static json_t *jstr(const char *t)
{
    if (!t)
        return json_null();
    json_t *j = json_string(t);
    if (j)
        return j;
    char *c = strdup(t);
    if (!c)
        return NULL;
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(c);
    free(c);
    return j;
}

static json_t *jnum(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *jint(long long v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static int set(json_t *o, const char *key, json_t *v)
{
    return !v || json_object_set_new(o, key, v) != 0;
}

int dt_report_json(FILE *f, const dt_run_set *s)
{
    json_t *a = json_array();
    int bad = !a;
    for (size_t i = 0; i < s->n && !bad; i++) {
        const dt_run *r = &s->runs[i];
        int row = dt_run_in_table(r);
        json_t *o = json_object(), *notes = json_array();
        bad = !o || !notes || json_array_append_new(a, o);
        if (bad) {
            json_decref(notes);
            break;
        }
        for (size_t k = 0; k < r->n_notes && !bad; k++)
            bad = json_array_append_new(notes, jstr(r->notes[k].text)) != 0;
        bad = bad || set(o, "run", jstr(r->name)) || set(o, "dir", jstr(r->dir)) || set(o, "source", jstr(r->source)) ||
              set(o, "state", json_string(state_names[r->state])) ||
              set(o, "in_progress", json_boolean(r->in_progress)) || set(o, "stopped", json_boolean(r->stopped)) ||
              set(o, "end", r->ended ? json_string(r->end_reason) : json_null()) || set(o, "arch", jstr(r->arch)) ||
              set(o, "dataset", jstr(r->dataset)) || set(o, "device", jstr(r->device)) ||
              set(o, "nodes", jint(r->nodes)) || set(o, "ranks_per_node", jint(even_layout(r) ? r->ranks_per_node : -1)) ||
              set(o, "ranks", jint(r->world_size)) || set(o, "batch_per_rank", jint(r->batch_per_rank)) ||
              set(o, "global_batch", jint(r->global_batch)) || set(o, "opt_level", jint(r->opt_level)) ||
              set(o, "precision", jstr(r->precision)) ||
              set(o, "epochs_done", jint(row ? (long long)r->n_epoch_lines : -1)) ||
              set(o, "epochs", jint(r->epochs)) || set(o, "img_per_s", jnum(r->img_s)) ||
              set(o, "speedup", jnum(r->speedup)) || set(o, "efficiency_pct", jnum(r->efficiency)) ||
              set(o, "baseline", jstr(r->baseline >= 0 ? s->runs[r->baseline].name : NULL)) ||
              set(o, "epoch_time_s", jnum(r->epoch_time)) || set(o, "train_time_s", jnum(r->train_time)) ||
              set(o, "best_top1", jnum(r->best_top1)) || set(o, "best_top1_epoch", jint(r->best_top1_epoch)) ||
              set(o, "best_top5", jnum(r->best_top5)) || set(o, "best_top5_epoch", jint(r->best_top5_epoch)) ||
              set(o, "desired_acc", jnum(r->desired_acc)) || set(o, "time_to_acc_s", jnum(r->time_to_acc)) ||
              set(o, "acc_epoch", jint(r->acc_epoch)) || set(o, "recipe", jstr(r->setup[DT_SETUP_RECIPE]));
        json_t *setup = json_object(); /* the setup's fields, null where run.json does not say */
        for (int k = 0; k < DT_SETUP_N && setup && !bad; k++)
            bad = set(setup, dt_setup_names[k], jstr(r->setup[k]));
        if (set(o, "setup", setup))
            bad = 1;
        if (set(o, "notes", notes))
            bad = 1;
    }
    if (bad || json_dumpf(a, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) != 0 ||
        fputc('\n', f) == EOF) {
        json_decref(a);
        dt_error("writing the JSON report: %s", bad ? "out of memory" : strerror(errno));
        return bad ? DT_ERR_NOMEM : DT_ERR_SYS;
    }
    json_decref(a);
    return finish(f, "JSON");
}

/* --- plots ------------------------------------------------------------------------------------- */

static int plot(const char *dir, const char *file, const dt_svg_chart *c)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return dt_svg_write(path, c) == 0 ? DT_OK : DT_ERR_SYS;
}

static int run_plots(const dt_run *r, const char *dir)
{
    size_t n = r->n_epoch_lines, m = r->n_step_lines + r->n_epoch_lines;
    double *b = malloc((5 * n + 2 * m + 1) * sizeof *b);
    if (!b) {
        dt_error("out of memory for the plots of %s", r->dir);
        return DT_ERR_NOMEM;
    }
    double *x = b, *t1 = b + n, *v1 = b + 2 * n, *t5 = b + 3 * n, *v5 = b + 4 * n, *lx = b + 5 * n, *ly = lx + m;
    int val = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = r->epoch_lines[i].epoch;
        t1[i] = r->epoch_lines[i].train_top1;
        v1[i] = r->epoch_lines[i].val_top1;
        t5[i] = r->epoch_lines[i].train_top5;
        v5[i] = r->epoch_lines[i].val_top5;
        val |= isfinite(v1[i]) || isfinite(v5[i]);
    }
    char file[700], title[700];
    int rc = DT_OK;
    for (int k = 0; k < 2 && rc == DT_OK; k++) {
        dt_svg_series ser[2] = {{.label = "train", .x = x, .y = k ? t5 : t1, .n = n},
                                {.label = "val", .x = x, .y = k ? v5 : v1, .n = n}};
        snprintf(title, sizeof title, "%s: top-%d", r->name, k ? 5 : 1);
        dt_svg_chart c = {.title = title, .xlabel = "epoch", .ylabel = k ? "top-5 (%)" : "top-1 (%)", .series = ser,
                          .n_series = val ? 2 : 1, .fixed_y = 1, .y_min = 0, .y_max = 100, .integer_x = 1};
        snprintf(file, sizeof file, "%s-top%d.svg", r->stem, k ? 5 : 1);
        rc = plot(dir, file, &c);
    }
    if (rc == DT_OK && wants_loss_scale(r)) {
        size_t k = loss_points(r, lx, ly);
        dt_svg_series ser = {.label = "loss scale", .x = lx, .y = ly, .n = k};
        snprintf(title, sizeof title, "%s: loss scale", r->name);
        dt_svg_chart c = {.title = title, .xlabel = "step", .ylabel = "loss scale", .series = &ser, .n_series = 1,
                          .log_y = 1};
        snprintf(file, sizeof file, "%s-loss-scale.svg", r->stem);
        rc = plot(dir, file, &c);
    }
    free(b);
    return rc;
}

/* train img/s against ranks, one series per configuration with several sizes (the median of the
 * runs of one size) and its dashed ideal line from its smallest size */
static int throughput_plot(const dt_run_set *s, size_t i0, size_t i1, const char *dir)
{
    size_t n = i1 - i0;
    double *b = malloc((4 * n * DT_SVG_MAX_SERIES / 2 + n + 1) * sizeof *b), *tmp = b;
    char labels[DT_SVG_MAX_SERIES][220];
    dt_svg_series ser[DT_SVG_MAX_SERIES];
    if (!b) {
        dt_error("out of memory for a throughput plot");
        return DT_ERR_NOMEM;
    }
    double *pool = b + n, ymax = 0;
    int ns = 0, gpus = 1; /* the x axis says GPUs only when every line is of CUDA runs */
    int differ[DT_SETUP_N], differ_any = setups_differ(s, i0, i1, differ) > 0; /* labels say the setup */
    for (size_t f = i0; f < i1 && ns + 2 <= DT_SVG_MAX_SERIES; f++) {
        if (!rated(&s->runs[f]) || config_first(s, i0, f) != f || !config_scales(s, f, i1))
            continue;
        double *x = pool, *y = pool + n, *ix = pool + 2 * n, *iy = pool + 3 * n;
        pool += 4 * n;
        size_t np = 0;
        for (size_t k = f; k < i1;) { /* runs are ordered by ranks: one point per size */
            size_t m = 0;
            int ranks = s->runs[k].world_size;
            size_t e = k;
            for (; e < i1 && s->runs[e].world_size == ranks; e++)
                if (rated(&s->runs[e]) && same_config(&s->runs[e], &s->runs[f]))
                    tmp[m++] = s->runs[e].img_s;
            if (m) {
                for (size_t u = 1; u < m; u++) /* insertion sort for the median */
                    for (size_t v = u; v > 0 && tmp[v - 1] > tmp[v]; v--) {
                        double t = tmp[v];
                        tmp[v] = tmp[v - 1];
                        tmp[v - 1] = t;
                    }
                x[np] = ranks;
                y[np] = m % 2 ? tmp[m / 2] : 0.5 * (tmp[m / 2 - 1] + tmp[m / 2]);
                np++;
            }
            k = e;
        }
        for (size_t p = 0; p < np; p++) {
            ix[p] = x[p];
            iy[p] = y[0] * x[p] / x[0];
            ymax = fmax(ymax, fmax(y[p], iy[p]));
        }
        const dt_run *r = &s->runs[f];
        gpus &= on_gpus(r);
        char opt[64], cfg[200], setup[1200] = "";
        fmt_opt(opt, sizeof opt, r);
        if (differ_any)
            fmt_setup(setup, sizeof setup, r, differ);
        snprintf(cfg, sizeof cfg, "%.60s b%d %.20s%s%.80s", r->device, r->batch_per_rank, opt, *setup ? ", " : "",
                 setup);
        snprintf(labels[ns], sizeof labels[ns], "%s", cfg);
        snprintf(labels[ns + 1], sizeof labels[ns + 1], "ideal (%s)", cfg);
        ser[ns] = (dt_svg_series){.label = labels[ns], .x = x, .y = y, .n = np};
        ser[ns + 1] = (dt_svg_series){.label = labels[ns + 1], .x = ix, .y = iy, .n = np, .dashed = 1};
        ns += 2;
    }
    char file[700], title[700];
    snprintf(title, sizeof title, "%s on %s: train img/s", s->runs[i0].arch, s->runs[i0].dataset);
    dt_svg_chart c = {.title = title, .xlabel = gpus ? "GPUs" : "ranks", .ylabel = "img/s", .series = ser, .n_series = ns,
                      .fixed_y = 1, .y_min = 0, .y_max = ymax * 1.05, .integer_x = 1};
    group_stem(s, i0, file, sizeof file - 32);
    strcat(file, "-throughput.svg");
    int rc = plot(dir, file, &c);
    free(b);
    return rc;
}

int dt_report_plots(const dt_run_set *s, const char *dir)
{
    for (size_t i0 = 0; i0 < s->n && dt_run_in_table(&s->runs[i0]);) {
        size_t i1 = group_end(s, i0);
        for (size_t i = i0; i < i1; i++)
            DT_TRY(run_plots(&s->runs[i], dir));
        if (has_throughput(s, i0, i1))
            DT_TRY(throughput_plot(s, i0, i1, dir));
        i0 = i1;
    }
    return DT_OK;
}

int dt_report_relpath(const char *from, const char *to, char *out, size_t n)
{
    if (from[0] != '/' || to[0] != '/' || n < 2)
        return DT_ERR_INPUT;
    /* the longest common prefix of whole components */
    size_t common = 0, i = 0;
    for (;; i++) {
        char a = from[i], b = to[i];
        if ((a == '/' || !a) && (b == '/' || !b))
            common = i;
        if (!a || !b || a != b)
            break;
    }
    out[0] = 0;
    size_t len = 0;
    for (const char *p = from + common; *p; p++) /* one ".." per component of from left */
        if (*p == '/' && p[1] && p[1] != '/') {
            int w = snprintf(out + len, n - len, "%s..", len ? "/" : "");
            if (w < 0 || (size_t)w >= n - len)
                return DT_ERR_INPUT;
            len += (size_t)w;
        }
    const char *rest = to + common;
    while (*rest == '/')
        rest++;
    int w = snprintf(out + len, n - len, "%s%s", len && *rest ? "/" : "", rest);
    if (w < 0 || (size_t)w >= n - len)
        return DT_ERR_INPUT;
    if (!out[0])
        snprintf(out, n, ".");
    return DT_OK;
}
