/* linear.c: CPU fully connected layer (CBLAS) and softmax cross-entropy with label smoothing. Neither
 * needs scratch (linear_scratch and xent_scratch are 0). */
#include "config.h"

#include <cblas.h>
#include <math.h>

#include "nn/cpu/cpu.h"

size_t dt_cpu_linear_scratch(int n, int in, int out)
{
    (void)n;
    (void)in;
    (void)out;
    return 0;
}

size_t dt_cpu_xent_scratch(int n, int k)
{
    (void)n;
    (void)k;
    return 0;
}

void dt_cpu_linear_fwd(int n, int in, int out, const float *x, const float *w, const float *b, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b)
        dt_cpu_add_bias(n, out, b, y);
}

void dt_cpu_linear_bwd(int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db, int accumulate_dx, int accumulate_params)
{
    if (dx) /* dx[n, in] = dy[n, out] . w[out, in] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    accumulate_dx ? 1.0f : 0.0f, dx, in);
    /* dw[out, in] = dy^T . x */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in,
                accumulate_params ? 1.0f : 0.0f, dw, in);
    if (db)
        dt_cpu_column_sums(n, out, dy, db, accumulate_params);
}

double dt_cpu_xent(int n, int k, const float *logits, const int32_t *labels, float eps, float *dlogits)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (int64_t)i * k;
        double mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double se = 0, sz = 0;
        for (int j = 0; j < k; j++) {
            se += exp(z[j] - mx);
            sz += z[j];
        }
        double lse = mx + log(se); /* log sum exp */
        /* -log p_label weighted (1-eps), mean of -log p_j weighted eps */
        total += (1.0 - eps) * (lse - z[labels[i]]) + eps * (lse - sz / k);
        if (dlogits) {
            float *g = dlogits + (int64_t)i * k;
            for (int j = 0; j < k; j++) {
                double q = eps / k + (j == labels[i] ? 1.0 - eps : 0.0);
                g[j] = (float)((exp(z[j] - lse) - q) / n);
            }
        }
    }
    return total / n;
}
