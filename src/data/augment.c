/* augment.c: torchvision's AutoAugment, RandAugment, TrivialAugmentWide and RandomErasing on one uint8
 * HWC image (contract in augment.h). Each op transcribes functional_tensor.py's uint8 arithmetic: the
 * float32 operations in torch's order, truncations where it casts with .to(uint8), roundings where it
 * rounds. Built with -ffp-contract=off, so every float operation below rounds on its own; the fused
 * multiply-adds torch's AVX2 kernels make are written out as fmaf. */
#include "config.h"

#include "data/augment.h"

#include <math.h>
#include <string.h>

#include "util/rng.h"

#define PI 3.14159265358979323846 /* Python's math.pi */

static const char *const op_names[DT_AUG_N_OPS] = {
    "Identity", "ShearX",   "ShearY",    "TranslateX", "TranslateY",   "Rotate",   "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize",   "AutoContrast", "Equalize", "Invert"};

/* train.py's --auto-augment names, indexed by enum dt_aug_policy */
static const char *const policy_names[] = {"none", "imagenet", "cifar10", "svhn", "ra", "ta_wide"};

int dt_aug_policy_parse(const char *name)
{
    for (int p = DT_AUG_AA_IMAGENET; name && p <= DT_AUG_TA_WIDE; p++)
        if (!strcmp(name, policy_names[p]))
            return p;
    return -1;
}

const char *dt_aug_policy_name(int policy)
{
    return policy >= DT_AUG_NONE && policy <= DT_AUG_TA_WIDE ? policy_names[policy] : "?";
}

const char *dt_aug_op_name(int op)
{
    return op >= 0 && op < DT_AUG_N_OPS ? op_names[op] : "?";
}

static int is_autoaugment(int policy)
{
    return policy == DT_AUG_AA_IMAGENET || policy == DT_AUG_AA_CIFAR10 || policy == DT_AUG_AA_SVHN;
}

/* --- the tables ---------------------------------------------------------------------------------- */

/* AutoAugment._get_policies, transcribed: (op, probability, magnitude id or -1 for None) pairs */
#define S(a, pa, ba, b, pb, bb) {{DT_AUG_##a, pa, ba}, {DT_AUG_##b, pb, bb}}
static const dt_aug_sub_op aa_imagenet[25][2] = {
    S(POSTERIZE, 0.4, 8, ROTATE, 0.6, 9),        S(SOLARIZE, 0.6, 5, AUTOCONTRAST, 0.6, -1),
    S(EQUALIZE, 0.8, -1, EQUALIZE, 0.6, -1),     S(POSTERIZE, 0.6, 7, POSTERIZE, 0.6, 6),
    S(EQUALIZE, 0.4, -1, SOLARIZE, 0.2, 4),      S(EQUALIZE, 0.4, -1, ROTATE, 0.8, 8),
    S(SOLARIZE, 0.6, 3, EQUALIZE, 0.6, -1),      S(POSTERIZE, 0.8, 5, EQUALIZE, 1.0, -1),
    S(ROTATE, 0.2, 3, SOLARIZE, 0.6, 8),         S(EQUALIZE, 0.6, -1, POSTERIZE, 0.4, 6),
    S(ROTATE, 0.8, 8, COLOR, 0.4, 0),            S(ROTATE, 0.4, 9, EQUALIZE, 0.6, -1),
    S(EQUALIZE, 0.0, -1, EQUALIZE, 0.8, -1),     S(INVERT, 0.6, -1, EQUALIZE, 1.0, -1),
    S(COLOR, 0.6, 4, CONTRAST, 1.0, 8),          S(ROTATE, 0.8, 8, COLOR, 1.0, 2),
    S(COLOR, 0.8, 8, SOLARIZE, 0.8, 7),          S(SHARPNESS, 0.4, 7, INVERT, 0.6, -1),
    S(SHEAR_X, 0.6, 5, EQUALIZE, 1.0, -1),       S(COLOR, 0.4, 0, EQUALIZE, 0.6, -1),
    S(EQUALIZE, 0.4, -1, SOLARIZE, 0.2, 4),      S(SOLARIZE, 0.6, 5, AUTOCONTRAST, 0.6, -1),
    S(INVERT, 0.6, -1, EQUALIZE, 1.0, -1),       S(COLOR, 0.6, 4, CONTRAST, 1.0, 8),
    S(EQUALIZE, 0.8, -1, EQUALIZE, 0.6, -1)};
