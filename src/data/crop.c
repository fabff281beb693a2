/* crop.c: the geometry of torchvision's ImageNet augmentations: RandomResizedCrop's box
 * (dt_rrc_box), Resize + CenterCrop's box for validation (dt_center_box), and RandomHorizontalFlip
 * (dt_image_mirror_rows). Boxes are in source pixels; jpeg.c decodes them. Contracts in image.h and
 * image_internal.h. */
#include "config.h"

#include "data/image.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "data/image_internal.h"
#include "util/rng.h"

/* Python's round(): halves to even, which nearbyint does in the default rounding mode */
static double py_round(double x)
{
    return nearbyint(x);
}

dt_box dt_rrc_box(int W, int H, double smin, double smax, double rmin, double rmax, dt_rng *r)
{
    dt_box b = {0, 0, 0, 0};
    if (W <= 0 || H <= 0)
        return b;
    double area = (double)W * H;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int t = 0; t < 10; t++) {
        double target = area * (smin + (smax - smin) * dt_rng_uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * dt_rng_uniform(r));
        double w = py_round(sqrt(target * aspect)), h = py_round(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            b.w = (int)w;
            b.h = (int)h;
            b.y = (int)dt_rng_below(r, (uint64_t)(H - b.h) + 1); /* torch.randint(0, H - h + 1) */
            b.x = (int)dt_rng_below(r, (uint64_t)(W - b.w) + 1);
            return b;
        }
    }
    /* fallback: the centre crop of the whole image with its ratio clamped to the range */
    double lo = rmin < rmax ? rmin : rmax, hi = rmin < rmax ? rmax : rmin;
    double in_ratio = (double)W / H;
    double w = W, h = H;
    if (in_ratio < lo)
        h = py_round(w / lo);
    else if (in_ratio > hi)
        w = py_round(h * hi);
    b.w = w < 1 ? 1 : w > W ? W : (int)w;
    b.h = h < 1 ? 1 : h > H ? H : (int)h;
    b.y = (H - b.h) / 2;
    b.x = (W - b.w) / 2;
    return b;
}

/* one axis of dt_center_box: the crop [start, start + crop) of the axis resized from n to m samples,
 * mapped back to [b0, b1) in source samples (edges rounded to the nearest and clipped) */
static void center_axis(int n, int m, int crop, int *b0, int *len)
{
    double start = py_round((m - crop) / 2.0); /* CenterCrop: int(round((m - crop) / 2.0)) */
    double s0 = py_round(start * n / m), s1 = py_round((start + crop) * n / m);
    if (s0 < 0)
        s0 = 0;
    if (s1 > n)
        s1 = n;
    if (s1 < s0 + 1) { /* never empty */
        s1 = s0 + 1 > n ? n : s0 + 1;
        s0 = s1 - 1;
    }
    *b0 = (int)s0;
    *len = (int)(s1 - s0);
}

dt_box dt_center_box(int W, int H, int resize, int crop)
{
    dt_box b = {0, 0, 0, 0};
    if (W <= 0 || H <= 0 || resize <= 0 || crop <= 0)
        return b;
    /* Resize(resize): the shorter side becomes resize, the longer int(resize * long / short) */
    int nw, nh;
    if (W <= H) {
        nw = resize;
        nh = (int)((double)resize * H / W);
    } else {
        nh = resize;
        nw = (int)((double)resize * W / H);
    }
    center_axis(W, nw, crop, &b.x, &b.w);
    center_axis(H, nh, crop, &b.y, &b.h);
    return b;
}

void dt_image_mirror_rows(uint8_t *img, int w, int h)
{
    for (int y = 0; y < h; y++) {
        uint8_t *row = img + (size_t)y * w * 3;
        for (int left = 0, right = w - 1; left < right; left++, right--) {
            for (int ch = 0; ch < 3; ch++) {
                uint8_t t = row[3 * left + ch];
                row[3 * left + ch] = row[3 * right + ch];
                row[3 * right + ch] = t;
            }
        }
    }
}
