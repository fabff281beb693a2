/* flags.c: dtrain's table of options (train/flags.h) made into data, and what reads it: the
 * defaults, the parser of one value, getopt_long's table, run.json's record and --help's lines. */
#include "config.h"

#include "train/flags.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "data/image.h"
#include "libdt/comm.h"
#include "nn/model.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

_Static_assert(sizeof(long) == 8, "--seed and the 2^40 ranges are parsed as long");

const char *const dt_flags_opt_levels[] = {"O0", "O1", "O2", "O3", NULL};
const char *const dt_flags_precisions[] = {"fp16", "bf16", NULL};
const char *const dt_flags_devices[] = {"cpu", "cuda", "auto", NULL}; /* cfg.h: DT_DEVICE_AUTO is auto's */
const char *const dt_flags_dist_backends[] = {"nccl", "mpi", NULL};
_Static_assert(DT_DEVICE_AUTO == 2, "auto is dt_flags_devices[2]");

const dt_flag dt_flags[DT_FLAG_COUNT] = {
#define DT_FLAG_ROW_(id_, ...) [DT_FLAG_##id_] = {.id = DT_FLAG_##id_, __VA_ARGS__},
    DT_FLAGS(DT_FLAG_ROW_)
#undef DT_FLAG_ROW_
};

static void *field(const dt_flag *f, dt_train_cfg *cfg)
{
    return (char *)cfg + f->offset;
}

/* a number into f's field, as the field's type */
static void store(const dt_flag *f, dt_train_cfg *cfg, double v)
{
    void *p = field(f, cfg);
    switch (f->type) {
    case DT_FT_INT: *(int *)p = (int)v; break;
    case DT_FT_LONG: *(long *)p = (long)v; break;
    case DT_FT_U64: *(uint64_t *)p = (uint64_t)v; break;
    case DT_FT_DOUBLE: *(double *)p = v; break;
    default: break;
    }
}

void dt_train_defaults(dt_train_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        if (f->kind == DT_FK_PROGRAM || f->kind == DT_FK_COMMON || f->kind == DT_FK_REFUSED || f->id == DT_FLAG_AMP)
            continue; /* no field, or another row's (--amp's is --opt-level's) */
        if (f->kind == DT_FK_LIST) /* a default the table's test parses too (tests/unit/test_flags.c) */
            dt_flags_set(f, f->def_text, 0, cfg);
        else if (f->type == DT_FT_TEXT)
            *(const char **)field(f, cfg) = f->def_text;
        else
            store(f, cfg, f->def);
    }
    cfg->cudnn_search_s = 1; /* part of --cudnn-search's value: bounded's cap (bounded:1) */
}

int dt_flags_set(const dt_flag *f, const char *text, int off, dt_train_cfg *cfg)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", f->name);
    return dt_flags_set_as(f, flag, text, off, cfg);
}

int dt_flags_set_as(const dt_flag *f, const char *flag, const char *text, int off, dt_train_cfg *cfg)
{
    long v;
    double d;
    bool b;
    int i;
    switch (f->kind) {
    case DT_FK_LONG:
        if (dt_parse_long(flag, text, (long)f->lo, (long)f->hi, &v) != DT_OK)
            return DT_ERR_INPUT; /* after its line */
        store(f, cfg, (double)v); /* exact: every range is within 2^53 */
        return DT_OK;
    case DT_FK_DOUBLE:
        if (dt_parse_double(flag, text, f->lo, f->hi, &d) != DT_OK)
            return DT_ERR_INPUT; /* after its line */
        store(f, cfg, d);
        return DT_OK;
    case DT_FK_CHOICE:
        if ((f->nocase ? dt_parse_choice_nocase : dt_parse_choice)(flag, text, f->choices, &i) != DT_OK)
            return DT_ERR_INPUT; /* after its line */
        *(int *)field(f, cfg) = i;
        return DT_OK;
    case DT_FK_BOOL:
        if (dt_parse_bool(flag, text, &b) != DT_OK)
            return DT_ERR_INPUT; /* after its line */
        *(int *)field(f, cfg) = b;
        return DT_OK;
    case DT_FK_TEXT: *(const char **)field(f, cfg) = text; return DT_OK;
    case DT_FK_LIST: {
        long *items = field(f, cfg);
        return dt_parse_long_list(flag, text, (long)f->lo, (long)f->hi, items, 16, (int *)((char *)cfg + f->count));
    }
    case DT_FK_SWITCH: /* from the environment: its text says on or off */
        if (text && dt_parse_bool(flag, text, &b) != DT_OK)
            return DT_ERR_INPUT; /* after its line */
        *(int *)field(f, cfg) = text ? b : !off;
        return DT_OK;
    case DT_FK_OWN: return f->parse(f, flag, text, cfg);
    case DT_FK_REFUSED: { /* its --help text, on one line */
        char line[512];
        size_t k = 0;
        for (const char *p = f->help; *p && k < sizeof line - 1; p++)
            line[k++] = *p == '\n' ? ' ' : *p;
        line[k] = 0;
        dt_error("%s: %s", flag, line);
        return DT_ERR_INPUT;
    }
    default: return DT_ERR_INPUT;
    }
}
_Static_assert(sizeof(((dt_train_cfg *)0)->lr_steps) == 16 * sizeof(long), "the one list: 16 milestones");

