/* rng.h: seeded, reproducible random numbers (xoshiro256** seeded through splitmix64).
 * Same seed, same sequence on every machine and thread count: initialisation, dropout masks and
 * data augmentation all draw from streams made here. Not for cryptography. */
#ifndef DT_UTIL_RNG_H
#define DT_UTIL_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_rng {
    uint64_t s[4];
} dt_rng;

/* A stream for (seed, stream): distinct streams of one seed are independent for our purposes. */
void dt_rng_seed(dt_rng *r, uint64_t seed, uint64_t stream);
uint64_t dt_rng_next(dt_rng *r);
/* uniform in [0, 1) with 53 random bits */
double dt_rng_uniform(dt_rng *r);
/* standard normal (Box-Muller in double) */
double dt_rng_normal(dt_rng *r);
/* uniform integer in [0, n), n > 0, without modulo bias */
uint64_t dt_rng_below(dt_rng *r, uint64_t n);
/* a stateless 64-bit mix of (a, b): for per-element random bits (dropout) that do not depend on
 * how work is split between threads */
uint64_t dt_hash64(uint64_t a, uint64_t b);

#ifdef __cplusplus
}
#endif
#endif
