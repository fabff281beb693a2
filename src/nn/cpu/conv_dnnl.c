/* conv_dnnl.c: CPU convolutions through oneDNN (Debian's libdnnl, built on OpenMP like us).
 *
 * Activations are in our NHWC layout ("nhwc"), except inside the fp32 passes of the shapes that
 * blocked_wanted picks (by default on AVX2-only processors): those reorder x, y, dy and dx into
 * oneDNN's blocked layout in the workspace, after the weights, and back. Weights are ours in
 * O,KH,KW,I ("ohwi"), but oneDNN's
 * fast kernels want a blocked weight layout of their choosing ("any" gives ref:any otherwise, 10x
 * slower): each pass reorders the weights into that layout in the workspace, and the weight-gradient
 * pass reorders its result back. Weights are small next to activations, so this costs little.
 * Primitives for the three passes (and the reorders) are made once per shape, when a model is
 * planned (dt_cpu_dnnl_conv_workspace), and kept in a small cache; the passes then only set data
 * pointers and execute. The workspace holds: the scratchpad, the weights in oneDNN's layout, then
 * room for results that must be added rather than written (accumulate = 1), which oneDNN's
 * backward passes cannot do themselves: backward-data then runs slice by slice of images (each
 * slice's primitives made at planning too), so that room is about 16 MiB, not a whole dx. A shape
 * oneDNN refuses runs on the im2col path instead.
 *
 * bf16 operands run on oneDNN's own bf16 kernels where this CPU has them (AMX only; not
 * its reference kernels) and dt_cpu_set_half_kernels leaves them on: inputs read as bf16, products
 * exact and summed in fp32 as the fp32 kernels do, in their own order; the forward rounds its
 * output to bf16 (nearest even), the backward passes write fp32 into the workspace, which is then
 * rounded into place (or added, then rounded). Otherwise a bf16 or fp16 convolution widens its
 * operands into fp32 (typed.c): the emulation's values bit for bit.
 *
 * A channel slice (d->ys > oc: y and dy rows of ys elements, the slice's oc of them ours) is staged
 * densely: the packed op runs into room after its own workspace, and the slice is copied out of it
 * (forward) or into it (backward). So the slice gets the packed op's bits: the same oneDNN calls on
 * the same shapes. (Given the row stride, oneDNN may pick the same kernels and still sum in another
 * order, or split the work otherwise between threads.) The fp32 convolutions and bf16 on oneDNN's
 * kernels stage; the fp16 and widened bf16 ones never see the stride: typed.c widens into a packed
 * fp32 y.
 *
 * The weight gradient of a 1x1 unpadded convolution with a stride > 1 is computed as the stride-1
 * one's on a copy of the input pixels the stride picks (see subsampled). */
#include "config.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/cpu.h"
#include "util/log.h"

#define CACHE_MAX 512

typedef struct conv_prims {
    dt_conv_desc d; /* d.t: the inputs' type (fp32, or bf16 on oneDNN's bf16 kernels); d.ys 0 if packed */
    int ok; /* 0: oneDNN refused this shape (or, for bf16, has only its reference kernel) */
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    dnnl_primitive_t r_fwd, r_bwd, r_back; /* weight reorders: ours->fwd, ours->bwd data, diff->ours */
    /* handles re-pointed at each call: inputs of type d.t (src, wei, bias, dst: the forward's
     * operands and the backward's dy), the backward's fp32 results (dsrc, dwei, dbias) */
    dnnl_memory_t src, wei, bias, dst, dsrc, dwei, dbias, scratch;
    dnnl_memory_t w_fwd, w_bwd, w_diff; /* weights in oneDNN's layouts */
    size_t scratch_bytes, wbytes;               /* wbytes: the largest of the three weight layouts */
    /* blocked activations (see blocked_wanted): the passes run on copies in oneDNN's layouts, in the
     * workspace after the weights: room a (x, or dx) then room b (y, or dy) */
    int want, blk; /* blocked_wanted when made (part of the key); blk: made so (oneDNN may refuse) */
    int dy_shared; /* the two backward passes take dy in the same blocked layout */
    size_t abytes, bbytes;
    dnnl_primitive_t r_x_f, r_y_out, r_dy_d, r_dx_out, r_dx_add, r_x_w, r_dy_w; /* nhwc <-> blocked */
    dnnl_memory_t xb_f, yb, dyb_d, dxb, xb_w, dyb_w;                             /* the blocked copies */
    char impl[3][64];
} conv_prims;

static conv_prims cache[CACHE_MAX];
static int n_cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;
static dnnl_stream_t stream;
static int half_kernels = 1; /* dt_cpu_set_half_kernels */

void dt_cpu_set_half_kernels(int on)
{
    half_kernels = on;
}

