/* ln.c: the CPU's layer norm over each row's c values (ln_fwd, ln_bwd; contracts in nn/backend.h):
 * rows in parallel, each row's sums in order in double; the parameter gradients summed over the rows
 * in order, columns in parallel, so every result has one set of bits whatever the threads. A row is
 * read in tiles of DT_CPU_TILE values (widened there when reduced): nothing is allocated. */
#include "config.h"

#include <math.h>

#include "nn/cpu/cpu.h"

enum { TILE = DT_CPU_TILE };

/* the mean and rstd of row r of x, in double, each pass over the row in tiles */
static void row_stats(dt_dtype xt, const void *x, int64_t r, int c, float eps, float *mean, float *rstd)
{
    float t[TILE];
    double sum = 0, sq = 0;
    for (int c0 = 0; c0 < c; c0 += TILE) {
        const int k = c - c0 < TILE ? c - c0 : TILE;
        const float *v = dt_cpu_view(xt, x, r * c + c0, k, t);
        for (int j = 0; j < k; j++)
            sum += v[j];
    }
    const double m = sum / c;
    for (int c0 = 0; c0 < c; c0 += TILE) {
        const int k = c - c0 < TILE ? c - c0 : TILE;
        const float *v = dt_cpu_view(xt, x, r * c + c0, k, t);
        for (int j = 0; j < k; j++)
            sq += (v[j] - m) * (v[j] - m);
    }
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(sq / c + (double)eps));
}

void dt_cpu_ln_fwd(int64_t rows, int c, float eps, const void *x, dt_dtype xt, const void *gamma, const void *beta,
                   dt_dtype pt, void *y, dt_dtype yt, float *saved)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        float m, rstd;
        row_stats(xt, x, r, c, eps, &m, &rstd);
        saved[r] = m;
        saved[rows + r] = rstd;
        for (int c0 = 0; c0 < c; c0 += TILE) {
            const int k = c - c0 < TILE ? c - c0 : TILE;
            float tx[TILE], tg[TILE], tb[TILE], ty[TILE];
            const float *v = dt_cpu_view(xt, x, r * c + c0, k, tx);
            const float *g = dt_cpu_view(pt, gamma, c0, k, tg), *b = dt_cpu_view(pt, beta, c0, k, tb);
            float *o = dt_cpu_out(yt, y, r * c + c0, k, ty, 0);
            for (int j = 0; j < k; j++)
                o[j] = (v[j] - m) * rstd * g[j] + b[j];
            dt_cpu_flush(yt, y, r * c + c0, k, o);
        }
    }
}

void dt_cpu_ln_bwd(int64_t rows, int c, const void *x, dt_dtype xt, const void *gamma, dt_dtype pt,
                   const float *saved, const void *dy, dt_dtype yt, void *dx, void *dgamma, void *dbeta,
                   int accumulate_dx, int accumulate_params)
{
    if (dx) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float m = saved[r], rstd = saved[rows + r];
            float tx[TILE], tg[TILE], td[TILE], to[TILE];
            double s1 = 0, s2 = 0; /* the sums of dy*gamma and of dy*gamma*xhat */
            for (int c0 = 0; c0 < c; c0 += TILE) {
                const int k = c - c0 < TILE ? c - c0 : TILE;
                const float *v = dt_cpu_view(xt, x, r * c + c0, k, tx), *d = dt_cpu_view(yt, dy, r * c + c0, k, td);
                const float *g = dt_cpu_view(pt, gamma, c0, k, tg);
                for (int j = 0; j < k; j++) {
                    const float gj = d[j] * g[j], xh = (v[j] - m) * rstd;
                    s1 += gj;
                    s2 += (double)gj * xh;
                }
            }
            const float a = (float)(s1 / c), b = (float)(s2 / c);
            for (int c0 = 0; c0 < c; c0 += TILE) {
                const int k = c - c0 < TILE ? c - c0 : TILE;
                const float *v = dt_cpu_view(xt, x, r * c + c0, k, tx), *d = dt_cpu_view(yt, dy, r * c + c0, k, td);
                const float *g = dt_cpu_view(pt, gamma, c0, k, tg);
                float *o = dt_cpu_out(xt, dx, r * c + c0, k, to, accumulate_dx);
                for (int j = 0; j < k; j++) {
                    const float xh = (v[j] - m) * rstd, val = rstd * (d[j] * g[j] - a - xh * b);
                    o[j] = accumulate_dx ? o[j] + val : val;
                }
                dt_cpu_flush(xt, dx, r * c + c0, k, o);
            }
        }
    }
    if (!dgamma && !dbeta)
        return;
    const int chunks = (c + TILE - 1) / TILE;
#pragma omp parallel for schedule(static)
    for (int q = 0; q < chunks; q++) {
        const int c0 = q * TILE, k = c - c0 < TILE ? c - c0 : TILE;
        double sg[TILE] = {0}, sb[TILE] = {0};
        float tx[TILE], td[TILE], to[TILE];
        for (int64_t r = 0; r < rows; r++) {
            const float *v = dt_cpu_view(xt, x, r * c + c0, k, tx), *d = dt_cpu_view(yt, dy, r * c + c0, k, td);
            const float m = saved[r], rstd = saved[rows + r];
            for (int j = 0; j < k; j++) {
                sg[j] += (double)(d[j] * ((v[j] - m) * rstd));
                sb[j] += d[j];
            }
        }
        void *dst[2] = {dgamma, dbeta};
        const double *sums[2] = {sg, sb};
        for (int p = 0; p < 2; p++) {
            if (!dst[p])
                continue;
            float *o = dt_cpu_out(pt, dst[p], c0, k, to, accumulate_params);
            for (int j = 0; j < k; j++)
                o[j] = accumulate_params ? o[j] + (float)sums[p][j] : (float)sums[p][j];
            dt_cpu_flush(pt, dst[p], c0, k, o);
        }
    }
}
