/* test_ops_ln.c: the layer norm ops (ln_fwd, ln_bwd) and chan_copy of the CPU backends, against their
 * contracts in nn/backend.h (nn/cpu/ln.c, eltwise.c's dt_cpu_chan_copy), for dt_backend_cpu and
 * dt_backend_cpu_ref:
 * - ln_fwd against a double-precision reference written here (mean, biased variance, y) on rows x c
 *   from 1 x 1 to 3 x 1500 (c = 1, 3, 768, and past a tile of DT_CPU_TILE values; rows with offsets
 *   and scales of their own), the saved means and rstds within one float rounding of the reference's;
 * - ln_bwd's dx, dgamma and dbeta against the reference's gradient, which central differences of the
 *   reference's forward check in turn (small shapes); each accumulate flag alone and both (the rounded
 *   fp32 sum of the old value and what overwriting gives, bit for bit); dx NULL, dgamma or dbeta NULL;
 * - the same bits on 1, 2 and 3 threads (dt_cpu_set_threads);
 * - fp16 and bf16 operands (x and dx, y and dy, the parameters and their gradients, each its own type)
 *   give, bit for bit, what the fp32 op gives on the same values followed by rounding each output to
 *   its type (nn/backend.h's "Types"; tests/unit/test_ops_typed.c does the same for the other ops);
 * - chan_copy: [rows, c1] and [rows, c2] concatenated into a wider buffer at an offset (nothing else
 *   written), and a gradient's two slices back, one added into, one overwriting; every pair of the
 *   three types, bit for bit. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "ops_util.h"
#include "tap.h"
#include "util/half.h"

static const dt_backend *be;
#define F32 DT_FLOAT32

/* rows x c values in [-1, 1), each row shifted and scaled by its own amounts (as activations are):
 * the variance must not come from the mean's cancellation */
static float *rows_input(int64_t rows, int c)
{
    float *x = uniform(rows * c, -1, 1);
    for (int64_t r = 0; r < rows; r++) {
        const float off = (float)(6 * dt_rng_uniform(&rng) - 3), sc = (float)(0.1 + 4 * dt_rng_uniform(&rng));
        for (int j = 0; j < c; j++)
            x[r * c + j] = off + sc * x[r * c + j];
    }
    return x;
}

/* --- the reference, in double --------------------------------------------------------------------- */

static void ref_stats(int c, double eps, const double *x, double *mean, double *rstd)
{
    double s = 0, q = 0;
    for (int j = 0; j < c; j++)
        s += x[j];
    *mean = s / c;
    for (int j = 0; j < c; j++)
        q += (x[j] - *mean) * (x[j] - *mean);
    *rstd = 1 / sqrt(q / c + eps);
}

/* y = (x - mean) * rstd * gamma + beta per row; mean and rstd per row unless NULL */
static void ref_fwd(int64_t rows, int c, double eps, const double *x, const double *gm, const double *bt, double *y,
                    double *mean, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        double m, rs;
        ref_stats(c, eps, x + r * c, &m, &rs);
        for (int j = 0; j < c; j++)
            y[r * c + j] = (x[r * c + j] - m) * rs * gm[j] + bt[j];
        if (mean) {
            mean[r] = m;
            rstd[r] = rs;
        }
    }
}

/* the gradient of sum(dy * y): dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma;
 * dgamma = sum over rows of dy * xhat, dbeta = sum of dy */
static void ref_bwd(int64_t rows, int c, double eps, const double *x, const double *gm, const double *dy, double *dx,
                    double *dg, double *db)
{
    for (int j = 0; j < c; j++)
        dg[j] = db[j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * c, *d = dy + r * c;
        double m, rs, a = 0, b = 0;
        ref_stats(c, eps, xr, &m, &rs);
        for (int j = 0; j < c; j++) {
            a += d[j] * gm[j];
            b += d[j] * gm[j] * (xr[j] - m) * rs;
        }
        a /= c;
        b /= c;
        for (int j = 0; j < c; j++) {
            const double xh = (xr[j] - m) * rs;
            dx[r * c + j] = rs * (d[j] * gm[j] - a - xh * b);
            dg[j] += d[j] * xh;
            db[j] += d[j];
        }
    }
}

/* --- ln_fwd ----------------------------------------------------------------------------------------- */

