/* ops_check_pool.c: ops_check's pooling (maxpool_fwd, maxpool_bwd, avgpool_fwd, avgpool_bwd:
 * src/nn/cuda/pool.cu). The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

typedef struct pool_case {
    const char *name;
    int n, h, w, c, k, s, p;
    int values; /* 0: N(0,1); 1: ties from {-1, -0.5, 0, 0.5, 1}; 2: all negative ties */
} pool_case;

static const pool_case MAXPOOL_CASES[] = {
    {"3x3/2 p1 odd", 2, 17, 17, 24, 3, 2, 1, 0},
    {"3x3/2 p1 resnet", 2, 32, 32, 64, 3, 2, 1, 0},
    {"3x3/1 p1", 1, 9, 9, 8, 3, 1, 1, 0},
    {"2x2/2", 2, 16, 16, 16, 2, 2, 0, 0},
    {"2x2/2 odd (floor)", 2, 15, 15, 12, 2, 2, 0, 0},
    {"3x3/2 p1 ties", 2, 17, 17, 16, 3, 2, 1, 1},
    {"3x3/2 p1 negative ties", 2, 16, 16, 8, 3, 2, 1, 2},
};

static void test_maxpool(const pool_case *pc, int dt)
{
    if (!unit("maxpool [%s] %s", pc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    dt_pool_desc d;
    if (dt_pool_desc_set_max(&d, pc->n, pc->h, pc->w, pc->c, pc->k, pc->s, pc->p) != 0)
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d -> %dx%d", d.n, d.h, d.w, d.c, d.oh, d.ow);
    dt_pool_desc dd = d; /* the device's: x, y and their gradients of the row's type */
    dd.xt = dd.yt = ty(dt);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    const int overlap = d.kh > d.sh || d.kw > d.sw;
    float *x = h_randn(nx, 0, 1, dt);
    if (pc->values)
        for (int64_t i = 0; i < nx; i++)
            x[i] = pc->values == 1 ? (float)((int)dt_rng_below(&RNG, 5) - 2) * 0.5f
                                   : -1.0f - (float)dt_rng_below(&RNG, 3);
    float *y = h_new(ny);
    void *Dx = d_from(x, nx, dt), *Dy = d_poisoned(ny, dt);
    uint8_t *am = hold(malloc((size_t)ny), 0), *Dam = d_poisoned_u8(ny);
    REF->maxpool_fwd(&d, x, y, am);
    DEV->maxpool_fwd(&dd, Dx, Dy, Dam);
    check_row(dt, dt, shape, Dy, y, ny, M_EXACT, "maxpool_fwd y [%s]", pc->name);
    snprintf(name, sizeof name, "maxpool_fwd argmax [%s]", pc->name);
    cmp_u8(name, dt, shape, d_result_u8(Dam, ny), am, ny);

    /* backward from the reference's window positions (checked above) */
    uint8_t *Damr = d_bytes((size_t)ny);
    DEV->mem_put(Damr, am, (size_t)ny);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx;
        void *Ddx;
        if (acc) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = h_copy(p0, nx);
            Ddx = d_from(p0, nx, dt);
        } else {
            dx = h_new(nx);
            Ddx = d_poisoned(nx, dt);
        }
        REF->maxpool_bwd(&d, dy, am, dx, acc);
        DEV->maxpool_bwd(&dd, Ddy, Damr, Ddx, acc);
        snprintf(name, sizeof name, "maxpool_bwd%s [%s]", acc ? " acc" : "", pc->name);
        /* overlapping windows sum up to 4 (3x3/2) or 9 (3x3/1) values in an unspecified order */
        check_row(dt, dt, shape, Ddx, dx, nx, overlap ? M_ELT : M_EXACT, "%s", name);
    }
    release();
}

typedef struct avg_case {
    const char *name;
    int n, h, w, c, oh, ow;
} avg_case;

static const avg_case AVGPOOL_CASES[] = {
    {"7x7 -> 1x1 (resnet)", 4, 7, 7, 512, 1, 1},
    {"14x14 -> 7x7", 2, 14, 14, 32, 7, 7},
    {"10x10 -> 7x7 (uneven, overlapping)", 2, 10, 10, 16, 7, 7},
    {"6x6 -> 6x6 (identity, alexnet)", 2, 6, 6, 24, 6, 6},
    {"5x3 -> 2x2", 3, 5, 3, 9, 2, 2},
};

static void test_avgpool(const avg_case *ac, int dt)
{
    if (!unit("avgpool [%s] %s", ac->name, DTYPE_NAME[dt]))
        return;
    char shape[64];
    dt_pool_desc d;
    if (dt_pool_desc_set_adaptive(&d, ac->n, ac->h, ac->w, ac->c, ac->oh, ac->ow) != 0)
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d -> %dx%d", d.n, d.h, d.w, d.c, d.oh, d.ow);
    dt_pool_desc dd = d; /* the device's: x, y and their gradients of the row's type */
    dd.xt = dd.yt = ty(dt);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    float *x = h_randn(nx, 0.5, 1, dt), *y = h_new(ny);
    void *Dx = d_from(x, nx, dt), *Dy = d_poisoned(ny, dt);
    REF->avgpool_fwd(&d, x, y);
    DEV->avgpool_fwd(&dd, Dx, Dy);
    check_row(dt, dt, shape, Dy, y, ny, M_RED, "avgpool_fwd [%s]", ac->name);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx;
        void *Ddx;
        if (acc) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = h_copy(p0, nx);
            Ddx = d_from(p0, nx, dt);
        } else {
            dx = h_new(nx);
            Ddx = d_poisoned(nx, dt);
        }
        REF->avgpool_bwd(&d, dy, dx, acc);
        DEV->avgpool_bwd(&dd, Ddy, Ddx, acc);
        check_row(dt, dt, shape, Ddx, dx, nx, M_ELT, "avgpool_bwd%s [%s]", acc ? " acc" : "", ac->name);
    }
    release();
}

/* --quick: the first case of each (resnet's max pool, resnet's average pool) */
static void maxpools(int dt_unused)
{
    (void)dt_unused;
    const size_t n_max = QUICK ? 1 : sizeof MAXPOOL_CASES / sizeof MAXPOOL_CASES[0];
    for (size_t i = 0; i < n_max; i++)
        ALL_DTYPES test_maxpool(&MAXPOOL_CASES[i], dt);
}

static void avgpools(int dt_unused)
{
    (void)dt_unused;
    const size_t n_avg = QUICK ? 1 : sizeof AVGPOOL_CASES / sizeof AVGPOOL_CASES[0];
    for (size_t i = 0; i < n_avg; i++)
        ALL_DTYPES test_avgpool(&AVGPOOL_CASES[i], dt);
}

static const ops_test TESTS[] = {
    {ST_POOL, "maxpool", maxpools},
    {ST_POOL, "avgpool", avgpools},
};
OPS_FAMILY(OPS_POOL, "pool.cu", TESTS);