static int same(const dt_conv_desc *a, const dt_conv_desc *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

#define TRY(call)                                                                                   \
    do {                                                                                            \
        dnnl_status_t st_ = (call);                                                                 \
        if (st_ != dnnl_success) {                                                                  \
            dt_debug("oneDNN: %s: %s", #call, dnnl_status2str(st_));                              \
            goto fail;                                                                              \
        }                                                                                           \
    } while (0)

static size_t scratch_size(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

static void impl_name(const_dnnl_primitive_desc_t pd, char *out, size_t n)
{
    const char *s = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    snprintf(out, n, "%s", s ? s : "?");
}

/* 1 when the fp32 passes of d run on oneDNN's blocked activation layouts (nChw8c) rather than on our
 * NHWC: DT_CONV_LAYOUT=blocked or nhwc says so for every such shape, auto (the default) on a
 * processor without AVX-512. Convolutions whose kernel is more than 1x1 and whose groups' channels
 * fill the blocks (dense ones, and RegNet's groups of 16): there oneDNN 2.6's AVX2 kernels run
 * 1.2-2x as fast on nChw8c as on NHWC (bench/README.md), far more than the reorders to and from it
 * cost; with AVX-512 they differ by a few percent either way, and 1x1 and depthwise convolutions
 * gain less than their reorders. */
static int layout_mode = -1; /* DT_CONV_LAYOUT_*, or -1 before DT_CONV_LAYOUT is read; under cache_lock */

void dt_cpu_set_conv_layout(int mode)
{
    pthread_mutex_lock(&cache_lock);
    layout_mode = mode;
    pthread_mutex_unlock(&cache_lock);
}

/* caller holds cache_lock */
static int blocked_wanted(const dt_conv_desc *d)
{
    if (layout_mode < 0) {
        const char *v = getenv("DT_CONV_LAYOUT");
        layout_mode = !v || !*v || !strcmp(v, "auto")  ? DT_CONV_LAYOUT_AUTO
                      : !strcmp(v, "blocked")           ? DT_CONV_LAYOUT_BLOCKED
                      : !strcmp(v, "nhwc")              ? DT_CONV_LAYOUT_NHWC
                                                        : -1;
        if (layout_mode < 0) {
            dt_warn("DT_CONV_LAYOUT='%s' is not auto, blocked or nhwc: auto", v);
            layout_mode = DT_CONV_LAYOUT_AUTO;
        }
    }
    if (d->t != DT_FLOAT32 || d->kh * d->kw == 1 || (d->c / d->groups) % 8 || (d->oc / d->groups) % 8)
        return 0;
    if (layout_mode != DT_CONV_LAYOUT_AUTO)
        return layout_mode == DT_CONV_LAYOUT_BLOCKED;
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
}

/* The blocked copies of x and y of a batch would be large (resnet18's first 3x3 convolutions at
 * batch 32: 51 MiB; RegNet's first: 128 MiB), and the workspace is the model's peak memory's too:
 * a blocked convolution runs in slices of images whose copies stay within BLK_CHUNK_BYTES, each
 * slice a convolution of its own (the weight gradient summing the slices' in slice order). */
#define BLK_CHUNK_BYTES ((size_t)24 << 20)

/* images per slice of a blocked convolution (channels rounded up to the blocks of 16) */
static int blk_chunk(const dt_conv_desc *d)
{
    size_t per = ((size_t)d->h * d->w * ((d->c + 15) / 16 * 16) + (size_t)d->oh * d->ow * ((d->oc + 15) / 16 * 16)) *
                 sizeof(float);
    size_t k = BLK_CHUNK_BYTES / (per ? per : 1);
    return k < 1 ? 1 : k > (size_t)d->n ? d->n : (int)k;
}

/* 1 when d (packed) runs as slices of blk_chunk images, each on blocked activations */
static int blk_sliced(const dt_conv_desc *d)
{
    pthread_mutex_lock(&cache_lock);
    int want = blocked_wanted(d);
    pthread_mutex_unlock(&cache_lock);
    return want && blk_chunk(d) < d->n;
}

/* a reorder p from one layout to another (weights, or activations); add: into the destination (a
 * sum post-op: to + from, in fp32). 1 on success */
static int reorder(dnnl_primitive_t *p, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int add)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    int ok = 1;
    if (add)
        ok = dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_sum(po, 1.f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, attr) == dnnl_success &&
         dnnl_primitive_create(p, rpd) == dnnl_success;
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* primitives for e->d (y and dy packed), on blocked activations when blk. Caller holds cache_lock */
static void build(conv_prims *e, int blk)
{
    const dt_conv_desc *d = &e->d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pf = NULL, pd = NULL, pw = NULL;
    dnnl_memory_desc_t src, dst, wei, wany, bias, dsrc, dwei, dbias, scr;
    const dnnl_data_type_t it = d->t == DT_BFLOAT16 ? dnnl_bf16 : dnnl_f32;
    dnnl_convolution_desc_t cf, cd, cw;
    dnnl_dims_t sd = {d->n, d->c, d->h, d->w}, dd = {d->n, d->oc, d->oh, d->ow}, bd = {d->oc};
    dnnl_dims_t strides = {d->sh, d->sw}, dil = {d->dh - 1, d->dw - 1}, pl = {d->ph, d->pw};
    /* padding on the high side as oneDNN wants it: what makes the output size come out right */
    dnnl_dims_t pr = {(d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1 - d->h - d->ph,
                      (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1 - d->w - d->pw};
    e->ok = 0;
    if (!engine) {
        TRY(dnnl_engine_create(&engine, dnnl_cpu, 0));
        TRY(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    }
    TRY(dnnl_memory_desc_init_by_tag(&src, 4, sd, it, dnnl_nhwc));
    TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, it, dnnl_nhwc));
    TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bd, it, dnnl_x));
    TRY(dnnl_memory_desc_init_by_tag(&dsrc, 4, sd, dnnl_f32, dnnl_nhwc));
    TRY(dnnl_memory_desc_init_by_tag(&dbias, 1, bd, dnnl_f32, dnnl_x));
    /* the activations' layouts the passes are made for: ours, or oneDNN's choice (blocked) */
    e->blk = blk;
    dnnl_memory_desc_t csrc = src, cdst = dst, cdsrc = dsrc;
    if (e->blk) {
        TRY(dnnl_memory_desc_init_by_tag(&csrc, 4, sd, it, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&cdst, 4, dd, it, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&cdsrc, 4, sd, dnnl_f32, dnnl_format_tag_any));
    }
    if (d->groups == 1) {
        dnnl_dims_t wd = {d->oc, d->c, d->kh, d->kw};
        TRY(dnnl_memory_desc_init_by_tag(&wei, 4, wd, it, dnnl_ohwi));
        TRY(dnnl_memory_desc_init_by_tag(&wany, 4, wd, it, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&dwei, 4, wd, dnnl_f32, dnnl_ohwi));
    } else {
        dnnl_dims_t wd = {d->groups, d->oc / d->groups, d->c / d->groups, d->kh, d->kw};
        TRY(dnnl_memory_desc_init_by_tag(&wei, 5, wd, it, dnnl_gohwi));
        TRY(dnnl_memory_desc_init_by_tag(&wany, 5, wd, it, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&dwei, 5, wd, dnnl_f32, dnnl_gohwi));
    }
    dnnl_memory_desc_t dwany = wany;
    dwany.data_type = dnnl_f32; /* the weight gradient in fp32, in the layout oneDNN picks */
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TRY(dnnl_dilated_convolution_forward_desc_init(&cf, dnnl_forward_training, dnnl_convolution_direct, &csrc, &wany,
                                                   d->bias ? &bias : NULL, &cdst, strides, dil, pl, pr));
    TRY(dnnl_primitive_desc_create(&pf, &cf, attr, engine, NULL));
    TRY(dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &cdsrc, &wany, &cdst, strides,
                                                         dil, pl, pr));
    TRY(dnnl_primitive_desc_create(&pd, &cd, attr, engine, pf));
    TRY(dnnl_dilated_convolution_backward_weights_desc_init(&cw, dnnl_convolution_direct, &csrc, &dwany,
                                                            d->bias ? &dbias : NULL, &cdst, strides, dil, pl, pr));
    TRY(dnnl_primitive_desc_create(&pw, &cw, attr, engine, pf));
    TRY(dnnl_primitive_create(&e->fwd, pf));
    TRY(dnnl_primitive_create(&e->bwd_data, pd));
    TRY(dnnl_primitive_create(&e->bwd_weights, pw));
    e->scratch_bytes = scratch_size(pf);
    if (scratch_size(pd) > e->scratch_bytes)
        e->scratch_bytes = scratch_size(pd);
    if (scratch_size(pw) > e->scratch_bytes)
        e->scratch_bytes = scratch_size(pw);
    e->scratch_bytes = (e->scratch_bytes + 63) & ~(size_t)63;
    impl_name(pf, e->impl[0], sizeof e->impl[0]);
    impl_name(pd, e->impl[1], sizeof e->impl[1]);
    impl_name(pw, e->impl[2], sizeof e->impl[2]);
    /* bf16 on AMX kernels only: oneDNN's reference kernels are slower than widening into fp32, and
     * oneDNN 2.6's jit_bf16 backward kernels (AVX512-BF16 without AMX, or bf16 emulated on AVX-512)
     * gave results off by orders of magnitude in test_amp_storage (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16
     * or AVX512_CORE on an AMX machine), while every pass on AMX stays within a rounding */
    if (it != dnnl_f32)
        for (int k = 0; k < 3; k++)
            if (!strstr(e->impl[k], "amx")) {
                dt_debug("oneDNN's bf16 kernel for pass %d here is %s, not AMX: bf16 convolutions widen into fp32",
                         k, e->impl[k]);
                goto fail;
            }
    const dnnl_memory_desc_t *mf = dnnl_primitive_desc_query_md(pf, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *mb = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *mw = dnnl_primitive_desc_query_md(pw, dnnl_query_diff_weights_md, 0);
    if (!mf || !mb || !mw)
        goto fail;
    e->wbytes = dnnl_memory_desc_get_size(mf);
    if (dnnl_memory_desc_get_size(mb) > e->wbytes)
        e->wbytes = dnnl_memory_desc_get_size(mb);
    if (dnnl_memory_desc_get_size(mw) > e->wbytes)
        e->wbytes = dnnl_memory_desc_get_size(mw);
    e->wbytes = (e->wbytes + 63) & ~(size_t)63;
    if (e->blk) { /* the copies' layouts, and the reorders between ours and them */
        const dnnl_memory_desc_t *bx = dnnl_primitive_desc_query_md(pf, dnnl_query_src_md, 0),
                                 *by = dnnl_primitive_desc_query_md(pf, dnnl_query_dst_md, 0),
                                 *bdy = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0),
                                 *bdx = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0),
                                 *bxw = dnnl_primitive_desc_query_md(pw, dnnl_query_src_md, 0),
                                 *bdyw = dnnl_primitive_desc_query_md(pw, dnnl_query_diff_dst_md, 0);
        if (!bx || !by || !bdy || !bdx || !bxw || !bdyw)
            goto fail;
        e->abytes = dt_cpu_align64(dnnl_memory_desc_get_size(bx));
        if (dt_cpu_align64(dnnl_memory_desc_get_size(bdx)) > e->abytes)
            e->abytes = dt_cpu_align64(dnnl_memory_desc_get_size(bdx));
        if (dt_cpu_align64(dnnl_memory_desc_get_size(bxw)) > e->abytes)
            e->abytes = dt_cpu_align64(dnnl_memory_desc_get_size(bxw));
        e->bbytes = dt_cpu_align64(dnnl_memory_desc_get_size(by));
        if (dt_cpu_align64(dnnl_memory_desc_get_size(bdy)) > e->bbytes)
            e->bbytes = dt_cpu_align64(dnnl_memory_desc_get_size(bdy));
        if (dt_cpu_align64(dnnl_memory_desc_get_size(bdyw)) > e->bbytes)
            e->bbytes = dt_cpu_align64(dnnl_memory_desc_get_size(bdyw));
        if (!reorder(&e->r_x_f, &src, bx, 0) || !reorder(&e->r_y_out, by, &dst, 0) ||
            !reorder(&e->r_dy_d, &dst, bdy, 0) || !reorder(&e->r_dx_out, bdx, &dsrc, 0) ||
            !reorder(&e->r_dx_add, bdx, &dsrc, 1) || !reorder(&e->r_x_w, &src, bxw, 0) ||
            !reorder(&e->r_dy_w, &dst, bdyw, 0))
            goto fail;
        e->dy_shared = dnnl_memory_desc_equal(bdy, bdyw);
        TRY(dnnl_memory_create(&e->xb_f, bx, engine, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->yb, by, engine, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->dyb_d, bdy, engine, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->dxb, bdx, engine, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->xb_w, bxw, engine, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->dyb_w, bdyw, engine, DNNL_MEMORY_NONE));
    }
    TRY(dnnl_memory_create(&e->w_fwd, mf, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->w_bwd, mb, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->w_diff, mw, engine, DNNL_MEMORY_NONE));
    if (!reorder(&e->r_fwd, &wei, mf, 0) || !reorder(&e->r_bwd, &wei, mb, 0) || !reorder(&e->r_back, mw, &dwei, 0))
        goto fail;
    dnnl_dims_t sbytes = {(dnnl_dim_t)(e->scratch_bytes ? e->scratch_bytes : 1)};
    TRY(dnnl_memory_desc_init_by_tag(&scr, 1, sbytes, dnnl_u8, dnnl_x));
    TRY(dnnl_memory_create(&e->src, &src, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->dst, &dst, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->wei, &wei, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->bias, &bias, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->dsrc, &dsrc, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->dwei, &dwei, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->dbias, &dbias, engine, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&e->scratch, &scr, engine, DNNL_MEMORY_NONE));
    e->ok = 1;
    dt_debug("oneDNN conv%s n%d %dx%dx%d->%d k%dx%d s%d p%d d%d g%d: %s / %s / %s, scratchpad %zu bytes%s",
             it == dnnl_f32 ? "" : " bf16", d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->ph, d->dh, d->groups,
             e->impl[0], e->impl[1], e->impl[2], e->scratch_bytes, e->blk ? ", blocked activations" : "");
fail:
    if (pf)
        dnnl_primitive_desc_destroy(pf);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (pw)
        dnnl_primitive_desc_destroy(pw);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!e->ok)
        dt_debug("oneDNN refused conv n%d %dx%dx%d->%d k%d s%d: the im2col path runs it", d->n, d->h, d->w, d->c,
                 d->oc, d->kh, d->sh);
}

