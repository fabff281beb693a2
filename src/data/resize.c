/* resize.c: PIL's Image.resize with each of torchvision's interpolation modes (enum dt_filter), which
 * its Resize and RandomResizedCrop use on PIL images: the convolutions (ImagingResample) in PIL's
 * fixed point, and nearest as PIL's own sampling. Planned once per box, output size and filter
 * (dt_resample_plan_make), then run on caller scratch (dt_resample_run), so that jpeg.c's box decode
 * and dt_image_resize share it. Contracts in image.h and image_internal.h. */
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

/* --- the filters ------------------------------------------------------------------------------- */

/* The kernels as PIL defines them, over distances in input pixels (stretched by the scale when
 * shrinking). Box keeps (-1/2, 1/2]: an input pixel centred exactly on the edge of an output pixel's
 * footprint counts only at its right edge, so 2 -> 3 pixels gives the middle one the right-hand
 * input pixel, as PIL does. */
static double k_box(double x)
{
    return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
}

static double k_triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x *= M_PI;
    return sin(x) / x;
}

/* sinc windowed by Hamming's raised cosine (0.54 + 0.46 cos) over [-1, 1] */
static double k_hamming(double x)
{
    x = fabs(x);
    if (x == 0.0)
        return 1.0;
    if (x >= 1.0)
        return 0.0;
    x *= M_PI;
    return sin(x) / x * (0.54 + 0.46 * cos(x));
}

/* Keys' cubic convolution with a = -0.5 (PIL's; OpenCV and torch's tensor path use -0.75) */
static double k_bicubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* Lanczos-3: sinc windowed by sinc(x / 3) over [-3, 3) */
static double k_lanczos(double x)
{
    return x >= -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0;
}

typedef struct rs_filter {
    const char *name;       /* torchvision's InterpolationMode value */
    double support;         /* half-width of the kernel at scale 1 (nearest: none) */
    double (*kernel)(double);
} rs_filter;

static const rs_filter rs_filters[DT_FILTER_COUNT] = {
    [DT_FILTER_BILINEAR] = {"bilinear", 1.0, k_triangle}, [DT_FILTER_NEAREST] = {"nearest", 0.0, NULL},
    [DT_FILTER_BICUBIC] = {"bicubic", 2.0, k_bicubic},    [DT_FILTER_BOX] = {"box", 0.5, k_box},
    [DT_FILTER_HAMMING] = {"hamming", 1.0, k_hamming},    [DT_FILTER_LANCZOS] = {"lanczos", 3.0, k_lanczos},
};

int dt_filter_parse(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "nearest-exact") == 0) /* torchvision maps it to PIL's NEAREST */
        return DT_FILTER_NEAREST;
    for (int f = 0; f < DT_FILTER_COUNT; f++)
        if (strcmp(name, rs_filters[f].name) == 0)
            return f;
    return -1;
}

const char *dt_filter_name(int filter)
{
    return filter >= 0 && filter < DT_FILTER_COUNT ? rs_filters[filter].name : "?";
}

/* --- planning ---------------------------------------------------------------------------------- */

/* One axis of the box as PIL sees it: Image.resize passes the box to C as float32, and the input
 * pixels per output pixel are their float difference over out. */
typedef struct rs_axis {
    double in0, in1, scale;
} rs_axis;

static rs_axis rs_axis_of(double b0, double b1, int out)
{
    float f0 = (float)b0, f1 = (float)b1, d = f1 - f0;
    return (rs_axis){f0, f1, (double)d / out};
}

/* taps per output sample: the kernel's support, widened by the scale when shrinking, both sides */
static int rs_ksize(rs_axis a, double support)
{
    double fscale = a.scale < 1.0 ? 1.0 : a.scale;
    return (int)ceil(support * fscale) * 2 + 1;
}

/* PIL's precompute_coeffs: output sample o is centred at in0 + (o + 0.5) * scale; its taps are the
 * input samples [first, first + count) (clipped to the axis of in_size samples), weighted by the
 * kernel stretched by the scale and normalised to sum 1. tmp holds ksize doubles. */
