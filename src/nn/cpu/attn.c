/* attn.c: the CPU's ViT ops (contracts in nn/backend.h): the class token and position embedding
 * (tokens_fwd, tokens_bwd) and self-attention's core (attn_scratch, attn_fwd, attn_bwd).
 *
 * tokens: element-wise over the token rows, in tiles of DT_CPU_TILE values; the parameter gradients
 * are sums over the images, each value summed in double in the order of b (columns in parallel,
 * never the images), so they have one set of bits whatever the threads.
 *
 * attention: the n*heads (sequence, head) pairs in parallel, one pair a thread's work from start to
 * end: its GEMMs (CBLAS, single-threaded inside the parallel region: OpenBLAS runs a call made from
 * an active OpenMP region on the calling thread, and with one thread it has one thread too) and its
 * softmax in the thread's own slot of the backend's scratch. Nothing is summed across pairs, so the
 * bits do not depend on which thread ran a pair. fp32 operands are read in place (the leading
 * dimension 3D steps over the other heads' columns); fp16/bf16 ones are widened into the scratch
 * first, in the same [n, s, 3D] layout, so the GEMMs get the same arguments as on fp32 storage and
 * the results are the fp32 op's on the same values; outputs are computed in fp32 slots and rounded
 * (or added) once when stored. */
#include "config.h"

#include <cblas.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nn/cpu/cpu.h"

enum { TILE = DT_CPU_TILE };

/* --- tokens --------------------------------------------------------------------------------------- */

void dt_cpu_tokens_fwd(int n, int np, int d, const void *x, dt_dtype xt, const void *cls, const void *pos, dt_dtype pt,
                       void *y, dt_dtype yt)
{
    const int64_t rows = (int64_t)n * (np + 1);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (np + 1), tok = r % (np + 1);
        for (int c0 = 0; c0 < d; c0 += TILE) {
            const int k = d - c0 < TILE ? d - c0 : TILE;
            float ta[TILE], tp[TILE], ty[TILE];
            /* token 0 is the class token; token 1+i patch i of the image */
            const float *a =
                tok == 0 ? dt_cpu_view(pt, cls, c0, k, ta) : dt_cpu_view(xt, x, (b * np + tok - 1) * d + c0, k, ta);
            const float *p = dt_cpu_view(pt, pos, tok * d + c0, k, tp);
            float *o = dt_cpu_out(yt, y, r * d + c0, k, ty, 0);
#pragma omp simd
            for (int j = 0; j < k; j++)
                o[j] = a[j] + p[j];
            dt_cpu_flush(yt, y, r * d + c0, k, o);
        }
    }
}

void dt_cpu_tokens_bwd(int n, int np, int d, const void *dy, dt_dtype yt, void *dx, dt_dtype xt, void *dcls, void *dpos,
                       dt_dtype pt, int accumulate_dx, int accumulate_params)
{
    if (dx) { /* patch i's gradient is its token's */
        const int64_t rows = (int64_t)n * np;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t b = r / np, i = r % np;
            for (int c0 = 0; c0 < d; c0 += TILE) {
                const int k = d - c0 < TILE ? d - c0 : TILE;
                float tg[TILE], to[TILE];
                const float *g = dt_cpu_view(yt, dy, (b * (np + 1) + 1 + i) * d + c0, k, tg);
                dt_cpu_put(xt, dx, r * d + c0, k, g, accumulate_dx, to);
            }
        }
    }
    if (!dcls && !dpos)
        return;
    /* Each token's sum over the images, in double in the order of b, then rounded to fp32 once: the
     * fp32 op's result, which a reduced pt then rounds again (as storing the fp32 result would; going
     * from double to pt directly could round differently), or which is added to the old value in fp32
     * (accumulate_params). dcls is token 0's sum, the same value as dpos[0]. Parallel over the token
     * rows and their column tiles, never over b. */
    const int chunks = (d + TILE - 1) / TILE;
    const int64_t work = (int64_t)(np + 1) * chunks;
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < work; w++) {
        const int64_t tok = w / chunks;
        const int c0 = (int)(w % chunks) * TILE, k = d - c0 < TILE ? d - c0 : TILE;
        double acc[TILE];
        float tg[TILE], sum[TILE], to[TILE];
        for (int j = 0; j < k; j++)
            acc[j] = 0;
        for (int b = 0; b < n; b++) {
            const float *g = dt_cpu_view(yt, dy, ((int64_t)b * (np + 1) + tok) * d + c0, k, tg);
            for (int j = 0; j < k; j++)
                acc[j] += g[j];
        }
        for (int j = 0; j < k; j++)
            sum[j] = (float)acc[j];
        if (dpos)
            dt_cpu_put(pt, dpos, tok * d + c0, k, sum, accumulate_params, to);
        if (dcls && tok == 0)
            dt_cpu_put(pt, dcls, c0, k, sum, accumulate_params, to);
    }
}

/* --- attention ------------------------------------------------------------------------------------ */