/* the cache entry for d, made when missing (normally at planning); NULL when the cache is full or
 * oneDNN refuses the shape, and for a channel slice, which has none: it is staged, or widened */
static conv_prims *lookup(const dt_conv_desc *d)
{
    if (dt_cpu_conv_strided(d))
        return NULL;
    dt_conv_desc key = dt_cpu_conv_packed(d); /* ys == oc is packed: one entry */
    pthread_mutex_lock(&cache_lock);
    conv_prims *e = NULL;
    const int want = blocked_wanted(&key) && blk_chunk(&key) == key.n; /* else its slices are */
    for (int i = 0; i < n_cache && !e; i++)
        if (same(&cache[i].d, &key) && cache[i].want == want)
            e = &cache[i];
    if (!e && n_cache < CACHE_MAX) {
        e = &cache[n_cache++];
        memset(e, 0, sizeof *e);
        e->d = key;
        e->want = want;
        build(e, want);
        if (!e->ok && e->blk) { /* oneDNN refused the blocked layouts: ours, then */
            memset(e, 0, sizeof *e);
            e->d = key;
            e->want = want;
            build(e, 0);
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return e && e->ok ? e : NULL;
}

int dt_cpu_conv_blocked(const dt_conv_desc *d)
{
    if (blk_sliced(d))
        return 1;
    conv_prims *e = lookup(d);
    return e && e->blk;
}

static int64_t w_elems(const dt_conv_desc *d)
{
    return (int64_t)d->oc * d->kh * d->kw * (d->c / d->groups);
}

#define ACC_CHUNK_BYTES ((size_t)16 << 20)

/* the descriptor of a slice of n images of d, with no accumulate room of its own */
static dt_conv_desc slice(const dt_conv_desc *d, int n)
{
    dt_conv_desc s = *d;
    s.n = n;
    s.dx_accumulate = 0;
    return s;
}

/* images per slice for a backward-data that adds into dx: its temporary stays near ACC_CHUNK_BYTES */
static int acc_chunk(const dt_conv_desc *d)
{
    size_t per = (size_t)d->h * d->w * d->c * sizeof(float);
    int k = (int)(ACC_CHUNK_BYTES / (per ? per : 1));
    return k < 1 ? 1 : (k > d->n ? d->n : k);
}

/* the descriptors of d run in slices of k images (the full slices, then the rest); their count. A
 * backward-data adding into dx runs in slices of acc_chunk, a sliced blocked one of blk_chunk */
static int slices(const dt_conv_desc *d, int k, dt_conv_desc sd[2])
{
    int rest = d->n % k, m = 0;
    sd[m++] = slice(d, k);
    if (rest)
        sd[m++] = slice(d, rest);
    return m;
}

static size_t own_bytes(const conv_prims *e)
{
    return e->scratch_bytes + e->wbytes + e->abytes + e->bbytes;
}

/* the blocked copies' rooms in the workspace: a (x or dx), b (y or dy) */
static void *room_a(const conv_prims *e, void *ws)
{
    return (char *)ws + e->scratch_bytes + e->wbytes;
}

static void *room_b(const conv_prims *e, void *ws)
{
    return (char *)room_a(e, ws) + e->abytes;
}

/* the workspace after e's own bytes: fp32 room for results to be added or rounded into place */
static float *room(const conv_prims *e, void *ws)
{
    return (float *)(void *)((char *)ws + own_bytes(e));
}

static size_t workspace32(const dt_conv_desc *d)
{
    if (blk_sliced(d)) {
        dt_conv_desc sd[2];
        size_t need = 0;
        for (int i = 0, m = slices(d, blk_chunk(d), sd); i < m; i++) {
            size_t b = workspace32(&sd[i]);
            need = b > need ? b : need;
        }
        return need;
    }
    conv_prims *e = lookup(d);
    if (!e)
        return dt_cpu_conv32_ref.workspace(d);
    /* scratchpad and weights, then the room for a result to be added: dw and dbias; dx slice by
     * slice of images (a slice's own primitives, made here too) */
    size_t need = own_bytes(e) + (size_t)(w_elems(d) + d->oc) * sizeof(float);
    if (d->dx_accumulate && !e->blk) {
        dt_conv_desc sd[2];
        for (int i = 0, m = slices(d, acc_chunk(d), sd); i < m; i++) {
            conv_prims *se = lookup(&sd[i]);
            size_t b = (se ? own_bytes(se) : dt_cpu_conv32_ref.workspace(&sd[i])) +
                       (size_t)acc_chunk(d) * d->h * d->w * d->c * sizeof(float);
            need = b > need ? b : need;
        }
    }
    return need;
}

static void exec(conv_prims *e, dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
    dnnl_status_t st = dnnl_primitive_execute(p, stream, nargs, args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(stream);
    if (st != dnnl_success)
        dt_error("oneDNN convolution %dx%dx%d->%d failed: %s", e->d.h, e->d.w, e->d.c, e->d.oc, dnnl_status2str(st));
}

static void point(dnnl_memory_t m, const void *p)
{
    dnnl_memory_set_data_handle(m, (void *)(uintptr_t)p); /* oneDNN only reads inputs */
}

/* our weights w -> oneDNN's layout in the workspace after the scratchpad, through reorder r */
static void weights_in(conv_prims *e, dnnl_primitive_t r, dnnl_memory_t to, const void *w, void *ws)
{
    point(e->wei, w);
    point(to, (char *)ws + e->scratch_bytes);
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, e->wei}, {DNNL_ARG_TO, to}};
    exec(e, r, 2, a);
}

/* an activation from one layout to the other through reorder r (from and to already pointed) */
static void relayout(conv_prims *e, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to)
{
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    exec(e, r, 2, a);
}

/* the blocked copy m (in room at) of our activation ours, pointed at p, through reorder r; returns m */
static dnnl_memory_t blocked_in(conv_prims *e, dnnl_primitive_t r, dnnl_memory_t ours, const void *p, dnnl_memory_t m,
                                void *at)
{
    point(ours, p);
    point(m, at);
    relayout(e, r, ours, m);
    return m;
}

/* A layer's backward runs the weight gradient, then the data gradient, on the same dy and workspace
 * (nn/layers/conv.c): the second pass takes the blocked dy the first left in room b, when both
 * passes use one layout. Set by the weight gradient, taken (and cleared) by the next pass of any
 * convolution on this thread. */
static _Thread_local struct {
    const conv_prims *e;
    const void *dy, *ws;
} blocked_dy;

/* the forward of entry e: x, w, bias and y of e's input type */
static void fwd_exec(conv_prims *e, const void *x, const void *w, const void *bias, void *y, void *ws)
{
    blocked_dy.e = NULL;
    weights_in(e, e->r_fwd, e->w_fwd, w, ws);
    dnnl_memory_t src = e->src, dst = e->dst;
    if (!e->blk) {
        point(src, x);
        point(dst, y);
    } else { /* x into room a, y out of room b */
        src = blocked_in(e, e->r_x_f, e->src, x, e->xb_f, room_a(e, ws));
        dst = e->yb;
        point(dst, room_b(e, ws));
    }
    point(e->scratch, ws);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, e->w_fwd}, {DNNL_ARG_DST, dst},
                            {DNNL_ARG_SCRATCHPAD, e->scratch}, {DNNL_ARG_BIAS, e->bias}};
    if (bias)
        point(e->bias, bias);
    exec(e, e->fwd, bias ? 5 : 4, a);
    if (e->blk) {
        point(e->dst, y);
        relayout(e, e->r_y_out, dst, e->dst);
    }
}

