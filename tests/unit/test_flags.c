/* test_flags.c: dtrain's table of options (train/flags.h) against doc/dtrain.1 and itself. Every
 * flag, alias, off switch and short key of the table is in the man page's OPTIONS section; every
 * option the section lists (the tag line after a .TP) is in the table. A C test rather than a shell
 * test over dtrain --help: it reads the table itself, with nothing hidden in dtrain to show it. And
 * the table's own rules: names once each, getopt_long's table and --help from it, defaults that
 * parse, environment names once each and DT_ in upper case, run.json's record once per option.
 * The man page is $top_srcdir/doc/dtrain.1 (make check sets top_srcdir; "." otherwise). */
#include "config.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "train/flags.h"
#include "util/check.h"

enum { MAX_NAMES = 512 };
typedef struct names {
    char *v[MAX_NAMES];
    int n;
} names;

static int has(const names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return 1;
    return 0;
}

static void names_free(names *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

static void add(names *s, const char *name, size_t len)
{
    char *c = strndup(name, len);
    if (!c || s->n == MAX_NAMES || has(s, c)) {
        free(c);
        return;
    }
    s->v[s->n++] = c;
}

/* the options written in roff on one line: \-\-name (its \- read as -) and \-x, into s */
static void roff_options(const char *line, names *s)
{
    for (const char *p = line; (p = strstr(p, "\\-")) != NULL;) {
        char name[96];
        size_t n = 0;
        int dashes = 0;
        while (!strncmp(p, "\\-", 2) && dashes < 2) {
            name[n++] = '-';
            p += 2;
            dashes++;
        }
        const char *before = p - 2 * dashes; /* the character before the dashes: within a word or a
                                               * number ("1e\-4", "2\-33%") they are no option, after
                                               * a font change ("\fB\-\-lr") they are */
        int font = before - line >= 3 && !strncmp(before - 3, "\\f", 2);
        if (before > line && isalnum((unsigned char)before[-1]) && !font)
            continue;
        while (n < sizeof name - 1 && (isalnum((unsigned char)*p) || *p == '_' || !strncmp(p, "\\-", 2))) {
            name[n++] = *p == '\\' ? '-' : *p;
            p += *p == '\\' ? 2 : 1;
        }
        while (n > 0 && name[n - 1] == '-')
            n--;
        if ((dashes == 2 && n > 2) || (dashes == 1 && n == 2))
            add(s, name, n);
    }
}

/* the man page's OPTIONS section (.SH OPTIONS to the next .SH): every option it names (all), and
 * those it lists (tags: the line after each .TP). 0 when the file or the section is missing. */
static int read_man(const char *path, names *all, names *tags)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int in = 0, seen = 0, tag = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, ".SH", 3)) {
            in = strstr(line, "OPTIONS") != NULL;
            seen |= in;
            continue;
        }
        if (!in)
            continue;
        roff_options(line, all);
        if (tag)
            roff_options(line, tags);
        tag = !strncmp(line, ".TP", 3);
    }
    fclose(f);
    return seen;
}

/* the table's names: "--name", "--alias", "--off", "-k" */
static void table_names(names *s)
{
    char n[96];
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        if (f->kind == DT_FK_OPERAND)
            continue;
        const char *each[] = {f->name, f->alias, f->off};
        for (int k = 0; k < 3; k++)
            if (each[k])
                add(s, n, (size_t)snprintf(n, sizeof n, "--%s", each[k]));
        if (f->key)
            add(s, n, (size_t)snprintf(n, sizeof n, "-%c", f->key));
    }
}

