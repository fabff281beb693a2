/* ops_check_optim.c: ops_check's optimizer step ops (src/nn/cuda/optim.cu): sgd, adam (and AdamW),
 * rmsprop, ema_update, unscale_check, grad_sumsq, tensor_sumsq, lars, lamb (lamb_moments, lamb_apply) and
 * step_end. The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

/* adam and rmsprop rows (torch.optim's Adam, AdamW, RMSprop): as sgd's, p of the row's type then fp32
 * (master weights), g as written and scaled by 1024 with 1/scale 1/1024, the state fp32; at the
 * first step and a later one (the bias corrections read sgd_steps), clipped, and skipped */
static void check_adaptive(int dt, const char *shape, int rms)
{
    static const struct {
        const char *name;
        double wd, mom; /* adam: mom 1 = AdamW; rmsprop: the momentum */
        int64_t steps;  /* sgd_steps before the update */
        int skip, clip;
    } adam[] = {
        {"adam first step", 1e-2, 0, 0, 0, 0},        {"adam step 5", 1e-2, 0, 4, 0, 0},
        {"adamw first step", 5e-2, 1, 0, 0, 0},       {"adamw step 5 no wd", 0, 1, 4, 0, 0},
        {"adamw clipped", 5e-2, 1, 4, 0, 1},          {"adamw skipped (overflow)", 5e-2, 1, 4, 1, 0},
    }, rmsprop[] = {
        {"rmsprop momentum 0.9", 1e-4, 0.9, 3, 0, 0}, {"rmsprop no momentum (buf NULL)", 1e-4, 0, 3, 0, 0},
        {"rmsprop clipped", 0, 0.9, 3, 0, 1},         {"rmsprop skipped (overflow)", 1e-4, 0.9, 3, 1, 0},
    };
    const size_t nv = rms ? sizeof rmsprop / sizeof rmsprop[0] : sizeof adam / sizeof adam[0];
    const dt_dtype T = ty(dt);
    for (int master = 0; master <= (dt != F32); master++)
        for (size_t k = 0; k < nv; k++) {
            const __typeof__(adam[0]) *v = rms ? &rmsprop[k] : &adam[k];
            const int pt = master ? F32 : dt, has_buf = !rms || v->mom > 0;
            float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *m1 = h_randn(NE, 0, 0.01, F32),
                  *m2 = h_randn(NE, 0, 1e-4, F32);
            for (int64_t i = 0; i < NE; i++) /* a second moment is never negative */
                m2[i] = fabsf(m2[i]);
            float *in[2][4] = {{p, g, m1, m2}, {h_copy(p, NE), h_copy(g, NE), h_copy(m1, NE), h_copy(m2, NE)}};
            for (int scaled = 0; scaled < 2; scaled++) {
                float *p1 = in[scaled][0], *g1 = in[scaled][1], *a1 = in[scaled][2], *b1 = in[scaled][3];
                if (scaled)
                    for (int64_t i = 0; i < NE; i++)
                        g1[i] *= 1024.0f;
                dt_scalars hs = s_clean();
                hs.lr = rms ? 0.01f : 1e-3f;
                hs.inv_scale = scaled ? 1.0f / 1024 : 1.0f;
                hs.sgd_steps = v->steps;
                hs.agree[DT_AGREE_OVERFLOW] = v->skip;
                if (v->clip) {
                    hs.grad_sumsq = 4.0;
                    hs.clip_norm = 0.5f;
                }
                const dt_scalars hs0 = hs;
                dt_scalars *Ds = d_scalars(&hs);
                void *Dp = d_from(p1, NE, pt), *Dg = d_from(g1, NE, dt);
                float *Da = d_from(a1, NE, F32), *Db = d_from(b1, NE, F32);
                if (rms) {
                    REF->rmsprop(NE, p1, S32, g1, S32, b1, has_buf ? a1 : NULL, 0.9, 0.0316, v->wd, v->mom, &hs);
                    DEV->rmsprop(NE, Dp, ty(pt), Dg, T, Db, has_buf ? Da : NULL, 0.9, 0.0316, v->wd, v->mom, Ds);
                } else {
                    REF->adam(NE, p1, S32, g1, S32, a1, b1, 0.9, 0.999, 1e-8, v->wd, v->mom != 0, &hs);
                    DEV->adam(NE, Dp, ty(pt), Dg, T, Da, Db, 0.9, 0.999, 1e-8, v->wd, v->mom != 0, Ds);
                }
                char tag[48], op[128];
                const int mode = v->skip ? M_BITS : M_ELT;
                snprintf(tag, sizeof tag, "%s%s", master ? " (p fp32)" : "", scaled ? " 1/scale 1/1024" : "");
                check_row(dt, pt, shape, Dp, p1, NE, mode, "%s%s p", v->name, tag);
                if (has_buf) {
                    check_row(dt, F32, shape, Da, a1, NE, mode, "%s%s %s", v->name, tag, rms ? "momentum" : "exp_avg");
                }
                check_row(dt, F32, shape, Db, b1, NE, mode, "%s%s %s", v->name, tag, rms ? "square_avg" : "exp_avg_sq");
                snprintf(op, sizeof op, "%s%s scalars unchanged", v->name, tag);
                cmp_scalars(op, dt, shape, Ds, &hs0, 0);
            }
            release();
        }
}