void dt_flags_getopt(struct option *opts, char *shortopts)
{
    int k = 0, s = 0;
    shortopts[s++] = ':'; /* a missing value is ':', for dt_cli_common's line */
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        if (f->kind == DT_FK_OPERAND)
            continue;
        int has = f->meta ? required_argument : no_argument, val = f->key ? f->key : DT_FLAG_VAL(i);
        opts[k++] = (struct option){f->name, has, NULL, val};
        if (f->alias) /* the same value: getopt_long takes an abbreviation of both as one option */
            opts[k++] = (struct option){f->alias, has, NULL, val};
        if (f->off)
            opts[k++] = (struct option){f->off, no_argument, NULL, DT_FLAG_OFF_VAL(i)};
        if (f->key) {
            shortopts[s++] = f->key;
            if (f->meta)
                shortopts[s++] = ':';
        }
    }
    opts[k] = (struct option){0};
    shortopts[s] = 0;
}

const dt_flag *dt_flags_of_val(int val, int *off)
{
    *off = 0;
    if (val >= DT_FLAG_OFF_VAL(0) && val < DT_FLAG_OFF_VAL(DT_FLAG_COUNT)) {
        *off = 1;
        return &dt_flags[val - DT_FLAG_OFF_VAL(0)];
    }
    if (val >= DT_FLAG_VAL(0) && val < DT_FLAG_VAL(DT_FLAG_COUNT))
        return &dt_flags[val - DT_FLAG_VAL(0)];
    for (int i = 0; i < DT_FLAG_COUNT && val > 0; i++)
        if (dt_flags[i].key == val)
            return &dt_flags[i];
    return NULL;
}

void dt_flags_note(dt_train_cfg *cfg, const dt_flag *f, const char *text, int on)
{
    int i = 0;
    while (i < cfg->n_options && strcmp(cfg->options[i].name, f->name))
        i++;
    if (i == cfg->n_options && cfg->n_options == DT_TRAIN_MAX_OPTIONS)
        return; /* not reached: fewer options than that exist */
    cfg->n_options += i == cfg->n_options;
    cfg->options[i] = (dt_train_option){.name = f->name, .value = f->meta ? text : NULL, .on = on};
}
_Static_assert(DT_FLAG_COUNT <= DT_TRAIN_MAX_OPTIONS, "run.json's record holds every option");

/* --help: a row's text from column col, its lines after the first indented to col, and its alias */
static void usage_row(FILE *out, const dt_flag *f, int col)
{
    char left[96];
    int n = snprintf(left, sizeof left, "  %s%c%s--%s%s%s", f->key ? "-" : " ", f->key ? f->key : ' ',
                     f->key ? ", " : "  ", f->name, f->meta ? " " : "", f->meta ? f->meta : "");
    fputs(left, out);
    fprintf(out, "%*s", n < col ? col - n : 2, ""); /* at least two spaces past the column */
    int at = n < col ? col : n + 2;
    if (f->usage_front)
        f->usage_front(out, at);
    const char *h = f->help ? f->help : "";
    size_t last = 0; /* the length of the line being written */
    for (const char *p = h; *p; p++) {
        if (*p == '\n') {
            fprintf(out, "\n%*s", col, "");
            last = 0;
        } else {
            fputc(*p, out);
            last++;
        }
    }
    if (f->alias) { /* at the end of the last line, or on one of its own past 100 columns */
        if ((size_t)col + last + strlen("; also --") + strlen(f->alias) > 100)
            fprintf(out, ";\n%*salso --%s", col, "", f->alias);
        else
            fprintf(out, "%salso --%s", *h ? "; " : "", f->alias);
    }
    fputc('\n', out);
}

