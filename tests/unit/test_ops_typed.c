/* test_ops_typed.c: the oracle of typed storage (nn/backend.h, "Types"). An op on fp16/bf16 storage
 * must give, bit for bit, what the same op gives on fp32 arrays holding the same values, followed by
 * rounding (nearest even) every output it wrote to that output's type; with accumulate, the stored
 * value is the rounded fp32 sum of the old value and the result. For each CPU backend (the
 * reference and oneDNN's) and each reduced type, every op runs twice on the same random values
 * (representable in the reduced type): (a) on typed storage (uint16_t arrays for reduced operands,
 * float arrays for fp32 ones) and (b) with every operand fp32; (b)'s outputs, rounded to their
 * destinations' types, must equal (a)'s bit for bit (memcmp). A negative control shows the
 * comparison is sensitive: without rounding (b), conv's output differs. All of this with the
 * CPU's bf16 convolutions widened (dt_cpu_set_half_kernels(0)). Then, where this CPU has oneDNN's
 * own bf16 kernels, the conv rows again on them: the same products summed in another order, so each
 * result within one bf16 rounding of (b)'s rounded (|a - b| <= 2^-7 |b| + 1e-4 on values near 1). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "ops_util.h"
#include "tap.h"
#include "util/half.h"

static const dt_backend *be;
static dt_dtype R;            /* the reduced type of this round: DT_FLOAT16 or DT_BFLOAT16 */
static long long n_compared;  /* elements compared bit for bit */
static const char *group = ""; /* what the current TAP line checks, for the mismatch report */
static int near;               /* 1: compare within one rounding of R, not bit for bit (oneDNN's bf16 kernels) */
static double near_worst;      /* near: the largest |a - b| / (2^-7 |b| + 1e-4) seen */
static long long near_differ;  /* near: results not equal bit for bit */

static void *amalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1)) {
        perror("posix_memalign");
        exit(99);
    }
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