/* The optimizers' rows of the unit "eltwise TYPE" (after ops_check_eltwise.c's), on NE values. */
static void test_sgd(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    static const struct {
        const char *name;
        float mom, damp, wd;
        int nesterov, first;
        int skip; /* 0: runs; 1: an overflow agreed; 2: diverged (both: nothing changes) */
        int clip; /* 1: clip_norm set with a sum of squares that clips by 1/4 */
    } v[] = {
        {"sgd momentum first", 0.9f, 0, 1e-4f, 0, 1, 0, 0},
        {"sgd momentum", 0.9f, 0, 1e-4f, 0, 0, 0, 0},
        {"sgd nesterov", 0.9f, 0, 1e-4f, 1, 0, 0, 0},
        {"sgd dampening 0.1 wd 5e-4", 0.9f, 0.1f, 5e-4f, 0, 0, 0, 0},
        {"sgd no momentum (buf NULL)", 0, 0, 1e-4f, 0, 0, 0, 0},
        {"sgd no momentum no wd", 0, 0, 0, 0, 0, 0, 0},
        {"sgd skipped (overflow)", 0.9f, 0, 1e-4f, 0, 0, 1, 0},
        {"sgd skipped (diverged)", 0.9f, 0, 1e-4f, 1, 1, 2, 0},
        {"sgd clipped (clip_norm)", 0.9f, 0, 1e-4f, 0, 0, 0, 1},
    };
    /* p and g of the row's type (a model without master weights); then, in fp16/bf16 rows, p fp32
     * and g of the row's type (O2's fp32 master weights, train/optim.c); the momentum buffer fp32 */
    for (int master = 0; master <= (dt != F32); master++)
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            const int pt = master ? F32 : dt;
            float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *buf = h_randn(NE, 0, 0.01, F32);
            int has_buf = v[k].mom != 0;
            /* as written, then as the loss scaler runs it: the gradient scaled by 1024 (exact) and
             * 1/scale = 1/1024, on the same inputs (copied first: no further random draws) */
            float *in[2][3] = {{p, g, buf}, {h_copy(p, NE), h_copy(g, NE), h_copy(buf, NE)}};
            for (int scaled = 0; scaled < 2; scaled++) {
                float *p1 = in[scaled][0], *g1 = in[scaled][1], *buf1 = in[scaled][2];
                if (scaled)
                    for (int64_t i = 0; i < NE; i++)
                        g1[i] *= 1024.0f;
                /* lr, 1/scale, first (sgd_steps == 0) and the skip come from the scalars block */
                dt_scalars hs = s_clean();
                hs.lr = 0.1f;
                hs.inv_scale = scaled ? 1.0f / 1024 : 1.0f;
                hs.sgd_steps = v[k].first ? 0 : 3;
                hs.agree[DT_AGREE_OVERFLOW] = v[k].skip == 1;
                hs.diverged = v[k].skip == 2;
                if (v[k].clip) { /* norm 2, clipped to 0.5: each unscaled gradient times 1/4 */
                    hs.grad_sumsq = 4.0;
                    hs.clip_norm = 0.5f;
                }
                const dt_scalars hs0 = hs;
                dt_scalars *Ds = d_scalars(&hs);
                float *p0 = v[k].skip ? h_copy(p1, NE) : NULL, *buf0 = v[k].skip ? h_copy(buf1, NE) : NULL;
                void *Dp = d_from(p1, NE, pt), *Dg = d_from(g1, NE, dt);
                float *Dbuf = d_from(buf1, NE, F32);
                REF->sgd(NE, p1, S32, g1, S32, has_buf ? buf1 : NULL, v[k].mom, v[k].damp, v[k].wd,
                         v[k].nesterov, &hs);
                DEV->sgd(NE, Dp, ty(pt), Dg, T, has_buf ? Dbuf : NULL, v[k].mom, v[k].damp, v[k].wd,
                         v[k].nesterov, Ds);
                char tag[48], op[128];
                snprintf(tag, sizeof tag, "%s%s", master ? " (p fp32)" : "", scaled ? " 1/scale 1/1024" : "");
                check_row(dt, pt, shape, Dp, p1, NE, v[k].skip ? M_BITS : M_ELT, "%s%s p", v[k].name, tag);
                if (has_buf) {
                    check_row(dt, F32, shape, Dbuf, buf1, NE, v[k].skip ? M_BITS : M_ELT, "%s%s buf", v[k].name, tag);
                }
                if (v[k].skip) { /* the reference itself left them as they were */
                    snprintf(op, sizeof op, "%s%s p unchanged (reference)", v[k].name, tag);
                    cmp_f32(op, dt, shape, p1, p0, NE, M_BITS);
                    snprintf(op, sizeof op, "%s%s buf unchanged (reference)", v[k].name, tag);
                    cmp_f32(op, dt, shape, buf1, buf0, NE, M_BITS);
                }
                /* sgd only reads the block */
                snprintf(op, sizeof op, "%s%s scalars unchanged", v[k].name, tag);
                cmp_scalars(op, dt, shape, Ds, &hs0, 0);
            }
            release();
        }
}

