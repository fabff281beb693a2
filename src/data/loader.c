/* loader.c: worker threads filling a ring of batch buffers (contract in loader.h).
 *
 * Work is handed out one image at a time under one mutex: step s goes to slot s % nslots, and a
 * worker may start on step s only once the trainer has released step s - nslots. The trainer
 * waits for the slot of its next step to be complete. Restarting an epoch bumps a generation
 * counter and waits for the images in flight, so a stale worker never writes into a new epoch. */
#include "config.h"

#include "data/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "data/sampler.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"
#include "util/rng.h"

struct dt_loader {
    const dt_dataset *ds;
    dt_loader_cfg cfg;
    dt_sampler smp;
    int h, w, c;
    size_t img_bytes;
    int64_t steps, samples;
    int nslots;
    dt_batch *slots;
    int *done;                  /* images finished per slot */
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    /* epoch state, under mu */
    uint64_t gen;               /* bumped by every (re)start */
    int active, quit, err;
    int64_t err_step;           /* the step whose image failed (batches before it are still served) */
    int64_t fill_step, fill_j;  /* the next image to hand out */
    int64_t low;                /* the oldest step the trainer has not released */
    int held;                   /* the trainer holds step low */
    int busy;                   /* images being made right now */
};

static int step_images(const dt_loader *L, int64_t s)
{
    int64_t left = L->samples - s * L->cfg.batch;
    return (int)(left < L->cfg.batch ? left : L->cfg.batch);
}

/* raw pixels: random crop of the zero-padded image (train) and flip, or a copy */
static void raw_augment(const dt_loader *L, const uint8_t *src, uint8_t *dst, dt_rng *r)
{
    const int h = L->h, w = L->w, c = L->c;
    int top = 0, left = 0, flip = 0;
    if (L->cfg.train) {
        int p = L->cfg.pad;
        top = (int)dt_rng_below(r, (uint64_t)(2 * p + 1)) - p;
        left = (int)dt_rng_below(r, (uint64_t)(2 * p + 1)) - p;
        flip = !L->cfg.no_flip && dt_rng_uniform(r) < 0.5;
    }
    for (int y = 0; y < h; y++) {
        int sy = y + top;
        for (int x = 0; x < w; x++) {
            int sx = (flip ? w - 1 - x : x) + left;
            uint8_t *o = dst + ((size_t)y * w + x) * c;
            if (sy < 0 || sy >= h || sx < 0 || sx >= w)
                memset(o, 0, (size_t)c);
            else
                memcpy(o, src + ((size_t)sy * w + sx) * c, (size_t)c);
        }
    }
}

typedef struct worker_mem {
    uint8_t *buf;
    size_t cap;
    uint8_t *other;             /* one image: mixing's copy of a batch's last image */
    uint8_t *aug;               /* the augmentation's scratch (dt_aug_scratch_bytes) */
    dt_image_scratch scratch;
} worker_mem;

/* a training image's policy and erasing (cfg.aug), drawing on after its crop and flip */
static int augment(const dt_loader *L, uint8_t *img, dt_rng *r, worker_mem *wm)
{
    const dt_aug_cfg *a = &L->cfg.aug;
    if (!L->cfg.train || (a->policy == DT_AUG_NONE && a->erase_p <= 0))
        return DT_OK;
    if (!wm->aug && !(wm->aug = malloc(dt_aug_scratch_bytes(L->h, L->w, L->c))))
        return DT_ERR_NOMEM;
    dt_aug_apply(a, img, L->h, L->w, L->c, r, wm->aug);
    return DT_OK;
}

