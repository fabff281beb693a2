/* test_sampler.c: DistributedSampler semantics: each epoch every image appears once across the
 * ranks plus the documented padding (the order's start repeated), padding is flagged, epochs
 * differ, the same seed repeats, and without shuffling the order is 0..n-1. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "tap.h"
#include "util/check.h"

/* one epoch over all ranks: counts of each index (counted and padded separately) */
static int epoch_ok(int64_t n, int world, int shuffle, uint64_t seed, int64_t epoch, int64_t *first)
{
    int *seen = calloc((size_t)n, sizeof(int)), *pad = calloc((size_t)n, sizeof(int));
    int64_t per = (n + world - 1) / world, padded = per * world - n, counted_total = 0;
    int ok = 1;
    for (int r = 0; r < world; r++) {
        dt_sampler s;
        if (dt_sampler_init(&s, n, r, world, shuffle, seed) != DT_OK) {
            ok = 0;
            break;
        }
        dt_sampler_set_epoch(&s, epoch);
        ok = ok && s.per_rank == per;
        for (int64_t k = 0; k < per; k++) {
            int counted;
            int64_t pos, i = dt_sampler_get(&s, k, &counted, &pos);
            ok = ok && i >= 0 && i < n && pos == r + k * world;
            if (!ok)
                break;
            if (counted) {
                seen[i]++;
                counted_total++;
            } else {
                pad[i]++;
                /* padding repeats the order from its start: position p >= n holds order[(p - n) % n] */
                ok = ok && i == s.order[(pos - n) % n];
            }
            if (r == 0 && k == 0 && first)
                *first = i;
        }
        dt_sampler_free(&s);
    }
    for (int64_t i = 0; i < n; i++)
        ok = ok && seen[i] == 1;
    int64_t pads = 0;
    for (int64_t i = 0; i < n; i++)
        pads += pad[i];
    ok = ok && counted_total == n && pads == padded;
    free(seen);
    free(pad);
    return ok;
}

/* torchvision's RASampler.__iter__, line by line on the sampler's own order (its permutation is
 * torch.randperm's; what follows from it is the reference's): indices = each of the order repeated
 * reps times; indices += indices[:total - len] (Python's slice: at most the whole list); indices =
 * indices[rank:total:world]; the first num_selected of those. Returns how many, into out. */
static int64_t ra_reference(const int64_t *order, int64_t n, int reps, int rank, int world, int64_t *out)
{
    int64_t num_samples = (int64_t)ceil((double)n * reps / world), total = num_samples * world;
    int64_t selected = (int64_t)floor((double)(n / 256 * 256) / world);
    int64_t len = n * reps, pad = total - len < len ? total - len : len;
    int64_t *list = malloc((size_t)(len + pad) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < reps; j++)
            list[i * reps + j] = order[i];
    for (int64_t i = 0; i < pad; i++)
        list[len + i] = list[i];
    int64_t k = 0;
    for (int64_t p = rank; p < total && p < len + pad && k < selected; p += world)
        out[k++] = list[p];
    free(list);
    return k;
}

/* the sampler with repeats against the reference for every rank; also that the copies of an image
 * have positions of their own (their augmentations differ) */
static int ra_ok(int64_t n, int world, int reps, int64_t epoch)
{
    int ok = 1;
    int64_t *want = malloc((size_t)(n * reps + world) * sizeof(int64_t));
    for (int rank = 0; rank < world && ok; rank++) {
        dt_sampler s;
        ok = dt_sampler_init(&s, n, rank, world, 1, 7) == DT_OK && dt_sampler_set_repeats(&s, reps) == DT_OK;
        if (!ok)
            break;
        dt_sampler_set_epoch(&s, epoch);
        int64_t k = ra_reference(s.order, n, reps, rank, world, want), last = -1;
        ok = k == s.per_rank;
        for (int64_t i = 0; ok && i < k; i++) {
            int counted = 0;
            int64_t pos;
            ok = dt_sampler_get(&s, i, &counted, &pos) == want[i] && counted && pos > last;
            last = pos;
        }
        dt_sampler_free(&s);
    }
    free(want);
    return ok;
}

