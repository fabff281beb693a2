/* test_ops.c: every CPU op against a plain double-precision reference written here, and every
 * gradient against central differences of that reference (so the reference's gradient is checked
 * too), on tiny random shapes covering stride, padding, dilation, groups, 1x1, odd sizes; the
 * `accumulate` flag of each backward; dropout and stochastic depth statistics; the activations at
 * PyTorch's kinks, NaN and large |x|; torch.optim.SGD's update rule. Everything
 * runs for the CPU reference (im2col + BLAS convolutions) and for the CPU backend (oneDNN's when built).
 * Errors are norm-wise relative: |ours - ref| / |ref|. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "tap.h"
#include "util/half.h"
#include "util/rng.h"

#define FWD_TOL 2e-5
#define BWD_TOL 2e-4
#define FD_H 1e-6

static dt_rng rng;
static const dt_backend *be;

/* --- small helpers ------------------------------------------------------------------------------ */

typedef struct buf {
    int64_t n;
    float *f;  /* for our op */
    double *d; /* for the reference */
} buf;

static buf mk(int64_t n)
{
    buf b = {n, calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(double))};
    for (int64_t i = 0; i < n; i++) {
        b.f[i] = (float)(dt_rng_uniform(&rng) * 2 - 1);
        b.d[i] = b.f[i];
    }
    return b;
}

static void rm(buf *b)
{
    free(b->f);
    free(b->d);
}

/* the relative L2 error of a against ref, over the elements ref has (a NaN in ref: not computed) */
static double rel_err(const float *a, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i]))
            continue;
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* objective: sum(g * f(inputs)) in double, over a context the FD loop perturbs */
typedef double (*objective_fn)(void *ctx);

/* Central differences of f for each element of arr. Under AddressSanitizer (CI's second run of the
 * unit tests, there for memory errors) an array of more than FD_SAMPLE_FROM elements gets them for
 * every FD_SAMPLE-th element only, the others NaN (rel_err skips them): the ops under test still
 * run whole, and the plain build's run checks every element. The two 3x3 convolutions of 32
 * channels took 40 s each under ASan, two thirds of the step. */
#if defined(__SANITIZE_ADDRESS__)
#define FD_SAMPLE 8
#else
#define FD_SAMPLE 1
#endif
#define FD_SAMPLE_FROM 512
static void fd_grad(objective_fn f, void *ctx, double *arr, int64_t n, double *out)
{
    const int64_t every = n > FD_SAMPLE_FROM ? FD_SAMPLE : 1;
    for (int64_t i = 0; i < n; i++) {
        if (i % every) {
            out[i] = NAN;
            continue;
        }
        double s = arr[i];
        arr[i] = s + FD_H;
        double fp = f(ctx);
        arr[i] = s - FD_H;
        double fm = f(ctx);
        arr[i] = s;
        out[i] = (fp - fm) / (2 * FD_H);
    }
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* --- convolution -------------------------------------------------------------------------------- */

typedef struct conv_ctx {
    dt_conv_desc d;
    buf x, w, b, g; /* g: upstream gradient */
    int bias;
    double *y;
} conv_ctx;

static void ref_conv(const dt_conv_desc *d, const double *x, const double *w, const double *b, double *y)
{
    int cg = d->c / d->groups, og = d->oc / d->groups;
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int o = 0; o < d->oc; o++) {
                    int g = o / og;
                    double s = b ? b[o] : 0;
                    for (int ky = 0; ky < d->kh; ky++)
                        for (int kx = 0; kx < d->kw; kx++) {
                            int iy = oy * d->sh - d->ph + ky * d->dh, ix = ox * d->sw - d->pw + kx * d->dw;
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
                                continue;
                            for (int i = 0; i < cg; i++)
                                s += x[((int64_t)(n * d->h + iy) * d->w + ix) * d->c + g * cg + i] *
                                     w[(((int64_t)o * d->kh + ky) * d->kw + kx) * cg + i];
                        }
                    y[((int64_t)(n * d->oh + oy) * d->ow + ox) * d->oc + o] = s;
                }
}

static double conv_obj(void *p)
{
    conv_ctx *c = p;
    ref_conv(&c->d, c->x.d, c->w.d, c->bias ? c->b.d : NULL, c->y);
    return dot(c->y, c->g.d, c->g.n);
}

static void check_conv(int n, int h, int w, int ch, int oc, int k, int s, int pad, int dil, int groups, int bias)
{
    conv_ctx c = {.bias = bias};
    if (dt_conv_desc_set(&c.d, n, h, w, ch, oc, k, k, s, s, pad, pad, dil, dil, groups)) {
        TAP_OK(0, "conv desc n%d %dx%dx%d->%d k%d s%d p%d d%d g%d", n, h, w, ch, oc, k, s, pad, dil, groups);
        return;
    }
    c.d.bias = bias;        /* so a backend prepares the bias and accumulate paths tested here */
    c.d.dx_accumulate = 1;
    const dt_conv_desc *d = &c.d;
    int64_t ny = (int64_t)n * d->oh * d->ow * oc, nx = (int64_t)n * h * w * ch, nw = (int64_t)oc * k * k * (ch / groups);
    c.x = mk(nx);
    c.w = mk(nw);
    c.b = mk(oc);
    c.g = mk(ny);
    c.y = calloc((size_t)ny, sizeof(double));
    void *ws = malloc(be->conv_workspace(d) + 1);
    float *y = malloc((size_t)ny * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float)),
          *dw = malloc((size_t)nw * sizeof(float)), *db = malloc((size_t)oc * sizeof(float));
    double *rx = malloc((size_t)nx * sizeof(double)), *rw = malloc((size_t)nw * sizeof(double)),
           *rb = malloc((size_t)oc * sizeof(double));

    be->conv_fwd(d, c.x.f, c.w.f, bias ? c.b.f : NULL, y, ws);
    conv_obj(&c);
    double ef = rel_err(y, c.y, ny);
    be->conv_bwd_data(d, c.g.f, c.w.f, dx, 0, ws);
    be->conv_bwd_filter(d, c.x.f, c.g.f, dw, bias ? db : NULL, 0, ws);
    fd_grad(conv_obj, &c, c.x.d, nx, rx);
    fd_grad(conv_obj, &c, c.w.d, nw, rw);
    fd_grad(conv_obj, &c, c.b.d, oc, rb);
    double ex = rel_err(dx, rx, nx), ew = rel_err(dw, rw, nw), eb = bias ? rel_err(db, rb, oc) : 0;
    TAP_OK(ef < FWD_TOL && ex < BWD_TOL && ew < BWD_TOL && eb < BWD_TOL,
           "conv n%d %dx%dx%d->%d k%d s%d p%d d%d g%d%s: fwd %.1e dx %.1e dw %.1e db %.1e", n, h, w, ch, oc, k, s, pad,
           dil, groups, bias ? " bias" : "", ef, ex, ew, eb);
    /* accumulate adds to what is there */
    be->conv_bwd_data(d, c.g.f, c.w.f, dx, 1, ws);
    be->conv_bwd_filter(d, c.x.f, c.g.f, dw, bias ? db : NULL, 1, ws);
    for (int64_t i = 0; i < nx; i++)
        rx[i] *= 2;
    for (int64_t i = 0; i < nw; i++)
        rw[i] *= 2;
    TAP_OK(rel_err(dx, rx, nx) < BWD_TOL && rel_err(dw, rw, nw) < BWD_TOL, "  accumulate doubles dx and dw");
    rm(&c.x);
    rm(&c.w);
    rm(&c.b);
    rm(&c.g);
    free(c.y);
    free(ws);
    free(y);
    free(dx);
    free(dw);
    free(db);
    free(rx);
    free(rw);
    free(rb);
}

/* a convolution big enough to run in several chunks: checked against the reference's forward and
 * against our own single-image results, image by image (chunk borders must not matter) */
