/* test_amp_storage.c: real fp16/bf16 storage against its oracle, the emulation, bit for bit.
 *
 * At every opt level (O1, O2, O3, O3 with fp32 BN, and O1/O2 in bf16), two copies of a model train
 * on the CPU backend from the same weights on the same batches: one stores the reduced type for
 * real (16 bits in memory, the ops widening and rounding), one emulates it (fp32 arrays rounded
 * after every write: the engine before op table v2, model.h's prec_emulate). Both hold the same
 * numbers, so after each of STEPS steps (forward, loss, backward, the loss scaler's unscale and
 * check, SGD with momentum and weight decay, O2's fp32 master weights) every parameter, gradient,
 * BN statistic, momentum, master weight, logit, loss and the loss scale must be equal bit for bit,
 * and the real copy must store its reduced tensors in 16 bits. A negative control shows the
 * comparison sees a difference: the fp16 run against the bf16 one. mobilenet_v3_small (O2 fp16) and
 * efficientnet_b0 (O2 bf16) run the fused BN+activation (DT_FUSE_BN_ACT) both ways: the emulation
 * rounds the activation's output after the fused op, as real storage rounds it once when it stores
 * it. The oracle's arithmetic widens
 * every reduced convolution into fp32 (dt_cpu_set_half_kernels(0)); the last row runs O2 bf16 on
 * oneDNN's bf16 kernels where this CPU has them (the same products summed in another order): within
 * a tolerance of the emulation, not equal. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "tap.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

enum { STEPS = 3, N = 4, CLASSES = 10 };

typedef struct run {
    dt_model m;
    dt_optim opt;
    dt_amp amp;
    float *x;
    int ok;
} run;

/* every number of the run's state as fp32, one after another (host, malloc'd); *n of them */
static float *state(run *r, const float *logits, double loss, size_t *n)
{
    dt_model *m = &r->m;
    size_t cap = (size_t)m->n_weights * 4 + (size_t)m->n_buffers + (size_t)N * CLASSES + 8, k = 0;
    float *s = calloc(cap, sizeof(float));
    if (!s)
        abort();
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT)
            continue;
        dt_param_get(m, p, s + k); /* data (weights and BN statistics) */
        k += (size_t)p->numel;
        if (dt_param_trainable(p)) { /* the gradient */
            dt_param_get_grad(m, p, s + k);
            k += (size_t)p->numel;
        }
    }
    memcpy(s + k, r->opt.momentum_buf, (size_t)m->n_weights * sizeof(float));
    k += (size_t)m->n_weights;
    if (r->amp.master) {
        memcpy(s + k, r->amp.master, (size_t)m->n_weights * sizeof(float));
        k += (size_t)m->n_weights;
    }
    memcpy(s + k, logits, (size_t)N * CLASSES * sizeof(float));
    k += (size_t)N * CLASSES;
    float l[2];
    memcpy(l, &loss, sizeof loss); /* the double's bits */
    s[k++] = l[0];
    s[k++] = l[1];
    s[k++] = (float)r->amp.scaler.scale;
    *n = k;
    return s;
}

