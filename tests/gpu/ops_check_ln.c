/* ops_check_ln.c: ops_check's layer norm (ln_fwd, ln_bwd: src/nn/cuda/ln.cu). The rules are in
 * ops_check.c's top comment. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "ops_check.h"

typedef struct ln_case {
    const char *name;
    int64_t rows;
    int c;
    float eps;
    int o3; /* fp16/bf16: also with the parameters and their gradients of the row's type */
} ln_case;

/* rows of up to 1024 values run a warp a row on the device, longer ones a block a row */
static const ln_case LN_CASES[] = {
    {"rows 6272 c96 (convnext)", 6272, 96, 1e-6f, 1},
    {"rows 1001 c37 (odd)", 1001, 37, 1e-5f, 1},
    {"rows 394 c768 (vit)", 394, 768, 1e-6f, 0},
    {"rows 98 c1500 (block a row)", 98, 1500, 1e-5f, 1},
    {"rows 3 c4100", 3, 4100, 1e-5f, 0},
    {"rows 7 c1", 7, 1, 1e-5f, 0},
};
static const ln_case LN_QUICK = {"rows 200 c37 (quick)", 200, 37, 1e-5f, 0};

/* ln_fwd and ln_bwd: x, y, dx, dy of the row's type dt, the parameters and their gradients of pdt (fp32,
 * or the row's type: O3), saved fp32; the backward on each side's own saved statistics (as a model
 * runs it), with both flags, each flag alone, and dx NULL */
static void test_ln(const ln_case *lc, int dt, int o3)
{
    if (!unit("ln [%s] %s%s", lc->name, DTYPE_NAME[dt], o3 ? " O3" : ""))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "%s%s", lc->name, o3 ? ", O3" : "");
    const int64_t rows = lc->rows, n = rows * lc->c;
    const int c = lc->c, pdt = o3 ? dt : F32;
    const dt_dtype T = ty(dt), P = ty(pdt);
    plan_scratch(0); /* no planning op: the ops need no scratch */
    /* each row with its own offset and scale (the variance must not come from cancellation) */
    float *off = h_uniform(rows, -4, 4), *sc = h_uniform(rows, 0.2, 3), *x = h_randn(n, 0, 1, F32);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * sc[i / c] + off[i / c];
    h_round(x, n, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);
    float *y = h_new(n), *saved = h_new(2 * rows);
    void *Dy = d_poisoned(n, dt);
    float *Dsaved = d_poisoned(2 * rows, F32);
    REF->ln_fwd(rows, c, lc->eps, x, S32, gamma, beta, S32, y, S32, saved);
    DEV->ln_fwd(rows, c, lc->eps, Dx, T, Dg, Db, P, Dy, T, Dsaved);
    check_row(dt, dt, shape, Dy, y, n, M_RED, "ln_fwd y");
    const float *got_saved = d_result(Dsaved, 2 * rows, F32);
    cmp_f32_as("ln_fwd saved mean", dt, F32, shape, got_saved, saved, rows, M_RED);
    cmp_f32_as("ln_fwd saved rstd", dt, F32, shape, got_saved + rows, saved + rows, rows, M_RED);

    float *dy = h_randn(n, 0, 1, dt);
    void *Ddy = d_from(dy, n, dt);
    static const struct {
        const char *name;
        int acc_dx, acc_params, dx;
    } v[] = {{"ln_bwd", 0, 0, 1},
             {"ln_bwd acc", 1, 1, 1},
             {"ln_bwd acc_dx only", 1, 0, 1},
             {"ln_bwd acc_params only", 0, 1, 1},
             {"ln_bwd (dx NULL)", 0, 0, 0}};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        /* an accumulating output starts from the same random values on both sides, an overwritten
         * one from zeros (reference) and the poison (device) */
        float *dx = v[k].acc_dx ? h_randn(n, 0, 1, dt) : h_new(n);
        float *dg = v[k].acc_params ? h_randn(c, 0, 1, pdt) : h_new(c);
        float *db = v[k].acc_params ? h_randn(c, 0, 1, pdt) : h_new(c);
        void *Ddx = v[k].acc_dx ? d_from(dx, n, dt) : d_poisoned(n, dt);
        void *Ddg = v[k].acc_params ? d_from(dg, c, pdt) : d_poisoned(c, pdt);
        void *Ddb = v[k].acc_params ? d_from(db, c, pdt) : d_poisoned(c, pdt);
        REF->ln_bwd(rows, c, x, S32, gamma, S32, saved, dy, S32, v[k].dx ? dx : NULL, dg, db, v[k].acc_dx,
                    v[k].acc_params);
        DEV->ln_bwd(rows, c, Dx, T, Dg, P, Dsaved, Ddy, T, v[k].dx ? Ddx : NULL, Ddg, Ddb, v[k].acc_dx,
                    v[k].acc_params);
        if (v[k].dx) {
            check_row(dt, dt, shape, Ddx, dx, n, M_RED, "%s dx", v[k].name);
        }
        check_row(dt, pdt, shape, Ddg, dg, c, M_RED, "%s dgamma", v[k].name);
        check_row(dt, pdt, shape, Ddb, db, c, M_RED, "%s dbeta", v[k].name);
    }
    release();
    planned_row("ln_fwd, ln_bwd allocate nothing", dt, shape);
}

static void lns(int dt_unused)
{
    (void)dt_unused;
    if (QUICK) {
        ALL_DTYPES test_ln(&LN_QUICK, dt, 0);
        return;
    }
    for (size_t i = 0; i < sizeof LN_CASES / sizeof LN_CASES[0]; i++)
        ALL_DTYPES
        {
            test_ln(&LN_CASES[i], dt, 0);
            if (dt != F32 && LN_CASES[i].o3)
                test_ln(&LN_CASES[i], dt, 1);
        }
}

static const ops_test TESTS[] = {
    {ST_LN, "ln", lns},
};
OPS_FAMILY(OPS_LN, "ln.cu", TESTS);
