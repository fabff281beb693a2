/* ops_check_slice.c: ops_check's group "slice": the convolutions (conv_cudnn.c), BN (bn.cu) and the pools
 * (pool.cu) on a channel slice of a wider tensor, through the row strides of their descriptors. The
 * rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

/* Group "slice": the ops that read or write a channel slice of a wider NHWC tensor through a row stride
 * in their descriptor (nn/backend.h): conv_fwd, conv_bwd_data and conv_bwd_filter with dt_conv_desc.ys
 * > oc (y and dy a slice at a channel offset), bn_fwd_train, bn_fwd_infer and bn_bwd with dt_bn_desc.xs >
 * c (x and dx the first c channels), maxpool and avgpool both ways with dt_pool_desc.ys > c (y and dy a
 * slice). Each result is compared with the same op on packed operands on the backend under test ("vs
 * packed": bit for bit for BN and the pools, whose kernels only move their row offsets; within the
 * convolutions' tolerance for conv, as a backend may run a strided layout on another algorithm) and with
 * the CPU reference on packed operands ("vs cpu", the tolerance of the op's own rows above); an output
 * slice's channels outside it start as random finite values that must come back bit for bit
 * ("outside"), and an input slice's other channels hold NaN and infinities (h_junk), so a kernel that
 * reads them spoils the results it reaches. */

