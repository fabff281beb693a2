/* backend.h: the op table every compute backend fills (nn/cpu, nn/cuda).
 *
 * Layers call these ops and never see which backend runs. Tensors are NHWC activations (rows of C
 * contiguous channels), conv weights O,KH,KW,I/groups ("OHWI"), linear weights [out, in] as PyTorch
 * has them, vectors [C]. Pointers are the backend's memory (host memory for the CPU backend, device
 * memory for CUDA) unless a member says "host": every array a model, its optimiser and its mixed
 * precision own comes from mem_alloc, and host code reads or writes it only through mem_get and
 * mem_put. (tests/unit/test_backend_guard.c runs training on a CPU backend whose memory is
 * unreadable outside its calls, so host code that touches it directly fails there.)
 *
 * Gradient ops take `accumulate`: 0 overwrites the destination, 1 adds into it. That is how a value
 * read by two layers (a residual input) sums its gradients, and how gradient accumulation over
 * micro-batches works. Ops do not fail on valid descriptors (descriptors are validated when built);
 * workspaces come from the caller (the model's arena), sized by the *_workspace members.
 *
 * Planning: nothing is allocated once a model is planned (a device allocation stalls the device and
 * its communicator, and forbids capturing a step into a CUDA graph). The planning ops, conv_workspace
 * and the *_scratch members, are called when a model is planned, for every shape the run will meet
 * (every batch size it will run: an epoch's last batch, validation's), before any op runs on it:
 * there a backend prepares its per-shape state (cuDNN's algorithm search, oneDNN's primitives) and
 * says what memory the ops on that shape need. conv_workspace's bytes are the caller's (the `ws`
 * the conv ops get); a *_scratch member's are the backend's own scratch, which the planner then
 * asks for once with reserve_scratch (the most any planning op returned). After that, an op on a
 * planned shape allocates nothing. (A backend may keep a fallback for an unplanned shape, but it
 * must say so: the CUDA backend logs the shape once.)
 *
 * Every member is required for a backend that runs models.
 */
#ifndef DT_NN_BACKEND_H
#define DT_NN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 2-D convolution: input [n, h, w, c], output [n, oh, ow, oc], weight [oc, kh, kw, c/groups]. */
typedef struct dt_conv_desc {
    int n, h, w, c;
    int oc, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int bias; /* 1 when conv_fwd gets a bias and conv_bwd_filter a dbias (set after dt_conv_desc_set) */
    int dx_accumulate; /* 1 when conv_bwd_data may be asked to add into dx (a backend may need room) */
} dt_conv_desc;

/* Fills d and computes oh/ow as PyTorch does. Returns 0, or -1 when the arguments make no
 * convolution (channels not divisible by groups, output smaller than 1x1, ...). */
int dt_conv_desc_set(dt_conv_desc *d, int n, int h, int w, int c, int oc, int kh, int kw, int sh, int sw, int ph,
                     int pw, int dh, int dw, int groups);

/* Pooling: max pool with kernel/stride/padding (floor mode, dilation 1), or adaptive average pool
 * to [oh, ow] (kernel fields unused). Input [n, h, w, c], output [n, oh, ow, c]. */
typedef struct dt_pool_desc {
    int n, h, w, c, oh, ow;
    int kh, kw, sh, sw, ph, pw;
} dt_pool_desc;

/* Returns 0, or -1 when the pool makes no sense (padding over half the kernel, empty output, a
 * max-pool window over 16x16). */
int dt_pool_desc_set_max(dt_pool_desc *d, int n, int h, int w, int c, int k, int s, int p);
int dt_pool_desc_set_adaptive(dt_pool_desc *d, int n, int h, int w, int c, int oh, int ow);

/* Batch norm over rows = n*h*w of c channels. sync (SyncBN, may be NULL): sums n doubles in place
 * over the replicas, returning 0 or an error; training then normalises with the statistics of
 * all replicas' rows, and backward sums its two per-channel reductions the same way (dgamma and
 * dbeta stay local, as PyTorch's SyncBatchNorm leaves them to DDP's averaging). */
typedef struct dt_bn_desc {
    int64_t rows;
    int c;
    float eps, momentum;
    int (*sync)(void *ctx, double *buf, int n);
    void *sync_ctx;
} dt_bn_desc;

/* floats a training forward saves for backward: per channel, the mean, 1/sqrt(var+eps), and the
 * scale and shift of the affine map it applied (so backward recomputes y bit for bit) */
#define DT_BN_SAVED(c) (4 * (size_t)(c))

