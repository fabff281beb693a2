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
size_t dt_cpu_conv_workspace(const dt_conv_desc *d);
void dt_cpu_conv_fwd(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws);
void dt_cpu_conv_bwd_data(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws);
void dt_cpu_conv_bwd_filter(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias,
                            int accumulate, void *ws);

/* the same through oneDNN (builds with HAVE_DNNL); shapes oneDNN refuses fall back to the above */
size_t dt_cpu_dnnl_conv_workspace(const dt_conv_desc *d);
void dt_cpu_dnnl_conv_fwd(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws);
void dt_cpu_dnnl_conv_bwd_data(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate,
                               void *ws);
void dt_cpu_dnnl_conv_bwd_filter(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias,
                                 int accumulate, void *ws);

void dt_cpu_bn_fwd_train(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta, float *y,
                         float *saved, float *running_mean, float *running_var, int relu);
void dt_cpu_bn_fwd_infer(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, float *y, int relu);
void dt_cpu_bn_bwd(const dt_bn_desc *d, const float *x, const float *dy, int relu, const float *gamma,
                   const float *saved, float *dx, float *dgamma, float *dbeta, int accumulate_dx,
                   int accumulate_params);

void dt_cpu_relu_fwd(int64_t n, const float *x, float *y);
void dt_cpu_relu_bwd(int64_t n, const float *y, const float *dy, float *dx, int accumulate);
void dt_cpu_add_fwd(int64_t n, const float *a, const float *b, float *y);
void dt_cpu_copy_grad(int64_t n, const float *src, float *dst, int accumulate);
void dt_cpu_dropout_fwd(int64_t n, float p, uint64_t seed, const float *x, float *y, uint8_t *mask);
void dt_cpu_dropout_bwd(int64_t n, float p, const uint8_t *mask, const float *dy, float *dx, int accumulate);
void dt_cpu_flatten_fwd(int n, int h, int w, int c, const float *x, float *y);
void dt_cpu_flatten_bwd(int n, int h, int w, int c, const float *dy, float *dx, int accumulate);
void dt_cpu_fill(int64_t n, float value, float *x);
void dt_cpu_scale(int64_t n, float a, float *x);
void dt_cpu_round_half(int64_t n, float *x, int bf16);
int dt_cpu_unscale_check(int64_t n, float *g, float inv_scale);
void dt_cpu_normalize_u8(int64_t n, int c, const uint8_t *u, const float *mean, const float *std, float *x);
void *dt_cpu_mem_alloc(size_t bytes);
void dt_cpu_mem_free(void *p);
void dt_cpu_mem_copy(void *dst, const void *src, size_t bytes);
void dt_cpu_sync(void);
void dt_cpu_sgd(int64_t n, float *p, const float *g, float *buf, float lr, float momentum, float dampening, float wd,
                int nesterov, int first);

void dt_cpu_maxpool_fwd(const dt_pool_desc *d, const float *x, float *y, uint8_t *argmax);
void dt_cpu_maxpool_bwd(const dt_pool_desc *d, const float *dy, const uint8_t *argmax, float *dx, int accumulate);
void dt_cpu_avgpool_fwd(const dt_pool_desc *d, const float *x, float *y);
void dt_cpu_avgpool_bwd(const dt_pool_desc *d, const float *dy, float *dx, int accumulate);

void dt_cpu_linear_fwd(int n, int in, int out, const float *x, const float *w, const float *b, float *y);
void dt_cpu_linear_bwd(int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db, int accumulate_dx, int accumulate_params);
double dt_cpu_xent(int n, int k, const float *logits, const int32_t *labels, float eps, float *dlogits);

#endif
