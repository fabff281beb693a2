/* ops_check_conv.c: ops_check's convolutions (conv_fwd, conv_bwd_data, conv_bwd_filter and their
 * planning op conv_workspace: src/nn/cuda/conv_cudnn.c) against dt_backend_cpu_ref's im2col + BLAS. The
 * rules (dtypes, tolerances, rows) are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_check.h"

static const conv_case CONV_CASES[] = {
    {"3x3", 4, 14, 14, 64, 64, 3, 1, 1, 1, 1, 0},
    {"3x3 s2 bias, odd size", 2, 15, 15, 32, 48, 3, 2, 1, 1, 1, 1},
    {"1x1", 4, 14, 14, 128, 256, 1, 1, 0, 1, 1, 0},
    {"1x1 s2 (downsample)", 4, 14, 14, 64, 128, 1, 2, 0, 1, 1, 0},
    {"7x7 s2 p3 stem", 2, 64, 64, 3, 64, 7, 2, 3, 1, 1, 0},
    {"3x3 dilation 2", 2, 16, 16, 32, 32, 3, 1, 2, 2, 1, 0},
    {"3x3 groups 4, bias", 2, 14, 14, 64, 64, 3, 1, 1, 1, 4, 1},
    {"3x3 depthwise", 2, 14, 14, 32, 32, 3, 1, 1, 1, 32, 0},
    {"11x11 s4 p2 bias (alexnet)", 2, 63, 63, 3, 16, 11, 4, 2, 1, 1, 1},
    {"5x5 p2 bias", 2, 13, 13, 24, 40, 5, 1, 2, 1, 1, 1},
    {"3x3 512 (K=4608)", 1, 7, 7, 512, 512, 3, 1, 1, 1, 1, 0},
};
/* --quick: one small case with everything (bias, a smaller batch) */
static const conv_case CONV_QUICK = {"3x3 bias (quick)", 3, 8, 8, 8, 16, 3, 1, 1, 1, 1, 1};

