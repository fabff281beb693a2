/* test_ops_attn.c: ViT's ops of the CPU backends, tokens_fwd, tokens_bwd, attn_scratch, attn_fwd and attn_bwd
 * (nn/cpu/attn.c), against their contracts in nn/backend.h, for dt_backend_cpu and dt_backend_cpu_ref:
 * - tokens_fwd against a double-precision reference (one fp32 add per value: within one rounding);
 *   tokens_bwd's dx (a copy: exact), dcls and dpos (sums over the images: the reference's double sum
 *   within one rounding); each accumulate flag alone and both (the rounded fp32 sum of the old value
 *   and what overwriting gives, bit for bit); dx, dcls or dpos NULL; n = 1..5, d past a tile;
 * - attn_fwd's y and saved p against a double-precision reference written here (s = 1, 5, 17, 197;
 *   heads 1..4; dh = 1, 8, 64; n = 1..3; qkv multiples of 1/8, so the fp32 scores are exact where dh is a
 *   square), p within 4 fp32 roundings of the reference's, relative to each value (plus the dot products'
 *   error bound where dh is not a square); attn_bwd's dqkv against the reference's gradient, which
 *   central differences of the reference's forward check in turn (small shapes); accumulate off and on
 *   (bit for bit);
 * - the same bits on 1, 2 and 3 threads (dt_cpu_set_threads) for every output of the five ops;
 * - fp16 and bf16 operands (qkv and dqkv of t, y and dy of yt, each on its own; the tokens' x, y and
 *   parameters each on its own) give, bit for bit, what the fp32 op gives on the same values followed
 *   by rounding each output to its type (nn/backend.h's "Types"); the saved p the same bits;
 * - a NaN in one token's row of qkv (or of dy) spreads through its own sequence only: the other
 *   sequences' y, p and dqkv are the same bits as without it; scores of about 1e4 (the max subtracted
 *   first) give a finite softmax whose rows sum to 1, and finite gradients. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "ops_util.h"
#include "tap.h"

static const dt_backend *be;
#define F32 DT_FLOAT32

/* n multiples of 1/8 in [-2, 2): products and sums of a few of them are exact in fp32 */
static float *eighths(int64_t n)
{
    float *p = zalloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(floor(32 * dt_rng_uniform(&rng)) - 16) / 8;
    return p;
}

/* the largest |a - ref| in units of one fp32 rounding of ref (2^-24 |ref|; 2^-149 at least) */
static double max_roundings(const float *a, const double *ref, int64_t n)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        const double e = fabs(a[i] - ref[i]) / fmax(0x1p-24 * fabs(ref[i]), 0x1p-149);
        w = isnan(e) ? INFINITY : fmax(w, e);
    }
    return w;
}

