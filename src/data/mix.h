/* mix.h: torchvision's batch mixing for training (its reference recipe's --mixup-alpha and
 * --cutmix-alpha: RandomMixup and RandomCutmix, one of them chosen per batch with equal chance when
 * both are on, as its RandomChoice), on a batch of uint8 images in NHWC. Each batch's draws come
 * from (seed, epoch, step), so a resumed epoch mixes its batches as before.
 *
 * Both pair each image with the one before it in the batch (torch's roll by one: image 0 with the
 * last), and the targets become lambda on the image's label plus 1 - lambda on the other's
 * (nn/scalars.h's mixing, which xent reads):
 *   - mixup: lambda ~ Beta(alpha, alpha); every pixel lambda * x + (1 - lambda) * other. torchvision
 *     mixes the normalised floats; here the uint8 pixels, rounded to nearest: within 0.5 of 255 of
 *     it before the (affine, per-channel) normalisation;
 *   - cutmix: lambda ~ Beta(alpha, alpha), a centre (r_x, r_y) uniform over the image, half-sizes
 *     int(0.5 * sqrt(1 - lambda) * W) and int(... * H), the box clipped to the image taken from the
 *     other image; lambda then 1 - box area / image area. Exact (a copy). */
#ifndef DT_DATA_MIX_H
#define DT_DATA_MIX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dt_mix_kind { DT_MIX_NONE = 0, DT_MIX_MIXUP = 1, DT_MIX_CUTMIX = 2 };

typedef struct dt_mix {
    int kind;              /* enum dt_mix_kind */
    double lambda;         /* the weight of each image's own label (cutmix: after the box) */
    int x1, y1, x2, y2;    /* cutmix's box: columns x1..x2-1, rows y1..y2-1 */
    double drawn;          /* cutmix: the Beta draw the box came from */
    int rx, ry;            /* cutmix: the box's drawn centre */
} dt_mix;

/* The draws of one batch of h x w images: which transform (none when both alphas are 0), lambda,
 * the box. */
dt_mix dt_mix_draw(uint64_t seed, int64_t epoch, int64_t step, double mixup_alpha, double cutmix_alpha, int h, int w);
/* Applies m in place to the n images x (h x w x c each); other: scratch of one image's bytes. */
void dt_mix_apply(const dt_mix *m, uint8_t *x, int n, int h, int w, int c, uint8_t *other);
/* A Beta(a, a) draw from uniform draws next() in [0, 1) (Marsaglia and Tsang's gamma method). */
double dt_beta_symmetric(double a, double (*next)(void *), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