static const dt_aug_sub_op aa_cifar10[25][2] = {
    S(INVERT, 0.1, -1, CONTRAST, 0.2, 6),        S(ROTATE, 0.7, 2, TRANSLATE_X, 0.3, 9),
    S(SHARPNESS, 0.8, 1, SHARPNESS, 0.9, 3),     S(SHEAR_Y, 0.5, 8, TRANSLATE_Y, 0.7, 9),
    S(AUTOCONTRAST, 0.5, -1, EQUALIZE, 0.9, -1), S(SHEAR_Y, 0.2, 7, POSTERIZE, 0.3, 7),
    S(COLOR, 0.4, 3, BRIGHTNESS, 0.6, 7),        S(SHARPNESS, 0.3, 9, BRIGHTNESS, 0.7, 9),
    S(EQUALIZE, 0.6, -1, EQUALIZE, 0.5, -1),     S(CONTRAST, 0.6, 7, SHARPNESS, 0.6, 5),
    S(COLOR, 0.7, 7, TRANSLATE_X, 0.5, 8),       S(EQUALIZE, 0.3, -1, AUTOCONTRAST, 0.4, -1),
    S(TRANSLATE_Y, 0.4, 3, SHARPNESS, 0.2, 6),   S(BRIGHTNESS, 0.9, 6, COLOR, 0.2, 8),
    S(SOLARIZE, 0.5, 2, INVERT, 0.0, -1),        S(EQUALIZE, 0.2, -1, AUTOCONTRAST, 0.6, -1),
    S(EQUALIZE, 0.2, -1, EQUALIZE, 0.6, -1),     S(COLOR, 0.9, 9, EQUALIZE, 0.6, -1),
    S(AUTOCONTRAST, 0.8, -1, SOLARIZE, 0.2, 8),  S(BRIGHTNESS, 0.1, 3, COLOR, 0.7, 0),
    S(SOLARIZE, 0.4, 5, AUTOCONTRAST, 0.9, -1),  S(TRANSLATE_Y, 0.9, 9, TRANSLATE_Y, 0.7, 9),
    S(AUTOCONTRAST, 0.9, -1, SOLARIZE, 0.8, 3),  S(EQUALIZE, 0.8, -1, INVERT, 0.1, -1),
    S(TRANSLATE_Y, 0.7, 9, AUTOCONTRAST, 0.9, -1)};
static const dt_aug_sub_op aa_svhn[25][2] = {
    S(SHEAR_X, 0.9, 4, INVERT, 0.2, -1),         S(SHEAR_Y, 0.9, 8, INVERT, 0.7, -1),
    S(EQUALIZE, 0.6, -1, SOLARIZE, 0.6, 6),      S(INVERT, 0.9, -1, EQUALIZE, 0.6, -1),
    S(EQUALIZE, 0.6, -1, ROTATE, 0.9, 3),        S(SHEAR_X, 0.9, 4, AUTOCONTRAST, 0.8, -1),
    S(SHEAR_Y, 0.9, 8, INVERT, 0.4, -1),         S(SHEAR_Y, 0.9, 5, SOLARIZE, 0.2, 6),
    S(INVERT, 0.9, -1, AUTOCONTRAST, 0.8, -1),   S(EQUALIZE, 0.6, -1, ROTATE, 0.9, 3),
    S(SHEAR_X, 0.9, 4, SOLARIZE, 0.3, 3),        S(SHEAR_Y, 0.8, 8, INVERT, 0.7, -1),
    S(EQUALIZE, 0.9, -1, TRANSLATE_Y, 0.6, 6),   S(INVERT, 0.9, -1, EQUALIZE, 0.6, -1),
    S(CONTRAST, 0.3, 3, ROTATE, 0.8, 4),         S(INVERT, 0.8, -1, TRANSLATE_Y, 0.0, 2),
    S(SHEAR_Y, 0.7, 6, SOLARIZE, 0.4, 8),        S(INVERT, 0.6, -1, ROTATE, 0.8, 4),
    S(SHEAR_Y, 0.3, 7, TRANSLATE_X, 0.9, 3),     S(SHEAR_X, 0.1, 6, INVERT, 0.6, -1),
    S(SOLARIZE, 0.7, 2, TRANSLATE_Y, 0.6, 7),    S(SHEAR_Y, 0.8, 4, INVERT, 0.8, -1),
    S(SHEAR_X, 0.7, 9, TRANSLATE_Y, 0.8, 3),     S(SHEAR_Y, 0.8, 5, AUTOCONTRAST, 0.7, -1),
    S(SHEAR_X, 0.7, 2, INVERT, 0.1, -1)};
