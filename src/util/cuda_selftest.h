/* cuda_selftest.h: a quick end-to-end check that a CUDA device computes correctly (CUDA builds only).
 * Allocates on the device, runs a kernel (y = a*x + y over n floats with an index pattern), copies back
 * and compares every element with the same computation on the host. */
#ifndef DT_UTIL_CUDA_SELFTEST_H
#define DT_UTIL_CUDA_SELFTEST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns DT_OK when all n results match exactly, DT_ERR_CUDA when a CUDA call fails, DT_ERR_STATE
 * when a result differs (each logged), DT_ERR_NOMEM when host memory runs out. */
int dt_cuda_selftest(int device, size_t n);

#ifdef __cplusplus
}
#endif
#endif