static int all_finite(const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

/* --- tokens ---------------------------------------------------------------------------------------- */

/* the reference: y = [cls; x] + pos per image; dx = dy's patch rows, dcls and dpos the sums over b */
static void ref_tokens_fwd(int n, int np, int d, const double *x, const double *cls, const double *pos, double *y)
{
    for (int b = 0; b < n; b++)
        for (int t = 0; t <= np; t++)
            for (int j = 0; j < d; j++)
                y[((int64_t)b * (np + 1) + t) * d + j] =
                    (t ? x[((int64_t)b * np + t - 1) * d + j] : cls[j]) + pos[(int64_t)t * d + j];
}

static void ref_tokens_sums(int n, int np, int d, const double *dy, double *dcls, double *dpos)
{
    for (int64_t i = 0; i < (int64_t)(np + 1) * d; i++) {
        dpos[i] = 0;
        for (int b = 0; b < n; b++)
            dpos[i] += dy[(int64_t)b * (np + 1) * d + i];
    }
    for (int j = 0; j < d; j++)
        dcls[j] = dpos[j];
}

static void check_tokens(int n, int np, int d)
{
    const int64_t nx = (int64_t)n * np * d, ny = (int64_t)n * (np + 1) * d, npos = (int64_t)(np + 1) * d;
    float *x = uniform(nx, -2, 2), *cls = uniform(d, -1, 1), *pos = uniform(npos, -1, 1), *dy = uniform(ny, -1, 1);
    float *y = uniform(ny, -9, 9), *dx = uniform(nx, -9, 9), *dc = uniform(d, -9, 9), *dp = uniform(npos, -9, 9);
    double *xd = to_double(x, nx), *cd = to_double(cls, d), *pd = to_double(pos, npos), *dyd = to_double(dy, ny);
    double *yr = zalloc((size_t)ny, sizeof(double)), *cr = zalloc((size_t)d, sizeof(double)),
           *pr = zalloc((size_t)npos, sizeof(double));
    be->tokens_fwd(n, np, d, x, F32, cls, pos, F32, y, F32);
    be->tokens_bwd(n, np, d, dy, F32, dx, F32, dc, dp, F32, 0, 0);
    ref_tokens_fwd(n, np, d, xd, cd, pd, yr);
    ref_tokens_sums(n, np, d, dyd, cr, pr);
    int dx_ok = 1;
    for (int b = 0; b < n; b++)
        dx_ok &=
            !memcmp(dx + (int64_t)b * np * d, dy + ((int64_t)b * (np + 1) + 1) * d, (size_t)np * d * sizeof(float));
    const double wy = max_roundings(y, yr, ny), wc = max_roundings(dc, cr, d), wp = max_roundings(dp, pr, npos);
    TAP_OK(wy <= 1 && wc <= 1 && wp <= 1 && dx_ok,
           "tokens n%d np%d d%d: y, dcls, dpos within %.2f, %.2f, %.2f of one fp32 rounding of the reference; dx = "
           "dy's patch rows",
           n, np, d, wy, wc, wp);

    /* each flag alone and both: what the flag names is old + the overwriting result, the rest overwritten */
    int acc_ok = 1;
    for (int flags = 1; flags <= 3; flags++) {
        const int ax = flags & 1, ap = flags >> 1;
        float *ox = uniform(nx, -1, 1), *oc = uniform(d, -1, 1), *op = uniform(npos, -1, 1);
        float *kx = copy_of(ox, nx), *kc = copy_of(oc, d), *kp = copy_of(op, npos);
        be->tokens_bwd(n, np, d, dy, F32, kx, F32, kc, kp, F32, ax, ap);
        acc_ok &= same_f32(kx, dx, ax ? ox : NULL, nx) && same_f32(kc, dc, ap ? oc : NULL, d) &&
                  same_f32(kp, dp, ap ? op : NULL, npos);
        free(ox), free(oc), free(op), free(kx), free(kc), free(kp);
    }
    TAP_OK(acc_ok, "  tokens_bwd accumulate_dx, accumulate_params, both: old + the overwriting result (rounded fp32 "
                   "sums), the other outputs overwritten");

    /* NULL outputs: not written, the others as before */
    float *kx = zalloc((size_t)nx, sizeof(float)), *kc = zalloc((size_t)d, sizeof(float)),
          *kp = zalloc((size_t)npos, sizeof(float));
    be->tokens_bwd(n, np, d, dy, F32, NULL, F32, kc, kp, F32, 0, 0);
    int null_ok = same_f32(kc, dc, NULL, d) && same_f32(kp, dp, NULL, npos);
    memset(kp, 0, (size_t)npos * sizeof(float));
    be->tokens_bwd(n, np, d, dy, F32, kx, F32, NULL, kp, F32, 0, 0);
    null_ok &= same_f32(kx, dx, NULL, nx) && same_f32(kp, dp, NULL, npos);
    memset(kc, 0, (size_t)d * sizeof(float));
    be->tokens_bwd(n, np, d, dy, F32, NULL, F32, kc, NULL, F32, 0, 0);
    null_ok &= same_f32(kc, dc, NULL, d);
    TAP_OK(null_ok, "  tokens_bwd dx NULL, dcls NULL, dpos NULL: the other outputs as before");
    free(kx), free(kc), free(kp);
    free(x), free(cls), free(pos), free(dy), free(y), free(dx), free(dc), free(dp);
    free(xd), free(cd), free(pd), free(dyd), free(yr), free(cr), free(pr);
}

static void check_tokens_threads(int n, int np, int d)
{
    const int64_t nx = (int64_t)n * np * d, ny = (int64_t)n * (np + 1) * d, npos = (int64_t)(np + 1) * d;
    float *x = uniform(nx, -2, 2), *cls = uniform(d, -1, 1), *pos = uniform(npos, -1, 1), *dy = uniform(ny, -1, 1);
    const size_t len = (size_t)(ny + nx + d + npos); /* y, dx, dcls, dpos */
    float *out[3];
    for (int t = 0; t < 3; t++) {
        dt_cpu_set_threads(t + 1);
        float *o = out[t] = zalloc(len, sizeof(float));
        be->tokens_fwd(n, np, d, x, F32, cls, pos, F32, o, F32);
        be->tokens_bwd(n, np, d, dy, F32, o + ny, F32, o + ny + nx, o + ny + nx + d, F32, 0, 0);
    }
    dt_cpu_set_threads(2);
    TAP_OK(!memcmp(out[0], out[1], len * sizeof(float)) && !memcmp(out[0], out[2], len * sizeof(float)),
           "tokens n%d np%d d%d on 1, 2 and 3 threads: y, dx, dcls, dpos the same bits", n, np, d);
    free(x), free(cls), free(pos), free(dy), free(out[0]), free(out[1]), free(out[2]);
}

/* both ops with x and dx of xt, y and dy of yt, cls, pos and their gradients of pt (accumulate 0 and 1)
 * against the fp32 ops on the same values */
static int tokens_typed_case(int n, int np, int d, dt_dtype xt, dt_dtype yt, dt_dtype pt)
{
    const int64_t nx = (int64_t)n * np * d, ny = (int64_t)n * (np + 1) * d, npos = (int64_t)(np + 1) * d;
    typed x = typed_new(xt, nx, -2, 2, NULL), cls = typed_new(pt, d, -1, 1, NULL),
          pos = typed_new(pt, npos, -1, 1, NULL);
    typed y = typed_new(yt, ny, -1, 1, NULL), dy = typed_new(yt, ny, -1, 1, NULL);
    be->tokens_fwd(n, np, d, x.s, xt, cls.s, pos.s, pt, y.s, yt);
    be->tokens_fwd(n, np, d, x.v, F32, cls.v, pos.v, F32, y.v, F32);
    int ok = typed_same(&y);
    for (int acc = 0; acc <= 1; acc++) {
        typed dx = typed_new(xt, nx, -1, 1, NULL), dc = typed_new(pt, d, -1, 1, NULL);
        typed dp = typed_new(pt, npos, -1, 1, NULL);
        be->tokens_bwd(n, np, d, dy.s, yt, dx.s, xt, dc.s, dp.s, pt, acc, acc);
        be->tokens_bwd(n, np, d, dy.v, F32, dx.v, F32, dc.v, dp.v, F32, acc, acc);
        ok &= typed_same(&dx) && typed_same(&dc) && typed_same(&dp);
        typed_free(&dx), typed_free(&dc), typed_free(&dp);
    }
    typed_free(&x), typed_free(&cls), typed_free(&pos), typed_free(&y), typed_free(&dy);
    return ok;
}

/* --- attention: the reference, in double ------------------------------------------------------------ */

typedef struct ashape {
    int n, s, heads, dh;
} ashape;

static int64_t qkv_len(ashape a)
{
    return (int64_t)a.n * a.s * 3 * a.heads * a.dh;
}

static int64_t y_len(ashape a)
{
    return (int64_t)a.n * a.s * a.heads * a.dh;
}

static int64_t p_len(ashape a)
{
    return (int64_t)a.n * a.heads * a.s * a.s;
}

/* element (b, token i, part (0 q, 1 k, 2 v), head h, j) of qkv */
static int64_t qkv_at(ashape a, int b, int i, int part, int h, int j)
{
    const int64_t D = (int64_t)a.heads * a.dh;
    return ((int64_t)b * a.s + i) * 3 * D + part * D + (int64_t)h * a.dh + j;
}

static int64_t y_at(ashape a, int b, int i, int h, int j)
{
    return ((int64_t)b * a.s + i) * a.heads * a.dh + (int64_t)h * a.dh + j;
}

/* scores, softmax, y = P V for each sequence and head; P into p unless NULL */
static void ref_attn_fwd(ashape a, const double *qkv, double *y, double *p)
{
    const int s = a.s, dh = a.dh;
    double *row = zalloc((size_t)s, sizeof(double));
    for (int b = 0; b < a.n; b++)
        for (int h = 0; h < a.heads; h++)
            for (int i = 0; i < s; i++) {
                double m = -INFINITY, sum = 0;
                for (int j = 0; j < s; j++) {
                    double sc = 0;
                    for (int c = 0; c < dh; c++)
                        sc += qkv[qkv_at(a, b, i, 0, h, c)] * qkv[qkv_at(a, b, j, 1, h, c)];
                    row[j] = sc / sqrt((double)dh);
                    m = fmax(m, row[j]);
                }
                for (int j = 0; j < s; j++)
                    sum += row[j] = exp(row[j] - m);
                for (int j = 0; j < s; j++)
                    row[j] /= sum;
                if (p)
                    for (int j = 0; j < s; j++)
                        p[(((int64_t)b * a.heads + h) * s + i) * s + j] = row[j];
                for (int c = 0; c < dh; c++) {
                    double o = 0;
                    for (int j = 0; j < s; j++)
                        o += row[j] * qkv[qkv_at(a, b, j, 2, h, c)];
                    y[y_at(a, b, i, h, c)] = o;
                }
            }
    free(row);
}

/* the gradient of sum(dy * y) with respect to qkv: dV = P^T dY, dP = dY V^T, dS = P (dP - rowsum(P dP)),
 * dQ = dS K / sqrt(dh), dK = dS^T Q / sqrt(dh) */
static void ref_attn_bwd(ashape a, const double *qkv, const double *dy, double *dqkv)
{
    const int s = a.s, dh = a.dh;
    const double sq = sqrt((double)dh);
    double *p = zalloc((size_t)p_len(a), sizeof(double)), *y = zalloc((size_t)y_len(a), sizeof(double));
    double *ds = zalloc((size_t)s * s, sizeof(double));
    ref_attn_fwd(a, qkv, y, p);
    for (int b = 0; b < a.n; b++)
        for (int h = 0; h < a.heads; h++) {
            const double *P = p + ((int64_t)b * a.heads + h) * s * s;
            for (int i = 0; i < s; i++) {
                double r = 0;
                for (int j = 0; j < s; j++) {
                    double g = 0;
                    for (int c = 0; c < dh; c++)
                        g += dy[y_at(a, b, i, h, c)] * qkv[qkv_at(a, b, j, 2, h, c)];
                    ds[(int64_t)i * s + j] = g;
                    r += P[(int64_t)i * s + j] * g;
                }
                for (int j = 0; j < s; j++)
                    ds[(int64_t)i * s + j] = P[(int64_t)i * s + j] * (ds[(int64_t)i * s + j] - r);
            }
            for (int i = 0; i < s; i++)
                for (int c = 0; c < dh; c++) {
                    double gq = 0, gk = 0, gv = 0;
                    for (int j = 0; j < s; j++) {
                        gq += ds[(int64_t)i * s + j] * qkv[qkv_at(a, b, j, 1, h, c)];
                        gk += ds[(int64_t)j * s + i] * qkv[qkv_at(a, b, j, 0, h, c)];
                        gv += P[(int64_t)j * s + i] * dy[y_at(a, b, j, h, c)];
                    }
                    dqkv[qkv_at(a, b, i, 0, h, c)] = gq / sq;
                    dqkv[qkv_at(a, b, i, 1, h, c)] = gk / sq;
                    dqkv[qkv_at(a, b, i, 2, h, c)] = gv;
                }
        }
    free(p), free(y), free(ds);
}

/* planning, as a model does before running a shape: the backend's scratch for it */
static void plan(ashape a, dt_dtype t, dt_dtype yt)
{
    if (be->reserve_scratch(be->attn_scratch(a.n, a.s, a.heads, a.dh, t, yt)) != 0) {
        fprintf(stderr, "reserve_scratch failed\n");
        exit(99);
    }
}

/* --- attn_fwd, attn_bwd against the reference ------------------------------------------------------- */

static void check_attn(ashape a, int fd)
{
    const int64_t nq = qkv_len(a), ny = y_len(a), np = p_len(a);
    plan(a, F32, F32);
    float *qkv = eighths(nq), *dy = uniform(ny, -1, 1);
    float *y = uniform(ny, -9, 9), *p = uniform(np, -9, 9), *dq = uniform(nq, -9, 9);
    double *qd = to_double(qkv, nq), *dyd = to_double(dy, ny);
    double *yr = zalloc((size_t)ny, sizeof(double)), *pr = zalloc((size_t)np, sizeof(double)),
           *gr = zalloc((size_t)nq, sizeof(double));
    be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv, F32, y, F32, p);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, p, dy, F32, dq, 0);
    ref_attn_fwd(a, qd, yr, pr);
    ref_attn_bwd(a, qd, dyd, gr);
    const double ey = max_rel(y, NULL, yr, ny), wp = max_roundings(p, pr, np), eg = max_rel(dq, NULL, gr, nq);
    /* p: exp turns the scores' absolute error into a relative one. On eighths the fp32 scores are exact
     * where dh is a square (Q / sqrt(dh) is then exact too): what is left is the exponentials', the sum's
     * and the division's roundings, 4 at most. Otherwise a score is a dot product of dh rounded terms,
     * off by (dh+1) roundings of the sum of its terms' sizes at most, and a softmax value by twice the
     * worst of that (its own score's error and the others' through the sum). */
    const int square = (int)lrint(sqrt(a.dh)) * (int)lrint(sqrt(a.dh)) == a.dh;
    double terms = 0; /* the largest sum of |q k| / sqrt(dh) */
    for (int b = 0; b < a.n && !square; b++)
        for (int h = 0; h < a.heads; h++)
            for (int i = 0; i < a.s; i++)
                for (int j = 0; j < a.s; j++) {
                    double t = 0;
                    for (int c = 0; c < a.dh; c++)
                        t += fabs(qd[qkv_at(a, b, i, 0, h, c)] * qd[qkv_at(a, b, j, 1, h, c)]);
                    terms = fmax(terms, t / sqrt(a.dh));
                }
    const double tol = 4 + 2 * (a.dh + 1) * terms;
    TAP_OK(ey < 2e-6 && wp <= tol && eg < 5e-6,
           "attn n%d s%d heads%d dh%d: y %.1e from the reference, p within %.1f fp32 roundings of it (at most %.0f), "
           "dqkv %.1e from the reference's gradient",
           a.n, a.s, a.heads, a.dh, ey, wp, tol, eg);

    if (fd) { /* the reference's gradient against central differences of sum(dy * y) of its forward */
        double *fg = zalloc((size_t)nq, sizeof(double)), *yy = zalloc((size_t)ny, sizeof(double));
        const double h = 1e-6;
        for (int64_t i = 0; i < nq; i++) {
            const double keep = qd[i];
            double f[2];
            for (int side = 0; side < 2; side++) {
                qd[i] = keep + (side ? -h : h);
                ref_attn_fwd(a, qd, yy, NULL);
                f[side] = 0;
                for (int64_t k = 0; k < ny; k++)
                    f[side] += dyd[k] * yy[k];
            }
            qd[i] = keep;
            fg[i] = (f[0] - f[1]) / (2 * h);
        }
        const double ef = max_rel(NULL, gr, fg, nq), eo = max_rel(dq, NULL, fg, nq);
        TAP_OK(ef < 1e-6 && eo < 2e-5, "  central differences: the reference's gradient %.1e, the op's %.1e", ef, eo);
        free(fg), free(yy);
    }

    /* accumulate: old + the overwriting result, bit for bit */
    float *old = uniform(nq, -1, 1), *acc = copy_of(old, nq);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, p, dy, F32, acc, 1);
    TAP_OK(same_f32(acc, dq, old, nq), "  attn_bwd accumulate: old + the overwriting result (rounded fp32 sums)");
    free(old), free(acc);
    free(qkv), free(dy), free(y), free(p), free(dq), free(qd), free(dyd), free(yr), free(pr), free(gr);
}

