/* ops_check_act.c: ops_check's activations (act_fwd, act_bwd) and squeeze-and-excitation's channel-wise
 * scale (chanmul_fwd, chanmul_bwd): src/nn/cuda/act.cu. The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ops_check.h"

static const char *const ACT_NAMES[] = {"relu6", "hardsigmoid", "hardswish", "sigmoid", "silu", "gelu"};
_Static_assert(sizeof ACT_NAMES / sizeof ACT_NAMES[0] == DT_ACT_COUNT, "one name per enum dt_act");

/* act's inputs beyond the random ones (rounded to the row's type with them): the kinks of relu6,
 * hardsigmoid and hardswish and their neighbours (one fp32 ulp, 1/32), where sigmoid, silu and gelu
 * saturate or underflow, a subnormal, and the non-finite values */
static const float ACT_SPECIAL[] = {
    -6.0f, -3.0f, -0.0f, 0.0f, 3.0f, 6.0f,
    -0x1.800002p+1f, -0x1.7ffffep+1f, 0x1.7ffffep+1f, 0x1.800002p+1f, 0x1.7ffffep+2f, 0x1.800002p+2f, /* 1 ulp */
    -3.03125f, -2.96875f, -0.03125f, 0.03125f, 2.96875f, 3.03125f, 5.96875f, 6.03125f,               /* 1/32 */
    9.5f, -9.5f, 15.0f, -15.0f, 16.0f, -16.0f, 17.0f, -17.0f, 20.0f, -20.0f, 88.0f, -88.0f, 90.0f, -90.0f,
    0x1p-149f, -0x1p-149f, NAN, INFINITY, -INFINITY,
};
#define N_ACT_SPECIAL ((int64_t)(sizeof ACT_SPECIAL / sizeof ACT_SPECIAL[0]))
/* the last values (NE % 8 = 3 of them are the scalar tail) */
static const float ACT_TAIL[] = {NAN, -3.0f, 6.0f, 3.0f, 0.0f};

/* act_fwd (also in place) and act_bwd (overwriting, accumulating) for each activation, on NE values:
 * N(0, 16) with ACT_SPECIAL at the start (the 8-wide path) and ACT_TAIL at the end (the scalar tail) */
static void test_act(int dt)
{
    if (!unit("act %s", DTYPE_NAME[dt]))
        return;
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    for (int act = 0; act < DT_ACT_COUNT; act++) {
        float *x = h_randn(NE, 0, 4, dt);
        if (!LIST) {
            for (int64_t i = 0; i < N_ACT_SPECIAL; i++)
                x[i] = ACT_SPECIAL[i];
            for (int64_t i = 0; i < (int64_t)(sizeof ACT_TAIL / sizeof ACT_TAIL[0]); i++)
                x[NE - 1 - i] = ACT_TAIL[i];
            h_round(x, NE, dt);
        }
        float *y = h_new(NE);
        void *Dx = d_from(x, NE, dt), *Dy = d_poisoned(NE, dt);
        REF->act_fwd(NE, act, S32, x, y);
        DEV->act_fwd(NE, act, T, Dx, Dy);
        check_row(dt, dt, shape, Dy, y, NE, M_ELT, "act_fwd %s", ACT_NAMES[act]);
        void *Dxi = d_from(x, NE, dt); /* y = x, as the contract allows */
        DEV->act_fwd(NE, act, T, Dxi, Dxi);
        check_row(dt, dt, shape, Dxi, y, NE, M_ELT, "act_fwd %s in place", ACT_NAMES[act]);

        float *dy = h_randn(NE, 0, 1, dt), *dx = h_new(NE);
        void *Ddy = d_from(dy, NE, dt), *Ddx = d_poisoned(NE, dt);
        REF->act_bwd(NE, act, S32, x, dy, dx, 0);
        DEV->act_bwd(NE, act, T, Dx, Ddy, Ddx, 0);
        check_row(dt, dt, shape, Ddx, dx, NE, M_ELT, "act_bwd %s", ACT_NAMES[act]);
        float *prior = h_randn(NE, 0, 1, dt), *dxa = h_copy(prior, NE);
        void *Ddxa = d_from(prior, NE, dt);
        REF->act_bwd(NE, act, S32, x, dy, dxa, 1);
        DEV->act_bwd(NE, act, T, Dx, Ddy, Ddxa, 1);
        check_row(dt, dt, shape, Ddxa, dxa, NE, M_ELT, "act_bwd %s acc", ACT_NAMES[act]);
        release();
    }
}

