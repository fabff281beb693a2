/* data.c: the run's data side (contract in trainer_int.h): the training and validation sets packed
 * by dtpack (or none, with --synthetic), the model's input and output sizes they imply, the batch
 * sizes the loaders will give (for planning the model), the normalisation (ImageNet's constants for
 * encoded images, measured for raw shards), the loaders (one per set, this rank's share of each
 * epoch) and the steps an epoch has. Every rank opens and checks everything itself; nothing is
 * written. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "data/image.h"
#include "train/trainer_int.h"
#include "util/check.h"
#include "util/log.h"

/* the loaders' drop_last: training drops an epoch's last, partial batch on each rank (every step
 * then has the full batch); validation keeps it (every image is counted) */
#define TRAIN_DROP_LAST 1
#define VAL_DROP_LAST 0

int dt_batch_sizes(int64_t images, int world, int batch, int drop_last, int out[2])
{
    if (images < 1 || world < 1 || batch < 1)
        return 0;
    int64_t per_rank = (images + world - 1) / world; /* the sampler pads every rank to this */
    int k = 0;
    if (per_rank >= batch)
        out[k++] = batch;
    if (!drop_last && per_rank % batch)
        out[k++] = (int)(per_rank % batch);
    return k;
}

int dt_run_batch_sizes(const dt_run *r, int out[5])
{
    const dt_train_cfg *cfg = r->cfg;
    int k = 0;
    out[k++] = cfg->batch; /* --synthetic: every step */
    if (r->have_train_set && cfg->ra_sampler) { /* RASampler's samples per rank: full batches only */
        if (r->train_set.count / 256 * 256 / r->launch.size >= cfg->batch)
            out[k++] = cfg->batch;
    } else if (r->have_train_set) {
        k += dt_batch_sizes(r->train_set.count, r->launch.size, cfg->batch, TRAIN_DROP_LAST, out + k);
    }
    if (r->have_val_set)
        k += dt_batch_sizes(r->val_set.count, r->launch.size, cfg->batch, VAL_DROP_LAST, out + k);
    return k;
}

