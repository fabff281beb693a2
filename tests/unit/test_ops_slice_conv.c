/* test_ops_slice_conv.c: convolutions whose output is a channel slice of a wider tensor
 * (dt_conv_desc.ys, nn/backend.h: y and dy rows of ys elements, the slice's oc of them the op's; a
 * concatenation laid out in place, as DenseNet's blocks are planned). For dt_backend_cpu (oneDNN's
 * convolutions where the build has them) and dt_backend_cpu_ref (im2col and CBLAS), operands fp32, fp16
 * and bf16 (d.t; the reduced ones widened into fp32, dt_cpu_set_half_kernels(0)), on 1x1 (stride 1
 * and 2), 3x3 pad 1, 7x7 stride 2 pad 3, grouped (groups 4) and depthwise shapes, small ones and ones
 * where oneDNN runs its blocked kernels, with and without bias, n = 1..3, the slice at channel 0 of a
 * row of oc + 3 and at channel 5 of a row of oc + 7:
 * - conv_fwd into the slice of a buffer holding NaN sentinels equals, bit for bit, conv_fwd into a
 *   packed y; every element outside the slice keeps its sentinel;
 * - conv_bwd_data from dy's slice (the other channels of its rows NaN, which must not leak) equals,
 *   bit for bit, conv_bwd_data from the packed dy, accumulate 0 and 1 (dx_accumulate set; with it
 *   clear, accumulate 0); dy's buffer is left as it was;
 * - conv_bwd_filter from dy's slice gives dw and dbias equal to the packed dy's, bit for bit,
 *   accumulate 0 and 1; dy's buffer is left as it was;
 * - ys == oc given explicitly gives the bits of ys == 0 in all three ops;
 * - every op keeps inside the workspace its conv_workspace asked for (guard bytes after it intact),
 *   and gets that workspace filled with NaN, not zeros.
 * Bit for bit holds because both backends stage the slice densely in the workspace (the packed op
 * into a packed y there, copied out; dy's slice copied in, then the packed op), so the slice's op makes
 * the very library calls of the packed op, with the same shapes, leading dimensions and threads. (A
 * GEMM or a oneDNN kernel given rows of ys instead of oc may block, split and so sum otherwise.) The
 * libraries may also pick their code by an operand's address modulo 64, so every buffer an op gets
 * here is 64-byte aligned (ops_util.h's zalloc, ws_new), as the model's arenas and the workspaces are.
 * And, on dt_backend_cpu with 2 threads, conv_bwd_filter of 1x1 stride 2 and 3 shapes (fp32, n 1..3,
 * some with fewer input channels than 8) gives the same bits when repeated and agrees with
 * dt_backend_cpu_ref's within rounding: oneDNN 2.6's jit_1x1:avx2 backward-weights kernel gave a
 * wrong dw, changing from call to call, for such shapes (conv_dnnl.c runs them at stride 1 on the
 * subsampled input instead); on AVX-512 CPUs, ONEDNN_MAX_CPU_ISA=AVX2 runs that kernel.
 * A diagnostic line says how many slice descriptors oneDNN's convolutions staged (from conv_dnnl.c's
 * debug lines). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "ops_util.h"
#include "tap.h"

#define GUARD 256 /* bytes checked past each workspace */

static const dt_backend *be;
static dt_dtype T;            /* the operands' type of this round */
static long long n_compared;  /* elements compared bit for bit */
static int staged;            /* dt_backend_cpu's slice descriptors staged (its log) */
static const char *what = ""; /* the current shape, for the mismatch report */

/* a quiet NaN of type t, with a payload: what no op writes */
static void nan_fill(dt_dtype t, void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (t == DT_FLOAT32) {
            const uint32_t v = 0x7fc0dead;
            memcpy((char *)p + i * 4, &v, 4);
        } else {
            const uint16_t v = t == DT_FLOAT16 ? 0x7e5a : 0x7fda;
            memcpy((char *)p + i * 2, &v, 2);
        }
}