/* Per-thread slots of the scratch: how many, fixed the first time it is asked (when the first model
 * is planned): the larger of dt_cpu_threads() then and the processors. The ops' parallel regions run
 * on dt_cpu_threads() threads capped by this count, so a thread setting changed after planning never
 * needs more slots than the scratch holds (threads above the count would only oversubscribe). */
static int thread_slots(void)
{
    static int slots; /* 0: not fixed yet (planning runs on one thread) */
    if (!slots) {
        int t = dt_cpu_threads();
#ifdef _OPENMP
        const int procs = omp_get_num_procs();
        t = procs > t ? procs : t;
#endif
        slots = t > 0 ? t : 1;
    }
    return slots;
}

/* The scratch: qkv widened to fp32 ([n, s, 3D], when t is reduced), dy widened ([n, s, D], when yt is
 * reduced), then a slot per thread of s*s floats (backward's dP, then dS) and four of s*dh (Q/sqrt(dh);
 * forward's output, backward's dQ; dK; dV), each 64-byte aligned. */
typedef struct attn_room {
    float *qkv, *dy;
    char *slots;
    size_t slot_bytes;
} attn_room;

static size_t slot_ss(int s)
{
    return dt_cpu_align64((size_t)s * s * sizeof(float));
}

static size_t slot_sd(int s, int dh)
{
    return dt_cpu_align64((size_t)s * dh * sizeof(float));
}

/* the layout from base (NULL: offsets from 0); returns the bytes in all */
static size_t attn_layout(int n, int s, int heads, int dh, dt_dtype t, dt_dtype yt, char *base, attn_room *r)
{
    const size_t D = (size_t)heads * dh, rows = (size_t)n * s;
    const size_t qkv_bytes = t == DT_FLOAT32 ? 0 : dt_cpu_align64(rows * 3 * D * sizeof(float));
    const size_t dy_bytes = yt == DT_FLOAT32 ? 0 : dt_cpu_align64(rows * D * sizeof(float));
    r->slot_bytes = slot_ss(s) + 4 * slot_sd(s, dh);
    r->qkv = base && qkv_bytes ? (float *)(void *)base : NULL;
    r->dy = base && dy_bytes ? (float *)(void *)(base + qkv_bytes) : NULL;
    r->slots = base ? base + qkv_bytes + dy_bytes : NULL;
    return qkv_bytes + dy_bytes + (size_t)thread_slots() * r->slot_bytes;
}

size_t dt_cpu_attn_scratch(int n, int s, int heads, int dh, dt_dtype t, dt_dtype yt)
{
    attn_room r;
    return attn_layout(n, s, heads, dh, t, yt, NULL, &r);
}

/* a thread's slot: ss (s*s floats), then sd[0..3] (s*dh each) */
static void thread_slot(const attn_room *r, int s, int dh, int thread, float **ss, float *sd[4])
{
    char *p = r->slots + (size_t)thread * r->slot_bytes;
    *ss = (float *)(void *)p;
    p += slot_ss(s);
    for (int k = 0; k < 4; k++, p += slot_sd(s, dh))
        sd[k] = (float *)(void *)p;
}

/* the threads of the ops' parallel regions: every one dt_cpu_threads() asks for, up to the slots (not
 * fewer when there are fewer pairs: an active region keeps OpenBLAS on the calling thread) */
static int attn_threads(void)
{
    const int t = dt_cpu_threads(), slots = thread_slots();
    return t < 1 ? 1 : t < slots ? t : slots;
}

/* sqrt(dh) as PyTorch divides by it: math.sqrt's double, used as an fp32 scalar */
static float scale_of(int dh)
{
    return (float)sqrt((double)dh);
}

/* qs[i, :] = q[i, :] / sq for s rows of dh values (q: leading dimension ld): each value divided in fp32,
 * the order PyTorch scales the query in */
static void scaled_query(int s, int dh, const float *q, int64_t ld, float sq, float *qs)
{
    for (int i = 0; i < s; i++)
        for (int j = 0; j < dh; j++)
            qs[(int64_t)i * dh + j] = q[i * ld + j] / sq;
}

/* each row of the s x s scores in place: its softmax, the row's max subtracted first (so large scores
 * stay finite); the exponentials summed in double in order, each divided in double and rounded once.
 * A NaN anywhere in a row makes the whole row NaN (as the sum is NaN). */
DT_CLONES
static void softmax_rows(int s, float *a)
{
    for (int i = 0; i < s; i++) {
        float *row = a + (int64_t)i * s;
        float m = row[0];
        for (int j = 1; j < s; j++)
            m = row[j] > m ? row[j] : m;
        double sum = 0;
        for (int j = 0; j < s; j++) {
            row[j] = expf(row[j] - m);
            sum += row[j];
        }
        for (int j = 0; j < s; j++)
            row[j] = (float)(row[j] / sum);
    }
}

/* rows of cols fp32 values (leading dimension cols) from src into x (type t) at element off, leading
 * dimension ld: rounded, or with accumulate added (the rounded fp32 sum) */
