/* rng.c: xoshiro256** and helpers (contract in rng.h). */
#include "config.h"

#include "util/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void dt_rng_seed(dt_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) /* the one state xoshiro cannot leave */
        r->s[0] = 1;
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t dt_rng_next(dt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dt_rng_uniform(dt_rng *r)
{
    return (double)(dt_rng_next(r) >> 11) * 0x1.0p-53;
}

double dt_rng_normal(dt_rng *r)
{
    double u1;
    do
        u1 = dt_rng_uniform(r);
    while (u1 <= 0.0);
    double u2 = dt_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

uint64_t dt_rng_below(dt_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* reject the incomplete last block */
    uint64_t x;
    do
        x = dt_rng_next(r);
    while (x >= limit);
    return x % n;
}

uint64_t dt_hash64(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
    return splitmix64(&x);
}