/* n random values of type t in [-1, 1) (64-byte aligned, as every buffer of ops_util.h's) */
static void *rnd(dt_dtype t, int64_t n)
{
    float *f = uniform(n, -1, 1);
    void *s = stored(t, f, n);
    free(f);
    return s;
}

/* bytes a and b equal; the first difference is reported */
static int same(const char *op, const void *a, const void *b, int64_t n)
{
    const size_t es = tbytes(T);
    n_compared += n;
    if (memcmp(a, b, (size_t)n * es) == 0)
        return 1;
    int64_t i = 0;
    while (memcmp((const char *)a + i * es, (const char *)b + i * es, es) == 0)
        i++;
    tap_diag("MISMATCH %s %s %s, %s: element %lld of %lld differs", be->name, tname(T), what, op, (long long)i,
             (long long)n);
    return 0;
}

/* a workspace of bytes (64-byte aligned, as mem_alloc's) filled with NaN, and GUARD bytes of a pattern
 * after it */
static void *ws_new(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes + GUARD)) {
        perror("posix_memalign");
        exit(99);
    }
    char *w = p;
    memset(w, 0xff, bytes);
    memset(w + bytes, 0x5c, GUARD);
    return w;
}

static int guard_ok(const char *op, const void *ws, size_t bytes)
{
    const unsigned char *g = (const unsigned char *)ws + bytes;
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 0x5c) {
            tap_diag("MISMATCH %s %s %s, %s: the workspace of %zu bytes overrun", be->name, tname(T), what, op, bytes);
            return 0;
        }
    return 1;
}

/* the wide buffer: rows of ys elements, the slice's oc from channel off */
typedef struct wide {
    int64_t rows;
    int oc, ys, off;
    void *buf;
} wide;

static void *at(const wide *w)
{
    return (char *)w->buf + (size_t)w->off * tbytes(T);
}

/* all NaN, then the slice holding packed's rows (packed may be NULL: the slice NaN too) */
static wide wide_new(int64_t rows, int oc, int ys, int off, const void *packed)
{
    const size_t es = tbytes(T);
    wide w = {rows, oc, ys, off, zalloc((size_t)(rows * ys), es)};
    nan_fill(T, w.buf, rows * ys);
    for (int64_t r = 0; packed && r < rows; r++)
        memcpy((char *)w.buf + ((size_t)r * ys + off) * es, (const char *)packed + (size_t)r * oc * es,
               (size_t)oc * es);
    return w;
}

/* the slice equals packed bit for bit, and everything else is NaN as wide_new left it */
static int wide_ok(const char *op, const wide *w, const void *packed)
{
    const size_t es = tbytes(T);
    void *nan = zalloc((size_t)w->ys, es);
    nan_fill(T, nan, w->ys);
    int ok = 1;
    for (int64_t r = 0; r < w->rows && ok; r++) {
        const char *row = (const char *)w->buf + (size_t)r * w->ys * es;
        ok &= same(op, row + (size_t)w->off * es, (const char *)packed + (size_t)r * w->oc * es, w->oc);
        n_compared += w->ys - w->oc;
        if (memcmp(row, nan, (size_t)w->off * es) ||
            memcmp(row + (size_t)(w->off + w->oc) * es, nan, (size_t)(w->ys - w->off - w->oc) * es)) {
            tap_diag("MISMATCH %s %s %s, %s: row %lld written outside the slice", be->name, tname(T), what, op,
                     (long long)r);
            ok = 0;
        }
    }
    free(nan);
    return ok;
}

typedef struct shape {
    int h, w, c, oc, k, s, p, groups;
    const char *what;
} shape;

/* what one shape checked: each a conjunction over n, bias and the layouts */
typedef struct result {
    int fwd, data, filter, explicit_ys;
} result;