/* x of the row's type (a model's weights or statistics), avg fp32 */
static void test_ema_update(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    static const double decays[] = {0.8, 0.99998, 0};
    for (size_t k = 0; k < sizeof decays / sizeof decays[0]; k++) {
        float *x = h_randn(NE, 0, 0.05, dt), *avg = h_randn(NE, 0, 0.05, F32);
        float *Dx = d_from(x, NE, dt), *Davg = d_from(avg, NE, F32);
        REF->ema_update(NE, avg, x, S32, decays[k]);
        DEV->ema_update(NE, Davg, Dx, T, decays[k]);
        check_row(dt, F32, shape, Davg, avg, NE, decays[k] == 0 ? M_BITS : M_ELT, "ema_update decay %g%s", decays[k],
                  decays[k] == 0 ? " (a copy)" : "");
        release();
    }
}

static void test_adam(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    check_adaptive(dt, shape, 0);
}

static void test_rmsprop(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    check_adaptive(dt, shape, 1);
}

static void test_unscale_check(int dt)
{
    if (!unit("unscale_check %s", DTYPE_NAME[dt]))
        return;
    const int64_t n = QUICK ? 4099 : 3000017;
    static const struct {
        const char *name;
        int what; /* 0 clean, 1 inf near the end, 2 NaN first, 3 overflow by the multiply */
        float inv;
        int set; /* the overflow flag already set (by xent or another tensor's check) */
    } v[] = {
        {"unscale_check clean", 0, 1.0f / 65536, 0},
        {"unscale_check inf near the end", 1, 1.0f / 65536, 0},
        {"unscale_check clean leaves a set flag", 0, 1.0f / 1024, 1}, /* it only sets the flag */
        {"unscale_check NaN first", 2, 1.0f / 65536, 0},
        {"unscale_check overflow", 3, 4.0f, 0}, /* fp16: 65504 times 1e34 (below) */
    };
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        float *g = h_randn(n, 0, 4096, dt); /* |g| < 14200: finite in fp16 */
        /* the overflow by the multiply: fp16 holds at most 65504, so its case multiplies that by 1e34
         * (over FLT_MAX; the rest stays below 1.5e38) */
        const int fp16_overflow = v[k].what == 3 && dt == F16;
        if (v[k].what == 1)
            g[n - 2] = INFINITY;
        else if (v[k].what == 2)
            g[0] = NAN;
        else if (v[k].what == 3)
            g[n / 2] = fp16_overflow ? 65504.0f : 3e38f;
        h_round(g, n, dt);
        float *g0 = h_copy(g, n);
        void *Dg = d_from(g, n, dt);
        /* 1/scale from the block, the flag into it */
        dt_scalars hs = s_clean();
        hs.inv_scale = fp16_overflow ? 1e34f : v[k].inv;
        hs.agree[DT_AGREE_OVERFLOW] = v[k].set;
        hs.agree[DT_AGREE_SIGNAL] = 1;
        dt_scalars *Ds = d_scalars(&hs);
        REF->unscale_check(n, S32, g, &hs);
        DEV->unscale_check(n, ty(dt), Dg, Ds);
        const int fr = hs.agree[DT_AGREE_OVERFLOW], fd = d_scalars_get(Ds).agree[DT_AGREE_OVERFLOW];
        const int expect = v[k].what != 0 || v[k].set;
        char op[80];
        snprintf(op, sizeof op, "%s flag", v[k].name);
        row(op, DTYPE_NAME[dt], shape, fabs((double)fd - expect), fabs((double)fd - expect), M_EXACT, 0,
            LIST || (fd == expect && fr == expect));
        if (!LIST && fd != expect)
            printf("      the device's flag is %d, want %d\n", fd, expect);
        if (!LIST && fr != expect)
            printf("      the reference's flag is %d, want %d\n", fr, expect);
        /* nothing else in the block changes */
        snprintf(op, sizeof op, "%s scalars", v[k].name);
        cmp_scalars(op, dt, shape, Ds, &hs, 0);
        /* the op only reads g: it comes back bit for bit (on both sides) */
        check_row(dt, dt, shape, Dg, g0, n, M_BITS, "%s g unchanged", v[k].name);
        snprintf(op, sizeof op, "%s g unchanged (reference)", v[k].name);
        cmp_f32(op, dt, shape, g, g0, n, M_BITS);
        release();
    }
}