static void check_fwd(int64_t rows, int c, float eps)
{
    const int64_t n = rows * c;
    float *x = rows_input(rows, c), *gm = uniform(c, 0.5, 1.5), *bt = uniform(c, -0.5, 0.5);
    float *y = zalloc((size_t)n, sizeof(float)), *saved = zalloc(2 * (size_t)rows, sizeof(float));
    double *xd = to_double(x, n), *gd = to_double(gm, c), *bd = to_double(bt, c);
    double *yd = zalloc((size_t)n, sizeof(double)), *md = zalloc((size_t)rows, sizeof(double)),
           *rd = zalloc((size_t)rows, sizeof(double));
    be->ln_fwd(rows, c, eps, x, F32, gm, bt, F32, y, F32, saved);
    ref_fwd(rows, c, eps, xd, gd, bd, yd, md, rd);
    /* the saved statistics: the reference's rounded once (a float's rounding error is at most 2^-24 of
     * it; the CPU's double sums add nothing visible) */
    double wm = 0, wr = 0;
    for (int64_t r = 0; r < rows; r++) {
        wm = fmax(wm, fabs(saved[r] - md[r]) / (0x1p-24 * fabs(md[r]) + 1e-30));
        wr = fmax(wr, fabs(saved[rows + r] - rd[r]) / (0x1p-24 * rd[r]));
    }
    const double ey = max_rel(y, NULL, yd, n);
    int beta_only = 1; /* c = 1: x - mean is 0, so y is beta exactly */
    for (int64_t i = 0; c == 1 && i < n; i++)
        beta_only &= y[i] == bt[0];
    TAP_OK(ey < 1e-6 && wm <= 1 && wr <= 1 && beta_only,
           "ln_fwd %lldx%d eps %g: y %.1e from the reference; saved means and rstds within %.2f and %.2f of one float "
           "rounding%s",
           (long long)rows, c, (double)eps, ey, wm, wr, c == 1 ? "; y = beta" : "");
    free(x), free(gm), free(bt), free(y), free(saved), free(xd), free(gd), free(bd), free(yd), free(md), free(rd);
}

/* --- ln_bwd ----------------------------------------------------------------------------------------- */

/* sum(G * y) of the reference: what central differences differentiate */
typedef struct fd_ctx {
    int64_t rows;
    int c;
    double eps, *x, *gm, *bt, *G, *y;
} fd_ctx;

static double fd_obj(const fd_ctx *k)
{
    double s = 0;
    ref_fwd(k->rows, k->c, k->eps, k->x, k->gm, k->bt, k->y, NULL, NULL);
    for (int64_t i = 0; i < k->rows * k->c; i++)
        s += k->G[i] * k->y[i];
    return s;
}

/* out[i] = d fd_obj / d v[i] for each of v's n values (v one of k's arrays) */
static void fd_grads(const fd_ctx *k, double *v, int64_t n, double *out)
{
    const double h = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        const double keep = v[i];
        v[i] = keep + h;
        out[i] = fd_obj(k);
        v[i] = keep - h;
        out[i] = (out[i] - fd_obj(k)) / (2 * h);
        v[i] = keep;
    }
}