/* one shape, batch n, bias or not, the slice at off in rows of oc + extra */
static void conv_case(const shape *sh, int n, int bias, int off, int extra, result *res)
{
    dt_conv_desc dp, ds, de; /* packed (ys 0), the slice, ys == oc given */
    if (dt_conv_desc_set(&dp, n, sh->h, sh->w, sh->c, sh->oc, sh->k, sh->k, sh->s, sh->s, sh->p, sh->p, 1, 1,
                         sh->groups)) {
        tap_diag("conv desc failed: %s", sh->what);
        res->fwd = 0;
        return;
    }
    dp.bias = bias;
    dp.dx_accumulate = bias; /* with bias, bwd_data is asked to add too */
    dp.t = T;
    ds = dp;
    ds.ys = sh->oc + extra;
    de = dp;
    de.ys = sh->oc;
    const size_t bp = be->conv_workspace(&dp), bs = be->conv_workspace(&ds), bex = be->conv_workspace(&de);
    void *wsp = ws_new(bp), *wss = ws_new(bs), *wse = ws_new(bex);
    const size_t es = tbytes(T);
    const int64_t rows = (int64_t)n * dp.oh * dp.ow, ny = rows * sh->oc, nx = (int64_t)n * sh->h * sh->w * sh->c,
                  nw = (int64_t)sh->oc * sh->k * sh->k * (sh->c / sh->groups);
    void *x = rnd(T, nx), *w = rnd(T, nw), *b = rnd(T, sh->oc), *dy = rnd(T, ny);

    /* forward */
    void *yp = zalloc((size_t)ny, es), *ye = zalloc((size_t)ny, es);
    nan_fill(T, yp, ny);
    nan_fill(T, ye, ny);
    wide y = wide_new(rows, sh->oc, ds.ys, off, NULL);
    be->conv_fwd(&dp, x, w, bias ? b : NULL, yp, wsp);
    be->conv_fwd(&ds, x, w, bias ? b : NULL, at(&y), wss);
    be->conv_fwd(&de, x, w, bias ? b : NULL, ye, wse);
    res->fwd &= wide_ok("conv_fwd", &y, yp) && guard_ok("conv_fwd", wss, bs) && guard_ok("conv_fwd", wsp, bp);
    res->explicit_ys &= same("conv_fwd ys == oc", ye, yp, ny) && guard_ok("conv_fwd ys == oc", wse, bex);
    free(y.buf);

    /* backward data, from dy's slice among NaNs */
    wide g = wide_new(rows, sh->oc, ds.ys, off, dy);
    void *g0 = bytes_of(g.buf, (size_t)rows * ds.ys * es);
    for (int acc = 0; acc <= bias; acc++) {
        void *dx0 = rnd(T, nx), *dxp = bytes_of(dx0, (size_t)nx * es), *dxs = bytes_of(dx0, (size_t)nx * es),
             *dxe = bytes_of(dx0, (size_t)nx * es);
        be->conv_bwd_data(&dp, dy, w, dxp, acc, wsp);
        be->conv_bwd_data(&ds, at(&g), w, dxs, acc, wss);
        be->conv_bwd_data(&de, dy, w, dxe, acc, wse);
        const char *op = acc ? "conv_bwd_data accumulate" : "conv_bwd_data";
        res->data &= same(op, dxs, dxp, nx) && guard_ok(op, wss, bs) && guard_ok(op, wsp, bp);
        res->data &= same("dy's buffer after conv_bwd_data", g.buf, g0, rows * ds.ys);
        res->explicit_ys &= same(op, dxe, dxp, nx) && guard_ok(op, wse, bex);
        free(dx0), free(dxp), free(dxs), free(dxe);
    }

    /* backward filter */
    for (int acc = 0; acc <= 1; acc++) {
        void *dw0 = rnd(T, nw), *db0 = rnd(T, sh->oc);
        void *dwp = bytes_of(dw0, (size_t)nw * es), *dws = bytes_of(dw0, (size_t)nw * es),
             *dwe = bytes_of(dw0, (size_t)nw * es);
        void *dbp = bytes_of(db0, (size_t)sh->oc * es), *dbs = bytes_of(db0, (size_t)sh->oc * es),
             *dbe = bytes_of(db0, (size_t)sh->oc * es);
        be->conv_bwd_filter(&dp, x, dy, dwp, bias ? dbp : NULL, acc, wsp);
        be->conv_bwd_filter(&ds, x, at(&g), dws, bias ? dbs : NULL, acc, wss);
        be->conv_bwd_filter(&de, x, dy, dwe, bias ? dbe : NULL, acc, wse);
        const char *op = acc ? "conv_bwd_filter accumulate" : "conv_bwd_filter";
        res->filter &= same(op, dws, dwp, nw) && same(op, dbs, dbp, sh->oc) && guard_ok(op, wss, bs) &&
                       guard_ok(op, wsp, bp);
        res->filter &= same("dy's buffer after conv_bwd_filter", g.buf, g0, rows * ds.ys);
        res->explicit_ys &= same(op, dwe, dwp, nw) && same(op, dbe, dbp, sh->oc) && guard_ok(op, wse, bex);
        free(dw0), free(db0), free(dwp), free(dws), free(dwe), free(dbp), free(dbs), free(dbe);
    }
    free(g.buf), free(g0);
    free(x), free(w), free(b), free(dy), free(yp), free(ye);
    free(wsp), free(wss), free(wse);
}

