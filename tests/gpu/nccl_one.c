/* nccl_one.c: the NCCL communicator with a world of one on device 0: allreduce (sum, avg; fp32
 * and fp16), broadcast, allgather and barrier on device buffers, every result checked on the
 * host; then libdt's engine (dt.h) on device tensors written on a stream of the caller's: three
 * all-reduces fused into one buffer with prescale and postscale (the scaling kernel, fp32 and fp16),
 * a broadcast into a separate output, an all-gather and a reduce-scatter (libdt's device results,
 * copied back), an all-to-all with its received splits: each checked on the host, one line each.
 * Exits 77 (skip) with the reason when no device can be used. */
#include "config.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "libdt/comm.h"
#include "libdt/dt.h"
#include "libdt/launch.h"
#include "util/check.h"
#include "util/log.h"

static dt_tensor dvec(void *p, int64_t n, dt_dtype t, cudaStream_t s)
{
    dt_tensor x = {.data = p, .type = t, .ndim = 1, .device = 0, .stream = s};
    x.shape[0] = n;
    return x;
}

/* the engine's rows: device tensors through dt.h, with a world of one (the sums are the inputs) */
static int engine_rows(void)
{
    if (dt_init() != 0)
        return 1;
    cudaStream_t s;
    enum { N = 3000 };
    float h[N], back[N];
    uint16_t hh[4] = {0x3c00, 0x4000, 0x4200, 0x4400}, hb[4]; /* fp16 1, 2, 3, 4 */
    float *d1, *d2, *d3, *o;
    uint16_t *dh;
    if (cudaStreamCreate(&s) || cudaMalloc((void **)&d1, N * 4) || cudaMalloc((void **)&d2, N * 4) ||
        cudaMalloc((void **)&d3, N * 4) || cudaMalloc((void **)&o, N * 4) || cudaMalloc((void **)&dh, 8))
        return 1;
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 13);
    int bad = 0, fails = 0;
    /* written on the caller's stream, then handed over: the engine waits for that stream */
    cudaMemcpyAsync(d1, h, N * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(d2, h, N * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(d3, h, N * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(dh, hh, 8, cudaMemcpyHostToDevice, s);
    dt_tensor t1 = dvec(d1, N, DT_FLOAT32, s), t2 = dvec(d2, 100, DT_FLOAT32, s), t3 = dvec(d3, N, DT_FLOAT32, s);
    dt_tensor th = dvec(dh, 4, DT_FLOAT16, s);
    dt_handle *a, *b, *c, *e;
    dt_allreduce_async("g1", &t1, &t1, DT_SUM, 0.5, 3, &a); /* x 1.5 */
    dt_allreduce_async("g2", &t2, &t2, DT_AVG, 1, 1, &b);   /* unchanged */
    dt_allreduce_async("g3", &t3, &t3, DT_SUM, 2, 1, &c);   /* x 2 */
    dt_allreduce_async("h", &th, &th, DT_SUM, 1, 2, &e);    /* fp16 x 2 */
    fails += dt_wait(a) != 0 || dt_wait(b) != 0 || dt_wait(c) != 0 || dt_wait(e) != 0;
    cudaMemcpy(back, d1, N * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N; i++)
        bad += back[i] != 1.5f * h[i];
    cudaMemcpy(back, d2, N * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 100; i++)
        bad += back[i] != h[i];
    cudaMemcpy(back, d3, N * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N; i++)
        bad += back[i] != 2 * h[i];
    cudaMemcpy(hb, dh, 8, cudaMemcpyDeviceToHost);
    bad += hb[0] != 0x4000 || hb[1] != 0x4400 || hb[2] != 0x4600 || hb[3] != 0x4800; /* 2, 4, 6, 8 */
    printf("%s: libdt engine, device tensors: 3 fused all-reduces with prescale/postscale, fp16 postscale\n",
           bad || fails ? "FAIL" : "ok");
    int bad2 = 0;
    dt_tensor to = dvec(o, N, DT_FLOAT32, s), out;
    dt_broadcast_async("b", &t3, &to, 0, &a);
    dt_allgather_async("ag", &t1, &b);
    dt_reducescatter_async("rs", &t1, DT_SUM, 1, 1, &c);
    dt_alltoall_async("a2a", &t1, NULL, &e);
    fails = dt_wait(a) != 0 || dt_wait(b) != 0 || dt_wait(c) != 0 || dt_wait(e) != 0;
    cudaMemcpy(back, o, N * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N; i++)
        bad2 += back[i] != 2 * h[i];
    dt_handle *hs[3] = {b, c, e};
    for (int k = 0; k < 3 && !fails; k++) {
        int64_t got = -1;
        bad2 += dt_output(hs[k], &out) != 0 || out.device != 0 || out.shape[0] != N;
        bad2 += dt_output_copy(hs[k], back) != 0;
        for (int i = 0; i < N; i++)
            bad2 += back[i] != 1.5f * h[i];
        if (k == 2)
            bad2 += dt_received_splits(e, &got) != 0 || got != N;
    }
    printf("%s: libdt engine, device tensors: broadcast, all-gather, reduce-scatter, all-to-all\n",
           bad2 || fails ? "FAIL" : "ok");
    dt_handle_free(a);
    dt_handle_free(b);
    dt_handle_free(c);
    dt_handle_free(e);
    cudaFree(d1);
    cudaFree(d2);
    cudaFree(d3);
    cudaFree(o);
    cudaFree(dh);
    cudaStreamDestroy(s);
    dt_finalize();
    return bad || bad2 || fails;
}

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
    int engine_bad = engine_rows();
    return bad || engine_bad;
}