static void check_bwd(int64_t rows, int c, float eps, int fd)
{
    const int64_t n = rows * c;
    float *x = rows_input(rows, c), *gm = uniform(c, 0.5, 1.5), *bt = uniform(c, -0.5, 0.5), *dy = uniform(n, -1, 1);
    float *y = zalloc((size_t)n, sizeof(float)), *saved = zalloc(2 * (size_t)rows, sizeof(float));
    float *dx = uniform(n, -1, 1), *dg = uniform(c, -1, 1), *db = uniform(c, -1, 1); /* overwritten */
    double *xd = to_double(x, n), *gd = to_double(gm, c), *bd = to_double(bt, c), *dyd = to_double(dy, n);
    double *rx = zalloc((size_t)n, sizeof(double)), *rg = zalloc((size_t)c, sizeof(double)),
           *rb = zalloc((size_t)c, sizeof(double));
    be->ln_fwd(rows, c, eps, x, F32, gm, bt, F32, y, F32, saved);
    be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, dx, dg, db, 0, 0);
    ref_bwd(rows, c, eps, xd, gd, dyd, rx, rg, rb);
    const double ex = max_rel(dx, NULL, rx, n), eg = max_rel(dg, NULL, rg, c), eb = max_rel(db, NULL, rb, c);
    int zero_dx = 1; /* c = 1: the gradient of beta alone, dx = 0 exactly */
    for (int64_t i = 0; c == 1 && i < n; i++)
        zero_dx &= dx[i] == 0;
    TAP_OK(ex < 2e-5 && eg < 1e-5 && eb < 1e-6 && zero_dx,
           "ln_bwd %lldx%d: dx %.1e, dgamma %.1e, dbeta %.1e from the reference's gradient%s", (long long)rows, c,
           ex, eg, eb, c == 1 ? "; dx = 0" : "");
    if (fd) { /* the reference's gradient against central differences of the reference */
        fd_ctx k = {rows, c, eps, xd, gd, bd, dyd, zalloc((size_t)n, sizeof(double))};
        double *fx = zalloc((size_t)n, sizeof(double)), *fg = zalloc((size_t)c, sizeof(double)),
               *fb = zalloc((size_t)c, sizeof(double));
        fd_grads(&k, xd, n, fx);
        fd_grads(&k, gd, c, fg);
        fd_grads(&k, bd, c, fb);
        /* where the gradient is 0 (c = 1: dx) the differences are noise of 1e-10 */
        const double fdx = max_rel(NULL, rx, fx, n), fdg = max_rel(NULL, rg, fg, c), fdb = max_rel(NULL, rb, fb, c);
        const double ox = max_rel(dx, NULL, fx, n), og = max_rel(dg, NULL, fg, c);
        TAP_OK((fdx < 1e-6 || c == 1) && fdg < 1e-6 && fdb < 1e-6 && (ox < 2e-5 || c == 1) && og < 2e-5,
               "  central differences: reference dx %.1e, dgamma %.1e, dbeta %.1e; the op's dx %.1e, dgamma %.1e", fdx,
               fdg, fdb, ox, og);
        free(k.y), free(fx), free(fg), free(fb);
    }

    /* the flags: each output added into (the rounded fp32 sum of the old value and what overwriting
     * gave, bit for bit) or overwritten, as its flag says */
    int acc_ok = 1;
    for (int flags = 1; flags <= 3; flags++) {
        const int ax = flags & 1, ap = flags >> 1;
        float *px = uniform(n, -1, 1), *pg = uniform(c, -1, 1), *pb = uniform(c, -1, 1);
        float *ox = zalloc((size_t)n, sizeof(float)), *og = zalloc((size_t)c, sizeof(float)),
              *ob = zalloc((size_t)c, sizeof(float));
        memcpy(ox, px, (size_t)n * sizeof(float));
        memcpy(og, pg, (size_t)c * sizeof(float));
        memcpy(ob, pb, (size_t)c * sizeof(float));
        be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, ox, og, ob, ax, ap);
        acc_ok &= same_f32(ox, dx, ax ? px : NULL, n) && same_f32(og, dg, ap ? pg : NULL, c) &&
                  same_f32(ob, db, ap ? pb : NULL, c);
        free(px), free(pg), free(pb), free(ox), free(og), free(ob);
    }
    TAP_OK(acc_ok, "  accumulate_dx, accumulate_params, both: old + the overwriting result (rounded fp32 sums), the "
                   "other output overwritten");

    /* what is not wanted is NULL; the rest as before */
    float *ox = zalloc((size_t)n, sizeof(float)), *og = zalloc((size_t)c, sizeof(float)),
          *ob = zalloc((size_t)c, sizeof(float));
    be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, NULL, og, ob, 0, 0);
    int null_ok = same_f32(og, dg, NULL, c) && same_f32(ob, db, NULL, c);
    memset(ob, 0, (size_t)c * sizeof(float));
    be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, ox, NULL, ob, 0, 0);
    null_ok &= same_f32(ox, dx, NULL, n) && same_f32(ob, db, NULL, c);
    memset(og, 0, (size_t)c * sizeof(float));
    be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, NULL, og, NULL, 0, 0);
    null_ok &= same_f32(og, dg, NULL, c);
    memset(ox, 0, (size_t)n * sizeof(float));
    be->ln_bwd(rows, c, x, F32, gm, F32, saved, dy, F32, ox, NULL, NULL, 0, 0);
    null_ok &= same_f32(ox, dx, NULL, n);
    TAP_OK(null_ok, "  dx NULL, dgamma NULL, dbeta NULL, both NULL: the other outputs as before");
    free(ox), free(og), free(ob);
    free(x), free(gm), free(bt), free(dy), free(y), free(saved), free(dx), free(dg), free(db);
    free(xd), free(gd), free(bd), free(dyd), free(rx), free(rg), free(rb);
}

