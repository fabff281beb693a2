/* pack.c: what dtpack's packers share (pack_internal.h): the output directory, one split written
 * into shards and swapped into the manifest; and dt_pack_verify (pack.h). The inputs are read in
 * tree.c (ImageNet folder trees), idx.c (MNIST, Fashion-MNIST) and cifar.c (CIFAR-10). */
#include "config.h"

#include "pack/pack.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard.h"
#include "pack/pack_internal.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

int dt_pack_make_dir(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                goto fail;
            *s = '/';
        }
    if (mkdir(p, 0777) == 0)
        return DT_OK;
    struct stat st;
    if (errno == EEXIST && stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
        dt_error("%s: the output directory exists and is not a directory", p);
        return DT_ERR_INPUT;
    }
    if (errno == EEXIST)
        return DT_OK;
fail:
    dt_error("%s: cannot create the output directory: %s", p, strerror(errno));
    return DT_ERR_SYS;
}

/* the manifest's entries other than split's, then (when add) add[0..n_add) */
static int manifest_replace(const char *dir, const char *split, const dt_manifest_entry *add, int n_add)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DT_MANIFEST_NAME);
    dt_manifest_entry *e = NULL;
    int n = 0;
    if (access(path, F_OK) == 0 && dt_manifest_read(dir, &e, &n) != DT_OK)
        return DT_ERR_INPUT; /* it said why: a damaged manifest is not overwritten */
    dt_manifest_entry *all = malloc((size_t)(n + n_add + 1) * sizeof *all);
    if (!all) {
        free(e);
        return DT_ERR_NOMEM;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].split, split) != 0)
            all[k++] = e[i];
    for (int i = 0; i < n_add; i++)
        all[k++] = add[i];
    int rc = dt_manifest_write(dir, all, k);
    free(all);
    free(e);
    return rc;
}

/* removes split's shards (and temporaries) left by an earlier pack */
static void remove_old_shards(const char *dir, const char *split)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t n = strlen(split);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *s = de->d_name[0] == '.' ? de->d_name + 1 : de->d_name;
        if (strncmp(s, split, n) == 0 && s[n] == '-' && strlen(s + n) >= 10 && strstr(s + n, ".h5")) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
}

static int split_flush(dt_pack_split *so, dt_pack_stats *st)
{
    if (!so->writer.count)
        return DT_OK;
    DT_TRY(dt_grow((void **)&so->entries, &so->cap, (size_t)so->n_entries + 1, sizeof *so->entries));
    dt_manifest_entry *m = &so->entries[so->n_entries];
    memset(m, 0, sizeof *m);
    snprintf(m->split, sizeof m->split, "%s", so->writer.spec.split);
    DT_TRY(dt_shard_writer_flush(&so->writer, m->file, sizeof m->file, &m->count, &m->bytes, &m->crc));
    so->n_entries++;
    st->shards++;
    st->bytes += (int64_t)m->bytes;
    return DT_OK;
}

int dt_pack_split_add(dt_pack_split *so, const uint8_t *data, size_t n, int32_t label, const char *name,
                      dt_pack_stats *st)
{
    DT_TRY(dt_shard_writer_add(&so->writer, data, n, label, name));
    st->images++;
    if ((int64_t)so->writer.bytes >= so->shard_bytes)
        DT_TRY(split_flush(so, st));
    return DT_OK;
}

int dt_pack_split_begin(dt_pack_split *so, const dt_shard_spec *spec, const dt_pack_opts *o)
{
    memset(so, 0, sizeof *so);
    so->shard_bytes = o->shard_bytes;
    DT_TRY(manifest_replace(spec->dir, spec->split, NULL, 0)); /* interrupted: the split is not listed */
    remove_old_shards(spec->dir, spec->split);
    dt_shard_writer_init(&so->writer, spec, 0);
    return DT_OK;
}

int dt_pack_split_end(dt_pack_split *so, dt_pack_stats *st, int ok)
{
    int rc = ok ? split_flush(so, st) : DT_ERR_INPUT;
    if (rc == DT_OK && so->n_entries == 0) { /* a split dtrain would refuse: say so now, not at training time */
        dt_error("%s: no images to pack into split %s", so->writer.spec.source, so->writer.spec.split);
        rc = DT_ERR_INPUT;
    }
    if (rc == DT_OK)
        rc = manifest_replace(so->writer.spec.dir, so->writer.spec.split, so->entries, so->n_entries);
    dt_shard_writer_free(&so->writer);
    free(so->entries);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* dtpack verify                                                                                  */

/* prints what one split holds */
static void verify_report(const char *dir, const dt_dataset *ds)
{
    printf("%s: split %s: %lld images of %d classes in %d shards, every CRC-32 matches\n", dir, ds->split,
           (long long)ds->count, ds->num_classes, ds->n_shards);
}

int dt_pack_verify(const char *dir)
{
    dt_manifest_entry *e;
    int n;
    DT_TRY(dt_manifest_read(dir, &e, &n));
    /* dtrain's start-up first: train and val open with every check, then the checks across splits
     * (the same calls); then every other split against train */
    dt_dataset train, ds;
    int rc = dt_dataset_open(&train, dir, "train", 1);
    if (rc == DT_OK) {
        verify_report(dir, &train);
        if ((rc = dt_dataset_open(&ds, dir, "val", 1)) == DT_OK) {
            rc = dt_dataset_check_splits(&train, &ds);
            if (rc == DT_OK)
                verify_report(dir, &ds);
            dt_dataset_close(&ds);
        }
    }
    const char *done[64] = {"train", "val"};
    int n_done = 2;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        int seen = 0;
        for (int j = 0; j < n_done && !seen; j++)
            seen = !strcmp(done[j], e[i].split);
        if (seen)
            continue;
        if (n_done == 64) {
            dt_error("%s/%s: more than 64 splits", dir, DT_MANIFEST_NAME);
            rc = DT_ERR_INPUT;
            break;
        }
        done[n_done++] = e[i].split;
        if ((rc = dt_dataset_open(&ds, dir, e[i].split, 1)) != DT_OK)
            break;
        rc = dt_dataset_check_splits(&train, &ds);
        if (rc == DT_OK)
            verify_report(dir, &ds);
        dt_dataset_close(&ds);
    }
    if (train.n_shards)
        dt_dataset_close(&train);
    free(e);
    return rc;
}
