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
 * Types: every tensor operand is `void *` of the element type its descriptor or a dt_dtype argument
 * names: DT_FLOAT32, DT_FLOAT16 or DT_BFLOAT16 (libdt's enum). An op computes in fp32 whatever
 * its operands' types (sums wider where the CPU code says so): a reduced operand is widened
 * exactly when loaded and a reduced result rounded to nearest even once, when stored; with
 * accumulate the stored value is the rounded fp32 sum of the old value and the result. So an op on
 * reduced storage gives exactly what the same op gives on fp32 arrays holding the same values,
 * followed by rounding what it wrote (round_half) - the emulation the engine used before it had
 * types, and still the oracle (tests/unit/test_ops.c checks each op that way). One freedom: a
 * convolution or linear layer may read its reduced operands as they are on hardware that multiplies
 * them (tensor cores, AMX), the products exact and summed in fp32 in the kernel's own order, as two
 * fp32 kernels may sum in different orders (dt_backend_cpu's bf16 convolutions on oneDNN's bf16
 * kernels; the oracle tests switch them off). Other arguments (BN's saved statistics, SGD's
 * momentum, scalars) are fp32, masks uint8, labels int32.
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

#include "libdt/dt.h" /* dt_dtype: one enum of element types for the ops and the communicators */
#include "nn/scalars.h" /* dt_scalars: the step's numbers in backend memory */

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
    dt_dtype t;        /* every operand's type (dt_conv_desc_set: fp32) */
    int ys;            /* elements from one output position's channels to the next's in y (conv_fwd) and dy
                        * (both backward ops): oc, or more when the output is a channel slice of a wider
                        * tensor (a concatenation laid out in place; y and dy point at the slice's first
                        * channel, and the channels outside it are neither read nor written). 0 means oc
                        * (dt_conv_desc_set). conv_workspace sees it: a backend may stage a slice densely. */
} dt_conv_desc;

/* Fills d (type fp32) and computes oh/ow as PyTorch does. Returns 0, or -1 when the arguments make no
 * convolution (channels not divisible by groups, output smaller than 1x1, ...). The setters are shape
 * arithmetic, no backend's: nn/desc.c defines them. */
int dt_conv_desc_set(dt_conv_desc *d, int n, int h, int w, int c, int oc, int kh, int kw, int sh, int sw, int ph,
                     int pw, int dh, int dw, int groups);

/* Pooling: max pool with kernel/stride/padding (floor mode, dilation 1), or adaptive average pool
 * to [oh, ow] (kernel fields unused). Input [n, h, w, c], output [n, oh, ow, c]. */
typedef struct dt_pool_desc {
    int n, h, w, c, oh, ow;
    int kh, kw, sh, sw, ph, pw;
    dt_dtype xt, yt; /* the input's (and its gradient's) type, the output's (set: fp32) */
    int ys;          /* elements from one output position's channels to the next's in y and dy: c, or more
                      * when the output is a channel slice of a wider tensor (as dt_conv_desc.ys); 0 means c
                      * (set) */
} dt_pool_desc;

/* Returns 0, or -1 when the pool makes no sense (padding over half the kernel, empty output, a
 * max-pool window over 16x16). */
int dt_pool_desc_set_max(dt_pool_desc *d, int n, int h, int w, int c, int k, int s, int p);
int dt_pool_desc_set_adaptive(dt_pool_desc *d, int n, int h, int w, int c, int oh, int ow);

/* Batch norm over rows = n*h*w of c channels. sync (SyncBN, may be NULL): sums n doubles in place
 * over the replicas, returning 0 or an error; training then normalises with the statistics of
 * all replicas' rows, and backward sums its two per-channel reductions the same way (dgamma and
 * dbeta stay local, as PyTorch's SyncBatchNorm leaves them to DDP's averaging). buf is the
 * backend's memory (device memory on a GPU: the backend's own scratch, written by the op before
 * the call), so the hook hands it to a communicator that reduces that memory (MPI for the CPU's,
 * NCCL for a device's) and returns once the sums are there; the host never holds the statistics. */
typedef struct dt_bn_desc {
    int64_t rows;
    int c;
    float eps, momentum;
    int (*sync)(void *ctx, double *buf, int n);
    void *sync_ctx;
    dt_dtype xt, yt, pt; /* the types of x (and dx), y (and dy), and the parameters and statistics */
    int xs;              /* elements from one row's channels to the next's in x and dx: c, or more when x is
                          * the first c channels of a wider tensor (a concatenation laid out in place: x and
                          * dx read and written there, the channels past c untouched); 0 means c. y and dy
                          * are always packed. (The fused residual tail ops take xs = 0 only.) */
} dt_bn_desc;

/* floats a training forward saves for backward: per channel, the mean, 1/sqrt(var+eps), and the
 * scale and shift of the affine map it applied (so backward recomputes y bit for bit) */
#define DT_BN_SAVED(c) (4 * (size_t)(c))

/* --- the ops: one list ---------------------------------------------------------------------------
 *
 * Every op of a backend is one entry F(X, name, return type, (type, name), (type, name), ...):
 *   name         the dt_backend member; the CPU backend implements it as dt_cpu_<name> (nn/cpu/),
 *                the CUDA backend as dt_cuda_<name> (nn/cuda/)
 *   return type  one token: void, int, double or size_t
 *   (type, name) each parameter, in order (at most 16)
 * DT_OPS(X) expands the list calling X(name, ret, (parameters), (arguments)): the prototype and the
 * names that pass a call on (a wrapper forwarding it); DT_OPS_TYPED(X) calls X(name, ret, (type,
 * name), ...) (a wrapper that stores the arguments to run the op later). Code that needs one thing
 * per op defines an X and expands the list with it, e.g.
 *   #define DT_OP_MEMBER(name, ret, params, args) ret(*name) params;
 *   DT_OPS(DT_OP_MEMBER)       ->  size_t (*conv_workspace)(const dt_conv_desc *d); void (*conv_fwd)(...); ...
 * Made from the list: the members of dt_backend and enum dt_backend_op below; the declarations of
 * the implementations (nn/cpu/cpu.h, nn/cuda/cuda.h) and both backends' tables; the wrapper
 * backends' ops (nn/backend_wrap.h: the CPU's graphs, the guarded, recording and deferred test
 * backends); the wrapped table, the table and coverage checks of tests/gpu/ops_check.c.
 * Memory (mem_alloc, mem_free, mem_put, mem_get) and events are not in the list: those members
 * are written out in dt_backend, as each backend provides them its own way (nn/backend_wrap.h lists
 * them in the list's form, by group, for wrappers: a new one goes there too).
 *
 * The list has two parts, the convolutions first (DT_CONV_OPS) and the rest (DT_OTHER_OPS), only
 * because the CPU backend has two convolutions (oneDNN's and the im2col reference) and one of
 * everything else: read DT_OPS as one list.
 *
 * Adding an op: a line in the right part (with its contract as a comment), dt_cpu_<name> and
 * dt_cuda_<name>, tests in tests/unit/test_ops.c (CPU, fp32), tests/unit/test_ops_typed.c (fp16
 * and bf16 against fp32, bit for bit) and its family's tests/gpu/ops_check_<family>.c (CUDA against the
 * CPU in fp32, fp16 and bf16: one row helper call per case; the families mirror nn/cuda/'s files). */