int main(void)
{
    static const int64_t ns[] = {1, 7, 10, 1000, 1001};
    static const int worlds[] = {1, 2, 3, 8};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof worlds / sizeof *worlds; b++) {
            int64_t n = ns[a];
            int w = worlds[b];
            TAP_OK(epoch_ok(n, w, 1, 42, 0, NULL) && epoch_ok(n, w, 1, 42, 5, NULL) && epoch_ok(n, w, 0, 42, 0, NULL),
                   "n %lld, world %d: every image once per epoch, %lld padded, shuffled or not", (long long)n, w,
                   (long long)((n + w - 1) / w * w - n));
        }
    /* epochs differ, the same seed repeats, another seed differs */
    dt_sampler s, t;
    dt_sampler_init(&s, 1000, 1, 4, 1, 7);
    dt_sampler_init(&t, 1000, 1, 4, 1, 7);
    dt_sampler_set_epoch(&s, 3);
    dt_sampler_set_epoch(&t, 3);
    TAP_OK(memcmp(s.order, t.order, 1000 * sizeof(int64_t)) == 0, "same seed and epoch: the same order");
    int64_t *e3 = malloc(1000 * sizeof(int64_t));
    memcpy(e3, s.order, 1000 * sizeof(int64_t));
    dt_sampler_set_epoch(&s, 4);
    int same = 0;
    for (int i = 0; i < 1000; i++)
        same += s.order[i] == e3[i];
    TAP_OK(same < 20, "epoch 4 differs from epoch 3 (%d of 1000 positions agree)", same);
    dt_sampler_set_epoch(&s, 3);
    TAP_OK(memcmp(s.order, e3, 1000 * sizeof(int64_t)) == 0, "back to epoch 3: its order again (resumable)");
    dt_sampler_free(&t);
    dt_sampler_init(&t, 1000, 1, 4, 1, 8);
    dt_sampler_set_epoch(&t, 3);
    same = 0;
    for (int i = 0; i < 1000; i++)
        same += t.order[i] == e3[i];
    TAP_OK(same < 20, "another seed, another order (%d of 1000 positions agree)", same);
    dt_sampler_free(&t);
    dt_sampler_init(&t, 10, 2, 3, 0, 1);
    int c;
    TAP_OK(dt_sampler_get(&t, 0, &c, NULL) == 2 && dt_sampler_get(&t, 1, &c, NULL) == 5 &&
               dt_sampler_get(&t, 3, &c, NULL) == 1 && !c,
           "no shuffle, 10 images, rank 2 of 3: 2, 5, 8, then the padding repeats image 1");
    dt_sampler_free(&t);
    dt_sampler_free(&s);
    free(e3);
    static const struct {
        int64_t n;
        int world, reps;
    } ra[] = {{1000, 1, 3}, {1000, 2, 3}, {1000, 3, 3}, {1001, 8, 2}, {257, 2, 4}, {300, 3, 3}, {60000, 8, 3},
              {256, 256, 2}, {5000, 7, 5}};
    for (size_t i = 0; i < sizeof ra / sizeof ra[0]; i++)
        TAP_OK(ra_ok(ra[i].n, ra[i].world, ra[i].reps, 0) && ra_ok(ra[i].n, ra[i].world, ra[i].reps, 3),
               "repeats (RASampler): %lld images, %d ranks, %d reps: every rank's samples as torchvision's, "
               "%lld each, every copy at a position of its own",
               (long long)ra[i].n, ra[i].world, ra[i].reps, (long long)(ra[i].n / 256 * 256 / ra[i].world));
    tap_log_begin();
    TAP_OK(dt_sampler_init(&t, 300, 0, 2, 1, 1) == DT_OK && dt_sampler_set_repeats(&t, 3) == DT_OK &&
               t.per_rank == 128,
           "repeats: 300 images on 2 ranks keep 256 / 2 = 128 each");
    dt_sampler_free(&t);
    TAP_OK(dt_sampler_init(&t, 255, 0, 1, 1, 1) == DT_OK && dt_sampler_set_repeats(&t, 3) == DT_ERR_INPUT,
           "repeats: 255 images leave none (256 // 256 * ...): refused");
    dt_sampler_free(&t);
    char *ramsg = tap_log_take();
    TAP_OK(tap_count_lines(ramsg) == 1 && strstr(ramsg, "--ra-sampler: 255 images"), "in one line: %s", ramsg);
    free(ramsg);
    tap_log_begin();
    TAP_OK(dt_sampler_init(&t, 10, 3, 3, 0, 1) == DT_ERR_INPUT, "rank 3 of 3 refused");
    char *msg = tap_log_take();
    TAP_OK(tap_count_lines(msg) == 1 && strstr(msg, "rank 3 of 3"), "in one line: %s", msg);
    free(msg);
    tap_log_end();
    return tap_done();
}
