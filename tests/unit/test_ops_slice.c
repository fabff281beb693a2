/* test_ops_slice.c: batch norm on a channel prefix of a wider tensor (dt_bn_desc.xs) and pools writing a
 * channel slice of one (dt_pool_desc.ys), how DenseNet's concatenation runs without copies (nn/backend.h),
 * for dt_backend_cpu and dt_backend_cpu_ref, in fp32, fp16 and bf16 (x and dx, y and dy, and BN's
 * parameters and statistics each of its own type, as tests/unit/test_ops_typed.c combines them):
 * - bn_fwd_train (relu 0 and 1: y, saved, running mean and variance), bn_fwd_infer (relu 0 and 1) and
 *   bn_bwd (relu 0 and 1, accumulate_dx 0/1, accumulate_params 0/1: dx, dgamma, dbeta) with x and dx the
 *   first c channels of rows xs = c + 3 (or c + 5) wide, the other channels holding NaN, infinities and
 *   huge values that must not leak: every output the packed op's bytes on the same values (x packed,
 *   xs = 0), dx's channels past c and x's whole buffer left as they were; rows 50 and 301 (not a multiple
 *   of bn.c's 16-row blocks), c = 7 and 300 (over its 256-channel blocks);
 * - xs == c given explicitly gives what xs == 0 gives;
 * - the strided runs on 1, 2 and 3 threads (dt_cpu_set_threads) all give the packed op's bits (on 2);
 * - maxpool 3x3 s2 p1 and 2x2 s2, adaptive avgpool to h/2 x w/2 and to 1x1, 5 and 260 channels, with y
 *   and dy a slice at a nonzero channel offset of rows ys = offset + c + 1..3 wide: forward (y; argmax,
 *   packed, the packed op's bytes) and backward (accumulate 0/1: dx, from a dy whose channels outside the
 *   slice hold NaN and infinities) the packed op's bytes, on 1, 2 and 3 threads; the channels of y
 *   outside the slice and the whole of the wide dy left as they were; ys == c the same as ys == 0. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "ops_util.h"
#include "tap.h"

static const dt_backend *be;
#define F32 DT_FLOAT32

/* --- strided buffers ------------------------------------------------------------------------------- */

/* what the channels outside a slice hold: NaN, infinities, values too large for fp16, by position, so a
 * value read from there spoils the result it reaches */
static float junk(int64_t i)
{
    static const float v[] = {NAN, INFINITY, -INFINITY, 3e38f, -1e5f, 7.0f};
    return v[i % (int64_t)(sizeof v / sizeof v[0])];
}

/* rows x w elements of type t, junk, with channels off .. off + c - 1 of each row the rows x c values v */
static void *wide_of(dt_dtype t, const float *v, int64_t rows, int c, int w, int off)
{
    float *f = zalloc((size_t)(rows * w), sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < w; j++)
            f[r * w + j] = j >= off && j < off + c ? v[r * c + j - off] : junk(r * w + j);
    void *s = stored(t, f, rows * w);
    free(f);
    return s;
}

/* the storage of s (type t, n elements) in a fresh buffer */
static void *dup_of(dt_dtype t, const void *s, int64_t n)
{
    return bytes_of(s, (size_t)n * tbytes(t));
}

/* a against b, n bytes; the first difference named */
static int same_bytes(const char *what, const void *a, const void *b, size_t n)
{
    const unsigned char *p = a, *q = b;
    for (size_t i = 0; i < n; i++)
        if (p[i] != q[i]) {
            tap_diag("%s: %s: byte %zu of %zu differs", be->name, what, i, n);
            return 0;
        }
    return 1;
}

/* wide (rows x w elements of type t) against packed (rows x c) in channels off .. off + c - 1 and
 * against before (wide's bytes before the op) in the others */
static int same_slice(const char *what, dt_dtype t, const void *wide, const void *before, const void *packed,
                      int64_t rows, int c, int w, int off)
{
    const size_t e = tbytes(t);
    const char *a = wide, *b = before, *p = packed;
    for (int64_t r = 0; r < rows; r++) {
        const size_t row = (size_t)(r * w) * e;
        if (memcmp(a + row + (size_t)off * e, p + (size_t)(r * c) * e, (size_t)c * e)) {
            tap_diag("%s: %s: row %lld of the slice differs from the packed op's", be->name, what, (long long)r);
            return 0;
        }
        if (memcmp(a + row, b + row, (size_t)off * e) ||
            memcmp(a + row + (size_t)(off + c) * e, b + row + (size_t)(off + c) * e, (size_t)(w - off - c) * e)) {
            tap_diag("%s: %s: row %lld outside the slice was written", be->name, what, (long long)r);
            return 0;
        }
    }
    return 1;
}