/* elements of one image of x, and of y */
static int64_t in_image(const dt_conv_desc *d)
{
    return (int64_t)d->h * d->w * d->c;
}

static int64_t out_image(const dt_conv_desc *d)
{
    return (int64_t)d->oh * d->ow * d->oc;
}

static void fwd32(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws)
{
    if (blk_sliced(d)) {
        for (int i0 = 0, k = blk_chunk(d); i0 < d->n; i0 += k) {
            dt_conv_desc sd = slice(d, d->n - i0 < k ? d->n - i0 : k);
            fwd32(&sd, x + i0 * in_image(d), w, bias, y + i0 * out_image(d), ws);
        }
        return;
    }
    conv_prims *e = lookup(d);
    if (!e || (bias != NULL) != (d->bias != 0)) {
        dt_cpu_conv32_ref.fwd(d, x, w, bias, y, ws);
        return;
    }
    fwd_exec(e, x, w, bias, y, ws);
}

/* backward-data of one (slice) descriptor into out (fp32); add (blocked entries only): into it, the
 * reorder out of the blocked layout adding (to + from: the bits of dt_cpu_add_into) */
static void bwd_data_into(conv_prims *e, const void *dy, const void *w, float *out, int add, void *ws)
{
    const int have_dy = blocked_dy.e == e && blocked_dy.dy == dy && blocked_dy.ws == ws;
    blocked_dy.e = NULL;
    weights_in(e, e->r_bwd, e->w_bwd, w, ws);
    dnnl_memory_t ddst = e->dst, dsrc = e->dsrc;
    if (!e->blk) {
        point(ddst, dy);
        point(dsrc, out);
    } else { /* dy into room b (unless there already), dx into room a */
        ddst = have_dy ? e->dyb_d : blocked_in(e, e->r_dy_d, e->dst, dy, e->dyb_d, room_b(e, ws));
        point(ddst, room_b(e, ws));
        dsrc = e->dxb;
        point(dsrc, room_a(e, ws));
    }
    point(e->scratch, ws);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, e->w_bwd}, {DNNL_ARG_DIFF_SRC, dsrc},
                            {DNNL_ARG_SCRATCHPAD, e->scratch}};
    exec(e, e->bwd_data, 4, a);
    if (e->blk) {
        point(e->dsrc, out);
        relayout(e, add ? e->r_dx_add : e->r_dx_out, dsrc, e->dsrc);
    }
}

