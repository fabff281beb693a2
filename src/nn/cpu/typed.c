/* typed.c: the CPU backend's typed tensors (nn/backend.h, "Types"): whole tensors widened from
 * fp16/bf16 to fp32 (exact) and rounded back (nearest even), in parallel, on cpu.h's loads and
 * stores; and the convolutions on reduced operands. A convolution on fp16/bf16 widens its operands into the caller's workspace, runs the
 * fp32 convolution there and rounds its results into place: the same arithmetic as the fp32
 * convolution on arrays holding the same values, so the results are those of the emulation bit
 * for bit. (conv_dnnl.c runs bf16 on oneDNN's own bf16 kernels instead where the CPU has them and
 * dt_cpu_set_half_kernels allows: they sum in another order.) */
#include "config.h"

#include "nn/cpu/cpu.h"

void dt_cpu_widen(dt_dtype t, const void *x, int64_t n, float *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += DT_CPU_TILE)
        dt_cpu_load(t, x, i, n - i < DT_CPU_TILE ? n - i : DT_CPU_TILE, dst + i);
}

void dt_cpu_narrow(dt_dtype t, const float *src, int64_t n, void *x)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += DT_CPU_TILE)
        dt_cpu_store(t, x, i, n - i < DT_CPU_TILE ? n - i : DT_CPU_TILE, src + i);
}

void dt_cpu_put_all(dt_dtype t, void *x, int64_t n, const float *src, int accumulate)
{
    if (!accumulate) {
        dt_cpu_narrow(t, src, n, x);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += DT_CPU_TILE) {
        float tile[DT_CPU_TILE];
        dt_cpu_put(t, x, i, n - i < DT_CPU_TILE ? n - i : DT_CPU_TILE, src + i, 1, tile);
    }
}

/* --- convolutions on reduced operands ---------------------------------------------------------
 * The workspace of a reduced convolution: the fp32 convolution's own, then fp32 room for x (or
 * dx), y (or dy), w (or dw) and the bias (or dbias), each 64-byte aligned. y (or dy) there is packed
 * (oc channels a row) whatever d->ys says: the fp32 convolution runs packed, and only the copies
 * between that room and the caller's y (or dy) follow the channel slice. */

enum { SLOT_X, SLOT_Y, SLOT_W, SLOT_B, SLOTS };

static dt_conv_desc as_f32(const dt_conv_desc *d)
{
    dt_conv_desc f = *d;
    f.t = DT_FLOAT32;
    f.ys = 0; /* the widened y (or dy) is packed */
    return f;
}

static void slot_sizes(const dt_conv_desc *d, int64_t n[SLOTS])
{
    n[SLOT_X] = (int64_t)d->n * d->h * d->w * d->c;
    n[SLOT_Y] = (int64_t)d->n * d->oh * d->ow * d->oc;
    n[SLOT_W] = (int64_t)d->oc * d->kh * d->kw * (d->c / d->groups);
    n[SLOT_B] = d->oc;
}

/* the fp32 room of each slot in ws, after the fp32 convolution's workspace */
static void slots(const dt_cpu_conv32 *impl, const dt_conv_desc *f, void *ws, float *slot[SLOTS])
{
    int64_t n[SLOTS];
    slot_sizes(f, n);
    char *p = (char *)ws + dt_cpu_align64(impl->workspace(f));
    for (int k = 0; k < SLOTS; k++) {
        slot[k] = (float *)(void *)p;
        p += dt_cpu_align64((size_t)n[k] * sizeof(float));
    }
}

size_t dt_cpu_typed_conv_workspace(const dt_cpu_conv32 *impl, const dt_conv_desc *d)
{
    if (d->t == DT_FLOAT32)
        return impl->workspace(d);
    dt_conv_desc f = as_f32(d);
    size_t ws = impl->workspace(&f);
    int64_t n[SLOTS];
    slot_sizes(d, n);
    ws = dt_cpu_align64(ws);
    for (int k = 0; k < SLOTS; k++)
        ws += dt_cpu_align64((size_t)n[k] * sizeof(float));
    return ws;
}

