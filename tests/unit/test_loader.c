/* test_loader.c: shards written by the shard writer and read back by the loader.
 *   - raw shards: validation batches hold every image once across ranks, with its pixels and label;
 *     training crops are shifted/mirrored copies of the padded image; batches are the same with 1
 *     or 3 workers; epochs differ; an epoch resumed at step k gives the full run's step k;
 *   - encoded shards: the same across worker counts; validation crops equal a direct decode;
 *   - bad input: a missing shard, a wrong schema version, a truncated file (caught by the manifest's
 *     size, and by HDF5 when the manifest agrees), a label out of range, an offset beyond the data,
 *     an undecodable image inside a shard: each one line naming the shard (and the index), an error
 *     status, and no hang (an alarm kills the test if a wait never ends). */
#include "config.h"

#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/image.h"
#include "data/loader.h"
#include "data/mix.h"
#include "data/shard.h"
#include "tap.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

static char dir[256];

enum { RAW_H = 8, RAW_W = 6, RAW_N = 103, ENC_N = 24, ENC_W = 64, ENC_H = 48 };
static const char *const classes5[] = {"c0", "c1", "c2", "c3", "c4"};

static void raw_pixels(int64_t i, uint8_t *p)
{
    for (int k = 0; k < RAW_H * RAW_W; k++)
        p[k] = (uint8_t)(1 + (i * 7 + k * 13) % 250); /* never 0: padding is recognisable */
}

/* writes n images of split into `shards` shards plus the manifest; kind raw or encoded */
static int write_split(const char *split, int raw, int n, int shards)
{
    dt_shard_spec spec = {.dir = dir, .split = split, .kind = raw ? DT_SHARD_RAW : DT_SHARD_ENCODED,
                          .num_classes = 5, .classes = classes5, .h = RAW_H, .w = RAW_W, .c = 1, .source = "test"};
    dt_shard_writer w;
    dt_shard_writer_init(&w, &spec, 0);
    dt_manifest_entry e[16];
    int ne = 0, per = (n + shards - 1) / shards;
    uint8_t px[RAW_H * RAW_W], *rgb = malloc(ENC_W * ENC_H * 3);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "c%d/img%03d.jpg", i % 5, i);
        if (raw) {
            raw_pixels(i, px);
            dt_shard_writer_add(&w, px, sizeof px, i % 5, NULL);
        } else {
            for (int y = 0; y < ENC_H; y++)
                for (int x = 0; x < ENC_W; x++)
                    for (int c = 0; c < 3; c++)
                        rgb[(y * ENC_W + x) * 3 + c] = (uint8_t)((x * 4 + y * (c + 1) * 3 + i * 9) & 255);
            uint8_t *jpg;
            size_t len;
            char err[128];
            if (dt_jpeg_encode(rgb, ENC_W, ENC_H, 90, &jpg, &len, err, sizeof err) != 0)
                return -1;
            dt_shard_writer_add(&w, jpg, len, i % 5, name);
            free(jpg);
        }
        if (w.count == per || i == n - 1) {
            snprintf(e[ne].split, sizeof e[ne].split, "%s", split);
            if (dt_shard_writer_flush(&w, e[ne].file, sizeof e[ne].file, &e[ne].count, &e[ne].bytes, &e[ne].crc))
                return -1;
            ne++;
        }
    }
    dt_shard_writer_free(&w);
    free(rgb);
    return dt_manifest_write(dir, e, ne);
}