/* y, p, dqkv on 1, 2 and 3 threads: the same bits (the scratch planned again at each count) */
static void check_attn_threads(ashape a)
{
    const int64_t nq = qkv_len(a), ny = y_len(a), np = p_len(a);
    float *qkv = uniform(nq, -2, 2), *dy = uniform(ny, -1, 1);
    const size_t len = (size_t)(ny + np + nq);
    float *out[3];
    for (int t = 0; t < 3; t++) {
        dt_cpu_set_threads(t + 1);
        plan(a, F32, F32);
        float *o = out[t] = zalloc(len, sizeof(float));
        be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv, F32, o, F32, o + ny);
        be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, o + ny, dy, F32, o + ny + np, 0);
    }
    dt_cpu_set_threads(2);
    TAP_OK(!memcmp(out[0], out[1], len * sizeof(float)) && !memcmp(out[0], out[2], len * sizeof(float)),
           "attn n%d s%d heads%d dh%d on 1, 2 and 3 threads: y, p, dqkv the same bits", a.n, a.s, a.heads, a.dh);
    free(qkv), free(dy), free(out[0]), free(out[1]), free(out[2]);
}

/* qkv and dqkv of t, y and dy of yt: y the fp32 op's rounded, p the fp32 op's bits, dqkv (accumulate 0
 * and 1) the fp32 op's rounded */