/* two doubles on the device from host values, and back */
static double *d_doubles(const double *h, int n)
{
    double *d = d_bytes((size_t)n * sizeof(double));
    DEV->mem_put(d, h, (size_t)n * sizeof(double));
    return d;
}

static void d_doubles_get(double *h, const double *d, int n)
{
    if (LIST)
        return;
    DEV->mem_get(h, d, (size_t)n * sizeof(double));
}

/* LARS and LAMB: tensor_sumsq's norms (relative 1e-12: the device sums in another order), lars with
 * the reference's norms (a trust-ratio row and an excluded one), lamb_moments' moments and norms,
 * lamb_apply with the reference's norms; p of the row's type then fp32 (master weights) */
static void test_norm_optimizers(int dt)
{
    if (!unit("optimizers %s", DTYPE_NAME[dt]))
        return;
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    if (want_test("tensor_sumsq"))
        for (int unscale = 0; unscale <= 1; unscale++) {
            float *x = h_randn(NE, 0, unscale ? 512 : 0.05, dt);
            void *Dx = d_from(x, NE, dt);
            dt_scalars hs = s_clean();
            hs.inv_scale = 1.0f / 1024;
            hs.grad_sumsq = 9.0; /* with clip_norm 1.5: the unscaled values times 1/2 */
            hs.clip_norm = 1.5f;
            dt_scalars *Ds = d_scalars(&hs);
            double want = 0, got = 0, *Dout = d_doubles(&got, 1);
            REF->tensor_sumsq(NE, x, S32, unscale, &hs, &want);
            DEV->tensor_sumsq(NE, Dx, T, unscale, Ds, Dout);
            d_doubles_get(&got, Dout, 1);
            if (LIST)
                got = want;
            const double rel = fabs(got - want) / fmax(fabs(want), 1e-300);
            row(unscale ? "tensor_sumsq unscaled, clipped" : "tensor_sumsq", DTYPE_NAME[dt], shape, fabs(got - want),
                rel, M_RED, 1e-12, LIST || rel <= 1e-12);
            release();
        }
    for (int master = 0; master <= (dt != F32); master++) {
        const int pt = master ? F32 : dt;
        const char *tag = master ? " (p fp32)" : "";
        char op[96];
        if (want_test("lars"))
            for (int excluded = 0; excluded <= 1; excluded++) {
                float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *buf = h_randn(NE, 0, 1e-3, F32);
                dt_scalars hs = s_clean();
                hs.lr = 0.5f;
                double norms[2];
                REF->tensor_sumsq(NE, p, S32, 0, &hs, norms);
                REF->tensor_sumsq(NE, g, S32, 1, &hs, norms + 1);
                dt_scalars *Ds = d_scalars(&hs);
                void *Dp = d_from(p, NE, pt), *Dg = d_from(g, NE, dt);
                float *Dbuf = d_from(buf, NE, F32);
                double *Dn = d_doubles(norms, 2);
                const double eta = excluded ? 0 : 0.001;
                REF->lars(NE, p, S32, g, S32, buf, 0.9, 5e-5, eta, norms, &hs);
                DEV->lars(NE, Dp, ty(pt), Dg, T, Dbuf, 0.9, 5e-5, eta, Dn, Ds);
                const char *ex = excluded ? " excluded (eta 0)" : "";
                check_row(dt, pt, shape, Dp, p, NE, M_ELT, "lars%s%s p", ex, tag);
                check_row(dt, F32, shape, Dbuf, buf, NE, M_ELT, "lars%s%s buf", ex, tag);
                release();
            }
        if (want_test("lamb")) {
            float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *m1 = h_randn(NE, 0, 0.01, F32),
                  *m2 = h_randn(NE, 0, 1e-4, F32);
            for (int64_t i = 0; i < NE; i++)
                m2[i] = fabsf(m2[i]);
            dt_scalars hs = s_clean();
            hs.lr = 0.01f;
            hs.sgd_steps = 4;
            dt_scalars *Ds = d_scalars(&hs);
            void *Dp = d_from(p, NE, pt), *Dg = d_from(g, NE, dt);
            float *Da = d_from(m1, NE, F32), *Db = d_from(m2, NE, F32);
            double norms[2], got[2] = {0, 0}, *Dn = d_doubles(got, 2);
            REF->lamb_moments(NE, p, S32, g, S32, m1, m2, 0.9, 0.999, 1e-6, 0.01, &hs, norms);
            DEV->lamb_moments(NE, Dp, ty(pt), Dg, T, Da, Db, 0.9, 0.999, 1e-6, 0.01, Ds, Dn);
            check_row(dt, F32, shape, Da, m1, NE, M_ELT, "lamb_moments%s exp_avg", tag);
            check_row(dt, F32, shape, Db, m2, NE, M_ELT, "lamb_moments%s exp_avg_sq", tag);
            d_doubles_get(got, Dn, 2);
            if (LIST)
                got[0] = norms[0], got[1] = norms[1];
            const double rel = fmax(fabs(got[0] - norms[0]) / fmax(norms[0], 1e-300),
                                    fabs(got[1] - norms[1]) / fmax(norms[1], 1e-300));
            snprintf(op, sizeof op, "lamb_moments%s norms", tag);
            row(op, DTYPE_NAME[dt], shape, rel, rel, M_RED, 1e-10, LIST || rel <= 1e-10);
            DEV->mem_put(Dn, norms, sizeof norms); /* the update from the reference's norms */
            REF->lamb_apply(NE, p, S32, m1, m2, 0.9, 0.999, 1e-6, 0.01, norms, &hs);
            DEV->lamb_apply(NE, Dp, ty(pt), Da, Db, 0.9, 0.999, 1e-6, 0.01, Dn, Ds);
            check_row(dt, pt, shape, Dp, p, NE, M_ELT, "lamb_apply%s p", tag);
            release();
        }
    }
}