static void clean_dir(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/* '%s'/.[a-z]*", dir, dir);
    if (system(cmd) != 0)
        tap_diag("could not empty %s", dir);
}

/* every batch of an epoch, concatenated: images, labels and indices */
typedef struct run {
    uint8_t *x;
    int32_t *y;
    int64_t *idx;
    uint8_t *counted;
    int64_t n;
    size_t img;
} run;

static int run_epoch(const dt_dataset *ds, dt_loader_cfg cfg, int64_t epoch, int64_t first_step, run *r)
{
    dt_loader *L;
    memset(r, 0, sizeof *r);
    if (dt_loader_create(&L, ds, &cfg) != DT_OK)
        return -1;
    int64_t total = dt_loader_samples(L);
    const dt_batch *b;
    int rc;
    dt_loader_start(L, epoch, first_step);
    while ((rc = dt_loader_next(L, &b)) == 1) {
        size_t img = (size_t)b->h * b->w * b->c;
        if (!r->x) {
            r->img = img;
            r->x = malloc((size_t)total * img);
            r->y = malloc((size_t)total * sizeof(int32_t));
            r->idx = malloc((size_t)total * sizeof(int64_t));
            r->counted = malloc((size_t)total);
        }
        memcpy(r->x + r->n * img, b->x, (size_t)b->n * img);
        memcpy(r->y + r->n, b->y, (size_t)b->n * sizeof(int32_t));
        memcpy(r->idx + r->n, b->index, (size_t)b->n * sizeof(int64_t));
        memcpy(r->counted + r->n, b->counted, (size_t)b->n);
        r->n += b->n;
    }
    dt_loader_free(L);
    return rc;
}

static void run_free(run *r)
{
    free(r->x);
    free(r->y);
    free(r->idx);
    free(r->counted);
}

static int same_run(const run *a, const run *b)
{
    return a->n == b->n && a->img == b->img && !memcmp(a->x, b->x, (size_t)a->n * a->img) &&
           !memcmp(a->y, b->y, (size_t)a->n * sizeof(int32_t)) && !memcmp(a->idx, b->idx, (size_t)a->n * sizeof(int64_t));
}

/* is out a crop of src zero-padded by pad, possibly mirrored? */
static int is_padded_crop(const uint8_t *src, const uint8_t *out, int pad)
{
    for (int flip = 0; flip < 2; flip++)
        for (int dy = -pad; dy <= pad; dy++)
            for (int dx = -pad; dx <= pad; dx++) {
                int ok = 1;
                for (int y = 0; y < RAW_H && ok; y++)
                    for (int x = 0; x < RAW_W && ok; x++) {
                        int sy = y + dy, sx = (flip ? RAW_W - 1 - x : x) + dx;
                        int v = sy < 0 || sy >= RAW_H || sx < 0 || sx >= RAW_W ? 0 : src[sy * RAW_W + sx];
                        ok = out[y * RAW_W + x] == v;
                    }
                if (ok)
                    return 1;
            }
    return 0;
}

static void test_raw(void)
{
    /* write_split writes a manifest of its own split: gather both into one */
    clean_dir();
    int wt = write_split("train", 1, RAW_N, 3);
    dt_manifest_entry *tr;
    int ntr;
    dt_manifest_read(dir, &tr, &ntr);
    int wv = write_split("val", 1, RAW_N, 2);
    dt_manifest_entry *va, all[8];
    int nva;
    dt_manifest_read(dir, &va, &nva);
    memcpy(all, tr, (size_t)ntr * sizeof *tr);
    memcpy(all + ntr, va, (size_t)nva * sizeof *va);
    TAP_OK(wt == DT_OK && wv == DT_OK && ntr == 3 && nva == 2 && dt_manifest_write(dir, all, ntr + nva) == DT_OK,
           "raw shards written: %d images in 3 (train) and 2 (val) shards, one manifest", RAW_N);
    free(tr);
    free(va);

    dt_dataset tds, vds;
    TAP_OK(dt_dataset_open(&tds, dir, "train", 1) == DT_OK && dt_dataset_open(&vds, dir, "val", 1) == DT_OK,
           "both splits open with CRC checks");
    TAP_OK(tds.count == RAW_N && tds.n_shards == 3 && tds.kind == DT_SHARD_RAW && tds.h == RAW_H && tds.w == RAW_W &&
               tds.c == 1 && tds.num_classes == 5 && !strcmp(tds.classes[4], "c4"),
           "train: %lld raw %dx%dx%d images in %d shards, 5 classes", (long long)tds.count, tds.h, tds.w, tds.c,
           tds.n_shards);

    /* validation over 3 ranks: every image exactly once among the counted ones, pixels and labels right */
    int *seen = calloc(RAW_N, sizeof(int)), ok = 1;
    for (int r = 0; r < 3; r++) {
        dt_loader_cfg cfg = {.batch = 5, .train = 0, .workers = 2, .rank = r, .world = 3};
        run v = {0};
        ok = ok && run_epoch(&vds, cfg, 0, 0, &v) == 0 && v.n == (RAW_N + 2) / 3;
        uint8_t px[RAW_H * RAW_W];
        for (int64_t k = 0; ok && k < v.n; k++) {
            raw_pixels(v.idx[k], px);
            ok = v.y[k] == v.idx[k] % 5 && !memcmp(v.x + k * v.img, px, sizeof px);
            if (v.counted[k])
                seen[v.idx[k]]++;
        }
        run_free(&v);
    }
    for (int i = 0; i < RAW_N; i++)
        ok = ok && seen[i] == 1;
    free(seen);
    TAP_OK(ok, "validation on 3 ranks: each image counted once, with its own pixels and label");

    dt_loader_cfg cfg = {.batch = 8, .train = 1, .workers = 1, .seed = 11, .rank = 1, .world = 2};
    run a, b, c, d;
    int ra = run_epoch(&tds, cfg, 1, 0, &a);
    cfg.workers = 3;
    cfg.prefetch = 5;
    int rb = run_epoch(&tds, cfg, 1, 0, &b);
    TAP_OK(ra == 0 && rb == 0 && a.n == 52 && same_run(&a, &b),
           "training epoch: the same %lld crops, labels and order with 1 and 3 workers", (long long)a.n);
    ok = 1;
    int flips = 0;
    uint8_t px[RAW_H * RAW_W];
    for (int64_t k = 0; k < a.n; k++) {
        raw_pixels(a.idx[k], px);
        ok = ok && is_padded_crop(px, a.x + k * a.img, 4);
        flips += memcmp(px, a.x + k * a.img, sizeof px) != 0;
    }
    TAP_OK(ok && flips > a.n / 2, "every crop is a shift (padding 4) or mirror of its image; %d of %lld changed", flips,
           (long long)a.n);
    int rc_ = run_epoch(&tds, cfg, 2, 0, &c);
    TAP_OK(rc_ == 0 && c.n == a.n && memcmp(a.idx, c.idx, (size_t)a.n * sizeof(int64_t)) != 0,
           "epoch 2 reads another order");
    rc_ = run_epoch(&tds, cfg, 1, 3, &d);
    TAP_OK(rc_ == 0 && d.n == a.n - 24 && !memcmp(d.x, a.x + 24 * a.img, (size_t)d.n * a.img) &&
               !memcmp(d.idx, a.idx + 24, (size_t)d.n * sizeof(int64_t)),
           "epoch 1 resumed at step 3 gives the full run's batches from step 3 on");
    run_free(&a);
    run_free(&b);
    run_free(&c);
    run_free(&d);
    dt_dataset_close(&tds);
    dt_dataset_close(&vds);
}

static void test_encoded(void)
{
    clean_dir();
    TAP_OK(write_split("train", 0, ENC_N, 2) == DT_OK, "encoded shards: %d JPEGs of %dx%d in 2 shards", ENC_N, ENC_W,
           ENC_H);
    dt_dataset ds;
    int orc = dt_dataset_open(&ds, dir, "train", 0);
    TAP_OK(orc == DT_OK && ds.kind == DT_SHARD_ENCODED && ds.count == ENC_N, "opened: %lld encoded images",
           (long long)ds.count);
    dt_loader_cfg cfg = {.batch = 5, .train = 1, .out_h = 32, .out_w = 32, .workers = 1, .seed = 3};
    run a, b;
    int ra = run_epoch(&ds, cfg, 0, 0, &a);
    cfg.workers = 2;
    int rb = run_epoch(&ds, cfg, 0, 0, &b);
    TAP_OK(ra == 0 && rb == 0 && a.n == ENC_N && a.img == 32 * 32 * 3 && same_run(&a, &b),
           "RandomResizedCrop batches: the same with 1 and 2 workers");
    run_free(&a);
    run_free(&b);
    cfg.train = 0;
    uint8_t *buf = malloc(1 << 20), out[32 * 32 * 3];
    dt_image_scratch s = {0};
    char err[128];
    /* cfg.interpolation reaches the decode: each filter's crops, and not bilinear's */
    static const int filters[] = {DT_FILTER_BILINEAR, DT_FILTER_BICUBIC, DT_FILTER_NEAREST};
    uint8_t *bilinear = NULL;
    for (size_t f = 0; f < sizeof filters / sizeof filters[0]; f++) {
        cfg.interpolation = filters[f];
        int ok = run_epoch(&ds, cfg, 0, 0, &a) == 0 && a.n == ENC_N;
        for (int64_t k = 0; ok && k < a.n; k++) { /* a validation crop is the centre box decoded directly */
            size_t len = dt_dataset_item_bytes(&ds, a.idx[k]);
            ok = dt_dataset_read(&ds, a.idx[k], buf) == DT_OK &&
                 dt_jpeg_decode_box(buf, len, dt_center_box(ENC_W, ENC_H, 37, 32), 32, 32, filters[f], 0, out, &s,
                                    err, sizeof err) == 0 &&
                 !memcmp(out, a.x + k * a.img, sizeof out) && a.idx[k] == k;
        }
        int other = f == 0 || (ok && bilinear && memcmp(bilinear, a.x, (size_t)a.n * a.img) != 0);
        TAP_OK(ok && other,
               "validation (%s): images in order, each the centre crop (Resize 37, CenterCrop 32) of its JPEG%s",
               dt_filter_name(filters[f]), f ? ", not bilinear's" : "");
        if (f == 0) {
            bilinear = a.x;
            a.x = NULL;
        }
        run_free(&a);
    }
    free(bilinear);
    dt_image_scratch_free(&s);
    free(buf);
    dt_dataset_close(&ds);
}

/* ---- bad input ----------------------------------------------------------------------------- */

static int set_i64_attr(const char *file, const char *name, long long v)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT), a = H5Aopen(f, name, H5P_DEFAULT);
    int rc = H5Awrite(a, H5T_NATIVE_LLONG, &v) < 0 ? -1 : 0;
    H5Aclose(a);
    H5Fclose(f);
    return rc;
}

