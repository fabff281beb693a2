/* agree.c: the options every rank must share, fingerprinted and compared (contract in agree.h). */
#include "config.h"

#include "train/agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/flags.h"
#include "util/check.h"
#include "util/log.h"

_Static_assert(sizeof(dt_agree_rec) == DT_AGREE_REC_BYTES, "dt_agree_rec is exchanged between ranks: fixed size");

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* One slot: name and the whole text hashed; the text kept, its middle cut when it is too long (a path's
 * start and end say the most). */
static void put(dt_agree_set *s, const char *name, const char *text)
{
    if (s->used >= DT_AGREE_SLOTS)
        return; /* dt_agree_fingerprint's count is checked by the unit test */
    dt_agree_rec *rec = &s->rec[s->used++];
    size_t nl = strlen(name), tl = strlen(text);
    rec->hash = fnv1a(fnv1a(0xcbf29ce484222325ULL, name, nl + 1), text, tl);
    snprintf(rec->name, sizeof rec->name, "%s", name);
    if (tl < sizeof rec->text)
        memcpy(rec->text, text, tl + 1);
    else {
        enum { HEAD = 40 };
        size_t tail = sizeof rec->text - 1 - HEAD - 3;
        snprintf(rec->text, sizeof rec->text, "%.*s...%s", (int)HEAD, text, text + tl - tail);
    }
}

static void put_str(dt_agree_set *s, const char *name, const char *v)
{
    char t[8192];
    if (v)
        snprintf(t, sizeof t, "with %s %s", name, v);
    else
        snprintf(t, sizeof t, "without %s", name);
    put(s, name, t);
}

static void put_flag(dt_agree_set *s, const char *name, int on)
{
    char t[64];
    snprintf(t, sizeof t, "%s %s", on ? "with" : "without", name);
    put(s, name, t);
}

/* a number; `unset` (the value meaning "not given") reads as "without" */
static void put_long(dt_agree_set *s, const char *name, long v, long unset)
{
    char t[96];
    if (v == unset)
        snprintf(t, sizeof t, "without %s", name);
    else
        snprintf(t, sizeof t, "with %s %ld", name, v);
    put(s, name, t);
}

/* the shortest text that reads back as exactly v: equal texts, equal values */
static void put_double(dt_agree_set *s, const char *name, double v)
{
    char num[40], t[96];
    for (int p = 1; p <= 17; p++) {
        snprintf(num, sizeof num, "%.*g", p, v);
        if (strtod(num, NULL) == v)
            break;
    }
    snprintf(t, sizeof t, "with %s %s", name, num);
    put(s, name, t);
}

/* -1 (not given), 0 or 1 */
static void put_tri(dt_agree_set *s, const char *name, int v)
{
    put_str(s, name, v < 0 ? NULL : v ? "true" : "false");
}

/* the texts of the options whose meaning depends on another (DT_FP_OWN in train/flags.h) */
static void put_own(dt_agree_set *out, const dt_flag *f, const char *name, const dt_train_cfg *cfg)
{
    switch (f->id) {
    case DT_FLAG_CROP_PADDING: /* 0 is "not given" (4), -1 "none" (0) */
        put_long(out, name, cfg->crop_padding == 0 ? 4 : cfg->crop_padding < 0 ? 0 : cfg->crop_padding, -1);
        break;
    case DT_FLAG_LR_STEPS: { /* the milestones where the schedule has them */
        char steps[16 * 24] = "";
        int milestones = cfg->lr_schedule == DT_LR_STEP || cfg->lr_schedule == DT_LR_MULTISTEPLR;
        for (int i = 0; i < cfg->n_lr_steps && i < 16 && milestones; i++)
            snprintf(steps + strlen(steps), sizeof steps - strlen(steps), "%s%ld", i ? "," : "", cfg->lr_steps[i]);
        put_str(out, name, milestones ? steps : NULL);
        break;
    }
    case DT_FLAG_LR_WARMUP_METHOD: /* the schedule's default filled in */
        put_str(out, name, dt_lr_warmup_names[dt_schedule_warmup_method(cfg)]);
        break;
    case DT_FLAG_LR_WARMUP_DECAY: put_double(out, name, dt_schedule_warmup_decay(cfg)); break;
    case DT_FLAG_NORM_WEIGHT_DECAY: put_double(out, name, cfg->norm_wd < 0 ? cfg->wd : cfg->norm_wd); break;
    case DT_FLAG_BIAS_WEIGHT_DECAY: /* not a group: not the same as a bias decay equal to --wd (BN's biases) */
        if (cfg->bias_wd < 0)
            put_str(out, name, NULL);
        else
            put_double(out, name, cfg->bias_wd);
        break;
    default: break;
    }
}