/* every output of both ops on 1, 2 and 3 threads: the same bits */
static void check_threads(int64_t rows, int c)
{
    const int64_t n = rows * c;
    float *x = rows_input(rows, c), *gm = uniform(c, 0.5, 1.5), *bt = uniform(c, -0.5, 0.5), *dy = uniform(n, -1, 1);
    float *out[3];
    const size_t len = (size_t)(2 * n + 2 * rows + 2 * c); /* y, saved, dx, dgamma, dbeta */
    for (int t = 0; t < 3; t++) {
        dt_cpu_set_threads(t + 1);
        float *o = out[t] = zalloc(len, sizeof(float));
        be->ln_fwd(rows, c, 1e-6f, x, F32, gm, bt, F32, o, F32, o + n);
        be->ln_bwd(rows, c, x, F32, gm, F32, o + n, dy, F32, o + n + 2 * rows, o + 2 * n + 2 * rows,
                   o + 2 * n + 2 * rows + c, 0, 0);
    }
    dt_cpu_set_threads(2);
    TAP_OK(!memcmp(out[0], out[1], len * sizeof(float)) && !memcmp(out[0], out[2], len * sizeof(float)),
           "ln %lldx%d on 1, 2 and 3 threads: y, saved, dx, dgamma, dbeta the same bits", (long long)rows, c);
    free(x), free(gm), free(bt), free(dy), free(out[0]), free(out[1]), free(out[2]);
}

/* --- typed operands ------------------------------------------------------------------------------- */

/* (struct typed, typed_new, typed_same: ops_util.h) */
/* both ops with x and dx of xt, y and dy of yt, the parameters and their gradients of pt, against the
 * fp32 ops on the same values */
static int typed_case(int64_t rows, int c, dt_dtype xt, dt_dtype yt, dt_dtype pt)
{
    const int64_t n = rows * c;
    float *xv = rows_input(rows, c);
    typed x = typed_new(xt, n, 0, 0, xv), gm = typed_new(pt, c, 0.5, 1.5, NULL), bt = typed_new(pt, c, -0.5, 0.5, NULL);
    typed y = typed_new(yt, n, -1, 1, NULL), dy = typed_new(yt, n, -1, 1, NULL);
    float *saved_t = zalloc(2 * (size_t)rows, sizeof(float)), *saved_f = zalloc(2 * (size_t)rows, sizeof(float));
    be->ln_fwd(rows, c, 1e-5f, x.s, xt, gm.s, bt.s, pt, y.s, yt, saved_t);
    be->ln_fwd(rows, c, 1e-5f, x.v, F32, gm.v, bt.v, F32, y.v, F32, saved_f);
    int ok = typed_same(&y) && !memcmp(saved_t, saved_f, 2 * (size_t)rows * sizeof(float));
    for (int acc = 0; acc <= 1; acc++) {
        typed dx = typed_new(xt, n, -1, 1, NULL), dg = typed_new(pt, c, -1, 1, NULL);
        typed db = typed_new(pt, c, -1, 1, NULL);
        be->ln_bwd(rows, c, x.s, xt, gm.s, pt, saved_f, dy.s, yt, dx.s, dg.s, db.s, acc, acc);
        be->ln_bwd(rows, c, x.v, F32, gm.v, F32, saved_f, dy.v, F32, dx.v, dg.v, db.v, acc, acc);
        ok &= typed_same(&dx) && typed_same(&dg) && typed_same(&db);
        typed_free(&dx), typed_free(&dg), typed_free(&db);
    }
    typed_free(&x), typed_free(&gm), typed_free(&bt), typed_free(&y), typed_free(&dy);
    free(xv), free(saved_t), free(saved_f);
    return ok;
}

static void check_typed(dt_dtype R)
{
    const struct {
        dt_dtype xt, yt, pt;
        const char *what;
    } combos[] = {{R, R, F32, "O2"}, {R, F32, F32, "O1"}, {R, R, R, "O3"}, {F32, R, R, "mixed"}};
    const struct {
        int64_t rows;
        int c;
    } shapes[] = {{6, 7}, {3, 1500}, {4, 1}};
    for (size_t k = 0; k < sizeof combos / sizeof combos[0]; k++) {
        int ok = 1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            ok &= typed_case(shapes[s].rows, shapes[s].c, combos[k].xt, combos[k].yt, combos[k].pt);
        TAP_OK(ok,
               "%s ln %s (x %s, y %s, params %s) on 6x7, 3x1500, 4x1: y, saved, dx, dgamma, dbeta (accumulate 0/1) "
               "equal the fp32 op's, rounded",
               tname(R), combos[k].what, tname(combos[k].xt), tname(combos[k].yt), tname(combos[k].pt));
    }
}

/* --- chan_copy ------------------------------------------------------------------------------------ */

