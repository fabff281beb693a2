/* nccl_one.c: the NCCL communicator with a world of one on device 0: allreduce (sum, avg; fp32
 * and fp16), broadcast, allgather and barrier on device buffers, every result checked on the
 * host. Exits 77 (skip) with the reason when no device can be used. */
#include "config.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "util/check.h"
#include "util/log.h"

int main(void)
{
    dt_log_init();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device here (cudaGetDeviceCount: %s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    dt_launch l;
    dt_comm *c;
    if (dt_launch_init(&l) || dt_comm_nccl(&c, &l, 0, 60))
        return 1;
    enum { N = 1 << 20 };
    float *h = malloc(N * sizeof(float)), *d = NULL, *g = NULL;
    uint16_t hh[4] = {0x3c00, 0x4000, 0x4200, 0x4400}; /* fp16 1, 2, 3, 4 */
    uint16_t *dh = NULL;
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 97) * 0.5f;
    int bad = 0;
    if (cudaMalloc((void **)&d, N * sizeof(float)) || cudaMalloc((void **)&g, N * sizeof(float)) ||
        cudaMalloc((void **)&dh, sizeof hh) || cudaMemcpy(d, h, N * sizeof(float), cudaMemcpyHostToDevice) ||
        cudaMemcpy(dh, hh, sizeof hh, cudaMemcpyHostToDevice))
        return 1;
    bad += c->ops->allreduce(c, d, d, N, DT_FLOAT32, DT_SUM) != DT_OK;
    bad += c->ops->allreduce(c, d, d, N, DT_FLOAT32, DT_AVG) != DT_OK;
    bad += c->ops->allreduce(c, dh, dh, 4, DT_FLOAT16, DT_SUM) != DT_OK;
    bad += c->ops->broadcast(c, d, N, DT_FLOAT32, 0) != DT_OK;
    bad += c->ops->allgather(c, d, g, N, DT_FLOAT32) != DT_OK;
    bad += c->ops->barrier(c) != DT_OK;
    float *back = malloc(N * sizeof(float));
    uint16_t hb[4];
    if (cudaMemcpy(back, g, N * sizeof(float), cudaMemcpyDeviceToHost) || cudaMemcpy(hb, dh, sizeof hb, cudaMemcpyDeviceToHost))
        return 1;
    for (int i = 0; i < N; i++)
        bad += back[i] != h[i];
    for (int i = 0; i < 4; i++)
        bad += hb[i] != hh[i];
    printf("%s: NCCL world of 1 on device 0: allreduce fp32/fp16, broadcast, allgather, barrier\n", bad ? "FAIL" : "ok");
    cudaFree(d);
    cudaFree(g);
    cudaFree(dh);
    free(h);
    free(back);
    dt_comm_free(c);
    dt_launch_finalize(&l);
    return bad != 0;
}
