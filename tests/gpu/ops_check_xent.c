/* ops_check_xent.c: ops_check's softmax cross-entropy (xent and its planning op xent_scratch:
 * src/nn/cuda/linear.cu). The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_check.h"

/* labels and logits arranged so that every kind of row counts: i % 4 == 1, the label is the row's
 * (first) largest logit (top-1); 2, the label's logit ties the largest (top-1: a tie counts for the
 * label); 3, exactly one logit above the label's (top-5, not top-1); 0, as drawn (mostly misses) */
static void xent_arrange(int n, int k, float *z, int32_t *labels)
{
    for (int i = 0; i < n; i++) {
        float *r = z + (int64_t)i * k;
        int a = 0;
        for (int j = 1; j < k; j++)
            if (r[j] > r[a])
                a = j;
        if (i % 4 == 1) {
            labels[i] = a;
        } else if (i % 4 == 2) {
            r[labels[i]] = r[a];
        } else if (i % 4 == 3 && k > 1) {
            if (labels[i] == a)
                labels[i] = (a + 1) % k;
            r[labels[i]] = r[a];
            r[a] += 1.0f;
        }
    }
}

static int32_t *d_labels(const int32_t *labels, int n)
{
    int32_t *d = d_bytes((size_t)n * sizeof(int32_t));
    DEV->mem_put(d, labels, (size_t)n * sizeof(int32_t));
    return d;
}


static void test_xent(int n, int k, float eps, int dt)
{
    if (!unit("xent n%d k%d eps%g %s", n, k, (double)eps, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d k%d eps %g", n, k, (double)eps);
    const int64_t nz = (int64_t)n * k;
    const dt_dtype T = ty(dt);
    float *z = h_randn(nz, 0, 3, dt), *g = h_new(nz);
    void *Dg = d_poisoned(nz, dt);
    int32_t *labels = hold(malloc((size_t)n * sizeof(int32_t)), 0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)dt_rng_below(&RNG, (uint64_t)k);
    xent_arrange(n, k, z, labels);
    h_round(z, nz, dt);
    void *Dz = d_from(z, nz, dt);
    int32_t *Dl = d_labels(labels, n); /* labels are device memory */
    dt_scalars hs = s_metrics();
    dt_scalars *Ds = d_scalars(&hs);
    plan_scratch(DEV->xent_scratch(n, k));
    REF->xent(n, k, S32, z, labels, eps, g, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, Dg, Ds);
    cmp_scalar("xent loss", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    cmp_scalars("xent scalars (sums, hits, rows, flag)", dt, shape, Ds, &hs, 1);
    check_row(dt, dt, shape, Dg, g, nz, M_RED, "xent dlogits");
    /* again on the same blocks, without dlogits: the loss as before, the sums added to again */
    REF->xent(n, k, S32, z, labels, eps, NULL, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, NULL, Ds);
    cmp_scalar("xent loss (dlogits NULL)", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    cmp_scalars("xent scalars (dlogits NULL, added)", dt, shape, Ds, &hs, 1);
    /* the loss scaler's factor from the block: dlogits times scale_f, the loss as it was */
    const float sf = 65536.0f;
    hs.scale_f = sf;
    d_scalars_set(Ds, offsetof(dt_scalars, scale_f), &sf, sizeof sf);
    float *gs = h_new(nz);
    void *Dgs = d_poisoned(nz, dt);
    REF->xent(n, k, S32, z, labels, eps, gs, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, Dgs, Ds);
    cmp_scalar("xent loss (scale 65536)", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    check_row(dt, dt, shape, Dgs, gs, nz, M_RED, "xent dlogits scale 65536");
    planned_row("xent_scratch reserved, ops allocate nothing", dt, shape);
    release();
}

/* rows holding NaN, +inf and -inf: each a miss counted in nonfinite_rows, the mean loss NaN, which
 * sets the overflow flag; the other rows' gradients as usual */
static void test_xent_nonfinite(int dt)
{
    if (!unit("xent non-finite %s", DTYPE_NAME[dt]))
        return;
    const int n = 9, k = 13;
    const int64_t nz = (int64_t)n * k;
    const char *shape = "n9 k13: NaN, inf, -inf rows";
    float *z = h_randn(nz, 0, 3, dt), *g = h_new(nz);
    void *Dg = d_poisoned(nz, dt);
    int32_t *labels = hold(malloc((size_t)n * sizeof(int32_t)), 0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)dt_rng_below(&RNG, (uint64_t)k);
    xent_arrange(n, k, z, labels);
    z[2 * k + 5] = NAN;
    z[5 * k + 0] = INFINITY;
    z[6 * k + 3] = -INFINITY;
    h_round(z, nz, dt);
    void *Dz = d_from(z, nz, dt);
    int32_t *Dl = d_labels(labels, n);
    dt_scalars hs = s_metrics();
    const int64_t nonfinite0 = hs.nonfinite_rows;
    dt_scalars *Ds = d_scalars(&hs);
    plan_scratch(DEV->xent_scratch(n, k));
    REF->xent(n, k, S32, z, labels, 0.1f, g, &hs);
    DEV->xent(n, k, ty(dt), Dz, Dl, 0.1f, Dg, Ds);
    cmp_scalars("xent non-finite rows: scalars", dt, shape, Ds, &hs, 1);
    const dt_scalars got = d_scalars_get(Ds);
    const int pass = LIST || (got.agree[DT_AGREE_OVERFLOW] == 1 && hs.agree[DT_AGREE_OVERFLOW] == 1 &&
                              got.nonfinite_rows == nonfinite0 + 3 && hs.nonfinite_rows == nonfinite0 + 3 &&
                              isnan(got.loss) && isnan(hs.loss));
    row("xent non-finite rows: flag, count, NaN loss", DTYPE_NAME[dt], shape, 0, 0, M_EXACT, 0, pass);
    if (!pass) {
        print_scalars("got ", &got);
        print_scalars("want", &hs);
    }
    check_row(dt, dt, shape, Dg, g, nz, M_RED, "xent non-finite rows: dlogits");
    release();
}

static void xents(int dt)
{
    if (QUICK) {
        if (dt == F32) {
            test_xent(5, 17, 0.1f, F32);
            test_xent_nonfinite(F32);
        }
        return;
    }
    test_xent(37, 1000, 0.0f, dt);
    test_xent(37, 1000, 0.1f, dt);
    test_xent(256, 10, 0.1f, dt);
    test_xent_nonfinite(dt);
}

static const ops_test TESTS[] = {
    {ST_MISC, "xent", xents},
};
OPS_FAMILY(OPS_XENT, "linear.cu", TESTS);