static void bwd_data32(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws)
{
    if (blk_sliced(d)) { /* last slice first: the weight gradient's last slice left its blocked dy */
        const int k = blk_chunk(d);
        for (int i0 = (d->n - 1) / k * k; i0 >= 0; i0 -= k) {
            dt_conv_desc sd = slice(d, d->n - i0 < k ? d->n - i0 : k);
            bwd_data32(&sd, dy + i0 * out_image(d), w, dx + i0 * in_image(d), accumulate, ws);
        }
        return;
    }
    conv_prims *e = lookup(d);
    if (e && e->blk) { /* adds on its way out of the blocked layout: no room needed */
        bwd_data_into(e, dy, w, dx, accumulate, ws);
        return;
    }
    if (!e || (accumulate && !d->dx_accumulate)) { /* no room planned for adding: the reference adds */
        dt_cpu_conv32_ref.bwd_data(d, dy, w, dx, accumulate, ws);
        return;
    }
    if (!accumulate) {
        bwd_data_into(e, dy, w, dx, 0, ws);
        return;
    }
    /* slice by slice of images: oneDNN writes the slice to the temporary, which is added into dx */
    const int k = acc_chunk(d);
    const int64_t in_img = (int64_t)d->h * d->w * d->c, out_img = (int64_t)d->oh * d->ow * d->oc; /* packed: lookup has no entry for a slice */
    for (int i0 = 0; i0 < d->n; i0 += k) {
        int cnt = d->n - i0 < k ? d->n - i0 : k;
        dt_conv_desc sd = slice(d, cnt);
        conv_prims *se = lookup(&sd);
        float *tmp = (float *)((char *)ws + (se ? own_bytes(se) : dt_cpu_conv32_ref.workspace(&sd)));
        if (se)
            bwd_data_into(se, dy + i0 * out_img, w, tmp, 0, ws);
        else
            dt_cpu_conv32_ref.bwd_data(&sd, dy + i0 * out_img, w, tmp, 0, ws);
        dt_cpu_add_into(cnt * in_img, tmp, dx + i0 * in_img);
    }
}