static int attn_typed_case(ashape a, dt_dtype t, dt_dtype yt)
{
    const int64_t nq = qkv_len(a), ny = y_len(a), np = p_len(a);
    plan(a, t, yt);
    typed qkv = typed_new(t, nq, -2, 2, NULL), y = typed_new(yt, ny, -1, 1, NULL), dy = typed_new(yt, ny, -1, 1, NULL);
    float *pt = zalloc((size_t)np, sizeof(float)), *pf = zalloc((size_t)np, sizeof(float));
    be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv.s, t, y.s, yt, pt);
    be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv.v, F32, y.v, F32, pf);
    int ok = typed_same(&y) && !memcmp(pt, pf, (size_t)np * sizeof(float));
    for (int acc = 0; acc <= 1; acc++) {
        typed dq = typed_new(t, nq, -1, 1, NULL);
        be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv.s, t, pf, dy.s, yt, dq.s, acc);
        be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv.v, F32, pf, dy.v, F32, dq.v, acc);
        ok &= typed_same(&dq);
        typed_free(&dq);
    }
    typed_free(&qkv), typed_free(&y), typed_free(&dy);
    free(pt), free(pf);
    return ok;
}

static void check_typed(dt_dtype R)
{
    const ashape shapes[] = {{2, 5, 3, 8}, {1, 17, 2, 64}, {3, 1, 2, 1}, {1, 197, 2, 64}};
    const dt_dtype pairs[3][2] = {{R, R}, {R, F32}, {F32, R}};
    for (int k = 0; k < 3; k++) {
        int ok = 1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            ok &= attn_typed_case(shapes[s], pairs[k][0], pairs[k][1]);
        TAP_OK(ok,
               "%s attn (qkv %s, y %s) on n2 s5 h3 dh8, n1 s17 h2 dh64, n3 s1 h2 dh1, n1 s197 h2 dh64: y and dqkv "
               "(accumulate 0/1) equal the fp32 op's, rounded; p the same bits",
               tname(R), tname(pairs[k][0]), tname(pairs[k][1]));
    }
    const dt_dtype combos[4][3] = {{R, R, F32}, {R, F32, F32}, {R, R, R}, {F32, R, R}};
    for (int k = 0; k < 4; k++) {
        const int ok = tokens_typed_case(3, 5, 7, combos[k][0], combos[k][1], combos[k][2]) &&
                       tokens_typed_case(2, 3, 1100, combos[k][0], combos[k][1], combos[k][2]);
        TAP_OK(ok,
               "%s tokens (x %s, y %s, params %s) n3 np5 d7, n2 np3 d1100: y, dx, dcls, dpos (accumulate 0/1) equal "
               "the fp32 op's, rounded",
               tname(R), tname(combos[k][0]), tname(combos[k][1]), tname(combos[k][2]));
    }
}