/* makes image j of step s into its slot; DT_OK or an error after one line */
static int make_image(dt_loader *L, int64_t s, int64_t j, worker_mem *wm)
{
    const dt_dataset *ds = L->ds;
    dt_batch *b = &L->slots[s % L->nslots];
    int counted;
    int64_t pos, idx = dt_sampler_get(&L->smp, s * L->cfg.batch + j, &counted, &pos);
    b->y[j] = ds->labels[idx];
    b->counted[j] = (uint8_t)counted;
    b->index[j] = idx;
    size_t n = dt_dataset_item_bytes(ds, idx);
    if (dt_grow((void **)&wm->buf, &wm->cap, n, 1) != DT_OK)
        return DT_ERR_NOMEM;
    int rc = dt_dataset_read(ds, idx, wm->buf);
    if (rc != DT_OK)
        return rc;
    dt_rng r; /* this image's draws: the same whichever worker makes it */
    dt_rng_seed(&r, dt_hash64(L->cfg.seed, (uint64_t)L->smp.epoch), (uint64_t)pos);
    uint8_t *out = b->x + (size_t)j * L->img_bytes;
    if (ds->kind == DT_SHARD_RAW) {
        raw_augment(L, wm->buf, out, &r);
        return augment(L, out, &r, wm);
    }
    char err[256];
    int W, H;
    if (dt_jpeg_size(wm->buf, n, &W, &H, err, sizeof err) == 0) {
        dt_box box = L->cfg.train ? dt_rrc_box(W, H, L->cfg.scale_min, L->cfg.scale_max, L->cfg.ratio_min,
                                               L->cfg.ratio_max, &r)
                                  : dt_center_box(W, H, L->cfg.val_resize, L->w);
        int flip = L->cfg.train && !L->cfg.no_flip && dt_rng_uniform(&r) < 0.5;
        if (dt_jpeg_decode_box(wm->buf, n, box, L->w, L->h, L->cfg.interpolation, flip, out, &wm->scratch, err,
                               sizeof err) == 0)
            return augment(L, out, &r, wm);
    }
    int64_t local;
    const dt_shard *sh = dt_dataset_locate(ds, idx, &local);
    dt_error("shard %s: image %lld (index %lld of split %s) cannot be decoded: %s", sh->path, (long long)local,
             (long long)idx, ds->split, err);
    return DT_ERR_INPUT;
}

/* with mixup or cutmix, a batch is ready once its images are made and one more count: the mixing */
static int mixing(const dt_loader *L)
{
    return L->cfg.train && (L->cfg.mixup_alpha > 0 || L->cfg.cutmix_alpha > 0);
}

/* the worker that made step s's last image mixes the batch (in slot) */
static int mix_batch(dt_loader *L, int64_t s, int slot, worker_mem *wm)
{
    if (!wm->other && !(wm->other = malloc(L->img_bytes)))
        return DT_ERR_NOMEM;
    dt_batch *b = &L->slots[slot];
    b->mix = dt_mix_draw(L->cfg.seed, L->smp.epoch, s, L->cfg.mixup_alpha, L->cfg.cutmix_alpha, L->h, L->w);
    dt_mix_apply(&b->mix, b->x, step_images(L, s), L->h, L->w, L->c, wm->other);
    return DT_OK;
}

static int work_ready(const dt_loader *L)
{
    return L->active && !L->err && L->fill_step < L->steps && L->fill_step < L->low + L->nslots;
}

static void *worker(void *arg)
{
    dt_loader *L = arg;
    worker_mem wm = {0};
    pthread_mutex_lock(&L->mu);
    for (;;) {
        while (!L->quit && !work_ready(L))
            pthread_cond_wait(&L->work_cv, &L->mu);
        if (L->quit)
            break;
        int64_t s = L->fill_step, j = L->fill_j++;
        if (j == 0)
            L->done[s % L->nslots] = 0;
        if (L->fill_j == step_images(L, s)) {
            L->fill_step++;
            L->fill_j = 0;
        }
        uint64_t gen = L->gen;
        L->busy++;
        pthread_mutex_unlock(&L->mu);
        int rc = make_image(L, s, j, &wm);
        pthread_mutex_lock(&L->mu);
        L->busy--;
        if (gen == L->gen) {
            if (rc != DT_OK && (!L->err || s < L->err_step)) {
                L->err = rc; /* items go out in order: every step before s is handed out and completes */
                L->err_step = s;
            }
            const int slot = (int)(s % L->nslots), n = step_images(L, s);
            if (++L->done[slot] == n && rc == DT_OK && mixing(L)) { /* the batch is made: mix it */
                L->busy++;
                pthread_mutex_unlock(&L->mu);
                rc = mix_batch(L, s, slot, &wm);
                pthread_mutex_lock(&L->mu);
                L->busy--;
                if (gen == L->gen) {
                    if (rc != DT_OK && (!L->err || s < L->err_step)) {
                        L->err = rc;
                        L->err_step = s;
                    }
                    L->done[slot]++;
                }
            }
            if (L->done[slot] == n + mixing(L) || rc != DT_OK)
                pthread_cond_broadcast(&L->done_cv);
        }
        if (!L->busy)
            pthread_cond_broadcast(&L->done_cv); /* a restart may be waiting for this */
    }
    pthread_mutex_unlock(&L->mu);
    free(wm.buf);
    free(wm.other);
    free(wm.aug);
    dt_image_scratch_free(&wm.scratch);
    return NULL;
}

static int bad(const char *what, long long v, const char *why)
{
    dt_error("loader: %s = %lld: %s", what, v, why);
    return DT_ERR_INPUT;
}

