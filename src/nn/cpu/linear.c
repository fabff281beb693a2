/* linear.c: CPU fully connected layer (CBLAS) and softmax cross-entropy with label smoothing. On
 * fp16/bf16 operands the linear layer widens them into the backend's scratch (linear_scratch says
 * how much), runs the fp32 GEMMs and rounds the results into place; xent widens a logit as it
 * reads it and needs no scratch. */
#include "config.h"

#include <cblas.h>
#include <math.h>

#include "nn/cpu/cpu.h"

/* fp32 room in the scratch for a reduced linear layer: x (or dx twice: x and dx), w (w and dw), b
 * (b and db), y (or dy); each slot 64-byte aligned */
enum { L_X, L_DX, L_W, L_DW, L_B, L_DB, L_Y, L_SLOTS };

static void linear_slots(int n, int in, int out, float *base, float *slot[L_SLOTS])
{
    const int64_t sizes[L_SLOTS] = {(int64_t)n * in, (int64_t)n * in, (int64_t)out * in, (int64_t)out * in, out, out,
                                    (int64_t)n * out};
    char *p = (char *)base;
    for (int k = 0; k < L_SLOTS; k++) {
        slot[k] = base ? (float *)(void *)p : NULL;
        p += dt_cpu_align64((size_t)sizes[k] * sizeof(float));
    }
    if (!base) /* the size: slot[0] is NULL, the end is p */
        slot[0] = (float *)(void *)p;
}

size_t dt_cpu_linear_scratch(int n, int in, int out, dt_dtype t)
{
    if (t == DT_FLOAT32)
        return 0;
    float *s[L_SLOTS];
    linear_slots(n, in, out, NULL, s);
    return (size_t)(uintptr_t)s[0];
}

size_t dt_cpu_xent_scratch(int n, int k)
{
    (void)n;
    (void)k;
    return 0;
}

static void linear_fwd32(int n, int in, int out, const float *x, const float *w, const float *b, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b)
        dt_cpu_add_bias(n, out, out, b, y);
}

static void linear_bwd32(int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                         float *db, int accumulate_dx, int accumulate_params)
{
    if (dx) /* dx[n, in] = dy[n, out] . w[out, in] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    accumulate_dx ? 1.0f : 0.0f, dx, in);
    /* dw[out, in] = dy^T . x */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in,
                accumulate_params ? 1.0f : 0.0f, dw, in);
    if (db)
        dt_cpu_column_sums(n, out, out, dy, db, accumulate_params);
}

void dt_cpu_linear_fwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *b, void *y)
{
    if (t == DT_FLOAT32) {
        linear_fwd32(n, in, out, x, w, b, y);
        return;
    }
    float *s[L_SLOTS];
    linear_slots(n, in, out, dt_cpu_scratch(), s);
    dt_cpu_widen(t, x, (int64_t)n * in, s[L_X]);
    dt_cpu_widen(t, w, (int64_t)out * in, s[L_W]);
    if (b)
        dt_cpu_widen(t, b, out, s[L_B]);
    linear_fwd32(n, in, out, s[L_X], s[L_W], b ? s[L_B] : NULL, s[L_Y]);
    dt_cpu_narrow(t, s[L_Y], (int64_t)n * out, y);
}