int dt_run_open_datasets(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    if (cfg->synthetic) {
        r->classes = 1000;
        r->channels = 3;
        r->image_size = r->val_size = cfg->crop ? cfg->crop : 224;
        return DT_OK;
    }
    if (!cfg->data) {
        dt_error("no data directory given (a directory packed by dtpack, or --synthetic)");
        return DT_ERR_INPUT;
    }
    if (dt_dataset_open(&r->train_set, cfg->data, "train", 0) != DT_OK)
        return DT_ERR_INPUT;
    r->have_train_set = 1;
    if (dt_dataset_open(&r->val_set, cfg->data, "val", 0) != DT_OK)
        return DT_ERR_INPUT;
    r->have_val_set = 1;
    if (dt_dataset_check_splits(&r->train_set, &r->val_set) != DT_OK) /* as dtpack verify: kind, classes, size */
        return DT_ERR_INPUT;
    int raw = r->train_set.kind == DT_SHARD_RAW;
    r->classes = r->train_set.num_classes;
    r->channels = raw ? r->train_set.c : 3;
    r->image_size = raw ? r->train_set.h : (cfg->crop ? cfg->crop : 224);
    r->val_size = raw || !cfg->val_crop ? r->image_size : cfg->val_crop;
    if (raw && (cfg->val_crop || cfg->val_resize || cfg->crop)) {
        dt_error("%s: --train-crop-size (--crop), --val-crop-size and --val-resize-size are for encoded images; "
                 "its shards are raw %dx%d images", cfg->data, r->train_set.w, r->train_set.h);
        return DT_ERR_INPUT;
    }
    /* flags that would do nothing with this data are refused, as dtrain refuses them on its command
     * line (doc/dtrain.1, OPTIONS): raw shards are cropped from padding and never resized, encoded
     * images are never padded */
    if (raw && cfg->interpolation >= 0 && (!cfg->auto_augment || cfg->interpolation > DT_FILTER_NEAREST)) {
        dt_error("%s: --interpolation %s has no effect on raw shards (%dx%d images, never resized)%s", cfg->data,
                 dt_filter_name(cfg->interpolation), r->train_set.w, r->train_set.h,
                 cfg->auto_augment ? ": with --auto-augment only nearest or bilinear, its operations' filter" : "");
        return DT_ERR_INPUT;
    }
    if (!raw && cfg->crop_padding) {
        dt_error("%s: --crop-padding has no effect on encoded images (RandomResizedCrop pads nothing); it is for "
                 "raw shards", cfg->data);
        return DT_ERR_INPUT;
    }
    if (cfg->val_resize && cfg->val_resize < r->val_size) {
        dt_error("--val-resize-size %d: below the validation crop of %d (--val-crop-size, or --crop)", cfg->val_resize,
                 r->val_size);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

/* per-channel mean and standard deviation of the training images, for normalisation: ImageNet's
 * for encoded data (torchvision's constants); measured on up to 10000 images for raw shards */
static int measure_norm(dt_run *r)
{
    static const float im_mean[3] = {0.485f, 0.456f, 0.406f}, im_std[3] = {0.229f, 0.224f, 0.225f};
    const dt_dataset *d = &r->train_set;
    if (r->cfg->synthetic || d->kind == DT_SHARD_ENCODED) {
        for (int ch = 0; ch < 3; ch++) {
            r->mean[ch] = im_mean[ch];
            r->std[ch] = im_std[ch];
        }
        return DT_OK;
    }
    int64_t n = d->count < 10000 ? d->count : 10000;
    size_t bytes = (size_t)d->h * d->w * d->c;
    uint8_t *buf = malloc(bytes);
    double s[4] = {0}, q[4] = {0};
    if (!buf)
        return DT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (dt_dataset_read(d, i * (d->count / n), buf) != DT_OK) {
            free(buf);
            return DT_ERR_INPUT;
        }
        for (size_t k = 0; k < bytes; k++) {
            double v = buf[k] / 255.0;
            s[k % d->c] += v;
            q[k % d->c] += v * v;
        }
    }
    free(buf);
    double per = (double)n * (double)bytes / d->c;
    for (int ch = 0; ch < d->c; ch++) {
        double mu = s[ch] / per, var = q[ch] / per - mu * mu;
        r->mean[ch] = (float)mu;
        r->std[ch] = (float)sqrt(var > 1e-8 ? var : 1e-8);
    }
    return DT_OK;
}

int dt_run_load_data(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    DT_TRY(measure_norm(r));
    dt_loader_cfg lc = {.batch = cfg->batch, .train = 1, .workers = cfg->workers, .seed = cfg->seed,
                        .rank = r->launch.rank, .world = r->launch.size, .drop_last = TRAIN_DROP_LAST,
                        .ra_reps = cfg->ra_sampler ? cfg->ra_reps : 1,
                        .mixup_alpha = cfg->mixup_alpha, .cutmix_alpha = cfg->cutmix_alpha,
                        .out_h = r->image_size, .out_w = r->image_size, .pad = cfg->crop_padding,
                        .interpolation = cfg->interpolation < 0 ? DT_FILTER_BILINEAR : cfg->interpolation};
    /* --auto-augment, --random-erase: erasing fills with the mean, torchvision's 0 after Normalize */
    lc.aug = (dt_aug_cfg){.policy = cfg->auto_augment, .ra_num_ops = 2, .ra_magnitude = cfg->ra_magnitude,
                          .num_magnitude_bins = 31, .erase_p = cfg->random_erase,
                          .interp = cfg->interpolation == DT_FILTER_NEAREST ? DT_AUG_NEAREST : DT_AUG_BILINEAR};
    for (int ch = 0; ch < r->channels && ch < 3; ch++)
        lc.aug.erase_fill[ch] = (uint8_t)lrint(r->mean[ch] * 255.0f);
    if (!cfg->synthetic)
        DT_TRY(dt_loader_create(&r->train_loader, &r->train_set, &lc));
    lc.train = 0;
    lc.drop_last = VAL_DROP_LAST;
    lc.out_h = lc.out_w = r->val_size;
    lc.val_resize = cfg->val_resize;
    if (r->have_val_set)
        DT_TRY(dt_loader_create(&r->val_loader, &r->val_set, &lc));
    r->steps_per_epoch = cfg->synthetic ? (cfg->max_steps ? cfg->max_steps : 100)
                                        : dt_loader_steps(r->train_loader) / cfg->accum_steps;
    if (r->steps_per_epoch < 1) {
        dt_error("%s: a batch of %d x %d accumulation steps x %d ranks leaves no step in an epoch", cfg->data,
                 cfg->batch, cfg->accum_steps, r->launch.size);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}
