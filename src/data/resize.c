/* resize.c: PIL's ImagingResample with the bilinear filter (Image.resize(BILINEAR), which
 * torchvision's Resize and RandomResizedCrop use on PIL images), in PIL's fixed point: planned once
 * per box and output size (dt_resample_plan_make), then run on caller scratch (dt_resample_run), so
 * that jpeg.c's box decode and dt_image_resize share it. Contracts in image.h and image_internal.h. */
#include "config.h"

#include "data/image.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/image_internal.h"
#include "util/clones.h"

/* Fixed point as PIL's 8-bit path: weights scaled by 2^22, sums rounded by adding half, and the
 * horizontal pass rounded to 8 bits before the vertical one, so results match Image.resize. */
#define RS_PREC 22
#define RS_HALF ((int32_t)1 << (RS_PREC - 1))

static inline uint8_t clip8(int32_t v)
{
    if (v >= ((int32_t)256 << RS_PREC))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> RS_PREC);
}

static double triangle(double x)
{
    if (x < 0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* taps per output sample for resampling [in0, in1) of an axis to out samples */
static int rs_ksize(double in0, double in1, int out)
{
    double scale = (in1 - in0) / out;
    double support = scale < 1.0 ? 1.0 : scale; /* the triangle's support (1) widened when shrinking */
    return (int)ceil(support) * 2 + 1;
}

/* PIL's precompute_coeffs: output sample o is centred at in0 + (o + 0.5) * scale; its taps are the
 * input samples [first, first + count) (clipped to the axis of in_size samples), weighted by the
 * triangle stretched by the scale and normalised to sum 1. tmp holds ksize doubles. */
static void rs_coeffs(int in_size, double in0, double in1, int out, int ksize, int *bounds, int32_t *kk, double *tmp)
{
    double scale = (in1 - in0) / out;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = fscale, ss = 1.0 / fscale;
    for (int o = 0; o < out; o++) {
        double center = in0 + (o + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        int n = xmax - xmin;
        if (n < 0)
            n = 0;
        double ww = 0.0;
        for (int x = 0; x < n; x++) {
            tmp[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += tmp[x];
        }
        int32_t *k = kk + (size_t)o * ksize;
        for (int x = 0; x < ksize; x++) {
            double v = x < n ? (ww != 0.0 ? tmp[x] / ww : tmp[x]) : 0.0;
            k[x] = (int32_t)(v < 0 ? v * (1 << RS_PREC) - 0.5 : v * (1 << RS_PREC) + 0.5);
        }
        bounds[2 * o] = xmin;
        bounds[2 * o + 1] = n;
    }
}

int dt_resample_plan_make(int w, int h, const double box[4], int ow, int oh, dt_resample_plan *p)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || !(box[2] > box[0]) || !(box[3] > box[1]))
        return -1;
    /* a pass is skipped when it would copy (same size, whole axis), as PIL does */
    p->need_h = !(ow == w && box[0] == 0.0 && box[2] == (double)w);
    p->need_v = !(oh == h && box[1] == 0.0 && box[3] == (double)h);
    p->ksx = rs_ksize(box[0], box[2], ow);
    p->ksy = rs_ksize(box[1], box[3], oh);
    int kmax = p->ksx > p->ksy ? p->ksx : p->ksy;
    size_t t = 0;
    int ok = dt_image_add_aligned(&t, (uint64_t)ow * p->ksx * sizeof(int32_t))
             && dt_image_add_aligned(&t, (uint64_t)ow * 2 * sizeof(int))
             && dt_image_add_aligned(&t, (uint64_t)oh * p->ksy * sizeof(int32_t))
             && dt_image_add_aligned(&t, (uint64_t)oh * 2 * sizeof(int))
             && dt_image_add_aligned(&t, (uint64_t)kmax * sizeof(double))
             && dt_image_add_aligned(&t, (uint64_t)ow * h * 3)               /* horizontal pass output */
             && dt_image_add_aligned(&t, (uint64_t)ow * 3 * sizeof(int32_t)); /* vertical pass sums */
    if (!ok)
        return -1;
    p->need = t;
    return 0;
}

/* horizontal pass over rows [row0, row0 + nrows) of src (w wide) into dst (ow wide, nrows rows) */
DT_CLONES
static void rs_horizontal(const uint8_t *src, int w, int row0, int nrows, uint8_t *dst, int ow, const int *bounds,
                          const int32_t *kk, int ksize)
{
    for (int y = 0; y < nrows; y++) {
        const uint8_t *in = src + ((size_t)(row0 + y) * w) * 3;
        uint8_t *o = dst + (size_t)y * ow * 3;
        for (int xx = 0; xx < ow; xx++) {
            const int32_t *k = kk + (size_t)xx * ksize;
            const uint8_t *p = in + (size_t)bounds[2 * xx] * 3;
            int n = bounds[2 * xx + 1];
            int32_t s0 = RS_HALF, s1 = RS_HALF, s2 = RS_HALF;
            for (int x = 0; x < n; x++) {
                s0 += p[3 * x] * k[x];
                s1 += p[3 * x + 1] * k[x];
                s2 += p[3 * x + 2] * k[x];
            }
            o[3 * xx] = clip8(s0);
            o[3 * xx + 1] = clip8(s1);
            o[3 * xx + 2] = clip8(s2);
        }
    }
}

/* vertical pass: src rows are numbered from row0 (w wide). Each output row sums whole input rows
 * into acc (w * 3 int32), so the inner loop runs along a row and vectorises (widening multiply-add). */
DT_CLONES
static void rs_vertical(const uint8_t *src, int w, int row0, uint8_t *dst, int oh, const int *bounds,
                        const int32_t *kk, int ksize, int32_t *restrict acc)
{
    size_t n3 = (size_t)w * 3;
    for (int yy = 0; yy < oh; yy++) {
        const int32_t *k = kk + (size_t)yy * ksize;
        int n = bounds[2 * yy + 1];
        const uint8_t *base = src + (size_t)(bounds[2 * yy] - row0) * n3;
        uint8_t *restrict o = dst + (size_t)yy * n3;
#pragma omp simd
        for (size_t i = 0; i < n3; i++)
            acc[i] = RS_HALF;
        for (int y = 0; y < n; y++) {
            const uint8_t *restrict p = base + (size_t)y * n3;
            int32_t ky = k[y];
#pragma omp simd
            for (size_t i = 0; i < n3; i++)
                acc[i] += p[i] * ky;
        }
#pragma omp simd
        for (size_t i = 0; i < n3; i++) { /* clip8, branch-free */
            int32_t v = acc[i] >> RS_PREC;
            v = v < 0 ? 0 : v;
            o[i] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

/* the scratch is laid out as dt_resample_plan_make measured it */
void dt_resample_run(const uint8_t *src, int w, int h, const double box[4], uint8_t *dst, int ow, int oh,
                     const dt_resample_plan *p, uint8_t *work)
{
    if (!p->need_h && !p->need_v) {
        memcpy(dst, src, (size_t)w * h * 3);
        return;
    }
    size_t off = 0;
    int32_t *kx = (int32_t *)(void *)(work + off);
    dt_image_add_aligned(&off, (uint64_t)ow * p->ksx * sizeof(int32_t));
    int *bx = (int *)(void *)(work + off);
    dt_image_add_aligned(&off, (uint64_t)ow * 2 * sizeof(int));
    int32_t *ky = (int32_t *)(void *)(work + off);
    dt_image_add_aligned(&off, (uint64_t)oh * p->ksy * sizeof(int32_t));
    int *by = (int *)(void *)(work + off);
    dt_image_add_aligned(&off, (uint64_t)oh * 2 * sizeof(int));
    double *tmp = (double *)(void *)(work + off);
    dt_image_add_aligned(&off, (uint64_t)(p->ksx > p->ksy ? p->ksx : p->ksy) * sizeof(double));
    uint8_t *mid = work + off;
    dt_image_add_aligned(&off, (uint64_t)ow * h * 3);
    int32_t *acc = (int32_t *)(void *)(work + off);

    if (p->need_h)
        rs_coeffs(w, box[0], box[2], ow, p->ksx, bx, kx, tmp);
    if (p->need_v)
        rs_coeffs(h, box[1], box[3], oh, p->ksy, by, ky, tmp);
    if (p->need_h && !p->need_v) {
        rs_horizontal(src, w, 0, h, dst, ow, bx, kx, p->ksx);
    } else if (!p->need_h) {
        rs_vertical(src, w, 0, dst, oh, by, ky, p->ksy, acc);
    } else {
        /* only the rows some output row reads go through the horizontal pass */
        int r0 = by[0], r1 = by[2 * (oh - 1)] + by[2 * (oh - 1) + 1];
        for (int yy = 0; yy < oh; yy++) {
            if (by[2 * yy] < r0)
                r0 = by[2 * yy];
            if (by[2 * yy] + by[2 * yy + 1] > r1)
                r1 = by[2 * yy] + by[2 * yy + 1];
        }
        rs_horizontal(src, w, r0, r1 - r0, mid, ow, bx, kx, p->ksx);
        rs_vertical(mid, ow, r0, dst, oh, by, ky, p->ksy, acc);
    }
}

int dt_image_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, dt_image_scratch *s)
{
    if (!src || !dst || !s)
        return -1;
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || (uint64_t)w * h > DT_IMAGE_MAX_PIXELS
        || (uint64_t)ow * oh > DT_IMAGE_MAX_PIXELS)
        return -1;
    double box[4] = {0.0, 0.0, (double)w, (double)h};
    dt_resample_plan p;
    if (dt_resample_plan_make(w, h, box, ow, oh, &p) != 0 || dt_image_scratch_reserve(s, p.need) != 0)
        return -1;
    dt_resample_run(src, w, h, box, dst, ow, oh, &p, s->buf);
    return 0;
}