/* --- the ops: one list ---------------------------------------------------------------------------
 *
 * Every op of a backend is one line X(name, return type, (parameters), (arguments)):
 *   name         the dt_backend member; the CPU backend implements it as dt_cpu_<name> (nn/cpu/),
 *                the CUDA backend as dt_cuda_<name> (nn/cuda/)
 *   return type  one token: void, int, double or size_t
 *   parameters   the member's prototype, in parentheses
 *   arguments    the same names, in parentheses: what passes a call on (a wrapper forwarding it)
 * Code that needs one thing per op defines an X and expands the list with it, e.g.
 *   #define DT_OP_MEMBER(name, ret, params, args) ret(*name) params;
 *   DT_OPS(DT_OP_MEMBER)       ->  size_t (*conv_workspace)(const dt_conv_desc *d); void (*conv_fwd)(...); ...
 * Made from the list: the members of dt_backend and enum dt_backend_op below; the declarations of
 * the implementations (nn/cpu/cpu.h, nn/cuda/cuda.h) and both backends' tables; the guarded backend
 * of tests/unit/test_backend_guard.c; the table and coverage checks of tests/gpu/ops_check.c.
 * Memory (mem_alloc, mem_free, mem_put, mem_get, sync) is not in the list: those members are
 * written out in dt_backend, as each backend provides them its own way.
 *
 * The list has two parts, the convolutions first (DT_CONV_OPS) and the rest (DT_OTHER_OPS), only
 * because the CPU backend has two convolutions (oneDNN's and the im2col reference) and one of
 * everything else: read DT_OPS as one list.
 *
 * Adding an op: a line in the right part (with its contract as a comment), dt_cpu_<name> and
 * dt_cuda_<name>, a test in tests/unit/test_ops.c (CPU) and tests/gpu/ops_check.c (CUDA). */

#define DT_CONV_OPS(X)                                                                                                 \
    /* Planning (above): bytes of workspace (the caller's) for any of the three conv ops on d; a                       \
     * backend prepares its per-shape state here (oneDNN primitives, cuDNN's algorithms). */                           \
    X(conv_workspace, size_t, (const dt_conv_desc *d), (d))                                                            \
    /* y = conv(x, w) + bias (bias may be NULL) */                                                                     \
    X(conv_fwd, void, (const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws),  \
      (d, x, w, bias, y, ws))                                                                                          \
    X(conv_bwd_data, void,                                                                                             \
      (const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws),                   \
      (d, dy, w, dx, accumulate, ws))                                                                                  \
    /* dw (and dbias unless NULL) */                                                                                   \
    X(conv_bwd_filter, void,                                                                                           \
      (const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias, int accumulate, void *ws),     \
      (d, x, dy, dw, dbias, accumulate, ws))