static void check_conv_chunked(void)
{
    dt_conv_desc d, d1;
    dt_conv_desc_set(&d, 3, 40, 40, 64, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    dt_conv_desc_set(&d1, 1, 40, 40, 64, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    int64_t nx = 3 * 40 * 40 * 64, ny = 3 * 40 * 40 * 32, nw = 32 * 9 * 64;
    buf x = mk(nx), w = mk(nw), g = mk(ny);
    double *ry = malloc((size_t)ny * sizeof(double));
    float *y = malloc((size_t)ny * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float)),
          *dx1 = malloc((size_t)nx * sizeof(float)), *dw = malloc((size_t)nw * sizeof(float)),
          *dw1 = malloc((size_t)nw * sizeof(float));
    void *ws = malloc(be->conv_workspace(&d));
    TAP_OK(be->conv_workspace(&d) < (size_t)ny * 9 * 2 * sizeof(float), "chunked: workspace %zu bytes is a chunk, not the batch",
           be->conv_workspace(&d));
    be->conv_fwd(&d, x.f, w.f, NULL, y, ws);
    ref_conv(&d, x.d, w.d, NULL, ry);
    double ef = rel_err(y, ry, ny);
    be->conv_bwd_data(&d, g.f, w.f, dx, 0, ws);
    be->conv_bwd_filter(&d, x.f, g.f, dw, NULL, 0, ws);
    for (int img = 0; img < 3; img++) {
        be->conv_bwd_data(&d1, g.f + img * ny / 3, w.f, dx1 + img * nx / 3, 0, ws);
        be->conv_bwd_filter(&d1, x.f + img * nx / 3, g.f + img * ny / 3, dw1, NULL, img > 0, ws);
    }
    double ex = 0, ew = 0, nrm = 0;
    for (int64_t i = 0; i < nx; i++) {
        ex += (dx[i] - dx1[i]) * (dx[i] - dx1[i]);
        nrm += dx1[i] * dx1[i];
    }
    ex = sqrt(ex / nrm);
    nrm = 0;
    for (int64_t i = 0; i < nw; i++) {
        ew += (dw[i] - dw1[i]) * (dw[i] - dw1[i]);
        nrm += dw1[i] * dw1[i];
    }
    ew = sqrt(ew / nrm);
    TAP_OK(ef < FWD_TOL && ex < 1e-6 && ew < 1e-5, "chunked 3x40x40x64->32: fwd %.1e, dx %.1e and dw %.1e vs per image", ef,
           ex, ew);
    rm(&x);
    rm(&w);
    rm(&g);
    free(ry);
    free(y);
    free(dx);
    free(dx1);
    free(dw);
    free(dw1);
    free(ws);
}

/* relative L2 distance of a from b */
static double l2_rel(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (double)(a[i] - b[i]) * (a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#ifdef HAVE_DNNL
static const int with_dnnl = 1;
#else
static const int with_dnnl = 0; /* every convolution on conv.c's NHWC */
#endif

/* A convolution on oneDNN's blocked layout against the same one on NHWC (checked against finite
 * differences above), on the same operands: every pass, with the adding ones, within float rounding
 * (the two layouts' kernels sum in different orders). Caller's layout is left as DT_CONV_LAYOUT_BLOCKED. */
static void check_conv_layouts(int n, int h, int w, int ch, int oc, int k, int s, int pad, int bias)
{
    dt_conv_desc d;
    dt_conv_desc_set(&d, n, h, w, ch, oc, k, k, s, s, pad, pad, 1, 1, 1);
    d.bias = bias;
    d.dx_accumulate = 1;
    const int64_t ny = (int64_t)n * d.oh * d.ow * oc, nx = (int64_t)n * h * w * ch, nw = (int64_t)oc * k * k * ch;
    buf x = mk(nx), wt = mk(nw), b = mk(oc), g = mk(ny);
    float *out[2][4]; /* per layout: y, dx, dw, db (each after a written and then an adding pass) */
    int blocked[2];
    for (int l = 0; l < 2; l++) {
        dt_cpu_set_conv_layout(l ? DT_CONV_LAYOUT_BLOCKED : DT_CONV_LAYOUT_NHWC);
        blocked[l] = dt_cpu_conv_blocked(&d);
        void *ws = malloc(be->conv_workspace(&d) + 1);
        float *y = out[l][0] = malloc((size_t)ny * sizeof(float)), *dx = out[l][1] = malloc((size_t)nx * sizeof(float)),
              *dw = out[l][2] = malloc((size_t)nw * sizeof(float)), *db = out[l][3] = calloc((size_t)oc, sizeof(float));
        be->conv_fwd(&d, x.f, wt.f, bias ? b.f : NULL, y, ws);
        for (int acc = 0; acc < 2; acc++) {
            be->conv_bwd_data(&d, g.f, wt.f, dx, acc, ws);
            be->conv_bwd_filter(&d, x.f, g.f, dw, bias ? db : NULL, acc, ws);
        }
        free(ws); /* without a bias db stays zero on both sides */
    }
    const int64_t len[4] = {ny, nx, nw, oc};
    double e[4];
    int ok = !blocked[0] && blocked[1] == with_dnnl;
    for (int i = 0; i < 4; i++) {
        e[i] = l2_rel(out[1][i], out[0][i], len[i]);
        ok &= e[i] < 1e-5;
    }
    TAP_OK(ok, "conv n%d %dx%dx%d->%d k%d s%d%s on blocked activations against NHWC (written, then added): y %.1e, "
               "dx %.1e, dw %.1e, db %.1e",
           n, h, w, ch, oc, k, s, bias ? " bias" : "", e[0], e[1], e[2], e[3]);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 4; i++)
            free(out[l][i]);
    rm(&x);
    rm(&wt);
    rm(&b);
    rm(&g);
}

/* a convolution on blocked activations whose images are big enough to run in slices (their copies
 * within conv_dnnl.c's BLK_CHUNK_BYTES of 24 MiB: 5 images, then 2): every pass, adding or not, against the
 * reference backend's */
static void check_conv_blocked_sliced(void)
{
    dt_conv_desc d;
    dt_conv_desc_set(&d, 7, 112, 112, 48, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    d.bias = 1;
    int64_t nx = 7 * 112 * 112 * 48, nw = 48 * 9 * 48;
    buf x = mk(nx), w = mk(nw), b = mk(48), g = mk(nx), base = mk(nx), wbase = mk(nw);
    float *y = malloc((size_t)nx * sizeof(float)), *yr = malloc((size_t)nx * sizeof(float));
    float *dx = malloc((size_t)nx * sizeof(float)), *dxr = malloc((size_t)nx * sizeof(float));
    float dw[48 * 9 * 48], dwr[48 * 9 * 48], db[48], dbr[48];
    size_t wsb = be->conv_workspace(&d), wsr = dt_backend_cpu_ref.conv_workspace(&d);
    void *ws = malloc(wsb > wsr ? wsb : wsr);
    double e[6];
    be->conv_fwd(&d, x.f, w.f, b.f, y, ws);
    dt_backend_cpu_ref.conv_fwd(&d, x.f, w.f, b.f, yr, ws);
    e[0] = l2_rel(y, yr, nx);
    for (int acc = 0; acc < 2; acc++) { /* write, then add to what is there */
        memcpy(dx, base.f, (size_t)nx * sizeof(float));
        memcpy(dxr, base.f, (size_t)nx * sizeof(float));
        memcpy(dw, wbase.f, sizeof dw);
        memcpy(dwr, wbase.f, sizeof dw);
        memcpy(db, wbase.f, sizeof db);
        memcpy(dbr, wbase.f, sizeof db);
        be->conv_bwd_filter(&d, x.f, g.f, dw, db, acc, ws);
        be->conv_bwd_data(&d, g.f, w.f, dx, acc, ws);
        dt_backend_cpu_ref.conv_bwd_filter(&d, x.f, g.f, dwr, dbr, acc, ws);
        dt_backend_cpu_ref.conv_bwd_data(&d, g.f, w.f, dxr, acc, ws);
        e[1 + acc] = l2_rel(dx, dxr, nx);
        e[3 + acc] = l2_rel(dw, dwr, nw);
        e[5] = acc ? l2_rel(db, dbr, 48) : 0;
    }
    TAP_OK(dt_cpu_conv_blocked(&d) && wsb < (size_t)2 * nx * sizeof(float) && e[0] < 1e-6 && e[1] < 1e-6 && e[2] < 1e-6 && e[3] < 1e-5 && e[4] < 1e-5 &&
               e[5] < 1e-5,
           "blocked 7x112x112x48->48 in slices of images (workspace %zu bytes, less than the batch's copies of x and "
           "y): y %.1e, dx %.1e (adding %.1e), dw %.1e (adding %.1e), db %.1e from the reference",
           wsb, e[0], e[1], e[2], e[3], e[4], e[5]);
    rm(&x);
    rm(&w);
    rm(&b);
    rm(&g);
    rm(&base);
    rm(&wbase);
    free(y);
    free(yr);
    free(dx);
    free(dxr);
    free(ws);
}

/* the backend's backward-data adding into dx for a batch whose images are big enough to be taken
 * in slices (oneDNN: about 16 MiB of dx at a time, with a remainder slice) against the reference */
static void check_conv_sliced(void)
{
    dt_conv_desc d;
    dt_conv_desc_set(&d, 3, 256, 256, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    d.dx_accumulate = 1;
    int64_t nx = 3 * 256 * 256 * 32, nw = 32 * 9 * 32;
    buf w = mk(nw), g = mk(nx), base = mk(nx);
    float *dx = malloc((size_t)nx * sizeof(float)), *ref = malloc((size_t)nx * sizeof(float));
    size_t wsb = be->conv_workspace(&d), wsr = dt_backend_cpu_ref.conv_workspace(&d);
    void *ws = malloc(wsb > wsr ? wsb : wsr);
    memcpy(dx, base.f, (size_t)nx * sizeof(float));
    memcpy(ref, base.f, (size_t)nx * sizeof(float));
    be->conv_bwd_data(&d, g.f, w.f, dx, 1, ws);
    dt_backend_cpu_ref.conv_bwd_data(&d, g.f, w.f, ref, 1, ws);
    double num = 0, den = 0;
    for (int64_t i = 0; i < nx; i++) {
        num += (double)(dx[i] - ref[i]) * (dx[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    TAP_OK(sqrt(num / den) < 1e-6, "backward-data adding into dx, 3 images of 256x256x32 (sliced): %.1e from the reference",
           sqrt(num / den));
    rm(&w);
    rm(&g);
    rm(&base);
    free(dx);
    free(ref);
    free(ws);
}

/* --- batch norm --------------------------------------------------------------------------------- */

typedef struct bn_ctx {
    int64_t rows;
    int c, relu; /* relu: the fused BN+ReLU */
    buf x, gm, bt, g;
    double *y;
} bn_ctx;

static double bn_obj(void *p)
{
    bn_ctx *b = p;
    double s = 0;
    for (int j = 0; j < b->c; j++) {
        double mean = 0, var = 0;
        for (int64_t r = 0; r < b->rows; r++)
            mean += b->x.d[r * b->c + j];
        mean /= b->rows;
        for (int64_t r = 0; r < b->rows; r++)
            var += (b->x.d[r * b->c + j] - mean) * (b->x.d[r * b->c + j] - mean);
        var /= b->rows;
        for (int64_t r = 0; r < b->rows; r++) {
            double y = (b->x.d[r * b->c + j] - mean) / sqrt(var + 1e-5) * b->gm.d[j] + b->bt.d[j];
            if (b->relu && y < 0)
                y = 0;
            b->y[r * b->c + j] = y;
            s += y * b->g.d[r * b->c + j];
        }
    }
    return s;
}

static void check_bn(int64_t rows, int c, int relu)
{
    bn_ctx b = {.rows = rows, .c = c, .relu = relu};
    int64_t n = rows * c;
    b.x = mk(n);
    b.gm = mk(c);
    b.bt = mk(c);
    b.g = mk(n);
    for (int64_t i = 0; i < n; i++) { /* an offset and a scale per channel, as real activations have */
        b.x.f[i] = b.x.f[i] * (1 + (float)(i % c) / 4) + (float)(i % c) / 3;
        b.x.d[i] = b.x.f[i];
    }
    b.y = calloc((size_t)n, sizeof(double));
    float *y = malloc((size_t)n * sizeof(float)), *dx = malloc((size_t)n * sizeof(float)),
          *dg = malloc((size_t)c * sizeof(float)), *dbt = malloc((size_t)c * sizeof(float)),
          *saved = malloc(DT_BN_SAVED(c) * sizeof(float)), *dxm = malloc((size_t)n * sizeof(float)),
          *gm = malloc((size_t)n * sizeof(float)),
          *rmean = malloc((size_t)c * sizeof(float)), *rvar = malloc((size_t)c * sizeof(float));
    double *rx = malloc((size_t)n * sizeof(double)), *rg = malloc((size_t)c * sizeof(double)),
           *rb = malloc((size_t)c * sizeof(double));
    for (int j = 0; j < c; j++) {
        rmean[j] = 0.5f;
        rvar[j] = 2.0f;
    }
    dt_bn_desc d = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f};
    be->bn_fwd_train(&d, b.x.f, b.gm.f, b.bt.f, y, saved, rmean, rvar, b.relu);
    bn_obj(&b);
    double ef = rel_err(y, b.y, n);
    /* running stats: 0.9*old + 0.1*batch, unbiased variance */
    double erm = 0, erv = 0;
    for (int j = 0; j < c; j++) {
        double mean = 0, var = 0;
        for (int64_t r = 0; r < rows; r++)
            mean += b.x.d[r * c + j];
        mean /= rows;
        for (int64_t r = 0; r < rows; r++)
            var += (b.x.d[r * c + j] - mean) * (b.x.d[r * c + j] - mean);
        erm = fmax(erm, fabs(rmean[j] - (0.9 * 0.5 + 0.1 * mean)));
        erv = fmax(erv, fabs(rvar[j] - (0.9 * 2.0 + 0.1 * var / (rows - 1))) / (0.9 * 2.0 + 0.1 * var / (rows - 1)));
    }
    be->bn_bwd(&d, b.x.f, b.g.f, b.relu, b.gm.f, saved, dx, dg, dbt, 0, 0);
    fd_grad(bn_obj, &b, b.x.d, n, rx);
    fd_grad(bn_obj, &b, b.gm.d, c, rg);
    fd_grad(bn_obj, &b, b.bt.d, c, rb);
    double ex = rel_err(dx, rx, n), eg = rel_err(dg, rg, c), eb = rel_err(dbt, rb, c);
    TAP_OK(ef < FWD_TOL && ex < BWD_TOL && eg < BWD_TOL && eb < BWD_TOL && erm < 1e-6 && erv < 1e-6,
           "bn%s train %lldx%d: fwd %.1e dx %.1e dgamma %.1e dbeta %.1e running mean %.1e var %.1e", relu ? "+relu" : "",
           (long long)rows, c, ef, ex, eg, eb, erm, erv);
    if (relu) { /* the mask backward recomputes is exactly the forward's: the same as masking dy by y > 0 */
        for (int64_t i = 0; i < n; i++)
            gm[i] = y[i] > 0 ? b.g.f[i] : 0;
        float *dgm = malloc(2 * (size_t)c * sizeof(float));
        be->bn_bwd(&d, b.x.f, gm, 0, b.gm.f, saved, dxm, dgm, dgm + c, 0, 0);
        TAP_OK(memcmp(dx, dxm, (size_t)n * sizeof(float)) == 0 && memcmp(dg, dgm, (size_t)c * sizeof(float)) == 0,
               "  fused ReLU's mask from x equals the forward output's (bit for bit)");
        free(dgm);
    }
    be->bn_bwd(&d, b.x.f, b.g.f, b.relu, b.gm.f, saved, dx, dg, dbt, 1, 1);
    for (int64_t i = 0; i < n; i++)
        rx[i] *= 2;
    for (int j = 0; j < c; j++)
        rg[j] *= 2;
    TAP_OK(rel_err(dx, rx, n) < BWD_TOL && rel_err(dg, rg, c) < BWD_TOL, "  accumulate doubles dx and dgamma");
    /* inference: (x - running_mean) / sqrt(running_var + eps) * gamma + beta */
    be->bn_fwd_infer(&d, b.x.f, b.gm.f, b.bt.f, rmean, rvar, y, b.relu);
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        int j = (int)(i % c);
        b.y[i] = (b.x.d[i] - rmean[j]) / sqrt((double)rvar[j] + 1e-5) * b.gm.d[j] + b.bt.d[j];
        if (relu && b.y[i] < 0)
            b.y[i] = 0;
    }
    e = rel_err(y, b.y, n);
    TAP_OK(e < FWD_TOL, "bn inference %lldx%d: %.1e", (long long)rows, c, e);
    rm(&b.x);
    rm(&b.gm);
    rm(&b.bt);
    rm(&b.g);
    free(b.y);
    free(y);
    free(dx);
    free(dg);
    free(dbt);
    free(saved);
    free(dxm);
    free(gm);
    free(rmean);
    free(rvar);
    free(rx);
    free(rg);
    free(rb);
}

/* --- pools ------------------------------------------------------------------------------------- */

typedef struct pool_ctx {
    dt_pool_desc d;
    int max;
    buf x, g;
    double *y;
} pool_ctx;

static double pool_obj(void *p)
{
    pool_ctx *c = p;
    const dt_pool_desc *d = &c->d;
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int ch = 0; ch < d->c; ch++) {
                    int y0, y1, x0, x1;
                    if (c->max) {
                        y0 = oy * d->sh - d->ph;
                        y1 = y0 + d->kh;
                        x0 = ox * d->sw - d->pw;
                        x1 = x0 + d->kw;
                    } else {
                        y0 = oy * d->h / d->oh;
                        y1 = ((oy + 1) * d->h + d->oh - 1) / d->oh;
                        x0 = ox * d->w / d->ow;
                        x1 = ((ox + 1) * d->w + d->ow - 1) / d->ow;
                    }
                    double acc = c->max ? -INFINITY : 0;
                    int cnt = 0;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
                                continue;
                            double v = c->x.d[((int64_t)(n * d->h + iy) * d->w + ix) * d->c + ch];
                            acc = c->max ? fmax(acc, v) : acc + v;
                            cnt++;
                        }
                    c->y[((int64_t)(n * d->oh + oy) * d->ow + ox) * d->c + ch] = c->max ? acc : acc / cnt;
                }
    return dot(c->y, c->g.d, c->g.n);
}

/* The residual block's tail in one op each way (bn_add_relu_*) against the ops it replaces: bn_fwd_*
 * (relu 0), add_fwd and relu_fwd forward; relu_bwd, the add's gradient to both inputs and bn_bwd
 * (relu 0) backward. In fp32 the arithmetic is the same: bit for bit, for every output, with and
 * without accumulation, and with the residual's gradient written over dy itself (how a planner may
 * alias them). */
static void check_bn_add_relu(int64_t rows, int c)
{
    const int64_t n = rows * c;
    buf x = mk(n), r = mk(n), dy = mk(n), gm = mk(c), bt = mk(c);
    float *ya = calloc((size_t)n, 4), *yb = calloc((size_t)n, 4), *t = calloc((size_t)n, 4);
    float sa[DT_BN_SAVED(300)], sb[DT_BN_SAVED(300)], rma[300] = {0}, rva[300], rmb[300] = {0}, rvb[300];
    for (int j = 0; j < c; j++)
        rva[j] = rvb[j] = 1.0f;
    dt_bn_desc d = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f};
    /* forward, training: composed, then fused */
    be->bn_fwd_train(&d, x.f, gm.f, bt.f, t, sa, rma, rva, 0);
    be->add_fwd(n, t, DT_FLOAT32, r.f, DT_FLOAT32, ya, DT_FLOAT32);
    be->relu_fwd(n, DT_FLOAT32, ya, ya);
    be->bn_add_relu_fwd_train(&d, x.f, gm.f, bt.f, r.f, DT_FLOAT32, yb, sb, rmb, rvb);
    int zeros = 0;
    for (int64_t i = 0; i < n; i++)
        zeros += ya[i] == 0.0f;
    int fwd = !memcmp(ya, yb, (size_t)n * 4) && !memcmp(sa, sb, DT_BN_SAVED(c) * 4) &&
              !memcmp(rma, rmb, (size_t)c * 4) && !memcmp(rva, rvb, (size_t)c * 4);
    /* forward, inference */
    be->bn_fwd_infer(&d, x.f, gm.f, bt.f, rma, rva, t, 0);
    be->add_fwd(n, t, DT_FLOAT32, r.f, DT_FLOAT32, ya, DT_FLOAT32);
    be->relu_fwd(n, DT_FLOAT32, ya, ya);
    be->bn_add_relu_fwd_infer(&d, x.f, gm.f, bt.f, rma, rva, r.f, DT_FLOAT32, yb);
    int inf = !memcmp(ya, yb, (size_t)n * 4);
    TAP_OK(fwd && inf && zeros > 0 && zeros < n,
           "bn+add+relu %lldx%d forward (training: y, saved state, running statistics; inference: y) equals bn, add "
           "and relu composed, bit for bit (%d of %lld zero)",
           (long long)rows, c, zeros, (long long)n);
    /* backward from the training forward's output: composed (relu_bwd, then the add hands g to both) */
    be->bn_add_relu_fwd_train(&d, x.f, gm.f, bt.f, r.f, DT_FLOAT32, yb, sb, rmb, rvb);
    int ok = 1;
    for (int acc = 0; acc <= 1; acc++) {
        float *g = calloc((size_t)n, 4), *dxa = calloc((size_t)n, 4), *dxb = calloc((size_t)n, 4);
        float *dra = calloc((size_t)n, 4), *drb = calloc((size_t)n, 4), dga[300], dba[300], dgb[300], dbb[300];
        for (int64_t i = 0; i < n; i++) /* what accumulation adds to */
            dxa[i] = dxb[i] = dra[i] = drb[i] = (float)i * 1e-3f;
        for (int j = 0; j < c; j++)
            dga[j] = dgb[j] = dba[j] = dbb[j] = (float)j * 1e-2f;
        be->relu_bwd(n, DT_FLOAT32, yb, dy.f, g, 0);
        be->copy_grad(n, g, DT_FLOAT32, dra, DT_FLOAT32, acc);
        be->bn_bwd(&d, x.f, g, 0, gm.f, sb, dxa, dga, dba, acc, acc);
        be->bn_add_relu_bwd(&d, x.f, yb, dy.f, gm.f, sb, dxb, drb, DT_FLOAT32, dgb, dbb, acc, acc, acc);
        ok &= !memcmp(dxa, dxb, (size_t)n * 4) && !memcmp(dra, drb, (size_t)n * 4) &&
              !memcmp(dga, dgb, (size_t)c * 4) && !memcmp(dba, dbb, (size_t)c * 4);
        if (!acc) { /* dr written over dy itself */
            float *dyc = calloc((size_t)n, 4);
            memcpy(dyc, dy.f, (size_t)n * 4);
            be->bn_add_relu_bwd(&d, x.f, yb, dyc, gm.f, sb, dxb, dyc, DT_FLOAT32, dgb, dbb, 0, 0, 0);
            ok &= !memcmp(dxa, dxb, (size_t)n * 4) && !memcmp(dra, dyc, (size_t)n * 4) &&
                  !memcmp(dga, dgb, (size_t)c * 4);
            free(dyc);
        }
        free(g);
        free(dxa);
        free(dxb);
        free(dra);
        free(drb);
    }
    TAP_OK(ok,
           "bn+add+relu %lldx%d backward (dx, dr, dgamma, dbeta; accumulating or not; dr over dy) equals relu_bwd, "
           "the add's gradient and bn_bwd composed, bit for bit",
           (long long)rows, c);
    free(ya);
    free(yb);
    free(t);
    rm(&x);
    rm(&r);
    rm(&dy);
    rm(&gm);
    rm(&bt);
}

/* BN with a fused activation (bn_*(relu = DT_BN_ACT(a)), DT_FUSE_BN_ACT) against bn_*(relu 0) then
 * act_fwd forward, act_bwd then bn_bwd(relu 0) backward, for every activation: in fp32 bit for bit
 * (training and inference forward; backward accumulating or not); with fp16 x, y, dy and dx, the
 * fused fp32 op's results on the widened operands, rounded once. */
static void check_bn_act(int64_t rows, int c)
{
    if (!(be->fuses & DT_FUSE_BN_ACT))
        return;
    const int64_t n = rows * c;
    const dt_rng rng0 = rng; /* given back at the end: the later checks keep the data they had before this one */
    buf x = mk(n), dy = mk(n), gm = mk(c), bt = mk(c);
    for (int64_t i = 0; i < n; i++) /* spread over the activations' kinks (0, +-3, 6) */
        x.f[i] *= 4.0f;
    float *ya = calloc((size_t)n, 4), *yb = calloc((size_t)n, 4), *t = calloc((size_t)n, 4);
    float *g = calloc((size_t)n, 4), *dxa = calloc((size_t)n, 4), *dxb = calloc((size_t)n, 4);
    uint16_t *xh = calloc((size_t)n, 2), *yh = calloc((size_t)n, 2), *dyh = calloc((size_t)n, 2);
    uint16_t *dxh = calloc((size_t)n, 2), *rh = calloc((size_t)n, 2);
    float sa[DT_BN_SAVED(300)], sb[DT_BN_SAVED(300)], rma[300] = {0}, rva[300], rmb[300] = {0}, rvb[300];
    float dga[300], dba[300], dgb[300], dbb[300];
    int fp32 = 1, fp16 = 1;
    for (int a = 0; a < DT_ACT_COUNT; a++) {
        dt_bn_desc d = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f};
        for (int j = 0; j < c; j++)
            rva[j] = rvb[j] = 1.0f, rma[j] = rmb[j] = 0.0f;
        be->bn_fwd_train(&d, x.f, gm.f, bt.f, t, sa, rma, rva, 0);
        be->act_fwd(n, a, DT_FLOAT32, t, ya);
        be->bn_fwd_train(&d, x.f, gm.f, bt.f, yb, sb, rmb, rvb, DT_BN_ACT(a));
        fp32 &= !memcmp(ya, yb, (size_t)n * 4) && !memcmp(sa, sb, DT_BN_SAVED(c) * 4) &&
                !memcmp(rma, rmb, (size_t)c * 4) && !memcmp(rva, rvb, (size_t)c * 4);
        be->bn_fwd_infer(&d, x.f, gm.f, bt.f, rma, rva, t, 0);
        be->act_fwd(n, a, DT_FLOAT32, t, ya);
        be->bn_fwd_infer(&d, x.f, gm.f, bt.f, rma, rva, yb, DT_BN_ACT(a));
        fp32 &= !memcmp(ya, yb, (size_t)n * 4);
        be->bn_fwd_train(&d, x.f, gm.f, bt.f, t, sa, rma, rva, 0); /* t: the BN output backward recomputes */
        for (int acc = 0; acc <= 1; acc++) {
            for (int64_t i = 0; i < n; i++) /* what accumulation adds to */
                dxa[i] = dxb[i] = (float)i * 1e-3f;
            for (int j = 0; j < c; j++)
                dga[j] = dgb[j] = dba[j] = dbb[j] = (float)j * 1e-2f;
            be->act_bwd(n, a, DT_FLOAT32, t, dy.f, g, 0);
            be->bn_bwd(&d, x.f, g, 0, gm.f, sa, dxa, dga, dba, acc, acc);
            be->bn_bwd(&d, x.f, dy.f, DT_BN_ACT(a), gm.f, sa, dxb, dgb, dbb, acc, acc);
            fp32 &= !memcmp(dxa, dxb, (size_t)n * 4) && !memcmp(dga, dgb, (size_t)c * 4) &&
                    !memcmp(dba, dbb, (size_t)c * 4);
        }
        /* fp16: the fp32 fused op on the widened operands, its results rounded once */
        dt_f32_to_f16_n((size_t)n, x.f, xh);
        dt_f32_to_f16_n((size_t)n, dy.f, dyh);
        float *xw = t, *dyw = g;
        dt_f16_to_f32_n((size_t)n, xh, xw);
        dt_f16_to_f32_n((size_t)n, dyh, dyw);
        be->bn_fwd_train(&d, xw, gm.f, bt.f, ya, sa, rma, rva, DT_BN_ACT(a));
        be->bn_bwd(&d, xw, dyw, DT_BN_ACT(a), gm.f, sa, dxa, dga, dba, 0, 0);
        dt_bn_desc dh = d;
        dh.xt = dh.yt = DT_FLOAT16;
        be->bn_fwd_train(&dh, xh, gm.f, bt.f, yh, sb, rmb, rvb, DT_BN_ACT(a));
        be->bn_bwd(&dh, xh, dyh, DT_BN_ACT(a), gm.f, sb, dxh, dgb, dbb, 0, 0);
        dt_f32_to_f16_n((size_t)n, ya, rh);
        fp16 &= !memcmp(rh, yh, (size_t)n * 2) && !memcmp(sa, sb, DT_BN_SAVED(c) * 4);
        dt_f32_to_f16_n((size_t)n, dxa, rh);
        fp16 &= !memcmp(rh, dxh, (size_t)n * 2) && !memcmp(dga, dgb, (size_t)c * 4) &&
                !memcmp(dba, dbb, (size_t)c * 4);
    }
    TAP_OK(fp32 && fp16,
           "bn+activation %lldx%d, every activation: forward (training, inference) and backward (accumulating or "
           "not) equal bn and act_fwd, act_bwd and bn_bwd composed, bit for bit in fp32 (%s); fp16 operands: the "
           "fp32 fused op's results rounded once (%s)",
           (long long)rows, c, fp32 ? "yes" : "no", fp16 ? "yes" : "no");
    free(ya);
    free(yb);
    free(t);
    free(g);
    free(dxa);
    free(dxb);
    free(xh);
    free(yh);
    free(dyh);
    free(dxh);
    free(rh);
    rm(&x);
    rm(&dy);
    rm(&gm);
    rm(&bt);
    rng = rng0;
}

static void check_pool(int max, int n, int h, int w, int ch, int a, int b, int cpad)
{
    pool_ctx c = {.max = max};
    int bad = max ? dt_pool_desc_set_max(&c.d, n, h, w, ch, a, b, cpad) : dt_pool_desc_set_adaptive(&c.d, n, h, w, ch, a, b);
    if (bad) {
        TAP_OK(0, "pool desc");
        return;
    }
    int64_t nx = (int64_t)n * h * w * ch, ny = (int64_t)n * c.d.oh * c.d.ow * ch;
    c.x = mk(nx);
    c.g = mk(ny);
    c.y = calloc((size_t)ny, sizeof(double));
    float *y = malloc((size_t)ny * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float));
    uint8_t *am = malloc((size_t)ny);
    double *rx = malloc((size_t)nx * sizeof(double));
    if (max) {
        be->maxpool_fwd(&c.d, c.x.f, y, am);
        be->maxpool_bwd(&c.d, c.g.f, am, dx, 0);
    } else {
        be->avgpool_fwd(&c.d, c.x.f, y);
        be->avgpool_bwd(&c.d, c.g.f, dx, 0);
    }
    pool_obj(&c);
    double ef = rel_err(y, c.y, ny);
    fd_grad(pool_obj, &c, c.x.d, nx, rx);
    double ex = rel_err(dx, rx, nx);
    if (max)
        be->maxpool_bwd(&c.d, c.g.f, am, dx, 1);
    else
        be->avgpool_bwd(&c.d, c.g.f, dx, 1);
    for (int64_t i = 0; i < nx; i++)
        rx[i] *= 2;
    double ea = rel_err(dx, rx, nx);
    if (max)
        TAP_OK(ef < FWD_TOL && ex < BWD_TOL && ea < BWD_TOL, "maxpool n%d %dx%dx%d k%d s%d p%d -> %dx%d: fwd %.1e dx %.1e accumulate %.1e",
               n, h, w, ch, a, b, cpad, c.d.oh, c.d.ow, ef, ex, ea);
    else
        TAP_OK(ef < FWD_TOL && ex < BWD_TOL && ea < BWD_TOL, "adaptive avgpool n%d %dx%dx%d -> %dx%d: fwd %.1e dx %.1e accumulate %.1e",
               n, h, w, ch, a, b, ef, ex, ea);
    rm(&c.x);
    rm(&c.g);
    free(c.y);
    free(y);
    free(dx);
    free(am);
    free(rx);
}

