/* ops_util.h: helpers shared by the unit tests of the backends' ops (test_ops_attn.c, test_ops_ln.c,
 * test_ops_typed.c): allocation that cannot fail quietly, random fp32 inputs and their double copies for
 * the references, bit-for-bit comparison of fp32 outputs, and typed operands (values of one dtype kept
 * both as fp32, for the fp32 op, and as that dtype's storage, for the typed op; nn/backend.h's "Types").
 * Header only, like tap.h: each test stays one C file linking nothing more. The functions are static
 * inline so that a test using only some of them builds cleanly under -Werror.
 *
 * The random stream is this header's rng, one per test program: each test seeds it in main and every
 * draw, here or in the test, comes from it in the order the test makes them, so the values a test checks
 * do not depend on which of its helpers live here. */
#ifndef DT_TESTS_OPS_UTIL_H
#define DT_TESTS_OPS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "util/half.h"
#include "util/rng.h"

static dt_rng rng;

static inline const char *tname(dt_dtype t)
{
    return t == DT_FLOAT16 ? "fp16" : t == DT_BFLOAT16 ? "bf16" : "fp32";
}

/* bytes of one value stored in t */
static inline size_t tbytes(dt_dtype t)
{
    return t == DT_FLOAT32 ? sizeof(float) : sizeof(uint16_t);
}

/* zeroed and 64-byte aligned, as the model's arenas and workspaces are (a library may pick its code
 * by an operand's address modulo 64, so both sides of a bit-for-bit comparison get the same), or
 * the test exits 99 (a hard error to automake's driver): a NULL must not pass for a result */
static inline void *zalloc(size_t n, size_t size)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    if (size == 0 || n > SIZE_MAX / size || posix_memalign(&p, 64, n * size)) {
        fprintf(stderr, "zalloc: %zu x %zu bytes: out of memory\n", n, size);
        exit(99);
    }
    memset(p, 0, n * size);
    return p;
}

/* n values in [lo, hi) */
static inline float *uniform(int64_t n, double lo, double hi)
{
    float *p = zalloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * dt_rng_uniform(&rng));
    return p;
}

/* the bytes at p in a fresh buffer (64-byte aligned) */
static inline void *bytes_of(const void *p, size_t bytes)
{
    void *c = zalloc(bytes, 1);
    memcpy(c, p, bytes);
    return c;
}

static inline float *copy_of(const float *f, int64_t n)
{
    return bytes_of(f, (size_t)n * sizeof(float));
}

/* the references' inputs: the same values as the op's, in double */
static inline double *to_double(const float *f, int64_t n)
{
    double *d = zalloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}

/* the largest |value - ref| relative to the largest |ref|, the values being af's (or ad's when af is
 * NULL): a NaN among them is an infinite error (fmax alone would skip it, and a NaN would pass) */
static inline double max_rel(const float *af, const double *ad, const double *ref, int64_t n)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double a = af ? af[i] : ad[i];
        e = isnan(a) ? INFINITY : fmax(e, fabs(a - ref[i]));
        m = fmax(m, fabs(ref[i]));
        if (isinf(e))
            break;
    }
    return e == 0 ? 0 : m > 0 ? e / m : INFINITY;
}

/* bit for bit: a against b; and a against the rounded fp32 sums old + b when old is given (what an op
 * accumulating into old must store) */
static inline int same_f32(const float *a, const float *b, const float *old, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float want = old ? old[i] + b[i] : b[i];
        if (memcmp(&a[i], &want, sizeof want))
            return 0;
    }
    return 1;
}

/* --- typed operands ------------------------------------------------------------------------------- */

/* storage of type t from fp32 values (exact where v holds values of t); fp32 is copied */
static inline void store_as(dt_dtype t, const float *v, int64_t n, void *s)
{
    if (t == DT_FLOAT16)
        dt_f32_to_f16_n((size_t)n, v, s);
    else if (t == DT_BFLOAT16)
        dt_f32_to_bf16_n((size_t)n, v, s);
    else
        memcpy(s, v, (size_t)n * sizeof(float));
}

/* a fresh buffer of n values of type t stored from fp32 values v (as store_as) */
static inline void *stored(dt_dtype t, const float *v, int64_t n)
{
    void *s = zalloc((size_t)n, tbytes(t));
    store_as(t, v, n, s);
    return s;
}

/* values of type t both ways: v as fp32 (what the fp32 op gets), s stored in t (what the typed op gets) */
typedef struct typed {
    dt_dtype t;
    int64_t n;
    float *v;
    void *s;
} typed;

/* values of t: draws in [lo, hi) (or from's values, drawing nothing) rounded to t */
static inline typed typed_new(dt_dtype t, int64_t n, double lo, double hi, const float *from)
{
    typed a = {t, n, from ? copy_of(from, n) : uniform(n, lo, hi), NULL};
    if (t != DT_FLOAT32)
        dt_round_half(a.v, n, t == DT_BFLOAT16);
    a.s = stored(t, a.v, n);
    return a;
}

/* the typed op's output (a->s) is the fp32 op's (a->v) rounded to a->t, bit for bit */
static inline int typed_same(const typed *a)
{
    void *want = stored(a->t, a->v, a->n);
    const int ok = memcmp(want, a->s, (size_t)a->n * tbytes(a->t)) == 0;
    free(want);
    return ok;
}

static inline void typed_free(typed *a)
{
    free(a->v);
    free(a->s);
}

#endif
