/* sampler.h: which images a rank reads in an epoch, with torch.utils.data.DistributedSampler's
 * semantics (drop_last false):
 *   - the order is a permutation drawn from (seed, epoch) when shuffling, else 0..n-1;
 *   - it is padded to a multiple of the world size by repeating its start, so every rank gets
 *     the same number of samples, ceil(n / world);
 *   - rank r takes positions r, r + world, r + 2*world, ...
 * Padded samples are flagged "not counted": training uses them (as PyTorch does), validation
 * leaves them out of its accuracy, so every image is counted exactly once across ranks.
 * The permutation is our own (xoshiro Fisher-Yates), not torch.randperm's: the same seed gives the
 * same order on every machine and rank, but not PyTorch's order.
 *
 * With repeats (dt_sampler_set_repeats: --ra-sampler), torchvision's RASampler (its reference
 * recipe's repeated augmentation): each image of the order appears reps times in a row, that list
 * is padded to a multiple of the world size from its start, rank r takes positions r, r + world,
 * ..., and each rank keeps only its first floor((n // 256 * 256) / world) samples (so an epoch has
 * about as many samples as without repeats, and drops up to 255 images' worth). Every sample has
 * its own position, so the copies of an image get different augmentations. */
#ifndef DT_DATA_SAMPLER_H
#define DT_DATA_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_sampler {
    int64_t n;          /* images in the split */
    int rank, world;
    int shuffle;
    uint64_t seed;
    int64_t epoch;
    int64_t per_rank;   /* ceil(n / world); with repeats, RASampler's floor((n // 256 * 256) / world) */
    int reps;           /* 1, or RASampler's repetitions */
    int64_t *order;     /* n: the epoch's order */
} dt_sampler;

/* DT_OK, DT_ERR_INPUT (n < 1, rank outside 0..world-1) or DT_ERR_NOMEM. Starts at epoch 0. */
int dt_sampler_init(dt_sampler *s, int64_t n, int rank, int world, int shuffle, uint64_t seed);
void dt_sampler_set_epoch(dt_sampler *s, int64_t epoch);
/* RASampler's repeated augmentation with reps copies of each image (reps 1: none). DT_OK, or
 * DT_ERR_INPUT (one line) when that leaves a rank no sample (under 256 images, or too many ranks). */
int dt_sampler_set_repeats(dt_sampler *s, int reps);
/* The k-th sample of this rank (0 <= k < per_rank): its image index; *counted is 0 for padding.
 * *position (when not NULL) is its place in the padded epoch order, the same on every rank. */
int64_t dt_sampler_get(const dt_sampler *s, int64_t k, int *counted, int64_t *position);
void dt_sampler_free(dt_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