/* NaN, +inf, -inf in turn: what an input slice's other channels hold (every type has them) */
static float *h_junk(int64_t n)
{
    float *h = h_new(n);
    static const float v[3] = {NAN, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        h[i] = v[i % 3];
    return h;
}

/* [rows, w] values: around's, with channels off .. off + c - 1 from packed [rows, c] */
static float *h_wide(const float *packed, const float *around, int64_t rows, int w, int off, int c)
{
    float *h = h_copy(around, rows * w);
    for (int64_t r = 0; r < rows; r++)
        memcpy(h + r * w + off, packed + r * c, (size_t)c * sizeof(float));
    return h;
}

/* channels off .. off + c - 1 of [rows, w] values, packed; or (outside) the other channels */
static float *h_part(const float *wide, int64_t rows, int w, int off, int c, int outside)
{
    float *h = h_new(rows * (outside ? w - c : c));
    for (int64_t r = 0; r < rows; r++) {
        if (outside) {
            float *o = h + r * (w - c);
            memcpy(o, wide + r * w, (size_t)off * sizeof(float));
            memcpy(o + off, wide + r * w + off + c, (size_t)(w - off - c) * sizeof(float));
        } else {
            memcpy(h + r * c, wide + r * w + off, (size_t)c * sizeof(float));
        }
    }
    return h;
}

/* element off of a device array of type dt */
static void *d_at(void *d, int64_t off, int dt)
{
    return (char *)d + (size_t)off * elt_bytes(dt);
}

/* A packed output of the slice's op (Ds, n elements of storage type st) against the packed op's on the
 * device (Dp: mode mp) and against the reference (want: mode m). */
static void check_pair(const char *op, int dt, int st, const char *shape, const void *Ds, const void *Dp, int64_t n,
                       enum mode mp, const float *want, enum mode m)
{
    char name[96];
    const float *got = d_result(Ds, n, st);
    snprintf(name, sizeof name, "%s vs packed", op);
    cmp_f32_as(name, dt, st, shape, got, d_result(Dp, n, st), n, mp);
    snprintf(name, sizeof name, "%s vs cpu", op);
    cmp_f32_as(name, dt, st, shape, got, want, n, m);
}

/* An output slice: channels off .. off + c - 1 of the device's [rows, w] Dw (type dt; init: its values
 * before the op) as check_pair says, and its other channels init's, bit for bit. */
static void check_slice(const char *op, int dt, const char *shape, const void *Dw, const float *init, int64_t rows,
                        int w, int off, int c, const void *Dp, enum mode mp, const float *want, enum mode m)
{
    char name[96];
    const float *got = d_result(Dw, rows * w, dt), *part = h_part(got, rows, w, off, c, 0);
    snprintf(name, sizeof name, "%s vs packed", op);
    cmp_f32(name, dt, shape, part, d_result(Dp, rows * c, dt), rows * c, mp);
    snprintf(name, sizeof name, "%s vs cpu", op);
    cmp_f32(name, dt, shape, part, want, rows * c, m);
    snprintf(name, sizeof name, "%s outside", op);
    cmp_f32(name, dt, shape, h_part(got, rows, w, off, c, 1), h_part(init, rows, w, off, c, 1), rows * (w - c),
            M_BITS);
}

/* an output slice before the op: NaN in the slice (an element never written fails), random finite values
 * around it (which must stay) */
static float *h_out_init(int64_t rows, int w, int off, int c, int dt)
{
    return h_wide(h_junk(rows * c), h_randn(rows * w, 0, 1, dt), rows, w, off, c);
}

/* a convolution (conv_case) writing channels off .. off + oc - 1 of rows ys wide */
typedef struct slice_conv_case {
    conv_case cv;
    int off, ys;
} slice_conv_case;

static const slice_conv_case SLICE_CONV_CASES[] = {
    {{"3x3 32 at 64 of 128", 2, 8, 8, 64, 32, 3, 1, 1, 1, 1, 0}, 64, 128},
    {{"1x1 s2 bias 12 at 5 of 20", 2, 7, 7, 24, 12, 1, 2, 0, 1, 1, 1}, 5, 20},
};

static void test_slice_conv(const slice_conv_case *sc, int dt)
{
    if (!unit("slice conv [%s] %s", sc->cv.name, DTYPE_NAME[dt]))
        return;
    const conv_case *cc = &sc->cv;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d>%d k%ds%d ys%d@%d", cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->s,
             sc->ys, sc->off);
    dt_conv_desc d; /* the reference's (fp32, packed) */
    if (dt_conv_desc_set(&d, cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->k, cc->s, cc->s, cc->p, cc->p, cc->dil,
                         cc->dil, cc->g)) {
        row("conv [slice]", DTYPE_NAME[dt], "dt_conv_desc_set refused it", 0, 0, M_EXACT, 0, 0);
        return;
    }
    d.bias = cc->bias;
    dt_conv_desc da = d;
    da.dx_accumulate = 1;
    /* the device's: packed (dp, dpa) and the slice (ds, dsa), of the row's type */
    dt_conv_desc dp = d, dpa = da;
    dp.t = dpa.t = ty(dt);
    dt_conv_desc ds = dp, dsa = dpa;
    ds.ys = dsa.ys = sc->ys;
    size_t wr = CREF->conv_workspace(&d), wra = CREF->conv_workspace(&da), wd = 0;
    const dt_conv_desc *planned[4] = {&dp, &dpa, &ds, &dsa};
    for (int i = 0; i < 4; i++) {
        size_t b = DEV->conv_workspace(planned[i]);
        wd = b > wd ? b : wd;
    }
    void *ws_ref = hold(malloc(wr > wra ? wr : wra), 0), *ws = d_bytes(wd ? wd : 64);
    plan_scratch(0);
    const int oc = d.oc, ys = sc->ys, off = sc->off;
    const int64_t npos = (int64_t)d.n * d.oh * d.ow, nx = (int64_t)d.n * d.h * d.w * d.c, ny = npos * oc,
                  nw = (int64_t)oc * d.kh * d.kw * (d.c / d.groups), nb = oc;
    const double wsd = 1.0 / sqrt((double)d.kh * d.kw * (d.c / d.groups));
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, wsd, dt), *b = h_randn(nb, 0, 0.5, dt);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, nb, dt), *Ddy = d_from(dy, ny, dt);
    void *Ddyw = d_from(h_wide(dy, h_junk(npos * ys), npos, ys, off, oc), npos * ys, dt);
    const float *bias = cc->bias ? b : NULL;
    const void *Dbias = cc->bias ? Db : NULL;

    /* forward into the slice */
    float *y = h_new(ny), *init = h_out_init(npos, ys, off, oc, dt);
    void *Dyp = d_poisoned(ny, dt), *Dyw = d_from(init, npos * ys, dt);
    CREF->conv_fwd(&d, x, w, bias, y, ws_ref);
    DEV->conv_fwd(&dp, Dx, Dw, Dbias, Dyp, ws);
    DEV->conv_fwd(&ds, Dx, Dw, Dbias, d_at(Dyw, off, dt), ws);
    ref_out(y, ny, dt);
    check_slice("conv_fwd ys y", dt, shape, Dyw, init, npos, ys, off, oc, Dyp, M_RED, y, M_RED);

    /* backward-data from the slice of dy, overwriting and accumulating */
    for (int acc = 0; acc <= 1; acc++) {
        float *prior = acc ? h_randn(nx, 0, 1, dt) : NULL, *dx = acc ? h_copy(prior, nx) : h_new(nx);
        void *Ddxp = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        void *Ddxs = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        CREF->conv_bwd_data(&da, dy, w, dx, acc, ws_ref);
        DEV->conv_bwd_data(&dpa, Ddy, Dw, Ddxp, acc, ws);
        DEV->conv_bwd_data(&dsa, d_at(Ddyw, off, dt), Dw, Ddxs, acc, ws);
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "conv_bwd_data ys%s dx", acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddxs, Ddxp, nx, M_RED, dx, M_RED);
    }

    /* backward-filter (and bias) from the slice of dy, overwriting and accumulating */
    for (int acc = 0; acc <= 1; acc++) {
        float *pw = acc ? h_randn(nw, 0, 1, dt) : NULL, *pb = acc ? h_randn(nb, 0, 1, dt) : NULL;
        float *dw = acc ? h_copy(pw, nw) : h_new(nw), *db = acc ? h_copy(pb, nb) : h_new(nb);
        void *Ddwp = acc ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        void *Ddws = acc ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        void *Ddbp = acc ? d_from(pb, nb, dt) : d_poisoned(nb, dt);
        void *Ddbs = acc ? d_from(pb, nb, dt) : d_poisoned(nb, dt);
        CREF->conv_bwd_filter(&d, x, dy, dw, cc->bias ? db : NULL, acc, ws_ref);
        DEV->conv_bwd_filter(&dp, Dx, Ddy, Ddwp, cc->bias ? Ddbp : NULL, acc, ws);
        DEV->conv_bwd_filter(&ds, Dx, d_at(Ddyw, off, dt), Ddws, cc->bias ? Ddbs : NULL, acc, ws);
        ref_out(dw, nw, dt);
        snprintf(name, sizeof name, "conv_bwd_filter ys%s dw", acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddws, Ddwp, nw, M_RED, dw, M_RED);
        if (cc->bias) {
            ref_out(db, nb, dt);
            snprintf(name, sizeof name, "conv_bwd_filter ys%s dbias", acc ? " acc" : "");
            check_pair(name, dt, dt, shape, Ddbs, Ddbp, nb, M_RED, db, M_RED);
        }
    }
    planned_row("conv_workspace ys, ops allocate nothing", dt, shape);
    release();
}

