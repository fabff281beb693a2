/* conv.c: CPU convolution on NHWC tensors through im2col and CBLAS GEMM.
 *
 * Rows of the GEMMs are output pixels m = (image, oy, ox) over the whole batch, processed in chunks
 * so the column buffer stays near CHUNK_BYTES (cache-friendly, and bounded for large inputs).
 *   forward:       y[m, g*Og:(g+1)*Og]  = col_g[m, K] . W_g[Og, K]^T          K = kh*kw*Cg
 *   backward data: dcol_g[m, K]         = dy[m, g-slice] . W_g, then scatter-added into dx (col2im)
 *   backward filt: dW_g[Og, K]         += dy[m, g-slice]^T . col_g[m, K]
 * A 1x1, stride-1, unpadded convolution needs no columns: x itself is the [m, C] matrix. y and dy
 * may be a channel slice of a wider tensor (d->ys > oc): the slice is staged densely in the workspace,
 * after the packed op's own part (the forward runs into a packed y there and copies it out into the
 * slice; the backward passes copy dy's slice in first), so that every BLAS call is the packed op's,
 * with the same arguments, and the slice gets the packed op's bits. (Given a leading dimension ys
 * instead of oc, a GEMM may block, and so sum, otherwise; the staging copies are here, for
 * conv_dnnl.c too.) These are the fp32 convolutions (dt_cpu_conv32_ref); typed.c runs them on
 * fp16/bf16 operands. */
#include "config.h"

#include <cblas.h>
#include <string.h>

#include "nn/backend.h"
#include "nn/cpu/cpu.h"

#define CHUNK_BYTES ((size_t)4 << 20)

int dt_cpu_conv_pointwise(const dt_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
}

/* a channel slice's staging, both CPU backends' (cpu.h) */
void dt_cpu_conv_stage_in(const dt_conv_desc *d, dt_dtype t, const void *dy, void *packed)
{
    dt_cpu_chan_copy(dt_cpu_conv_rows(d), d->oc, dy, dt_cpu_conv_ys(d), 0, t, packed, d->oc, 0, t, 0);
}

void dt_cpu_conv_stage_out(const dt_conv_desc *d, dt_dtype t, const void *packed, void *y)
{
    dt_cpu_chan_copy(dt_cpu_conv_rows(d), d->oc, packed, d->oc, 0, t, y, dt_cpu_conv_ys(d), 0, t, 0);
}

static int64_t col_k(const dt_conv_desc *d)
{
    return (int64_t)d->kh * d->kw * (d->c / d->groups);
}

/* rows per chunk: the column buffer of a chunk is about CHUNK_BYTES, at least one row */
static int64_t chunk_rows(const dt_conv_desc *d)
{
    int64_t total = dt_cpu_conv_rows(d);
    int64_t r = (int64_t)(CHUNK_BYTES / ((size_t)col_k(d) * sizeof(float)));
    if (r < 1)
        r = 1;
    return r < total ? r : total;
}

/* the workspace of the packed op: a chunk's columns */
static size_t packed_workspace(const dt_conv_desc *d)
{
    if (dt_cpu_conv_pointwise(d))
        return 0;
    return (size_t)chunk_rows(d) * (size_t)col_k(d) * sizeof(float);
}

/* a channel slice (ys > oc) is staged (cpu.h): its packed copy (rows of oc) after the packed op's
 * workspace */
static size_t workspace32(const dt_conv_desc *d)
{
    size_t b = packed_workspace(d);
    if (dt_cpu_conv_strided(d))
        b = dt_cpu_align64(b) + (size_t)dt_cpu_conv_rows(d) * d->oc * sizeof(float);
    return b;
}

/* the room of a staged y (or dy) in ws */
static float *stage(const dt_conv_desc *d, void *ws)
{
    return (float *)(void *)((char *)ws + dt_cpu_align64(packed_workspace(d)));
}