static void check_shape(const shape *sh)
{
    static const struct {
        int off, extra;
    } layouts[] = {{0, 3}, {5, 7}};
    result r = {1, 1, 1, 1};
    what = sh->what;
    for (int n = 1; n <= 3; n++)
        for (int bias = 1; bias >= 0; bias--)
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
                conv_case(sh, n, bias, layouts[l].off, layouts[l].extra, &r);
    char desc[160];
    snprintf(desc, sizeof desc, "%s %s: conv %s %dx%dx%d->%d (n 1..3, +-bias, slice at 0 of oc+3 and 5 of oc+7)",
             be->name, tname(T), sh->what, sh->h, sh->w, sh->c, sh->oc);
    TAP_OK(r.fwd, "%s: conv_fwd into the slice = packed, bit for bit; NaN sentinels around it intact", desc);
    TAP_OK(r.data, "%s: conv_bwd_data from dy's slice among NaNs = packed dy's (accumulate 0/1), bit for bit", desc);
    TAP_OK(r.filter, "%s: conv_bwd_filter dw, dbias from dy's slice = packed dy's (accumulate 0/1), bit for bit",
           desc);
    TAP_OK(r.explicit_ys, "%s: ys == oc given explicitly = ys 0 in all three ops, bit for bit", desc);
}

/* dt_backend_cpu's conv_bwd_filter (fp32, with dbias, 2 threads) of a 1x1 convolution of stride s,
 * n = 1..3: REPEATS calls, each with its workspace NaN again, give the same bits, and dw and dbias are
 * dt_backend_cpu_ref's within rounding. oneDNN's fault showed in a quarter of the calls or so, as the
 * threads' timing fell (in some runs in one call of 50): hence the repeats. */