/* v rounded to t and back (t's value of v) */
static float as_type(dt_dtype t, float v)
{
    return t == DT_FLOAT16 ? dt_f16_to_f32(dt_f32_to_f16(v)) : t == DT_BFLOAT16 ? dt_bf16_to_f32(dt_f32_to_bf16(v)) : v;
}

/* Concatenation along channels: a [rows, c1] and b [rows, c2] (type st) into y [rows, 2 + c1 + c2]
 * (type dt) at channels 1.. (the two outside channels keep a sentinel); back, the gradient dy [rows,
 * 2 + c1 + c2] (type st) sliced into da (added into, type dt) and db (overwritten). */
static int concat_case(int64_t rows, int c1, int c2, dt_dtype st, dt_dtype dt)
{
    const int w = 2 + c1 + c2;
    typed a = typed_new(st, rows * c1, -2, 2, NULL), b = typed_new(st, rows * c2, -2, 2, NULL);
    typed y = typed_new(dt, rows * w, 7, 7, NULL), dy = typed_new(st, rows * w, -2, 2, NULL);
    typed da = typed_new(dt, rows * c1, -2, 2, NULL), db = typed_new(dt, rows * c2, -2, 2, NULL);
    be->chan_copy(rows, c1, a.s, c1, 0, st, y.s, w, 1, dt, 0);
    be->chan_copy(rows, c2, b.s, c2, 0, st, y.s, w, 1 + c1, dt, 0);
    be->chan_copy(rows, c1, dy.s, w, 1, st, da.s, c1, 0, dt, 1);
    be->chan_copy(rows, c2, dy.s, w, 1 + c1, st, db.s, c2, 0, dt, 0);
    /* what the contract says, into the fp32 values, then compared with the typed results */
    for (int64_t r = 0; r < rows; r++) {
        for (int j = 0; j < c1; j++) {
            y.v[r * w + 1 + j] = a.v[r * c1 + j];
            da.v[r * c1 + j] = as_type(dt, da.v[r * c1 + j] + dy.v[r * w + 1 + j]);
        }
        for (int j = 0; j < c2; j++) {
            y.v[r * w + 1 + c1 + j] = b.v[r * c2 + j];
            db.v[r * c2 + j] = dy.v[r * w + 1 + c1 + j];
        }
    }
    const int ok = typed_same(&y) && typed_same(&da) && typed_same(&db);
    typed_free(&a), typed_free(&b), typed_free(&y), typed_free(&dy), typed_free(&da), typed_free(&db);
    return ok;
}

static void check_chan_copy(void)
{
    const dt_dtype types[3] = {F32, DT_FLOAT16, DT_BFLOAT16};
    const int cs[2][2] = {{3, 5}, {1100, 7}};
    for (int k = 0; k < 2; k++) {
        int ok = 1;
        for (int s = 0; s < 3; s++)
            for (int d = 0; d < 3; d++)
                ok &= concat_case(9, cs[k][0], cs[k][1], types[s], types[d]);
        TAP_OK(ok,
               "chan_copy: [9, %d] and [9, %d] into [9, %d] at channel 1 (the outside untouched), the gradient's "
               "slices back (added into, overwritten); every pair of fp32, fp16, bf16, bit for bit",
               cs[k][0], cs[k][1], 2 + cs[k][0] + cs[k][1]);
    }
}

int main(void)
{
    dt_rng_seed(&rng, 2026, 12);
    dt_cpu_set_threads(2);
    const dt_backend *backends[2] = {&dt_backend_cpu, &dt_backend_cpu_ref};
    for (int k = 0; k < 2; k++) {
        be = backends[k];
        tap_diag("backend %s", be->name);
        check_fwd(5, 1, 1e-5f);
        check_fwd(7, 3, 1e-5f);
        check_fwd(4, 768, 1e-6f);
        check_fwd(3, 1500, 1e-5f); /* over a tile */
        check_fwd(1, 1500, 1e-5f);
        check_fwd(1, 8, 1e-5f);
        check_bwd(3, 5, 1e-5f, 1);
        check_bwd(2, 7, 1e-6f, 1);
        check_bwd(4, 1, 1e-5f, 1);
        check_bwd(1, 3, 1e-5f, 1);
        check_bwd(6, 768, 1e-6f, 0);
        check_bwd(5, 1500, 1e-5f, 0);
        check_threads(37, 1500);
        check_threads(301, 96);
        check_typed(DT_FLOAT16);
        check_typed(DT_BFLOAT16);
        check_chan_copy();
    }
    return tap_done();
}