static int poke_dataset(const char *file, const char *name, hid_t type, int64_t at, const void *v)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT), sp = H5Dget_space(d);
    hsize_t start = (hsize_t)at, one = 1;
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    int rc = H5Dwrite(d, type, ms, sp, H5P_DEFAULT, v) < 0 ? -1 : 0;
    H5Sclose(ms);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    return rc;
}

/* the manifest's size and CRC made to agree with the (changed) file again */
static void refresh_manifest(void)
{
    dt_manifest_entry *e;
    int n;
    dt_manifest_read(dir, &e, &n);
    for (int i = 0; i < n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e[i].file);
        FILE *f = fopen(p, "rb");
        uint8_t buf[65536];
        size_t got;
        e[i].crc = 0;
        e[i].bytes = 0;
        while (f && (got = fread(buf, 1, sizeof buf, f)) > 0) {
            e[i].crc = dt_crc32(e[i].crc, buf, got);
            e[i].bytes += got;
        }
        if (f)
            fclose(f);
    }
    dt_manifest_write(dir, e, n);
    free(e);
}

/* opening must fail with one line containing every one of want[] */
static void expect_open_error(const char *what, const char *const *want, int n_want)
{
    dt_dataset ds;
    tap_log_begin();
    int rc = dt_dataset_open(&ds, dir, "train", 0);
    char *log = tap_log_take();
    tap_log_end();
    int ok = rc == DT_ERR_INPUT && tap_count_lines(log) == 1;
    for (int i = 0; i < n_want; i++)
        ok = ok && strstr(log, want[i]);
    TAP_OK(ok, "%s: refused in one line: %s", what, log);
    if (rc == DT_OK)
        dt_dataset_close(&ds);
    free(log);
}

