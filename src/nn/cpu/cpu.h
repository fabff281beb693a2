/* cpu.h: the CPU backend's functions (the table is in backend_cpu.c) and shared helpers.
 * Contracts of the ops are those of the matching dt_backend members in nn/backend.h. */
#ifndef DT_NN_CPU_CPU_H
#define DT_NN_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn/backend.h"
#include "util/clones.h"
#include "util/half.h"

/* OpenMP thread count and id inside a parallel region (1 and 0 without OpenMP) */
int dt_omp_threads(void);
int dt_omp_thread(void);

/* b rounded up to a multiple of 64: the offsets of 64-byte aligned parts of a workspace or scratch */
static inline size_t dt_cpu_align64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

/* --- typed tensors (nn/backend.h, "Types"): the ops widen reduced operands to fp32 when they load
 * them and round results to the destination's type when they store them. The loads and stores are
 * here, on util/half.h, so that the tile helpers below stand on nothing of cpu/; the whole-tensor
 * forms and the convolutions on reduced operands are typed.c's --- */

/* DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16: bytes per element */
static inline size_t dt_cpu_type_bytes(dt_dtype t)
{
    return t == DT_FLOAT32 ? 4 : 2;
}
/* dst[0..n) = x[i..i+n) of type t, widened (exact) */
static inline void dt_cpu_load(dt_dtype t, const void *x, int64_t i, int64_t n, float *dst)
{
    if (t == DT_FLOAT16)
        dt_f16_to_f32_n((size_t)n, (const uint16_t *)x + i, dst);
    else if (t == DT_BFLOAT16)
        dt_bf16_to_f32_n((size_t)n, (const uint16_t *)x + i, dst);
    else
        memcpy(dst, (const float *)x + i, (size_t)n * sizeof(float));
}
/* x[i..i+n) = src[0..n) rounded to type t (nearest even) */
static inline void dt_cpu_store(dt_dtype t, void *x, int64_t i, int64_t n, const float *src)
{
    if (t == DT_FLOAT16)
        dt_f32_to_f16_n((size_t)n, src, (uint16_t *)x + i);
    else if (t == DT_BFLOAT16)
        dt_f32_to_bf16_n((size_t)n, src, (uint16_t *)x + i);
    else
        memcpy((float *)x + i, src, (size_t)n * sizeof(float));
}
/* the same for whole tensors, in parallel (typed.c) */
void dt_cpu_widen(dt_dtype t, const void *x, int64_t n, float *dst);
void dt_cpu_narrow(dt_dtype t, const float *src, int64_t n, void *x);
/* n fp32 values of x (type t) from element i: x's own memory when fp32, else tile, widened into */
static inline const float *dt_cpu_view(dt_dtype t, const void *x, int64_t i, int64_t n, float *tile)
{
    if (t == DT_FLOAT32)
        return (const float *)x + i;
    dt_cpu_load(t, x, i, n, tile);
    return tile;
}
/* where n results for x (type t) from element i are computed: x's own memory when fp32, else tile;
 * with accumulate, tile first holds x's values. dt_cpu_flush then stores a tile. */
static inline float *dt_cpu_out(dt_dtype t, void *x, int64_t i, int64_t n, float *tile, int accumulate)
{
    if (t == DT_FLOAT32)
        return (float *)x + i;
    if (accumulate)
        dt_cpu_load(t, x, i, n, tile);
    return tile;
}
static inline void dt_cpu_flush(dt_dtype t, void *x, int64_t i, int64_t n, const float *tile)
{
    if (t != DT_FLOAT32)
        dt_cpu_store(t, x, i, n, tile);
}
/* n fp32 values v into elements i.. of x (type t): stored rounded, or with accumulate added (the
 * rounded fp32 sum); tile: room for n floats */
static inline void dt_cpu_put(dt_dtype t, void *x, int64_t i, int64_t n, const float *v, int accumulate, float *tile)
{
    float *o = dt_cpu_out(t, x, i, n, tile, accumulate);
    if (accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] += v[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = v[j];
    }
    dt_cpu_flush(t, x, i, n, o);
}
/* dt_cpu_put on a whole tensor, in parallel: x = src rounded, or with accumulate x + src rounded */
void dt_cpu_put_all(dt_dtype t, void *x, int64_t n, const float *src, int accumulate);
/* one element */
static inline float dt_cpu_get(dt_dtype t, const void *x, int64_t i)
{
    if (t == DT_FLOAT16)
        return dt_f16_to_f32(((const uint16_t *)x)[i]);
    if (t == DT_BFLOAT16)
        return dt_bf16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}
static inline void dt_cpu_set(dt_dtype t, void *x, int64_t i, float v)
{
    if (t == DT_FLOAT16)
        ((uint16_t *)x)[i] = dt_f32_to_f16(v);
    else if (t == DT_BFLOAT16)
        ((uint16_t *)x)[i] = dt_f32_to_bf16(v);
    else
        ((float *)x)[i] = v;
}
/* elements per tile of the element-wise ops (a multiple of 64: tiles stay aligned) */
#define DT_CPU_TILE 1024
/* Element-wise loops over tiles of DT_CPU_TILE elements (in parallel): each operand a view of fp32
 * values (its own memory when fp32, else widened into a tile on the stack), each result stored
 * through a tile when its type is reduced. BEGIN_TILES opens the loop with `i` (the first element)
 * and `k` (the count); END_TILES closes it. The ops of eltwise.c, act.c and optim.c use it. */