/* Preprocessor helpers for the list: DT_PP_MAP_(f, sep, a1, ..., an) gives f a1 sep() f a2 ... f an
 * (at most 16 items); each item here is a parameter (type, name). */
#define DT_PP_DECL_(type, name) type name
#define DT_PP_NAME_(type, name) name
#define DT_PP_COMMA_() ,
#define DT_PP_NOTHING_()
#define DT_PP_UNPAREN_(...) __VA_ARGS__
#define DT_PP_CAT_(a, b) DT_PP_CAT2_(a, b)
#define DT_PP_CAT2_(a, b) a##b
#define DT_PP_NARG_(...) DT_PP_NTH_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define DT_PP_NTH_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, n, ...) n
#define DT_PP_MAP_(f, sep, ...) DT_PP_CAT_(DT_PP_MAP_, DT_PP_NARG_(__VA_ARGS__))(f, sep, __VA_ARGS__)
#define DT_PP_MAP_1(f, sep, a) f a
#define DT_PP_MAP_2(f, sep, a, ...) f a sep() DT_PP_MAP_1(f, sep, __VA_ARGS__)
#define DT_PP_MAP_3(f, sep, a, ...) f a sep() DT_PP_MAP_2(f, sep, __VA_ARGS__)
#define DT_PP_MAP_4(f, sep, a, ...) f a sep() DT_PP_MAP_3(f, sep, __VA_ARGS__)
#define DT_PP_MAP_5(f, sep, a, ...) f a sep() DT_PP_MAP_4(f, sep, __VA_ARGS__)
#define DT_PP_MAP_6(f, sep, a, ...) f a sep() DT_PP_MAP_5(f, sep, __VA_ARGS__)
#define DT_PP_MAP_7(f, sep, a, ...) f a sep() DT_PP_MAP_6(f, sep, __VA_ARGS__)
#define DT_PP_MAP_8(f, sep, a, ...) f a sep() DT_PP_MAP_7(f, sep, __VA_ARGS__)
#define DT_PP_MAP_9(f, sep, a, ...) f a sep() DT_PP_MAP_8(f, sep, __VA_ARGS__)
#define DT_PP_MAP_10(f, sep, a, ...) f a sep() DT_PP_MAP_9(f, sep, __VA_ARGS__)
#define DT_PP_MAP_11(f, sep, a, ...) f a sep() DT_PP_MAP_10(f, sep, __VA_ARGS__)
#define DT_PP_MAP_12(f, sep, a, ...) f a sep() DT_PP_MAP_11(f, sep, __VA_ARGS__)
#define DT_PP_MAP_13(f, sep, a, ...) f a sep() DT_PP_MAP_12(f, sep, __VA_ARGS__)
#define DT_PP_MAP_14(f, sep, a, ...) f a sep() DT_PP_MAP_13(f, sep, __VA_ARGS__)
#define DT_PP_MAP_15(f, sep, a, ...) f a sep() DT_PP_MAP_14(f, sep, __VA_ARGS__)
#define DT_PP_MAP_16(f, sep, a, ...) f a sep() DT_PP_MAP_15(f, sep, __VA_ARGS__)

#define DT_CONV_OPS_(X, F)                                                                                             \
    /* Planning (above): bytes of workspace (the caller's) for any of the three conv ops on d; a                       \
     * backend prepares its per-shape state here (oneDNN primitives, cuDNN's algorithms). */                           \
    F(X, conv_workspace, size_t, (const dt_conv_desc *, d))                                                            \
    /* y = conv(x, w) + bias (bias may be NULL); every operand of type d->t */                                         \
    F(X, conv_fwd, void, (const dt_conv_desc *, d), (const void *, x), (const void *, w), (const void *, bias),        \
      (void *, y), (void *, ws))                                                                                       \
    F(X, conv_bwd_data, void, (const dt_conv_desc *, d), (const void *, dy), (const void *, w), (void *, dx),          \
      (int, accumulate), (void *, ws))                                                                                 \
    /* dw (and dbias unless NULL) */                                                                                   \
    F(X, conv_bwd_filter, void, (const dt_conv_desc *, d), (const void *, x), (const void *, dy), (void *, dw),        \
      (void *, dbias), (int, accumulate), (void *, ws))