static void rs_coeffs(int in_size, rs_axis a, int out, const rs_filter *f, int ksize, int *bounds, int32_t *kk,
                      double *tmp)
{
    double fscale = a.scale < 1.0 ? 1.0 : a.scale;
    double support = f->support * fscale, ss = 1.0 / fscale;
    for (int o = 0; o < out; o++) {
        double center = a.in0 + (o + 0.5) * a.scale;
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
            tmp[x] = f->kernel((x + xmin - center + 0.5) * ss);
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

/* PIL's NEAREST is no convolution: Image.resize maps output pixel o's centre into the box and takes
 * the source pixel under it, floor(in0 + (o + 0.5) * scale), kept inside the axis. PIL steps the
 * position by adding the scale once per pixel, and where the centre lands exactly on a pixel edge
 * that running sum's rounding decides: 36 -> 30 pixels, output 12's centre is 15 but the sum
 * 14.999..., so PIL takes pixel 14 (the product would give 15). The same sum here, the same pixels. */
static void rs_nearest_tab(int in_size, rs_axis a, int out, int *tab)
{
    double pos = a.in0 + a.scale * 0.5;
    for (int o = 0; o < out; o++, pos += a.scale) {
        int i = pos < 0.0 ? 0 : (int)pos;
        tab[o] = i < in_size ? i : in_size - 1;
    }
}

int dt_resample_plan_make(int w, int h, const double box[4], int ow, int oh, int filter, dt_resample_plan *p)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || filter < 0 || filter >= DT_FILTER_COUNT)
        return -1;
    rs_axis ax = rs_axis_of(box[0], box[2], ow), ay = rs_axis_of(box[1], box[3], oh);
    if (!(ax.in1 > ax.in0) || !(ay.in1 > ay.in0))
        return -1;
    p->filter = filter;
    /* a pass is skipped when it would copy (same size, whole axis), as PIL does */
    p->need_h = !(ow == w && ax.in0 == 0.0 && ax.in1 == (double)w);
    p->need_v = !(oh == h && ay.in0 == 0.0 && ay.in1 == (double)h);
    size_t t = 0;
    if (filter == DT_FILTER_NEAREST) {
        if (!dt_image_add_aligned(&t, (uint64_t)ow * sizeof(int))
            || !dt_image_add_aligned(&t, (uint64_t)oh * sizeof(int)))
            return -1;
        p->need = t;
        return 0;
    }
    p->ksx = rs_ksize(ax, rs_filters[filter].support);
    p->ksy = rs_ksize(ay, rs_filters[filter].support);
    int kmax = p->ksx > p->ksy ? p->ksx : p->ksy;
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

/* --- running ----------------------------------------------------------------------------------- */

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

/* nearest: each output pixel a copy of the source pixel the tables name */
static void rs_nearest(const uint8_t *src, int w, uint8_t *dst, int ow, int oh, const int *xt, const int *yt)
{
    for (int y = 0; y < oh; y++) {
        const uint8_t *in = src + (size_t)yt[y] * w * 3;
        uint8_t *o = dst + (size_t)y * ow * 3;
        for (int x = 0; x < ow; x++)
            memcpy(o + 3 * (size_t)x, in + 3 * (size_t)xt[x], 3);
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
    rs_axis ax = rs_axis_of(box[0], box[2], ow), ay = rs_axis_of(box[1], box[3], oh);
    size_t off = 0;
    if (p->filter == DT_FILTER_NEAREST) {
        int *xt = (int *)(void *)work;
        dt_image_add_aligned(&off, (uint64_t)ow * sizeof(int));
        int *yt = (int *)(void *)(work + off);
        rs_nearest_tab(w, ax, ow, xt);
        rs_nearest_tab(h, ay, oh, yt);
        rs_nearest(src, w, dst, ow, oh, xt, yt);
        return;
    }
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

    const rs_filter *f = &rs_filters[p->filter];
    if (p->need_h)
        rs_coeffs(w, ax, ow, f, p->ksx, bx, kx, tmp);
    if (p->need_v)
        rs_coeffs(h, ay, oh, f, p->ksy, by, ky, tmp);
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

int dt_image_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, int filter,
                    dt_image_scratch *s)
{
    if (!src || !dst || !s)
        return -1;
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || (uint64_t)w * h > DT_IMAGE_MAX_PIXELS
        || (uint64_t)ow * oh > DT_IMAGE_MAX_PIXELS)
        return -1;
    double box[4] = {0.0, 0.0, (double)w, (double)h};
    dt_resample_plan p;
    if (dt_resample_plan_make(w, h, box, ow, oh, filter, &p) != 0 || dt_image_scratch_reserve(s, p.need) != 0)
        return -1;
    dt_resample_run(src, w, h, box, dst, ow, oh, &p, s->buf);
    return 0;
}
