/* test_replay.c: one training step recorded and replayed, as a CUDA graph would be (op table v2:
 * "everything planned, nothing lazy").
 *
 * resnet8 trains on the record-and-replay backend (tests/libdt/deferred.h): step 0 runs normally,
 * step 1 runs while every op is recorded with its pointers and arguments, and steps 2.. only
 * upload their batch (mem_put into the same input buffer, labels into the same host array) and
 * replay the recording. The same steps on the CPU backend, run normally, must leave the same
 * weights, BN statistics, momentum, gradients and logits after every step, bit for bit: the step's
 * op sequence, its memory and its scratch are the same from step to step. Then the property is
 * broken on purpose: a learning rate that changes after step 1 reaches the normal run (an argument)
 * but not the replay, which must then differ (what op table v2's step scalars in device memory are
 * for). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../libdt/deferred.h"
#include "nn/model.h"
#include "tap.h"
#include "train/sgd.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

enum { HW = 16, N = 4, CLASSES = 10, STEPS = 5 };

typedef struct run {
    dt_model m;
    dt_sgd opt;
    float *x;
    int32_t y[N];
    int ok;
} run;

static int start(run *r, const dt_backend *be)
{
    memset(r, 0, sizeof *r);
    r->ok = dt_model_create(&r->m, "resnet8", 3, CLASSES, be) == DT_OK && dt_model_plan(&r->m, N, HW, HW) == DT_OK &&
            dt_sgd_init(&r->opt, &r->m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK &&
            (r->x = be->mem_alloc((size_t)N * HW * HW * 3 * sizeof(float))) != NULL;
    if (r->ok)
        dt_model_init_weights(&r->m, 3, 0);
    r->m.training = 1;
    return r->ok;
}

/* step s's batch into the run's input buffer and label array */
static void batch(run *r, int s)
{
    size_t n = (size_t)N * HW * HW * 3;
    float *h = malloc(n * sizeof(float));
    dt_rng g;
    dt_rng_seed(&g, 40, (uint64_t)s);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)dt_rng_normal(&g);
    for (int i = 0; i < N; i++)
        r->y[i] = (int32_t)dt_rng_below(&g, CLASSES);
    r->m.be->mem_put(r->x, h, n * sizeof(float));
    free(h);
}

static void step(run *r, float lr)
{
    double loss;
    r->ok = r->ok && dt_model_forward(&r->m, r->x, N) == DT_OK &&
            dt_model_loss(&r->m, r->y, N, 0.1f, &loss) == DT_OK && dt_model_backward(&r->m, N, 0) == DT_OK;
    dt_sgd_step(&r->opt, &r->m, lr, 1.0f, NULL);
}

/* everything the step leaves in backend memory, as bytes */
static unsigned char *state(const run *r, size_t *n)
{
    const dt_model *m = &r->m;
    size_t mw = (size_t)m->n_weights * sizeof(float), lb = (size_t)N * CLASSES * sizeof(float);
    *n = 2 * m->weights_bytes + m->buffers_bytes + mw + lb;
    unsigned char *s = malloc(*n), *p = s;
    m->be->mem_get(p, m->weights, m->weights_bytes);
    p += m->weights_bytes;
    m->be->mem_get(p, m->grads, m->weights_bytes);
    p += m->weights_bytes;
    m->be->mem_get(p, m->buffers, m->buffers_bytes);
    p += m->buffers_bytes;
    m->be->mem_get(p, r->opt.momentum_buf, mw);
    p += mw;
    dt_model_get_logits(m, N, (float *)(void *)p);
    return s;
}

static void finish(run *r)
{
    if (r->x)
        r->m.be->mem_free(r->x);
    dt_sgd_free(&r->opt);
    dt_model_free(&r->m);
}

/* STEPS steps both ways; lr_after: the learning rate from step 2 on (the recording's is 0.05) */
static int compare(float lr_after, size_t *ops, int *first_diff)
{
    run ref, rep;
    int ok = start(&ref, &dt_backend_cpu) && start(&rep, dt_replay_backend());
    int same = 1;
    *first_diff = -1;
    for (int s = 0; ok && s < STEPS; s++) {
        float lr = s >= 2 ? lr_after : 0.05f;
        batch(&ref, s);
        step(&ref, lr);
        batch(&rep, s);
        if (s < 2) { /* step 1 is recorded (step 0 is the optimiser's first: its momentum starts) */
            dt_replay_record(s == 1);
            step(&rep, lr);
            dt_replay_record(0);
        } else {
            *ops = dt_replay_run();
        }
        size_t na, nb;
        unsigned char *a = state(&ref, &na), *b = state(&rep, &nb);
        int eq = na == nb && !memcmp(a, b, na);
        if (!eq && *first_diff < 0)
            *first_diff = s;
        same &= eq;
        free(a);
        free(b);
    }
    ok = ok && ref.ok && rep.ok;
    finish(&ref);
    finish(&rep);
    return ok && same;
}

int main(void)
{
    dt_log_init();
    size_t ops = 0;
    int diff;
    int same = compare(0.05f, &ops, &diff);
    TAP_OK(same && ops > 50,
           "resnet8: step 1 recorded (%zu ops), replayed for steps 2-%d: weights, gradients, BN statistics, momentum "
           "and logits equal the CPU backend's after every step, bit for bit",
           ops, STEPS - 1);
    if (diff >= 0)
        tap_diag("first difference after step %d", diff);
    int broken = compare(0.02f, &ops, &diff);
    TAP_OK(!broken && diff == 2,
           "control: a learning rate changed after the recording reaches the normal run, not the replay: they "
           "differ from step %d on",
           diff);
    return tap_done();
}