#undef S

int dt_aug_subpolicies(int policy, const dt_aug_sub_op (**subs)[2])
{
    *subs = policy == DT_AUG_AA_IMAGENET ? aa_imagenet
          : policy == DT_AUG_AA_CIFAR10  ? aa_cifar10
          : policy == DT_AUG_AA_SVHN     ? aa_svhn
                                         : NULL;
    return *subs ? 25 : 0;
}

int dt_aug_space_ops(int policy, int *ops)
{
    int n = 0;
    if (is_autoaugment(policy)) /* ShearX .. Invert */
        for (int op = DT_AUG_SHEAR_X; op <= DT_AUG_INVERT; op++)
            ops[n++] = op;
    else if (policy == DT_AUG_RA || policy == DT_AUG_TA_WIDE) /* Identity .. Equalize */
        for (int op = DT_AUG_IDENTITY; op <= DT_AUG_EQUALIZE; op++)
            ops[n++] = op;
    return n;
}

int dt_aug_op_signed(int op)
{
    return op >= DT_AUG_SHEAR_X && op <= DT_AUG_SHARPNESS;
}

int dt_aug_op_binned(int op)
{
    return op >= DT_AUG_SHEAR_X && op <= DT_AUG_SOLARIZE;
}

/* Element i of torch.linspace(start, end, n) in float32 as torch 1.13's CPU kernel makes it: from the
 * nearer end (start + step * i in the first half, end - step * (n - 1 - i) in the second, each one
 * fused multiply-add); whole blocks of 16 go through Vectorized::arange, whose 8-wide vectors take
 * their first element that way and add k * step (rounded) for the k-th. */
static float torch_linspace(float start, float end, int n, int i)
{
    if (n <= 1)
        return start;
    const float step = (end - start) / (float)(n - 1);
    const int half = n / 2;
    int k = 0;
    if (i < n - n % 16) { /* a vectorised block: from the first element of its 8 */
        k = i % 8;
        i -= k;
    }
    const float first = i < half ? fmaf(step, (float)i, start) : fmaf(-step, (float)(n - i - 1), end);
    return k ? first + (float)k * step : first;
}