int dt_loader_create(dt_loader **out, const dt_dataset *ds, const dt_loader_cfg *cfg)
{
    *out = NULL;
    dt_loader_cfg c = *cfg;
    int raw = ds->kind == DT_SHARD_RAW;
    if (!c.world)
        c.world = 1;
    if (!c.workers)
        c.workers = 1;
    if (!c.prefetch)
        c.prefetch = 2 * c.workers > 2 ? 2 * c.workers : 2;
    if (!c.scale_min && !c.scale_max) {
        c.scale_min = 0.08;
        c.scale_max = 1.0;
    }
    if (!c.ratio_min && !c.ratio_max) {
        c.ratio_min = 3.0 / 4.0;
        c.ratio_max = 4.0 / 3.0;
    }
    if (!c.pad)
        c.pad = 4;
    if (c.pad < 0)
        c.pad = 0;
    if (!c.out_h && !c.out_w) {
        c.out_h = raw ? ds->h : 224;
        c.out_w = raw ? ds->w : 224;
    }
    if (!c.val_resize)
        c.val_resize = (int)((c.out_w * 256 + 112) / 224); /* 224 -> 256, 112 -> 128, ... */
    if (c.batch < 1 || c.batch > 1 << 20)
        return bad("batch", c.batch, "must be 1 or more");
    if (c.workers < 1 || c.workers > 1024)
        return bad("workers", c.workers, "must be 1..1024");
    if (c.prefetch < 1 || c.prefetch > 4096)
        return bad("prefetch", c.prefetch, "must be 1..4096");
    if (c.interpolation < 0 || c.interpolation >= DT_FILTER_COUNT)
        return bad("interpolation", c.interpolation, "is not a resampling filter (data/image.h)");
    const dt_aug_cfg *a = &c.aug;
    if (a->policy != DT_AUG_NONE && (a->num_magnitude_bins < 2 || a->ra_magnitude < 0 ||
                                     a->ra_magnitude >= a->num_magnitude_bins || a->ra_num_ops < 1 ||
                                     a->ra_num_ops > DT_AUG_MAX_STEPS))
        return bad("augmentation magnitude", a->ra_magnitude, "must be below the bins, with 1..4 ops");
    if (!(a->erase_p >= 0 && a->erase_p <= 1))
        return bad("random erasing", (long long)(a->erase_p * 100), "percent must be 0..100");
    if (raw && (c.out_h != ds->h || c.out_w != ds->w)) {
        dt_error("loader: raw shards hold %dx%d images; crops of %dx%d would need resizing, which raw shards do not do",
                 ds->h, ds->w, c.out_h, c.out_w);
        return DT_ERR_INPUT;
    }
    if (!raw && (c.out_h != c.out_w || c.out_h < 8 || c.out_h > 4096))
        return bad("crop size", c.out_h, "encoded images give square crops of 8..4096 pixels");
    if (!raw && (c.scale_min <= 0 || c.scale_min > c.scale_max || c.scale_max > 1 || c.ratio_min <= 0 ||
                 c.ratio_min > c.ratio_max)) {
        dt_error("loader: crop scale %g..%g and ratio %g..%g: need 0 < scale_min <= scale_max <= 1 and 0 < ratio_min <= "
                 "ratio_max",
                 c.scale_min, c.scale_max, c.ratio_min, c.ratio_max);
        return DT_ERR_INPUT;
    }
    if (c.val_resize < c.out_w)
        return bad("validation resize", c.val_resize, "must be at least the crop size");
    dt_loader *L = calloc(1, sizeof *L);
    if (!L)
        return DT_ERR_NOMEM;
    L->ds = ds;
    L->cfg = c;
    int rc = dt_sampler_init(&L->smp, ds->count, c.rank, c.world, c.train, c.seed);
    if (rc == DT_OK && c.train && c.ra_reps > 1 && (rc = dt_sampler_set_repeats(&L->smp, c.ra_reps)) != DT_OK)
        dt_sampler_free(&L->smp);
    if (rc != DT_OK) {
        free(L);
        return rc;
    }
    L->h = c.out_h;
    L->w = c.out_w;
    L->c = raw ? ds->c : 3;
    L->img_bytes = (size_t)L->h * L->w * L->c;
    L->samples = L->smp.per_rank;
    L->steps = c.drop_last ? L->samples / c.batch : (L->samples + c.batch - 1) / c.batch;
    if (L->steps < 1) {
        dt_error("loader: a batch of %d with drop_last leaves no batch: this rank has %lld images", c.batch,
                 (long long)L->samples);
        dt_sampler_free(&L->smp);
        free(L);
        return DT_ERR_INPUT;
    }
    L->nslots = c.prefetch;
    L->slots = calloc((size_t)L->nslots, sizeof *L->slots);
    L->done = calloc((size_t)L->nslots, sizeof *L->done);
    L->threads = calloc((size_t)c.workers, sizeof *L->threads);
    rc = L->slots && L->done && L->threads ? DT_OK : DT_ERR_NOMEM;
    for (int i = 0; rc == DT_OK && i < L->nslots; i++) {
        dt_batch *b = &L->slots[i];
        b->h = L->h;
        b->w = L->w;
        b->c = L->c;
        b->x = malloc((size_t)c.batch * L->img_bytes);
        b->y = malloc((size_t)c.batch * sizeof(int32_t));
        b->counted = malloc((size_t)c.batch);
        b->index = malloc((size_t)c.batch * sizeof(int64_t));
        if (!b->x || !b->y || !b->counted || !b->index)
            rc = DT_ERR_NOMEM;
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->work_cv, NULL);
    pthread_cond_init(&L->done_cv, NULL);
    for (int i = 0; rc == DT_OK && i < c.workers; i++) {
        int e = pthread_create(&L->threads[i], NULL, worker, L);
        if (e) {
            dt_error("loader: cannot start worker thread %d: %s", i, strerror(e));
            rc = DT_ERR_SYS;
        } else {
            L->nthreads++;
        }
    }
    if (rc != DT_OK) {
        dt_loader_free(L);
        return rc;
    }
    *out = L;
    return DT_OK;
}

