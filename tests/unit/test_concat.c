/* test_concat.c: concatenations laid out in place (dt_model_set_concat_in_place; nn/model.c): each
 * input of a concatenation written by its producer into its channels of the output and read there by
 * its other readers (DenseNet's batch norms), against the same model whose concatenations copy their
 * inputs (on = 0).
 *
 * densenet121 (58 concatenations, each of a conv's or a pool's output and the features before it) at
 * 32x32, a batch of 2, trains STEPS steps from the same weights on the same batches both ways, on
 * dt_backend_cpu (oneDNN's convolutions where built with it) and dt_backend_cpu_ref (im2col):
 * - at O0 (fp32), O2 and O3 (fp16 stored for real) and O2 in bf16, fused (BN+ReLU) and not: loss,
 *   logits, every weight, gradient, BN statistic and momentum equal bit for bit after each step (the
 *   same arithmetic in the same order), while in place every concatenation input is laid in its
 *   output (116) and the activations plan less memory (the gradients' size is printed: a block's
 *   gradient lives as one buffer through the block's backward, so it need not shrink);
 * - at O1, where a dense layer's conv output is fp16 and the features before it fp32 (so their
 *   concatenation is fp32), only the pools' outputs and the fp32 concatenations are laid in place,
 *   and the two runs still agree bit for bit. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "tap.h"
#include "train_util.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

enum { STEPS = 2, N = 2, HW = 32, CLASSES = 10 };

typedef struct run {
    dt_model m;
    dt_optim opt;
    dt_amp amp;
    _Alignas(64) float x[N * HW * HW * 3]; /* the model reads it in place: as aligned in both runs */
    int ok;
} run;

static int start(run *r, const dt_backend *be, int level, int bf16, int fused, int in_place)
{
    memset(r, 0, sizeof *r);
    dt_amp_props p;
    dt_amp_overrides o = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = bf16, .allreduce_fp32 = 0};
    r->ok = dt_model_create(&r->m, "densenet121", 3, CLASSES, be) == DT_OK &&
            dt_amp_resolve(level, level ? &o : NULL, &p) == DT_OK;
    if (!r->ok)
        return 0;
    dt_model_init_weights(&r->m, 7, 0);
    if (!fused)
        dt_model_set_fusion(&r->m, 0);
    dt_model_set_concat_in_place(&r->m, in_place);
    r->ok = dt_amp_attach(&r->amp, &r->m, &p) == DT_OK && dt_model_plan(&r->m, N, HW, HW) == DT_OK &&
            dt_optim_init(&r->opt, &r->m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    return r->ok;
}

/* step s on the run's own copy of the same batch; the loss */
static double step(run *r, int s)
{
    double loss = NAN;
    r->ok = r->ok && train_util_step(&r->m, &r->opt, &r->amp, r->x, sizeof r->x / sizeof r->x[0], N, CLASSES, s, &loss);
    return loss;
}

static void finish(run *r)
{
    dt_optim_free(&r->opt);
    dt_amp_free(&r->amp);
    dt_model_free(&r->m);
}

/* values laid in a concatenation's output */
static int placed(const dt_model *m)
{
    int k = 0;
    for (int v = 0; v < m->n_values; v++)
        k += m->values[v].place_in >= 0;
    return k;
}

static void check(const dt_backend *be, int level, int bf16, int fused, int want_placed)
{
    void *mem_a = NULL, *mem_b = NULL; /* 64-byte aligned (x), as the model's arenas are */
    if (posix_memalign(&mem_a, 64, sizeof(run)))
        mem_a = NULL;
    if (posix_memalign(&mem_b, 64, sizeof(run)))
        mem_b = NULL;
    run *a = mem_a, *b = mem_b; /* a in place, b copying */
    int ok = a && b && start(a, be, level, bf16, fused, 1) && start(b, be, level, bf16, fused, 0);
    int same = ok, first_diff = -1;
    for (int s = 0; ok && s < STEPS; s++) {
        double la = step(a, s), lb = step(b, s);
        float za[N * CLASSES], zb[N * CLASSES];
        dt_model_get_logits(&a->m, N, za);
        dt_model_get_logits(&b->m, N, zb);
        size_t wb = a->m.weights_bytes;
        int eq = a->ok && b->ok && memcmp(&la, &lb, sizeof la) == 0 && !memcmp(za, zb, sizeof za) &&
                 !memcmp(a->m.weights, b->m.weights, wb) && !memcmp(a->m.grads, b->m.grads, wb) &&
                 !memcmp(a->m.buffers, b->m.buffers, a->m.buffers_bytes) &&
                 !memcmp(a->opt.momentum_buf, b->opt.momentum_buf, (size_t)a->m.n_weights * sizeof(float));
        if (!eq && first_diff < 0) {
            first_diff = s;
            tap_diag("step %d: loss %.9g in place, %.9g copying", s, la, lb);
        }
        same = same && eq;
    }
    size_t act_a = ok ? dt_arena_peak(&a->m.act) : 0, act_b = ok ? dt_arena_peak(&b->m.act) : 0;
    size_t grad_a = ok ? a->m.grad.capacity : 0, grad_b = ok ? b->m.grad.capacity : 0;
    int pa = ok ? placed(&a->m) : -1, pb = ok ? placed(&b->m) : -1;
    TAP_OK(ok && same && pa == want_placed && pb == 0 && act_a < act_b,
           "%s O%d%s%s: %d concatenation inputs in place (want %d), %d copying; %d steps equal bit for bit (loss, "
           "logits, weights, gradients, BN statistics, momentum); activations %.2f MiB instead of %.2f, gradients "
           "%.2f MiB instead of %.2f",
           be->name, level, level && bf16 ? " bf16" : "", fused ? "" : " unfused", pa, want_placed, pb, STEPS,
           act_a / 1048576.0, act_b / 1048576.0, grad_a / 1048576.0, grad_b / 1048576.0);
    if (a)
        finish(a);
    if (b)
        finish(b);
    free(a);
    free(b);
}

int main(void)
{
    dt_log_init();
    dt_cpu_set_threads(2);
    const int all = 2 * 58;
    check(&dt_backend_cpu, 0, 0, 1, all);
    check(&dt_backend_cpu, 0, 0, 0, all);
    check(&dt_backend_cpu, 2, 0, 1, all);
    check(&dt_backend_cpu, 3, 0, 1, all);
    check(&dt_backend_cpu, 2, 1, 1, all);
    /* O1: per block, its pool's output and the fp32 concatenations (every one but the last) */
    check(&dt_backend_cpu, 1, 0, 1, 58 - 4 + 4);
    check(&dt_backend_cpu_ref, 0, 0, 1, all);
    check(&dt_backend_cpu_ref, 2, 0, 1, all);
    return tap_done();
}