#define DT_OTHER_OPS_(X, F)                                                                                            \
    /* Planning (above): bytes of the backend's scratch the three BN ops need on d, with or without                    \
     * d->sync (SyncBN may be switched on after planning). */                                                          \
    F(X, bn_scratch, size_t, (const dt_bn_desc *, d))                                                                  \
    /* Training mode: batch statistics (biased variance to normalise), saved for backward in                           \
     * saved[DT_BN_SAVED(c)] (fp32), running stats updated as PyTorch does (unbiased variance,                         \
     * momentum). relu: write max(0, y) instead of y (BN and the ReLU after it in one pass); DT_BN_ACT(a)              \
     * (below; only on a backend naming DT_FUSE_BN_ACT): write act_fwd's activation a of y instead of y, its           \
     * arithmetic on the fp32 y. Types: x d->xt, y d->yt, gamma, beta and the running statistics d->pt. */             \
    F(X, bn_fwd_train, void, (const dt_bn_desc *, d), (const void *, x), (const void *, gamma), (const void *, beta),  \
      (void *, y), (float *, saved), (void *, running_mean), (void *, running_var), (int, relu))                       \
    F(X, bn_fwd_infer, void, (const dt_bn_desc *, d), (const void *, x), (const void *, gamma), (const void *, beta),  \
      (const void *, running_mean), (const void *, running_var), (void *, y), (int, relu))                             \
    /* dx (accumulate_dx), dgamma and dbeta (accumulate_params) from x and what forward saved. relu:                   \
     * the forward was fused with a ReLU and dy is the gradient of the ReLU's output; where that                       \
     * output was zero is recomputed from x and saved exactly as forward computed it, so the output                    \
     * itself need not be kept; DT_BN_ACT(a): dy is the gradient of the activation's output, and the BN                \
     * output's gradient is act_bwd's from y recomputed the same way (the same arithmetic in fp32, not stored).        \
     * Types: dx as x (d->xt), dy as y (d->yt), dgamma and dbeta d->pt. */                                             \
    F(X, bn_bwd, void, (const dt_bn_desc *, d), (const void *, x), (const void *, dy), (int, relu),                    \
      (const void *, gamma), (const float *, saved), (void *, dx), (void *, dgamma), (void *, dbeta),                  \
      (int, accumulate_dx), (int, accumulate_params))                                                                  \
    /* A residual block's tail in one op each way (the fused schedule's BN+add+ReLU): y = max(0, bn(x)                 \
     * + r), with bn_fwd_train's statistics, saved state and running statistics (or bn_fwd_infer's map);               \
     * r of type rt. The arithmetic of bn_fwd_*(relu 0), add_fwd and relu_fwd in fp32: their result bit for            \
     * bit when y is fp32, rounded once instead of after each of the three otherwise. */                               \
    F(X, bn_add_relu_fwd_train, void, (const dt_bn_desc *, d), (const void *, x), (const void *, gamma),               \
      (const void *, beta), (const void *, r), (dt_dtype, rt), (void *, y), (float *, saved),                          \
      (void *, running_mean), (void *, running_var))                                                                   \
    F(X, bn_add_relu_fwd_infer, void, (const dt_bn_desc *, d), (const void *, x), (const void *, gamma),               \
      (const void *, beta), (const void *, running_mean), (const void *, running_var), (const void *, r),              \
      (dt_dtype, rt), (void *, y))                                                                                     \
    /* Its backward from the block's output y and its gradient dy (type d->yt): g = dy where y > 0; dr =               \
     * g (added with accumulate_dr; without it dr may be dy itself when rt is d->yt); dx, dgamma and dbeta             \
     * as bn_bwd(relu 0) gives them from g. The same values as relu_bwd, the add's and bn_bwd's. */                    \
    F(X, bn_add_relu_bwd, void, (const dt_bn_desc *, d), (const void *, x), (const void *, y), (const void *, dy),     \
      (const void *, gamma), (const float *, saved), (void *, dx), (void *, dr), (dt_dtype, rt), (void *, dgamma),     \
      (void *, dbeta), (int, accumulate_dx), (int, accumulate_dr), (int, accumulate_params))                           \
                                                                                                                       \
    /* x, y, dy and dx of type t (a ReLU runs in place, so its output has its input's type) */                         \
    F(X, relu_fwd, void, (int64_t, n), (dt_dtype, t), (const void *, x), (void *, y))                                  \
    /* from the output y: dx = dy where y > 0 */                                                                       \
    F(X, relu_bwd, void, (int64_t, n), (dt_dtype, t), (const void *, y), (const void *, dy), (void *, dx),             \
      (int, accumulate))                                                                                               \
    F(X, add_fwd, void, (int64_t, n), (const void *, a), (dt_dtype, at), (const void *, b), (dt_dtype, bt),            \
      (void *, y), (dt_dtype, yt))                                                                                     \
    /* dst = src (accumulate 0) or dst += src, converting from src's type st to dst's dt: also how a                   \
     * value changes type (O1's reduced copies of conv and linear operands) */                                         \
    F(X, copy_grad, void, (int64_t, n), (const void *, src), (dt_dtype, st), (void *, dst), (dt_dtype, dt),            \
      (int, accumulate))                                                                                               \
                                                                                                                       \
    /* argmax holds, per output element, where in its window the chosen input was: ky*kw + kx (one                     \
     * byte: windows are at most 16x16). x and dx of type d->xt, y and dy d->yt. */                                    \
    F(X, maxpool_fwd, void, (const dt_pool_desc *, d), (const void *, x), (void *, y), (uint8_t *, argmax))            \
    F(X, maxpool_bwd, void, (const dt_pool_desc *, d), (const void *, dy), (const uint8_t *, argmax), (void *, dx),    \
      (int, accumulate))                                                                                               \
    F(X, avgpool_fwd, void, (const dt_pool_desc *, d), (const void *, x), (void *, y))                                 \
    F(X, avgpool_bwd, void, (const dt_pool_desc *, d), (const void *, dy), (void *, dx), (int, accumulate))            \
                                                                                                                       \
    /* Planning (above): bytes of the backend's scratch linear_fwd and linear_bwd need on this shape                   \
     * and type (a backend may also prepare per-shape state here: CUDA's vector of n ones for the bias                 \
     * terms; the CPU widens reduced operands to fp32 there) */                                                        \
    F(X, linear_scratch, size_t, (int, n), (int, in), (int, out), (dt_dtype, t))                                       \
    /* y[n, out] = x[n, in] w[out, in]^T + b; every operand of type t */                                               \
    F(X, linear_fwd, void, (int, n), (int, in), (int, out), (dt_dtype, t), (const void *, x), (const void *, w),       \
      (const void *, b), (void *, y))                                                                                  \
    F(X, linear_bwd, void, (int, n), (int, in), (int, out), (dt_dtype, t), (const void *, x), (const void *, w),       \
      (const void *, dy), (void *, dx), (void *, dw), (void *, db), (int, accumulate_dx), (int, accumulate_params))    \
                                                                                                                       \
    /* Inverted dropout: element i is kept with probability 1-p from hash(seed', i), kept values are                   \
     * scaled by 1/(1-p); mask[i] is 1 where kept. x and dx of type xt, y and dy yt. seed' is seed                     \
     * itself when s is NULL, else hash(seed, s->model_step * 1024 + salt) (util/rng.h's dt_hash64),                   \
     * read from the scalars when the op runs: a captured graph draws new masks at every launch. */                    \
    F(X, dropout_fwd, void, (int64_t, n), (float, p), (uint64_t, seed), (int64_t, salt), (const dt_scalars *, s),      \
      (const void *, x), (dt_dtype, xt), (void *, y), (dt_dtype, yt), (uint8_t *, mask))                               \
    F(X, dropout_bwd, void, (int64_t, n), (float, p), (const uint8_t *, mask), (const void *, dy), (dt_dtype, yt),     \
      (void *, dx), (dt_dtype, xt), (int, accumulate))                                                                 \
                                                                                                                       \
    /* Stochastic depth (torchvision's StochasticDepth, mode "row"): dropout's draw and scale per image                \
     * instead of per element: image b of n (per elements each) is kept when dropout_fwd would keep                    \
     * element b (hash(seed', b), the same seed'), its values scaled by 1/(1-p); mask[b] (n bytes) is                  \
     * 1 where kept. Types as dropout's. */                                                                            \
    F(X, sdepth_fwd, void, (int, n), (int64_t, per), (float, p), (uint64_t, seed), (int64_t, salt),                    \
      (const dt_scalars *, s), (const void *, x), (dt_dtype, xt), (void *, y), (dt_dtype, yt), (uint8_t *, mask))      \
    F(X, sdepth_bwd, void, (int, n), (int64_t, per), (float, p), (const uint8_t *, mask), (const void *, dy),          \
      (dt_dtype, yt), (void *, dx), (dt_dtype, xt), (int, accumulate))                                                 \
                                                                                                                       \
    /* Activations (enum dt_act) on n values, y = f(x), x and y of type t, computed in fp32 as PyTorch's               \
     * CPU kernels write them (NaN stays NaN): relu6 x<0 ? 0 : x>6 ? 6 : x; hardsigmoid h/6 with                       \
     * h = relu6(x+3); hardswish x*h/6; sigmoid 1/(1+exp(-x)); silu x/(1+exp(-x)); gelu (erf)                          \
     * x/2*(1+erf(x/sqrt 2)). y may be x (in place). */                                                                \
    F(X, act_fwd, void, (int64_t, n), (int, act), (dt_dtype, t), (const void *, x), (void *, y))                       \
    /* dx = dy*f'(x) from the input x, as PyTorch's backward kernels: relu6 dy where 0<x<6; hardsigmoid                \
     * dy*(1/6) where -3<x<3; hardswish 0 below -3, dy*(x/3+1/2) up to 3, dy above; sigmoid (dy*(1-s))*s               \
     * and silu dy*s*(1+x*(1-s)) with s = sigmoid(x); gelu dy*(cdf + x*pdf), the normal's cdf and                      \
     * pdf at x. Type t; accumulate adds into dx. */                                                                   \
    F(X, act_bwd, void, (int64_t, n), (int, act), (dt_dtype, t), (const void *, x), (const void *, dy),                \
      (void *, dx), (int, accumulate))                                                                                 \
    /* Squeeze-and-excitation's scale: y[b, p, ch] = x[b, p, ch] * s[b, ch] for the n images of hw                     \
     * positions and c channels (x, y [n, hw, c], s [n, c]); x of type xt, s st, y yt */                               \
    F(X, chanmul_fwd, void, (int, n), (int64_t, hw), (int, c), (const void *, x), (dt_dtype, xt),                      \
      (const void *, s), (dt_dtype, st), (void *, y), (dt_dtype, yt))                                                  \
    /* dx = dy*s (type xt, unless dx is NULL; accumulate_dx adds) and ds[b, ch] = the sum over the                     \
     * image's positions of dy*x, summed in fp32 or wider in an order that depends on the shape alone                  \
     * (type st, unless ds is NULL; accumulate_ds adds); dy of type yt */                                              \
    F(X, chanmul_bwd, void, (int, n), (int64_t, hw), (int, c), (const void *, x), (dt_dtype, xt),                      \
      (const void *, s), (dt_dtype, st), (const void *, dy), (dt_dtype, yt), (void *, dx), (void *, ds),               \
      (int, accumulate_dx), (int, accumulate_ds))                                                                      \
                                                                                                                       \
    /* Layer norm over the c values of each of rows rows (F.layer_norm over the last dimension: on NHWC                \
     * activations, ConvNeXt's channels-last LayerNorm): mean and biased variance of the row summed in                 \
     * fp32 or wider in an order fixed by c, rstd = 1/sqrt(var + eps), y = (x - mean)*rstd*gamma + beta;               \
     * saved[2*rows] (fp32) gets each row's mean, then each row's rstd. x of type xt, y yt, gamma and                  \
     * beta pt. */                                                                                                     \
    F(X, ln_fwd, void, (int64_t, rows), (int, c), (float, eps), (const void *, x), (dt_dtype, xt),                     \
      (const void *, gamma), (const void *, beta), (dt_dtype, pt), (void *, y), (dt_dtype, yt), (float *, saved))      \
    /* Its backward from x, saved and dy (type yt): dx (type xt, accumulate_dx adds; NULL: not wanted),                \
     * dgamma = sum over rows of dy*xhat and dbeta = sum of dy (type pt, accumulate_params adds), the                  \
     * sums over rows in an order that depends on the shape alone (the same bits on any threads) */                    \
    F(X, ln_bwd, void, (int64_t, rows), (int, c), (const void *, x), (dt_dtype, xt), (const void *, gamma),            \
      (dt_dtype, pt), (const float *, saved), (const void *, dy), (dt_dtype, yt), (void *, dx), (void *, dgamma),      \
      (void *, dbeta), (int, accumulate_dx), (int, accumulate_params))                                                 \
    /* Channel slices, how a concatenation along channels runs both ways (DenseNet): for each of rows                  \
     * rows r and j < c, dst[r*dst_stride + dst_off + j] = src[r*src_stride + src_off + j] (accumulate:                \
     * +=), converting from src's type st to dst's dt. Strides and offsets count elements. */                          \
    F(X, chan_copy, void, (int64_t, rows), (int, c), (const void *, src), (int, src_stride), (int, src_off),           \
      (dt_dtype, st), (void *, dst), (int, dst_stride), (int, dst_off), (dt_dtype, dt), (int, accumulate))             \
                                                                                                                       \
    /* ViT's tokens: the class token and the position embedding. x [n, np, d] (the np patches of conv_proj's           \
     * NHWC output, row by row, as torchvision flattens them) into y [n, np+1, d]: y[b, 0] = cls + pos[0] and          \
     * y[b, 1+i] = x[b, i] + pos[1+i], one fp32 add each. cls [d] and pos [np+1, d] of type pt, x xt, y yt. */         \
    F(X, tokens_fwd, void, (int, n), (int, np), (int, d), (const void *, x), (dt_dtype, xt), (const void *, cls),      \
      (const void *, pos), (dt_dtype, pt), (void *, y), (dt_dtype, yt))                                                \
    /* Its backward from dy (type yt): dx[b, i] = dy[b, 1+i] (type xt, accumulate_dx adds; NULL: not                   \
     * wanted); dcls = the sum over b of dy[b, 0] and dpos[t] = the sum over b of dy[b, t] (type pt,                   \
     * accumulate_params adds), summed in fp32 or wider in the order of b (the same bits on any threads). */           \
    F(X, tokens_bwd, void, (int, n), (int, np), (int, d), (const void *, dy), (dt_dtype, yt), (void *, dx),            \
      (dt_dtype, xt), (void *, dcls), (void *, dpos), (dt_dtype, pt), (int, accumulate_dx), (int, accumulate_params))  \
    /* Planning (above): bytes of the backend's scratch attn_fwd and attn_bwd need on this shape and types */          \
    F(X, attn_scratch, size_t, (int, n), (int, s), (int, heads), (int, dh), (dt_dtype, t), (dt_dtype, yt))             \
    /* Self-attention's core (nn.MultiheadAttention without masks or dropout, as torchvision's ViT runs it)            \
     * on n sequences of s tokens: qkv [n, s, 3D] holds each token's query, key and value (in_proj's output:           \
     * q in columns [0, D), k in [D, 2D), v in [2D, 3D), D = heads*dh, head h at columns h*dh of each). Per            \
     * sequence and head, in fp32: Q divided by sqrt(dh) first (PyTorch's order), S = Q K^T, P = softmax             \
     * of each row of S (its max subtracted first), saved in p [n, heads, s, s] (fp32), and y [n, s, D] =              \
     * P V, head h in columns h*dh. qkv of type t, y of yt. */                                                         \
    F(X, attn_fwd, void, (int, n), (int, s), (int, heads), (int, dh), (const void *, qkv), (dt_dtype, t),              \
      (void *, y), (dt_dtype, yt), (float *, p))                                                                       \
    /* Its backward from qkv, p and dy (type yt), in fp32: dV = P^T dY, dP = dY V^T, dS = P*(dP - the                  \
     * row's sum of P*dP), dQ = dS K / sqrt(dh), dK = dS^T (Q / sqrt(dh)), into dqkv (type t, laid out as              \
     * qkv; accumulate adds) */                                                                                        \
    F(X, attn_bwd, void, (int, n), (int, s), (int, heads), (int, dh), (const void *, qkv), (dt_dtype, t),              \
      (const float *, p), (const void *, dy), (dt_dtype, yt), (void *, dqkv), (int, accumulate))                       \
                                                                                                                       \
    /* flatten: NHWC [n, h, w, c] to PyTorch's NCHW order [n, c*h*w], and its backward; type t */                      \
    F(X, flatten_fwd, void, (int, n), (int, h), (int, w), (int, c), (dt_dtype, t), (const void *, x), (void *, y))     \
    F(X, flatten_bwd, void, (int, n), (int, h), (int, w), (int, c), (dt_dtype, t), (const void *, dy), (void *, dx),   \
      (int, accumulate))                                                                                               \
                                                                                                                       \
    /* Planning (above): bytes of the backend's scratch xent needs for n rows of k logits */                           \
    F(X, xent_scratch, size_t, (int, n), (int, k))                                                                     \
    /* Mean softmax cross-entropy over n rows of k logits of type t with label smoothing eps                           \
     * (PyTorch's definition: target (1-eps) on the label plus eps/k everywhere), labels int32 in                      \
     * [0, k) (checked by the caller). Into s: loss = the mean, loss_sum += it; hits1/hits5 += the                     \
     * rows whose label is the top-1/in the top-5 (ties ranked in class order, the lower class first, as               \
     * torch.argmax and a stable sort: an all-equal row is a hit for class 0 only; a row holding NaN or                \
     * inf is a miss and counts in nonfinite_rows); rows += n; a loss that is not finite sets                          \
     * agree[DT_AGREE_OVERFLOW]. Writes dlogits (type t) = d(loss)/d(logits) times s->scale_f (the                     \
     * loss scaler's factor: the fp32 gradient is multiplied, then stored) unless dlogits is NULL. */                  \
    F(X, xent, void, (int, n), (int, k), (dt_dtype, t), (const void *, logits), (const int32_t *, labels),             \
      (float, eps), (void *, dlogits), (dt_scalars *, s))                                                              \
                                                                                                                       \
    /* torch.optim.SGD on n elements, reading lr, the loss scaler's 1/scale and whether to skip from                   \
     * s: nothing when dt_scalars_skip(s); else g' = g*s->inv_scale (exactly 1 leaves g as it is),                     \
     * then with s->clip_norm > 0 g' = g' * dt_scalars_clip_coef(s) (torch's clip_grad_norm_ after                     \
     * GradScaler's unscale_: two roundings, as there);                                                                \
     * d = g' + wd*p; buf = first ? d : momentum*buf + (1-dampening)*d, first being s->sgd_steps == 0;                 \
     * d = nesterov ? d + momentum*buf : buf (when momentum != 0); p -= s->lr*d. p of type pt, g of gt;                \
     * buf (fp32) may be NULL when momentum is 0. */                                                                   \
    F(X, sgd, void, (int64_t, n), (void *, p), (dt_dtype, pt), (const void *, g), (dt_dtype, gt), (float *, buf),      \
      (float, momentum), (float, dampening), (float, wd), (int, nesterov), (const dt_scalars *, s))                    \
    /* torch.optim.Adam (decoupled 0) and AdamW (decoupled 1) on n elements, lr, 1/scale, clipping and                 \
     * the skip read from s as sgd reads them, the step t = s->sgd_steps + 1: g' as sgd's; Adam:                       \
     * g' += wd*p; AdamW: p *= 1 - lr*wd; m1 = beta1*m1 + (1-beta1)*g'; m2 = beta2*m2 + (1-beta2)*g'*g';               \
     * p -= lr/(1-beta1^t) * m1 / (sqrt(m2)/sqrt(1-beta2^t) + eps), the corrections in double, rounded                 \
     * to fp32 once; the hyperparameters double as torch's Python floats, rounded to fp32 where torch                  \
     * rounds them (1-beta1 from the double). m1, m2 fp32 (zero before the first step). */                             \
    F(X, adam, void, (int64_t, n), (void *, p), (dt_dtype, pt), (const void *, g), (dt_dtype, gt), (float *, m1),      \
      (float *, m2), (double, beta1), (double, beta2), (double, eps), (double, wd), (int, decoupled),                  \
      (const dt_scalars *, s))                                                                                         \
    /* torch.optim.RMSprop on n elements (not centered), s read as sgd reads it: g' as sgd's, g' += wd*p;              \
     * sq = alpha*sq + (1-alpha)*g'*g'; a = sqrt(sq) + eps; with momentum: buf = momentum*buf + g'/a,                  \
     * p -= lr*buf; without (buf may be NULL): p -= lr*g'/a. sq, buf fp32 (zero before the first step). */             \
    F(X, rmsprop, void, (int64_t, n), (void *, p), (dt_dtype, pt), (const void *, g), (dt_dtype, gt), (float *, sq),   \
      (float *, buf), (double, alpha), (double, eps), (double, wd), (double, momentum), (const dt_scalars *, s))       \
    /* *out = the sum over i of v_i^2 in double, v = x (unscale 0) or the gradient as the updates read it              \
     * (unscale 1: x * s->inv_scale, then times dt_scalars_clip_coef(s) when clipping; each rounded to                 \
     * fp32), in blocks fixed by n (the same bits on any threads or launch shape). out: one double                     \
     * (the backend's memory), written. LARS's and LAMB's per-tensor norms. */                                         \
    F(X, tensor_sumsq, void, (int64_t, n), (const void *, x), (dt_dtype, t), (int, unscale),                           \
      (const dt_scalars *, s), (double *, out))                                                                        \
    /* LARS (You et al. 2017, MLPerf's ResNet-50) on n elements, s read as sgd reads it: g' as sgd's;                  \
     * from norms (norms[0] = sum w^2, norms[1] = sum g'^2: tensor_sumsq) the trust ratio                              \
     * eta*|w| / (|g'| + wd*|w|) when both norms are above 0 and eta > 0, else 1 (a parameter LARS                     \
     * leaves out: eta 0); buf = momentum*buf + (lr*trust)*(g' + wd*w); w -= buf. buf fp32 (zero                       \
     * before the first step). The ratio in double, rounded to fp32 once. */                                           \
    F(X, lars, void, (int64_t, n), (void *, p), (dt_dtype, pt), (const void *, g), (dt_dtype, gt), (float *, buf),     \
      (double, momentum), (double, wd), (double, eta), (const double *, norms), (const dt_scalars *, s))               \
    /* LAMB (You et al. 2019), phase 1 on n elements: Adam's moments as the adam op updates them (step                 \
     * t = s->sgd_steps + 1), then r = m1/(1-beta1^t) / (sqrt(m2/(1-beta2^t)) + eps) + wd*w, and                       \
     * norms[0] = sum w^2, norms[1] = sum r^2 (written, in double, blocks fixed by n). */                              \
    F(X, lamb_moments, void, (int64_t, n), (const void *, p), (dt_dtype, pt), (const void *, g), (dt_dtype, gt),       \
      (float *, m1), (float *, m2), (double, beta1), (double, beta2), (double, eps), (double, wd),                     \
      (const dt_scalars *, s), (double *, norms))                                                                      \
    /* LAMB phase 2: r again from the moments, trust = |w| / |r| when both are above 0 (else 1),                       \
     * w -= lr*trust*r. Nothing when the step is skipped. */                                                           \
    F(X, lamb_apply, void, (int64_t, n), (void *, p), (dt_dtype, pt), (const float *, m1), (const float *, m2),        \
      (double, beta1), (double, beta2), (double, eps), (double, wd), (const double *, norms),                          \
      (const dt_scalars *, s))                                                                                         \
    /* avg = decay*avg + (1-decay)*x on n elements, x of type xt read as fp32, each product rounded to                 \
     * fp32, then their sum (torchvision's ExponentialMovingAverage: AveragedModel with that avg_fn);                  \
     * decay 0: avg = x (its first update copies). avg fp32. */                                                        \
    F(X, ema_update, void, (int64_t, n), (float *, avg), (const void *, x), (dt_dtype, xt), (double, decay))           \
    /* a step's end, after its sgd ops: dt_scalars_step_end(s) (scalars.h) */                                          \
    F(X, step_end, void, (dt_scalars *, s))                                                                            \
                                                                                                                       \
    F(X, fill, void, (int64_t, n), (dt_dtype, t), (float, value), (void *, x))                                         \
    /* x *= a */                                                                                                       \
    F(X, scale, void, (int64_t, n), (dt_dtype, t), (float, a), (void *, x))                                            \
    /* fp32 x rounded in place to fp16 (bf16 when bf16), round to nearest even: what reduced storage                   \
     * holds (the emulation of reduced storage on a backend that has none; the oracle for one that has) */             \
    F(X, round_half, void, (int64_t, n), (float *, x), (int, bf16))                                                    \
    /* sets s->agree[DT_AGREE_OVERFLOW] when any g[i] * s->inv_scale is inf or NaN (the loss                           \
     * scaler's overflow; left as it is otherwise); g is not changed */                                                \
    F(X, unscale_check, void, (int64_t, n), (dt_dtype, t), (const void *, g), (dt_scalars *, s))                       \
    /* s->grad_sumsq += the sum over i of (g[i] * s->inv_scale)^2 in double, the products rounded to                   \
     * fp32 first (the unscaled gradient torch's clip_grad_norm_ sees), summed in an order that                        \
     * does not depend on threads or launch shape; g is not changed */                                                 \
    F(X, grad_sumsq, void, (int64_t, n), (dt_dtype, t), (const void *, g), (dt_scalars *, s))                          \
    /* Planning (above): bytes of the backend's scratch normalize_u8 needs for n values (a model                       \
     * plans it for its input, n = batch x height x width x channels, at every planned batch) */                       \
    F(X, normalize_scratch, size_t, (int64_t, n))                                                                      \
    /* a batch of n uint8 values (backend memory: uploaded), channels last with c channels, into the                   \
     * model's input x of type t: x[i] = (u[i] / 255 - mean[i % c]) / std[i % c] (mean and std: host                   \
     * arrays of c, read when the op is issued) */                                                                     \
    F(X, normalize_u8, void, (int64_t, n), (int, c), (const uint8_t *, u), (const float *, mean_host),                 \
      (const float *, std_host), (dt_dtype, t), (void *, x))