void dt_flags_usage(FILE *out)
{
    int col = 28;
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        if (f->section) {
            fprintf(out, "%s\n", f->section);
            col = f->column ? f->column : 28;
        }
        if (f->kind != DT_FK_OPERAND)
            usage_row(out, f, col);
    }
}

void dt_flags_usage_models(FILE *out, int column)
{
    dt_model_print_names(out, column, 28, 80); /* the table in nn/models.c; room left for the default */
}

/* --- the rows' own parsers (DT_OWN): each DT_OK, or DT_ERR_INPUT after one line --- */

int dt_flags_parse_interpolation(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    if ((cfg->interpolation = dt_filter_parse(text)) >= 0)
        return DT_OK;
    dt_error("%s %s: nearest, bilinear, bicubic, box, hamming or lanczos", flag, text);
    return DT_ERR_INPUT;
}

int dt_flags_parse_auto_augment(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    if ((cfg->auto_augment = dt_aug_policy_parse(text)) >= 0)
        return DT_OK;
    dt_error("%s %s: imagenet, cifar10, svhn, ra or ta_wide (augmix is not built)", flag, text);
    return DT_ERR_INPUT;
}

/* 0..64; 0 is stored as -1 ("none"), since the field's 0 is "not given" (4) */
int dt_flags_parse_crop_padding(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    long v;
    if (dt_parse_long(flag, text, 0, 64, &v) != DT_OK)
        return DT_ERR_INPUT;
    cfg->crop_padding = v ? (int)v : -1;
    return DT_OK;
}

/* "dynamic" or a number (Apex's; dt_amp_resolve reads the text) */
int dt_flags_parse_loss_scale(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    double d;
    if (strcmp(text, "dynamic") != 0 && dt_parse_double(flag, text, 1e-30, 1e30, &d) != DT_OK)
        return DT_ERR_INPUT;
    cfg->amp.loss_scale = text;
    return DT_OK;
}

/* a plain name: it becomes part of a directory's name */
int dt_flags_parse_run_name(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    cfg->run_name = text;
    if (*text && !strchr(text, '/'))
        return DT_OK;
    dt_error("%s %s: a plain name, without '/'", flag, text);
    return DT_ERR_INPUT;
}

/* --cudnn-search MODE: heuristic, bounded, bounded:SECONDS or exhaustive (cfg->cudnn_search, and
 * cfg->cudnn_search_s for bounded) */
int dt_flags_parse_cudnn_search(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    static const char *const modes[] = {"heuristic", "bounded", "exhaustive", NULL};
    (void)f;
    const char *colon = strchr(text, ':');
    char mode[16], e[160];
    if (!colon) { /* bounded alone: the default cap (dt_train_defaults), whatever an earlier flag gave */
        cfg->cudnn_search_s = 1;
        return dt_parse_choice(flag, text, modes, &cfg->cudnn_search);
    }
    if ((size_t)(colon - text) >= sizeof mode || strncmp(text, "bounded:", 8) != 0) {
        snprintf(mode, sizeof mode, "%.*s", (int)(colon - text), text);
        if (dt_parse_choice(flag, mode, modes, &cfg->cudnn_search) == DT_OK)
            dt_error("%s %s: only bounded takes a time cap (bounded:SECONDS)", flag, dt_cli_escape(text, e, sizeof e));
        return DT_ERR_INPUT;
    }
    cfg->cudnn_search = 1;
    char what[96];
    snprintf(what, sizeof what, "%s bounded:SECONDS", flag);
    return dt_parse_double(what, colon + 1, 0.001, 3600, &cfg->cudnn_search_s);
}

