/* ops_check_eltwise.c: ops_check's element-wise ops (src/nn/cuda/eltwise.cu): relu, add, copy_grad,
 * scale, fill, flatten, dropout, stochastic depth (sdepth), round_half and normalize_u8 with its planning
 * op normalize_scratch. The rules are in ops_check.c's top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

/* The element-wise rows of the unit "eltwise TYPE" (the driver begins it; ops_check_optim.c's sgd,
 * ema_update, adam and rmsprop rows follow in it), on NE values: relu, add, copy_grad, scale, fill. */
static void test_relu(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    float *x = h_randn(NE, 0, 1, dt);
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[NE - 1] = 0.0f;
    float *y = h_new(NE);
    void *Dx = d_from(x, NE, dt), *Dy = d_poisoned(NE, dt);
    REF->relu_fwd(NE, S32, x, y);
    DEV->relu_fwd(NE, T, Dx, Dy);
    check_row(dt, dt, shape, Dy, y, NE, M_EXACT, "relu_fwd");
    /* in place, as the model runs a ReLU whose input has no other reader */
    void *Dxi = d_from(x, NE, dt);
    DEV->relu_fwd(NE, T, Dxi, Dxi);
    check_row(dt, dt, shape, Dxi, y, NE, M_EXACT, "relu_fwd in place");

    float *dy = h_randn(NE, 0, 1, dt), *dx = h_new(NE);
    void *Ddy = d_from(dy, NE, dt), *Dyr = d_from(y, NE, dt), *Ddx = d_poisoned(NE, dt);
    REF->relu_bwd(NE, S32, y, dy, dx, 0);
    DEV->relu_bwd(NE, T, Dyr, Ddy, Ddx, 0);
    check_row(dt, dt, shape, Ddx, dx, NE, M_EXACT, "relu_bwd");
    float *prior = h_randn(NE, 0, 1, dt), *dxa = h_copy(prior, NE);
    void *Ddxa = d_from(prior, NE, dt);
    REF->relu_bwd(NE, S32, y, dy, dxa, 1);
    DEV->relu_bwd(NE, T, Dyr, Ddy, Ddxa, 1);
    check_row(dt, dt, shape, Ddxa, dxa, NE, M_EXACT, "relu_bwd acc");
    void *Ddyi = d_from(dy, NE, dt);
    DEV->relu_bwd(NE, T, Dyr, Ddyi, Ddyi, 0);
    check_row(dt, dt, shape, Ddyi, dx, NE, M_EXACT, "relu_bwd in place (dx = dy)");
    release();
}

static void test_add(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    /* every operand of the row's type (and in place); then, in fp16/bf16 rows, one operand fp32 */
    static const struct {
        const char *name;
        int a32, b32, y32;
    } av[] = {{"add_fwd", 0, 0, 0}, {"add_fwd (a fp32)", 1, 0, 0}, {"add_fwd (b fp32)", 0, 1, 0},
              {"add_fwd (y fp32)", 0, 0, 1}};
    for (int k = 0; k < (dt == F32 ? 1 : 4); k++) {
        const int at = av[k].a32 ? F32 : dt, bt = av[k].b32 ? F32 : dt, yt = av[k].y32 ? F32 : dt;
        float *a = h_randn(NE, 0, 1, at), *b = h_randn(NE, 0, 1, bt), *y = h_new(NE);
        void *Da = d_from(a, NE, at), *Db = d_from(b, NE, bt), *Dy = d_poisoned(NE, yt);
        REF->add_fwd(NE, a, S32, b, S32, y, S32);
        DEV->add_fwd(NE, Da, ty(at), Db, ty(bt), Dy, ty(yt));
        check_row(dt, yt, shape, Dy, y, NE, M_EXACT, "%s", av[k].name);
        if (k == 0) {
            DEV->add_fwd(NE, Da, T, Db, T, Da, T);
            check_row(dt, dt, shape, Da, y, NE, M_EXACT, "add_fwd in place (y = a)");
        }
        release();
    }
}