/* the weight gradient of entry e into ow (fp32, our layout) and, with a bias, ob (fp32) */
static void bwd_filter_into(conv_prims *e, const void *x, const void *dy, float *ow, float *ob, void *ws)
{
    dnnl_memory_t src = e->src, ddst = e->dst;
    blocked_dy.e = NULL;
    if (e->blk) {
        src = blocked_in(e, e->r_x_w, e->src, x, e->xb_w, room_a(e, ws));
        ddst = blocked_in(e, e->r_dy_w, e->dst, dy, e->dyb_w, room_b(e, ws));
    } else {
        point(src, x);
        point(ddst, dy);
    }
    point(e->w_diff, (char *)ws + e->scratch_bytes);
    point(e->scratch, ws);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, e->w_diff},
                            {DNNL_ARG_SCRATCHPAD, e->scratch}, {DNNL_ARG_DIFF_BIAS, e->dbias}};
    if (ob)
        point(e->dbias, ob);
    exec(e, e->bwd_weights, ob ? 5 : 4, a);
    if (e->blk && e->dy_shared) { /* room b keeps dy for the data gradient */
        blocked_dy.e = e;
        blocked_dy.dy = dy;
        blocked_dy.ws = ws;
    }
    point(e->dwei, ow); /* oneDNN's layout -> ours */
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, e->w_diff}, {DNNL_ARG_TO, e->dwei}};
    exec(e, e->r_back, 2, r);
}