/* --- linear, relu, flatten, loss ---------------------------------------------------------------- */

typedef struct lin_ctx {
    int n, in, out;
    buf x, w, b, g;
    double *y;
} lin_ctx;

static double lin_obj(void *p)
{
    lin_ctx *c = p;
    for (int i = 0; i < c->n; i++)
        for (int o = 0; o < c->out; o++) {
            double s = c->b.d[o];
            for (int k = 0; k < c->in; k++)
                s += c->x.d[i * c->in + k] * c->w.d[o * c->in + k];
            c->y[i * c->out + o] = s;
        }
    return dot(c->y, c->g.d, c->g.n);
}

static void check_linear(int n, int in, int out)
{
    lin_ctx c = {.n = n, .in = in, .out = out};
    c.x = mk((int64_t)n * in);
    c.w = mk((int64_t)out * in);
    c.b = mk(out);
    c.g = mk((int64_t)n * out);
    c.y = calloc((size_t)(n * out), sizeof(double));
    float *y = malloc((size_t)(n * out) * sizeof(float)), *dx = malloc((size_t)(n * in) * sizeof(float)),
          *dw = malloc((size_t)(out * in) * sizeof(float)), *db = malloc((size_t)out * sizeof(float));
    double *rx = malloc((size_t)(n * in) * sizeof(double)), *rw = malloc((size_t)(out * in) * sizeof(double)),
           *rb = malloc((size_t)out * sizeof(double));
    be->linear_fwd(n, in, out, DT_FLOAT32, c.x.f, c.w.f, c.b.f, y);
    lin_obj(&c);
    double ef = rel_err(y, c.y, n * out);
    be->linear_bwd(n, in, out, DT_FLOAT32, c.x.f, c.w.f, c.g.f, dx, dw, db, 0, 0);
    fd_grad(lin_obj, &c, c.x.d, n * in, rx);
    fd_grad(lin_obj, &c, c.w.d, out * in, rw);
    fd_grad(lin_obj, &c, c.b.d, out, rb);
    double ex = rel_err(dx, rx, n * in), ew = rel_err(dw, rw, out * in), eb = rel_err(db, rb, out);
    TAP_OK(ef < FWD_TOL && ex < BWD_TOL && ew < BWD_TOL && eb < BWD_TOL, "linear %dx%d->%d: fwd %.1e dx %.1e dw %.1e db %.1e", n, in,
           out, ef, ex, ew, eb);
    be->linear_bwd(n, in, out, DT_FLOAT32, c.x.f, c.w.f, c.g.f, dx, dw, db, 1, 1);
    for (int i = 0; i < out; i++)
        rb[i] *= 2;
    for (int i = 0; i < n * in; i++)
        rx[i] *= 2;
    TAP_OK(rel_err(db, rb, out) < BWD_TOL && rel_err(dx, rx, n * in) < BWD_TOL, "  accumulate doubles dx and db");
    rm(&c.x);
    rm(&c.w);
    rm(&c.b);
    rm(&c.g);
    free(c.y);
    free(y);
    free(dx);
    free(dw);
    free(db);
    free(rx);
    free(rw);
    free(rb);
}