static void test_copy_grad(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    /* the row's type both sides; then, in fp16/bf16 rows, converting from fp32 and to fp32 */
    static const struct {
        const char *name, *acc_name;
        int s32, d32;
    } cv[] = {{"copy_grad", "copy_grad acc", 0, 0},
              {"copy_grad from fp32", "copy_grad acc from fp32", 1, 0},
              {"copy_grad to fp32", "copy_grad acc to fp32", 0, 1}};
    for (int k = 0; k < (dt == F32 ? 1 : 3); k++) {
        const int st = cv[k].s32 ? F32 : dt, to = cv[k].d32 ? F32 : dt;
        float *s = h_randn(NE, 0, 1, st), *dd = h_new(NE);
        void *Ds = d_from(s, NE, st), *Dd = d_poisoned(NE, to);
        REF->copy_grad(NE, s, S32, dd, S32, 0);
        DEV->copy_grad(NE, Ds, ty(st), Dd, ty(to), 0);
        check_row(dt, to, shape, Dd, dd, NE, M_EXACT, "%s", cv[k].name);
        float *prior = h_randn(NE, 0, 1, to), *da = h_copy(prior, NE);
        void *Dda = d_from(prior, NE, to);
        REF->copy_grad(NE, s, S32, da, S32, 1);
        DEV->copy_grad(NE, Ds, ty(st), Dda, ty(to), 1);
        check_row(dt, to, shape, Dda, da, NE, M_EXACT, "%s", cv[k].acc_name);
        release();
    }
}

static void test_scale(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    const float as[] = {0.37f, 65536.0f};
    for (int k = 0; k < 2; k++) {
        float *x = h_randn(NE, 0, 1, dt);
        void *Dx = d_from(x, NE, dt);
        REF->scale(NE, S32, as[k], x);
        DEV->scale(NE, T, as[k], Dx);
        check_row(dt, dt, shape, Dx, x, NE, M_EXACT, "scale %g", (double)as[k]);
        release();
    }
}

static void test_fill(int dt)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    const float vs[] = {3.25f, -0.0f};
    for (int k = 0; k < 2; k++) {
        float *x = h_new(NE);
        void *Dx = d_poisoned(NE, dt);
        REF->fill(NE, S32, vs[k], x);
        DEV->fill(NE, T, vs[k], Dx);
        check_row(dt, dt, shape, Dx, x, NE, M_BITS, "fill %g", (double)vs[k]);
        release();
    }
}