/* col[r, (ky, kx, cc)] = x[img, iy, ix, g*Cg + cc] for output rows m0..m0+rows, zero outside */
static void im2col(const dt_conv_desc *d, const float *x, int g, int64_t m0, int64_t rows, float *col)
{
    const int cg = d->c / d->groups;
    const int64_t k = col_k(d), hw = (int64_t)d->oh * d->ow;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t m = m0 + r, img = m / hw, rem = m % hw;
        int oy = (int)(rem / d->ow), ox = (int)(rem % d->ow);
        float *dst = col + r * k;
        const float *xi = x + img * d->h * d->w * d->c + g * cg;
        for (int ky = 0; ky < d->kh; ky++) {
            int iy = oy * d->sh - d->ph + ky * d->dh;
            for (int kx = 0; kx < d->kw; kx++, dst += cg) {
                int ix = ox * d->sw - d->pw + kx * d->dw;
                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
                    memset(dst, 0, (size_t)cg * sizeof(float));
                else
                    memcpy(dst, xi + ((int64_t)iy * d->w + ix) * d->c, (size_t)cg * sizeof(float));
            }
        }
    }
}

/* dx[img, iy, ix, g*Cg + cc] += dcol[r, (ky, kx, cc)]; threads split the channels so no two write
 * the same element */
static void col2im(const dt_conv_desc *d, const float *dcol, int g, int64_t m0, int64_t rows, float *dx)
{
    const int cg = d->c / d->groups;
    const int64_t k = col_k(d), hw = (int64_t)d->oh * d->ow;
#pragma omp parallel
    {
        int nt = dt_omp_threads(), t = dt_omp_thread();
        int c0 = (int)((int64_t)cg * t / nt), c1 = (int)((int64_t)cg * (t + 1) / nt);
        for (int64_t r = 0; r < rows && c0 < c1; r++) {
            int64_t m = m0 + r, img = m / hw, rem = m % hw;
            int oy = (int)(rem / d->ow), ox = (int)(rem % d->ow);
            const float *src = dcol + r * k;
            float *xi = dx + img * d->h * d->w * d->c + g * cg;
            for (int ky = 0; ky < d->kh; ky++) {
                int iy = oy * d->sh - d->ph + ky * d->dh;
                for (int kx = 0; kx < d->kw; kx++, src += cg) {
                    int ix = ox * d->sw - d->pw + kx * d->dw;
                    if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
                        continue;
                    float *o = xi + ((int64_t)iy * d->w + ix) * d->c;
#pragma omp simd
                    for (int cc = c0; cc < c1; cc++)
                        o[cc] += src[cc];
                }
            }
        }
    }
}

static void fwd32(const dt_conv_desc *d, const float *x, const float *w, const float *bias, float *y, void *ws)
{
    if (dt_cpu_conv_strided(d)) { /* the packed op into the stage, copied out into the slice */
        const dt_conv_desc p = dt_cpu_conv_packed(d);
        float *yp = stage(d, ws);
        fwd32(&p, x, w, bias, yp, ws);
        dt_cpu_conv_stage_out(d, DT_FLOAT32, yp, y);
        return;
    }
    const int64_t total = dt_cpu_conv_rows(d), k = col_k(d), rows_max = chunk_rows(d);
    const int og = d->oc / d->groups, cg = d->c / d->groups, ys = d->oc; /* packed: a slice was staged above */
    const int pointwise = dt_cpu_conv_pointwise(d);
    for (int64_t m0 = 0; m0 < total; m0 += rows_max) {
        int64_t rows = total - m0 < rows_max ? total - m0 : rows_max;
        for (int g = 0; g < d->groups; g++) {
            const float *a = x + m0 * d->c + g * cg;
            int lda = d->c;
            if (!pointwise) {
                im2col(d, x, g, m0, rows, ws);
                a = ws;
                lda = (int)k;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, og, (int)k, 1.0f, a, lda,
                        w + (int64_t)g * og * k, (int)k, 0.0f, y + m0 * ys + g * og, ys);
        }
    }
    if (bias)
        dt_cpu_add_bias(total, d->oc, ys, bias, y);
}