/* --- batch norm ------------------------------------------------------------------------------------ */

typedef struct bn_io {
    void *y, *rm, *rv;
    float *saved;
} bn_io;

static bn_io bn_io_new(const dt_bn_desc *d, const typed *rm0, const typed *rv0)
{
    bn_io o = {zalloc((size_t)(d->rows * d->c), tbytes(d->yt)), dup_of(d->pt, rm0->s, d->c),
               dup_of(d->pt, rv0->s, d->c), zalloc(DT_BN_SAVED(d->c), sizeof(float))};
    return o;
}

static void bn_io_free(bn_io *o)
{
    free(o->y), free(o->rm), free(o->rv), free(o->saved);
}

static int bn_io_same(const char *op, const dt_bn_desc *d, const bn_io *a, const bn_io *b, int train)
{
    char what[96];
    snprintf(what, sizeof what, "%s y", op);
    int ok = same_bytes(what, a->y, b->y, (size_t)(d->rows * d->c) * tbytes(d->yt));
    if (train) {
        snprintf(what, sizeof what, "%s saved", op);
        ok &= same_bytes(what, a->saved, b->saved, DT_BN_SAVED(d->c) * sizeof(float));
        snprintf(what, sizeof what, "%s running_mean", op);
        ok &= same_bytes(what, a->rm, b->rm, (size_t)d->c * tbytes(d->pt));
        snprintf(what, sizeof what, "%s running_var", op);
        ok &= same_bytes(what, a->rv, b->rv, (size_t)d->c * tbytes(d->pt));
    }
    return ok;
}

/* what each check of a BN case found (the TAP lines gather them over the shapes and relu) */
typedef struct bn_found {
    int train, infer, bwd, xs_c;
} bn_found;

/* One shape: the packed op on 2 threads is the reference; the strided one (x at xs) on 1..3 threads and
 * the packed one with xs = c explicit must give its bytes. */