/* a reduced convolution's fp32 descriptor, and its slots in ws with their sizes */
typedef struct widened {
    dt_conv_desc f;
    float *s[SLOTS];
    int64_t n[SLOTS];
} widened;

static void widen_setup(const dt_cpu_conv32 *impl, const dt_conv_desc *d, void *ws, widened *w)
{
    w->f = as_f32(d);
    slots(impl, &w->f, ws, w->s);
    slot_sizes(d, w->n);
}

/* slot k holds x's values widened */
static float *in(widened *w, int k, dt_dtype t, const void *x)
{
    dt_cpu_widen(t, x, w->n[k], w->s[k]);
    return w->s[k];
}

/* slot Y holds dy's values widened: packed, from the channel slice d->ys says */
static float *in_y(widened *w, const dt_conv_desc *d, const void *dy)
{
    const int ys = dt_cpu_conv_ys(d);
    if (ys == d->oc)
        return in(w, SLOT_Y, d->t, dy);
    dt_cpu_chan_copy(dt_cpu_conv_rows(d), d->oc, dy, ys, 0, d->t, w->s[SLOT_Y], d->oc, 0, DT_FLOAT32, 0);
    return w->s[SLOT_Y];
}

void dt_cpu_typed_conv_fwd(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *x, const void *w,
                           const void *bias, void *y, void *ws)
{
    if (d->t == DT_FLOAT32) {
        impl->fwd(d, x, w, bias, y, ws);
        return;
    }
    widened c;
    widen_setup(impl, d, ws, &c);
    impl->fwd(&c.f, in(&c, SLOT_X, d->t, x), in(&c, SLOT_W, d->t, w), bias ? in(&c, SLOT_B, d->t, bias) : NULL,
              c.s[SLOT_Y], ws);
    const int ys = dt_cpu_conv_ys(d);
    if (ys == d->oc)
        dt_cpu_narrow(d->t, c.s[SLOT_Y], c.n[SLOT_Y], y);
    else /* into the channel slice, the channels around it untouched */
        dt_cpu_chan_copy(dt_cpu_conv_rows(d), d->oc, c.s[SLOT_Y], d->oc, 0, DT_FLOAT32, y, ys, 0, d->t, 0);
}

void dt_cpu_typed_conv_bwd_data(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *dy, const void *w,
                                void *dx, int accumulate, void *ws)
{
    if (d->t == DT_FLOAT32) {
        impl->bwd_data(d, dy, w, dx, accumulate, ws);
        return;
    }
    widened c;
    widen_setup(impl, d, ws, &c);
    float *dx32 = accumulate ? in(&c, SLOT_X, d->t, dx) : c.s[SLOT_X];
    impl->bwd_data(&c.f, in_y(&c, d, dy), in(&c, SLOT_W, d->t, w), dx32, accumulate, ws);
    dt_cpu_narrow(d->t, dx32, c.n[SLOT_X], dx);
}

void dt_cpu_typed_conv_bwd_filter(const dt_cpu_conv32 *impl, const dt_conv_desc *d, const void *x, const void *dy,
                                  void *dw, void *dbias, int accumulate, void *ws)
{
    if (d->t == DT_FLOAT32) {
        impl->bwd_filter(d, x, dy, dw, dbias, accumulate, ws);
        return;
    }
    widened c;
    widen_setup(impl, d, ws, &c);
    float *dw32 = accumulate ? in(&c, SLOT_W, d->t, dw) : c.s[SLOT_W];
    float *db32 = dbias && accumulate ? in(&c, SLOT_B, d->t, dbias) : dbias ? c.s[SLOT_B] : NULL;
    impl->bwd_filter(&c.f, in(&c, SLOT_X, d->t, x), in_y(&c, d, dy), dw32, db32, accumulate, ws);
    dt_cpu_narrow(d->t, dw32, c.n[SLOT_W], dw);
    if (dbias)
        dt_cpu_narrow(d->t, db32, c.n[SLOT_B], dbias);
}
