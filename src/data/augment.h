/* augment.h: torchvision 0.14's automatic augmentation policies for training (its reference recipe's
 * --auto-augment: AutoAugment with the imagenet, cifar10 and svhn policies, RandAugment,
 * TrivialAugmentWide; and --random-erase: RandomErasing), on one uint8 image in HWC layout
 * (h x w x c, c = 1 or 3, rows packed), in place.
 *
 * Every op is torchvision's _apply_op on a uint8 CHW tensor (its tensor backend, functional_tensor.py),
 * with the same uint8 arithmetic: float32 blends truncated to uint8 (brightness, color = saturation,
 * contrast, sharpness), rgb_to_grayscale truncated, the sharpness blur rounded, posterize's mask,
 * solarize's float threshold, autocontrast's float32 scale, equalize's integer histogram steps; the
 * geometric ops (shears about the top-left corner, translations by int(magnitude) pixels, rotation about
 * the centre) sample with grid_sample (align_corners=False, zeros outside: torchvision's fill=None) and
 * round, nearest or bilinear. Sample positions, blend weights and linspace tables are computed in float32
 * in the order torch 1.13's CPU kernels compute them, fused multiply-adds where its AVX2 kernels fuse
 * (tests/torch/augment.sh measures the agreement: equal pixels on the machine it ran on).
 *
 * The random draws follow torchvision's structure but come from our generator (util/rng.h), never
 * torch's: AutoAugment picks one of its 25 sub-policies, then applies each of its two ops when a
 * uniform draw is <= the op's probability, negating a signed magnitude on a fair coin; RandAugment
 * applies num_ops ops chosen uniformly among its 14, each at the fixed magnitude bin, signs on a coin;
 * TrivialAugmentWide applies one op chosen uniformly, at a uniformly chosen bin, sign on a coin.
 *
 * RandomErasing: torchvision applies it after Normalize, erasing with 0, i.e. with the mean colour;
 * here it erases the uint8 image with erase_fill, which the loader sets to the normalisation mean in
 * uint8 (round(255 * mean)): within 0.5 of 255 of torchvision's after the (affine) normalisation.
 *
 * Nothing here allocates or keeps state: temporary memory is the caller's scratch of
 * dt_aug_scratch_bytes, so worker threads call these concurrently on their own images and scratch.
 * Parameters out of range are the caller's bug (the command line validates them); they give
 * unspecified pixels but never a read or write outside the image. */
#ifndef DT_DATA_AUGMENT_H
#define DT_DATA_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "util/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

enum dt_aug_policy { DT_AUG_NONE, DT_AUG_AA_IMAGENET, DT_AUG_AA_CIFAR10, DT_AUG_AA_SVHN, DT_AUG_RA, DT_AUG_TA_WIDE };

/* torchvision's op names, in the order of RandAugment's and TrivialAugmentWide's augmentation spaces
 * (Identity .. Equalize), then Invert (AutoAugment's only) */
enum dt_aug_op {
    DT_AUG_IDENTITY, DT_AUG_SHEAR_X, DT_AUG_SHEAR_Y, DT_AUG_TRANSLATE_X, DT_AUG_TRANSLATE_Y, DT_AUG_ROTATE,
    DT_AUG_BRIGHTNESS, DT_AUG_COLOR, DT_AUG_CONTRAST, DT_AUG_SHARPNESS, DT_AUG_POSTERIZE, DT_AUG_SOLARIZE,
    DT_AUG_AUTOCONTRAST, DT_AUG_EQUALIZE, DT_AUG_INVERT, DT_AUG_N_OPS
};

/* InterpolationMode for the geometric ops (tensor images support only these two); train.py passes
 * its --interpolation, default bilinear */
enum dt_aug_interp { DT_AUG_NEAREST, DT_AUG_BILINEAR };

/* the most ops one image gets (RandAugment's num_ops is capped to it) */
#define DT_AUG_MAX_STEPS 4

typedef struct dt_aug_cfg {
    int policy;              /* enum dt_aug_policy */
    int ra_num_ops;          /* RandAugment's num_ops (torchvision: 2), at most DT_AUG_MAX_STEPS */
    int ra_magnitude;        /* RandAugment's magnitude bin (train.py's --ra-magnitude, 9), < num_magnitude_bins */
    int num_magnitude_bins;  /* RandAugment's and TrivialAugmentWide's (31), at least 2 */
    int interp;              /* enum dt_aug_interp */
    double erase_p;          /* RandomErasing's p (train.py's --random-erase); 0: none */
    uint8_t erase_fill[3];   /* the erased pixels' colour (the first byte for c = 1): see above */
} dt_aug_cfg;