static void test_conv(const conv_case *cc, int dt)
{
    if (!unit("conv [%s] %s", cc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d>%d k%ds%dp%dd%dg%d", cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->s,
             cc->p, cc->dil, cc->g);
    dt_conv_desc d, da; /* the reference's (fp32); the device's (dd, dda, dds) of the row's type */
    if (dt_conv_desc_set(&d, cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->k, cc->s, cc->s, cc->p, cc->p, cc->dil,
                         cc->dil, cc->g) != 0) {
        snprintf(name, sizeof name, "conv [%s]", cc->name);
        row(name, DTYPE_NAME[dt], "dt_conv_desc_set refused it", 0, 0, M_EXACT, 0, 0);
        return;
    }
    d.bias = cc->bias;
    da = d;
    da.dx_accumulate = 1;
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.oc,
                  nw = (int64_t)d.oc * d.kh * d.kw * (d.c / d.groups), nb = d.oc;
    /* planning, as a model plans: the batch, and a smaller one (an epoch's last) */
    dt_conv_desc ds = d;
    ds.n = d.n > 1 ? d.n - 1 : 1;
    dt_conv_desc dd = d, dda = da, dds = ds;
    dd.t = dda.t = dds.t = ty(dt);
    size_t wr = CREF->conv_workspace(&da), wr0 = CREF->conv_workspace(&d), wrs = CREF->conv_workspace(&ds);
    wr = wr > wr0 ? wr : wr0;
    wr = wr > wrs ? wr : wrs;
    size_t wd = DEV->conv_workspace(&dd), wd2 = DEV->conv_workspace(&dda), wds = DEV->conv_workspace(&dds);
    wd = wd > wd2 ? wd : wd2;
    wd = wd > wds ? wd : wds;
    void *ws_ref = hold(malloc(wr ? wr : 64), 0);
    void *ws_dev = d_bytes(wd ? wd : 64);
    plan_scratch(0); /* (the conv ops use no scratch: this starts the count of allocations) */

    const double wsd = 1.0 / sqrt((double)d.kh * d.kw * (d.c / d.groups));
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, wsd, dt), *b = h_randn(nb, 0, 0.5, dt);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, nb, dt), *Ddy = d_from(dy, ny, dt);
    const float *bias = cc->bias ? b : NULL;
    const void *Dbias = cc->bias ? Db : NULL;

    /* forward */
    float *y = h_new(ny);
    void *Dy = d_poisoned(ny, dt);
    CREF->conv_fwd(&d, x, w, bias, y, ws_ref);
    DEV->conv_fwd(&dd, Dx, Dw, Dbias, Dy, ws_dev);
    check_row(dt, dt, shape, Dy, y, ny, M_RED, "conv_fwd [%s]", cc->name);

    /* a smaller batch, planned too (an epoch's last), in the same workspace */
    if (d.n > 1) {
        const int64_t nys = (int64_t)ds.n * d.oh * d.ow * d.oc;
        float *ys = h_new(nys);
        void *Dys = d_poisoned(nys, dt);
        CREF->conv_fwd(&ds, x, w, bias, ys, ws_ref);
        DEV->conv_fwd(&dds, Dx, Dw, Dbias, Dys, ws_dev);
        check_row(dt, dt, shape, Dys, ys, nys, M_RED, "conv_fwd smaller batch [%s]", cc->name);
    }

    /* backward-data, overwrite and accumulate */
    float *dx = h_new(nx);
    void *Ddx = d_poisoned(nx, dt);
    CREF->conv_bwd_data(&d, dy, w, dx, 0, ws_ref);
    DEV->conv_bwd_data(&dd, Ddy, Dw, Ddx, 0, ws_dev);
    check_row(dt, dt, shape, Ddx, dx, nx, M_RED, "conv_bwd_data [%s]", cc->name);

    /* overwrite through a descriptor that allows adding (the model's first write to a residual
     * input's gradient) */
    float *dxo = h_new(nx);
    void *Ddxo = d_poisoned(nx, dt);
    CREF->conv_bwd_data(&da, dy, w, dxo, 0, ws_ref);
    DEV->conv_bwd_data(&dda, Ddy, Dw, Ddxo, 0, ws_dev);
    check_row(dt, dt, shape, Ddxo, dxo, nx, M_RED, "conv_bwd_data acc-desc [%s]", cc->name);

    float *prior = h_randn(nx, 0, 1, dt), *dxa = h_copy(prior, nx);
    void *Ddxa = d_from(prior, nx, dt);
    CREF->conv_bwd_data(&da, dy, w, dxa, 1, ws_ref);
    DEV->conv_bwd_data(&dda, Ddy, Dw, Ddxa, 1, ws_dev);
    check_row(dt, dt, shape, Ddxa, dxa, nx, M_RED, "conv_bwd_data acc [%s]", cc->name);

    /* backward-filter (and bias), overwrite and accumulate */
    float *dw = h_new(nw), *db = h_new(nb);
    void *Ddw = d_poisoned(nw, dt), *Ddb = d_poisoned(nb, dt);
    CREF->conv_bwd_filter(&d, x, dy, dw, cc->bias ? db : NULL, 0, ws_ref);
    DEV->conv_bwd_filter(&dd, Dx, Ddy, Ddw, cc->bias ? Ddb : NULL, 0, ws_dev);
    check_row(dt, dt, shape, Ddw, dw, nw, M_RED, "conv_bwd_filter dw [%s]", cc->name);
    if (cc->bias) {
        check_row(dt, dt, shape, Ddb, db, nb, M_RED, "conv_bwd_filter dbias [%s]", cc->name);
    }
    float *pw = h_randn(nw, 0, 1, dt), *pb = h_randn(nb, 0, 1, dt);
    float *dwa = h_copy(pw, nw), *dba = h_copy(pb, nb);
    void *Ddwa = d_from(pw, nw, dt), *Ddba = d_from(pb, nb, dt);
    CREF->conv_bwd_filter(&d, x, dy, dwa, cc->bias ? dba : NULL, 1, ws_ref);
    DEV->conv_bwd_filter(&dd, Dx, Ddy, Ddwa, cc->bias ? Ddba : NULL, 1, ws_dev);
    check_row(dt, dt, shape, Ddwa, dwa, nw, M_RED, "conv_bwd_filter acc dw [%s]", cc->name);
    if (cc->bias) {
        check_row(dt, dt, shape, Ddba, dba, nb, M_RED, "conv_bwd_filter acc dbias [%s]", cc->name);
    }
    /* every shape above was planned: no algorithm search, no allocation in the ops */
    snprintf(name, sizeof name, "conv_workspace reserved, ops allocate nothing [%s]", cc->name);
    planned_row(name, dt, shape);
    release();
}

static void convs(int dt_unused)
{
    (void)dt_unused;
    if (QUICK) {
        test_conv(&CONV_QUICK, F32);
        return;
    }
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++)
        ALL_DTYPES test_conv(&CONV_CASES[i], dt);
}

static const ops_test TESTS[] = {
    {ST_CONV, "conv", convs},
};
OPS_FAMILY(OPS_CONV, "conv_cudnn.c", TESTS);
