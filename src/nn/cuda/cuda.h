/* cuda.h: the CUDA backend's functions (the table is in backend_cuda.c) and its shared state.
 *
 * Contracts are those of the matching dt_backend members in nn/backend.h, on device memory, with the
 * CPU backend (nn/cpu) as the reference: each op must compute what the CPU op computes, to float
 * rounding (ops the CPU does exactly, such as copies, ReLU, max pool, dropout masks and fp16/bf16
 * rounding, bit for bit). This first version stores fp32 everywhere and emulates the reduced types
 * of mixed precision with round_half, as the CPU backend does; real fp16/bf16 storage is the next
 * step (doc/design.md, "The CUDA backend: the plan").
 *
 * Execution: every op is queued on one compute stream (dt_cuda_stream()) and returns without
 * waiting, except those that hand a value to the host (xent's loss, unscale_check's flag, mem_get),
 * which synchronise that stream. cuDNN and cuBLAS handles are bound to the stream. The device is the
 * one dt_cuda_init selected; ops called before it use device 0.
 *
 * Errors: ops cannot return one (the table's contract: descriptors are validated when built). A
 * failing CUDA, cuDNN or cuBLAS call in an op logs one line naming the call and aborts the process
 * (dt_cuda_fatal): the job's other ranks then see a lost peer instead of a hang. */
#ifndef DT_NN_CUDA_CUDA_H
#define DT_NN_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- state (backend_cuda.c) ---------------------------------------------------------------------- */
/* Selects the device, creates the stream and the cuDNN and cuBLAS handles. DT_OK, or DT_ERR_CUDA /
 * DT_ERR_CUDNN / DT_ERR_CUBLAS after one line. Idempotent for the same device. */
int dt_cuda_init(int device);
/* The compute stream, as a cudaStream_t (void * so that C files need no CUDA header). */
void *dt_cuda_stream(void);
void *dt_cuda_cudnn(void);  /* cudnnHandle_t */
void *dt_cuda_cublas(void); /* cublasHandle_t */
/* Logs "CUDA backend: <what>: <message>" and aborts. */
#ifdef __cplusplus
#define DT_NORETURN [[noreturn]]
#else
#define DT_NORETURN _Noreturn
#endif
DT_NORETURN void dt_cuda_fatal(const char *what, const char *message);
/* For files that include the CUDA, cuBLAS or cuDNN header (and util/check.h for the messages): a
 * failing call inside an op is fatal, with the call and the library's message. */
#define DT_CUDA_FATAL_IF_(type, ok, call, errstr)                                                     \
    do {                                                                                             \
        type s_ = (call);                                                                            \
        if (s_ != (ok))                                                                              \
            dt_cuda_fatal(#call, errstr((long long)s_, 0));                                          \
    } while (0)
#define FATAL_CUDA(call) DT_CUDA_FATAL_IF_(cudaError_t, cudaSuccess, call, dt_errstr_cuda)
#define FATAL_CUBLAS(call) DT_CUDA_FATAL_IF_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, call, dt_errstr_cublas)
#define FATAL_CUDNN(call) DT_CUDA_FATAL_IF_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, call, dt_errstr_cudnn)
/* Device scratch that survives between calls: at least bytes, grown when needed (not thread-safe;
 * one op at a time uses it). */
void *dt_cuda_scratch(size_t bytes);

/* memory */
void *dt_cuda_mem_alloc(size_t bytes);
void dt_cuda_mem_free(void *p);
void dt_cuda_mem_put(void *dst, const void *src_host, size_t bytes);
void dt_cuda_mem_get(void *dst_host, const void *src, size_t bytes);
void dt_cuda_sync(void); /* cudaStreamSynchronize of the compute stream */

/* --- convolutions (conv_cudnn.c): cuDNN, NHWC tensors and KRSC (= our OHWI) filters ------------- */
size_t dt_cuda_conv_workspace(const dt_conv_desc *d);
void dt_cuda_conv_fwd(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws);
void dt_cuda_conv_bwd_data(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws);
void dt_cuda_conv_bwd_filter(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias,
                             int accumulate, void *ws);

/* --- linear layers (linear_cublas.c): cuBLAS, fp32 ---------------------------------------------- */
void dt_cuda_linear_fwd(int n, int in, int out, const float *x, const float *w, const float *b, float *y);
void dt_cuda_linear_bwd(int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                        float *db, int accumulate_dx, int accumulate_params);

/* --- our kernels (kernels.cu) ------------------------------------------------------------------- */
void dt_cuda_bn_fwd_train(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta, float *y,
                          float *saved, float *running_mean, float *running_var, int relu);
void dt_cuda_bn_fwd_infer(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta,
                          const float *running_mean, const float *running_var, float *y, int relu);
void dt_cuda_bn_bwd(const dt_bn_desc *d, const float *x, const float *dy, int relu, const float *gamma,
                    const float *saved, float *dx, float *dgamma, float *dbeta, int accumulate_dx,
                    int accumulate_params);
void dt_cuda_relu_fwd(int64_t n, const float *x, float *y);
void dt_cuda_relu_bwd(int64_t n, const float *y, const float *dy, float *dx, int accumulate);
void dt_cuda_add_fwd(int64_t n, const float *a, const float *b, float *y);
void dt_cuda_copy_grad(int64_t n, const float *src, float *dst, int accumulate);
void dt_cuda_maxpool_fwd(const dt_pool_desc *d, const float *x, float *y, uint8_t *argmax);
void dt_cuda_maxpool_bwd(const dt_pool_desc *d, const float *dy, const uint8_t *argmax, float *dx, int accumulate);
void dt_cuda_avgpool_fwd(const dt_pool_desc *d, const float *x, float *y);
void dt_cuda_avgpool_bwd(const dt_pool_desc *d, const float *dy, float *dx, int accumulate);
void dt_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, const float *x, float *y, uint8_t *mask);
void dt_cuda_dropout_bwd(int64_t n, float p, const uint8_t *mask, const float *dy, float *dx, int accumulate);
void dt_cuda_flatten_fwd(int n, int h, int w, int c, const float *x, float *y);
void dt_cuda_flatten_bwd(int n, int h, int w, int c, const float *dy, float *dx, int accumulate);
double dt_cuda_xent(int n, int k, const float *logits, const int32_t *labels_host, float eps, float *dlogits);
void dt_cuda_sgd(int64_t n, float *p, const float *g, float *buf, float lr, float momentum, float dampening, float wd,
                 int nesterov, int first);
void dt_cuda_fill(int64_t n, float value, float *x);
void dt_cuda_scale(int64_t n, float a, float *x);
void dt_cuda_round_half(int64_t n, float *x, int bf16);
int dt_cuda_unscale_check(int64_t n, float *g, float inv_scale);
void dt_cuda_normalize_u8(int64_t n, int c, const uint8_t *u_host, const float *mean_host, const float *std_host,
                          float *x);

#ifdef __cplusplus
}
#endif
#endif
