/* ops_check_linear.c: ops_check's fully connected layers (linear_fwd, linear_bwd and the planning op
 * linear_scratch: src/nn/cuda/linear_cublas.c). The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ops_check.h"

static void test_linear(int n, int in, int out, int bias, int dt)
{
    if (!unit("linear n%d %d>%d%s %s", n, in, out, bias ? " bias" : "", DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d %d>%d%s", n, in, out, bias ? " bias" : "");
    const int64_t nx = (int64_t)n * in, ny = (int64_t)n * out, nw = (int64_t)out * in;
    const dt_dtype T = ty(dt);
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, 1 / sqrt(in), dt), *b = h_randn(out, 0, 0.5, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, out, dt);
    float *y = h_new(ny);
    void *Dy = d_poisoned(ny, dt);
    plan_scratch(DEV->linear_scratch(n, in, out, T));
    REF->linear_fwd(n, in, out, S32, x, w, bias ? b : NULL, y);
    DEV->linear_fwd(n, in, out, T, Dx, Dw, bias ? Db : NULL, Dy);
    check_row(dt, dt, shape, Dy, y, ny, M_RED, "linear_fwd");

    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    /* variants: (dx wanted, acc_dx, acc_params) */
    static const int V[][3] = {{1, 0, 0}, {1, 1, 1}, {0, 0, 0}};
    for (size_t k = 0; k < 3; k++) {
        const int want_dx = V[k][0], adx = V[k][1], ap = V[k][2];
        float *dx = NULL, *dw, *db = NULL;
        void *Ddx = NULL, *Ddw, *Ddb = NULL;
        if (want_dx) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = adx ? h_copy(p0, nx) : h_new(nx);
            Ddx = adx ? d_from(p0, nx, dt) : d_poisoned(nx, dt);
        }
        float *pw = h_randn(nw, 0, 1, dt), *pb = h_randn(out, 0, 1, dt);
        dw = ap ? h_copy(pw, nw) : h_new(nw);
        Ddw = ap ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        if (bias) {
            db = ap ? h_copy(pb, out) : h_new(out);
            Ddb = ap ? d_from(pb, out, dt) : d_poisoned(out, dt);
        }
        REF->linear_bwd(n, in, out, S32, x, w, dy, dx, dw, db, adx, ap);
        DEV->linear_bwd(n, in, out, T, Dx, Dw, Ddy, Ddx, Ddw, Ddb, adx, ap);
        const char *tag = !want_dx ? " (dx NULL)" : adx ? " acc" : "";
        if (want_dx) {
            check_row(dt, dt, shape, Ddx, dx, nx, M_RED, "linear_bwd%s dx", tag);
        }
        check_row(dt, dt, shape, Ddw, dw, nw, M_RED, "linear_bwd%s dw", tag);
        if (bias) {
            check_row(dt, dt, shape, Ddb, db, out, M_RED, "linear_bwd%s db", tag);
        }
    }
    planned_row("linear_scratch reserved, ops allocate nothing", dt, shape);
    release();
}

static void linears(int dt)
{
    if (QUICK) {
        if (dt == F32)
            test_linear(5, 33, 17, 1, F32);
        return;
    }
    test_linear(37, 512, 1000, 1, dt); /* resnet's fc */
    test_linear(16, 300, 129, 0, dt);
    test_linear(3, 2048, 10, 1, dt);
}

static const ops_test TESTS[] = {
    {ST_MISC, "linear", linears},
};
OPS_FAMILY(OPS_LINEAR, "linear_cublas.c", TESTS);
