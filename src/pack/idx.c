/* idx.c: dt_pack_idx (pack.h): MNIST-style IDX files, gzip'd or not, {train,t10k}-{images-idx3,
 * labels-idx1}-ubyte[.gz], read whole and checked (magic numbers, counts, sizes, labels) before
 * anything is written, then packed as raw 1-channel shards (pack.c). */
#include "config.h"

#include "pack/pack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/shard.h"
#include "pack/pack_internal.h"
#include "util/check.h"
#include "util/log.h"

/* dir/base.gz, else dir/base, opened as a regular file (gzread of a FIFO would block) that is not
 * empty; NULL after one line naming it */
static gzFile open_gz(const char *dir, const char *base, char *path, size_t n)
{
    snprintf(path, n, "%s/%s.gz", dir, base);
    if (access(path, F_OK) != 0)
        snprintf(path, n, "%s/%s", dir, base);
    uint64_t size;
    int fd = dt_open_regular(path, "IDX file", NULL, &size);
    if (fd < 0)
        return NULL;
    if (size == 0) {
        dt_error("%s: empty file (an IDX file starts with its header, then the data)", path);
        close(fd);
        return NULL;
    }
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        dt_error("%s: cannot read: out of memory", path);
        close(fd);
    }
    return f;
}

enum { GZ_SHORT = 1 };

/* n bytes into buf. DT_OK; GZ_SHORT at the end of the data, with *done < n and nothing said (the
 * caller knows what was cut); DT_ERR_INPUT after a read or decompression error, said naming path
 * (a cut gzip stream: "unexpected end of file"). */
static int gz_read_all(gzFile f, const char *path, void *buf, size_t n, size_t *done)
{
    uint8_t *p = buf;
    *done = 0;
    while (*done < n) {
        size_t left = n - *done;
        unsigned want = left > (1u << 30) ? 1u << 30 : (unsigned)left;
        int got = gzread(f, p + *done, want);
        if (got < 0) {
            int e;
            dt_error("%s: %s", path, gzerror(f, &e));
            return DT_ERR_INPUT;
        }
        if (got == 0)
            return GZ_SHORT;
        *done += (size_t)got;
    }
    return DT_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* one IDX split read into memory and checked, before anything is written */
typedef struct idx_split {
    char images_path[4200], labels_path[4200];
    uint32_t n, rows, cols;
    uint8_t *pixels, *labels; /* n images of rows x cols bytes, n labels */
} idx_split;

static void idx_free(idx_split *d)
{
    free(d->pixels);
    free(d->labels);
    d->pixels = d->labels = NULL;
}

static int idx_load(const char *src, const char *prefix, idx_split *d)
{
    char base[64];
    memset(d, 0, sizeof *d);
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    gzFile fi = open_gz(src, base, d->images_path, sizeof d->images_path), fl = NULL;
    int rc = DT_ERR_INPUT;
    uint8_t hi[16], hl[8];
    size_t got;
    int r;
    if (!fi)
        goto out;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    if (!(fl = open_gz(src, base, d->labels_path, sizeof d->labels_path)))
        goto out;
    if ((r = gz_read_all(fi, d->images_path, hi, 16, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: %zu bytes, shorter than the IDX header (16 bytes)", d->images_path, got);
        goto out;
    }
    if ((r = gz_read_all(fl, d->labels_path, hl, 8, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: %zu bytes, shorter than the IDX header (8 bytes)", d->labels_path, got);
        goto out;
    }
    d->n = be32(hi + 4);
    d->rows = be32(hi + 8);
    d->cols = be32(hi + 12);
    uint32_t nl = be32(hl + 4);
    if (be32(hi) != 0x803 || be32(hl) != 0x801) {
        dt_error("%s: not an IDX %s file (magic %08x, expected %08x)",
                 be32(hi) != 0x803 ? d->images_path : d->labels_path, be32(hi) != 0x803 ? "ubyte image" : "ubyte label",
                 be32(hi) != 0x803 ? be32(hi) : be32(hl), be32(hi) != 0x803 ? 0x803u : 0x801u);
        goto out;
    }
    if (d->n == 0 || nl == 0) {
        dt_error("%s: its header says 0 %s: nothing to pack", d->n == 0 ? d->images_path : d->labels_path,
                 d->n == 0 ? "images" : "labels");
        goto out;
    }
    if (d->n != nl || d->rows == 0 || d->cols == 0 || d->rows > 4096 || d->cols > 4096) {
        dt_error("%s: %u images of %ux%u with %u labels in %s: counts must agree and sizes be 1..4096",
                 d->images_path, d->n, d->rows, d->cols, nl, d->labels_path);
        goto out;
    }
    size_t img = (size_t)d->rows * d->cols;
    d->pixels = malloc(img * d->n);
    d->labels = malloc(d->n);
    if (!d->pixels || !d->labels) {
        rc = DT_ERR_NOMEM;
        goto out;
    }
    if ((r = gz_read_all(fi, d->images_path, d->pixels, img * d->n, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: its header promises %u images of %ux%u, the data holds %zu whole ones",
                     d->images_path, d->n, d->rows, d->cols, got / img);
        goto out;
    }
    if ((r = gz_read_all(fl, d->labels_path, d->labels, d->n, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: its header promises %u labels, the data holds %zu", d->labels_path, d->n, got);
        goto out;
    }
    for (uint32_t i = 0; i < d->n; i++)
        if (d->labels[i] > 9) {
            dt_error("%s: label %u of image %u is outside 0..9", d->labels_path, d->labels[i], i);
            goto out;
        }
    rc = DT_OK;
out:
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    if (rc != DT_OK)
        idx_free(d);
    return rc;
}

static int pack_idx_split(const idx_split *d, const char *split, const char *const *classes, const dt_pack_opts *o,
                          dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_RAW, .num_classes = 10, .classes = classes,
                          .h = (int)d->rows, .w = (int)d->cols, .c = 1, .source = d->images_path};
    dt_pack_split so;
    DT_TRY(dt_pack_split_begin(&so, &spec, o));
    size_t img = (size_t)d->rows * d->cols;
    int rc = DT_OK;
    for (uint32_t i = 0; i < d->n && rc == DT_OK; i++) {
        rc = dt_pack_split_add(&so, d->pixels + (size_t)i * img, img, d->labels[i], NULL, st);
        st->passed++;
    }
    int rc2 = dt_pack_split_end(&so, st, rc == DT_OK);
    return rc ? rc : rc2;
}

int dt_pack_idx(const char *src, int fashion, const dt_pack_opts *o, dt_pack_stats *st)
{
    static const char *const fashion_names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    static const char *const digits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    memset(st, 0, sizeof *st);
    const char *const *cls = fashion ? fashion_names : digits;
    idx_split train, val;
    DT_TRY(idx_load(src, "train", &train)); /* both splits read and checked before anything is written */
    int rc = idx_load(src, "t10k", &val);
    if (rc == DT_OK) {
        if ((rc = dt_pack_make_dir(o->out)) == DT_OK && (rc = pack_idx_split(&train, "train", cls, o, st)) == DT_OK)
            rc = pack_idx_split(&val, "val", cls, o, st);
        idx_free(&val);
    }
    idx_free(&train);
    return rc;
}