/* --- NaN and large scores ------------------------------------------------------------------------- */

/* sequence b's part of y (or dy: one row per token of D values), p or qkv */
static int seq_same(const float *a, const float *b, int64_t per, int seq)
{
    return !memcmp(a + seq * per, b + seq * per, (size_t)per * sizeof(float));
}

static int seq_finite(const float *a, int64_t per, int seq)
{
    return all_finite(a + seq * per, per);
}

/* a NaN in one value of qkv (token 2 of sequence 1, the given column), and separately in dy: the other
 * sequences' outputs are those of the run without it, bit for bit, and sequence 1 has NaNs */
static void check_nan(ashape a, int part)
{
    const int64_t nq = qkv_len(a), ny = y_len(a), np = p_len(a);
    const int64_t sq = nq / a.n, sy = ny / a.n, sp = np / a.n; /* per sequence */
    plan(a, F32, F32);
    float *qkv = uniform(nq, -2, 2), *dy = uniform(ny, -1, 1);
    float *y0 = zalloc((size_t)ny, sizeof(float)), *p0 = zalloc((size_t)np, sizeof(float)),
          *g0 = zalloc((size_t)nq, sizeof(float));
    float *y1 = zalloc((size_t)ny, sizeof(float)), *p1 = zalloc((size_t)np, sizeof(float)),
          *g1 = zalloc((size_t)nq, sizeof(float)), *g2 = zalloc((size_t)nq, sizeof(float));
    be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv, F32, y0, F32, p0);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, p0, dy, F32, g0, 0);
    float *bad = copy_of(qkv, nq), *bad_dy = copy_of(dy, ny);
    bad[qkv_at(a, 1, 2, part, a.heads - 1, a.dh - 1)] = NAN;
    bad_dy[y_at(a, 1, 2, 0, 0)] = NAN;
    be->attn_fwd(a.n, a.s, a.heads, a.dh, bad, F32, y1, F32, p1);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, bad, F32, p1, dy, F32, g1, 0);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, p0, bad_dy, F32, g2, 0);
    int ok = 1;
    for (int b = 0; b < a.n; b++) {
        if (b == 1) { /* the NaN's own sequence: spread into it */
            ok &= !seq_finite(y1, sy, b) && !seq_finite(g1, sq, b) && !seq_finite(g2, sq, b);
            /* a value's NaN leaves the scores alone */
            ok &= part == 2 ? seq_same(p1, p0, sp, b) : !seq_finite(p1, sp, b);
        } else {
            ok &= seq_same(y1, y0, sy, b) && seq_same(p1, p0, sp, b) && seq_same(g1, g0, sq, b) &&
                  seq_same(g2, g0, sq, b) && seq_finite(y1, sy, b) && seq_finite(g1, sq, b);
        }
    }
    TAP_OK(ok,
           "attn n%d s%d heads%d dh%d: a NaN in a %s of sequence 1 (or in its dy) reaches that sequence's y, p and "
           "dqkv; the other sequences' the same bits as without it",
           a.n, a.s, a.heads, a.dh, (const char *[]){"query", "key", "value"}[part]);
    free(qkv), free(dy), free(y0), free(p0), free(g0), free(y1), free(p1), free(g1), free(g2), free(bad), free(bad_dy);
}