/* The gradients' sum of squares (clipping): n unscaled gradients' squares added to a sum already in
 * the block, by another summation order than the CPU's (a relative 1e-12 allowed; the rest of the
 * block bit for bit); g only read. */
static void test_grad_sumsq(int dt)
{
    if (!unit("grad_sumsq %s", DTYPE_NAME[dt]))
        return;
    const int64_t sizes[] = {1, 4099, QUICK ? 70001 : 3000017};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        char shape[32];
        snprintf(shape, sizeof shape, "n=%lld", (long long)n);
        float *g = h_randn(n, 0, 4096, dt);
        h_round(g, n, dt);
        float *g0 = h_copy(g, n);
        void *Dg = d_from(g, n, dt);
        dt_scalars hs = s_clean();
        hs.inv_scale = 1.0f / 65536;
        hs.grad_sumsq = 0.5; /* a sum already there: the op adds to it */
        dt_scalars *Ds = d_scalars(&hs);
        REF->grad_sumsq(n, S32, g, &hs);
        DEV->grad_sumsq(n, ty(dt), Dg, Ds);
        const double want = hs.grad_sumsq, got = LIST ? want : d_scalars_get(Ds).grad_sumsq;
        const double rel = fabs(got - want) / fmax(fabs(want), 1e-300);
        row("grad_sumsq sum", DTYPE_NAME[dt], shape, fabs(got - want), rel, M_RED, 1e-12, LIST || rel <= 1e-12);
        hs.grad_sumsq = got; /* the rest of the block: unchanged, bit for bit */
        cmp_scalars("grad_sumsq scalars", dt, shape, Ds, &hs, 0);
        check_row(dt, dt, shape, Dg, g0, n, M_BITS, "grad_sumsq g unchanged");
        release();
    }
}