int main(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/doc/dtrain.1", top && *top ? top : ".");
    names all = {0}, tags = {0}, table = {0};
    table_names(&table);

    /* the rows: in order, names once each */
    int ids = 1, unique = 1, envs = 1;
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        ids &= f->id == i && f->name && f->kind;
        for (int j = i + 1; j < DT_FLAG_COUNT; j++) {
            const dt_flag *g = &dt_flags[j];
            const char *a[] = {f->name, f->alias, f->off}, *b[] = {g->name, g->alias, g->off};
            for (int x = 0; x < 3; x++)
                for (int y = 0; y < 3; y++)
                    unique &= !a[x] || !b[y] || strcmp(a[x], b[y]) != 0;
            unique &= !f->key || f->key != g->key;
            if (f->env && g->env && !strcmp(f->env, g->env)) {
                tap_diag("%s and %s: both %s", f->name, g->name, f->env);
                envs = 0;
            }
        }
        if (f->env) {
            int ok = !strncmp(f->env, "DT_", 3);
            for (const char *p = f->env; *p; p++)
                ok &= isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_';
            if (!ok)
                tap_diag("%s: environment name %s", f->name, f->env);
            envs &= ok;
        }
    }
    TAP_OK(ids, "%d rows, each at its id, named, of a kind", DT_FLAG_COUNT);
    TAP_OK(unique, "every name, alias, off switch and key once");
    TAP_OK(envs, "environment names once each, DT_ and upper case");
    TAP_OK(!strcmp(dt_flags[DT_FLAG_ARCH].env, "DT_ARCH") && !strcmp(dt_flags[DT_FLAG_BATCH_SIZE].env, "DT_BATCH") &&
               !strcmp(dt_flags[DT_FLAG_RESULTS].env, "DT_RESULTS") && !strcmp(dt_flags[DT_FLAG_DATA].env, "DT_DATA") &&
               !strcmp(dt_flags[DT_FLAG_LOG_LEVEL].env, "DT_LOG_LEVEL"),
           "the environment names slurm/*.sbatch and the log already use");

    /* getopt_long's table: every name once, with the row's value */
    struct option opts[DT_FLAGS_MAX_OPTS];
    char shortopts[DT_FLAGS_MAX_SHORT];
    dt_flags_getopt(opts, shortopts);
    int n_opts = 0, vals = 1, off;
    for (; opts[n_opts].name; n_opts++) {
        const dt_flag *f = dt_flags_of_val(opts[n_opts].val, &off);
        vals &= f && (!strcmp(opts[n_opts].name, off ? f->off : f->name) || (f->alias && !strcmp(opts[n_opts].name, f->alias)));
    }
    int n_long = 0;
    for (int i = 0; i < table.n; i++)
        n_long += table.v[i][1] == '-';
    TAP_OK(n_opts == n_long && vals, "getopt_long's table: %d names, each back to its row", n_opts);
    TAP_OK(!strcmp(shortopts, ":a:j:b:p:ehV"), "short options %s", shortopts);

    /* the defaults: every one parses; the record holds an option once, the last value */
    dt_train_cfg cfg;
    dt_train_defaults(&cfg);
    TAP_OK(cfg.n_lr_steps == 3 && cfg.lr_steps[2] == 80 && !strcmp(cfg.arch, "resnet50") && cfg.graph == -1 &&
               cfg.interpolation == -1 && cfg.amp.master_weights == -1 && cfg.cudnn_search == 1 && cfg.batch == 64,
           "the defaults");
    int choices = 1;
    for (int i = 0; i < DT_FLAG_COUNT; i++)
        if (dt_flags[i].kind == DT_FK_CHOICE && dt_flags[i].def >= 0) {
            int k = 0;
            while (dt_flags[i].choices[k])
                k++;
            choices &= dt_flags[i].def < k;
        }
    TAP_OK(choices, "each choice's default is one of its choices (or -1, the schedule's own)");
    TAP_OK(dt_flags_set(&dt_flags[DT_FLAG_LARS_ETA], "0.02", 0, &cfg) == DT_OK && cfg.lars_eta == 0.02 &&
               dt_flags_set(&dt_flags[DT_FLAG_SEED], "7", 0, &cfg) == DT_OK && cfg.seed == 7 &&
               dt_flags_set(&dt_flags[DT_FLAG_PRECISION], "bf16", 0, &cfg) == DT_OK && cfg.amp.bf16 == 1 &&
               dt_flags_set(&dt_flags[DT_FLAG_GRAPH], NULL, 1, &cfg) == DT_OK && cfg.graph == 0 &&
               dt_flags_set(&dt_flags[DT_FLAG_OPT], "SGD_Nesterov", 0, &cfg) == DT_OK && cfg.opt == DT_OPTC_SGD_NESTEROV,
           "values into their fields, an off switch, a choice in any case");
    dt_flags_note(&cfg, &dt_flags[DT_FLAG_WD], "0.1", 1);
    dt_flags_note(&cfg, &dt_flags[DT_FLAG_MODEL_EMA], NULL, 1);
    dt_flags_note(&cfg, &dt_flags[DT_FLAG_WD], "0.2", 1);
    dt_flags_note(&cfg, &dt_flags[DT_FLAG_MODEL_EMA], NULL, 0);
    TAP_OK(cfg.n_options == 2 && !strcmp(cfg.options[0].name, "wd") && !strcmp(cfg.options[0].value, "0.2") &&
               !cfg.options[1].value && cfg.options[1].on == 0,
           "run.json's record: once each, the last value");

    /* --help names every flag, alias, off switch and key */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    dt_flags_usage(mem);
    fclose(mem);
    int shown = 1;
    for (int i = 0; i < table.n; i++) {
        char *p = text;
        size_t n = strlen(table.v[i]);
        while ((p = strstr(p, table.v[i])) && (isalnum((unsigned char)p[n]) || p[n] == '-' || (p > text && p[-1] == '-')))
            p += n;
        if (!p)
            tap_diag("%s: not in --help", table.v[i]);
        shown &= p != NULL;
    }
    TAP_OK(shown, "--help names all %d of the table's names", table.n);
    free(text);

    /* the man page */
    if (!read_man(path, &all, &tags)) {
        TAP_OK(0, "%s: no OPTIONS section (top_srcdir?)", path);
        names_free(&all);
        names_free(&tags);
        names_free(&table);
        return tap_done();
    }
    int documented = 1, listed = 1, known = 1;
    for (int i = 0; i < table.n; i++)
        if (!has(&all, table.v[i])) {
            tap_diag("%s: in the table, not in doc/dtrain.1's OPTIONS", table.v[i]);
            documented = 0;
        }
    for (int i = 0; i < DT_FLAG_COUNT; i++) { /* a flag has an entry; its alias and off switch a mention */
        char n[96];
        snprintf(n, sizeof n, "--%s", dt_flags[i].name);
        if (dt_flags[i].kind != DT_FK_OPERAND && !has(&tags, n)) {
            tap_diag("%s: no entry (.TP) of its own in doc/dtrain.1's OPTIONS", n);
            listed = 0;
        }
    }
    for (int i = 0; i < tags.n; i++)
        if (!has(&table, tags.v[i])) {
            tap_diag("%s: listed in doc/dtrain.1's OPTIONS, not in the table", tags.v[i]);
            known = 0;
        }
    TAP_OK(documented, "doc/dtrain.1's OPTIONS names all %d of the table's names", table.n);
    TAP_OK(listed, "each of the table's %d flags has an entry there", DT_FLAG_COUNT - 1);
    TAP_OK(known && tags.n > 60, "each of the %d options doc/dtrain.1 lists is in the table", tags.n);
    names_free(&all);
    names_free(&tags);
    names_free(&table);
    return tap_done();
}