#define DT_OTHER_OPS(X)                                                                                                \
    /* Planning (above): bytes of the backend's scratch the three BN ops need on d, with or without                    \
     * d->sync (SyncBN may be switched on after planning). */                                                          \
    X(bn_scratch, size_t, (const dt_bn_desc *d), (d))                                                                  \
    /* Training mode: batch statistics (biased variance to normalise), saved for backward in                           \
     * saved[DT_BN_SAVED(c)], running stats updated as PyTorch does (unbiased variance, momentum).                     \
     * relu: write max(0, y) instead of y (BN and the ReLU after it in one pass). */                                   \
    X(bn_fwd_train, void,                                                                                              \
      (const dt_bn_desc *d, const float *x, const float *gamma, const float *beta, float *y, float *saved,             \
       float *running_mean, float *running_var, int relu),                                                             \
      (d, x, gamma, beta, y, saved, running_mean, running_var, relu))                                                  \
    X(bn_fwd_infer, void,                                                                                              \
      (const dt_bn_desc *d, const float *x, const float *gamma, const float *beta, const float *running_mean,          \
       const float *running_var, float *y, int relu),                                                                  \
      (d, x, gamma, beta, running_mean, running_var, y, relu))                                                         \
    /* dx (accumulate_dx), dgamma and dbeta (accumulate_params) from x and what forward saved. relu:                   \
     * the forward was fused with a ReLU and dy is the gradient of the ReLU's output; where that                       \
     * output was zero is recomputed from x and saved exactly as forward computed it, so the output                    \
     * itself need not be kept. */                                                                                     \
    X(bn_bwd, void,                                                                                                    \
      (const dt_bn_desc *d, const float *x, const float *dy, int relu, const float *gamma, const float *saved,         \
       float *dx, float *dgamma, float *dbeta, int accumulate_dx, int accumulate_params),                              \
      (d, x, dy, relu, gamma, saved, dx, dgamma, dbeta, accumulate_dx, accumulate_params))                             \
                                                                                                                       \
    X(relu_fwd, void, (int64_t n, const float *x, float *y), (n, x, y))                                                \
    /* from the output y: dx = dy where y > 0 */                                                                       \
    X(relu_bwd, void, (int64_t n, const float *y, const float *dy, float *dx, int accumulate),                         \
      (n, y, dy, dx, accumulate))                                                                                      \
    X(add_fwd, void, (int64_t n, const float *a, const float *b, float *y), (n, a, b, y))                              \
    /* dst = src (accumulate 0) or dst += src */                                                                       \
    X(copy_grad, void, (int64_t n, const float *src, float *dst, int accumulate), (n, src, dst, accumulate))           \
                                                                                                                       \
    /* argmax holds, per output element, where in its window the chosen input was: ky*kw + kx (one                     \
     * byte: windows are at most 16x16) */                                                                             \
    X(maxpool_fwd, void, (const dt_pool_desc *d, const float *x, float *y, uint8_t *argmax), (d, x, y, argmax))        \
    X(maxpool_bwd, void, (const dt_pool_desc *d, const float *dy, const uint8_t *argmax, float *dx, int accumulate),   \
      (d, dy, argmax, dx, accumulate))                                                                                 \
    X(avgpool_fwd, void, (const dt_pool_desc *d, const float *x, float *y), (d, x, y))                                 \
    X(avgpool_bwd, void, (const dt_pool_desc *d, const float *dy, float *dx, int accumulate), (d, dy, dx, accumulate)) \
                                                                                                                       \
    /* Planning (above): bytes of the backend's scratch linear_fwd and linear_bwd need on this shape                   \
     * (a backend may also prepare per-shape state here: CUDA's vector of n ones for the bias terms) */                \
    X(linear_scratch, size_t, (int n, int in, int out), (n, in, out))                                                  \
    /* y[n, out] = x[n, in] w[out, in]^T + b */                                                                        \
    X(linear_fwd, void, (int n, int in, int out, const float *x, const float *w, const float *b, float *y),            \
      (n, in, out, x, w, b, y))                                                                                        \
    X(linear_bwd, void,                                                                                                \
      (int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,       \
       int accumulate_dx, int accumulate_params),                                                                      \
      (n, in, out, x, w, dy, dx, dw, db, accumulate_dx, accumulate_params))                                            \
                                                                                                                       \
    /* Inverted dropout: element i is kept with probability 1-p from hash(seed, i), kept values are                    \
     * scaled by 1/(1-p); mask[i] is 1 where kept. */                                                                  \
    X(dropout_fwd, void, (int64_t n, float p, uint64_t seed, const float *x, float *y, uint8_t *mask),                 \
      (n, p, seed, x, y, mask))                                                                                        \
    X(dropout_bwd, void, (int64_t n, float p, const uint8_t *mask, const float *dy, float *dx, int accumulate),        \
      (n, p, mask, dy, dx, accumulate))                                                                                \
                                                                                                                       \
    /* flatten: NHWC [n, h, w, c] to PyTorch's NCHW order [n, c*h*w], and its backward */                              \
    X(flatten_fwd, void, (int n, int h, int w, int c, const float *x, float *y), (n, h, w, c, x, y))                   \
    X(flatten_bwd, void, (int n, int h, int w, int c, const float *dy, float *dx, int accumulate),                     \
      (n, h, w, c, dy, dx, accumulate))                                                                                \
                                                                                                                       \
    /* Planning (above): bytes of the backend's scratch xent needs for n rows of k logits */                           \
    X(xent_scratch, size_t, (int n, int k), (n, k))                                                                    \
    /* Mean softmax cross-entropy over n rows of k logits with label smoothing eps (PyTorch's                          \
     * definition: target (1-eps) on the label plus eps/k everywhere). Writes dlogits =                                \
     * d(loss)/d(logits) when dlogits is not NULL. Returns the mean loss. labels is host memory; each                  \
     * must be in [0, k). */                                                                                           \
    X(xent, double, (int n, int k, const float *logits, const int32_t *labels, float eps, float *dlogits),             \
      (n, k, logits, labels, eps, dlogits))                                                                            \
                                                                                                                       \
    /* torch.optim.SGD on n elements: d = g + wd*p; buf = first ? d : momentum*buf + (1-dampening)*d;                  \
     * d = nesterov ? d + momentum*buf : buf (when momentum != 0); p -= lr*d. buf may be NULL when                     \
     * momentum is 0. */                                                                                               \
    X(sgd, void,                                                                                                       \
      (int64_t n, float *p, const float *g, float *buf, float lr, float momentum, float dampening, float wd,           \
       int nesterov, int first),                                                                                       \
      (n, p, g, buf, lr, momentum, dampening, wd, nesterov, first))                                                    \
                                                                                                                       \
    X(fill, void, (int64_t n, float value, float *x), (n, value, x))                                                   \
    /* x *= a */                                                                                                       \
    X(scale, void, (int64_t n, float a, float *x), (n, a, x))                                                          \
    /* x rounded in place to fp16 (bf16 when bf16), round to nearest even: what reduced storage holds */               \
    X(round_half, void, (int64_t n, float *x, int bf16), (n, x, bf16))                                                 \
    /* g *= inv_scale; returns 1 when any result is inf or NaN (the loss scaler's overflow) */                         \
    X(unscale_check, int, (int64_t n, float *g, float inv_scale), (n, g, inv_scale))                                   \
    /* Planning (above): bytes of the backend's scratch normalize_u8 needs for n values (a model                       \
     * plans it for its input, n = batch x height x width x channels, at every planned batch) */                       \
    X(normalize_scratch, size_t, (int64_t n), (n))                                                                     \
    /* a batch of n host uint8 values, channels last with c channels, into the model's input:                          \
     * x[i] = (u[i] / 255 - mean[i % c]) / std[i % c] (mean and std host arrays of c) */                               \
    X(normalize_u8, void,                                                                                              \
      (int64_t n, int c, const uint8_t *u_host, const float *mean_host, const float *std_host, float *x),              \
      (n, c, u_host, mean_host, std_host, x))