typedef struct xent_ctx {
    int n, k;
    float eps;
    buf z;
    const int32_t *labels;
} xent_ctx;

static double xent_obj(void *p)
{
    xent_ctx *c = p;
    double total = 0;
    for (int i = 0; i < c->n; i++) {
        double se = 0;
        for (int j = 0; j < c->k; j++)
            se += exp(c->z.d[i * c->k + j]);
        for (int j = 0; j < c->k; j++) {
            double q = c->eps / c->k + (j == c->labels[i] ? 1 - c->eps : 0);
            total -= q * (c->z.d[i * c->k + j] - log(se));
        }
    }
    return total / c->n;
}

/* the label's place in a row of k logits sorted by value, ties in class order (the lower class
 * first, as torch.argmax and a stable descending sort): 0 is a top-1 hit, below 5 a top-5 hit */
static int label_rank(const float *z, int k, int label)
{
    int r = 0;
    for (int j = 0; j < k; j++)
        r += z[j] > z[label] || (j < label && z[j] == z[label]);
    return r;
}

static void check_xent(float eps)
{
    static const int32_t labels[4] = {2, 0, 5, 2};
    xent_ctx c = {.n = 4, .k = 6, .eps = eps, .labels = labels};
    c.z = mk(24);
    for (int i = 0; i < 24; i++) { /* large logits: the op must subtract the maximum */
        c.z.f[i] *= 30;
        c.z.d[i] = c.z.f[i];
    }
    float dz[24];
    double rz[24];
    dt_scalars *sc = be->mem_alloc(sizeof *sc), h = {.scale_f = 1, .loss_sum = 0.5, .hits1 = 7, .hits5 = 9, .rows = 11};
    be->mem_put(sc, &h, sizeof h);
    be->xent(4, 6, DT_FLOAT32, c.z.f, labels, eps, dz, sc);
    be->mem_get(&h, sc, sizeof h);
    double loss = h.loss, ref = xent_obj(&c);
    int64_t hits1 = 0, hits5 = 0; /* the rows whose label's logit is the largest / among the 5 largest */
    int row1_hit1 = 0;
    for (int i = 0; i < 4; i++) {
        int above = label_rank(c.z.f + i * 6, 6, labels[i]);
        hits1 += above == 0;
        hits5 += above < 5;
        if (i == 1)
            row1_hit1 = above == 0;
    }
    fd_grad(xent_obj, &c, c.z.d, 24, rz);
    TAP_OK(fabs(loss - ref) / ref < 1e-6 && rel_err(dz, rz, 24) < BWD_TOL && h.loss_sum == 0.5 + loss &&
               h.hits1 == 7 + hits1 && h.hits5 == 9 + hits5 && h.rows == 15 && !h.agree[DT_AGREE_OVERFLOW],
           "cross-entropy, label smoothing %.1f: loss %.6f (ref %.6f), dlogits %.1e; added to the step scalars with "
           "%lld top-1 and %lld top-5 hits of 4",
           eps, loss, ref, rel_err(dz, rz, 24), (long long)hits1, (long long)hits5);
    /* the scaler's factor multiplies the gradient; a NaN logit makes its row a miss and the loss not finite */
    float dz2[24];
    h.scale_f = 1024.0f;
    be->mem_put(sc, &h, sizeof h);
    be->xent(4, 6, DT_FLOAT32, c.z.f, labels, eps, dz2, sc);
    int scaled = 1;
    for (int i = 0; i < 24; i++)
        scaled = scaled && dz2[i] == dz[i] * 1024.0f;
    c.z.f[6 + 3] = NAN;
    be->xent(4, 6, DT_FLOAT32, c.z.f, labels, eps, NULL, sc);
    be->mem_get(&h, sc, sizeof h);
    TAP_OK(scaled && h.nonfinite_rows == 1 && h.agree[DT_AGREE_OVERFLOW] == 1 && isnan(h.loss) &&
               h.hits1 == 7 + 3 * hits1 - row1_hit1 && h.rows == 23,
           "cross-entropy: the gradient times scale_f; a NaN logit: its row a miss, counted as not finite, the "
           "overflow flag set");
    be->mem_free(sc);
    rm(&c.z);
}