double dt_aug_magnitude(int policy, int op, int bin, int num_bins, int h, int w)
{
    const int ta = policy == DT_AUG_TA_WIDE;
    if (!dt_aug_op_binned(op) || bin < 0 || bin >= num_bins)
        return 0.0;
    switch (op) {
    case DT_AUG_SHEAR_X:
    case DT_AUG_SHEAR_Y:
        return torch_linspace(0.0f, ta ? 0.99f : 0.3f, num_bins, bin);
    case DT_AUG_TRANSLATE_X: /* image_size = (height, width): X spans 150/331 of the width */
        return torch_linspace(0.0f, ta ? 32.0f : (float)(150.0 / 331.0 * w), num_bins, bin);
    case DT_AUG_TRANSLATE_Y:
        return torch_linspace(0.0f, ta ? 32.0f : (float)(150.0 / 331.0 * h), num_bins, bin);
    case DT_AUG_ROTATE:
        return torch_linspace(0.0f, ta ? 135.0f : 30.0f, num_bins, bin);
    case DT_AUG_POSTERIZE: { /* 8 - (arange(n) / ((n - 1) / 4)).round().int(), 6 for TrivialAugmentWide */
        const float div = (float)((num_bins - 1) / (ta ? 6.0 : 4.0));
        return num_bins > 1 ? 8 - (int)rintf((float)bin / div) : 8; /* one bin: torch's is 0 / 0 */
    }
    case DT_AUG_SOLARIZE:
        return torch_linspace(255.0f, 0.0f, num_bins, bin);
    default: /* Brightness, Color, Contrast, Sharpness */
        return torch_linspace(0.0f, ta ? 0.99f : 0.9f, num_bins, bin);
    }
}

/* --- the draws ----------------------------------------------------------------------------------- */

int dt_aug_draw(const dt_aug_cfg *cfg, int h, int w, dt_rng *r, dt_aug_step steps[DT_AUG_MAX_STEPS])
{
    int n = 0;
    if (is_autoaugment(cfg->policy)) { /* AutoAugment.get_params: the sub-policy, two probabilities, two signs */
        const dt_aug_sub_op(*subs)[2];
        const int count = dt_aug_subpolicies(cfg->policy, &subs);
        const dt_aug_sub_op *sub = subs[dt_rng_below(r, (uint64_t)count)];
        const double probs[2] = {dt_rng_uniform(r), dt_rng_uniform(r)};
        const int signs[2] = {(int)dt_rng_below(r, 2), (int)dt_rng_below(r, 2)};
        for (int i = 0; i < 2; i++) {
            if (!(probs[i] <= sub[i].p))
                continue;
            double m = sub[i].bin >= 0 ? dt_aug_magnitude(cfg->policy, sub[i].op, sub[i].bin, 10, h, w) : 0.0;
            if (dt_aug_op_signed(sub[i].op) && signs[i] == 0)
                m = -m;
            steps[n++] = (dt_aug_step){sub[i].op, m};
        }
    } else if (cfg->policy == DT_AUG_RA) { /* num_ops ops of the 14, each at the fixed bin */
        const int ops = cfg->ra_num_ops < DT_AUG_MAX_STEPS ? cfg->ra_num_ops : DT_AUG_MAX_STEPS;
        for (int k = 0; k < ops; k++) {
            const int op = (int)dt_rng_below(r, DT_AUG_EQUALIZE + 1);
            double m = dt_aug_magnitude(DT_AUG_RA, op, cfg->ra_magnitude, cfg->num_magnitude_bins, h, w);
            if (dt_aug_op_signed(op) && dt_rng_below(r, 2))
                m = -m;
            steps[n++] = (dt_aug_step){op, m};
        }
    } else if (cfg->policy == DT_AUG_TA_WIDE) { /* one op of the 14, a bin of its own (when it has bins) */
        const int op = (int)dt_rng_below(r, DT_AUG_EQUALIZE + 1);
        const int bins = cfg->num_magnitude_bins > 0 ? cfg->num_magnitude_bins : 1;
        const int bin = dt_aug_op_binned(op) ? (int)dt_rng_below(r, (uint64_t)bins) : 0;
        double m = dt_aug_magnitude(DT_AUG_TA_WIDE, op, bin, bins, h, w);
        if (dt_aug_op_signed(op) && dt_rng_below(r, 2))
            m = -m;
        steps[n++] = (dt_aug_step){op, m};
    }
    return n;
}

/* --- the geometric ops --------------------------------------------------------------------------- */

/* .to(uint8) of a float clamped to [0, 255]: truncated (NaN, from a wild magnitude, as 0) */
static inline uint8_t to_u8(float v)
{
    return v >= 0.0f ? (v < 255.0f ? (uint8_t)v : 255) : 0;
}