/* queries and keys drawn so that the scores are about 1e4 in size: a softmax whose max is subtracted
 * first stays finite (exp(1e4) is inf in any precision) */
static void check_large(ashape a)
{
    const int64_t nq = qkv_len(a), ny = y_len(a), np = p_len(a);
    plan(a, F32, F32);
    float *qkv = uniform(nq, -1, 1), *dy = uniform(ny, -1, 1);
    /* q.k / sqrt(dh) has a standard deviation of amp^2 / 3 for q and k uniform in [-amp, amp) */
    const double amp = sqrt(3e4);
    for (int b = 0; b < a.n; b++)
        for (int i = 0; i < a.s; i++)
            for (int part = 0; part < 2; part++)
                for (int h = 0; h < a.heads; h++)
                    for (int j = 0; j < a.dh; j++)
                        qkv[qkv_at(a, b, i, part, h, j)] *= (float)amp;
    float *y = zalloc((size_t)ny, sizeof(float)), *p = zalloc((size_t)np, sizeof(float)),
          *g = zalloc((size_t)nq, sizeof(float));
    double *yr = zalloc((size_t)ny, sizeof(double)), *pr = zalloc((size_t)np, sizeof(double)), *qd = to_double(qkv, nq);
    be->attn_fwd(a.n, a.s, a.heads, a.dh, qkv, F32, y, F32, p);
    be->attn_bwd(a.n, a.s, a.heads, a.dh, qkv, F32, p, dy, F32, g, 0);
    ref_attn_fwd(a, qd, yr, pr);
    double big = 0, worst_sum = 0; /* the largest score; the rows' sums' distance from 1 */
    for (int b = 0; b < a.n; b++)
        for (int h = 0; h < a.heads; h++)
            for (int i = 0; i < a.s; i++) {
                double sum = 0;
                for (int j = 0; j < a.s; j++) {
                    double sc = 0;
                    for (int c = 0; c < a.dh; c++)
                        sc += qd[qkv_at(a, b, i, 0, h, c)] * qd[qkv_at(a, b, j, 1, h, c)];
                    big = fmax(big, fabs(sc) / sqrt(a.dh));
                    sum += p[(((int64_t)b * a.heads + h) * a.s + i) * a.s + j];
                }
                worst_sum = fmax(worst_sum, fabs(sum - 1));
            }
    /* the softmax is nearly one-hot: y is within the scores' fp32 error (1e4 * 2^-24 * dh) of the
     * reference's, times what V holds */
    const double ey = max_rel(y, NULL, yr, ny);
    TAP_OK(big > 5e3 && all_finite(p, np) && all_finite(y, ny) && all_finite(g, nq) && worst_sum < 1e-5 && ey < 1e-2,
           "attn n%d s%d heads%d dh%d, scores up to %.0f: p, y and dqkv finite, p's rows sum to 1 within %.1e, y %.1e "
           "from the reference",
           a.n, a.s, a.heads, a.dh, big, worst_sum, ey);
    free(qkv), free(dy), free(y), free(p), free(g), free(yr), free(pr), free(qd);
}