/* Tied logits are no free hits: a model whose logits are all equal (zeroed weights) used to score
 * top-1 100%, every logit being "not above" the label's. Ties rank in class order (label_rank). */
static void check_xent_ties(void)
{
    enum { N = 6, K = 8 };
    static const int32_t labels[N] = {0, 3, 5, 7, 2, 3};
    float z[N * K] = {0}; /* rows 0..3: all equal; row 4: classes 2 and 6 tie at the top; row 5: 1 and 3 do */
    z[4 * K + 2] = z[4 * K + 6] = 1.0f;
    z[5 * K + 1] = z[5 * K + 3] = 1.0f;
    void *dz = be->mem_alloc(sizeof z), *dl = be->mem_alloc(sizeof labels), *dlog = be->mem_alloc(sizeof z);
    be->mem_put(dz, z, sizeof z);
    be->mem_put(dl, labels, sizeof labels);
    dt_scalars *sc = be->mem_alloc(sizeof *sc), h = {.scale_f = 1};
    be->mem_put(sc, &h, sizeof h);
    be->xent(N, K, DT_FLOAT32, dz, dl, 0.0f, dlog, sc);
    be->mem_get(&h, sc, sizeof h);
    int64_t hits1 = 0, hits5 = 0;
    for (int i = 0; i < N; i++) {
        hits1 += label_rank(z + i * K, K, labels[i]) == 0;
        hits5 += label_rank(z + i * K, K, labels[i]) < 5;
    }
    /* top-1: row 0 (class 0 first of equals) and row 4 (2 before 6); top-5: rows 0, 1 (place 3), 4, 5
     * (place 1); rows 2 and 3 are places 5 and 7 */
    TAP_OK(hits1 == 2 && hits5 == 4 && h.hits1 == hits1 && h.hits5 == hits5 && h.rows == N,
           "cross-entropy's hits on tied logits ranked in class order: top-1 %lld (want 2), top-5 %lld (want 4) "
           "of %d rows",
           (long long)h.hits1, (long long)h.hits5, N);
    be->mem_free(sc);
    be->mem_free(dlog);
    be->mem_free(dl);
    be->mem_free(dz);
}

/* mixup/cutmix's targets (torchvision: lam on each row's label, 1 - lam on the row before's, with
 * torch's CrossEntropyLoss on probabilities: target * (1 - eps) + eps / k, loss -sum target' log p) */
typedef struct xmix_ctx {
    xent_ctx x;
    float lam, rest;
} xmix_ctx;

static double xmix_obj(void *p)
{
    xmix_ctx *c = p;
    const int n = c->x.n, k = c->x.k;
    double total = 0;
    for (int i = 0; i < n; i++) {
        const int32_t y = c->x.labels[i], y2 = c->x.labels[(i + n - 1) % n];
        double se = 0;
        for (int j = 0; j < k; j++)
            se += exp(c->x.z.d[i * k + j]);
        for (int j = 0; j < k; j++) {
            double t = (j == y ? (double)c->lam : 0) + (j == y2 ? (double)c->rest : 0);
            total -= (t * (1 - c->x.eps) + c->x.eps / k) * (c->x.z.d[i * k + j] - log(se));
        }
    }
    return total / n;
}

static void check_xent_mixed(float eps, double lambda)
{
    static const int32_t labels[5] = {2, 0, 5, 5, 1}; /* rows 3 and 2 share a label: one target */
    xmix_ctx c = {.x = {.n = 5, .k = 6, .eps = eps, .labels = labels}, .lam = (float)lambda,
                  .rest = (float)(1.0 - lambda)};
    c.x.z = mk(30);
    float dz[30];
    double rz[30];
    dt_scalars *sc = be->mem_alloc(sizeof *sc), h = {.scale_f = 1, .mixing = 1, .mix_lam = c.lam, .mix_rest = c.rest};
    be->mem_put(sc, &h, sizeof h);
    be->xent(5, 6, DT_FLOAT32, c.x.z.f, labels, eps, dz, sc);
    be->mem_get(&h, sc, sizeof h);
    double ref = xmix_obj(&c);
    int64_t hits1 = 0; /* against the mixed target's argmax (the lower class on a tie) */
    for (int i = 0; i < 5; i++) {
        int32_t y = labels[i], y2 = labels[(i + 4) % 5];
        int32_t t = c.lam > c.rest ? y : c.rest > c.lam ? y2 : (y < y2 ? y : y2);
        int above = label_rank(c.x.z.f + i * 6, 6, t);
        hits1 += above == 0;
    }
    fd_grad(xmix_obj, &c, c.x.z.d, 30, rz);
    TAP_OK(fabs(h.loss - ref) / ref < 1e-6 && rel_err(dz, rz, 30) < BWD_TOL && h.hits1 == hits1 && h.rows == 5,
           "cross-entropy on mixed targets (lambda %.2f, label smoothing %.1f): loss %.6f (ref %.6f), dlogits %.1e, "
           "%lld top-1 hits against the mixed argmax",
           lambda, eps, h.loss, ref, rel_err(dz, rz, 30), (long long)hits1);
    be->mem_free(sc);
    rm(&c.x.z);
}

static void check_small_ops(void)
{
    /* relu: forward, and backward from the output */
    buf x = mk(1000), g = mk(1000);
    float y[1000], dx[1000];
    double ry[1000], rx[1000];
    be->relu_fwd(1000, DT_FLOAT32, x.f, y);
    be->relu_bwd(1000, DT_FLOAT32, y, g.f, dx, 0);
    for (int i = 0; i < 1000; i++) {
        ry[i] = x.d[i] > 0 ? x.d[i] : 0;
        rx[i] = x.d[i] > 0 ? g.d[i] : 0;
    }
    TAP_OK(rel_err(y, ry, 1000) == 0 && rel_err(dx, rx, 1000) == 0, "relu forward and backward exact");
    be->relu_bwd(1000, DT_FLOAT32, y, g.f, dx, 1);
    for (int i = 0; i < 1000; i++)
        rx[i] *= 2;
    TAP_OK(rel_err(dx, rx, 1000) == 0, "relu accumulate");
    /* add and gradient copy */
    be->add_fwd(1000, x.f, DT_FLOAT32, g.f, DT_FLOAT32, y, DT_FLOAT32);
    int ok = 1;
    for (int i = 0; i < 1000; i++)
        ok = ok && y[i] == x.f[i] + g.f[i];
    be->copy_grad(1000, x.f, DT_FLOAT32, y, DT_FLOAT32, 0);
    be->copy_grad(1000, x.f, DT_FLOAT32, y, DT_FLOAT32, 1);
    for (int i = 0; i < 1000; i++)
        ok = ok && y[i] == x.f[i] * 2;
    TAP_OK(ok, "add, gradient copy and accumulate");
    /* flatten NHWC -> NCHW order and back */
    float f[2 * 2 * 3 * 5], back[2 * 2 * 3 * 5];
    be->flatten_fwd(2, 2, 3, 5, DT_FLOAT32, x.f, f);
    ok = 1;
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < 3; w++)
                for (int c = 0; c < 5; c++)
                    ok = ok && f[n * 30 + c * 6 + h * 3 + w] == x.f[n * 30 + (h * 3 + w) * 5 + c];
    be->flatten_bwd(2, 2, 3, 5, DT_FLOAT32, f, back, 0);
    ok = ok && memcmp(back, x.f, sizeof back) == 0;
    TAP_OK(ok, "flatten gives PyTorch's C,H,W order; its backward inverts it");
    rm(&x);
    rm(&g);
}

