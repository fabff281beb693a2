/* sampler.c: DistributedSampler semantics (contract in sampler.h). */
#include "config.h"

#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

int dt_sampler_init(dt_sampler *s, int64_t n, int rank, int world, int shuffle, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    if (n < 1 || world < 1 || rank < 0 || rank >= world) {
        dt_error("sampler: %lld images for rank %d of %d: need at least one image and 0 <= rank < world", (long long)n,
                 rank, world);
        return DT_ERR_INPUT;
    }
    s->order = malloc((size_t)n * sizeof(int64_t));
    if (!s->order)
        return DT_ERR_NOMEM;
    s->n = n;
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->seed = seed;
    s->per_rank = (n + world - 1) / world;
    s->reps = 1;
    dt_sampler_set_epoch(s, 0);
    return DT_OK;
}

void dt_sampler_set_epoch(dt_sampler *s, int64_t epoch)
{
    s->epoch = epoch;
    for (int64_t i = 0; i < s->n; i++)
        s->order[i] = i;
    if (!s->shuffle)
        return;
    dt_rng r; /* every rank draws the same permutation: same seed and epoch */
    dt_rng_seed(&r, s->seed, 0x5a3d1e5000000000ull ^ (uint64_t)epoch);
    for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = (int64_t)dt_rng_below(&r, (uint64_t)i + 1);
        int64_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

int dt_sampler_set_repeats(dt_sampler *s, int reps)
{
    if (reps < 1) {
        dt_error("--ra-reps %d: must be at least 1", reps);
        return DT_ERR_INPUT;
    }
    s->reps = reps;
    if (reps == 1) {
        s->per_rank = (s->n + s->world - 1) / s->world;
        return DT_OK;
    }
    s->per_rank = s->n / 256 * 256 / s->world; /* RASampler's num_selected_samples */
    if (s->per_rank < 1) {
        dt_error("--ra-sampler: %lld images over %d ranks leave a rank none (torchvision's RASampler keeps "
                 "(images // 256 * 256) / ranks per rank)", (long long)s->n, s->world);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

int64_t dt_sampler_get(const dt_sampler *s, int64_t k, int *counted, int64_t *position)
{
    int64_t p = s->rank + k * s->world; /* position in the padded order */
    if (position)
        *position = p;
    if (s->reps > 1) { /* the order with each image reps times, padded from its start */
        if (counted)
            *counted = 1;
        return s->order[p % (s->n * s->reps) / s->reps];
    }
    if (counted)
        *counted = p < s->n;
    return s->order[p % s->n]; /* padding repeats the order from its start */
}

void dt_sampler_free(dt_sampler *s)
{
    free(s->order);
    memset(s, 0, sizeof *s);
}