void dt_cpu_linear_bwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *dy, void *dx,
                       void *dw, void *db, int accumulate_dx, int accumulate_params)
{
    if (t == DT_FLOAT32) {
        linear_bwd32(n, in, out, x, w, dy, dx, dw, db, accumulate_dx, accumulate_params);
        return;
    }
    float *s[L_SLOTS];
    linear_slots(n, in, out, dt_cpu_scratch(), s);
    const int64_t nx = (int64_t)n * in, nw = (int64_t)out * in;
    dt_cpu_widen(t, x, nx, s[L_X]);
    dt_cpu_widen(t, w, nw, s[L_W]);
    dt_cpu_widen(t, dy, (int64_t)n * out, s[L_Y]);
    if (dx && accumulate_dx)
        dt_cpu_widen(t, dx, nx, s[L_DX]);
    if (accumulate_params) {
        dt_cpu_widen(t, dw, nw, s[L_DW]);
        if (db)
            dt_cpu_widen(t, db, out, s[L_DB]);
    }
    linear_bwd32(n, in, out, s[L_X], s[L_W], s[L_Y], dx ? s[L_DX] : NULL, s[L_DW], db ? s[L_DB] : NULL, accumulate_dx,
                 accumulate_params);
    if (dx)
        dt_cpu_narrow(t, s[L_DX], nx, dx);
    dt_cpu_narrow(t, s[L_DW], nw, dw);
    if (db)
        dt_cpu_narrow(t, s[L_DB], out, db);
}

void dt_cpu_xent(int n, int k, dt_dtype t, const void *logits, const int32_t *labels, float eps, void *dlogits,
                 dt_scalars *s)
{
    const float scale = s->scale_f;
    double total = 0;
    int64_t hits1 = 0, hits5 = 0, nonfinite = 0;
    const int mix = s->mixing;
    for (int i = 0; i < n; i++) {
        const int64_t row = (int64_t)i * k;
        const int32_t y = labels[i], y2 = labels[(i + n - 1) % n]; /* y2: the label mixed in (mixing) */
#define Z(j) dt_cpu_get(t, logits, row + (j))
        /* top-1/top-5: the label's place in the row sorted by logit, ties in class order (the first
         * of equal logits ranks first, as torch.argmax and a stable sort): the logits above the label's
         * and the equal ones of lower classes (an all-equal row is a hit for class 0 alone, not for
         * every class). A row holding NaN or inf is a miss (every comparison with a NaN is false and
         * inf is not above inf, so it would count as a hit) */
        const int yl = mix ? dt_scalars_mix_label(s, y, y2) : y;
        const float zl = Z(yl);
        int above = 0, finite = 1;
        for (int j = 0; j < k; j++) {
            above += Z(j) > zl || (j < yl && Z(j) == zl);
            finite &= isfinite(Z(j)) != 0;
        }
        hits1 += finite && above == 0;
        hits5 += finite && above < 5;
        nonfinite += !finite;
        double mx = Z(0);
        for (int j = 1; j < k; j++)
            mx = Z(j) > mx ? Z(j) : mx;
        double se = 0, sz = 0;
        for (int j = 0; j < k; j++) {
            se += exp(Z(j) - mx);
            sz += Z(j);
        }
        double lse = mx + log(se); /* log sum exp */
        /* -log p_label weighted (1-eps), mean of -log p_j weighted eps; mixed: the label's term is
         * lam * (-log p_y) + rest * (-log p_y2), the target's mass (1-eps) split so */
        const double lam = s->mix_lam, rest = s->mix_rest;
        if (mix)
            total += (1.0 - eps) * (lam * (lse - Z(y)) + rest * (lse - Z(y2))) + eps * (lse - sz / k);
        else
            total += (1.0 - eps) * (lse - Z(y)) + eps * (lse - sz / k);
        if (dlogits) {
            for (int j = 0; j < k; j++) {
                double q = mix ? eps / k + (1.0 - eps) * ((j == y ? lam : 0.0) + (j == y2 ? rest : 0.0))
                               : eps / k + (j == y ? 1.0 - eps : 0.0);
                float g = (float)((exp(Z(j) - lse) - q) / n); /* the fp32 gradient, then the scaler's factor */
                dt_cpu_set(t, dlogits, row + j, g * scale);
            }
        }
#undef Z
    }
    double loss = total / n;
    s->loss = loss;
    s->loss_sum += loss;
    s->hits1 += hits1;
    s->hits5 += hits5;
    s->rows += n;
    s->nonfinite_rows += nonfinite;
    if (!isfinite(loss))
        s->agree[DT_AGREE_OVERFLOW] = 1;
}