static int start(run *r, const char *arch, int hw, int level, const dt_amp_overrides *ov, int emulate)
{
    memset(r, 0, sizeof *r);
    dt_amp_props p;
    r->ok = dt_amp_resolve(level, ov, &p) == DT_OK && dt_model_create(&r->m, arch, 3, CLASSES, &dt_backend_cpu) == DT_OK;
    if (!r->ok)
        return 0;
    dt_model_init_weights(&r->m, 7, 0);
    r->m.prec_emulate = emulate;
    r->m.training = 1;
    r->ok = dt_amp_attach(&r->amp, &r->m, &p) == DT_OK && dt_model_plan(&r->m, N, hw, hw) == DT_OK &&
            dt_optim_init(&r->opt, &r->m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK &&
            (r->x = r->m.be->mem_alloc((size_t)N * hw * hw * 3 * sizeof(float))) != NULL;
    return r->ok;
}

/* one step on batch u (host pixels) and labels y; its state */
static float *step(run *r, int s, const uint8_t *u, int hw, const int32_t *y, size_t *n)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    double loss = 0;
    const dt_scalars *out;
    float logits[N * CLASSES];
    dt_model_step_begin(&r->m, 0.05f, s, 0);
    r->m.be->normalize_u8((int64_t)N * hw * hw * 3, 3, u, mean, std, DT_FLOAT32, r->x);
    r->ok = r->ok && dt_model_forward(&r->m, r->x, N) == DT_OK && dt_model_loss(&r->m, y, N, 0.1f, &loss) == DT_OK &&
            dt_model_backward(&r->m, N, 0) == DT_OK;
    dt_model_get_logits(&r->m, N, logits);
    float *st = state(r, logits, loss, n); /* with the gradients, before the step changes weights */
    r->ok = r->ok && dt_amp_step(&r->amp.scaler, NULL, &r->opt, &r->m, r->amp.master, &out) == DT_OK;
    return st;
}

static void finish(run *r)
{
    if (r->x)
        r->m.be->mem_free(r->x);
    dt_optim_free(&r->opt);
    dt_amp_free(&r->amp);
    dt_model_free(&r->m);
}

/* bytes the real run stores its reduced tensors in: 2 per element for every reduced parameter */
static int stores_16_bits(const dt_model *m)
{
    int reduced = 0, right = 1;
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT)
            continue;
        int r = dt_param_reduced(m, p);
        reduced += r;
        right &= r ? p->dtype == dt_model_reduced_type(m) : p->dtype == DT_FLOAT32;
    }
    for (int v = 0; v < m->n_values; v++)
        right &= m->values[v].reduced ? m->values[v].dtype == dt_model_reduced_type(m)
                                      : m->values[v].dtype == DT_FLOAT32;
    return right && (m->prec_level < 2 || reduced > 0);
}

/* the two runs of one setting, compared after every step; returns the first step's real state
 * (for the negative control) when keep is set. tol 0: bit for bit; else every number within tol of
 * the largest of the emulation's (a state holds weights, gradients and statistics of all sizes: a
 * bound on the whole) */
static void compare(const char *arch, int hw, const char *name, int level, int bf16, int keep_bn, const char *scale,
                    double tol, float **keep, size_t *keep_n)
{
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = keep_bn, .master_weights = -1, .bf16 = bf16, .loss_scale = scale};
    run real, emu;
    int ok = start(&real, arch, hw, level, &ov, 0) && start(&emu, arch, hw, level, &ov, 1);
    int typed = ok && stores_16_bits(&real.m) && emu.m.prec_emulate && !real.m.prec_emulate;
    size_t values = (size_t)N * hw * hw * 3, compared = 0;
    uint8_t *u = malloc(values);
    int32_t y[N];
    dt_rng g;
    dt_rng_seed(&g, 99, 0);
    int same = ok, first_bad = -1;
    double worst = 0; /* tol > 0: the largest difference over the largest number, over the steps */
    for (int s = 0; ok && s < STEPS; s++) {
        for (size_t i = 0; i < values; i++)
            u[i] = (uint8_t)dt_rng_below(&g, 256);
        for (int i = 0; i < N; i++)
            y[i] = (int32_t)dt_rng_below(&g, CLASSES);
        size_t na, nb;
        float *a = step(&real, s, u, hw, y, &na), *b = step(&emu, s, u, hw, y, &nb);
        int eq = na == nb && !memcmp(a, b, na * sizeof(float));
        if (tol > 0 && na == nb) {
            double d = 0, big = 0;
            for (size_t i = 0; i < na; i++) {
                double e = fabs((double)a[i] - b[i]);
                d = e > d || e != e ? e : d;
                big = fabs((double)b[i]) > big ? fabs((double)b[i]) : big;
            }
            double rel = d / (big > 0 ? big : 1);
            worst = rel > worst || rel != rel ? rel : worst;
            eq = worst <= tol;
        }
        if (!eq && same)
            first_bad = s;
        same = same && eq;
        compared += na;
        if (keep && s == 0) {
            *keep = a;
            *keep_n = na;
        } else {
            free(a);
        }
        free(b);
    }
    ok = ok && real.ok && emu.ok;
    if (tol > 0) {
        TAP_OK(ok && typed && same,
               "%s %s: real 16-bit storage within %.0e of the emulation over %d steps (largest difference %.1e of the "
               "largest number; %zu numbers compared)",
               arch, name, tol, STEPS, worst, compared);
    } else {
        TAP_OK(ok && typed && same,
               "%s %s: real 16-bit storage equals the emulation bit for bit over %d steps (%zu numbers compared: "
               "weights, gradients, BN statistics, momentum%s, logits, loss, scale)%s",
               arch, name, STEPS, compared, real.amp.master ? ", master weights" : "",
               first_bad >= 0 ? " - FIRST DIFFERENCE AT STEP" : "");
    }
    if (first_bad >= 0)
        tap_diag("first difference at step %d", first_bad);
    free(u);
    finish(&real);
    finish(&emu);
}

