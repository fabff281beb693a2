/* ops_check_backend.c: ops_check's check of the backend's device memory (mem_alloc, mem_put, mem_get:
 * src/nn/cuda/backend_cuda.c). The rules are in ops_check.c's top comment. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

static void test_memory(int dt_unused)
{
    (void)dt_unused;
    if (!unit("mem"))
        return;
    const size_t bytes = 1000003; /* odd: no multiple of any vector width */
    uint8_t *d = d_bytes(bytes), *h = hold(malloc(bytes), 0), *back = hold(malloc(bytes), 0);
    memset(h, 0x5a, bytes);
    DEV->mem_get(h, d, bytes);
    int64_t nonzero = 0;
    for (size_t i = 0; i < bytes; i++)
        nonzero += h[i] != 0;
    row("mem_alloc zeroed", "-", "1000003 bytes", (double)nonzero, (double)nonzero, M_EXACT, 0, nonzero == 0);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (uint8_t)dt_rng_next(&RNG);
    DEV->mem_put(d, h, bytes);
    drain(DEV);
    DEV->mem_get(back, d, bytes);
    int64_t off = 0;
    for (size_t i = 0; i < bytes; i++)
        off += h[i] != back[i];
    row("mem_put/mem_get round trip", "-", "1000003 bytes", (double)off, (double)off, M_BITS, 0, off == 0);
    /* at an offset inside a buffer, as the model's arenas use it */
    float *f = d_poisoned(1000, F32), *src = h_randn(1000, 0, 1, F32), *got = h_new(1000);
    DEV->mem_put(f + 3, src + 3, 501 * sizeof(float));
    DEV->mem_get(got + 3, f + 3, 501 * sizeof(float));
    cmp_f32("mem_put/mem_get at an offset", -1, "floats [3, 504)", got + 3, src + 3, 501, M_BITS);
    release();
}

static const ops_test TESTS[] = {
    {ST_MEM, "mem", test_memory},
};
OPS_FAMILY(OPS_BACKEND, "backend_cuda.c", TESTS);