static void check_dropout(void)
{
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *y2 = malloc(N * sizeof(float)),
          *dx = malloc(N * sizeof(float));
    uint8_t *mask = malloc(N), *mask2 = malloc(N);
    for (int i = 0; i < N; i++)
        x[i] = 1.0f + (float)(i % 7);
    be->dropout_fwd(N, 0.3f, 1234, 0, NULL, x, DT_FLOAT32, y, DT_FLOAT32, mask);
    int kept = 0, ok = 1;
    for (int i = 0; i < N; i++) {
        kept += mask[i];
        ok = ok && (mask[i] ? fabsf(y[i] - x[i] / 0.7f) < 1e-6f * y[i] : y[i] == 0.0f);
    }
    TAP_OK(ok && fabs(kept / (double)N - 0.7) < 0.005, "dropout p=0.3 keeps %.4f, kept values scaled by 1/0.7",
           kept / (double)N);
    dt_cpu_set_threads(1);
    be->dropout_fwd(N, 0.3f, 1234, 0, NULL, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    dt_cpu_set_threads(2);
    TAP_OK(memcmp(mask, mask2, N) == 0 && memcmp(y, y2, N * sizeof(float)) == 0, "same seed, same mask on 1 and 2 threads");
    be->dropout_fwd(N, 0.3f, 1235, 0, NULL, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    TAP_OK(memcmp(mask, mask2, N) != 0, "another seed, another mask");
    /* seeded by the scalars' model step as the op runs: hash(seed, model_step * 1024 + salt) */
    dt_scalars sc;
    memset(&sc, 0, sizeof sc);
    sc.model_step = 41;
    be->dropout_fwd(N, 0.3f, 1234, 5, &sc, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    be->dropout_fwd(N, 0.3f, dt_hash64(1234, 41 * 1024 + 5), 0, NULL, x, DT_FLOAT32, y, DT_FLOAT32, mask);
    ok = memcmp(mask, mask2, N) == 0 && memcmp(y, y2, N * sizeof(float)) == 0;
    sc.model_step = 42; /* the next step (a graph's next launch reads it): another mask */
    be->dropout_fwd(N, 0.3f, 1234, 5, &sc, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    TAP_OK(ok && memcmp(mask, mask2, N) != 0,
           "with the scalars, the mask is hash(seed, model_step * 1024 + salt)'s, read as the op runs: a new step, a new mask");
    be->dropout_fwd(N, 0.3f, 1234, 0, NULL, x, DT_FLOAT32, y, DT_FLOAT32, mask); /* the mask used below */
    be->dropout_bwd(N, 0.3f, mask, x, DT_FLOAT32, dx, DT_FLOAT32, 0);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok = ok && dx[i] == (mask[i] ? x[i] * (1.0f / 0.7f) : 0.0f);
    TAP_OK(ok, "dropout backward uses the mask and the scale");
    free(x);
    free(y);
    free(y2);
    free(dx);
    free(mask);
    free(mask2);
}

/* --- activations (act_fwd, act_bwd) ------------------------------------------------------------- */

static const char *const ACT_NAME[DT_ACT_COUNT] = {"relu6", "hardsigmoid", "hardswish", "sigmoid", "silu", "gelu"};

static double relu6_ref(double x)
{
    return x < 0 ? 0 : x > 6 ? 6 : x; /* NaN passes (both comparisons false), as hardtanh's */
}

/* PyTorch's definitions, in double */
static double act_ref(int act, double x)
{
    switch (act) {
    case DT_ACT_RELU6: return relu6_ref(x);
    case DT_ACT_HARDSIGMOID: return relu6_ref(x + 3) / 6;
    case DT_ACT_HARDSWISH: return x * relu6_ref(x + 3) / 6;
    case DT_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case DT_ACT_SILU: return x / (1 + exp(-x));
    default: return x / 2 * (1 + erf(x / sqrt(2.0))); /* gelu */
    }
}

/* f'(x) in double, with PyTorch's values at the kinks (its CPU backward kernels): relu6 (hardtanh's)
 * 0 at 0 and 6; hardsigmoid 0 at -3 and 3; hardswish 0 below -3, x/3 + 1/2 from -3 to 3 inclusive,
 * 1 above. So hardswish' is -1/2 at exactly -3, not 0 (PyTorch tests x < -3, in its scalar and its
 * vector code), and 3/2 at exactly 3 (its scalar code's x <= 3; backend.h: "up to 3"). */
static double act_dref(int act, double x)
{
    const double s = 1 / (1 + exp(-x));
    switch (act) {
    case DT_ACT_RELU6: return x > 0 && x < 6 ? 1 : 0;
    case DT_ACT_HARDSIGMOID: return x > -3 && x < 3 ? 1.0 / 6 : 0;
    case DT_ACT_HARDSWISH: return x < -3 ? 0 : x <= 3 ? x / 3 + 0.5 : 1;
    case DT_ACT_SIGMOID: return s * (1 - s);
    case DT_ACT_SILU: return s * (1 + x * (1 - s));
    default: return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-x * x / 2) / sqrt(2 * M_PI); /* gelu: cdf + x pdf */
    }
}

/* |got - want| in units of a bound of a few fp32 roundings: 4 eps of |want| plus what an fp32 formula
 * loses where it cancels (slack: gelu's 1 + erf(x/sqrt 2) below 0 loses a few eps of |x|/2), plus
 * 1e-36 for results under fp32's normal range (sigmoid(-90) is 0 in fp32); NaN must meet NaN */
static double act_miss(float got, double want, double slack)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0 : INFINITY;
    return fabs(got - want) / (4 * FLT_EPSILON * (fabs(want) + slack) + 1e-36);
}

static double act_slack(int act, double x)
{
    return act == DT_ACT_GELU ? fabs(x) / 2 : 0;
}

/* backward's bound: the sigmoid's 1 - s cancels to an eps of dy, silu's x*(1 - s) to an eps of x*dy */
static double act_dslack(double x, double dy)
{
    return fabs(dy) * (1 + fabs(x));
}

/* One activation on n = 3001 values in [-8, 8] (two tiles and a part), kept 1e-3 away from the kinks
 * (0, 6, -3, 3) so central differences hold: forward per element against the double reference;
 * backward against f' in double and against central differences of the reference (which also checks
 * f'); then the kinks, NaN and large |x|; accumulate, in place, n = 1 and nothing written past n. */
static void check_act(int act)
{
    enum { N = 3001 };
    static const double kinks[4] = {-3, 0, 3, 6};
    float x[N], dy[N], y[N + 1], dx[N + 1], base[N], t[N + 1];
    double worst_f = 0, worst_b = 0, num_b = 0, num_fd = 0, num_dfd = 0, den = 0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(dt_rng_uniform(&rng) * 16 - 8);
        for (int k = 0; k < 4; k++)
            if (fabs(x[i] - kinks[k]) < 1e-3)
                x[i] = (float)(kinks[k] + (x[i] < kinks[k] ? -2e-3 : 2e-3));
        dy[i] = (float)(dt_rng_uniform(&rng) * 2 - 1);
        base[i] = (float)(dt_rng_uniform(&rng) * 2 - 1);
    }
    y[N] = dx[N] = 12345.0f; /* must stay */
    be->act_fwd(N, act, DT_FLOAT32, x, y);
    be->act_bwd(N, act, DT_FLOAT32, x, dy, dx, 0);
    for (int i = 0; i < N; i++) {
        const double xd = x[i], want = dy[i] * act_dref(act, xd);
        const double fd = dy[i] * (act_ref(act, xd + FD_H) - act_ref(act, xd - FD_H)) / (2 * FD_H);
        worst_f = fmax(worst_f, act_miss(y[i], act_ref(act, xd), act_slack(act, xd)));
        worst_b = fmax(worst_b, act_miss(dx[i], want, act_dslack(xd, dy[i])));
        num_b += (dx[i] - want) * (dx[i] - want);
        num_fd += (dx[i] - fd) * (dx[i] - fd);
        num_dfd += (want - fd) * (want - fd);
        den += want * want;
    }
    const double eb = sqrt(num_b / den), efd = sqrt(num_fd / den), edfd = sqrt(num_dfd / den);
    TAP_OK(worst_f <= 1 && worst_b <= 1 && eb < 1e-6 && efd < 1e-6 && edfd < 1e-8,
           "%s n%d: fwd within a few fp32 roundings of PyTorch's definition in double (worst %.2f of the bound); bwd "
           "%.1e from f' in double (worst element %.2f of the bound), %.1e from central differences (f' itself %.1e)",
           ACT_NAME[act], N, worst_f, eb, worst_b, efd, edfd);

    /* PyTorch's values at the kinks, NaN, large |x| (forward finite there, backward 0 or dy) */
    const float sp[] = {0.0f, -0.0f, 6.0f, -3.0f, 3.0f, nextafterf(0, 1), nextafterf(6, 0), nextafterf(6, 7),
                        nextafterf(-3, -4), nextafterf(-3, 0), nextafterf(3, 0), nextafterf(3, 4), 20, -20, 90, -90,
                        1e30f, -1e30f, NAN};
    enum { NS = sizeof sp / sizeof sp[0] };
    float sy[NS], sdy[NS], sdx[NS];
    int ok = 1;
    for (int i = 0; i < NS; i++)
        sdy[i] = 0.75f;
    be->act_fwd(NS, act, DT_FLOAT32, sp, sy);
    be->act_bwd(NS, act, DT_FLOAT32, sp, sdy, sdx, 0);
    for (int i = 0; i < NS; i++) {
        const double want = act_ref(act, sp[i]), dwant = 0.75 * act_dref(act, sp[i]);
        int good = act_miss(sy[i], want, act_slack(act, sp[i])) <= 1 && (isnan(sp[i]) || isfinite(sy[i]));
        if (!isnan(sp[i])) /* backward of NaN: not part of the contract */
            good &= isfinite(sdx[i]) && act_miss(sdx[i], dwant, 0.75) <= 1;
        if (!good)
            tap_diag("%s at %.9g: y %.9g (want %.9g), dx %.9g (want %.9g for dy 0.75)", ACT_NAME[act], sp[i], sy[i],
                     want, sdx[i], dwant);
        ok &= good;
    }
    /* the conventions spelled out, exactly (dy 0.75) */
    if (act == DT_ACT_RELU6)
        ok &= sdx[0] == 0 && sdx[1] == 0 && sdx[2] == 0 && sdx[5] == 0.75f && sdx[6] == 0.75f && sdx[7] == 0;
    if (act == DT_ACT_HARDSIGMOID)
        ok &= sdx[3] == 0 && sdx[4] == 0 && sdx[8] == 0 && sdx[9] == 0.75f * (1.0f / 6.0f) && sy[3] == 0 && sy[4] == 1;
    if (act == DT_ACT_HARDSWISH)
        ok &= sdx[3] == -0.375f && sdx[8] == 0 && sdx[4] == 1.125f && sdx[11] == 0.75f && sy[3] == 0 && sy[4] == 3;
    static const char *const conv[DT_ACT_COUNT] = {"0 at 0 and at 6", "0 at -3 and at 3",
                                                   "-dy/2 at -3, 3dy/2 at 3, dy above", "smooth", "smooth", "smooth"};
    TAP_OK(ok, "%s: backward at 0, 6, -3, 3 and beside them as PyTorch's (%s); NaN through forward; +-20, +-90, "
               "+-1e30 finite, at their limits both ways", ACT_NAME[act], conv[act]);

    /* accumulate: the fp32 sum of what was there and the gradient; in place; n = 1 */
    memcpy(t, base, sizeof base);
    be->act_bwd(N, act, DT_FLOAT32, x, dy, t, 1);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= t[i] == base[i] + dx[i];
    memcpy(t, x, sizeof x);
    be->act_fwd(N, act, DT_FLOAT32, t, t);
    ok &= !memcmp(t, y, sizeof x);
    t[1] = 12345.0f;
    be->act_fwd(1, act, DT_FLOAT32, x, t);
    ok &= !memcmp(t, y, sizeof(float)) && t[1] == 12345.0f;
    be->act_bwd(1, act, DT_FLOAT32, x, dy, t, 0);
    ok &= !memcmp(t, dx, sizeof(float)) && t[1] == 12345.0f && y[N] == 12345.0f && dx[N] == 12345.0f;
    TAP_OK(ok, "%s: accumulate adds into dx (the fp32 sum, bit for bit); forward in place (y = x) and n = 1 give the "
               "same bits; nothing written past n", ACT_NAME[act]);
}

/* --- squeeze-and-excitation's scale (chanmul_fwd, chanmul_bwd) --------------------------------- */

typedef struct chanmul_ctx {
    int n, c;
    int64_t hw;
    buf x, s, g;
} chanmul_ctx;

static double chanmul_obj(void *p)
{
    chanmul_ctx *m = p;
    double t = 0;
    for (int64_t i = 0; i < m->x.n; i++)
        t += m->x.d[i] * m->s.d[i / (m->hw * m->c) * m->c + i % m->c] * m->g.d[i];
    return t;
}

/* y = x * s[b, ch] (one fp32 product: the double product rounded, exactly); dx = dy * s likewise; ds =
 * the sum of dy * x over the image's positions against the double sum (and central differences when
 * fd); dx or ds NULL; accumulate_dx and accumulate_ds add (the fp32 sums); ds the same bits on 1 and 2
 * threads. */
static void check_chanmul(int n, int64_t hw, int c, int fd)
{
    chanmul_ctx m = {.n = n, .c = c, .hw = hw};
    const int64_t nx = n * hw * c, ns = (int64_t)n * c;
    m.x = mk(nx);
    m.s = mk(ns);
    m.g = mk(nx);
    float *y = malloc((size_t)nx * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float)),
          *dx2 = malloc((size_t)nx * sizeof(float)), *ds = malloc((size_t)ns * sizeof(float)),
          *ds2 = malloc((size_t)ns * sizeof(float));
    double *rs = calloc((size_t)ns, sizeof(double)), *rx = malloc((size_t)nx * sizeof(double));
    be->chanmul_fwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, y, DT_FLOAT32);
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, dx, ds, 0, 0);
    int exact = 1;
    for (int64_t i = 0; i < nx; i++) {
        const int64_t j = i / (hw * c) * c + i % c;
        exact &= y[i] == (float)(m.x.d[i] * m.s.d[j]) && dx[i] == (float)(m.g.d[i] * m.s.d[j]);
        rs[j] += m.g.d[i] * m.x.d[i];
    }
    const double es = rel_err(ds, rs, ns);
    double fs = 0, fx = 0;
    if (fd) {
        fd_grad(chanmul_obj, &m, m.s.d, ns, rs);
        fd_grad(chanmul_obj, &m, m.x.d, nx, rx);
        fs = rel_err(ds, rs, ns);
        fx = rel_err(dx, rx, nx);
    }
    TAP_OK(exact && es < 1e-6 && fs < BWD_TOL && fx < BWD_TOL,
           "chanmul n%d hw%lld c%d: y and dx the double products rounded, bit for bit; ds %.1e from the double sum%s",
           n, (long long)hw, c, es, fd ? " (central differences: ds and dx within BWD_TOL)" : "");
    /* dx or ds NULL; accumulate */
    int ok = 1;
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, NULL, ds2, 0, 0);
    ok &= !memcmp(ds, ds2, (size_t)ns * sizeof(float));
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, dx2, NULL, 0, 0);
    ok &= !memcmp(dx, dx2, (size_t)nx * sizeof(float));
    memcpy(dx2, m.g.f, (size_t)nx * sizeof(float)); /* something to add to */
    memcpy(ds2, m.s.f, (size_t)ns * sizeof(float));
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, dx2, ds2, 1, 1);
    for (int64_t i = 0; i < nx; i++)
        ok &= dx2[i] == m.g.f[i] + dx[i];
    for (int64_t j = 0; j < ns; j++)
        ok &= ds2[j] == m.s.f[j] + ds[j];
    memcpy(dx2, m.g.f, (size_t)nx * sizeof(float)); /* one flag at a time */
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, dx2, ds2, 1, 0);
    for (int64_t i = 0; i < nx; i++)
        ok &= dx2[i] == m.g.f[i] + dx[i];
    ok &= !memcmp(ds, ds2, (size_t)ns * sizeof(float));
    memcpy(ds2, m.s.f, (size_t)ns * sizeof(float));
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, dx2, ds2, 0, 1);
    ok &= !memcmp(dx, dx2, (size_t)nx * sizeof(float));
    for (int64_t j = 0; j < ns; j++)
        ok &= ds2[j] == m.s.f[j] + ds[j];
    dt_cpu_set_threads(1);
    be->chanmul_bwd(n, hw, c, m.x.f, DT_FLOAT32, m.s.f, DT_FLOAT32, m.g.f, DT_FLOAT32, NULL, ds2, 0, 0);
    dt_cpu_set_threads(2);
    ok &= !memcmp(ds, ds2, (size_t)ns * sizeof(float));
    TAP_OK(ok, "  dx NULL or ds NULL leaves the other the same; accumulate_dx and accumulate_ds add (fp32 sums, "
               "together or alone); ds the same bits on 1 and 2 threads");
    rm(&m.x);
    rm(&m.s);
    rm(&m.g);
    free(y);
    free(dx);
    free(dx2);
    free(ds);
    free(ds2);
    free(rs);
    free(rx);
}