static void bwd_data32(const dt_conv_desc *d, const float *dy, const float *w, float *dx, int accumulate, void *ws)
{
    if (dt_cpu_conv_strided(d)) {
        const dt_conv_desc p = dt_cpu_conv_packed(d);
        float *dyp = stage(d, ws);
        dt_cpu_conv_stage_in(d, DT_FLOAT32, dy, dyp);
        bwd_data32(&p, dyp, w, dx, accumulate, ws);
        return;
    }
    const int64_t total = dt_cpu_conv_rows(d), k = col_k(d), rows_max = chunk_rows(d);
    const int og = d->oc / d->groups, cg = d->c / d->groups, ys = d->oc; /* packed: a slice was staged above */
    if (dt_cpu_conv_pointwise(d)) { /* dx[m, g-slice] = dy[m, g-slice] . W_g */
        for (int g = 0; g < d->groups; g++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)total, cg, og, 1.0f, dy + g * og, ys,
                        w + (int64_t)g * og * k, (int)k, accumulate ? 1.0f : 0.0f, dx + g * cg, d->c);
        return;
    }
    if (!accumulate)
        dt_cpu_zero((int64_t)d->n * d->h * d->w * d->c, dx);
    for (int64_t m0 = 0; m0 < total; m0 += rows_max) {
        int64_t rows = total - m0 < rows_max ? total - m0 : rows_max;
        for (int g = 0; g < d->groups; g++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)k, og, 1.0f,
                        dy + m0 * ys + g * og, ys, w + (int64_t)g * og * k, (int)k, 0.0f, ws, (int)k);
            col2im(d, ws, g, m0, rows, dx);
        }
    }
}

static void bwd_filter32(const dt_conv_desc *d, const float *x, const float *dy, float *dw, float *dbias, int accumulate,
                         void *ws)
{
    if (dt_cpu_conv_strided(d)) {
        const dt_conv_desc p = dt_cpu_conv_packed(d);
        float *dyp = stage(d, ws);
        dt_cpu_conv_stage_in(d, DT_FLOAT32, dy, dyp);
        bwd_filter32(&p, x, dyp, dw, dbias, accumulate, ws);
        return;
    }
    const int64_t total = dt_cpu_conv_rows(d), k = col_k(d), rows_max = chunk_rows(d);
    const int og = d->oc / d->groups, cg = d->c / d->groups, ys = d->oc; /* packed: a slice was staged above */
    const int pointwise = dt_cpu_conv_pointwise(d);
    for (int64_t m0 = 0; m0 < total; m0 += rows_max) {
        int64_t rows = total - m0 < rows_max ? total - m0 : rows_max;
        float beta = (m0 == 0 && !accumulate) ? 0.0f : 1.0f;
        for (int g = 0; g < d->groups; g++) {
            const float *b = x + m0 * d->c + g * cg;
            int ldb = d->c;
            if (!pointwise) {
                im2col(d, x, g, m0, rows, ws);
                b = ws;
                ldb = (int)k;
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, og, (int)k, (int)rows, 1.0f, dy + m0 * ys + g * og,
                        ys, b, ldb, beta, dw + (int64_t)g * og * k, (int)k);
        }
    }
    if (dbias)
        dt_cpu_column_sums(total, d->oc, ys, dy, dbias, accumulate);
}

const dt_cpu_conv32 dt_cpu_conv32_ref = {workspace32, fwd32, bwd_data32, bwd_filter32};

/* the ops: on reduced operands through typed.c */
size_t dt_cpu_conv_workspace(const dt_conv_desc *d)
{
    return dt_cpu_typed_conv_workspace(&dt_cpu_conv32_ref, d);
}

void dt_cpu_conv_fwd(const dt_conv_desc *d, const void *x, const void *w, const void *bias, void *y, void *ws)
{
    dt_cpu_typed_conv_fwd(&dt_cpu_conv32_ref, d, x, w, bias, y, ws);
}

void dt_cpu_conv_bwd_data(const dt_conv_desc *d, const void *dy, const void *w, void *dx, int accumulate, void *ws)
{
    dt_cpu_typed_conv_bwd_data(&dt_cpu_conv32_ref, d, dy, w, dx, accumulate, ws);
}

void dt_cpu_conv_bwd_filter(const dt_conv_desc *d, const void *x, const void *dy, void *dw, void *dbias, int accumulate,
                            void *ws)
{
    dt_cpu_typed_conv_bwd_filter(&dt_cpu_conv32_ref, d, x, dy, dw, dbias, accumulate, ws);
}
