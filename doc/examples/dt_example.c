/* dt_example.c: libdt's API in one small program, checking its own results.
 * Build against an installed libdt:  cc dt_example.c -o dt_example $(pkg-config --cflags --libs dt)
 * Run:  ./dt_example              (one process)
 *       mpirun -np 4 ./dt_example
 *       srun --mpi=pmix -N2 --ntasks-per-node=2 ./dt_example
 * Prints one line per rank and exits 0 when every collective gave what it should. */
#include <dt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    if (dt_init() != 0)
        return 1;
    int r = dt_rank(), n = dt_size(), bad = 0;
    enum { N = 1000 };
    float *g = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        g[i] = (float)(r + 1) * (float)(i % 7);
    /* the sum over ranks of (r + 1) is n (n + 1) / 2 */
    if (dt_allreduce(g, g, N, DT_FLOAT32, DT_SUM) != 0)
        return 1;
    for (int i = 0; i < N; i++)
        bad += g[i] != (float)(n * (n + 1) / 2) * (float)(i % 7);
    double avg = r;
    if (dt_allreduce(&avg, &avg, 1, DT_FLOAT64, DT_AVG) != 0)
        return 1;
    bad += avg != (n - 1) / 2.0;
    /* fp16 and bf16: 1.5 from every rank sums to 1.5 n exactly for small n */
    uint16_t h[2] = {0x3e00, 0x3fc0}; /* 1.5 in fp16, 1.5 in bf16 */
    if (dt_allreduce(&h[0], &h[0], 1, DT_FLOAT16, DT_SUM) != 0 || dt_allreduce(&h[1], &h[1], 1, DT_BFLOAT16, DT_SUM))
        return 1;
    float f16 = 0, bf16 = 0;
    { /* decode the two results: fp16 1.5 n for n <= 8 has an exact encoding; so does bf16 */
        uint32_t e = (h[0] >> 10) & 31, m = h[0] & 1023;
        f16 = (float)(1024 + m) / 1024.0f * (float)(1 << e) / 32768.0f;
        uint32_t u = (uint32_t)h[1] << 16;
        memcpy(&bf16, &u, 4);
    }
    bad += f16 != 1.5f * (float)n || bf16 != 1.5f * (float)n;
    /* broadcast from the last rank, allgather of ranks */
    int32_t v = r == n - 1 ? 4242 : -1, *all = malloc((size_t)n * sizeof(int32_t));
    if (dt_broadcast(&v, 1, DT_INT32, n - 1) != 0 || dt_allgather(&r, all, 1, DT_INT32) != 0 || dt_barrier() != 0)
        return 1;
    bad += v != 4242;
    for (int i = 0; i < n; i++)
        bad += all[i] != i;
    printf("rank %d of %d, local rank %d of %d, launched by %s: %s\n", r, n, dt_local_rank(), dt_local_size(),
           dt_launch_name(), bad ? "MISMATCH" : "all collectives correct");
    free(g);
    free(all);
    dt_finalize();
    return bad != 0;
}
