/* mix.c: mixup and cutmix on uint8 batches (contract in mix.h). */
#include "config.h"

#include "data/mix.h"

#include <math.h>
#include <string.h>

#include "util/rng.h"

/* a standard normal from two uniforms (Box-Muller; u1 in (0, 1]) */
static double normal(double (*next)(void *), void *ctx)
{
    const double u1 = 1.0 - next(ctx), u2 = next(ctx);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Gamma(a, 1), a > 0: Marsaglia and Tsang for a >= 1; a < 1 through Gamma(a + 1) * U^(1/a) */
static double gamma_draw(double a, double (*next)(void *), void *ctx)
{
    if (a < 1.0) {
        const double u = 1.0 - next(ctx);
        return gamma_draw(a + 1.0, next, ctx) * pow(u, 1.0 / a);
    }
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal(next, ctx), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        const double u = 1.0 - next(ctx);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double dt_beta_symmetric(double a, double (*next)(void *), void *ctx)
{
    const double x = gamma_draw(a, next, ctx), y = gamma_draw(a, next, ctx);
    return x + y > 0 ? x / (x + y) : 0.5;
}

static double uniform(void *r)
{
    return dt_rng_uniform(r);
}

dt_mix dt_mix_draw(uint64_t seed, int64_t epoch, int64_t step, double mixup_alpha, double cutmix_alpha, int h, int w)
{
    dt_mix m = {DT_MIX_NONE, 1.0, 0, 0, 0, 0, 1.0, 0, 0};
    if (!(mixup_alpha > 0) && !(cutmix_alpha > 0))
        return m;
    dt_rng r; /* the batch's draws: (seed, epoch, step), apart from the images' own */
    dt_rng_seed(&r, dt_hash64(dt_hash64(seed, 0x6d69787570ull), (uint64_t)epoch), (uint64_t)step);
    if (mixup_alpha > 0 && cutmix_alpha > 0)
        m.kind = dt_rng_uniform(&r) < 0.5 ? DT_MIX_MIXUP : DT_MIX_CUTMIX;
    else
        m.kind = mixup_alpha > 0 ? DT_MIX_MIXUP : DT_MIX_CUTMIX;
    const double alpha = m.kind == DT_MIX_MIXUP ? mixup_alpha : cutmix_alpha;
    m.lambda = dt_beta_symmetric(alpha, uniform, &r);
    if (m.kind == DT_MIX_CUTMIX) { /* torchvision's box, then lambda from its area */
        const int rx = (int)dt_rng_below(&r, (uint64_t)w), ry = (int)dt_rng_below(&r, (uint64_t)h);
        m.drawn = m.lambda;
        m.rx = rx;
        m.ry = ry;
        const double half = 0.5 * sqrt(1.0 - m.lambda);
        const int hw = (int)(half * w), hh = (int)(half * h);
        m.x1 = rx - hw < 0 ? 0 : rx - hw;
        m.y1 = ry - hh < 0 ? 0 : ry - hh;
        m.x2 = rx + hw > w ? w : rx + hw;
        m.y2 = ry + hh > h ? h : ry + hh;
        m.lambda = 1.0 - (double)(m.x2 - m.x1) * (m.y2 - m.y1) / ((double)w * h);
    }
    return m;
}

/* image i from its own pixels and the other's (the image before it, as it was) */
static void mix_one(const dt_mix *m, uint8_t *x, const uint8_t *o, int h, int w, int c)
{
    if (m->kind == DT_MIX_MIXUP) {
        const float lam = (float)m->lambda, rest = (float)(1.0 - m->lambda);
        const size_t n = (size_t)h * w * c;
        for (size_t i = 0; i < n; i++) {
            const float v = lam * x[i] + rest * o[i];
            x[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : (int)lrintf(v));
        }
        return;
    }
    const size_t row = (size_t)w * c, span = (size_t)(m->x2 - m->x1) * c;
    for (int y = m->y1; y < m->y2; y++)
        memcpy(x + y * row + (size_t)m->x1 * c, o + y * row + (size_t)m->x1 * c, span);
}

void dt_mix_apply(const dt_mix *m, uint8_t *x, int n, int h, int w, int c, uint8_t *other)
{
    if (m->kind == DT_MIX_NONE || n < 1)
        return;
    const size_t bytes = (size_t)h * w * c;
    memcpy(other, x + (size_t)(n - 1) * bytes, bytes); /* the last image, before image n-1 changes */
    for (int i = n - 1; i >= 1; i--) /* downwards: image i - 1 is still as it was */
        mix_one(m, x + (size_t)i * bytes, x + (size_t)(i - 1) * bytes, h, w, c);
    mix_one(m, x, other, h, w, c);
}