typedef struct slice_bn_case {
    const char *name;
    int64_t rows;
    int c, xs;
} slice_bn_case;

/* xs a multiple of 8 (the device's 8-wide paths) and not */
static const slice_bn_case SLICE_BN_CASES[] = {
    {"rows 784 c64 xs96", 784, 64, 96},
    {"rows 1001 c37 xs43", 1001, 37, 43},
};

/* x, y and their gradients of the row's type, the parameters and statistics fp32 */
static void test_slice_bn(const slice_bn_case *bc, int dt)
{
    if (!unit("slice bn [%s] %s", bc->name, DTYPE_NAME[dt]))
        return;
    char name[96];
    const char *shape = bc->name;
    const int c = bc->c, xs = bc->xs;
    const int64_t rows = bc->rows, n = rows * c, nw = rows * xs;
    dt_bn_desc d = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = S32, .yt = S32, .pt = S32};
    dt_bn_desc dp = d; /* the device's, packed and (ds) at xs */
    dp.xt = dp.yt = ty(dt);
    dt_bn_desc ds = dp;
    ds.xs = xs;
    const size_t s0 = DEV->bn_scratch(&dp), s1 = DEV->bn_scratch(&ds);
    plan_scratch(s0 > s1 ? s0 : s1);
    for (int relu = 0; relu <= 1; relu++) {
        const char *r = relu ? "+relu" : "";
        float *x = h_bn_x(n, c, dt);
        float *gamma = h_randn(c, 1, 0.3, F32), *beta = h_randn(c, 0, 0.5, F32);
        if (relu)
            bn_keep_off_zero(&d, x, gamma, beta, dt);
        float *rm0 = h_randn(c, 0, 0.1, F32), *rv0 = h_uniform(c, 0.5, 1.5);
        void *Dx = d_from(x, n, dt), *Dxw = d_from(h_wide(x, h_junk(nw), rows, xs, 0, c), nw, dt);
        void *Dg = d_from(gamma, c, F32), *Db = d_from(beta, c, F32);

        /* training forward */
        float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
        void *Dyp = d_poisoned(n, dt), *Dys = d_poisoned(n, dt);
        float *Dsp = d_poisoned((int64_t)DT_BN_SAVED(c), F32), *Dss = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
        void *Drmp = d_from(rm0, c, F32), *Drvp = d_from(rv0, c, F32), *Drms = d_from(rm0, c, F32);
        void *Drvs = d_from(rv0, c, F32);
        REF->bn_fwd_train(&d, x, gamma, beta, y, saved, rm, rv, relu);
        DEV->bn_fwd_train(&dp, Dx, Dg, Db, Dyp, Dsp, Drmp, Drvp, relu);
        DEV->bn_fwd_train(&ds, Dxw, Dg, Db, Dys, Dss, Drms, Drvs, relu);
        ref_out(y, n, dt);
        snprintf(name, sizeof name, "bn_fwd_train%s xs y", r);
        check_pair(name, dt, dt, shape, Dys, Dyp, n, M_BITS, y, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs saved", r);
        check_pair(name, dt, F32, shape, Dss, Dsp, (int64_t)DT_BN_SAVED(c), M_BITS, saved, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs running_mean", r);
        check_pair(name, dt, F32, shape, Drms, Drmp, c, M_BITS, rm, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs running_var", r);
        check_pair(name, dt, F32, shape, Drvs, Drvp, c, M_BITS, rv, M_RED);

        /* inference forward */
        float *yi = h_new(n);
        void *Dyip = d_poisoned(n, dt), *Dyis = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, F32);
        void *Drv0 = d_from(rv0, c, F32);
        REF->bn_fwd_infer(&d, x, gamma, beta, rm0, rv0, yi, relu);
        DEV->bn_fwd_infer(&dp, Dx, Dg, Db, Drm0, Drv0, Dyip, relu);
        DEV->bn_fwd_infer(&ds, Dxw, Dg, Db, Drm0, Drv0, Dyis, relu);
        ref_out(yi, n, dt);
        snprintf(name, sizeof name, "bn_fwd_infer%s xs y", r);
        check_pair(name, dt, dt, shape, Dyis, Dyip, n, M_BITS, yi, M_ELT);

        /* backward into the prefix of a wide dx, overwriting and accumulating (dx and the parameters'
         * gradients), each side from its own saved state */
        float *dy = h_randn(n, 0, 1, dt);
        void *Ddy = d_from(dy, n, dt);
        for (int acc = 0; acc <= 1; acc++) {
            float *prior = acc ? h_randn(n, 0, 1, dt) : NULL, *pg = acc ? h_randn(c, 0, 1, F32) : NULL;
            float *pb = acc ? h_randn(c, 0, 1, F32) : NULL;
            float *dx = acc ? h_copy(prior, n) : h_new(n), *dg = acc ? h_copy(pg, c) : h_new(c);
            float *db = acc ? h_copy(pb, c) : h_new(c);
            float *init = acc ? h_wide(prior, h_randn(nw, 0, 1, dt), rows, xs, 0, c) : h_out_init(rows, xs, 0, c, dt);
            void *Ddxp = acc ? d_from(prior, n, dt) : d_poisoned(n, dt), *Ddxw = d_from(init, nw, dt);
            void *Ddgp = acc ? d_from(pg, c, F32) : d_poisoned(c, F32);
            void *Ddgs = acc ? d_from(pg, c, F32) : d_poisoned(c, F32);
            void *Ddbp = acc ? d_from(pb, c, F32) : d_poisoned(c, F32);
            void *Ddbs = acc ? d_from(pb, c, F32) : d_poisoned(c, F32);
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, acc, acc);
            DEV->bn_bwd(&dp, Dx, Ddy, relu, Dg, Dsp, Ddxp, Ddgp, Ddbp, acc, acc);
            DEV->bn_bwd(&ds, Dxw, Ddy, relu, Dg, Dss, Ddxw, Ddgs, Ddbs, acc, acc);
            ref_out(dx, n, dt);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dx", r, acc ? " acc" : "");
            check_slice(name, dt, shape, Ddxw, init, rows, xs, 0, c, Ddxp, M_BITS, dx, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dgamma", r, acc ? " acc" : "");
            check_pair(name, dt, F32, shape, Ddgs, Ddgp, c, M_BITS, dg, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dbeta", r, acc ? " acc" : "");
            check_pair(name, dt, F32, shape, Ddbs, Ddbp, c, M_BITS, db, M_RED);
        }
        release();
    }
    planned_row("bn_scratch xs, ops allocate nothing", dt, shape);
}

typedef struct slice_pool_case {
    const char *name;
    int max, n, h, w, c;
    int a, b, p; /* max: kernel, stride, padding; average: the output's height and width */
    int off, ys;
} slice_pool_case;

static const slice_pool_case SLICE_POOL_CASES[] = {
    {"max 3x3/2 p1, 64 at 0 of 96", 1, 2, 16, 16, 64, 3, 2, 1, 0, 96},
    {"max 2x2/2 odd, 12 at 4 of 19", 1, 2, 15, 15, 12, 2, 2, 0, 4, 19},
    {"avg 14x14->7x7, 32 at 0 of 48", 0, 2, 14, 14, 32, 7, 7, 0, 0, 48},
    {"avg 5x3->2x2, 9 at 3 of 14", 0, 3, 5, 3, 9, 2, 2, 0, 3, 14},
};

/* x and dx packed, y and dy a slice; all of the row's type */
static void test_slice_pool(const slice_pool_case *pc, int dt)
{
    if (!unit("slice pool [%s] %s", pc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    dt_pool_desc d;
    if (pc->max ? dt_pool_desc_set_max(&d, pc->n, pc->h, pc->w, pc->c, pc->a, pc->b, pc->p)
                : dt_pool_desc_set_adaptive(&d, pc->n, pc->h, pc->w, pc->c, pc->a, pc->b))
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d->%dx%d ys%d@%d", d.n, d.h, d.w, d.c, d.oh, d.ow, pc->ys, pc->off);
    const char *fwd = pc->max ? "maxpool_fwd" : "avgpool_fwd", *bwd = pc->max ? "maxpool_bwd" : "avgpool_bwd";
    dt_pool_desc dp = d; /* the device's, packed and (ds) into the slice */
    dp.xt = dp.yt = ty(dt);
    dt_pool_desc ds = dp;
    ds.ys = pc->ys;
    const int c = d.c, ys = pc->ys, off = pc->off;
    const int64_t nx = (int64_t)d.n * d.h * d.w * c, npos = (int64_t)d.n * d.oh * d.ow, ny = npos * c;
    const int overlap = pc->max && (d.kh > d.sh || d.kw > d.sw);
    float *x = h_randn(nx, pc->max ? 0 : 0.5, 1, dt), *y = h_new(ny), *init = h_out_init(npos, ys, off, c, dt);
    void *Dx = d_from(x, nx, dt), *Dyp = d_poisoned(ny, dt), *Dyw = d_from(init, npos * ys, dt);
    uint8_t *am = hold(malloc((size_t)ny), 0), *Damp = d_poisoned_u8(ny), *Dams = d_poisoned_u8(ny);
    if (pc->max) {
        REF->maxpool_fwd(&d, x, y, am);
        DEV->maxpool_fwd(&dp, Dx, Dyp, Damp);
        DEV->maxpool_fwd(&ds, Dx, d_at(Dyw, off, dt), Dams);
    } else {
        REF->avgpool_fwd(&d, x, y);
        DEV->avgpool_fwd(&dp, Dx, Dyp);
        DEV->avgpool_fwd(&ds, Dx, d_at(Dyw, off, dt));
    }
    ref_out(y, ny, dt);
    snprintf(name, sizeof name, "%s ys y", fwd);
    check_slice(name, dt, shape, Dyw, init, npos, ys, off, c, Dyp, M_BITS, y, pc->max ? M_EXACT : M_RED);
    if (pc->max) {
        const uint8_t *got = d_result_u8(Dams, ny);
        cmp_u8("maxpool_fwd ys argmax vs packed", dt, shape, got, d_result_u8(Damp, ny), ny);
        cmp_u8("maxpool_fwd ys argmax vs cpu", dt, shape, got, am, ny);
    }
    /* backward from the slice of dy (the reference's window positions, checked above) */
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt), *Ddyw = d_from(h_wide(dy, h_junk(npos * ys), npos, ys, off, c), npos * ys, dt);
    uint8_t *Dam = d_bytes((size_t)ny);
    DEV->mem_put(Dam, am, (size_t)ny);
    for (int acc = 0; acc <= 1; acc++) {
        float *prior = acc ? h_randn(nx, 0, 1, dt) : NULL, *dx = acc ? h_copy(prior, nx) : h_new(nx);
        void *Ddxp = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        void *Ddxs = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        if (pc->max) {
            REF->maxpool_bwd(&d, dy, am, dx, acc);
            DEV->maxpool_bwd(&dp, Ddy, Dam, Ddxp, acc);
            DEV->maxpool_bwd(&ds, d_at(Ddyw, off, dt), Dam, Ddxs, acc);
        } else {
            REF->avgpool_bwd(&d, dy, dx, acc);
            DEV->avgpool_bwd(&dp, Ddy, Ddxp, acc);
            DEV->avgpool_bwd(&ds, d_at(Ddyw, off, dt), Ddxs, acc);
        }
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "%s%s ys dx", bwd, acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddxs, Ddxp, nx, M_BITS, dx, pc->max && !overlap ? M_EXACT : M_ELT);
    }
    release();
}

static void slice_convs(int dt_unused)
{
    (void)dt_unused;
    const size_t n_conv = QUICK ? 1 : sizeof SLICE_CONV_CASES / sizeof SLICE_CONV_CASES[0];
    for (size_t i = 0; i < n_conv; i++)
        ALL_DTYPES test_slice_conv(&SLICE_CONV_CASES[i], dt);
}

static void slice_bns(int dt_unused)
{
    (void)dt_unused;
    const size_t n_bn = QUICK ? 1 : sizeof SLICE_BN_CASES / sizeof SLICE_BN_CASES[0];
    for (size_t i = 0; i < n_bn; i++)
        ALL_DTYPES test_slice_bn(&SLICE_BN_CASES[i], dt);
}

static void slice_pools(int dt_unused)
{
    (void)dt_unused;
    for (size_t i = 0; i < sizeof SLICE_POOL_CASES / sizeof SLICE_POOL_CASES[0]; i++)
        ALL_DTYPES test_slice_pool(&SLICE_POOL_CASES[i], dt);
}

static const ops_test TESTS[] = {
    {ST_SLICE, "slice", slice_convs},
    {ST_SLICE, "slice", slice_bns},
    {ST_SLICE, "slice", slice_pools},
};
OPS_FAMILY(OPS_SLICE, "conv_cudnn.c, bn.cu, pool.cu", TESTS);