#define REPEATS 40
static void check_strided_1x1_filter(int hw, int c, int oc, int s)
{
    int repeat_ok = 1;
    double worst = 0;
    be = &dt_backend_cpu;
    T = DT_FLOAT32;
    what = "1x1 strided";
    for (int n = 1; n <= 3; n++) {
        dt_conv_desc d;
        if (dt_conv_desc_set(&d, n, hw, hw, c, oc, 1, 1, s, s, 0, 0, 1, 1, 1)) {
            repeat_ok = 0;
            continue;
        }
        d.bias = 1;
        const int64_t nx = (int64_t)n * hw * hw * c, ny = (int64_t)n * d.oh * d.ow * oc, nr = (int64_t)oc * c + oc;
        const size_t bc = dt_backend_cpu.conv_workspace(&d), br = dt_backend_cpu_ref.conv_workspace(&d);
        void *wsc = ws_new(bc), *wsr = ws_new(br);
        float *x = rnd(T, nx), *dy = rnd(T, ny); /* dw then dbias, in one buffer: */
        float *first = zalloc((size_t)nr, sizeof(float)), *again = zalloc((size_t)nr, sizeof(float)),
              *want = zalloc((size_t)nr, sizeof(float));
        dt_backend_cpu_ref.conv_bwd_filter(&d, x, dy, want, want + nr - oc, 0, wsr);
        double *ref = zalloc((size_t)nr, sizeof(double));
        for (int64_t i = 0; i < nr; i++)
            ref[i] = want[i];
        for (int r = 0; r < REPEATS; r++) {
            float *dw = r ? again : first;
            memset(wsc, 0xff, bc); /* NaN again: nothing of the last call's may be read */
            dt_backend_cpu.conv_bwd_filter(&d, x, dy, dw, dw + nr - oc, 0, wsc);
            if (r && memcmp(again, first, (size_t)nr * sizeof(float))) {
                if (repeat_ok)
                    tap_diag("1x1 s%d %dx%dx%d->%d, n %d: call %d of conv_bwd_filter differs from the first", s, hw, hw,
                             c, oc, n, r + 1);
                repeat_ok = 0;
            }
            const double e = max_rel(dw, NULL, ref, nr);
            worst = e > worst ? e : worst;
        }
        repeat_ok &= guard_ok("conv_bwd_filter", wsc, bc);
        free(wsc), free(wsr), free(x), free(dy), free(first), free(again), free(want), free(ref);
    }
    TAP_OK(repeat_ok && worst <= 1e-5,
           "cpu fp32: conv_bwd_filter 1x1 s%d %dx%dx%d->%d with dbias, 2 threads, n 1..3: %d calls give the "
           "same bits, dw and dbias within %.3g of dt_backend_cpu_ref's (relative; want <= 1e-5)",
           s, hw, hw, c, oc, REPEATS, worst);
}

/* occurrences of s in text */
static int count(const char *text, const char *s)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, s)) != NULL; p += strlen(s))
        n++;
    return n;
}

int main(void)
{
    dt_rng_seed(&rng, 2026, 41);
    dt_cpu_set_threads(2);
    dt_cpu_set_half_kernels(0); /* reduced convolutions widened into fp32 */
    static const shape shapes[] = {
        {5, 5, 6, 8, 1, 1, 0, 1, "1x1"},
        {6, 6, 4, 8, 1, 2, 0, 1, "1x1 s2"},
        {6, 6, 5, 4, 3, 1, 1, 1, "3x3 p1"},
        {11, 11, 3, 8, 7, 2, 3, 1, "7x7 s2 p3"},
        {7, 7, 8, 12, 3, 1, 1, 4, "3x3 p1 groups 4"},
        {6, 6, 8, 8, 3, 1, 1, 8, "3x3 p1 depthwise"},
        {8, 8, 64, 32, 1, 1, 0, 1, "1x1 64->32 (blocked kernels)"},
        {8, 8, 32, 32, 3, 1, 1, 1, "3x3 p1 32->32 (blocked kernels)"},
    };
    const dt_backend *backends[2] = {&dt_backend_cpu, &dt_backend_cpu_ref};
    const dt_dtype types[3] = {DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 3; t++) {
            be = backends[k];
            T = types[t];
            tap_diag("backend %s, operands %s", be->name, tname(T));
            const enum dt_log_level level = dt_log_get_level();
            dt_log_set_level(DT_LOG_DEBUG); /* oneDNN's choices, counted */
            tap_log_begin();
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                check_shape(&shapes[i]);
            char *log = tap_log_take();
            tap_log_end();
            dt_log_set_level(level);
            staged += count(log, "the slice is staged densely");
            free(log);
        }
    check_strided_1x1_filter(6, 4, 8, 2);
    check_strided_1x1_filter(8, 3, 16, 2);
    check_strided_1x1_filter(9, 16, 24, 2);
    check_strided_1x1_filter(7, 8, 16, 3);
    tap_diag("%lld elements compared bit for bit", n_compared);
    tap_diag("oneDNN (dt_backend_cpu): %d slice descriptors staged densely", staged);
    return tap_done();
}