/* The two forms of the list: DT_OPS(X) calls X(name, ret, (parameters), (arguments)) per op;
 * DT_OPS_TYPED(X) calls X(name, ret, (type, name), (type, name), ...) with each parameter apart (what a
 * wrapper that stores an op's arguments to run it later needs: tests/unit/deferred.c). */
#define DT_OP_CLASSIC_(X, name, ret, ...) X(name, ret, (DT_PP_MAP_(DT_PP_DECL_, DT_PP_COMMA_, __VA_ARGS__)),           \
                                            (DT_PP_MAP_(DT_PP_NAME_, DT_PP_COMMA_, __VA_ARGS__)))
#define DT_OP_TYPED_(X, name, ret, ...) X(name, ret, __VA_ARGS__)
#define DT_CONV_OPS(X) DT_CONV_OPS_(X, DT_OP_CLASSIC_)
#define DT_OTHER_OPS(X) DT_OTHER_OPS_(X, DT_OP_CLASSIC_)
#define DT_OPS(X) DT_CONV_OPS(X) DT_OTHER_OPS(X)
#define DT_OPS_TYPED(X) DT_CONV_OPS_(X, DT_OP_TYPED_) DT_OTHER_OPS_(X, DT_OP_TYPED_)

/* the element-wise activations of act_fwd and act_bwd (PyTorch's ReLU6, Hardsigmoid, Hardswish,
 * Sigmoid, SiLU, GELU) */
