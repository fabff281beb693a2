/* loader.h: batches of uint8 NHWC images for one rank, made by worker threads ahead of time.
 *
 * Each epoch the sampler (sampler.h) gives this rank its images; worker threads read them from the
 * shards (pread), decode and augment them into `prefetch` reusable batch buffers, and the trainer
 * takes the batches in order. Nothing is allocated per batch.
 *   encoded shards, training:   RandomResizedCrop(out, scale, ratio) + horizontal flip (p = 0.5);
 *   encoded shards, validation: Resize(val_resize) + CenterCrop(out), in one resampling;
 *   both resample with `interpolation` (torchvision's --interpolation) as PIL does (data/image.h);
 *   raw shards, training:       random crop of the image zero-padded by `pad` + flip (CIFAR recipe);
 *   raw shards, validation:     the image as it is (centre crop when out is smaller).
 * Training images then go through `aug` (AutoAugment, RandAugment, TrivialAugmentWide, RandomErasing),
 * each with its own draws, as torchvision's ClassificationPresetTrain orders them.
 * Normalisation is left to the device (or backend): batches stay uint8.
 * Every random choice for an image comes from (seed, epoch, its position in the epoch order), so
 * batches are identical whatever the number of workers, and an epoch resumes at any step. A read or
 * decode failure stops the loader: one line names the shard and the index, the batches before the
 * failing one are still served, and dt_loader_next then returns the error (no hang: workers stop). */
#ifndef DT_DATA_LOADER_H
#define DT_DATA_LOADER_H

#include <stdint.h>

#include "data/augment.h"
#include "data/mix.h"
#include "data/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_loader_cfg {
    int batch;                  /* images per batch on this rank */
    int train;                  /* 1: shuffle and augment; 0: validation order and centre crops */
    int out_h, out_w;           /* output size; 0: 224 (encoded) or the shard's size (raw) */
    int val_resize;             /* validation resize of the shorter side; 0: 256 (out 224) scaled with out */
    double scale_min, scale_max; /* RandomResizedCrop area range; 0, 0: 0.08, 1 */
    double ratio_min, ratio_max; /* aspect range; 0, 0: 3/4, 4/3 */
    int no_flip;                /* 1: no horizontal flips */
    int pad;                    /* raw training crop padding; -1: none, 0: 4 */
    int workers;                /* threads; 0: 1 */
    int prefetch;               /* batches made ahead; 0: 2 per worker, at least 2 */
    int drop_last;              /* 1: skip this rank's last, partial batch */
    uint64_t seed;
    int rank, world;            /* world 0: 1 */
    int ra_reps;                /* training: torchvision's RASampler with this many repetitions (0, 1: none) */
    double mixup_alpha, cutmix_alpha; /* training: mix each batch (data/mix.h); 0, 0: none */
    int interpolation;          /* enum dt_filter (data/image.h); 0: bilinear */
    dt_aug_cfg aug;             /* training: torchvision's --auto-augment and --random-erase after the crop and
                                 * flip (data/augment.h); policy DT_AUG_NONE and erase_p 0: none */
} dt_loader_cfg;

typedef struct dt_batch {
    int64_t step;               /* its step in the epoch */
    int n;                      /* images in it (the last may be short) */
    int h, w, c;
    uint8_t *x;                 /* n * h * w * c, NHWC */
    int32_t *y;                 /* n labels */
    uint8_t *counted;           /* n flags: 0 for the sampler's padding */
    int64_t *index;             /* n image indices in the split */
    dt_mix mix;                 /* how the batch was mixed (kind DT_MIX_NONE: not) */
} dt_batch;

typedef struct dt_loader dt_loader;

/* DT_OK, DT_ERR_INPUT (a size or count that makes no sense: one line naming the setting), DT_ERR_NOMEM
 * or DT_ERR_SYS (threads). The dataset must outlive the loader. */
int dt_loader_create(dt_loader **out, const dt_dataset *ds, const dt_loader_cfg *cfg);
/* Batches per epoch on this rank. */
int64_t dt_loader_steps(const dt_loader *L);
/* Images per epoch on this rank (with padding). */
int64_t dt_loader_samples(const dt_loader *L);
/* Starts an epoch at a step (0 for the start; a later one to resume). Stops any epoch under way. */
int dt_loader_start(dt_loader *L, int64_t epoch, int64_t first_step);
/* The next batch, valid until the next call: 1, 0 when the epoch is done, or a negative status. */
int dt_loader_next(dt_loader *L, const dt_batch **b);
void dt_loader_free(dt_loader *L);

#ifdef __cplusplus
}
#endif
#endif