static void bn_case(int64_t rows, int c, int xs, dt_dtype xt, dt_dtype yt, dt_dtype pt, int relu, bn_found *f)
{
    dt_bn_desc dp = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = xt, .yt = yt, .pt = pt};
    dt_bn_desc ds = dp, dc = dp;
    ds.xs = xs;
    dc.xs = c;
    if (be->reserve_scratch(be->bn_scratch(&dp)) || be->reserve_scratch(be->bn_scratch(&ds))) {
        tap_diag("reserve_scratch failed");
        f->train = f->infer = f->bwd = f->xs_c = 0;
        return;
    }
    const int64_t n = rows * c, nw = rows * xs;
    /* x with an offset per channel (as activations have), of x's type */
    float *xv = uniform(n, -2, 2), *off = uniform(c, -3, 3);
    for (int64_t i = 0; i < n; i++)
        xv[i] += off[i % c];
    typed x = typed_new(xt, n, 0, 0, xv);
    void *xw = wide_of(xt, x.v, rows, c, xs, 0), *xw0 = dup_of(xt, xw, nw);
    typed gm = typed_new(pt, c, 0.5, 1.5, NULL), bt = typed_new(pt, c, -0.5, 0.5, NULL);
    typed rm0 = typed_new(pt, c, -0.2, 0.2, NULL), rv0 = typed_new(pt, c, 0.5, 1.5, NULL);
    char op[64];

    /* training forward */
    snprintf(op, sizeof op, "bn_fwd_train relu %d", relu);
    bn_io P = bn_io_new(&dp, &rm0, &rv0);
    be->bn_fwd_train(&dp, x.s, gm.s, bt.s, P.y, P.saved, P.rm, P.rv, relu);
    for (int t = 1; t <= 3; t++) {
        dt_cpu_set_threads(t);
        bn_io S = bn_io_new(&dp, &rm0, &rv0);
        be->bn_fwd_train(&ds, xw, gm.s, bt.s, S.y, S.saved, S.rm, S.rv, relu);
        f->train &= bn_io_same(op, &dp, &S, &P, 1);
        bn_io_free(&S);
    }
    dt_cpu_set_threads(2);
    {
        bn_io C = bn_io_new(&dp, &rm0, &rv0);
        be->bn_fwd_train(&dc, x.s, gm.s, bt.s, C.y, C.saved, C.rm, C.rv, relu);
        f->xs_c &= bn_io_same(op, &dp, &C, &P, 1);
        bn_io_free(&C);
    }

    /* inference forward */
    snprintf(op, sizeof op, "bn_fwd_infer relu %d", relu);
    bn_io I = bn_io_new(&dp, &rm0, &rv0);
    be->bn_fwd_infer(&dp, x.s, gm.s, bt.s, rm0.s, rv0.s, I.y, relu);
    for (int t = 1; t <= 3; t++) {
        dt_cpu_set_threads(t);
        bn_io S = bn_io_new(&dp, &rm0, &rv0);
        be->bn_fwd_infer(&ds, xw, gm.s, bt.s, rm0.s, rv0.s, S.y, relu);
        f->infer &= bn_io_same(op, &dp, &S, &I, 0);
        bn_io_free(&S);
    }
    dt_cpu_set_threads(2);
    {
        bn_io C = bn_io_new(&dp, &rm0, &rv0);
        be->bn_fwd_infer(&dc, x.s, gm.s, bt.s, rm0.s, rv0.s, C.y, relu);
        f->xs_c &= bn_io_same(op, &dp, &C, &I, 0);
        bn_io_free(&C);
    }

    /* backward, from the packed forward's saved state; dx starts from the same values in both layouts */
    typed dy = typed_new(yt, n, -1, 1, NULL);
    for (int acc = 0; acc < 4; acc++) {
        const int acc_dx = acc & 1, acc_p = acc >> 1;
        snprintf(op, sizeof op, "bn_bwd relu %d accumulate_dx %d accumulate_params %d", relu, acc_dx, acc_p);
        typed dx0 = typed_new(xt, n, -1, 1, NULL), dg0 = typed_new(pt, c, -1, 1, NULL);
        typed db0 = typed_new(pt, c, -1, 1, NULL);
        void *dxP = dup_of(xt, dx0.s, n), *dgP = dup_of(pt, dg0.s, c), *dbP = dup_of(pt, db0.s, c);
        be->bn_bwd(&dp, x.s, dy.s, relu, gm.s, P.saved, dxP, dgP, dbP, acc_dx, acc_p);
        void *dxw0 = wide_of(xt, dx0.v, rows, c, xs, 0);
        for (int t = 1; t <= 4; t++) {
            /* t = 4: the packed op with xs = c explicit, on 2 threads */
            dt_cpu_set_threads(t < 4 ? t : 2);
            void *dxS = t < 4 ? dup_of(xt, dxw0, nw) : dup_of(xt, dx0.s, n);
            void *dgS = dup_of(pt, dg0.s, c), *dbS = dup_of(pt, db0.s, c);
            be->bn_bwd(t < 4 ? &ds : &dc, t < 4 ? xw : x.s, dy.s, relu, gm.s, P.saved, dxS, dgS, dbS, acc_dx,
                       acc_p);
            int ok = t < 4 ? same_slice(op, xt, dxS, dxw0, dxP, rows, c, xs, 0)
                           : same_bytes(op, dxS, dxP, (size_t)n * tbytes(xt));
            ok &= same_bytes(op, dgS, dgP, (size_t)c * tbytes(pt)) & same_bytes(op, dbS, dbP, (size_t)c * tbytes(pt));
            if (t < 4)
                f->bwd &= ok;
            else
                f->xs_c &= ok;
            free(dxS), free(dgS), free(dbS);
        }
        dt_cpu_set_threads(2);
        free(dxP), free(dgP), free(dbP), free(dxw0);
        typed_free(&dx0), typed_free(&dg0), typed_free(&db0);
    }
    /* x is read only, its channels past c not at all (a leak shows as NaN above) */
    f->train &= same_bytes("x (the wide buffer)", xw, xw0, (size_t)nw * tbytes(xt));
    typed_free(&dy);
    bn_io_free(&P), bn_io_free(&I);
    typed_free(&x), typed_free(&gm), typed_free(&bt), typed_free(&rm0), typed_free(&rv0);
    free(xv), free(off), free(xw), free(xw0);
}

