/* test_half.c: fp16 and bfloat16 conversions against IEEE rules.
 *   - all 65536 fp16 values: to float exactly (against the compiler's _Float16 where it has one,
 *     else against the value computed from the fields), and back to the same bits;
 *   - float to fp16: every midpoint between neighbouring fp16 values rounds to the even one, one
 *     float ulp either side rounds to the nearer; overflow, subnormals, zeros, NaN; a million
 *     random floats against _Float16;
 *   - float to bfloat16: every upper half with the lower halves below, at and above the midpoint;
 *   - the bulk (F16C) conversions equal the scalar ones. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/half.h"
#include "util/rng.h"

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* the value of fp16 bits from the fields, in double (exact) */
static double f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

int main(void)
{
    /* fp16 -> float, all values */
    int bad_val = 0, bad_round = 0, nan_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_f32((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (isnan(want)) {
            nan_ok = nan_ok && isnan(f) && isnan(dt_f32_to_f16(f) == 0 ? NAN : f16_value(dt_f32_to_f16(f)));
            continue;
        }
        bad_val += (double)f != want || !signbit(f) != !signbit(want);
#ifdef __FLT16_MAX__
        _Float16 t;
        uint16_t hb = (uint16_t)h;
        memcpy(&t, &hb, 2);
        bad_val += f_bits(f) != f_bits((float)t);
#endif
        bad_round += dt_f32_to_f16(f) != h;
    }
    TAP_OK(!bad_val, "all 65536 fp16 values convert to the exact float (%d wrong)%s", bad_val,
#ifdef __FLT16_MAX__
           ", the same as _Float16's"
#else
           ""
#endif
    );
    TAP_OK(!bad_round && nan_ok, "and back to the same bits (%d differ), NaN stays NaN", bad_round);

    /* midpoints between neighbouring positive finite fp16 values: ties to even, then +-1 ulp */
    int bad_tie = 0, bad_near = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = f16_value((uint16_t)h), hi = f16_value((uint16_t)(h + 1)), mid = (lo + hi) / 2;
        float fm = (float)mid; /* exact: fp16 midpoints have few bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        bad_tie += (double)fm != mid || dt_f32_to_f16(fm) != even || dt_f32_to_f16(-fm) != (even | 0x8000);
        bad_near += dt_f32_to_f16(nextafterf(fm, 0)) != h || dt_f32_to_f16(nextafterf(fm, INFINITY)) != h + 1;
    }
    TAP_OK(!bad_tie, "every midpoint rounds to the even neighbour, both signs (%d wrong)", bad_tie);
    TAP_OK(!bad_near, "one float ulp below or above a midpoint rounds to the nearer (%d wrong)", bad_near);

    /* edges */
    struct {
        float f;
        uint16_t h;
        const char *what;
    } edge[] = {
        {65504.0f, 0x7bff, "65504, the largest half"},
        {65519.99f, 0x7bff, "65519.99 rounds down to 65504"},
        {65520.0f, 0x7c00, "65520 (the midpoint to 65536) rounds to infinity"},
        {1e10f, 0x7c00, "1e10 overflows to infinity"},
        {-1e10f, 0xfc00, "-1e10 to -infinity"},
        {INFINITY, 0x7c00, "infinity"},
        {5.9604644775390625e-8f, 0x0001, "2^-24, the smallest subnormal"},
        {2.98023223876953125e-8f, 0x0000, "2^-25 (a tie) rounds to even: zero"},
        {4.470348358154296875e-8f, 0x0001, "3*2^-26 rounds to 2^-24"},
        {6.103515625e-5f, 0x0400, "2^-14, the smallest normal"},
        {6.0975551605224609375e-5f, 0x03ff, "the largest subnormal"},
        {1e-10f, 0x0000, "1e-10 underflows to zero"},
        {-0.0f, 0x8000, "-0 keeps its sign"},
        {1.0f, 0x3c00, "1"},
        {1.0009765625f, 0x3c01, "1 + 2^-10"},
    };
    int bad_edge = 0;
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        if (dt_f32_to_f16(edge[i].f) != edge[i].h) {
            tap_diag("%s: got 0x%04x, want 0x%04x", edge[i].what, dt_f32_to_f16(edge[i].f), edge[i].h);
            bad_edge++;
        }
    TAP_OK(!bad_edge, "%d edge cases: overflow, subnormals, ties, signed zero", (int)(sizeof edge / sizeof *edge));
    uint16_t qn = dt_f32_to_f16(NAN), sn = dt_f32_to_f16(bits_f(0x7f800001u));
    TAP_OK((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff) && (sn & 0x7c00) == 0x7c00 && (sn & 0x3ff),
           "NaN (quiet 0x%04x, signalling 0x%04x) stays NaN", qn, sn);

    dt_rng r;
    dt_rng_seed(&r, 99, 0);
    enum { NR = 1000000 };
    float *rf = malloc(NR * sizeof(float));
    for (int i = 0; i < NR; i++) { /* random bit patterns over the whole float range, and near the half range */
        uint32_t u = (uint32_t)dt_rng_next(&r);
        rf[i] = i % 2 ? bits_f(u) : (float)ldexp(dt_rng_uniform(&r) * 2 - 1, (int)dt_rng_below(&r, 44) - 28);
    }
#ifdef __FLT16_MAX__
    int bad_rand = 0;
    for (int i = 0; i < NR; i++) {
        _Float16 t = (_Float16)rf[i];
        uint16_t hb;
        memcpy(&hb, &t, 2);
        uint16_t got = dt_f32_to_f16(rf[i]);
        bad_rand += isnan(rf[i]) ? !((got & 0x7c00) == 0x7c00 && (got & 0x3ff)) : got != hb;
    }
    TAP_OK(!bad_rand, "a million random floats round as _Float16 does (%d differ)", bad_rand);
#else
    tap_skip("the compiler has no _Float16", "random floats against _Float16");
#endif

    /* bfloat16: upper halves with lower halves below, at and above the midpoint */
    int bad_bf = 0;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t hi = 0; hi < 65536; hi++) {
        if ((hi & 0x7f80) == 0x7f80)
            continue; /* infinities and NaNs below */
        for (size_t k = 0; k < sizeof lows / sizeof *lows; k++) {
            uint32_t u = hi << 16 | lows[k], lo = lows[k];
            uint32_t want = lo < 0x8000 ? hi : lo > 0x8000 ? hi + 1 : hi + (hi & 1); /* nearest, ties to even */
            bad_bf += dt_f32_to_bf16(bits_f(u)) != want; /* a carry into the exponent is right, up to infinity */
        }
        bad_bf += dt_bf16_to_f32((uint16_t)hi) != bits_f(hi << 16);
    }
    TAP_OK(!bad_bf, "bfloat16: every upper half x 6 lower halves round to nearest even, and convert back exactly (%d wrong)",
           bad_bf);
    TAP_OK(dt_f32_to_bf16(INFINITY) == 0x7f80 && dt_f32_to_bf16(-INFINITY) == 0xff80 &&
               isnan(dt_bf16_to_f32(dt_f32_to_bf16(NAN))) && isnan(dt_bf16_to_f32(dt_f32_to_bf16(bits_f(0x7f800001u)))) &&
               dt_f32_to_bf16(bits_f(0x7f7fffffu)) == 0x7f80,
           "bfloat16: infinities kept, NaN stays NaN (also one whose payload is in the low half), FLT_MAX rounds to infinity");

    /* bulk conversions (F16C when the CPU has it) equal the scalar ones */
    uint16_t *h1 = malloc(NR * sizeof(uint16_t)), *h2 = malloc(NR * sizeof(uint16_t));
    float *f1 = malloc(65536 * sizeof(float));
    uint16_t *all = malloc(65536 * sizeof(uint16_t));
    dt_f32_to_f16_n(NR, rf, h1);
    int bad_bulk = 0;
    for (int i = 0; i < NR; i++) {
        h2[i] = dt_f32_to_f16(rf[i]);
        bad_bulk += isnan(rf[i]) ? (h1[i] & 0x7c00) != 0x7c00 || !(h1[i] & 0x3ff) : h1[i] != h2[i];
    }
    for (uint32_t h = 0; h < 65536; h++)
        all[h] = (uint16_t)h;
    dt_f16_to_f32_n(65536, all, f1);
    for (uint32_t h = 0; h < 65536; h++) {
        float s = dt_f16_to_f32((uint16_t)h);
        bad_bulk += isnan(s) ? !isnan(f1[h]) : f_bits(s) != f_bits(f1[h]);
    }
    TAP_OK(!bad_bulk, "bulk conversions (%s) equal the scalar ones on a million floats and all 65536 halves",
           dt_half_uses_f16c() ? "F16C" : "portable");
    dt_f32_to_bf16_n(NR, rf, h1);
    int bad_bbulk = 0;
    for (int i = 0; i < NR; i++)
        bad_bbulk += h1[i] != dt_f32_to_bf16(rf[i]);
    TAP_OK(!bad_bbulk, "bulk bfloat16 conversion equals the scalar one");
    free(rf);
    free(h1);
    free(h2);
    free(f1);
    free(all);
    return tap_done();
}