enum dt_act { DT_ACT_RELU6, DT_ACT_HARDSIGMOID, DT_ACT_HARDSWISH, DT_ACT_SIGMOID, DT_ACT_SILU, DT_ACT_GELU, DT_ACT_COUNT };

/* bn_fwd_train, bn_fwd_infer and bn_bwd's relu argument: 0 the BN alone; DT_BN_RELU a ReLU after it
 * (DT_FUSE_BN_RELU); DT_BN_ACT(a) the activation a (enum dt_act) after it (DT_FUSE_BN_ACT: only a
 * backend naming that pattern is given these, so one that does not may read relu as a flag) */
#define DT_BN_RELU 1
#define DT_BN_ACT(a) (2 + (int)(a))
#define DT_BN_ACT_OF(relu) ((relu) - 2) /* the enum dt_act of relu >= DT_BN_ACT(0) */

/* DT_BACKEND_OP_<name>: an op's index in the list; DT_BACKEND_OP_COUNT: how many there are */
#define DT_BACKEND_OP_ENUM(name, ret, params, args) DT_BACKEND_OP_##name,
enum dt_backend_op { DT_OPS(DT_BACKEND_OP_ENUM) DT_BACKEND_OP_COUNT };
#undef DT_BACKEND_OP_ENUM

/* an event of a backend's queues (dt_backend.event_*): opaque */
typedef struct dt_event dt_event;
/* a captured graph of ops (dt_backend.graph_*): opaque */
typedef struct dt_graph dt_graph;
/* a timer of the profile (dt_backend.timer_*): opaque */
typedef struct dt_timer dt_timer;
enum { DT_QUEUE_COMPUTE, DT_QUEUE_COPY, DT_QUEUES };