static void test_flatten(int n, int h, int w, int c, int dt)
{
    if (!unit("flatten n%d %dx%dx%d %s", n, h, w, c, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d", n, h, w, c);
    const int64_t ne = (int64_t)n * h * w * c;
    const dt_dtype T = ty(dt);
    float *x = h_randn(ne, 0, 1, dt), *y = h_new(ne);
    void *Dx = d_from(x, ne, dt), *Dy = d_poisoned(ne, dt);
    REF->flatten_fwd(n, h, w, c, S32, x, y);
    DEV->flatten_fwd(n, h, w, c, T, Dx, Dy);
    check_row(dt, dt, shape, Dy, y, ne, M_EXACT, "flatten_fwd");
    float *dy = h_randn(ne, 0, 1, dt), *dx = h_new(ne);
    void *Ddy = d_from(dy, ne, dt), *Ddx = d_poisoned(ne, dt);
    REF->flatten_bwd(n, h, w, c, S32, dy, dx, 0);
    DEV->flatten_bwd(n, h, w, c, T, Ddy, Ddx, 0);
    check_row(dt, dt, shape, Ddx, dx, ne, M_EXACT, "flatten_bwd");
    float *p0 = h_randn(ne, 0, 1, dt), *dxa = h_copy(p0, ne);
    void *Ddxa = d_from(p0, ne, dt);
    REF->flatten_bwd(n, h, w, c, S32, dy, dxa, 1);
    DEV->flatten_bwd(n, h, w, c, T, Ddy, Ddxa, 1);
    check_row(dt, dt, shape, Ddxa, dxa, ne, M_EXACT, "flatten_bwd acc");
    release();
}

static void test_dropout(int64_t n, float p, uint64_t seed, int dt)
{
    if (!unit("dropout n%lld p%g %s", (long long)n, (double)p, DTYPE_NAME[dt]))
        return;
    char name[64], shape[64];
    snprintf(shape, sizeof shape, "n=%lld p=%g", (long long)n, (double)p);
    const dt_dtype T = ty(dt);
    float *x = h_randn(n, 0, 1, dt), *y = h_new(n);
    void *Dx = d_from(x, n, dt), *Dy = d_poisoned(n, dt);
    uint8_t *mask = hold(malloc((size_t)n), 0), *Dmask = d_poisoned_u8(n);
    /* seeded by a scalars block's model step (read when the op runs: a graph's launch), then by
     * the seed alone; the second is what the rows below use */
    dt_scalars hs = s_clean();
    hs.model_step = 1000003;
    REF->dropout_fwd(n, p, seed, 17, &hs, x, S32, y, S32, mask);
    DEV->dropout_fwd(n, p, seed, 17, d_scalars(&hs), Dx, T, Dy, T, Dmask);
    cmp_u8("dropout_fwd mask, model_step seeded", dt, shape, d_result_u8(Dmask, n), mask, n);
    REF->dropout_fwd(n, p, seed, 0, NULL, x, S32, y, S32, mask);
    DEV->dropout_fwd(n, p, seed, 0, NULL, Dx, T, Dy, T, Dmask);
    check_row(dt, dt, shape, Dy, y, n, M_ELT, "dropout_fwd y");
    snprintf(name, sizeof name, "dropout_fwd mask");
    cmp_u8(name, dt, shape, d_result_u8(Dmask, n), mask, n);
    uint8_t *Dm = d_bytes((size_t)n);
    DEV->mem_put(Dm, mask, (size_t)n);
    float *dy = h_randn(n, 0, 1, dt), *dx = h_new(n);
    void *Ddy = d_from(dy, n, dt), *Ddx = d_poisoned(n, dt);
    REF->dropout_bwd(n, p, mask, dy, S32, dx, S32, 0);
    DEV->dropout_bwd(n, p, Dm, Ddy, T, Ddx, T, 0);
    check_row(dt, dt, shape, Ddx, dx, n, M_ELT, "dropout_bwd");
    float *p0 = h_randn(n, 0, 1, dt), *dxa = h_copy(p0, n);
    void *Ddxa = d_from(p0, n, dt);
    REF->dropout_bwd(n, p, mask, dy, S32, dxa, S32, 1);
    DEV->dropout_bwd(n, p, Dm, Ddy, T, Ddxa, T, 1);
    check_row(dt, dt, shape, Ddxa, dxa, n, M_ELT, "dropout_bwd acc");
    release();
}

/* stochastic depth on n images of per elements: the mask seeded by a scalars block's model step (it
 * must equal dropout_fwd's first n bytes under the same seed, salt and block, on the device), then by
 * the seed alone, with y, and the backward overwriting and accumulating */
static void test_sdepth(int n, int64_t per, float p, uint64_t seed, int dt)
{
    if (!unit("sdepth n%d per%lld p%g %s", n, (long long)per, (double)p, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d per %lld p=%g", n, (long long)per, (double)p);
    const int64_t ne = (int64_t)n * per;
    const dt_dtype T = ty(dt);
    float *x = h_randn(ne, 0, 1, dt), *y = h_new(ne);
    void *Dx = d_from(x, ne, dt), *Dy = d_poisoned(ne, dt);
    uint8_t *mask = hold(malloc((size_t)n), 0), *Dmask = d_poisoned_u8(n), *Ddrop = d_poisoned_u8(n);
    dt_scalars hs = s_clean();
    hs.model_step = 1000003;
    dt_scalars *Ds = d_scalars(&hs);
    REF->sdepth_fwd(n, per, p, seed, 17, &hs, x, S32, y, S32, mask);
    DEV->sdepth_fwd(n, per, p, seed, 17, Ds, Dx, T, Dy, T, Dmask);
    cmp_u8("sdepth_fwd mask, model_step seeded", dt, shape, d_result_u8(Dmask, n), mask, n);
    /* image b's draw is dropout's for element b (n of them: y is the first n of x's) */
    void *Dyd = d_poisoned(n, dt);
    DEV->dropout_fwd(n, p, seed, 17, Ds, Dx, T, Dyd, T, Ddrop);
    cmp_u8("sdepth_fwd mask = dropout_fwd's (device)", dt, shape, d_result_u8(Dmask, n), d_result_u8(Ddrop, n), n);
    REF->sdepth_fwd(n, per, p, seed, 0, NULL, x, S32, y, S32, mask);
    DEV->sdepth_fwd(n, per, p, seed, 0, NULL, Dx, T, Dy, T, Dmask);
    check_row(dt, dt, shape, Dy, y, ne, M_ELT, "sdepth_fwd y");
    cmp_u8("sdepth_fwd mask", dt, shape, d_result_u8(Dmask, n), mask, n);
    uint8_t *Dm = d_bytes((size_t)n);
    DEV->mem_put(Dm, mask, (size_t)n);
    float *dy = h_randn(ne, 0, 1, dt), *dx = h_new(ne);
    void *Ddy = d_from(dy, ne, dt), *Ddx = d_poisoned(ne, dt);
    REF->sdepth_bwd(n, per, p, mask, dy, S32, dx, S32, 0);
    DEV->sdepth_bwd(n, per, p, Dm, Ddy, T, Ddx, T, 0);
    check_row(dt, dt, shape, Ddx, dx, ne, M_ELT, "sdepth_bwd");
    float *p0 = h_randn(ne, 0, 1, dt), *dxa = h_copy(p0, ne);
    void *Ddxa = d_from(p0, ne, dt);
    REF->sdepth_bwd(n, per, p, mask, dy, S32, dxa, S32, 1);
    DEV->sdepth_bwd(n, per, p, Dm, Ddy, T, Ddxa, T, 1);
    check_row(dt, dt, shape, Ddxa, dxa, ne, M_ELT, "sdepth_bwd acc");
    release();
}

static const uint32_t SPECIALS[] = {
    0x00000000u, 0x80000000u, /* +-0 */
    0x7f800000u, 0xff800000u, /* +-inf */
    0x7fc00000u, 0xffc00000u, 0x7fc00001u, 0x7fffffffu, 0xffffffffu, /* quiet NaNs, with payloads */
    0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7f80e000u,              /* signalling NaNs */
    0x477fe000u, 0xc77fe000u, /* 65504, fp16's largest */
    0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x477ff001u, 0x47800000u, 0x49742400u, /* around fp16 overflow */
    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7effffu, /* FLT_MAX, bf16 overflow ties */
    0x38800000u, 0x387fc000u, 0x387fe000u, /* fp16 min normal, max subnormal, tie into min normal */
    0x33800000u, 0x33000000u, 0x33000001u, 0x33c00000u, 0x34200000u, 0x32ffffffu, 0xb3000000u, 0xb3c00000u,
    0x00000001u, 0x80000001u, 0x007fffffu, 0x00400000u, 0x80400000u, 0x00008000u, 0x00018000u, /* fp32 subnormals */
    0x00800000u, 0x80800000u,                                         /* FLT_MIN */
    0x3f801000u, 0x3f803000u, 0x3f801001u, 0x3f800fffu, /* fp16 ties at 1 */
    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, /* bf16 ties at 1 */
    0x3f800001u, 0x3f7fffffu, 0xbf803000u, 0xbf818000u, 0x3eaaaaabu, 0x40490fdbu,
};

static void test_round_half(int dt_unused)
{
    (void)dt_unused;
    if (!unit("round_half"))
        return;
    const int64_t ns = (int64_t)(sizeof SPECIALS / sizeof SPECIALS[0]);
    const int64_t n = QUICK ? ns + 4096 : (1 << 20) + 5;
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        float *x = h_new(n);
        for (int64_t i = 0; i < n; i++) {
            if (i < ns)
                x[i] = float_of(SPECIALS[i]);
            else if (i % 2) /* any bit pattern: every exponent, NaNs and subnormals included */
                x[i] = float_of((uint32_t)dt_rng_next(&RNG));
            else /* around the reduced types' ranges: 2^-30 .. 2^20 */
                x[i] = (float)(dt_rng_normal(&RNG) * ldexp(1.0, (int)dt_rng_below(&RNG, 51) - 30));
        }
        float *Dx = d_from(x, n, F32); /* round_half works on fp32 arrays */
        REF->round_half(n, x, bf16);
        DEV->round_half(n, Dx, bf16);
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld (%lld specials)", (long long)n, (long long)ns);
        float *got = d_result(Dx, n, F32);
        int ok = cmp_f32(bf16 ? "round_half bf16" : "round_half fp16", -1, shape, got, x, n, M_BITS);
        if (!ok) { /* say which kinds of input differ */
            int64_t nan = 0, other = 0;
            for (int64_t i = 0; i < n; i++)
                if (bits_of(got[i]) != bits_of(x[i]))
                    *(isnan(x[i]) ? &nan : &other) += 1;
            printf("      differing: %lld NaN inputs (payload or sign), %lld others\n", (long long)nan,
                   (long long)other);
        }
        release();
    }
}

static void test_normalize_u8(int dt)
{
    if (!unit("normalize_u8 %s", DTYPE_NAME[dt]))
        return;
    static const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f}, sd[4] = {0.229f, 0.224f, 0.225f, 0.25f};
    const int cs[] = {3, 1, 4};
    for (int k = 0; k < (QUICK ? 1 : 3); k++) {
        const int c = cs[k];
        const int64_t n = (int64_t)c * 8 * 17 * 19;
        uint8_t *u = hold(malloc((size_t)n), 0);
        for (int64_t i = 0; i < n; i++)
            u[i] = (uint8_t)dt_rng_below(&RNG, 256);
        uint8_t *Du = d_bytes((size_t)n); /* the batch in device memory, as a step uploads it */
        DEV->mem_put(Du, u, (size_t)n);
        float *x = h_new(n);
        void *Dx = d_poisoned(n, dt);
        float dmean[4], dsd[4];
        memcpy(dmean, mean, sizeof dmean);
        memcpy(dsd, sd, sizeof dsd);
        plan_scratch(DEV->normalize_scratch(n));
        REF->normalize_u8(n, c, u, mean, sd, S32, x);
        DEV->normalize_u8(n, c, Du, dmean, dsd, ty(dt), Dx);
        /* mean and std are read when the op is issued: changing them afterwards changes nothing */
        for (int j = 0; j < 4; j++)
            dmean[j] = dsd[j] = NAN;
        char shape[32];
        snprintf(shape, sizeof shape, "n=%lld c=%d", (long long)n, c);
        check_row(dt, dt, shape, Dx, x, n, M_ELT, "normalize_u8");
        planned_row("normalize_scratch reserved, ops allocate nothing", dt, shape);
        release();
    }
}

static void flattens(int dt)
{
    if (QUICK) {
        if (dt == F32)
            test_flatten(2, 3, 5, 7, F32);
        return;
    }
    test_flatten(3, 7, 5, 19, dt);
    test_flatten(2, 6, 6, 256, dt); /* alexnet */
    test_flatten(4, 1, 1, 2048, dt);
}

static void dropouts(int dt)
{
    if (QUICK) {
        if (dt == F32)
            test_dropout(NE, 0.5f, 0x9e3779b97f4a7c15ull, F32);
        return;
    }
    test_dropout(NE, 0.5f, 0x9e3779b97f4a7c15ull, dt);
    test_dropout(4096 * 8 + 5, 0.1f, 12345, dt);
}

static void sdepths(int dt)
{
    if (QUICK) { /* both paths */
        if (dt == F32) {
            test_sdepth(64, 8 * 8 * 16, 0.2f, 0x9e3779b97f4a7c15ull, F32);
            test_sdepth(37, 147, 0.5f, 12345, F32);
        }
        return;
    }
    test_sdepth(64, 8 * 8 * 16, 0.2f, 0x9e3779b97f4a7c15ull, dt); /* 8-wide: per a multiple of 8 */
    test_sdepth(37, 7 * 7 * 3, 0.5f, 12345, dt);                   /* per odd: one at a time */
    test_sdepth(4099, 8, 0.5f, 777, dt);                           /* many images */
    test_sdepth(1003, 1, 0.3f, 12345, dt);                         /* per 1: dropout's mask path */
}

static const ops_test TESTS[] = {
    {ST_ELTWISE, "relu", test_relu},
    {ST_ELTWISE, "add", test_add},
    {ST_ELTWISE, "copy_grad", test_copy_grad},
    {ST_ELTWISE, "scale", test_scale},
    {ST_ELTWISE, "fill", test_fill},
    {ST_MISC, "flatten", flattens},
    {ST_MISC, "dropout", dropouts},
    {ST_MISC, "sdepth", sdepths},
    {ST_ROUND_HALF, "round_half", test_round_half},
    {ST_NORMALIZE_U8, "normalize_u8", test_normalize_u8},
};
OPS_FAMILY(OPS_ELTWISE, "eltwise.cu", TESTS);