int main(void)
{
    dt_rng_seed(&rng, 2026, 17);
    /* attn_scratch fixes its count of per-thread slots when it is first asked (the larger of the
     * threads then and the processors): ask it on 3 threads, so 3 threads run on any machine */
    dt_cpu_set_threads(3);
    (void)dt_backend_cpu.attn_scratch(1, 1, 1, 1, F32, F32);
    dt_cpu_set_threads(2);
    const dt_backend *backends[2] = {&dt_backend_cpu, &dt_backend_cpu_ref};
    for (int k = 0; k < 2; k++) {
        be = backends[k];
        tap_diag("backend %s", be->name);
        check_tokens(1, 4, 3);
        check_tokens(3, 5, 7);
        check_tokens(5, 196, 8);
        check_tokens(2, 3, 1100); /* over a tile */
        check_tokens_threads(3, 49, 1100);
        check_tokens_threads(7, 196, 16);

        check_attn((ashape){1, 1, 1, 8}, 1);
        check_attn((ashape){2, 3, 2, 2}, 1);
        check_attn((ashape){1, 5, 1, 3}, 1);
        check_attn((ashape){3, 4, 3, 1}, 1);
        check_attn((ashape){2, 5, 4, 8}, 1);
        check_attn((ashape){3, 5, 2, 1}, 0);
        check_attn((ashape){1, 17, 4, 8}, 0);
        check_attn((ashape){2, 17, 2, 64}, 0);
        check_attn((ashape){3, 1, 3, 64}, 0);
        check_attn((ashape){2, 197, 2, 64}, 0);
        check_attn_threads((ashape){3, 17, 3, 8});
        check_attn_threads((ashape){1, 197, 2, 64});
        check_typed(DT_FLOAT16);
        check_typed(DT_BFLOAT16);
        for (int part = 0; part < 3; part++)
            check_nan((ashape){3, 5, 2, 8}, part);
        check_large((ashape){2, 9, 2, 8});
        check_large((ashape){1, 17, 1, 64});
    }
    return tap_done();
}