typedef struct chanmul_case {
    const char *name;
    int n;
    int64_t hw;
    int c;
} chanmul_case;

static const chanmul_case CHANMUL_CASES[] = {
    {"se 7x7, 8-wide", 3, 49, 64},
    {"c 2048 > 1024", 2, 49, 2048},
    {"c 1030 > 1024, not 8k", 2, 25, 1030},
    {"hw 1", 5, 1, 200},
    {"hw 1, c 3", 3, 1, 3},
};

/* chanmul_fwd, and chanmul_bwd with both outputs, both accumulating, and each alone (the other NULL);
 * x, s, y and their gradients of the row's type, then (sf: fp16/bf16 rows) s and ds fp32 */
static void test_chanmul(const chanmul_case *cc, int dt, int sf)
{
    if (!unit("chanmul [%s] %s%s", cc->name, DTYPE_NAME[dt], sf ? " s32" : ""))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d hw%lld c%d [%s]", cc->n, (long long)cc->hw, cc->c, cc->name);
    const int n = cc->n, c = cc->c, st = sf ? F32 : dt;
    const int64_t hw = cc->hw, nx = (int64_t)n * hw * c, ns = (int64_t)n * c;
    const char *tag = sf ? " (s fp32)" : "";
    float *x = h_randn(nx, 0, 1, dt), *s = h_uniform(ns, 0, 1), *y = h_new(nx);
    h_round(s, ns, st); /* a sigmoid's outputs, in (0, 1) */
    void *Dx = d_from(x, nx, dt), *Ds = d_from(s, ns, st), *Dy = d_poisoned(nx, dt);
    REF->chanmul_fwd(n, hw, c, x, S32, s, S32, y, S32);
    DEV->chanmul_fwd(n, hw, c, Dx, ty(dt), Ds, ty(st), Dy, ty(dt));
    check_row(dt, dt, shape, Dy, y, nx, M_ELT, "chanmul_fwd%s", tag);

    float *dy = h_randn(nx, 0, 1, dt);
    void *Ddy = d_from(dy, nx, dt);
    /* variants: (dx wanted, ds wanted, accumulate both) */
    static const int V[][3] = {{1, 1, 0}, {1, 1, 1}, {0, 1, 0}, {1, 0, 0}};
    static const char *const VTAG[] = {"", " acc", " (dx NULL)", " (ds NULL)"};
    for (size_t k = 0; k < sizeof V / sizeof V[0]; k++) {
        const int want_dx = V[k][0], want_ds = V[k][1], acc = V[k][2];
        float *dx = NULL, *ds = NULL;
        void *Ddx = NULL, *Dds = NULL;
        if (want_dx) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = acc ? h_copy(p0, nx) : h_new(nx);
            Ddx = acc ? d_from(p0, nx, dt) : d_poisoned(nx, dt);
        }
        if (want_ds) {
            float *p0 = h_randn(ns, 0, 1, st);
            ds = acc ? h_copy(p0, ns) : h_new(ns);
            Dds = acc ? d_from(p0, ns, st) : d_poisoned(ns, st);
        }
        REF->chanmul_bwd(n, hw, c, x, S32, s, S32, dy, S32, dx, ds, acc, acc);
        DEV->chanmul_bwd(n, hw, c, Dx, ty(dt), Ds, ty(st), Ddy, ty(dt), Ddx, Dds, acc, acc);
        if (want_dx) {
            check_row(dt, dt, shape, Ddx, dx, nx, M_ELT, "chanmul_bwd%s%s dx", VTAG[k], tag);
        }
        if (want_ds) {
            check_row(dt, st, shape, Dds, ds, ns, M_RED, "chanmul_bwd%s%s ds", VTAG[k], tag);
        }
    }
    release();
}

static void acts(int dt_unused)
{
    (void)dt_unused;
    ALL_DTYPES test_act(dt);
}

/* --quick: the first case, and the one whose rows span two chunks of ds and leave a tail */
static void chanmuls(int dt_unused)
{
    (void)dt_unused;
    for (size_t i = 0; i < sizeof CHANMUL_CASES / sizeof CHANMUL_CASES[0]; i++)
        if (!QUICK || i == 0 || i == 2)
            ALL_DTYPES
            {
                test_chanmul(&CHANMUL_CASES[i], dt, 0);
                if (dt != F32)
                    test_chanmul(&CHANMUL_CASES[i], dt, 1);
            }
}

static const ops_test TESTS[] = {
    {ST_ACT, "act", acts},
    {ST_ACT, "chanmul", chanmuls},
};
OPS_FAMILY(OPS_ACT, "act.cu", TESTS);