/* fp32 values from storage of type t: what store_as (ops_util.h) stored, back */
static void widen(dt_dtype t, const void *src, int64_t n, float *dst)
{
    if (t == DT_FLOAT16)
        dt_f16_to_f32_n((size_t)n, src, dst);
    else if (t == DT_BFLOAT16)
        dt_bf16_to_f32_n((size_t)n, src, dst);
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* --- an operand of both runs: f for the fp32 op (b), h for the typed op (a), of type t ------------ */

typedef struct tens {
    dt_dtype t;
    int64_t n;
    float *f;
    void *h;
} tens;

/* h from f (f holding values of type t: exact) */
static void tsync(tens *x)
{
    store_as(x->t, x->f, x->n, x->h);
}

/* n random values in [lo, hi), made values of t */
static tens tmake(dt_dtype t, int64_t n, double lo, double hi)
{
    tens x = {t, n, amalloc((size_t)n * sizeof(float)), amalloc((size_t)n * tbytes(t))};
    for (int64_t i = 0; i < n; i++)
        x.f[i] = (float)(lo + (hi - lo) * dt_rng_uniform(&rng));
    if (t != DT_FLOAT32)
        dt_round_half(x.f, n, t == DT_BFLOAT16);
    tsync(&x);
    return x;
}

static void tfree(tens *x)
{
    free(x->f);
    free(x->h);
    x->f = NULL;
    x->h = NULL;
}

/* (a)'s output x->h against (b)'s x->f rounded to x->t, bit for bit; the first difference is reported */
static int same(const char *what, const tens *x)
{
    n_compared += x->n;
    void *e = amalloc((size_t)x->n * tbytes(x->t));
    store_as(x->t, x->f, x->n, e);
    int ok = memcmp(e, x->h, (size_t)x->n * tbytes(x->t)) == 0;
    if (near && !ok) { /* within one rounding of R: |a - b| <= 2^-7 |b| + 1e-4 */
        float *a = amalloc((size_t)x->n * sizeof(float));
        widen(x->t, x->h, x->n, a);
        ok = 1;
        for (int64_t i = 0; i < x->n; i++) {
            double r = fabs((double)a[i] - x->f[i]) / (ldexp(fabs((double)x->f[i]), -7) + 1e-4);
            near_differ += memcmp((char *)e + i * tbytes(x->t), (char *)x->h + i * tbytes(x->t), tbytes(x->t)) != 0;
            near_worst = r > near_worst || r != r ? r : near_worst;
            ok &= r <= 1;
        }
        free(a);
        free(e);
        if (!ok)
            tap_diag("MISMATCH %s: %s, %s (%s): beyond one rounding (worst %.2f of the bound)", group, what,
                     be->name, tname(x->t), near_worst);
        return ok;
    }
    if (!ok) {
        int64_t i = 0;
        size_t es = tbytes(x->t);
        while (i < x->n && memcmp((char *)e + i * es, (char *)x->h + i * es, es) == 0)
            i++;
        float got, want;
        widen(x->t, (char *)x->h + i * es, 1, &got);
        widen(x->t, (char *)e + i * es, 1, &want);
        if (x->t == DT_FLOAT32)
            tap_diag("MISMATCH %s: %s, %s (fp32) element %lld of %lld: typed op %.9g, fp32 op %.9g", group, what,
                     be->name, (long long)i, (long long)x->n, got, want);
        else
            tap_diag("MISMATCH %s: %s, %s (%s) element %lld of %lld: typed op 0x%04x (%.9g), fp32 op %.9g rounded "
                     "0x%04x (%.9g)",
                     group, what, be->name, tname(x->t), (long long)i, (long long)x->n, ((uint16_t *)x->h)[i], got,
                     x->f[i], ((uint16_t *)e)[i], want);
    }
    free(e);
    return ok;
}

/* bytes compared as they are (masks, argmax, saved statistics) */
static int same_bytes(const char *what, const void *a, const void *b, size_t n)
{
    n_compared += (long long)n;
    if (memcmp(a, b, n) == 0)
        return 1;
    size_t i = 0;
    while (((const uint8_t *)a)[i] == ((const uint8_t *)b)[i])
        i++;
    tap_diag("MISMATCH %s: %s, %s: byte %zu of %zu differs", group, what, be->name, i, n);
    return 0;
}

/* --- convolutions -------------------------------------------------------------------------------- */

/* Both runs of the three conv ops on one shape. bias 1: with bias, dbias, and bwd_data accumulating
 * (dx_accumulate set before conv_workspace); bias 0: without. neg: also the negative control. */
static int conv_case(int n, int h, int w, int c, int oc, int k, int s, int p, int bias, int neg)
{
    dt_conv_desc dt, df;
    if (dt_conv_desc_set(&dt, n, h, w, c, oc, k, k, s, s, p, p, 1, 1, 1)) {
        tap_diag("conv desc failed");
        return 0;
    }
    dt.bias = bias;
    dt.dx_accumulate = bias;
    dt.t = R;
    df = dt;
    df.t = DT_FLOAT32;
    size_t wst = be->conv_workspace(&dt), wsf = be->conv_workspace(&df);
    if (wst < wsf)
        tap_diag("conv workspace of %s (%zu) below fp32's (%zu)", tname(R), wst, wsf);
    void *ws_t = amalloc(wst), *ws_f = amalloc(wsf);
    const int64_t nx = (int64_t)n * h * w * c, ny = (int64_t)n * dt.oh * dt.ow * oc, nw = (int64_t)oc * k * k * c;
    tens x = tmake(R, nx, -1, 1), wt = tmake(R, nw, -1, 1), b = tmake(R, oc, -1, 1), dy = tmake(R, ny, -1, 1);
    int ok = 1;

    tens y = tmake(R, ny, -1, 1); /* garbage that forward overwrites */
    be->conv_fwd(&dt, x.h, wt.h, bias ? b.h : NULL, y.h, ws_t);
    be->conv_fwd(&df, x.f, wt.f, bias ? b.f : NULL, y.f, ws_f);
    ok &= same(bias ? "conv_fwd +bias" : "conv_fwd", &y);
    if (neg) { /* the control: (b) not rounded must differ from (a) somewhere */
        float *yw = amalloc((size_t)ny * sizeof(float));
        widen(R, y.h, ny, yw);
        int64_t differ = 0;
        for (int64_t i = 0; i < ny; i++)
            differ += memcmp(&yw[i], &y.f[i], sizeof(float)) != 0;
        TAP_OK(differ > 0,
               "negative control, %s %s: conv fwd's typed output vs the fp32 op's NOT rounded differ in %lld of %lld "
               "elements (the comparison is sensitive)",
               tname(R), be->name, (long long)differ, (long long)ny);
        free(yw);
    }
    tfree(&y);

    for (int acc = 0; acc <= bias; acc++) {
        tens dx = tmake(R, nx, -1, 1);
        be->conv_bwd_data(&dt, dy.h, wt.h, dx.h, acc, ws_t);
        be->conv_bwd_data(&df, dy.f, wt.f, dx.f, acc, ws_f);
        ok &= same(acc ? "conv_bwd_data accumulate" : "conv_bwd_data", &dx);
        tfree(&dx);
    }
    for (int acc = 0; acc <= 1; acc++) {
        tens dw = tmake(R, nw, -1, 1), db = tmake(R, oc, -1, 1);
        be->conv_bwd_filter(&dt, x.h, dy.h, dw.h, bias ? db.h : NULL, acc, ws_t);
        be->conv_bwd_filter(&df, x.f, dy.f, dw.f, bias ? db.f : NULL, acc, ws_f);
        ok &= same(acc ? "conv_bwd_filter dw accumulate" : "conv_bwd_filter dw", &dw);
        if (bias)
            ok &= same(acc ? "conv_bwd_filter dbias accumulate" : "conv_bwd_filter dbias", &db);
        tfree(&dw);
        tfree(&db);
    }
    tfree(&x);
    tfree(&wt);
    tfree(&b);
    tfree(&dy);
    free(ws_t);
    free(ws_f);
    return ok;
}

static void check_conv(void)
{
    static const struct {
        int n, h, w, c, oc, k, s, p;
        const char *what;
    } cases[] = {
        {2, 6, 6, 5, 4, 3, 1, 1, "3x3 s1 p1"},
        {2, 5, 5, 6, 8, 1, 1, 0, "1x1"},
        {2, 7, 7, 4, 6, 3, 2, 1, "3x3 s2 p1"},
        {2, 6, 6, 4, 8, 1, 2, 0, "1x1 s2"},
        {1, 8, 8, 32, 32, 3, 1, 1, "3x3 32->32 (blocked kernels)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        group = "conv";
        int ok = 1;
        for (int bias = 1; bias >= 0; bias--)
            ok &= conv_case(cases[i].n, cases[i].h, cases[i].w, cases[i].c, cases[i].oc, cases[i].k, cases[i].s,
                            cases[i].p, bias, i == 0 && bias == 1);
        TAP_OK(ok,
               "%s %s%s: conv %s n%d %dx%dx%d->%d: fwd (+-bias), bwd data (accumulate 0/1), bwd filter (+-dbias, "
               "accumulate 0/1) %s the fp32 op on the same values, rounded",
               tname(R), be->name, near ? " (oneDNN's bf16 kernels)" : "", cases[i].what, cases[i].n, cases[i].h,
               cases[i].w, cases[i].c, cases[i].oc, near ? "within one bf16 rounding of" : "equal");
    }
}

/* --- batch norm ---------------------------------------------------------------------------------- */

/* relu 2: the residual block's tail (bn_add_relu_*), the residual of y's type */
static int bn_case(int64_t rows, int c, dt_dtype xt, dt_dtype yt, dt_dtype pt, int relu)
{
    const int tail = relu == 2;
    dt_bn_desc dt = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = xt, .yt = yt, .pt = pt}, df = dt;
    df.xt = df.yt = df.pt = DT_FLOAT32;
    if (be->reserve_scratch(be->bn_scratch(&dt)) || be->reserve_scratch(be->bn_scratch(&df)))
        return 0;
    const int64_t n = rows * c;
    int ok = 1;
    tens x = tmake(xt, n, -2, 3), gm = tmake(pt, c, 0.5, 1.5), bt = tmake(pt, c, -0.5, 0.5);
    tens rm = tmake(pt, c, -0.2, 0.2), rv = tmake(pt, c, 0.5, 2);
    tens y = tmake(yt, n, -1, 1), res = tmake(yt, n, -2, 2);
    tens saved = tmake(DT_FLOAT32, DT_BN_SAVED(c), 0, 1); /* h: the typed run's, f: the fp32 run's */
    if (tail) {
        be->bn_add_relu_fwd_train(&dt, x.h, gm.h, bt.h, res.h, yt, y.h, saved.h, rm.h, rv.h);
        be->bn_add_relu_fwd_train(&df, x.f, gm.f, bt.f, res.f, DT_FLOAT32, y.f, saved.f, rm.f, rv.f);
    } else {
        be->bn_fwd_train(&dt, x.h, gm.h, bt.h, y.h, saved.h, rm.h, rv.h, relu);
        be->bn_fwd_train(&df, x.f, gm.f, bt.f, y.f, saved.f, rm.f, rv.f, relu);
    }
    ok &= same("bn_fwd_train y", &y);
    ok &= same("bn_fwd_train saved", &saved);
    ok &= same("bn_fwd_train running_mean", &rm);
    ok &= same("bn_fwd_train running_var", &rv);
    tfree(&rm);
    tfree(&rv);

    rm = tmake(pt, c, -0.2, 0.2);
    rv = tmake(pt, c, 0.5, 2);
    if (tail) {
        be->bn_add_relu_fwd_infer(&dt, x.h, gm.h, bt.h, rm.h, rv.h, res.h, yt, y.h);
        be->bn_add_relu_fwd_infer(&df, x.f, gm.f, bt.f, rm.f, rv.f, res.f, DT_FLOAT32, y.f);
    } else {
        be->bn_fwd_infer(&dt, x.h, gm.h, bt.h, rm.h, rv.h, y.h, relu);
        be->bn_fwd_infer(&df, x.f, gm.f, bt.f, rm.f, rv.f, y.f, relu);
    }
    ok &= same("bn_fwd_infer y", &y);

    tens dy = tmake(yt, n, -1, 1), yout = tmake(yt, n, -1, 1); /* yout: the block output masking a tail's dy */
    for (int acc = 0; acc <= 1; acc++) {
        tens dx = tmake(xt, n, -1, 1), dg = tmake(pt, c, -1, 1), db = tmake(pt, c, -1, 1), dr = tmake(yt, n, -1, 1);
        /* both from the fp32 forward's saved statistics (the same values: compared above) */
        if (tail) {
            be->bn_add_relu_bwd(&dt, x.h, yout.h, dy.h, gm.h, saved.f, dx.h, dr.h, yt, dg.h, db.h, acc, acc, acc);
            be->bn_add_relu_bwd(&df, x.f, yout.f, dy.f, gm.f, saved.f, dx.f, dr.f, DT_FLOAT32, dg.f, db.f, acc, acc,
                                acc);
            ok &= same(acc ? "bn_add_relu_bwd dr accumulate" : "bn_add_relu_bwd dr", &dr);
        } else {
            be->bn_bwd(&dt, x.h, dy.h, relu, gm.h, saved.f, dx.h, dg.h, db.h, acc, acc);
            be->bn_bwd(&df, x.f, dy.f, relu, gm.f, saved.f, dx.f, dg.f, db.f, acc, acc);
        }
        ok &= same(acc ? "bn_bwd dx accumulate" : "bn_bwd dx", &dx);
        ok &= same(acc ? "bn_bwd dgamma accumulate" : "bn_bwd dgamma", &dg);
        ok &= same(acc ? "bn_bwd dbeta accumulate" : "bn_bwd dbeta", &db);
        tfree(&dx);
        tfree(&dg);
        tfree(&db);
        tfree(&dr);
    }
    tfree(&res);
    tfree(&yout);
    tfree(&x);
    tfree(&gm);
    tfree(&bt);
    tfree(&rm);
    tfree(&rv);
    tfree(&y);
    tfree(&saved);
    tfree(&dy);
    return ok;
}

static void check_bn(void)
{
    const struct {
        dt_dtype xt, yt, pt;
        const char *what;
    } combos[] = {{R, R, DT_FLOAT32, "O2"}, {R, DT_FLOAT32, DT_FLOAT32, "O1"}, {R, R, R, "O3"}};
    const int chans[] = {7, 300};
    group = "bn";
    for (size_t k = 0; k < 3; k++)
        for (int ci = 0; ci < 2; ci++) {
            int ok = 1;
            for (int relu = 0; relu <= 2; relu++)
                ok &= bn_case(2 * 5 * 5, chans[ci], combos[k].xt, combos[k].yt, combos[k].pt, relu);
            TAP_OK(ok,
                   "%s %s: bn 50x%d %s (x %s, y %s, params %s): fwd train (y, saved, running stats), fwd infer, bwd "
                   "(relu 0/1, accumulate 0/1; and bn+add+relu's, dr too) equal the fp32 op, rounded",
                   tname(R), be->name, chans[ci], combos[k].what, tname(combos[k].xt), tname(combos[k].yt),
                   tname(combos[k].pt));
        }
}

/* --- element-wise ops ---------------------------------------------------------------------------- */

#define NE 3001 /* over two tiles of 1024, not a multiple */

static void check_eltwise(void)
{
    int ok = 1;
    group = "relu";
    {
        tens x = tmake(R, NE, -1, 1), y = tmake(R, NE, -1, 1);
        be->relu_fwd(NE, R, x.h, y.h);
        be->relu_fwd(NE, DT_FLOAT32, x.f, y.f);
        ok &= same("relu_fwd", &y);
        tens yo = tmake(R, NE, -1, 1), dy = tmake(R, NE, -1, 1);
        for (int acc = 0; acc <= 1; acc++) {
            tens dx = tmake(R, NE, -1, 1);
            be->relu_bwd(NE, R, yo.h, dy.h, dx.h, acc);
            be->relu_bwd(NE, DT_FLOAT32, yo.f, dy.f, dx.f, acc);
            ok &= same(acc ? "relu_bwd accumulate" : "relu_bwd", &dx);
            tfree(&dx);
        }
        tfree(&x);
        tfree(&y);
        tfree(&yo);
        tfree(&dy);
    }
    TAP_OK(ok, "%s %s: relu fwd, bwd (accumulate 0/1) equal the fp32 op, rounded", tname(R), be->name);

    ok = 1;
    group = "add_fwd";
    {
        const dt_dtype ty[][3] = {{R, DT_FLOAT32, R}, {R, R, R}, {DT_FLOAT32, R, R}, {R, R, DT_FLOAT32}};
        for (int k = 0; k < 4; k++) {
            tens a = tmake(ty[k][0], NE, -1, 1), b = tmake(ty[k][1], NE, -1, 1), y = tmake(ty[k][2], NE, -1, 1);
            be->add_fwd(NE, a.h, ty[k][0], b.h, ty[k][1], y.h, ty[k][2]);
            be->add_fwd(NE, a.f, DT_FLOAT32, b.f, DT_FLOAT32, y.f, DT_FLOAT32);
            ok &= same("add_fwd", &y);
            tfree(&a);
            tfree(&b);
            tfree(&y);
        }
    }
    TAP_OK(ok, "%s %s: add_fwd (a, b, y) = (R, fp32, R), (R, R, R), (fp32, R, R), (R, R, fp32) equals the fp32 op, rounded",
           tname(R), be->name);

    static const char *const act_name[DT_ACT_COUNT] = {"relu6", "hardsigmoid", "hardswish", "sigmoid", "silu", "gelu"};
    for (int act = 0; act < DT_ACT_COUNT; act++) {
        ok = 1;
        group = act_name[act];
        tens x = tmake(R, NE, -8, 8), y = tmake(R, NE, -1, 1), dy = tmake(R, NE, -1, 1);
        static const float kinks[] = {-3.0f, 3.0f, 0.0f, 6.0f, -0.0f}; /* values of both reduced types */
        memcpy(x.f, kinks, sizeof kinks);
        tsync(&x);
        be->act_fwd(NE, act, R, x.h, y.h);
        be->act_fwd(NE, act, DT_FLOAT32, x.f, y.f);
        ok &= same("act_fwd", &y);
        for (int acc = 0; acc <= 1; acc++) {
            tens dx = tmake(R, NE, -1, 1);
            be->act_bwd(NE, act, R, x.h, dy.h, dx.h, acc);
            be->act_bwd(NE, act, DT_FLOAT32, x.f, dy.f, dx.f, acc);
            ok &= same(acc ? "act_bwd accumulate" : "act_bwd", &dx);
            tfree(&dx);
        }
        tfree(&x);
        tfree(&y);
        tfree(&dy);
        TAP_OK(ok, "%s %s: act %s fwd, bwd (accumulate 0/1) on [-8, 8] and the kinks equal the fp32 op, rounded",
               tname(R), be->name, act_name[act]);
    }

    ok = 1;
    group = "chanmul";
    {
        const int n = 3, c = 1100; /* two chunks of channels */
        const int64_t hw = 3, nx = n * hw * c, ns = (int64_t)n * c;
        /* (x, s, y): dx of x's type, ds of s's, dy of y's */
        const dt_dtype ty[][3] = {{R, DT_FLOAT32, R}, {R, R, R}, {DT_FLOAT32, R, R}, {R, R, DT_FLOAT32}};
        for (int k = 0; k < 4; k++) {
            const dt_dtype xt = ty[k][0], st = ty[k][1], yt = ty[k][2];
            tens x = tmake(xt, nx, -1, 1), sc = tmake(st, ns, -1, 1), y = tmake(yt, nx, -1, 1), dy = tmake(yt, nx, -1, 1);
            be->chanmul_fwd(n, hw, c, x.h, xt, sc.h, st, y.h, yt);
            be->chanmul_fwd(n, hw, c, x.f, DT_FLOAT32, sc.f, DT_FLOAT32, y.f, DT_FLOAT32);
            ok &= same("chanmul_fwd", &y);
            for (int acc = 0; acc <= 1; acc++)
                for (int with = 1; with <= 3; with++) { /* bits: dx, ds */
                    tens dx = tmake(xt, nx, -1, 1), ds = tmake(st, ns, -1, 1);
                    be->chanmul_bwd(n, hw, c, x.h, xt, sc.h, st, dy.h, yt, with & 1 ? dx.h : NULL,
                                    with & 2 ? ds.h : NULL, acc, acc);
                    be->chanmul_bwd(n, hw, c, x.f, DT_FLOAT32, sc.f, DT_FLOAT32, dy.f, DT_FLOAT32,
                                    with & 1 ? dx.f : NULL, with & 2 ? ds.f : NULL, acc, acc);
                    if (with & 1)
                        ok &= same(acc ? "chanmul_bwd dx accumulate" : "chanmul_bwd dx", &dx);
                    if (with & 2)
                        ok &= same(acc ? "chanmul_bwd ds accumulate" : "chanmul_bwd ds", &ds);
                    tfree(&dx);
                    tfree(&ds);
                }
            tfree(&x);
            tfree(&sc);
            tfree(&y);
            tfree(&dy);
        }
    }
    TAP_OK(ok,
           "%s %s: chanmul 3x3x1100 fwd, bwd (accumulate 0/1; dx, ds or both), (x, s, y) = (R, fp32, R), (R, R, R), "
           "(fp32, R, R), (R, R, fp32), equal the fp32 op, rounded",
           tname(R), be->name);

    ok = 1;
    group = "copy_grad";
    {
        const struct {
            dt_dtype st, dt;
            int acc;
        } cg[] = {{DT_FLOAT32, R, 0}, {DT_FLOAT32, R, 1}, {R, DT_FLOAT32, 1}, {R, DT_FLOAT32, 0}, {R, R, 1}, {R, R, 0}};
        for (size_t k = 0; k < sizeof cg / sizeof cg[0]; k++) {
            tens s = tmake(cg[k].st, NE, -1, 1), d = tmake(cg[k].dt, NE, -1, 1);
            be->copy_grad(NE, s.h, cg[k].st, d.h, cg[k].dt, cg[k].acc);
            be->copy_grad(NE, s.f, DT_FLOAT32, d.f, DT_FLOAT32, cg[k].acc);
            ok &= same("copy_grad", &d);
            tfree(&s);
            tfree(&d);
        }
    }
    TAP_OK(ok,
           "%s %s: copy_grad fp32->R (accumulate 0/1), R->fp32 (accumulate 1/0), R->R (accumulate 1/0) equals the "
           "fp32 op, rounded",
           tname(R), be->name);

    ok = 1;
    group = "fill/scale";
    {
        const float values[] = {0.1f, -3.3e-3f, 1e5f, 0.0f};
        for (int k = 0; k < 4; k++) {
            tens x = tmake(R, NE, -1, 1);
            be->fill(NE, R, values[k], x.h);
            be->fill(NE, DT_FLOAT32, values[k], x.f);
            ok &= same("fill", &x);
            tfree(&x);
        }
        const float a[] = {0.37f, -1024.0f, 1.0f / 1024};
        for (int k = 0; k < 3; k++) {
            tens x = tmake(R, NE, -4, 4);
            be->scale(NE, R, a[k], x.h);
            be->scale(NE, DT_FLOAT32, a[k], x.f);
            ok &= same("scale", &x);
            tfree(&x);
        }
    }
    TAP_OK(ok, "%s %s: fill (0.1, -3.3e-3, 1e5, 0) and scale (0.37, -1024, 1/1024) equal the fp32 op, rounded",
           tname(R), be->name);

    ok = 1;
    group = "unscale_check";
    {
        /* (what is put where, inv_scale, the flag expected) */
        const struct {
            float v;
            int64_t at;
            float inv;
            int want;
        } uc[] = {{0.0f, -1, 1.0f / 1024, 0}, {INFINITY, 17, 1.0f / 1024, 1}, {-INFINITY, 2999, 1.0f / 1024, 1},
                  {NAN, 1500, 1.0f, 1},       {6e4f, 2000, 1e35f, 1},        {6e4f, 2000, 1e30f, 0}};
        for (size_t k = 0; k < sizeof uc / sizeof uc[0]; k++) {
            tens g = tmake(R, NE, -1024, 1024);
            if (uc[k].at >= 0) {
                g.f[uc[k].at] = uc[k].v;
                dt_round_half(&g.f[uc[k].at], 1, R == DT_BFLOAT16);
                tsync(&g);
            }
            dt_scalars st = {.inv_scale = uc[k].inv}, sf = st;
            be->unscale_check(NE, R, g.h, &st);
            be->unscale_check(NE, DT_FLOAT32, g.f, &sf);
            int ft = st.agree[DT_AGREE_OVERFLOW], ff = sf.agree[DT_AGREE_OVERFLOW];
            n_compared += NE;
            if (ft != ff || ff != uc[k].want) {
                tap_diag("MISMATCH unscale_check case %zu: typed %d, fp32 %d, expected %d", k, ft, ff, uc[k].want);
                ok = 0;
            }
            tfree(&g);
        }
    }
    TAP_OK(ok, "%s %s: unscale_check's flag equals the fp32 op's (finite, +-inf, NaN, g*inv_scale overflowing or not)",
           tname(R), be->name);

    ok = 1;
    group = "normalize_u8";
    {
        const int64_t n = 3 * 700;
        const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
        uint8_t *u = amalloc((size_t)n);
        for (int64_t i = 0; i < n; i++)
            u[i] = (uint8_t)dt_rng_below(&rng, 256);
        if (be->reserve_scratch(be->normalize_scratch(n)))
            ok = 0;
        tens x = tmake(R, n, -1, 1);
        be->normalize_u8(n, 3, u, mean, std, R, x.h);
        be->normalize_u8(n, 3, u, mean, std, DT_FLOAT32, x.f);
        ok &= same("normalize_u8", &x);
        tfree(&x);
        free(u);
    }
    TAP_OK(ok, "%s %s: normalize_u8 into R equals the fp32 op, rounded", tname(R), be->name);
}

/* --- pooling ------------------------------------------------------------------------------------- */

static int pool_case(int max, int n, int h, int w, int c, int a, int b, int p, dt_dtype xt, dt_dtype yt)
{
    dt_pool_desc dt, df;
    if (max ? dt_pool_desc_set_max(&dt, n, h, w, c, a, b, p) : dt_pool_desc_set_adaptive(&dt, n, h, w, c, a, b)) {
        tap_diag("pool desc failed");
        return 0;
    }
    dt.xt = xt;
    dt.yt = yt;
    df = dt;
    df.xt = df.yt = DT_FLOAT32;
    const int64_t nx = (int64_t)n * h * w * c, ny = (int64_t)n * dt.oh * dt.ow * c;
    int ok = 1;
    tens x = tmake(xt, nx, -1, 1), y = tmake(yt, ny, -1, 1), dy = tmake(yt, ny, -1, 1);
    uint8_t *am_t = amalloc((size_t)ny), *am_f = amalloc((size_t)ny);
    if (max) {
        be->maxpool_fwd(&dt, x.h, y.h, am_t);
        be->maxpool_fwd(&df, x.f, y.f, am_f);
        ok &= same("maxpool_fwd y", &y);
        ok &= same_bytes("maxpool_fwd argmax", am_t, am_f, (size_t)ny);
    } else {
        be->avgpool_fwd(&dt, x.h, y.h);
        be->avgpool_fwd(&df, x.f, y.f);
        ok &= same("avgpool_fwd y", &y);
    }
    for (int acc = 0; acc <= 1; acc++) {
        tens dx = tmake(xt, nx, -1, 1);
        if (max) {
            be->maxpool_bwd(&dt, dy.h, am_f, dx.h, acc);
            be->maxpool_bwd(&df, dy.f, am_f, dx.f, acc);
            ok &= same(acc ? "maxpool_bwd accumulate" : "maxpool_bwd", &dx);
        } else {
            be->avgpool_bwd(&dt, dy.h, dx.h, acc);
            be->avgpool_bwd(&df, dy.f, dx.f, acc);
            ok &= same(acc ? "avgpool_bwd accumulate" : "avgpool_bwd", &dx);
        }
        tfree(&dx);
    }
    tfree(&x);
    tfree(&y);
    tfree(&dy);
    free(am_t);
    free(am_f);
    return ok;
}

static void check_pool(void)
{
    const dt_dtype yts[2] = {R, DT_FLOAT32};
    for (int k = 0; k < 2; k++) {
        group = "maxpool";
        int ok = pool_case(1, 2, 9, 8, 5, 3, 2, 1, R, yts[k]) & pool_case(1, 1, 7, 7, 260, 3, 2, 1, R, yts[k]);
        TAP_OK(ok,
               "%s %s: maxpool k3 s2 p1 (x %s, y %s; 5 and 260 channels): fwd (y, argmax), bwd (accumulate 0/1) equal "
               "the fp32 op, rounded",
               tname(R), be->name, tname(R), tname(yts[k]));
        group = "avgpool";
        ok = pool_case(0, 2, 5, 7, 5, 3, 2, 0, R, yts[k]) & pool_case(0, 1, 5, 7, 260, 3, 2, 0, R, yts[k]);
        TAP_OK(ok,
               "%s %s: adaptive avgpool 5x7->3x2 (x %s, y %s; 5 and 260 channels): fwd, bwd (accumulate 0/1) equal "
               "the fp32 op, rounded",
               tname(R), be->name, tname(R), tname(yts[k]));
    }
}

/* --- linear -------------------------------------------------------------------------------------- */

static int linear_case(int n, int in, int out)
{
    if (be->reserve_scratch(be->linear_scratch(n, in, out, R)) ||
        be->reserve_scratch(be->linear_scratch(n, in, out, DT_FLOAT32)))
        return 0;
    int ok = 1;
    tens x = tmake(R, (int64_t)n * in, -1, 1), w = tmake(R, (int64_t)out * in, -1, 1), b = tmake(R, out, -1, 1);
    tens dy = tmake(R, (int64_t)n * out, -1, 1);
    for (int bias = 0; bias <= 1; bias++) {
        tens y = tmake(R, (int64_t)n * out, -1, 1);
        be->linear_fwd(n, in, out, R, x.h, w.h, bias ? b.h : NULL, y.h);
        be->linear_fwd(n, in, out, DT_FLOAT32, x.f, w.f, bias ? b.f : NULL, y.f);
        ok &= same(bias ? "linear_fwd +bias" : "linear_fwd", &y);
        tfree(&y);
    }
    for (int acc = 0; acc <= 1; acc++)
        for (int with_dx = 0; with_dx <= 1; with_dx++)
            for (int with_db = 0; with_db <= 1; with_db++) {
                tens dx = tmake(R, (int64_t)n * in, -1, 1), dw = tmake(R, (int64_t)out * in, -1, 1),
                     db = tmake(R, out, -1, 1);
                be->linear_bwd(n, in, out, R, x.h, w.h, dy.h, with_dx ? dx.h : NULL, dw.h, with_db ? db.h : NULL, acc,
                               acc);
                be->linear_bwd(n, in, out, DT_FLOAT32, x.f, w.f, dy.f, with_dx ? dx.f : NULL, dw.f,
                               with_db ? db.f : NULL, acc, acc);
                if (with_dx)
                    ok &= same(acc ? "linear_bwd dx accumulate" : "linear_bwd dx", &dx);
                ok &= same(acc ? "linear_bwd dw accumulate" : "linear_bwd dw", &dw);
                if (with_db)
                    ok &= same(acc ? "linear_bwd db accumulate" : "linear_bwd db", &db);
                tfree(&dx);
                tfree(&dw);
                tfree(&db);
            }
    tfree(&x);
    tfree(&w);
    tfree(&b);
    tfree(&dy);
    return ok;
}

static void check_linear(void)
{
    group = "linear";
    int ok = linear_case(4, 37, 11);
    ok &= linear_case(16, 300, 20);
    TAP_OK(ok,
           "%s %s: linear 4x37->11 and 16x300->20: fwd (+-bias), bwd (accumulate 0/1, +-dx, +-db) equal the fp32 op, "
           "rounded",
           tname(R), be->name);
}

/* --- dropout, stochastic depth, flatten, xent ---------------------------------------------------- */

/* dropout (per 0: NE elements, a mask byte each) or stochastic depth (40 images of per elements, a
 * mask byte an image), x R and y yt: fwd (y, mask), bwd (accumulate 0/1) */
static int drop_case(int64_t per, dt_dtype yt)
{
    const float p = 0.3f;
    const int ni = 40;
    const int64_t n = per ? ni * per : NE, nm = per ? ni : NE;
    tens x = tmake(R, n, -1, 1), y = tmake(yt, n, -1, 1), dy = tmake(yt, n, -1, 1);
    uint8_t *m_t = amalloc((size_t)nm), *m_f = amalloc((size_t)nm);
    if (per) {
        be->sdepth_fwd(ni, per, p, 77, 0, NULL, x.h, R, y.h, yt, m_t);
        be->sdepth_fwd(ni, per, p, 77, 0, NULL, x.f, DT_FLOAT32, y.f, DT_FLOAT32, m_f);
    } else {
        be->dropout_fwd(n, p, 77, 0, NULL, x.h, R, y.h, yt, m_t);
        be->dropout_fwd(n, p, 77, 0, NULL, x.f, DT_FLOAT32, y.f, DT_FLOAT32, m_f);
    }
    int ok = same(per ? "sdepth_fwd y" : "dropout_fwd y", &y);
    ok &= same_bytes(per ? "sdepth_fwd mask" : "dropout_fwd mask", m_t, m_f, (size_t)nm);
    for (int acc = 0; acc <= 1; acc++) {
        tens dx = tmake(R, n, -1, 1);
        if (per) {
            be->sdepth_bwd(ni, per, p, m_f, dy.h, yt, dx.h, R, acc);
            be->sdepth_bwd(ni, per, p, m_f, dy.f, DT_FLOAT32, dx.f, DT_FLOAT32, acc);
        } else {
            be->dropout_bwd(n, p, m_f, dy.h, yt, dx.h, R, acc);
            be->dropout_bwd(n, p, m_f, dy.f, DT_FLOAT32, dx.f, DT_FLOAT32, acc);
        }
        ok &= same(acc ? "bwd accumulate" : "bwd", &dx);
        tfree(&dx);
    }
    tfree(&x);
    tfree(&y);
    tfree(&dy);
    free(m_t);
    free(m_f);
    return ok;
}

static void check_dropout_flatten_xent(void)
{
    const dt_dtype yts[2] = {R, DT_FLOAT32};
    group = "dropout";
    int ok = drop_case(0, yts[0]);
    ok &= drop_case(0, yts[1]);
    TAP_OK(ok, "%s %s: dropout fwd (y, mask), bwd (accumulate 0/1), x R and y R or fp32, equal the fp32 op, rounded",
           tname(R), be->name);
    group = "sdepth";
    ok = drop_case(75, yts[0]);
    ok &= drop_case(75, yts[1]);
    TAP_OK(ok, "%s %s: sdepth 40 images of 75 fwd (y, mask), bwd (accumulate 0/1), x R and y R or fp32, equal the "
               "fp32 op, rounded", tname(R), be->name);

    ok = 1;
    group = "flatten";
    {
        const int n = 2, h = 3, w = 4, c = 5;
        const int64_t ne = (int64_t)n * h * w * c;
        tens x = tmake(R, ne, -1, 1), y = tmake(R, ne, -1, 1), dy = tmake(R, ne, -1, 1);
        be->flatten_fwd(n, h, w, c, R, x.h, y.h);
        be->flatten_fwd(n, h, w, c, DT_FLOAT32, x.f, y.f);
        ok &= same("flatten_fwd", &y);
        for (int acc = 0; acc <= 1; acc++) {
            tens dx = tmake(R, ne, -1, 1);
            be->flatten_bwd(n, h, w, c, R, dy.h, dx.h, acc);
            be->flatten_bwd(n, h, w, c, DT_FLOAT32, dy.f, dx.f, acc);
            ok &= same(acc ? "flatten_bwd accumulate" : "flatten_bwd", &dx);
            tfree(&dx);
        }
        tfree(&x);
        tfree(&y);
        tfree(&dy);
    }
    TAP_OK(ok, "%s %s: flatten fwd, bwd (accumulate 0/1) equal the fp32 op, rounded", tname(R), be->name);

    ok = 1;
    group = "xent";
    {
        const int n = 6, k = 10;
        int32_t labels[6];
        for (int i = 0; i < n; i++)
            labels[i] = (int32_t)dt_rng_below(&rng, k);
        if (be->reserve_scratch(be->xent_scratch(n, k)))
            ok = 0;
        const float scales[2] = {1024.0f, 1.0f}, epss[2] = {0.1f, 0.0f};
        for (int si = 0; si < 2; si++)
            for (int ei = 0; ei < 2; ei++) {
                tens z = tmake(R, (int64_t)n * k, -4, 4), dz = tmake(R, (int64_t)n * k, -1, 1);
                dt_scalars st = {.scale_f = scales[si]}, sf = st, s0 = st;
                be->xent(n, k, R, z.h, labels, epss[ei], dz.h, &st);
                be->xent(n, k, DT_FLOAT32, z.f, labels, epss[ei], dz.f, &sf);
                be->xent(n, k, R, z.h, labels, epss[ei], NULL, &s0);
                double lt = st.loss, lf = sf.loss, l0 = s0.loss;
                n_compared += 2;
                if (memcmp(&st, &sf, sizeof st) != 0 || memcmp(&s0, &sf, sizeof st) != 0) {
                    tap_diag("MISMATCH xent loss (scale %g eps %g): typed %.17g (without dlogits %.17g), fp32 %.17g",
                             scales[si], epss[ei], lt, l0, lf);
                    ok = 0;
                }
                ok &= same("xent dlogits", &dz);
                tfree(&z);
                tfree(&dz);
            }
    }
    TAP_OK(ok,
           "%s %s: xent (scale 1024 and 1, label smoothing 0.1 and 0): the loss and hits equal the fp32 op's exactly, "
           "dlogits the fp32 op's rounded",
           tname(R), be->name);
}

/* --- sgd ----------------------------------------------------------------------------------------- */

static void check_sgd(void)
{
    group = "sgd";
    const dt_dtype pts[2] = {DT_FLOAT32, R};
    for (int k = 0; k < 2; k++) {
        const dt_dtype pt = pts[k];
        int ok = 1;
        tens p = tmake(pt, NE, -1, 1), buf = tmake(DT_FLOAT32, NE, -1, 1); /* buf: h the typed run's, f fp32's */
        for (int step = 0; step < 4; step++) {
            tens g = tmake(R, NE, -1024, 1024);
            dt_scalars sc = {.lr = 0.1f, .inv_scale = 1.0f / 1024, .sgd_steps = step};
            be->sgd(NE, p.h, pt, g.h, R, buf.h, 0.9f, 0.0f, 1e-4f, 0, &sc);
            be->sgd(NE, p.f, DT_FLOAT32, g.f, DT_FLOAT32, buf.f, 0.9f, 0.0f, 1e-4f, 0, &sc);
            ok &= same("sgd p", &p);
            ok &= same("sgd momentum buffer", &buf);
            if (pt != DT_FLOAT32) /* what the fp32 run's p holds next: the rounded values */
                dt_round_half(p.f, NE, pt == DT_BFLOAT16);
            tfree(&g);
        }
        TAP_OK(ok,
               "%s %s: sgd p %s, g %s (grad_scale 1/1024, momentum 0.9, wd 1e-4; 4 steps): p and the momentum buffer "
               "equal the fp32 op's (p rounded)",
               tname(R), be->name, tname(pt), tname(R));
        tfree(&p);
        tfree(&buf);
    }
}

/* the conv rows on oneDNN's bf16 kernels, where this CPU has them */
static void check_conv_half_kernels(void)
{
    be = &dt_backend_cpu;
    R = DT_BFLOAT16;
    dt_conv_desc probe;
    dt_conv_desc_set(&probe, 1, 8, 8, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    probe.t = R;
    if (!dt_cpu_half_kernels_for(&probe)) {
        tap_skip("oneDNN has no bf16 convolution kernels on this CPU (dtrain uses them on AMX only) or in this build",
                 "bf16 cpu: conv on oneDNN's bf16 kernels within one bf16 rounding of the fp32 op");
        return;
    }
    dt_cpu_set_half_kernels(1);
    near = 1;
    near_worst = 0;
    near_differ = 0;
    long long before = n_compared;
    check_conv();
    tap_diag("bf16 cpu on oneDNN's bf16 kernels: %lld of %lld results differ from the widened convolution's, the "
             "worst by %.2f of the bound", near_differ, n_compared - before, near_worst);
    near = 0;
    dt_cpu_set_half_kernels(0);
}

int main(void)
{
    dt_rng_seed(&rng, 2025, 7);
    dt_cpu_set_threads(2);
    dt_cpu_set_half_kernels(0); /* the oracle: reduced convolutions widened into fp32 */
    const dt_backend *backends[2] = {&dt_backend_cpu, &dt_backend_cpu_ref};
    const dt_dtype types[2] = {DT_FLOAT16, DT_BFLOAT16};
    for (int b = 0; b < 2; b++)
        for (int ti = 0; ti < 2; ti++) {
            be = backends[b];
            R = types[ti];
            tap_diag("backend %s, reduced type %s", be->name, tname(R));
            check_conv();
            check_bn();
            check_eltwise();
            check_pool();
            check_linear();
            check_dropout_flatten_xent();
            check_sgd();
        }
    tap_diag("%lld elements compared bit for bit", n_compared);
    check_conv_half_kernels();
    return tap_done();
}
