/* cpu.h: the CPU backend's functions (the table is in backend_cpu.c) and shared helpers.
 * Contracts of the ops are those of the matching dt_backend members in nn/backend.h. */
#ifndef DT_NN_CPU_CPU_H
#define DT_NN_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"
#include "util/clones.h"

/* OpenMP thread count and id inside a parallel region (1 and 0 without OpenMP) */
int dt_omp_threads(void);
int dt_omp_thread(void);

/* helpers */
void dt_cpu_zero(int64_t n, float *x);
/* y[r, :] += bias for rows r < rows of c columns */
void dt_cpu_add_bias(int64_t rows, int c, const float *bias, float *y);
/* out[j] (+)= sum over r of y[r, j] */
void dt_cpu_column_sums(int64_t rows, int c, const float *y, float *out, int accumulate);

/* 1x1, stride 1, no padding: the input itself is the GEMM's [rows, C] matrix */
int dt_cpu_conv_pointwise(const dt_conv_desc *d);

/* the ops, dt_cpu_<name> for each op of nn/backend.h's list: conv.c (the im2col reference
 * convolutions), bn.c, pool.c, linear.c (linear layers, xent), eltwise.c (the rest) */
#define DT_CPU_DECLARE(name, ret, params, args) ret dt_cpu_##name params;
DT_OPS(DT_CPU_DECLARE)
#undef DT_CPU_DECLARE

/* the convolutions through oneDNN, dt_cpu_dnnl_<name> (builds with HAVE_DNNL); shapes oneDNN refuses
 * fall back to the reference's */
#define DT_CPU_DNNL_DECLARE(name, ret, params, args) ret dt_cpu_dnnl_##name params;
DT_CONV_OPS(DT_CPU_DNNL_DECLARE)
#undef DT_CPU_DNNL_DECLARE

/* memory (backend_cpu.c): mem_copy is both mem_put and mem_get */
void *dt_cpu_mem_alloc(size_t bytes);
void dt_cpu_mem_free(void *p);
void dt_cpu_mem_copy(void *dst, const void *src, size_t bytes);
void dt_cpu_sync(void);
/* planning: DT_OK (the CPU ops need no scratch) */
int dt_cpu_reserve_scratch(size_t bytes);

#endif
