/* optim_check.c FILE.h5: our optimizer ops (nn/backend.h's sgd, adam, rmsprop, lars, lamb on the
 * CPU backend) against torch.optim (and the LARS and LAMB references written there from the
 * papers) on the cases tests/torch/optim_torch.py wrote: the same parameters, gradients
 * and per-step learning rates in, the parameters after each of the 10 steps and the state after
 * the last compared. Each case runs twice: with the gradients as written (1/scale 1), and as the
 * loss scaler hands them over (times 1024, 1/scale 1/1024: exact, so the same results). TAP. */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "nn/scalars.h"
#include "../unit/tap.h"
#include "util/check.h"
#include "util/h5.h"

/* Agreement: the largest |ours - torch| over the elements of every step, in units of the parameters'
 * RMS step (the mean size of one update). torch's and our roundings differ only in its fused
 * multiply-adds (ATen's vectorised add with alpha), so a difference is a few fp32 ulps of an
 * element, far below a step; a wrong formula is a step or more. */
#define TOL 1e-3
/* the state after the last step: the largest difference relative to the largest element */
#define STATE_TOL 1e-5

static double attr(hid_t g, const char *name)
{
    double v = NAN;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    if (a >= 0) {
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
            v = NAN;
        H5Aclose(a);
    }
    return v;
}

static float *read_floats(hid_t g, const char *file, const char *name, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *x = malloc((size_t)n * sizeof(float));
    if (x && dt_h5_read(g, file, "array", name, ndim, shape, H5T_NATIVE_FLOAT, x) != DT_OK) {
        free(x);
        x = NULL;
    }
    return x;
}

/* max |a - b| over n, relative to max |b| */
static double rel_diff(const float *a, const float *b, int64_t n);

/* max |a - b| over n */
static double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static double rel_diff(const float *a, const float *b, int64_t n)
{
    double big = 0;
    for (int64_t i = 0; i < n; i++)
        big = fabs((double)b[i]) > big ? fabs((double)b[i]) : big;
    return big > 0 ? max_diff(a, b, n) / big : max_diff(a, b, n);
}

static void run_case(hid_t f, const char *file, const char *name)
{
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    char kind[32] = "";
    if (g < 0 || dt_h5_attr_read_str(g, file, "kind", kind, sizeof kind) != DT_OK) {
        TAP_OK(0, "%s: the case cannot be read", name);
        return;
    }
    const int steps = (int)attr(g, "steps");
    int64_t n = 10000, s1[1] = {steps}, sn[1] = {n}, s2[2] = {steps, n};
    const double mom = attr(g, "momentum"), wd = attr(g, "weight_decay"), b1 = attr(g, "beta1"),
                 b2 = attr(g, "beta2"), eps = attr(g, "eps"), alpha = attr(g, "alpha"), trust = attr(g, "trust");
    const int nesterov = (int)attr(g, "nesterov");
    float *p0 = read_floats(g, file, "p0", 1, sn), *lr = read_floats(g, file, "lr", 1, s1),
          *grads = read_floats(g, file, "grads", 2, s2), *want = read_floats(g, file, "p", 2, s2),
          *want1 = read_floats(g, file, "state1", 1, sn), *want2 = read_floats(g, file, "state2", 1, sn);
    H5Gclose(g);
    if (!p0 || !lr || !grads || !want || !want1 || !want2) {
        TAP_OK(0, "%s: the arrays cannot be read", name);
        goto out;
    }
    const dt_backend *be = &dt_backend_cpu;
    for (int scaled = 0; scaled <= 1; scaled++) {
        float *p = malloc((size_t)n * sizeof(float)), *a = calloc((size_t)n, sizeof(float)),
              *b = calloc((size_t)n, sizeof(float)), *gk = malloc((size_t)n * sizeof(float));
        dt_scalars s;
        double norms[2];
        memset(&s, 0, sizeof s);
        s.inv_scale = scaled ? 1.0f / 1024 : 1.0f;
        memcpy(p, p0, (size_t)n * sizeof(float));
        double worst = 0, step_rms = 0;
        for (int k = 0; k < steps; k++) {
            for (int64_t i = 0; i < n; i++)
                gk[i] = grads[k * n + i] * (scaled ? 1024.0f : 1.0f);
            s.lr = lr[k];
            s.sgd_steps = k; /* the steps taken before this one (bias corrections, SGD's first step) */
            if (!strcmp(kind, "sgd"))
                be->sgd(n, p, DT_FLOAT32, gk, DT_FLOAT32, mom != 0 ? a : NULL, (float)mom, 0, (float)wd, nesterov, &s);
            else if (!strcmp(kind, "adam") || !strcmp(kind, "adamw"))
                be->adam(n, p, DT_FLOAT32, gk, DT_FLOAT32, a, b, b1, b2, eps, wd, !strcmp(kind, "adamw"), &s);
            else if (!strcmp(kind, "lars")) {
                be->tensor_sumsq(n, p, DT_FLOAT32, 0, &s, norms);
                be->tensor_sumsq(n, gk, DT_FLOAT32, 1, &s, norms + 1);
                be->lars(n, p, DT_FLOAT32, gk, DT_FLOAT32, a, mom, wd, trust, norms, &s);
            } else if (!strcmp(kind, "lamb")) {
                be->lamb_moments(n, p, DT_FLOAT32, gk, DT_FLOAT32, a, b, b1, b2, eps, wd, &s, norms);
                be->lamb_apply(n, p, DT_FLOAT32, a, b, b1, b2, eps, wd, norms, &s);
            } else
                be->rmsprop(n, p, DT_FLOAT32, gk, DT_FLOAT32, b, mom > 0 ? a : NULL, alpha, eps, wd, mom, &s);
            const float *prev = k ? want + (k - 1) * n : p0;
            double ss = 0;
            for (int64_t i = 0; i < n; i++)
                ss += ((double)want[k * n + i] - prev[i]) * ((double)want[k * n + i] - prev[i]);
            const double rms = sqrt(ss / (double)n), d = max_diff(p, want + k * n, n) / rms;
            if (!(d <= worst)) {
                worst = d;
                step_rms = rms;
            }
        }
        const double d1 = rel_diff(a, want1, n), d2 = rel_diff(b, want2, n);
        TAP_OK(worst <= TOL && d1 <= STATE_TOL && d2 <= STATE_TOL,
               "%s%s: %d steps as %s%s's: parameters within %.2e of a step (RMS step %.3g; tolerance %g), "
               "state within %.2e and %.2e of its largest",
               name, scaled ? " (gradients x1024, 1/scale 1/1024)" : "", steps,
               strcmp(kind, "lars") && strcmp(kind, "lamb") ? "torch.optim." : "the paper's ", kind, worst, step_rms, TOL,
               d1, d2);
        free(p);
        free(a);
        free(b);
        free(gk);
    }
out:
    free(p0);
    free(lr);
    free(grads);
    free(want);
    free(want1);
    free(want2);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: optim_check FILE.h5 (made by tests/torch/optim_torch.py)\n");
        return 2;
    }
    dt_cpu_set_threads(1);
    hid_t f = dt_h5_open_ro(argv[1], "optimizer cases");
    if (f < 0)
        return 1;
    static const char *const cases[] = {"sgd_nesterov",  "adam",          "adamw", "adamw_betas",
                                        "rmsprop_torchvision", "rmsprop_plain", "lars",  "lamb"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(f, argv[1], cases[i]);
    H5Fclose(f);
    return tap_done();
}