static void fresh(void)
{
    clean_dir();
    write_split("train", 0, ENC_N, 2);
}

static void test_bad(void)
{
    char s0[512], s1[512];
    snprintf(s0, sizeof s0, "%s/train-00000.h5", dir);
    snprintf(s1, sizeof s1, "%s/train-00001.h5", dir);

    fresh();
    unlink(s1);
    expect_open_error("a missing shard", (const char *[]){"train-00001.h5", "No such file"}, 2);

    fresh();
    set_i64_attr(s0, "version", 2);
    refresh_manifest();
    expect_open_error("schema version 2", (const char *[]){"train-00000.h5", "schema version 2"}, 2);

    fresh();
    if (truncate(s1, 3000) != 0)
        tap_diag("truncate failed");
    expect_open_error("a truncated shard", (const char *[]){"train-00001.h5", "3000 bytes but the manifest says"}, 2);
    refresh_manifest();
    expect_open_error("a truncated shard the manifest agrees with",
                      (const char *[]){"train-00001.h5", "cannot be opened as HDF5"}, 2);

    fresh();
    int32_t bad_label = 99;
    poke_dataset(s1, "labels", H5T_NATIVE_INT32, 3, &bad_label);
    refresh_manifest();
    expect_open_error("a label out of range", (const char *[]){"train-00001.h5", "image 3 has label 99"}, 2);

    fresh();
    int64_t far = 1 << 30;
    poke_dataset(s0, "offsets", H5T_NATIVE_INT64, 2, &far);
    refresh_manifest();
    expect_open_error("an offset beyond the data", (const char *[]){"train-00000.h5", "image 2 has offset"}, 2);

    /* an undecodable image: the loader stops with one line naming the shard and the index */
    fresh();
    dt_dataset ds;
    dt_dataset_open(&ds, dir, "train", 0);
    int64_t local;
    const dt_shard *sh = dt_dataset_locate(&ds, 14, &local);
    int fd = open(sh->path, O_WRONLY);
    uint8_t junk[64];
    memset(junk, 0x55, sizeof junk);
    int wrote = fd >= 0 && pwrite(fd, junk, sizeof junk, (off_t)(sh->data_addr + (uint64_t)sh->offsets[local])) == 64;
    if (fd >= 0)
        close(fd);
    dt_loader *L;
    dt_loader_cfg cfg = {.batch = 4, .train = 0, .out_h = 32, .out_w = 32, .workers = 3};
    tap_log_begin();
    int rc = dt_loader_create(&L, &ds, &cfg), got = 0;
    const dt_batch *b;
    if (rc == DT_OK) {
        dt_loader_start(L, 0, 0);
        while ((rc = dt_loader_next(L, &b)) == 1)
            got++;
        dt_loader_free(L);
    }
    char *log = tap_log_take();
    tap_log_end();
    char want[64];
    snprintf(want, sizeof want, "image %lld (index 14 of split train)", (long long)local);
    TAP_OK(wrote && rc == DT_ERR_INPUT && got == 3 && tap_count_lines(log) == 1 && strstr(log, want) &&
               strstr(log, "train-00001.h5"),
           "a corrupt JPEG in a shard stops the loader after %d good batches, in one line: %s", got, log);
    free(log);
    dt_dataset_close(&ds);
}