static void bwd_filter32(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias, int accumulate,
                         void *ws)
{
    if (blk_sliced(d)) { /* the first slice writes (or adds), the others add */
        for (int i0 = 0, k = blk_chunk(d); i0 < d->n; i0 += k) {
            dt_conv_desc sd = slice(d, d->n - i0 < k ? d->n - i0 : k);
            bwd_filter32(&sd, x + i0 * in_image(d), dy + i0 * out_image(d), dw, dbias, accumulate || i0 > 0, ws);
        }
        return;
    }
    conv_prims *e = lookup(d);
    if (!e || (dbias != NULL) != (d->bias != 0)) {
        dt_cpu_conv32_ref.bwd_filter(d, x, dy, dw, dbias, accumulate, ws);
        return;
    }
    float *ow = accumulate ? room(e, ws) : dw;
    float *ob = !dbias ? NULL : accumulate ? ow + w_elems(d) : dbias;
    bwd_filter_into(e, x, dy, ow, ob, ws);
    if (accumulate) {
        dt_cpu_add_into(w_elems(d), ow, dw);
        if (dbias)
            dt_cpu_add_into(d->oc, ob, dbias);
    }
}

static const dt_cpu_conv32 dnnl32 = {workspace32, fwd32, bwd_data32, bwd_filter32};

/* --- bf16 on oneDNN's bf16 kernels ---------------------------------------------------------------
 * The workspace: the entry's scratchpad and weights, then fp32 room for dx, or for dw and dbias. */

/* the bf16 entry for d when oneDNN has AMX kernels for it, whatever dt_cpu_set_half_kernels says */
static conv_prims *bf16_entry(const dt_conv_desc *d)
{
    return d->t == DT_BFLOAT16 ? lookup(d) : NULL;
}

/* the bf16 entry for d when its kernels run, else NULL (the operands are widened) */
static conv_prims *native(const dt_conv_desc *d)
{
    return half_kernels ? bf16_entry(d) : NULL;
}

int dt_cpu_half_kernels_for(const dt_conv_desc *d)
{
    dt_conv_desc p = dt_cpu_conv_packed(d); /* a channel slice runs on them too, staged */
    return bf16_entry(&p) != NULL;
}

static size_t native_workspace(const dt_conv_desc *d)
{
    conv_prims *e = bf16_entry(d);
    if (!e)
        return 0;
    int64_t nx = (int64_t)d->n * d->h * d->w * d->c, nw = w_elems(d) + d->oc;
    return own_bytes(e) + (size_t)(nx > nw ? nx : nw) * sizeof(float);
}

/* --- a channel slice staged densely ----------------------------------------------------------------
 * The workspace: the packed op's, then room for a packed y (or dy) of d's type. */

/* 1 when the op on d runs packed on its staged copy of the slice: every fp32 slice, and a bf16 slice
 * whose packed shape oneDNN runs on its own bf16 kernels (whatever dt_cpu_set_half_kernels says: the
 * packed op then decides). fp16, and bf16 without those kernels, are widened into a packed fp32 y by
 * typed.c. */
static int staged(const dt_conv_desc *d)
{
    if (!dt_cpu_conv_strided(d) || d->t == DT_FLOAT16)
        return 0;
    if (d->t == DT_BFLOAT16) {
        dt_conv_desc p = dt_cpu_conv_packed(d);
        return bf16_entry(&p) != NULL;
    }
    return 1;
}

/* --- the weight gradient of a strided 1x1 convolution on its subsampled input ---------------------
 * oneDNN 2.6's jit_1x1:avx2 backward-weights kernel, given a 1x1 unpadded convolution with a stride
 * > 1, copies the pixels the stride picks into its scratchpad itself ("reduce to unit stride"), and
 * with 2 threads gave a wrong dw that changed from call to call: errors as large as the values, in
 * a quarter of the calls or so, for inputs of fewer than 8 channels (6x6x4->8 and 8x8x3->16 at stride
 * 2; AVX2-only CPUs, or ONEDNN_MAX_CPU_ISA=AVX2; right with one thread and at stride 1). oneDNN's
 * issue 6035 reports that copy, for NHWC inputs of fewer channels than the kernel's channel block,
 * laid out by the block and overrunning each thread's room, on its AVX-512 kernel too. So the op
 * makes that copy itself, at the workspace's start (64-byte aligned), and runs the stride-1
 * convolution on it, whose workspace follows: the same products, and no copy inside oneDNN. */

static int subsampled(const dt_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->ph == 0 && d->pw == 0 && (d->sh > 1 || d->sw > 1);
}

/* d on the subsampled input: the output's height and width, stride 1 (ys, bias and type kept) */
static dt_conv_desc unit_stride(const dt_conv_desc *d)
{
    dt_conv_desc u = *d;
    u.h = d->oh;
    u.w = d->ow;
    u.sh = u.sw = 1;
    return u;
}

/* bytes of the subsampled input, rounded up to 64 */
static size_t sub_bytes(const dt_conv_desc *d)
{
    return dt_cpu_align64((size_t)dt_cpu_conv_rows(d) * d->c * dt_cpu_type_bytes(d->t));
}

