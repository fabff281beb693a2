/* cuda_smoke.c: on each visible CUDA device, run the device self-test (a kernel whose every output
 * is checked on the host). Exits 77 (skip) with the reason when no device can be used. */
#include "config.h"

#include <cuda_runtime.h>
#include <stdio.h>

#include "util/check.h"
#include "util/cuda_selftest.h"
#include "util/log.h"

int main(void)
{
    dt_log_init();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device here (cudaGetDeviceCount: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    int failed = 0;
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
            printf("FAIL: device %d: cudaGetDeviceProperties failed\n", d);
            failed++;
            continue;
        }
        int rc = dt_cuda_selftest(d, (size_t)1 << 24);
        printf("%s: device %d %s (sm_%d%d, %.1f GiB): self-test %s\n", rc == DT_OK ? "PASS" : "FAIL", d, p.name,
               p.major, p.minor, (double)p.totalGlobalMem / (1 << 30), dt_status_str(rc));
        failed += rc != DT_OK;
    }
    return failed ? 1 : 0;
}