/* one op as _apply_op receives it: the magnitude already signed (and 0 for the ops without one) */
typedef struct dt_aug_step {
    int op;                  /* enum dt_aug_op */
    double magnitude;
} dt_aug_step;

/* train.py's --auto-augment names: "imagenet", "cifar10", "svhn" (AutoAugment), "ra", "ta_wide";
 * -1 for anything else ("augmix" included: not supported). */
int dt_aug_policy_parse(const char *name);
/* The name dt_aug_policy_parse takes for a policy ("ra", ...); "none" for DT_AUG_NONE, "?" out of range. */
const char *dt_aug_policy_name(int policy);
/* "Identity", "ShearX", ... (torchvision's strings); "?" out of range. */
const char *dt_aug_op_name(int op);

/* The ops of one image for cfg's policy on an h x w image, in the order to apply them: the count
 * (AutoAugment 0..2, RandAugment ra_num_ops, TrivialAugmentWide 1, none 0). RandAugment's and
 * TrivialAugmentWide's Identity counts as a step. */
int dt_aug_draw(const dt_aug_cfg *cfg, int h, int w, dt_rng *r, dt_aug_step steps[DT_AUG_MAX_STEPS]);

/* Bytes of scratch the ops need for an h x w x c image. */
size_t dt_aug_scratch_bytes(int h, int w, int c);
/* _apply_op(img, dt_aug_op_name(op), magnitude, interp, fill=None) on img in place; scratch: at least
 * dt_aug_scratch_bytes(h, w, c) bytes, any alignment. */
void dt_aug_op(int op, double magnitude, int interp, uint8_t *img, int h, int w, int c, uint8_t *scratch);

/* RandomErasing's box: rows [i, i + h), columns [j, j + w) */
typedef struct dt_erase_box {
    int i, j, h, w;
} dt_erase_box;
/* RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3)).forward's draws on an h x w image: 1 with the
 * box when it erases (the box may be empty: get_params rounds a tiny area to 0 rows or columns), 0
 * when it does not (the draw against p, or get_params' 10 attempts all too large: torchvision then
 * erases nothing); *box is {0, 0, 0, 0} then. */
int dt_erase_draw(double p, int h, int w, dt_rng *r, dt_erase_box *box);
/* F.erase: every pixel of the box (clipped to the image) set to fill[0..c-1]. */
void dt_erase_apply(const dt_erase_box *b, uint8_t *img, int h, int w, int c, const uint8_t *fill);

/* One training image: dt_aug_draw, each step's dt_aug_op, then RandomErasing with cfg->erase_p and
 * cfg->erase_fill. scratch: dt_aug_scratch_bytes(h, w, c). */
void dt_aug_apply(const dt_aug_cfg *cfg, uint8_t *img, int h, int w, int c, dt_rng *r, uint8_t *scratch);

/* --- the tables, as torchvision builds them (tests compare them with its own) --------------------- */

/* The ops of a policy's _augmentation_space in torchvision's dict order (AutoAugment: ShearX ..
 * Invert; RandAugment, TrivialAugmentWide: Identity .. Equalize) into ops[DT_AUG_N_OPS]: their count. */
int dt_aug_space_ops(int policy, int *ops);
/* 1 when the space's magnitudes of op are signed (a coin negates them), 0 otherwise (any policy). */
int dt_aug_op_signed(int op);
/* 1 when op has magnitude bins, 0 when its magnitude is the 0-d tensor 0 (Identity, AutoContrast,
 * Equalize, Invert). */
int dt_aug_op_binned(int op);
/* The magnitude of bin `bin` of op in the policy's space with num_bins bins for an h x w image (AutoAugment
 * uses 10 bins), unsigned, as the float32 torch computes (torch.linspace; Posterize's rounded bits),
 * widened to double as .item() does; 0 for the ops without bins. */
double dt_aug_magnitude(int policy, int op, int bin, int num_bins, int h, int w);

/* One op of an AutoAugment sub-policy: (name, probability, magnitude id); bin -1 for torchvision's None. */
typedef struct dt_aug_sub_op {
    int op;
    double p;
    int bin;
} dt_aug_sub_op;
/* AutoAugment's _get_policies(policy): *subs points at the static table of pairs; the count (25),
 * 0 for a policy that is not AutoAugment. */
int dt_aug_subpolicies(int policy, const dt_aug_sub_op (**subs)[2]);

#ifdef __cplusplus
}
#endif
#endif