/* xs[img, oy, ox, :] = x[img, oy*sh, ox*sw, :] */
static void subsample(const dt_conv_desc *d, const void *x, void *xs)
{
    const size_t px = (size_t)d->c * dt_cpu_type_bytes(d->t);
    const int64_t rows = dt_cpu_conv_rows(d), hw = (int64_t)d->oh * d->ow;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t img = r / hw, oy = r % hw / d->ow, ox = r % d->ow;
        memcpy((char *)xs + r * px, (const char *)x + ((img * d->h + oy * d->sh) * d->w + ox * d->sw) * px, px);
    }
}

/* the workspace of the ops on d */
static size_t need(const dt_conv_desc *d)
{
    size_t b;
    if (staged(d)) {
        dt_conv_desc p = dt_cpu_conv_packed(d);
        b = dt_cpu_align64(need(&p)) + (size_t)dt_cpu_conv_rows(d) * d->oc * dt_cpu_type_bytes(d->t);
    } else {
        size_t widen = dt_cpu_typed_conv_workspace(&dnnl32, d), own = native_workspace(d);
        b = own > widen ? own : widen; /* either may run: dt_cpu_set_half_kernels may change */
    }
    if (subsampled(d)) { /* makes the stride-1 shape's primitives too */
        dt_conv_desc u = unit_stride(d);
        size_t s = sub_bytes(d) + need(&u);
        b = s > b ? s : b;
    }
    return b;
}

/* the packed y (or dy) of a staged d in ws, after the packed op's workspace */
static void *stage(const dt_conv_desc *d, void *ws)
{
    dt_conv_desc p = dt_cpu_conv_packed(d);
    return (char *)ws + dt_cpu_align64(need(&p));
}

/* the staged copy of dy's slice (backward) */
static void *stage_in(const dt_conv_desc *d, const void *dy, void *ws)
{
    void *dyp = stage(d, ws);
    dt_cpu_conv_stage_in(d, d->t, dy, dyp);
    return dyp;
}

/* the ops: a staged slice on the packed op, bf16 on oneDNN's kernels where they run, other reduced
 * operands through typed.c */
size_t dt_cpu_dnnl_conv_workspace(const dt_conv_desc *d)
{
    if (staged(d))
        dt_debug("oneDNN conv%s n%d %dx%dx%d->%d k%dx%d s%d g%d into a channel slice (row stride %d): the slice "
                 "is staged densely",
                 d->t == DT_FLOAT32 ? "" : " bf16", d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups,
                 d->ys);
    return need(d);
}

void dt_cpu_dnnl_conv_fwd(const dt_conv_desc *d, const void *x, const void *w, const void *bias, void *y, void *ws)
{
    if (staged(d)) {
        dt_conv_desc p = dt_cpu_conv_packed(d);
        void *yp = stage(d, ws);
        dt_cpu_dnnl_conv_fwd(&p, x, w, bias, yp, ws);
        dt_cpu_conv_stage_out(d, d->t, yp, y);
        return;
    }
    conv_prims *e = native(d);
    if (e && (bias != NULL) == (d->bias != 0))
        fwd_exec(e, x, w, bias, y, ws); /* y rounded by oneDNN (nearest even) */
    else
        dt_cpu_typed_conv_fwd(&dnnl32, d, x, w, bias, y, ws);
}

void dt_cpu_dnnl_conv_bwd_data(const dt_conv_desc *d, const void *dy, const void *w, void *dx, int accumulate, void *ws)
{
    if (staged(d)) {
        dt_conv_desc p = dt_cpu_conv_packed(d);
        dt_cpu_dnnl_conv_bwd_data(&p, stage_in(d, dy, ws), w, dx, accumulate, ws);
        return;
    }
    conv_prims *e = native(d);
    if (!e) {
        dt_cpu_typed_conv_bwd_data(&dnnl32, d, dy, w, dx, accumulate, ws);
        return;
    }
    float *dx32 = room(e, ws);
    bwd_data_into(e, dy, w, dx32, 0, ws);
    dt_cpu_put_all(d->t, dx, (int64_t)d->n * d->h * d->w * d->c, dx32, accumulate);
}

void dt_cpu_dnnl_conv_bwd_filter(const dt_conv_desc *d, const void *x, const void *dy, void *dw, void *dbias,
                                 int accumulate, void *ws)
{
    if (subsampled(d)) {
        dt_conv_desc u = unit_stride(d);
        subsample(d, x, ws);
        dt_cpu_dnnl_conv_bwd_filter(&u, ws, dy, dw, dbias, accumulate, (char *)ws + sub_bytes(d));
        return;
    }
    if (staged(d)) {
        dt_conv_desc p = dt_cpu_conv_packed(d);
        dt_cpu_dnnl_conv_bwd_filter(&p, x, stage_in(d, dy, ws), dw, dbias, accumulate, ws);
        return;
    }
    conv_prims *e = native(d);
    if (!e || (dbias != NULL) != (d->bias != 0)) {
        dt_cpu_typed_conv_bwd_filter(&dnnl32, d, x, dy, dw, dbias, accumulate, ws);
        return;
    }
    float *ow = room(e, ws), *ob = dbias ? ow + w_elems(d) : NULL;
    bwd_filter_into(e, x, dy, ow, ob, ws);
    dt_cpu_put_all(d->t, dw, w_elems(d), ow, accumulate);
    if (dbias)
        dt_cpu_put_all(d->t, dbias, d->oc, ob, accumulate);
}