/* one row of the table, by its field's kind and type (train/flags.h, enum dt_flag_fp) */
static void put_row(dt_agree_set *out, const dt_flag *f, const dt_train_cfg *cfg)
{
    char name[DT_AGREE_NAME];
    if (f->kind == DT_FK_OPERAND)
        snprintf(name, sizeof name, "%s", f->name);
    else if (f->fp == DT_FP_SHORT)
        snprintf(name, sizeof name, "-%c", f->key);
    else
        snprintf(name, sizeof name, "--%s", f->name);
    const void *p = (const char *)cfg + f->offset;
    if (f->fp == DT_FP_OWN)
        put_own(out, f, name, cfg);
    else if (f->kind == DT_FK_CHOICE)
        put_str(out, name, f->choices[*(const int *)p]);
    else if (f->kind == DT_FK_BOOL || (f->kind == DT_FK_SWITCH && f->def < 0)) /* -1: not given */
        put_tri(out, name, *(const int *)p);
    else if (f->kind == DT_FK_SWITCH)
        put_flag(out, name, *(const int *)p);
    else if (f->type == DT_FT_TEXT)
        put_str(out, name, *(const char *const *)p);
    else if (f->type == DT_FT_DOUBLE)
        put_double(out, name, *(const double *)p);
    else { /* an integer; a default below the range means "not given" */
        long v = f->type == DT_FT_INT ? *(const int *)p : f->type == DT_FT_LONG ? *(const long *)p
                                                                            : (long)*(const uint64_t *)p;
        put_long(out, name, v, f->def < f->lo ? (long)f->def : -1);
    }
}

int dt_agree_fingerprint(const dt_train_cfg *cfg, dt_agree_set *out)
{
    memset(out, 0, sizeof *out);
    out->used = 1; /* slot 0, the version, is made last: it lists the options */
    for (int i = 0; i < DT_FLAG_COUNT; i++) /* the table's order: -a, DATA, -b ... */
        if (dt_flags[i].fp != DT_FP_NOT)
            put_row(out, &dt_flags[i], cfg);
    /* slot 0: the version and the options compared, so that builds comparing other options (or the
     * same ones in another order) disagree here, before any option */
    char list[DT_AGREE_SLOTS * DT_AGREE_NAME] = "", version[DT_AGREE_SLOTS * DT_AGREE_NAME + 64];
    for (int i = 1; i < out->used; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), " %s", out->rec[i].name);
    snprintf(version, sizeof version, "with dtrain %s (%d options compared)", PACKAGE_VERSION, out->used - 1);
    dt_agree_set v = {0};
    put(&v, "dtrain", version);
    v.rec[0].hash = fnv1a(v.rec[0].hash, list, strlen(list));
    out->rec[0] = v.rec[0];
    return DT_OK;
}

/* int64 <-> uint64 by their bits */
static int64_t as_i64(uint64_t u)
{
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return i;
}

static uint64_t as_u64(int64_t i)
{
    uint64_t u;
    memcpy(&u, &i, sizeof u);
    return u;
}

void dt_agree_summary(const dt_agree_set *s, int64_t sum[2 * DT_AGREE_SLOTS])
{
    for (int i = 0; i < DT_AGREE_SLOTS; i++) {
        sum[2 * i] = as_i64(s->rec[i].hash);
        sum[2 * i + 1] = as_i64(~s->rec[i].hash);
    }
}

int dt_agree_first_difference(const int64_t sum[2 * DT_AGREE_SLOTS])
{
    /* min(h) over ranks, and min(~h) = ~max(h) (~ reverses the order of int64): all equal iff
     * min(h) == max(h) */
    for (int i = 0; i < DT_AGREE_SLOTS; i++)
        if (as_u64(sum[2 * i]) != ~as_u64(sum[2 * i + 1]))
            return i;
    return -1;
}

