/* ops_check_bn.c: ops_check's batch norm (src/nn/cuda/bn.cu): bn_fwd_train, bn_fwd_infer, bn_bwd, with
 * and without the fused ReLU, SyncBN's hook, the fused residual tail (bn_add_relu_*) and the planning op
 * bn_scratch. The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

typedef struct bn_case {
    const char *name;
    int64_t rows;
    int c;
    int o3; /* fp16/bf16: also with the parameters and statistics of the row's type (O3's BN) */
} bn_case;

static const bn_case BN_CASES[] = {
    {"rows 784 c64", 784, 64, 1},
    {"rows 1001 c37 (odd)", 1001, 37, 1},
    {"rows 98 c300 (blocks)", 98, 300, 1},
    {"rows 392 c2048 (layer4)", 392, 2048, 0},
    {"rows 100352 c64 (32x56x56)", 100352, 64, 0},
};
/* --quick: fp32 at 37 channels (the scalar paths), fp16 and bf16 at 40 (c % 8 == 0: bn.cu's 8-wide
 * paths, which index 8 channels of a row at a time), O3's BN in fp16 */
static const bn_case BN_QUICK = {"rows 200 c37 (quick)", 200, 37, 0};
static const bn_case BN_QUICK8 = {"rows 203 c40 (quick, 8-wide)", 203, 40, 1};

/* BN's x: n values of c channels, N(0, 1.5^2) around an offset per channel (the one-pass variance must not
 * cancel), rounded to dt */
float *h_bn_x(int64_t n, int c, int dt)
{
    float *off = h_uniform(c, -4, 4), *x = h_randn(n, 0, 1, F32);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * 1.5f + off[i % c];
    h_round(x, n, dt);
    return x;
}

/* Moves x away from where the fused ReLU's decision (x*scale + shift > 0) is within rounding of
 * zero, so that two correct implementations make the same decision; x stays in the dtype. */
void bn_keep_off_zero(const dt_bn_desc *d, float *x, const float *gamma, const float *beta, int dt)
{
    if (LIST) /* the reference computes nothing */
        return;
    const int64_t n = d->rows * d->c;
    float *y = malloc((size_t)n * sizeof(float)), *saved = malloc(DT_BN_SAVED(d->c) * sizeof(float));
    float *rm = calloc((size_t)d->c, sizeof(float)), *rv = calloc((size_t)d->c, sizeof(float));
    if (!y || !saved || !rm || !rv)
        exit(1);
    for (int iter = 0; iter < 8; iter++) {
        REF->bn_fwd_train(d, x, gamma, beta, y, saved, rm, rv, 0);
        const float *invstd = saved + d->c, *scale = saved + 2 * d->c, *shift = saved + 3 * d->c;
        int64_t moved = 0;
        for (int64_t i = 0; i < n; i++) {
            int j = (int)(i % d->c);
            double v = (double)x[i] * scale[j] + shift[j], size = fabs((double)x[i] * scale[j]) + fabs(shift[j]);
            if (fabs(v) <= 1e-3 * size + 1e-30) {
                x[i] += (float)((v >= 0 ? 0.05 : -0.05) / invstd[j]);
                moved++;
            }
        }
        h_round(x, n, dt);
        if (!moved)
            break;
    }
    free(y);
    free(saved);
    free(rm);
    free(rv);
}

/* SyncBN's hook as two replicas holding the same batch would see it: every sum doubled, in place, in
 * the memory of the backend whose op calls it (ctx): the device's own buffer on a GPU, handed over as
 * a communicator that reduces device memory gets it (nn/backend.h, dt_bn_desc) */