/* functional._get_inverse_affine_matrix(center, angle, translate, scale=1, shear) in degrees, in
 * Python's order of double operations (math.radians multiplies by pi / 180) */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty, double shx, double shy,
                           double m[6])
{
    const double rad = PI / 180.0, rot = angle * rad, sx = shx * rad, sy = shy * rad;
    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d;
    m[1] = -b;
    m[2] = 0.0;
    m[3] = -c;
    m[4] = a;
    m[5] = 0.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* The rows of F_t.affine(img, matrix, interp, fill=None): the output pixel (x, y) samples the input at
 * theta * (x - w/2 + 1/2, y - h/2 + 1/2, 1) normalised by (w/2, h/2) (_gen_affine_grid: the base grid
 * times theta^T / [w/2, h/2] through sgemm, whose K = 3 sums fuse), unnormalised by grid_sample without
 * align_corners (fused too), zeros outside; the float result rounded to uint8. r: theta / [w/2, h/2] as
 * torch rounds it; src: a copy of the image. Positions are compared with the image's bounds as floats
 * before any conversion to int, so a NaN or huge one (a wild magnitude) just samples zeros. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void affine_rows(const float r[6], int interp, const uint8_t *src, uint8_t *img, int h, int w, int c)
{
    const float half_w = (float)w / 2, half_h = (float)h / 2, fw = (float)w, fh = (float)h;
    const size_t row = (size_t)w * c;
    for (int yo = 0; yo < h; yo++) {
        const float by = (float)yo - fh * 0.5f + 0.5f;
        uint8_t *out = img + (size_t)yo * row;
        for (int xo = 0; xo < w; xo++, out += c) {
            const float bx = (float)xo - fw * 0.5f + 0.5f;
            const float gx = fmaf(by, r[1], bx * r[0]) + r[2], gy = fmaf(by, r[4], bx * r[3]) + r[5];
            const float ix = fmaf(gx + 1.0f, half_w, -0.5f), iy = fmaf(gy + 1.0f, half_h, -0.5f);
            if (interp == DT_AUG_NEAREST) { /* rounded half to even, as _mm256_round_ps */
                const float xn = rintf(ix), yn = rintf(iy);
                const int in = xn > -1.0f && xn < fw && yn > -1.0f && yn < fh;
                const uint8_t *q = in ? src + (size_t)yn * row + (size_t)xn * c : NULL;
                for (int k = 0; k < c; k++)
                    out[k] = q ? q[k] : 0;
                continue;
            }
            const float x0 = floorf(ix), y0 = floorf(iy);
            /* distances to the west, east, north and south neighbours; weights as grid_sample's */
            const float dw = ix - x0, de = 1.0f - dw, dn = iy - y0, ds = 1.0f - dn;
            const float nw = ds * de, ne = ds * dw, sw = dn * de, se = dn * dw;
            /* the four neighbours, NULL outside (their value 0); x0, y0 are whole, so in (-2, size) they convert */
            const uint8_t *p[4] = {NULL, NULL, NULL, NULL};
            if (x0 > -2.0f && x0 < fw && y0 > -2.0f && y0 < fh) {
                const int xi = (int)x0, yi = (int)y0;
                const int left = xi >= 0, right = xi + 1 < w, top = yi >= 0, bottom = yi + 1 < h;
                const ptrdiff_t o = ((ptrdiff_t)yi * w + xi) * c; /* negative beyond the top or left edge */
                p[0] = top && left ? src + o : NULL;
                p[1] = top && right ? src + o + c : NULL;
                p[2] = bottom && left ? src + o + (ptrdiff_t)row : NULL;
                p[3] = bottom && right ? src + o + (ptrdiff_t)row + c : NULL;
            }
            for (int k = 0; k < c; k++) {
                float v = (p[0] ? (float)p[0][k] : 0.0f) * nw;
                v = fmaf(p[1] ? (float)p[1][k] : 0.0f, ne, v);
                v = fmaf(p[2] ? (float)p[2][k] : 0.0f, sw, v);
                v = fmaf(p[3] ? (float)p[3][k] : 0.0f, se, v);
                out[k] = to_u8(rintf(v)); /* torch.round, then .to(uint8) */
            }
        }
    }
}

/* affine_rows compiled twice where the compiler can target x86's FMA instructions: the same results
 * (fmaf is exact either way), several times faster than calling libm's fmaf per sample */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define AUG_FMA_DISPATCH 1
__attribute__((target("fma"))) static void affine_rows_fma(const float r[6], int interp, const uint8_t *src,
                                                           uint8_t *img, int h, int w, int c)
{
    affine_rows(r, interp, src, img, h, w, c);
}
#endif

/* F_t.affine with the inverse matrix m (double, as Python computed it) on img; src: a copy of it */
static void affine(const double m[6], int interp, const uint8_t *src, uint8_t *img, int h, int w, int c)
{
    const float hw = (float)(0.5 * w), hh = (float)(0.5 * h); /* theta^T / [w/2, h/2] in float32 */
    const float r[6] = {(float)m[0] / hw, (float)m[1] / hw, (float)m[2] / hw,
                        (float)m[3] / hh, (float)m[4] / hh, (float)m[5] / hh};
#ifdef AUG_FMA_DISPATCH
    if (__builtin_cpu_supports("fma")) {
        affine_rows_fma(r, interp, src, img, h, w, c);
        return;
    }
#endif
    affine_rows(r, interp, src, img, h, w, c);
}

/* --- the colour ops ------------------------------------------------------------------------------ */

/* _blend(x, y, ratio) for uint8 x: ratio * x + (1 - ratio) * y in float32, clamped, truncated.
 * r: (float)ratio; ry: (float)(1 - ratio) * y, computed once when y is one value */
static inline uint8_t blend(float r, uint8_t x, float ry)
{
    return to_u8(r * (float)x + ry);
}

/* rgb_to_grayscale of one pixel: (0.2989 r + 0.587 g) + 0.114 b in float32, truncated */
static inline uint8_t gray(const uint8_t *p)
{
    return (uint8_t)(0.2989f * (float)p[0] + 0.587f * (float)p[1] + 0.114f * (float)p[2]);
}

/* adjust_sharpness: the blend with the image blurred by [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 inside
 * its one-pixel border (the border blends with itself). The blurred value is the sum S / 13 rounded:
 * S / 13 lies at least 1/26 from a half, far beyond float32's error, so (2 S + 13) / 26 is exact. */
static void sharpness(float r, float r1, uint8_t *img, int h, int w, int c, uint8_t *src)
{
    const size_t row = (size_t)w * c, n = (size_t)h * row;
    memcpy(src, img, n);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                const size_t i = (size_t)y * row + (size_t)x * c + k;
                int b = src[i];
                if (y > 0 && y < h - 1 && x > 0 && x < w - 1) {
                    const uint8_t *p = src + i - row - c;
                    int s = 4 * src[i];
                    for (int dy = 0; dy < 3; dy++, p += row)
                        s += p[0] + p[c] + p[2 * c];
                    b = (2 * s + 13) / 26;
                }
                img[i] = blend(r, src[i], r1 * (float)b);
            }
}