static void check_bn(dt_dtype xt, dt_dtype yt, dt_dtype pt, const char *what)
{
    const struct {
        int64_t rows;
        int c, xs;
    } shapes[] = {{50, 7, 10}, {301, 7, 12}, {50, 300, 303}, {301, 300, 305}};
    bn_found f = {1, 1, 1, 1};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int relu = 0; relu <= 1; relu++)
            bn_case(shapes[s].rows, shapes[s].c, shapes[s].xs, xt, yt, pt, relu, &f);
    const char *names = "rows 50 and 301, c 7 (xs 10, 12) and 300 (xs 303, 305)";
    TAP_OK(f.train,
           "%s bn %s (x %s, y %s, params %s), %s: fwd train relu 0/1 on x at xs (junk past c) gives the packed op's "
           "y, saved, running stats on 1..3 threads; x untouched",
           be->name, what, tname(xt), tname(yt), tname(pt), names);
    TAP_OK(f.infer, "%s bn %s (x %s, y %s, params %s): fwd infer relu 0/1 at xs, the packed op's y on 1..3 threads",
           be->name, what, tname(xt), tname(yt), tname(pt));
    TAP_OK(f.bwd,
           "%s bn %s (x %s, y %s, params %s): bwd relu 0/1, accumulate_dx 0/1, accumulate_params 0/1 at xs: the "
           "packed op's dx (in the prefix), dgamma, dbeta on 1..3 threads; dx past c untouched",
           be->name, what, tname(xt), tname(yt), tname(pt));
    TAP_OK(f.xs_c, "%s bn %s (x %s, y %s, params %s): xs == c explicit gives what xs == 0 gives (train, infer, bwd)",
           be->name, what, tname(xt), tname(yt), tname(pt));
}

/* --- pooling --------------------------------------------------------------------------------------- */

/* One pool: max (kernel a, stride b, padding p) or adaptive average (to a x b) over [n, h, w, c], the
 * output a slice at channel off of rows ys = off + c + extra wide. The packed op on 2 threads is the
 * reference; the slice's on 1..3 threads and the packed one with ys = c explicit give its bytes. */
static int pool_case(int max, int n, int h, int w, int c, int a, int b, int p, int off, int extra, dt_dtype xt,
                     dt_dtype yt)
{
    dt_pool_desc dp;
    if (max ? dt_pool_desc_set_max(&dp, n, h, w, c, a, b, p) : dt_pool_desc_set_adaptive(&dp, n, h, w, c, a, b)) {
        tap_diag("pool desc failed");
        return 0;
    }
    dp.xt = xt;
    dp.yt = yt;
    const int ys = off + c + extra;
    dt_pool_desc ds = dp, dc = dp;
    ds.ys = ys;
    dc.ys = c;
    const int64_t nx = (int64_t)n * h * w * c, npos = (int64_t)n * dp.oh * dp.ow, ny = npos * c, nw = npos * ys;
    const size_t ey = tbytes(yt);
    const char *fwd = max ? "maxpool_fwd" : "avgpool_fwd", *bwd = max ? "maxpool_bwd" : "avgpool_bwd";
    typed x = typed_new(xt, nx, -1, 1, NULL), y0 = typed_new(yt, ny, -1, 1, NULL);
    uint8_t *amP = zalloc((size_t)ny, 1);
    void *yP = dup_of(yt, y0.s, ny), *yw0 = wide_of(yt, y0.v, npos, c, ys, off);
    int ok = 1;
    if (max)
        be->maxpool_fwd(&dp, x.s, yP, amP);
    else
        be->avgpool_fwd(&dp, x.s, yP);
    for (int t = 1; t <= 4; t++) { /* t = 4: ys = c explicit, packed, on 2 threads */
        dt_cpu_set_threads(t < 4 ? t : 2);
        void *yS = t < 4 ? dup_of(yt, yw0, nw) : dup_of(yt, y0.s, ny);
        uint8_t *amS = zalloc((size_t)ny, 1);
        memset(amS, 0xa5, (size_t)ny);
        void *at = t < 4 ? (char *)yS + (size_t)off * ey : yS;
        if (max)
            be->maxpool_fwd(t < 4 ? &ds : &dc, x.s, at, amS);
        else
            be->avgpool_fwd(t < 4 ? &ds : &dc, x.s, at);
        ok &= t < 4 ? same_slice(fwd, yt, yS, yw0, yP, npos, c, ys, off) : same_bytes(fwd, yS, yP, (size_t)ny * ey);
        if (max)
            ok &= same_bytes("maxpool_fwd argmax", amS, amP, (size_t)ny);
        free(yS), free(amS);
    }
    dt_cpu_set_threads(2);
    /* backward: dy's slice the packed dy's values, its other channels junk */
    typed dy = typed_new(yt, ny, -1, 1, NULL);
    void *dyw = wide_of(yt, dy.v, npos, c, ys, off), *dyw0 = dup_of(yt, dyw, nw);
    for (int acc = 0; acc <= 1; acc++) {
        typed dx0 = typed_new(xt, nx, -1, 1, NULL);
        void *dxP = dup_of(xt, dx0.s, nx);
        if (max)
            be->maxpool_bwd(&dp, dy.s, amP, dxP, acc);
        else
            be->avgpool_bwd(&dp, dy.s, dxP, acc);
        for (int t = 1; t <= 4; t++) {
            dt_cpu_set_threads(t < 4 ? t : 2);
            void *dxS = dup_of(xt, dx0.s, nx);
            const void *g = t < 4 ? (const char *)dyw + (size_t)off * ey : dy.s;
            if (max)
                be->maxpool_bwd(t < 4 ? &ds : &dc, g, amP, dxS, acc);
            else
                be->avgpool_bwd(t < 4 ? &ds : &dc, g, dxS, acc);
            ok &= same_bytes(bwd, dxS, dxP, (size_t)nx * tbytes(xt));
            free(dxS);
        }
        dt_cpu_set_threads(2);
        free(dxP);
        typed_free(&dx0);
    }
    ok &= same_bytes("dy (the wide buffer)", dyw, dyw0, (size_t)nw * ey);
    typed_free(&x), typed_free(&y0), typed_free(&dy);
    free(amP), free(yP), free(yw0), free(dyw), free(dyw0);
    return ok;
}