#define BEGIN_TILES(n)                                                                                          \
    _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < (n); i += DT_CPU_TILE)                \
    {                                                                                                           \
        const int64_t k = (n) - i < DT_CPU_TILE ? (n) - i : DT_CPU_TILE;
#define END_TILES }

/* The convolutions in fp32 (conv.c's im2col reference, conv_dnnl.c's oneDNN), with the contracts of
 * the conv ops; typed.c runs them on reduced operands by widening into the workspace. */
typedef struct dt_cpu_conv32 {
    size_t (*workspace)(const dt_conv_desc *d);
    void (*fwd)(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws);
    void (*bwd_data)(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws);
    void (*bwd_filter)(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias, int accumulate,
                       void *ws);
} dt_cpu_conv32;
extern const dt_cpu_conv32 dt_cpu_conv32_ref;
size_t dt_cpu_typed_conv_workspace(const dt_cpu_conv32 *impl, const dt_conv_desc *d);
void dt_cpu_typed_conv_fwd(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *x, const void *w,
                           const void *bias, void *y, void *ws);
void dt_cpu_typed_conv_bwd_data(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *dy, const void *w,
                                void *dx, int accumulate, void *ws);
void dt_cpu_typed_conv_bwd_filter(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *x, const void *dy,
                                  void *dw, void *dbias, int accumulate, void *ws);

/* the backend's scratch (reserve_scratch; linear's widened operands) */
void *dt_cpu_scratch(void);

/* helpers (fp32) */
void dt_cpu_zero(int64_t n, float *x);
/* dst[i] += src[i] */
void dt_cpu_add_into(int64_t n, const float *src, float *dst);
/* y[r*ld + j] += bias[j] for rows r < rows and columns j < c (ld >= c: a row's stride) */
void dt_cpu_add_bias(int64_t rows, int c, int ld, const float *bias, float *y);
/* out[j] (+)= sum over r of y[r*ld + j], j < c */
void dt_cpu_column_sums(int64_t rows, int c, int ld, const float *y, float *out, int accumulate);

/* 1x1, stride 1, no padding: the input itself is the GEMM's [rows, C] matrix */
int dt_cpu_conv_pointwise(const dt_conv_desc *d);
/* elements from one output row's channels to the next's in y and dy (d->ys; 0 means oc) */
static inline int dt_cpu_conv_ys(const dt_conv_desc *d)
{
    return d->ys > 0 ? d->ys : d->oc;
}
/* output rows of d: n*oh*ow */
static inline int64_t dt_cpu_conv_rows(const dt_conv_desc *d)
{
    return (int64_t)d->n * d->oh * d->ow;
}

/* the ops, dt_cpu_<name> for each op of nn/backend.h's list: conv.c (the im2col reference
 * convolutions), bn.c, pool.c, linear.c (linear layers, xent), attn.c (ViT's tokens and attention),
 * optim.c (the optimizer step: unscale_check, grad_sumsq, the updates, tensor_sumsq, ema_update,
 * step_end), eltwise.c (the rest) */
#define DT_CPU_DECLARE(name, ret, params, args) ret dt_cpu_##name params;
DT_OPS(DT_CPU_DECLARE)
#undef DT_CPU_DECLARE

/* A convolution whose y and dy are a channel slice of wider rows (ys > oc) is staged densely by both
 * CPU backends (conv.c, conv_dnnl.c): the packed op (d_packed) runs on a packed copy, rows of oc,
 * which conv_stage_in fills from dy's slice (backward) and conv_stage_out copies into y's slice
 * (forward); elements of type t. So every library call is the packed op's. */
static inline int dt_cpu_conv_strided(const dt_conv_desc *d)
{
    return dt_cpu_conv_ys(d) != d->oc;
}
static inline dt_conv_desc dt_cpu_conv_packed(const dt_conv_desc *d)
{
    dt_conv_desc p = *d;
    p.ys = 0;
    return p;
}
/* (conv.c: they copy with the chan_copy op, eltwise.c's) */
void dt_cpu_conv_stage_in(const dt_conv_desc *d, dt_dtype t, const void *dy, void *packed);
void dt_cpu_conv_stage_out(const dt_conv_desc *d, dt_dtype t, const void *packed, void *y);

/* the convolutions through oneDNN, dt_cpu_dnnl_<name> (builds with HAVE_DNNL); shapes oneDNN refuses
 * fall back to the reference's */
#define DT_CPU_DNNL_DECLARE(name, ret, params, args) ret dt_cpu_dnnl_##name params;
DT_CONV_OPS(DT_CPU_DNNL_DECLARE)
#undef DT_CPU_DNNL_DECLARE

/* memory (backend_cpu.c): mem_copy is both mem_put and mem_get */
void *dt_cpu_mem_alloc(size_t bytes);
void dt_cpu_mem_free(void *p);
void dt_cpu_mem_copy(void *dst, const void *src, size_t bytes);
void dt_cpu_mem_copy_queued(void *dst, const void *src, size_t bytes, int queue);
/* events: the CPU runs each op at once, so there is nothing to order (one static event) */
dt_event *dt_cpu_event_create(void);
void dt_cpu_event_destroy(dt_event *e);
void dt_cpu_event_record(dt_event *e, int queue);
void dt_cpu_event_wait(int queue, dt_event *e);
void dt_cpu_event_sync(dt_event *e);
/* timers (backend.h): the host's clock at the record */
dt_timer *dt_cpu_timer_create(void);
void dt_cpu_timer_destroy(dt_timer *t);
void dt_cpu_timer_record(dt_timer *t);
double dt_cpu_timer_ms(dt_timer *a, dt_timer *b);
/* planning: keeps a scratch of at least bytes (dt_cpu_scratch); DT_OK or DT_ERR_NOMEM */
int dt_cpu_reserve_scratch(size_t bytes);

#endif