#define DT_OPS(X) DT_CONV_OPS(X) DT_OTHER_OPS(X)

/* DT_BACKEND_OP_<name>: an op's index in the list; DT_BACKEND_OP_COUNT: how many there are */
#define DT_BACKEND_OP_ENUM(name, ret, params, args) DT_BACKEND_OP_##name,
enum dt_backend_op { DT_OPS(DT_BACKEND_OP_ENUM) DT_BACKEND_OP_COUNT };
#undef DT_BACKEND_OP_ENUM

typedef struct dt_backend {
    const char *name;

    /* Memory. host_memory: 1 when the backend's memory is host memory (the CPU backend), which host
     * code and a host communicator (MPI) may then use in place. mem_alloc: zeroed, 64-byte aligned,
     * NULL when out of memory. mem_put copies host -> backend, mem_get backend -> host (they return
     * when the copy is complete). mem_free(NULL) does nothing. */
    int host_memory;
    void *(*mem_alloc)(size_t bytes);
    void (*mem_free)(void *p);
    void (*mem_put)(void *dst, const void *src_host, size_t bytes);
    void (*mem_get)(void *dst_host, const void *src, size_t bytes);
    /* waits until every op queued so far has completed (ops may run asynchronously; a no-op on the
     * CPU): before another stream or thread (a communicator) reads what they wrote */
    void (*sync)(void);

    /* Planning (the list's comment): called once at the end of planning a model, after its
     * planning ops, with the most scratch any of them returned. The backend allocates (and zeroes)
     * now whatever the planned shapes need (scratch of at least bytes, per-shape state the
     * planning ops recorded), keeping what it has when that is enough; it may also report on the
     * planning (CUDA: the time cuDNN's algorithm searches took). DT_OK, or DT_ERR_NOMEM after one
     * line. (Scratch is shared by all of the backend's models: one op runs at a time.) */
    int (*reserve_scratch)(size_t bytes);
    /* The most elements one tensor (an activation, its gradient) may hold: INT64_MAX on the CPU,
     * INT32_MAX for CUDA (cuDNN's tensor descriptors index with int). A model refuses to plan a
     * batch that passes it (model.h, dt_model_max_batch). */
    int64_t max_tensor_elems;

    /* the ops, one member each: ret (*name)(parameters) */
#define DT_OP_MEMBER(name, ret, params, args) ret(*name) params;
    DT_OPS(DT_OP_MEMBER)
#undef DT_OP_MEMBER
} dt_backend;

/* The CPU backend: convolutions through oneDNN where this build has it (the kernels PyTorch's CPU
 * convolutions use), everything else plain C11 + CBLAS, threads from OpenMP. */
extern const dt_backend dt_backend_cpu;
/* The CPU reference: the same, with convolutions through im2col and CBLAS GEMM. Tests check every
 * other backend and dt_backend_cpu's oneDNN path against it. */
extern const dt_backend dt_backend_cpu_ref;
/* The CUDA backend (nn/cuda): cuDNN convolutions, cuBLAS linear layers, our kernels for the rest,
 * on device memory. It exists only in builds with CUDA (HAVE_CUDA in config.h): code that names it
 * elsewhere fails to link. */
extern const dt_backend dt_backend_cuda;

/* Threads for the CPU backend (OpenMP and BLAS). n <= 0: $OMP_NUM_THREADS, else all cores. */
void dt_cpu_set_threads(int n);
int dt_cpu_threads(void);

#ifdef __cplusplus
}
#endif
#endif