int main(void)
{
    dt_log_init();
    dt_cpu_set_half_kernels(0);
    static const struct {
        const char *name;
        int level, bf16, keep_bn;
        const char *scale; /* NULL: the level's default (dynamic from 2^16 for fp16 O1 and O2) */
    } settings[] = {
        {"O1 fp16 (loss scale 256: steps that update)", 1, 0, -1, "256"},
        {"O2 fp16", 2, 0, -1, NULL},
        {"O3 fp16", 3, 0, -1, NULL},
        {"O3 fp16 keep_batchnorm_fp32", 3, 0, 1, NULL},
        {"O1 bf16", 1, 1, -1, NULL},
        {"O2 bf16", 2, 1, -1, NULL},
    };
    float *fp16 = NULL, *bf16 = NULL;
    size_t n16 = 0, nbf = 0;
    for (size_t k = 0; k < sizeof settings / sizeof *settings; k++) {
        int o2 = settings[k].level == 2;
        compare("resnet8", 16, settings[k].name, settings[k].level, settings[k].bf16, settings[k].keep_bn,
                settings[k].scale, 0, o2 ? (settings[k].bf16 ? &bf16 : &fp16) : NULL,
                o2 ? (settings[k].bf16 ? &nbf : &n16) : NULL);
    }
    /* a deeper model with a max pool, at O2 */
    compare("resnet18", 32, "O2 fp16 (loss scale 128: steps that update)", 2, 0, -1, "128", 0, NULL, NULL);
    /* BN with its activation fused (BN+Hardswish, BN+SiLU): the activation's output rounded once */
    compare("mobilenet_v3_small", 32, "O2 fp16 (loss scale 128; BN+Hardswish fused)", 2, 0, -1, "128", 0, NULL, NULL);
    compare("efficientnet_b0", 32, "O2 bf16 (BN+SiLU fused)", 2, 1, -1, NULL, 0, NULL, NULL);
    /* the negative control: the same comparison sees fp16 and bf16 differ */
    TAP_OK(fp16 && bf16 && n16 == nbf && memcmp(fp16, bf16, n16 * sizeof(float)) != 0,
           "control: the O2 fp16 and O2 bf16 states differ under the same comparison");
    free(fp16);
    free(bf16);
    /* O2 bf16 on oneDNN's bf16 kernels (dt_backend_cpu's default) */
    dt_conv_desc probe;
    dt_conv_desc_set(&probe, N, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    probe.t = DT_BFLOAT16;
    dt_cpu_set_half_kernels(1);
    if (dt_cpu_half_kernels_for(&probe))
        compare("resnet8", 16, "O2 bf16 on oneDNN's bf16 kernels", 2, 1, -1, NULL, 3e-2, NULL, NULL);
    else
        tap_skip("oneDNN has no bf16 convolution kernels on this CPU (dtrain uses them on AMX only) or in this build",
                 "resnet8 O2 bf16 on oneDNN's bf16 kernels within 3e-2 of the emulation");
    return tap_done();
}