/* "rank 3" or "ranks 1, 4-7, 9" for the ranks r with hash h (after 8 runs: "and N more") */
static void rank_list(const dt_agree_rec *recs, int n_ranks, uint64_t h, char *buf, size_t n)
{
    int count = 0, runs = 0;
    for (int r = 0; r < n_ranks; r++)
        count += recs[r].hash == h;
    size_t k = (size_t)snprintf(buf, n, "rank%s", count > 1 ? "s" : "");
    for (int r = 0, listed = 0; r < n_ranks && k < n; r++) {
        if (recs[r].hash != h)
            continue;
        if (runs == 8) {
            k += (size_t)snprintf(buf + k, n - k, " and %d more", count - listed);
            break;
        }
        int end = r;
        while (end + 1 < n_ranks && recs[end + 1].hash == h)
            end++;
        const char *sep = runs ? "," : "";
        if (end > r + 1)
            k += (size_t)snprintf(buf + k, n - k, "%s %d-%d", sep, r, end);
        else if (end == r + 1)
            k += (size_t)snprintf(buf + k, n - k, "%s %d, %d", sep, r, end);
        else
            k += (size_t)snprintf(buf + k, n - k, "%s %d", sep, r);
        listed += end - r + 1;
        runs++;
        r = end;
    }
}

static const char *were(const char *ranks)
{
    return strncmp(ranks, "ranks", 5) ? " was started" : " were started";
}

int dt_agree_describe(const dt_agree_rec *recs, int n_ranks, char *buf, size_t n)
{
    enum { SHOWN = 3 }; /* values named besides rank 0's; the ranks with others are counted */
    if (n == 0)
        return 0;
    buf[0] = 0;
    if (n_ranks < 1)
        return 0;
    int first[SHOWN], n_groups = 0, other_ranks = 0; /* first: each value's lowest rank, in order */
    for (int r = 1; r < n_ranks; r++) {
        int seen = recs[r].hash == recs[0].hash;
        for (int q = 1; q < r && !seen; q++)
            seen = recs[q].hash == recs[r].hash;
        if (seen)
            continue;
        if (n_groups < SHOWN)
            first[n_groups++] = r;
        else
            for (int q = r; q < n_ranks; q++)
                other_ranks += recs[q].hash == recs[r].hash;
    }
    char ranks[160];
    size_t k = 0;
    for (int g = 0; g < n_groups && k < n; g++) {
        rank_list(recs, n_ranks, recs[first[g]].hash, ranks, sizeof ranks);
        k += (size_t)snprintf(buf + k, n - k, "%s%s%s %.*s", g ? ", " : "", ranks, g ? "" : were(ranks), DT_AGREE_TEXT,
                              recs[first[g]].text);
    }
    if (other_ranks && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", %d more rank%s with other values", other_ranks, other_ranks > 1 ? "s" : "");
    rank_list(recs, n_ranks, recs[0].hash, ranks, sizeof ranks); /* rank 0's value last */
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, "%s%s%s %.*s", n_groups ? ", " : "", ranks, n_groups ? "" : were(ranks),
                              DT_AGREE_TEXT, recs[0].text);
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, ": every rank needs the same options");
    return (int)(k < n ? k : n - 1);
}

int dt_agree_options(dt_comm *comm, const dt_train_cfg *cfg)
{
    if (comm->size == 1)
        return DT_OK;
    dt_agree_set mine;
    dt_agree_fingerprint(cfg, &mine);
    int64_t sum[2 * DT_AGREE_SLOTS];
    dt_agree_summary(&mine, sum);
    DT_TRY(comm->ops->allreduce(comm, sum, sum, 2 * DT_AGREE_SLOTS, DT_INT64, DT_MIN));
    int slot = dt_agree_first_difference(sum);
    if (slot < 0)
        return DT_OK;
    /* every rank knows the slot: now who has what, DT_AGREE_REC_BYTES from each */
    dt_agree_rec *all;
    DT_CHECK_ALLOC(all = calloc((size_t)comm->size, sizeof *all));
    int rc = comm->ops->allgather(comm, &mine.rec[slot], all, sizeof *all, DT_UINT8);
    if (rc == DT_OK && comm->rank == 0) {
        char line[1024];
        dt_agree_describe(all, comm->size, line, sizeof line);
        dt_error("%s", line);
    }
    free(all);
    return rc == DT_OK ? DT_ERR_INPUT : rc;
}