/* Fusable patterns of a model's node list (dt_backend.fuses):
 * DT_FUSE_BN_RELU: BN -> in-place ReLU as bn_fwd_*(relu = 1) and bn_bwd(relu = 1), the ReLU's mask
 *   recomputed from x in backward (the BN's output need not be kept);
 * DT_FUSE_BN_ADD_RELU: a residual block's tail, BN (read only by the add) -> add -> in-place ReLU,
 *   as bn_add_relu_fwd_* and bn_add_relu_bwd at the add's turn (the BN's output takes no memory);
 * DT_FUSE_BN_ACT: BN (read only by the activation) -> an activation node (DT_OP_ACT: ReLU6, Hardswish,
 *   SiLU, ...) as bn_fwd_*(relu = DT_BN_ACT(a)) into the activation's output and bn_bwd(relu =
 *   DT_BN_ACT(a)) from its gradient, at the BN's turn: the BN's output is recomputed from x in
 *   backward, so it takes no memory, and its gradient is never stored (the CPU's; not CUDA's).
 * DT_FUSE_ALL: every pattern (what building asks for; each backend names those it runs). */
enum {
    DT_FUSE_BN_RELU = 1u << 0,
    DT_FUSE_BN_ADD_RELU = 1u << 1,
    DT_FUSE_BN_ACT = 1u << 2,
    DT_FUSE_ALL = DT_FUSE_BN_RELU | DT_FUSE_BN_ADD_RELU | DT_FUSE_BN_ACT
};