static void put_rows(dt_dtype t, void *x, int64_t off, int64_t ld, int rows, int cols, const float *src, int accumulate)
{
    float tile[TILE];
    for (int i = 0; i < rows; i++)
        for (int c0 = 0; c0 < cols; c0 += TILE) {
            const int k = cols - c0 < TILE ? cols - c0 : TILE;
            dt_cpu_put(t, x, off + i * ld + c0, k, src + (int64_t)i * cols + c0, accumulate, tile);
        }
}

void dt_cpu_attn_fwd(int n, int s, int heads, int dh, const void *qkv, dt_dtype t, void *y, dt_dtype yt, float *p)
{
    attn_room r;
    attn_layout(n, s, heads, dh, t, yt, dt_cpu_scratch(), &r);
    const int64_t D = (int64_t)heads * dh, ld = 3 * D, pairs = (int64_t)n * heads;
    const float *in = qkv;
    if (t != DT_FLOAT32) {
        dt_cpu_widen(t, qkv, (int64_t)n * s * ld, r.qkv);
        in = r.qkv;
    }
    const float sq = scale_of(dh);
#pragma omp parallel num_threads(attn_threads())
    {
        float *ss, *sd[4];
        thread_slot(&r, s, dh, dt_omp_thread(), &ss, sd);
        float *qs = sd[0], *o = sd[1];
#pragma omp for schedule(static)
        for (int64_t pr = 0; pr < pairs; pr++) {
            const int64_t b = pr / heads, h = pr % heads;
            const float *q = in + b * s * ld + h * dh, *k = q + D, *v = q + 2 * D;
            float *pp = p + pr * s * s;
            scaled_query(s, dh, q, ld, sq, qs);
            /* S = Qs K^T into p, its softmax in place, then Y = P V */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, 1.0f, qs, dh, k, (int)ld, 0.0f, pp, s);
            softmax_rows(s, pp);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f, pp, s, v, (int)ld, 0.0f, o, dh);
            put_rows(yt, y, b * s * D + h * dh, D, s, dh, o, 0);
        }
    }
}

/* dS = P * (dP - the row's sum of P*dP) in place of dP; the sum in double in order, rounded once */
DT_CLONES
static void softmax_grad_rows(int s, const float *pp, float *dp)
{
    for (int i = 0; i < s; i++) {
        const float *pr = pp + (int64_t)i * s;
        float *g = dp + (int64_t)i * s;
        double sum = 0;
        for (int j = 0; j < s; j++)
            sum += (double)pr[j] * g[j];
        const float c = (float)sum;
        for (int j = 0; j < s; j++)
            g[j] = pr[j] * (g[j] - c);
    }
}

void dt_cpu_attn_bwd(int n, int s, int heads, int dh, const void *qkv, dt_dtype t, const float *p, const void *dy,
                     dt_dtype yt, void *dqkv, int accumulate)
{
    attn_room r;
    attn_layout(n, s, heads, dh, t, yt, dt_cpu_scratch(), &r);
    const int64_t D = (int64_t)heads * dh, ld = 3 * D, pairs = (int64_t)n * heads;
    const float *in = qkv, *g = dy;
    if (t != DT_FLOAT32) {
        dt_cpu_widen(t, qkv, (int64_t)n * s * ld, r.qkv);
        in = r.qkv;
    }
    if (yt != DT_FLOAT32) {
        dt_cpu_widen(yt, dy, (int64_t)n * s * D, r.dy);
        g = r.dy;
    }
    const float sq = scale_of(dh);
#pragma omp parallel num_threads(attn_threads())
    {
        float *ds, *sd[4];
        thread_slot(&r, s, dh, dt_omp_thread(), &ds, sd);
        float *qs = sd[0], *dq = sd[1], *dk = sd[2], *dv = sd[3];
#pragma omp for schedule(static)
        for (int64_t pr = 0; pr < pairs; pr++) {
            const int64_t b = pr / heads, h = pr % heads;
            const float *q = in + b * s * ld + h * dh, *k = q + D, *v = q + 2 * D;
            const float *gy = g + b * s * D + h * dh, *pp = p + pr * s * s;
            /* dV = P^T dY; dP = dY V^T, then dS in its place */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f, pp, s, gy, (int)D, 0.0f, dv, dh);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, 1.0f, gy, (int)D, v, (int)ld, 0.0f, ds, s);
            softmax_grad_rows(s, pp, ds);
            /* dQ = (dS K) / sqrt(dh), each value divided as forward divided Q; dK = dS^T (Q / sqrt(dh)) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f, ds, s, k, (int)ld, 0.0f, dq, dh);
            for (int64_t i = 0; i < (int64_t)s * dh; i++)
                dq[i] /= sq;
            scaled_query(s, dh, q, ld, sq, qs);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f, ds, s, qs, dh, 0.0f, dk, dh);
            const int64_t at = b * s * ld + h * dh;
            put_rows(t, dqkv, at, ld, s, dh, dq, accumulate);
            put_rows(t, dqkv, at + D, ld, s, dh, dk, accumulate);
            put_rows(t, dqkv, at + 2 * D, ld, s, dh, dv, accumulate);
        }
    }
}
