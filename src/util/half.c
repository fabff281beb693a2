/* half.c: fp16 and bfloat16 conversions (contract in half.h). */
#include "config.h"

#include "util/half.h"

#include "util/clones.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT_X86 1
#endif

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 bits u to bf16, without a branch (so that the bulk loop vectorises): a NaN stays a (quiet)
 * NaN, anything else is rounded to nearest even */
static inline uint16_t bf16_from_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16, quiet = (u >> 16) | 0x40;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

uint16_t dt_f32_to_bf16(float f)
{
    return bf16_from_bits(f32_bits(f));
}

float dt_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t dt_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* rounds to 65520 or more: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero), rounded to nearest even */
        float v = bits_f32(a) * 16777216.0f; /* scaled by 2^24: the half's integer mantissa */
        return (uint16_t)(sign | (uint32_t)nearbyintf(v));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1); /* round the 13 dropped bits to nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float dt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0) /* zero or subnormal: m * 2^-24 */
        return bits_f32(sign) + (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;
    if (e == 31)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* the bulk bf16 conversions vectorise (for the machine the program runs on: DT_CLONES) */
DT_CLONES
void dt_f32_to_bf16_n(size_t n, const float *src, uint16_t *dst)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_from_bits(f32_bits(src[i]));
}

DT_CLONES
void dt_bf16_to_f32_n(size_t n, const uint16_t *src, float *dst)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_f32((uint32_t)src[i] << 16);
}

#ifdef DT_X86
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(size_t n, const float *src, uint16_t *dst)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++)
        dst[i] = dt_f32_to_f16(src[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(size_t n, const uint16_t *src, float *dst)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < n; i++)
        dst[i] = dt_f16_to_f32(src[i]);
}
#endif

int dt_half_uses_f16c(void)
{
#ifdef DT_X86
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    return 0;
#endif
}

void dt_f32_to_f16_n(size_t n, const float *src, uint16_t *dst)
{
#ifdef DT_X86
    if (dt_half_uses_f16c()) {
        f32_to_f16_f16c(n, src, dst);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_f32_to_f16(src[i]);
}

void dt_f16_to_f32_n(size_t n, const uint16_t *src, float *dst)
{
#ifdef DT_X86
    if (dt_half_uses_f16c()) {
        f16_to_f32_f16c(n, src, dst);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_f16_to_f32(src[i]);
}

void dt_round_half(float *x, int64_t n, int bf16)
{
    enum { CHUNK = 1024 };
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += CHUNK) {
        uint16_t h[CHUNK];
        size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        if (bf16) {
            dt_f32_to_bf16_n(k, x + i, h);
            dt_bf16_to_f32_n(k, h, x + i);
        } else {
            dt_f32_to_f16_n(k, x + i, h);
            dt_f16_to_f32_n(k, h, x + i);
        }
    }
}

int dt_is_half(const float *x, int64_t n, int bf16)
{
    for (int64_t i = 0; i < n; i++) {
        float r = bf16 ? dt_bf16_to_f32(dt_f32_to_bf16(x[i])) : dt_f16_to_f32(dt_f32_to_f16(x[i]));
        if (r != x[i] && !(r != r && x[i] != x[i]))
            return 0;
    }
    return 1;
}