/* a fraction, as the PyTorch tutorials give it (0.75 is 75% top-1); 0: never. Above 1 is refused
 * rather than read as a percent: until issue 39 dtrain read percents, and 75 meaning 7500% would
 * never stop while 0.75 meaning 0.75% would stop at once; either silent reading is wrong. */
int dt_flags_parse_desired_acc(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    double d;
    if (dt_parse_double(flag, text, 0, 1e6, &d) != DT_OK)
        return DT_ERR_INPUT;
    if (d > 1) {
        dt_error("%s %s: a fraction of the validation images, 0..1 (0.759 is 75.9%% top-1), as in the PyTorch "
                 "tutorials; dtrain no longer reads percents", flag, text);
        return DT_ERR_INPUT;
    }
    cfg->desired_acc = d;
    return DT_OK;
}

/* env:// only: the ranks meet as their launcher says, which is what env:// means to PyTorch too */
int dt_flags_parse_dist_url(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg)
{
    (void)f;
    char e[160];
    if (!strcmp(text, "env://")) {
        cfg->dist_url = text;
        return DT_OK;
    }
    dt_error("%s %s: dtrain's ranks meet as their launcher says (srun's PMI, mpirun, torchrun's MASTER_ADDR and "
             "MASTER_PORT): give env:// or none, and the address to torchrun (--master_addr, --master_port)",
             flag, dt_cli_escape(text, e, sizeof e));
    return DT_ERR_INPUT;
}

int dt_flags_device_auto(char *why, size_t n)
{
#ifdef HAVE_CUDA
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    int gpus = dt_gpu_count();
    if (gpus > 0) {
        snprintf(why, n, "--device auto: a CUDA build, %d GPU%s visible", gpus, gpus > 1 ? "s" : "");
        return 1;
    }
    snprintf(why, n, "--device auto: a CUDA build, but no GPU visible (CUDA_VISIBLE_DEVICES=%s)",
             visible ? (*visible ? visible : "empty") : "unset");
    return 0;
#else
    snprintf(why, n, "--device auto: this dtrain was built without CUDA");
    return 0;
#endif
}

/* the text run.json's record holds for f (the last value given), or NULL */
static const char *given_text(const dt_flag *f, const dt_train_cfg *cfg)
{
    for (int i = 0; i < cfg->n_options; i++)
        if (!strcmp(cfg->options[i].name, f->name))
            return cfg->options[i].value;
    return NULL;
}

const char *dt_flags_format(const dt_flag *f, const dt_train_cfg *cfg, char *buf, size_t n)
{
    const void *p = (const char *)cfg + f->offset;
    const char *t;
    long v;
    snprintf(buf, n, "-");
    switch (f->kind) {
    case DT_FK_LONG:
        v = f->type == DT_FT_INT ? *(const int *)p : f->type == DT_FT_LONG ? *(const long *)p : (long)*(const uint64_t *)p;
        if (!(v == (long)f->def && f->def < f->lo))
            snprintf(buf, n, "%ld", v);
        break;
    case DT_FK_DOUBLE:
        if (!(*(const double *)p == f->def && f->def < f->lo))
            snprintf(buf, n, "%.15g", *(const double *)p);
        break;
    case DT_FK_CHOICE:
        if (*(const int *)p >= 0)
            snprintf(buf, n, "%s", f->choices[*(const int *)p]);
        break;
    case DT_FK_BOOL:
    case DT_FK_SWITCH:
        if (*(const int *)p >= 0)
            snprintf(buf, n, "%s", *(const int *)p ? (f->kind == DT_FK_BOOL ? "true" : "on") :
                                                    (f->kind == DT_FK_BOOL ? "false" : "off"));
        break;
    case DT_FK_TEXT:
    case DT_FK_OPERAND:
        if ((t = *(const char *const *)p))
            snprintf(buf, n, "%s", t);
        break;
    case DT_FK_LIST: {
        const long *items = p;
        int count = *(const int *)((const char *)cfg + f->count);
        size_t k = 0;
        for (int i = 0; i < count && k < n; i++)
            k += (size_t)snprintf(buf + k, n - k, "%s%ld", i ? "," : "", items[i]);
        break;
    }
    case DT_FK_OWN:
        if ((t = given_text(f, cfg)))
            snprintf(buf, n, "%s", t);
        break;
    default: break;
    }
    return buf;
}