/* What a backend starts with (dt_backend.init): the choices of the run that a device backend makes
 * once per process. A backend without such choices ignores them. */
typedef struct dt_backend_options {
    int device;           /* the device to run on (CUDA: its index among the visible GPUs) */
    int deterministic;    /* 1: only algorithms that give the same bits every run (cuDNN's) */
    int conv_search;      /* how far the convolution algorithm search goes: 0 heuristic, 1 bounded, 2
                           * exhaustive (nn/cuda/cuda.h's DT_CUDA_SEARCH_*, dtrain's --cudnn-search) */
    double conv_search_s; /* bounded's cap, seconds per convolution shape */
} dt_backend_options;

typedef struct dt_backend {
    const char *name;

    /* Starts the backend for this process, before any other member is called: DT_OK, or an error
     * after one line. NULL on a backend with nothing to start (the CPU's). */
    int (*init)(const dt_backend_options *o);

    /* Memory. host_memory: 1 when the backend's memory is host memory (the CPU backend), which host
     * code and a host communicator (MPI) may then use in place. mem_alloc: zeroed, 64-byte aligned,
     * NULL when out of memory. mem_put copies host -> backend, mem_get backend -> host (they return
     * when the copy is complete). mem_free(NULL) does nothing. */
    int host_memory;
    /* the element types the ops store (1 << dt_dtype): DT_FLOAT32 always; a model planned with
     * reduced precision on a backend without DT_FLOAT16 / DT_BFLOAT16 emulates them (model.h) */
    unsigned storage_types;
    /* The fused schedule: the patterns of a model's node list this backend runs as one op each way
     * (DT_FUSE_* bits). Planning (graph.c, dt_model_set_fusion) finds every instance of the patterns
     * named here and plans it as the fused op; the rest run as separate ops, which every backend has.
     * (Conv+bias is always one op: conv_fwd's bias, conv_bwd_filter's dbias.) */
    unsigned fuses;
    void *(*mem_alloc)(size_t bytes);
    void (*mem_free)(void *p);
    void (*mem_put)(void *dst, const void *src_host, size_t bytes);
    void (*mem_get)(void *dst_host, const void *src, size_t bytes);
    /* Host buffers for asynchronous copies (pinned memory on CUDA; plain memory on the CPU):
     * host_alloc returns NULL when out of memory; host_free(NULL) does nothing. upload copies bytes
     * from such a host buffer into backend memory, download the other way, both issued to a queue
     * like an op (they may still run when the call returns: the host reuses or reads the host
     * buffer after event_sync on an event recorded after the copy). They are how a step moves its
     * input, its in scalars and its out scalars (scalars.h) without stopping; mem_put and mem_get
     * are for everything else (setup, checkpoints, what the host prints). */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    void (*upload)(void *dst, const void *src_host, size_t bytes, int queue);
    void (*download)(void *dst_host, const void *src, size_t bytes, int queue);
    /* Queues and fences. A backend runs its ops on queues, each in the order the ops were issued:
     * DT_QUEUE_COMPUTE (every op of the list) and DT_QUEUE_COPY (for uploads). An op may still be
     * running when its call returns (CUDA's streams; the deferred test backend's thread), so
     * nothing orders two queues, a queue and the host, or a queue and a communicator, but events:
     * event_record(e, q) marks the point after every op issued to q so far (recording again moves
     * the mark); event_wait(q, e) makes the ops issued to q afterwards wait until e's mark is
     * reached; event_sync(e) returns once it is reached (the host waits). A communicator reading
     * what ops wrote waits on an event recorded after them; mem_get and mem_put are ordered after
     * the compute queue's earlier ops and complete on return. event_create returns NULL when out
     * of memory (the event is unrecorded: waiting on it waits for nothing). The CPU backend runs
     * each op at once, so its events do nothing. */
    dt_event *(*event_create)(void);
    void (*event_destroy)(dt_event *e);
    void (*event_record)(dt_event *e, int queue);
    void (*event_wait)(int queue, dt_event *e);
    void (*event_sync)(dt_event *e);

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

    /* Graphs: a stretch of work captured once and launched again and again (a CUDA graph), so the
     * host issues one launch instead of every op. NULL on a backend without them (dt_backend_cpu:
     * every op runs as issued); all four or none. graph_begin() starts capturing on the calling
     * thread: the ops it issues to either queue from then on, its uploads, downloads and the event
     * records and waits between them, are kept and not run, until graph_end(), which returns them
     * as a graph (NULL after one line when the capture failed), still not run. graph_launch(g) runs
     * a graph on the compute queue, issued like an op: as if its work were issued again with the
     * same arguments and pointers; an upload reads its host buffer, and a download writes its own,
     * when the launch runs it, so what changes between launches lives in memory (the step's in
     * scalars, the batch). An event recorded inside a capture is recorded by every launch at that
     * point (event_sync and event_wait after a launch wait for it there), and an event wait inside
     * orders the two queues inside the graph. While capturing, nothing may allocate, free, wait on
     * the host (event_sync, mem_get, mem_put) or return a result (the planning ops): such a call
     * fails the capture instead of the process (graph_end then returns NULL after one line naming
     * the first of them, and nothing the capture kept runs; the caller issues that work again), and
     * is made safe: an allocation, a free or a planning op is done (CUDA: outside the capture,
     * which it ends there), a host wait or a put is not. DT_OK from graph_begin, or an error after
     * one line. */
    int (*graph_begin)(void);
    dt_graph *(*graph_end)(void);
    void (*graph_launch)(dt_graph *g);
    void (*graph_destroy)(dt_graph *g);

    /* Timers, for the profile (DT_PROFILE: nn/model.h): timer_record(t) marks the compute queue's
     * point after every op issued to it so far (recording again moves the mark), and timer_ms(a, b)
     * waits until b's mark is reached and returns the milliseconds from a's mark to b's (both
     * recorded, on one queue, a first). What a mark's time is: CUDA, an event with timing on the
     * compute stream (device time, so the time between two marks is the stream's, its idle waits
     * included); the CPU, the host's clock when the record is called (its ops run as issued).
     * timer_create returns NULL when out of memory. Never recorded inside a capture. Optional (all
     * four or none): without them a profile uses dt_backend_cpu's, the host's clock. */
    dt_timer *(*timer_create)(void);
    void (*timer_destroy)(dt_timer *t);
    void (*timer_record)(dt_timer *t);
    double (*timer_ms)(dt_timer *a, dt_timer *b);

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

/* dt_backend_cpu with graphs (nn/cpu/capture.c): while a thread captures, its ops are kept instead of
 * run, and a launch runs them; dtrain --graph on the CPU, and the tests of the trainer's graph path */
const dt_backend *dt_cpu_graph_backend(void);
/* the ops and copies a graph of dt_cpu_graph_backend holds */
size_t dt_cpu_graph_size(const dt_graph *g);

/* dt_backend_cpu's bf16 convolutions on oneDNN's own bf16 kernels (on by default; used where this
 * CPU has them: AMX; not oneDNN's reference kernels, nor its AVX512-BF16 ones, see conv_dnnl.c): the same products summed in
 * fp32 in another order, so a result may differ from the widened convolution's by one rounding of
 * bf16. Off, every reduced convolution widens its operands into fp32: the emulation's values bit for
 * bit (what the oracle tests compare). Before planning or between ops; the workspace fits both. */
void dt_cpu_set_half_kernels(int on);
/* the activation layout dt_backend_cpu's fp32 convolutions run on (conv_dnnl.c): our NHWC, oneDNN's
 * blocked layouts (the operands reordered into them and the results out, in the workspace), or auto:
 * blocked where this processor's kernels are faster there (no AVX-512), for the shapes that gain.
 * The default is DT_CONV_LAYOUT's (auto, blocked or nhwc; auto when unset). The results differ by
 * the kernels' order of summation. Before planning: a model planned under another layout has too
 * small a workspace for it. */
enum { DT_CONV_LAYOUT_NHWC, DT_CONV_LAYOUT_BLOCKED, DT_CONV_LAYOUT_AUTO };
void dt_cpu_set_conv_layout(int mode);
/* 1 when dt_backend_cpu runs d's fp32 passes on blocked activations now */
int dt_cpu_conv_blocked(const dt_conv_desc *d);
/* 1 when oneDNN runs a bf16 convolution of this shape on its own kernels on this CPU */
int dt_cpu_half_kernels_for(const dt_conv_desc *d);

/* Threads for the CPU backend (OpenMP and BLAS). n <= 0: $OMP_NUM_THREADS, else all cores. */
void dt_cpu_set_threads(int n);
int dt_cpu_threads(void);

#ifdef __cplusplus
}
#endif
#endif