/* The end of a step (scalars.h's dt_scalars_step_end on both sides): a run of steps per case, each
 * with or without an agreed overflow (written into the device's block as a step's start would), the
 * whole block compared bit for bit after every step; then the reference's final scale and
 * divergence against what the case works out to by hand. */
static void test_step_end(int dt_unused)
{
    (void)dt_unused;
    if (!unit("step_end"))
        return;
    static const struct {
        const char *name;
        int dynamic;
        double scale, min_scale, max_scale;
        int64_t growth_interval, max_nonfinite;
        const char *steps; /* one step per character: '1' an overflow agreed, '0' clean */
        double scale_after;
        int diverged_after;
    } v[] = {
        {"step_end dynamic, clean steps grow", 1, 65536, 0, 0x1p24, 3, 10, "0000000", 262144, 0},
        {"step_end dynamic, overflows back off", 1, 65536, 0, 0x1p24, 2, 10, "0110100", 16384, 0},
        {"step_end dynamic, max_scale caps", 1, 0x1p23, 0, 1e7, 1, 10, "0000", 1e7, 0},
        {"step_end dynamic, min_scale floors, diverges", 1, 4, 1.5, 0x1p24, 2000, 10, "1110", 1.5, 1},
        {"step_end dynamic, overflow at 2^-24 diverges", 1, 0x1p-23, 0, 0x1p24, 2000, 10, "1100", 0x1p-25, 1},
        {"step_end static, max_nonfinite in a row", 0, 128, 0, 0x1p24, 2000, 3, "1101110", 128, 1},
        {"step_end static, clean", 0, 1, 0, 0x1p24, 2000, 3, "000", 1, 0},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        dt_scalars hs = s_metrics(); /* metrics and the stop signal: step_end leaves them */
        hs.dynamic = v[k].dynamic;
        hs.scale = v[k].scale;
        hs.min_scale = v[k].min_scale;
        hs.max_scale = v[k].max_scale;
        hs.growth_interval = v[k].growth_interval;
        hs.max_nonfinite = v[k].max_nonfinite;
        hs.scale_f = (float)v[k].scale;
        hs.inv_scale = (float)(1.0 / v[k].scale);
        hs.sgd_steps = 5;
        dt_scalars *Ds = d_scalars(&hs);
        const int nsteps = (int)strlen(v[k].steps);
        int first_bad = -1;
        char names[512] = "";
        dt_scalars got_bad = hs, want_bad = hs;
        for (int i = 0; i < nsteps; i++) {
            const int32_t f = v[k].steps[i] == '1';
            hs.agree[DT_AGREE_OVERFLOW] = f;
            d_scalars_set(Ds, offsetof(dt_scalars, agree) + DT_AGREE_OVERFLOW * sizeof(int32_t), &f, sizeof f);
            REF->step_end(&hs);
            DEV->step_end(Ds);
            if (LIST || first_bad >= 0)
                continue;
            dt_scalars got = d_scalars_get(Ds);
            if (scalars_differ(&got, &hs, 0, names, sizeof names) != 0) {
                first_bad = i;
                got_bad = got;
                want_bad = hs;
            }
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%d steps: %s", nsteps, v[k].steps);
        row(v[k].name, "-", shape, first_bad >= 0, first_bad >= 0, M_BITS, 0, first_bad < 0);
        if (first_bad >= 0) {
            printf("      after step %d: fields that differ: %s\n", first_bad + 1,
                   names[0] ? names : "(ops_check's field table does not cover dt_scalars: update SFIELDS)");
            print_scalars("got ", &got_bad);
            print_scalars("want", &want_bad);
        }
        char op[96];
        snprintf(op, sizeof op, "%s (reference by hand)", v[k].name);
        const int as_expected = hs.scale == v[k].scale_after && hs.diverged == v[k].diverged_after &&
                                hs.agree[DT_AGREE_OVERFLOW] == 0;
        row(op, "-", shape, fabs(hs.scale - v[k].scale_after), 0, M_EXACT, 0, LIST || as_expected);
        if (!LIST && !as_expected)
            printf("      the reference ends with scale %.17g diverged %d overflow %d, want scale %.17g diverged %d "
                   "overflow 0\n",
                   hs.scale, hs.diverged, hs.agree[DT_AGREE_OVERFLOW], v[k].scale_after, v[k].diverged_after);
        release();
    }
}

static const ops_test TESTS[] = {
    {ST_ELTWISE, "sgd", test_sgd},
    {ST_ELTWISE, "ema_update", test_ema_update},
    {ST_ELTWISE, "adam", test_adam},
    {ST_ELTWISE, "rmsprop", test_rmsprop},
    {ST_UNSCALE_CHECK, "unscale_check", test_unscale_check},
    {ST_GRAD_SUMSQ, "grad_sumsq", test_grad_sumsq},
    {ST_OPTIMIZERS, NULL, test_norm_optimizers}, /* tensor_sumsq, lars, lamb: one unit */
    {ST_STEP_END, "step_end", test_step_end},
};
OPS_FAMILY(OPS_OPTIM, "optim.cu", TESTS);