int64_t dt_loader_steps(const dt_loader *L)
{
    return L->steps;
}

int64_t dt_loader_samples(const dt_loader *L)
{
    return L->samples;
}

int dt_loader_start(dt_loader *L, int64_t epoch, int64_t first_step)
{
    if (first_step < 0 || first_step > L->steps) {
        dt_error("loader: cannot start epoch %lld at step %lld: an epoch has %lld steps", (long long)epoch,
                 (long long)first_step, (long long)L->steps);
        return DT_ERR_INPUT;
    }
    pthread_mutex_lock(&L->mu);
    L->active = 0;
    L->gen++;
    while (L->busy) /* images of the old epoch still being made */
        pthread_cond_wait(&L->done_cv, &L->mu);
    dt_sampler_set_epoch(&L->smp, epoch);
    L->err = 0;
    L->fill_step = L->low = first_step;
    L->fill_j = 0;
    L->held = 0;
    L->active = 1;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
    return DT_OK;
}

int dt_loader_next(dt_loader *L, const dt_batch **out)
{
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    if (!L->active) {
        pthread_mutex_unlock(&L->mu);
        dt_error("loader: next batch asked before an epoch was started");
        return DT_ERR_STATE;
    }
    if (L->held) { /* the trainer is done with the previous batch: its slot can be refilled */
        L->held = 0;
        L->low++;
        pthread_cond_broadcast(&L->work_cv);
    }
    int rc = 0;
    if (L->low >= L->steps) {
        rc = 0;
    } else {
        int64_t s = L->low;
        int slot = (int)(s % L->nslots), n = step_images(L, s);
        /* the slot is this step's once a worker took its first image (fill_step moved past it, or
         * is on it with fill_j > 0); until then done[] may still count the previous occupant */
        while (!(L->err && L->err_step <= s) &&
               !((L->fill_step > s || (L->fill_step == s && L->fill_j > 0)) && L->done[slot] == n + mixing(L)))
            pthread_cond_wait(&L->done_cv, &L->mu);
        if (L->err && L->err_step <= s) {
            rc = L->err;
            L->active = 0;
        } else {
            dt_batch *b = &L->slots[slot];
            b->step = s;
            b->n = n;
            if (!mixing(L))
                b->mix = (dt_mix){DT_MIX_NONE, 1.0, 0, 0, 0, 0, 1.0, 0, 0};
            L->held = 1;
            *out = b;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&L->mu);
    return rc;
}

void dt_loader_free(dt_loader *L)
{
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    L->quit = 1;
    L->active = 0;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < L->nthreads; i++)
        pthread_join(L->threads[i], NULL);
    for (int i = 0; L->slots && i < L->nslots; i++) {
        free(L->slots[i].x);
        free(L->slots[i].y);
        free(L->slots[i].counted);
        free(L->slots[i].index);
    }
    free(L->slots);
    free(L->done);
    free(L->threads);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->work_cv);
    pthread_cond_destroy(&L->done_cv);
    dt_sampler_free(&L->smp);
    free(L);
}