/* --- stochastic depth (sdepth_fwd, sdepth_bwd) -------------------------------------------------- */

/* Image b kept when dropout_fwd keeps element b (the same seed, salt and scalars); kept images times
 * 1/(1-p) in fp32, dropped ones zero; the share kept near 1-p; p = 0 keeps everything as it is;
 * backward from the mask with the same scale; accumulate adds. */
static void check_sdepth(void)
{
    enum { NI = 20000, PER = 3, NE_ = NI * PER };
    const float p = 0.2f, scale = 1.0f / (1.0f - p);
    float *x = malloc(NE_ * sizeof(float)), *y = malloc(NE_ * sizeof(float)), *y2 = malloc(NE_ * sizeof(float)),
          *dx = malloc(NE_ * sizeof(float)), *yd = malloc(NI * sizeof(float));
    uint8_t *mask = malloc(NI), *mask2 = malloc(NI), *md = malloc(NI);
    for (int i = 0; i < NE_; i++)
        x[i] = (float)(dt_rng_uniform(&rng) * 2 - 1);
    be->sdepth_fwd(NI, PER, p, 1234, 0, NULL, x, DT_FLOAT32, y, DT_FLOAT32, mask);
    be->dropout_fwd(NI, p, 1234, 0, NULL, x, DT_FLOAT32, yd, DT_FLOAT32, md);
    int ok = !memcmp(mask, md, NI);
    dt_scalars sc;
    memset(&sc, 0, sizeof sc);
    sc.model_step = 41;
    be->sdepth_fwd(NI, PER, p, 1234, 5, &sc, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    be->dropout_fwd(NI, p, 1234, 5, &sc, x, DT_FLOAT32, yd, DT_FLOAT32, md);
    ok &= !memcmp(mask2, md, NI) && memcmp(mask, mask2, NI) != 0;
    TAP_OK(ok, "sdepth: image b's mask is dropout_fwd's for element b, with the seed alone and seeded by the "
               "scalars' model step (another step, another mask)");
    int kept = 0, vals = 1;
    for (int b = 0; b < NI; b++) {
        kept += mask[b];
        for (int j = 0; j < PER; j++)
            vals &= y[b * PER + j] == (mask[b] ? x[b * PER + j] * scale : 0.0f);
    }
    const double bound = 5 * sqrt(NI * p * (1 - p)) / NI;
    TAP_OK(vals && fabs(kept / (double)NI - (1 - p)) < bound,
           "sdepth p=0.2, %d images of %d: keeps %.4f (1-p within %.4f: five binomial deviations), kept images times "
           "1/(1-p) in fp32 exactly, dropped images zero",
           NI, PER, kept / (double)NI, bound);
    be->sdepth_fwd(NI, PER, 0.0f, 1234, 0, NULL, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    ok = !memcmp(x, y2, NE_ * sizeof(float));
    for (int b = 0; b < NI; b++)
        ok &= mask2[b] == 1;
    dt_cpu_set_threads(1);
    be->sdepth_fwd(NI, PER, p, 1234, 0, NULL, x, DT_FLOAT32, y2, DT_FLOAT32, mask2);
    dt_cpu_set_threads(2);
    ok &= !memcmp(mask, mask2, NI) && !memcmp(y, y2, NE_ * sizeof(float));
    TAP_OK(ok, "sdepth p=0 keeps every image with scale 1 (y = x bit for bit); the same mask and y on 1 and 2 threads");
    be->sdepth_bwd(NI, PER, p, mask, x, DT_FLOAT32, dx, DT_FLOAT32, 0);
    ok = 1;
    for (int i = 0; i < NE_; i++)
        ok &= dx[i] == (mask[i / PER] ? x[i] * scale : 0.0f);
    memcpy(y2, y, NE_ * sizeof(float));
    be->sdepth_bwd(NI, PER, p, mask, x, DT_FLOAT32, y2, DT_FLOAT32, 1);
    for (int i = 0; i < NE_; i++)
        ok &= y2[i] == y[i] + dx[i];
    TAP_OK(ok, "sdepth backward: dy times 1/(1-p) on kept images, zero on dropped ones; accumulate adds (fp32 sums)");
    free(x);
    free(y);
    free(y2);
    free(dx);
    free(yd);
    free(mask);
    free(mask2);
    free(md);
}

static void check_sgd(void)
{
    static const struct { float mom, damp, wd; int nest; } cfg[] = {
        {0, 0, 0, 0}, {0.9f, 0, 1e-4f, 0}, {0.9f, 0, 5e-4f, 1}, {0.9f, 0.1f, 1e-4f, 0}, {0, 0, 1e-2f, 0}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        float p[64], g[64], buf_[64];
        double rp[64], rbuf[64];
        for (int i = 0; i < 64; i++) {
            rp[i] = p[i] = (float)(dt_rng_uniform(&rng) - 0.5);
            g[i] = (float)(dt_rng_uniform(&rng) - 0.5);
        }
        double err = 0;
        for (int step = 0; step < 3; step++) { /* the first step starts the momentum buffer */
            dt_scalars sc = {.lr = 0.1f, .inv_scale = 1.0f, .sgd_steps = step};
            be->sgd(64, p, DT_FLOAT32, g, DT_FLOAT32, buf_, cfg[k].mom, cfg[k].damp, cfg[k].wd, cfg[k].nest, &sc);
            for (int i = 0; i < 64; i++) {
                double d = g[i] + cfg[k].wd * rp[i];
                if (cfg[k].mom != 0) {
                    rbuf[i] = step == 0 ? d : cfg[k].mom * rbuf[i] + (1 - cfg[k].damp) * d;
                    d = cfg[k].nest ? d + cfg[k].mom * rbuf[i] : rbuf[i];
                }
                rp[i] -= 0.1 * d;
            }
        }
        err = rel_err(p, rp, 64);
        /* a skipped step (the overflow agreed, or the run diverged) changes nothing */
        float p0[64], b0[64];
        memcpy(p0, p, sizeof p);
        memcpy(b0, buf_, sizeof buf_);
        dt_scalars over = {.lr = 0.1f, .inv_scale = 1.0f, .sgd_steps = 3, .agree = {1, 0}};
        be->sgd(64, p, DT_FLOAT32, g, DT_FLOAT32, buf_, cfg[k].mom, cfg[k].damp, cfg[k].wd, cfg[k].nest, &over);
        dt_scalars gone = {.lr = 0.1f, .inv_scale = 1.0f, .sgd_steps = 3, .diverged = 1};
        be->sgd(64, p, DT_FLOAT32, g, DT_FLOAT32, buf_, cfg[k].mom, cfg[k].damp, cfg[k].wd, cfg[k].nest, &gone);
        int kept = !memcmp(p0, p, sizeof p) && (cfg[k].mom == 0 || !memcmp(b0, buf_, sizeof buf_));
        TAP_OK(err < 1e-6 && kept,
               "sgd momentum %.1f dampening %.1f wd %g nesterov %d: 3 steps, error %.1e; skipped on an overflow or "
               "divergence", cfg[k].mom, cfg[k].damp, cfg[k].wd, cfg[k].nest, err);
    }
}

/* Clipping (torch.nn.utils.clip_grad_norm_ after GradScaler's unscale_): grad_sumsq adds the
 * unscaled gradients' squares to the scalars, the same bits on 1 and 2 threads and across calls
 * (two tensors' sums add up); sgd with clip_norm multiplies each unscaled gradient by
 * min(1, max_norm / (norm + 1e-6)), rounded after the unscale as torch rounds it; a norm below
 * clip_norm clips nothing; step_end clears the sum. */
static void check_clip(void)
{
    enum { N = 300001 };
    float *g = malloc(N * sizeof(float)), *p = malloc(N * sizeof(float)), *q = malloc(N * sizeof(float));
    double ref = 0;
    for (int i = 0; i < N; i++) {
        g[i] = (float)(dt_rng_uniform(&rng) - 0.5) * 64.0f; /* scaled by 64: inv_scale 1/64 below */
        float u = g[i] * (1.0f / 64.0f);
        ref += (double)u * u;
        p[i] = q[i] = (float)(dt_rng_uniform(&rng) - 0.5);
    }
    dt_scalars s1 = {.lr = 0.1f, .inv_scale = 1.0f / 64.0f}, s2 = s1, s3 = s1;
    be->grad_sumsq(N, DT_FLOAT32, g, &s1);
    dt_cpu_set_threads(1);
    be->grad_sumsq(N, DT_FLOAT32, g, &s2);
    dt_cpu_set_threads(2);
    be->grad_sumsq(1000, DT_FLOAT32, g, &s3); /* two calls: the sum of both */
    be->grad_sumsq(N - 1000, DT_FLOAT32, g + 1000, &s3);
    TAP_OK(fabs(s1.grad_sumsq - ref) <= 1e-12 * ref && !memcmp(&s1.grad_sumsq, &s2.grad_sumsq, sizeof(double)) &&
               fabs(s3.grad_sumsq - ref) <= 1e-12 * ref,
           "grad_sumsq: %.17g (reference %.17g), the same bits on 1 and 2 threads, two calls add", s1.grad_sumsq, ref);
    const double norm = sqrt(ref);
    s1.clip_norm = (float)(norm / 4); /* clips by about 1/4 */
    be->sgd(N, p, DT_FLOAT32, g, DT_FLOAT32, NULL, 0, 0, 0, 0, &s1);
    const float coef = (float)(norm / 4) / ((float)sqrt(s1.grad_sumsq) + 1e-6f);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        float want = q[i] - 0.1f * ((g[i] * (1.0f / 64.0f)) * coef);
        ok &= p[i] == want;
    }
    s2.clip_norm = (float)(norm * 2); /* above the norm: no clipping */
    memcpy(p, q, N * sizeof(float));
    be->sgd(N, p, DT_FLOAT32, g, DT_FLOAT32, NULL, 0, 0, 0, 0, &s2);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= p[i] == q[i] - 0.1f * (g[i] * (1.0f / 64.0f));
    be->step_end(&s2);
    TAP_OK(ok && coef < 0.3f && same && s2.grad_sumsq == 0,
           "sgd clipped to a quarter of the norm: every update is the unscaled gradient times %.6f, bit for bit; "
           "above the norm nothing is clipped; step_end clears the sum", coef);
    free(g);
    free(p);
    free(q);
}

/* The planning ops (nn/backend.h, "Planning"): the CPU ops keep their temporaries on the stack, so
 * every *_scratch is 0 whatever the shape, reserve_scratch has nothing to do, and a tensor may hold
 * any number of elements. */
/* BN's sums over rows on 4 threads: each thread sums its share, and the shares must be added in
 * thread order, not in the order the threads finish (an OpenMP reduction clause's merge). The rows
 * are chosen so that the order shows: thread 1's share of +1e19 per row, thread 2's of 1.5, thread
 * 3's of -1e19, so that adding thread 2's share before or after the others gives another mean.
 * The same call repeated 40 times must give the same y, saved state, dx, dgamma and dbeta. */
static void check_bn_thread_order(void)
{
    enum { T = 4, ROWS = T * 64, C = 3 }; /* 64 rows per thread: 4 row blocks each */
    float *x = malloc(sizeof(float) * ROWS * C), *dy = malloc(sizeof(float) * ROWS * C);
    float g[C] = {1, 0.5f, 2}, b[C] = {0, 1, -1};
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < C; j++) {
            const int part = r / (ROWS / T);
            x[r * C + j] = part == 1 ? 1e19f : part == 2 ? 1.5f + (float)j : part == 3 ? -1e19f : 0.0f;
            dy[r * C + j] = part == 1 ? 3e18f : part == 2 ? 0.25f : part == 3 ? -3e18f : 0.0f;
        }
    dt_bn_desc d = {.rows = ROWS, .c = C, .eps = 1e-5f, .momentum = 0.1f};
    float y0[ROWS * C], y1[ROWS * C], dx0[ROWS * C], dx1[ROWS * C], s0[DT_BN_SAVED(C)], s1[DT_BN_SAVED(C)];
    float p0[2 * C], p1[2 * C], rm[C], rv[C];
    dt_cpu_set_threads(T);
    int same = 1, runs = 0;
    for (int k = 0; k < 40; k++, runs++) {
        for (int j = 0; j < C; j++)
            rm[j] = 0, rv[j] = 1;
        float *y = k ? y1 : y0, *dx = k ? dx1 : dx0, *sv = k ? s1 : s0, *pp = k ? p1 : p0;
        be->bn_fwd_train(&d, x, g, b, y, sv, rm, rv, 0);
        be->bn_bwd(&d, x, dy, 0, g, sv, dx, pp, pp + C, 0, 0);
        if (k && (memcmp(y0, y1, sizeof y0) || memcmp(s0, s1, sizeof s0) || memcmp(dx0, dx1, sizeof dx0) ||
                  memcmp(p0, p1, sizeof p0))) {
            same = 0;
            break;
        }
    }
    dt_cpu_set_threads(2);
    TAP_OK(same, "bn on %d threads, rows whose sums depend on the order of the threads' shares: y, saved state, dx, "
           "dgamma and dbeta the same bits in %d calls%s", T, runs + !same, same ? "" : " (the last differs)");
    free(x);
    free(dy);
}