static double beta_next(void *r)
{
    return dt_rng_uniform(r);
}

/* mixup and cutmix (data/mix.h) against torchvision's RandomMixup and RandomCutmix, transcribed:
 * each batch of a mixing loader equals the same loader's unmixed batch with torchvision's operations
 * applied in float with the batch's drawn parameters (the images rolled by one: image i with i - 1,
 * image 0 with the last), within the uint8 rounding for mixup and exactly for cutmix, whose lambda is
 * 1 - box area / image area; both transforms appear when both alphas are on; Beta(a, a)'s moments. */
static void test_mix(void)
{
    clean_dir();
    int wt = write_split("train", 1, RAW_N, 3);
    dt_manifest_entry *tr;
    int ntr;
    dt_manifest_read(dir, &tr, &ntr);
    int ok = wt == DT_OK && dt_manifest_write(dir, tr, ntr) == DT_OK;
    free(tr);
    dt_dataset ds;
    ok = ok && dt_dataset_open(&ds, dir, "train", 1) == DT_OK;
    TAP_OK(ok, "mixing: a raw training split of %d images", RAW_N);
    if (!ok)
        return;
    const size_t img = RAW_H * RAW_W;
    int kinds[3] = {0, 0, 0}, batches = 0;
    double worst = 0;
    for (int e = 0; e < 4 && ok; e++) {
        dt_loader_cfg plain = {.batch = 8, .train = 1, .workers = 2, .pad = -1, .seed = 5, .mixup_alpha = 0,
                               .cutmix_alpha = 0};
        dt_loader_cfg mixed = plain;
        mixed.mixup_alpha = 0.4;
        mixed.cutmix_alpha = 1.0;
        dt_loader *A, *B;
        ok = dt_loader_create(&A, &ds, &plain) == DT_OK && dt_loader_create(&B, &ds, &mixed) == DT_OK;
        if (!ok)
            break;
        dt_loader_start(A, e, 0);
        dt_loader_start(B, e, 0);
        const dt_batch *a, *b;
        while (ok && dt_loader_next(A, &a) == 1 && dt_loader_next(B, &b) == 1) {
            const dt_mix *m = &b->mix;
            kinds[m->kind]++;
            batches++;
            ok = a->n == b->n && !memcmp(a->y, b->y, (size_t)a->n * sizeof(int32_t)) && m->kind != DT_MIX_NONE;
            if (m->kind == DT_MIX_CUTMIX) { /* torchvision's box from the draws, then lambda from its area */
                const double r = 0.5 * sqrt(1.0 - m->drawn);
                const int rw = (int)(r * RAW_W), rh = (int)(r * RAW_H);
                const int x1 = m->rx - rw < 0 ? 0 : m->rx - rw, y1 = m->ry - rh < 0 ? 0 : m->ry - rh;
                const int x2 = m->rx + rw > RAW_W ? RAW_W : m->rx + rw, y2 = m->ry + rh > RAW_H ? RAW_H : m->ry + rh;
                ok = ok && m->x1 == x1 && m->y1 == y1 && m->x2 == x2 && m->y2 == y2 && m->rx >= 0 && m->rx < RAW_W &&
                     m->ry >= 0 && m->ry < RAW_H &&
                     m->lambda == 1.0 - (double)(x2 - x1) * (y2 - y1) / (RAW_W * RAW_H);
            }
            for (int i = 0; ok && i < a->n; i++) {
                const uint8_t *x = a->x + (size_t)i * img, *o = a->x + (size_t)((i + a->n - 1) % a->n) * img;
                const uint8_t *got = b->x + (size_t)i * img;
                for (int y = 0; ok && y < RAW_H; y++)
                    for (int xx = 0; ok && xx < RAW_W; xx++) {
                        const size_t p = (size_t)y * RAW_W + xx;
                        double want;
                        if (m->kind == DT_MIX_MIXUP) /* batch.mul_(lam).add_(batch_rolled.mul_(1 - lam)) */
                            want = (double)((float)m->lambda * x[p] + (float)(1.0 - m->lambda) * o[p]);
                        else /* batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2] */
                            want = y >= m->y1 && y < m->y2 && xx >= m->x1 && xx < m->x2 ? o[p] : x[p];
                        const double d = fabs(got[p] - want);
                        worst = d > worst ? d : worst;
                        ok = m->kind == DT_MIX_MIXUP ? d <= 0.5 + 1e-4 : d == 0;
                    }
            }
        }
        dt_loader_free(A);
        dt_loader_free(B);
    }
    TAP_OK(ok && kinds[DT_MIX_MIXUP] > 0 && kinds[DT_MIX_CUTMIX] > 0,
           "mixing: %d batches = torchvision's RandomMixup (%d) and RandomCutmix (%d) on the unmixed batches, worst "
           "pixel %.3f of 255 (mixup's rounding to uint8), cutmix exact",
           batches, kinds[DT_MIX_MIXUP], kinds[DT_MIX_CUTMIX], worst);
    dt_mix m1 = dt_mix_draw(5, 2, 7, 0.4, 1.0, 32, 32), m2 = dt_mix_draw(5, 2, 7, 0.4, 1.0, 32, 32),
           m3 = dt_mix_draw(5, 2, 8, 0.4, 1.0, 32, 32);
    TAP_OK(m1.kind == m2.kind && m1.lambda == m2.lambda && m1.x1 == m2.x1 && m1.y2 == m2.y2 &&
               (m1.lambda != m3.lambda || m1.kind != m3.kind),
           "mixing: a batch's draws follow from (seed, epoch, step): the same again, another for the next step");
    for (int k = 0; k < 2; k++) {
        const double a = k ? 1.0 : 0.2, want_var = 1.0 / (4.0 * (2.0 * a + 1.0));
        dt_rng r;
        dt_rng_seed(&r, 99, (uint64_t)k);
        double s1 = 0, s2 = 0;
        const int N = 20000;
        for (int i = 0; i < N; i++) {
            double v = dt_beta_symmetric(a, beta_next, &r);
            s1 += v;
            s2 += v * v;
        }
        const double mean = s1 / N, var = s2 / N - mean * mean;
        TAP_OK(fabs(mean - 0.5) < 0.01 && fabs(var - want_var) < 0.05 * want_var,
               "Beta(%.1f, %.1f): mean %.4f (0.5), variance %.4f (%.4f) over %d draws", a, a, mean, var, want_var, N);
    }
    dt_dataset_close(&ds);
}

int main(void)
{
    dt_log_init();
    alarm(120); /* a hang is a failure */
    snprintf(dir, sizeof dir, "tmp-test-loader-XXXXXX");
    if (!mkdtemp(dir))
        return tap_skip_all("cannot make a temporary directory here");
    test_raw();
    test_mix();
    test_encoded();
    test_bad();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