static void check_pool(dt_dtype xt, dt_dtype yt)
{
    /* per pool, two: {h, w, a, b, p} as pool_case takes them */
    static const struct {
        int max, shape[2][5];
        const char *what;
    } pools[2] = {{1, {{9, 8, 3, 2, 1}, {8, 7, 2, 2, 0}}, "maxpool 3x3 s2 p1 on 2x9x8 and 2x2 s2 on 2x8x7"},
                  {0, {{9, 8, 4, 4, 0}, {9, 8, 1, 1, 0}}, "adaptive avgpool 2x9x8 -> 4x4 and -> 1x1"}};
    for (int m = 0; m < 2; m++) {
        int ok = 1;
        for (int k = 0; k < 2; k++) {
            const int c = k ? 260 : 5, off = k ? 8 : 2, extra = k ? 1 : 3;
            for (int s = 0; s < 2; s++) {
                const int *v = pools[m].shape[s];
                ok &= pool_case(pools[m].max, 2, v[0], v[1], c, v[2], v[3], v[4], off, extra, xt, yt);
            }
        }
        TAP_OK(ok,
               "%s %s (x %s, y %s; 5 channels at 2 of 10, 260 at 8 of 269): fwd y slice%s, bwd (accumulate 0/1) the "
               "packed op's bytes on 1..3 threads, outside untouched; ys == c as ys == 0",
               be->name, pools[m].what, tname(xt), tname(yt), pools[m].max ? " and argmax" : "");
    }
}

int main(void)
{
    dt_rng_seed(&rng, 2026, 31);
    dt_cpu_set_threads(2);
    const dt_backend *backends[2] = {&dt_backend_cpu, &dt_backend_cpu_ref};
    const dt_dtype reduced[2] = {DT_FLOAT16, DT_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        be = backends[k];
        tap_diag("backend %s", be->name);
        check_bn(F32, F32, F32, "fp32");
        check_pool(F32, F32);
        for (int r = 0; r < 2; r++) {
            const dt_dtype R = reduced[r];
            check_bn(R, R, F32, "O2");
            check_bn(R, F32, F32, "O1");
            check_bn(R, R, R, "O3");
            check_pool(R, R);
            check_pool(R, F32);
        }
    }
    return tap_done();
}