static void check_planning_ops(void)
{
    dt_bn_desc bd = {.rows = 1000003, .c = 300, .eps = 1e-5f, .momentum = 0.1f};
    size_t total = be->bn_scratch(&bd) + be->linear_scratch(256, 2048, 1000, DT_FLOAT32) + be->xent_scratch(256, 1000) +
                   be->normalize_scratch((int64_t)256 * 224 * 224 * 3);
    TAP_OK(total == 0, "bn_scratch, linear_scratch, xent_scratch, normalize_scratch: 0 bytes on the CPU (%zu)", total);
    TAP_OK(be->reserve_scratch(0) == 0 && be->reserve_scratch((size_t)1 << 20) == 0, "reserve_scratch: DT_OK");
    TAP_OK(be->max_tensor_elems == INT64_MAX, "max_tensor_elems: no limit");
}

int main(void)
{
    dt_rng_seed(&rng, 2024, 1);
    dt_cpu_set_threads(2);
    const dt_backend *backends[2] = {&dt_backend_cpu_ref, &dt_backend_cpu};
    for (int b = 0; b < 2; b++) {
        be = backends[b];
        tap_diag("backend %s", be->name);
        check_conv(2, 5, 5, 3, 4, 3, 1, 1, 1, 1, 1);  /* 3x3, bias */
        check_conv(2, 7, 6, 4, 6, 3, 2, 1, 1, 1, 0);  /* stride 2, odd, not square */
        check_conv(1, 6, 6, 4, 4, 3, 1, 2, 2, 1, 1);  /* dilation 2 */
        check_conv(2, 5, 5, 4, 6, 3, 1, 1, 1, 2, 1);  /* groups 2 */
        check_conv(1, 5, 5, 4, 4, 3, 1, 1, 1, 4, 0);  /* depthwise */
        check_conv(2, 4, 4, 6, 5, 1, 1, 0, 1, 1, 0);  /* pointwise: no columns */
        check_conv(2, 4, 4, 6, 4, 1, 1, 0, 1, 2, 0);  /* pointwise with groups */
        check_conv(2, 5, 5, 4, 4, 1, 2, 0, 1, 1, 0);  /* 1x1 stride 2: the downsample */
        check_conv(2, 6, 6, 4, 8, 1, 2, 0, 1, 1, 0);  /* the same on an even size: the last row and column unused */
        check_conv(2, 8, 8, 4, 4, 3, 2, 1, 1, 1, 0);  /* 3x3 stride 2 on an even size */
        check_conv(2, 8, 8, 32, 64, 1, 2, 0, 1, 1, 0); /* wide enough for the blocked (JIT) kernels */
        check_conv(1, 8, 8, 32, 32, 3, 1, 1, 1, 1, 1);
        check_conv(1, 8, 8, 32, 64, 3, 2, 1, 1, 1, 0);
        check_conv(1, 9, 9, 3, 2, 7, 2, 3, 1, 1, 0);  /* the 7x7 stem */
        check_conv(1, 7, 7, 2, 3, 5, 3, 0, 1, 1, 1);  /* 5x5 stride 3, no padding */
        check_conv(1, 3, 3, 2, 2, 3, 1, 0, 1, 1, 0);  /* output 1x1 */
        check_conv_chunked();
        check_conv_sliced();
        if (be == &dt_backend_cpu) { /* again on oneDNN's blocked layouts (auto picks them on AVX2 only) */
            dt_conv_desc bd;
            dt_conv_desc_set(&bd, 2, 8, 8, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
            dt_cpu_set_conv_layout(DT_CONV_LAYOUT_NHWC);
            int on_nhwc = dt_cpu_conv_blocked(&bd);
            dt_cpu_set_conv_layout(DT_CONV_LAYOUT_BLOCKED);
            TAP_OK(!on_nhwc && dt_cpu_conv_blocked(&bd) == with_dnnl,
                   "DT_CONV_LAYOUT_BLOCKED puts a 3x3 convolution of 32 channels on blocked activations, NHWC does not");
            tap_diag("fp32 convolutions on blocked activations (DT_CONV_LAYOUT=blocked)");
            check_conv_layouts(1, 8, 8, 32, 32, 3, 1, 1, 1);
            check_conv_layouts(1, 8, 8, 32, 64, 3, 2, 1, 0);
            check_conv(2, 7, 6, 8, 16, 3, 2, 1, 2, 1, 1); /* dilated, odd, not square */
            check_conv_sliced();
            check_conv_blocked_sliced();
            dt_cpu_set_conv_layout(DT_CONV_LAYOUT_AUTO);
        }
        check_bn(18, 5, 0);
        check_bn(4, 300, 0); /* more channels than one block */
        check_bn(3, 3, 0); /* (2 rows would be ill-conditioned: the output is +-1 whatever x is) */
        check_bn(18, 5, 1); /* fused with the ReLU after it */
        check_bn(4, 300, 1);
        check_bn_add_relu(18, 5);
        check_bn_add_relu(40, 300);
        check_bn_act(18, 5);
        check_bn_act(40, 300);
        check_bn_thread_order();
        check_pool(1, 2, 7, 7, 3, 3, 2, 1); /* resnet's max pool */
        check_pool(1, 1, 6, 6, 2, 2, 2, 0); /* vgg's */
        check_pool(1, 1, 7, 5, 2, 3, 2, 0); /* alexnet's, odd */
        check_pool(0, 2, 5, 7, 3, 3, 2, 0);    /* adaptive, uneven windows */
        check_pool(0, 1, 7, 7, 2, 1, 1, 0);    /* global */
        check_pool(0, 1, 1, 1, 3, 6, 6, 0);    /* 1x1 up to 6x6 (alexnet on small inputs) */
        check_pool(0, 1, 4, 4, 2, 4, 4, 0);    /* identity */
        check_linear(3, 7, 5);
        check_linear(1, 1, 1);
        check_xent(0.0f);
        check_xent(0.1f);
        check_xent_ties();
        check_xent_mixed(0.0f, 0.3);
        check_xent_mixed(0.1f, 0.8);
        check_xent_mixed(0.1f, 0.5);
        check_small_ops();
        check_dropout();
        for (int act = 0; act < DT_ACT_COUNT; act++)
            check_act(act);
        check_chanmul(3, 3, 1500, 0); /* two chunks of channels, the second partial */
        check_chanmul(3, 1, 2100, 0); /* one position: ds is dy * x */
        check_chanmul(4, 49, 24, 0);
        check_chanmul(2, 3, 5, 1);    /* small enough for central differences */
        check_chanmul(1, 1, 1, 1);
        check_sdepth();
        check_sgd();
        check_clip();
        check_planning_ops();
    }
    return tap_done();
}