/* autocontrast, one channel: (x - min) * (255 / (max - min)) in float32, truncated; unchanged when flat */
static void autocontrast(uint8_t *img, size_t npix, int c, int k)
{
    int lo = 255, hi = 0;
    for (size_t i = 0; i < npix; i++) {
        const int v = img[i * c + k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    if (hi <= lo)
        return;
    const float scale = 255.0f / (float)(hi - lo), fl = (float)lo;
    for (size_t i = 0; i < npix; i++)
        img[i * c + k] = to_u8(((float)img[i * c + k] - fl) * scale);
}

/* equalize, one channel (_scale_channel): step = (pixels outside the highest non-empty bin) // 255;
 * unchanged when 0; otherwise value v becomes (cumulative count below v + step // 2) // step, at most 255 */
static void equalize(uint8_t *img, size_t npix, int c, int k)
{
    int64_t hist[256] = {0};
    for (size_t i = 0; i < npix; i++)
        hist[img[i * c + k]]++;
    int last = 255;
    while (last > 0 && hist[last] == 0)
        last--;
    const int64_t step = ((int64_t)npix - hist[last]) / 255;
    if (step == 0)
        return;
    uint8_t lut[256];
    int64_t below = 0;
    for (int v = 0; v < 256; v++) {
        const int64_t e = (below + step / 2) / step;
        lut[v] = (uint8_t)(e > 255 ? 255 : e);
        below += hist[v];
    }
    for (size_t i = 0; i < npix; i++)
        img[i * c + k] = lut[img[i * c + k]];
}

size_t dt_aug_scratch_bytes(int h, int w, int c)
{
    return h > 0 && w > 0 && c > 0 ? (size_t)h * w * c : 0;
}

/* Python's int() of a magnitude, bounded so that a wild value (NaN too) stays a defined conversion */
static int trunc_int(double m)
{
    return m >= -1e6 && m <= 1e6 ? (int)m : m > 0 ? 1000000 : -1000000;
}

void dt_aug_op(int op, double magnitude, int interp, uint8_t *img, int h, int w, int c, uint8_t *scratch)
{
    if (h <= 0 || w <= 0 || c <= 0)
        return;
    const size_t npix = (size_t)h * w, n = npix * c;
    const int rgb = c == 3;
    const float r = (float)(1.0 + magnitude), r1 = (float)(1.0 - (1.0 + magnitude)); /* _blend's ratios */
    double m[6];
    switch (op) {
    case DT_AUG_SHEAR_X: /* shear [degrees(atan(magnitude)), 0] about the top-left corner (center=[0, 0]) */
    case DT_AUG_SHEAR_Y: {
        const double deg = atan(magnitude) * (180.0 / PI);
        inverse_affine(-(w * 0.5), -(h * 0.5), 0.0, 0.0, 0.0, op == DT_AUG_SHEAR_X ? deg : 0.0,
                       op == DT_AUG_SHEAR_Y ? deg : 0.0, m);
        break;
    }
    case DT_AUG_TRANSLATE_X:
    case DT_AUG_TRANSLATE_Y: {
        const double t = trunc_int(magnitude);
        inverse_affine(0.0, 0.0, 0.0, op == DT_AUG_TRANSLATE_X ? t : 0.0, op == DT_AUG_TRANSLATE_Y ? t : 0.0, 0.0,
                       0.0, m);
        break;
    }
    case DT_AUG_ROTATE: /* F.rotate: counter-clockwise, so affine's angle is -magnitude */
        inverse_affine(0.0, 0.0, -magnitude, 0.0, 0.0, 0.0, 0.0, m);
        break;
    case DT_AUG_BRIGHTNESS: /* blended with black */
        for (size_t i = 0; i < n; i++)
            img[i] = blend(r, img[i], r1 * 0.0f);
        return;
    case DT_AUG_COLOR: /* adjust_saturation: blended with the grey image; a one-channel image unchanged */
        if (rgb)
            for (size_t i = 0; i < npix; i++) {
                uint8_t *p = img + 3 * i;
                const float g = r1 * (float)gray(p);
                for (int k = 0; k < 3; k++)
                    p[k] = blend(r, p[k], g);
            }
        return;
    case DT_AUG_CONTRAST: { /* blended with the mean grey (of the one channel for c = 1) */
        int64_t sum = 0;
        if (rgb)
            for (size_t i = 0; i < npix; i++)
                sum += gray(img + 3 * i);
        else
            for (size_t i = 0; i < n; i++)
                sum += img[i];
        /* torch.mean: the float32 sum (exact below 2^24) divided in float32 */
        const float mean = (float)sum / (float)(rgb ? npix : n), ry = r1 * mean;
        for (size_t i = 0; i < n; i++)
            img[i] = blend(r, img[i], ry);
        return;
    }
    case DT_AUG_SHARPNESS:
        if (h > 2 && w > 2)
            sharpness(r, r1, img, h, w, c, scratch);
        return;
    case DT_AUG_POSTERIZE: { /* img & -int(2 ** (8 - bits)) */
        const int bits = trunc_int(magnitude);
        const uint8_t mask = bits >= 0 && bits <= 8 ? (uint8_t)(0xff << (8 - bits)) : 0;
        for (size_t i = 0; i < n; i++)
            img[i] &= mask;
        return;
    }
    case DT_AUG_SOLARIZE: { /* inverted where img >= threshold, compared in float32 */
        const float t = (float)magnitude;
        for (size_t i = 0; i < n; i++)
            if ((float)img[i] >= t)
                img[i] = (uint8_t)(255 - img[i]);
        return;
    }
    case DT_AUG_AUTOCONTRAST:
        for (int k = 0; k < c; k++)
            autocontrast(img, npix, c, k);
        return;
    case DT_AUG_EQUALIZE:
        for (int k = 0; k < c; k++)
            equalize(img, npix, c, k);
        return;
    case DT_AUG_INVERT:
        for (size_t i = 0; i < n; i++)
            img[i] = (uint8_t)(255 - img[i]);
        return;
    default: /* Identity */
        return;
    }
    memcpy(scratch, img, n);
    affine(m, interp, scratch, img, h, w, c);
}

/* --- RandomErasing and the whole ------------------------------------------------------------------ */

int dt_erase_draw(double p, int h, int w, dt_rng *r, dt_erase_box *box)
{
    *box = (dt_erase_box){0, 0, 0, 0};
    if (!(dt_rng_uniform(r) < p) || h <= 0 || w <= 0)
        return 0;
    const double area = (double)h * w, lr0 = log(0.3), lr1 = log(3.3);
    for (int t = 0; t < 10; t++) { /* get_params: scale (0.02, 0.33), log-uniform ratio (0.3, 3.3) */
        const double target = area * (0.02 + (0.33 - 0.02) * dt_rng_uniform(r));
        const double aspect = exp(lr0 + (lr1 - lr0) * dt_rng_uniform(r));
        const double eh = nearbyint(sqrt(target * aspect)), ew = nearbyint(sqrt(target / aspect)); /* round() */
        if (!(eh < h && ew < w))
            continue;
        box->h = (int)eh;
        box->w = (int)ew;
        box->i = (int)dt_rng_below(r, (uint64_t)(h - box->h) + 1);
        box->j = (int)dt_rng_below(r, (uint64_t)(w - box->w) + 1);
        return 1;
    }
    return 0;
}

void dt_erase_apply(const dt_erase_box *b, uint8_t *img, int h, int w, int c, const uint8_t *fill)
{
    /* the box clipped to the image (in 64 bits: no overflow whatever the box) */
    const int64_t i0 = b->i < 0 ? 0 : b->i, j0 = b->j < 0 ? 0 : b->j;
    const int64_t i1 = (int64_t)b->i + b->h < h ? (int64_t)b->i + b->h : h;
    const int64_t j1 = (int64_t)b->j + b->w < w ? (int64_t)b->j + b->w : w;
    for (int64_t y = i0; y < i1; y++)
        for (int64_t x = j0; x < j1; x++)
            for (int k = 0; k < c; k++)
                img[((size_t)y * w + (size_t)x) * c + k] = fill[k];
}

void dt_aug_apply(const dt_aug_cfg *cfg, uint8_t *img, int h, int w, int c, dt_rng *r, uint8_t *scratch)
{
    dt_aug_step steps[DT_AUG_MAX_STEPS];
    const int n = dt_aug_draw(cfg, h, w, r, steps);
    for (int i = 0; i < n; i++)
        dt_aug_op(steps[i].op, steps[i].magnitude, cfg->interp, img, h, w, c, scratch);
    dt_erase_box box;
    if (cfg->erase_p > 0 && c <= 3 && dt_erase_draw(cfg->erase_p, h, w, r, &box))
        dt_erase_apply(&box, img, h, w, c, cfg->erase_fill);
}