static const dt_backend *sync_side[2]; /* the backend each descriptor's hook works through */
static int sync_twice(void *ctx, double *buf, int n)
{
    const dt_backend *b = *(const dt_backend **)ctx;
    double *h = malloc((size_t)n * sizeof(double));
    if (!h)
        exit(1);
    b->mem_get(h, buf, (size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        h[i] *= 2;
    b->mem_put(buf, h, (size_t)n * sizeof(double));
    free(h);
    return 0;
}

/* BN's operands: x, y and their gradients of the row's type dt (xt, yt), the parameters, running
 * statistics and their gradients of type pdt (pt: fp32, as keep_batchnorm_fp32 has them, or the
 * row's type: O3), saved state fp32. d: the reference's descriptor (every type fp32), dd: the
 * device's. */

/* BN's training forward and backward with SyncBN on d's shape: both sides against each other */
static void test_bn_sync(const dt_bn_desc *d0, const dt_bn_desc *dd0, int dt, int pdt, const char *shape)
{
    const int c = d0->c;
    const int64_t n = d0->rows * c;
    dt_bn_desc dr = *d0, dd = *dd0;
    dr.sync = dd.sync = sync_twice;
    sync_side[0] = REF;
    sync_side[1] = DEV;
    dr.sync_ctx = &sync_side[0];
    dd.sync_ctx = &sync_side[1];
    plan_scratch(DEV->bn_scratch(&dd));
    float *x = h_bn_x(n, c, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
    float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
    h_round(rv0, c, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);
    float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
    void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
    float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
    REF->bn_fwd_train(&dr, x, gamma, beta, y, saved, rm, rv, 0);
    DEV->bn_fwd_train(&dd, Dx, Dg, Db, Dy, Dsaved, Drm, Drv, 0);
    check_row(dt, dt, shape, Dy, y, n, M_RED, "bn_fwd_train syncbn y");
    check_row(dt, F32, shape, Dsaved, saved, (int64_t)DT_BN_SAVED(c), M_RED, "bn_fwd_train syncbn saved");
    check_row(dt, pdt, shape, Drv, rv, c, M_RED, "bn_fwd_train syncbn running_var");
    float *dy = h_randn(n, 0, 1, dt), *dx = h_new(n), *dg = h_new(c), *db = h_new(c);
    void *Ddy = d_from(dy, n, dt), *Ddx = d_poisoned(n, dt), *Ddg = d_poisoned(c, pdt), *Ddb = d_poisoned(c, pdt);
    REF->bn_bwd(&dr, x, dy, 0, gamma, saved, dx, dg, db, 0, 0);
    DEV->bn_bwd(&dd, Dx, Ddy, 0, Dg, Dsaved, Ddx, Ddg, Ddb, 0, 0);
    check_row(dt, dt, shape, Ddx, dx, n, M_RED, "bn_bwd syncbn dx");
    check_row(dt, pdt, shape, Ddg, dg, c, M_RED, "bn_bwd syncbn dgamma");
    release();
}

/* the residual block's tail in one op each way (bn_add_relu_*) on d's shape: both sides against each
 * other, the backward's mask from a given block output (as a model keeps it); the residual and its
 * gradient of y's type */
static void test_bn_add_relu(const dt_bn_desc *d, const dt_bn_desc *dd, int dt, int pdt, const char *shape)
{
    const int c = d->c;
    const int64_t n = d->rows * c;
    const dt_dtype rt = ty(dt);
    float *x = h_bn_x(n, c, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt), *r = h_randn(n, 0, 1, dt);
    float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
    h_round(rv0, c, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt), *Dr = d_from(r, n, dt);
    float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
    void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
    float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
    REF->bn_add_relu_fwd_train(d, x, gamma, beta, r, S32, y, saved, rm, rv);
    DEV->bn_add_relu_fwd_train(dd, Dx, Dg, Db, Dr, rt, Dy, Dsaved, Drm, Drv);
    check_row(dt, dt, shape, Dy, y, n, M_RED, "bn_add_relu_fwd_train y");
    check_row(dt, F32, shape, Dsaved, saved, (int64_t)DT_BN_SAVED(c), M_RED, "bn_add_relu_fwd_train saved");
    check_row(dt, pdt, shape, Drv, rv, c, M_RED, "bn_add_relu_fwd_train running_var");
    float *yi = h_new(n);
    void *Dyi = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, pdt), *Drv0 = d_from(rv0, c, pdt);
    REF->bn_add_relu_fwd_infer(d, x, gamma, beta, rm0, rv0, r, S32, yi);
    DEV->bn_add_relu_fwd_infer(dd, Dx, Dg, Db, Drm0, Drv0, Dr, rt, Dyi);
    check_row(dt, dt, shape, Dyi, yi, n, M_ELT, "bn_add_relu_fwd_infer y");
    /* backward: the same block output for both (its zeros are the mask), each side's own saved state */
    float *yo = h_randn(n, 0, 1, dt), *dy = h_randn(n, 0, 1, dt);
    void *Dyo = d_from(yo, n, dt), *Ddy = d_from(dy, n, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *p0 = h_randn(n, 0, 1, dt), *p1 = h_randn(n, 0, 1, dt), *p2 = h_randn(c, 0, 1, pdt);
        float *p3 = h_randn(c, 0, 1, pdt);
        float *dx = h_copy(p0, n), *dr = h_copy(p1, n), *dg = h_copy(p2, c), *db = h_copy(p3, c);
        void *Ddx = d_from(p0, n, dt), *Ddr = d_from(p1, n, dt), *Ddg = d_from(p2, c, pdt), *Ddb = d_from(p3, c, pdt);
        REF->bn_add_relu_bwd(d, x, yo, dy, gamma, saved, dx, dr, S32, dg, db, acc, acc, acc);
        DEV->bn_add_relu_bwd(dd, Dx, Dyo, Ddy, Dg, Dsaved, Ddx, Ddr, rt, Ddg, Ddb, acc, acc, acc);
        const char *a = acc ? " acc" : "";
        check_row(dt, dt, shape, Ddx, dx, n, M_RED, "bn_add_relu_bwd%s dx", a);
        check_row(dt, dt, shape, Ddr, dr, n, M_ELT, "bn_add_relu_bwd%s dr", a);
        check_row(dt, pdt, shape, Ddg, dg, c, M_RED, "bn_add_relu_bwd%s dgamma", a);
        check_row(dt, pdt, shape, Ddb, db, c, M_RED, "bn_add_relu_bwd%s dbeta", a);
    }
    release();
}

/* o3: the parameters and statistics (and their gradients) of the row's type too */
static void test_bn(const bn_case *bc, int dt, int o3)
{
    if (!unit("bn [%s] %s%s", bc->name, DTYPE_NAME[dt], o3 ? " O3" : ""))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "%s%s", bc->name, o3 ? ", O3" : "");
    const int c = bc->c, pdt = o3 ? dt : F32;
    const int64_t n = bc->rows * c;
    dt_bn_desc d = {.rows = bc->rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = S32, .yt = S32, .pt = S32};
    dt_bn_desc dd = d;
    dd.xt = dd.yt = ty(dt);
    dd.pt = ty(pdt);
    plan_scratch(DEV->bn_scratch(&dd));
    for (int relu = 0; relu <= 1; relu++) {
        float *x = h_bn_x(n, c, dt);
        float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
        if (relu)
            bn_keep_off_zero(&d, x, gamma, beta, dt);
        float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
        h_round(rv0, c, pdt);
        void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);

        /* training forward: y, saved, running statistics */
        float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
        void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
        float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
        REF->bn_fwd_train(&d, x, gamma, beta, y, saved, rm, rv, relu);
        DEV->bn_fwd_train(&dd, Dx, Dg, Db, Dy, Dsaved, Drm, Drv, relu);
        check_row(dt, dt, shape, Dy, y, n, M_RED, "bn_fwd_train%s y", relu ? "+relu" : "");
        /* saved state is fp32 at every level, the running statistics of the parameters' type (the
         * dtype column says which inputs were reduced) */
        check_row(dt, F32, shape, Dsaved, saved, (int64_t)DT_BN_SAVED(c), M_RED, "bn_fwd_train%s saved",
                  relu ? "+relu" : "");
        check_row(dt, pdt, shape, Drm, rm, c, M_RED, "bn_fwd_train%s running_mean", relu ? "+relu" : "");
        check_row(dt, pdt, shape, Drv, rv, c, M_RED, "bn_fwd_train%s running_var", relu ? "+relu" : "");

        /* inference forward from the running statistics */
        float *yi = h_new(n);
        void *Dyi = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, pdt), *Drv0 = d_from(rv0, c, pdt);
        REF->bn_fwd_infer(&d, x, gamma, beta, rm0, rv0, yi, relu);
        DEV->bn_fwd_infer(&dd, Dx, Dg, Db, Drm0, Drv0, Dyi, relu);
        check_row(dt, dt, shape, Dyi, yi, n, M_ELT, "bn_fwd_infer%s", relu ? "+relu" : "");

        /* backward, from each side's own saved state (as a model runs it) */
        float *dy = h_randn(n, 0, 1, dt);
        void *Ddy = d_from(dy, n, dt);
        for (int acc = 0; acc <= 1; acc++) {
            float *dx, *dg, *db;
            void *Ddx, *Ddg, *Ddb;
            if (acc) {
                float *p0 = h_randn(n, 0, 1, dt), *p1 = h_randn(c, 0, 1, pdt), *p2 = h_randn(c, 0, 1, pdt);
                dx = h_copy(p0, n);
                dg = h_copy(p1, c);
                db = h_copy(p2, c);
                Ddx = d_from(p0, n, dt);
                Ddg = d_from(p1, c, pdt);
                Ddb = d_from(p2, c, pdt);
            } else {
                dx = h_new(n);
                dg = h_new(c);
                db = h_new(c);
                Ddx = d_poisoned(n, dt);
                Ddg = d_poisoned(c, pdt);
                Ddb = d_poisoned(c, pdt);
            }
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, acc, acc);
            DEV->bn_bwd(&dd, Dx, Ddy, relu, Dg, Dsaved, Ddx, Ddg, Ddb, acc, acc);
            check_row(dt, dt, shape, Ddx, dx, n, M_RED, "bn_bwd%s%s dx", relu ? "+relu" : "", acc ? " acc" : "");
            check_row(dt, pdt, shape, Ddg, dg, c, M_RED, "bn_bwd%s%s dgamma", relu ? "+relu" : "", acc ? " acc" : "");
            check_row(dt, pdt, shape, Ddb, db, c, M_RED, "bn_bwd%s%s dbeta", relu ? "+relu" : "", acc ? " acc" : "");
        }
        /* dx alone accumulating, the parameters overwritten (a block input's gradient) */
        {
            float *p0 = h_randn(n, 0, 1, dt), *dx = h_copy(p0, n), *dg = h_new(c), *db = h_new(c);
            void *Ddx = d_from(p0, n, dt), *Ddg = d_poisoned(c, pdt), *Ddb = d_poisoned(c, pdt);
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, 1, 0);
            DEV->bn_bwd(&dd, Dx, Ddy, relu, Dg, Dsaved, Ddx, Ddg, Ddb, 1, 0);
            check_row(dt, dt, shape, Ddx, dx, n, M_RED, "bn_bwd%s acc_dx only dx", relu ? "+relu" : "");
            check_row(dt, pdt, shape, Ddg, dg, c, M_RED, "bn_bwd%s acc_dx only dgamma", relu ? "+relu" : "");
        }
        release();
    }
    test_bn_sync(&d, &dd, dt, pdt, shape);
    test_bn_add_relu(&d, &dd, dt, pdt, shape);
    planned_row("bn_scratch reserved, ops allocate nothing", dt, shape);
}

static void bns(int dt_unused)
{
    (void)dt_unused;
    if (QUICK) {
        test_bn(&BN_QUICK, F32, 0);
        if (stores(F16)) {
            test_bn(&BN_QUICK8, F16, 0);
            test_bn(&BN_QUICK8, F16, 1);
        }
        if (stores(BF16))
            test_bn(&BN_QUICK8, BF16, 0);
        return;
    }
    for (size_t i = 0; i < sizeof BN_CASES / sizeof BN_CASES[0]; i++)
        ALL_DTYPES
        {
            test_bn(&BN_CASES[i], dt, 0);
            if (dt != F32 && BN_CASES[i].o3)
                test_bn(&BN_CASES[i], dt, 1);
        }
}

static const ops_test TESTS[] = {
    {ST_BN, "bn", bns},
};
OPS_FAMILY(OPS_BN, "bn.cu", TESTS);
