/* test_replay.c: one training step captured as a graph and launched again, as a CUDA graph is (op
 * table v2: "everything planned, nothing lazy", and the step's numbers on the device).
 *
 * resnet8 trains at O1 (real fp16 storage, the dynamic loss scaler growing every 2 clean steps) on
 * dt_cpu_graph_backend (nn/cpu/capture.c: while capturing, ops are kept and not run; a launch runs
 * them) as dtrain runs a step: the step's lr (a schedule that changes every step), number and signal
 * uploaded from the model's host buffer, the batch's pixels and labels uploaded from host buffers,
 * normalised, forward, the loss, backward, the scaler's step and the download of its results. Step 0
 * runs as issued; step 1's host writes its buffers, then everything from the uploads to the download
 * is captured (nothing of it runs: a host wait or an allocation would fail the capture) and
 * launched; steps 2.. only write their host buffers (lr, pixels, labels) and launch the graph. The
 * same steps on the CPU backend, run as issued, must leave the same weights, BN statistics,
 * momentum, gradients, logits and step scalars (loss, hits, loss scale) after every step, bit for
 * bit: the step's op sequence, its memory and its scratch are the same from step to step, and what
 * changes between steps travels through memory. Then the property is broken on purpose: a launch
 * whose host does not write the step's in scalars (its lr) keeps the captured learning rate, and
 * must differ. The same for a small net with dropout before its classifier: each launch's masks
 * come from the model step in the scalars (dropout_fwd reads it as it runs), so the launched steps
 * equal the issued ones; with the launched steps' model step frozen at the captured one (lr and step
 * still written, the model step left out of the comparison), the masks repeat and it must differ. */
#include "config.h"

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

enum { HW = 16, N = 4, CLASSES = 10, STEPS = 6, VALUES = N * HW * HW * 3 };

typedef struct run {
    dt_model m;
    dt_optim opt;
    dt_amp amp;
    float *x;
    uint8_t *u, *staging; /* the batch's pixels: backend memory, and the host buffer they come from */
    int32_t y[N];
    int ok;
} run;

static float lr_of(int s)
{
    return 0.05f * (float)(1 + s % 3);
}

/* a small convolutional net with a dropout layer before its classifier (VGG's and AlexNet's
 * pattern): its masks are seeded by the model's step, which the op reads from the scalars */
static int build_dropout_net(dt_model *m, const dt_backend *be)
{
    dt_model_begin(m, "conv-dropout", 3, CLASSES, be);
    int x = dt_layer_relu(m, dt_layer_batchnorm(m, "bn1", dt_layer_conv(m, "conv1", m->input, 8, 3, 1, 1, 0,
                                                                          DT_INIT_KAIMING_FAN_OUT)));
    x = dt_layer_flatten(m, dt_layer_adaptive_avgpool(m, x, 4, 4));
    x = dt_layer_linear(m, "fc", dt_layer_dropout(m, x, 0.5f), CLASSES, DT_INIT_TORCH_DEFAULT, DT_INIT_TORCH_DEFAULT);
    return dt_model_end(m, x);
}

static int start(run *r, const dt_backend *be, int dropout)
{
    memset(r, 0, sizeof *r);
    dt_amp_props props;
    int made = dropout ? build_dropout_net(&r->m, be) : dt_model_create(&r->m, "resnet8", 3, CLASSES, be);
    r->ok = made == DT_OK && dt_amp_resolve(1, NULL, &props) == DT_OK &&
            dt_amp_attach(&r->amp, &r->m, &props) == DT_OK && dt_model_plan(&r->m, N, HW, HW) == DT_OK &&
            dt_optim_init(&r->opt, &r->m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK &&
            (r->x = be->mem_alloc((size_t)VALUES * sizeof(float))) != NULL && (r->u = be->mem_alloc(VALUES)) != NULL &&
            (r->staging = be->host_alloc(VALUES)) != NULL;
    if (r->ok) {
        dt_model_init_weights(&r->m, 3, 0);
        r->amp.scaler.growth_interval = 2;
        r->ok = dt_amp_put_state(&r->amp.scaler, 0, &r->m) == DT_OK;
    }
    return r->ok;
}

/* step s's batch into the host buffers: pixels into the staging buffer, labels into r->y */
static void fill(run *r, int s)
{
    dt_rng g;
    dt_rng_seed(&g, 40, (uint64_t)s);
    for (size_t i = 0; i < VALUES; i++)
        r->staging[i] = (uint8_t)dt_rng_below(&g, 256);
    for (int i = 0; i < N; i++)
        r->y[i] = (int32_t)dt_rng_below(&g, CLASSES);
}

/* step s's host part: the in scalars, the pixels and the labels into the host buffers */
static void host_part(run *r, int s, int write_in)
{
    if (write_in)
        dt_model_step_write(&r->m, lr_of(s), s, 0);
    fill(r, s);
    r->ok = r->ok && dt_model_write_labels(&r->m, r->y, N) == DT_OK;
}

/* the rest of the step, issued only (what a capture keeps): uploads, normalisation, forward, loss,
 * backward, the scaler's check and the optimiser, the download of the out scalars */
static void issued_part(run *r)
{
    static const float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.25f, 0.2f, 0.3f};
    const dt_backend *be = r->m.be;
    dt_model_step_upload(&r->m);
    be->upload(r->u, r->staging, VALUES, DT_QUEUE_COPY);
    be->normalize_u8(VALUES, 3, r->u, mean, std, DT_FLOAT32, r->x);
    dt_model_labels_upload(&r->m, N);
    r->ok = r->ok && dt_model_forward(&r->m, r->x, N) == DT_OK && dt_model_loss_async(&r->m, N, 0.1f) == DT_OK &&
            dt_model_backward(&r->m, N, 0) == DT_OK;
    dt_amp_check(&r->m);
    dt_amp_update(&r->opt, &r->m, r->amp.master);
}

/* one step as dtrain runs it (train/step.c) */
static void step(run *r, int s)
{
    host_part(r, s, 1);
    issued_part(r);
    dt_amp_finish(&r->amp.scaler, NULL, &r->opt, &r->m);
}

/* everything the step leaves in backend memory, as bytes; without_model_step: the scalars' model
 * step left out (zero), so that only what it seeded can differ */
static unsigned char *state(run *r, size_t *n, int without_model_step)
{
    dt_model *m = &r->m;
    size_t mw = (size_t)m->n_weights * sizeof(float), lb = (size_t)N * CLASSES * sizeof(float);
    *n = 2 * m->weights_bytes + m->buffers_bytes + mw + lb + sizeof(dt_scalars);
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
    p += lb;
    dt_scalars sc;
    dt_model_get_scalars(m, &sc);
    if (without_model_step)
        sc.model_step = 0;
    memcpy(p, &sc, sizeof sc);
    return s;
}

static void finish(run *r)
{
    if (r->x)
        r->m.be->mem_free(r->x);
    if (r->u)
        r->m.be->mem_free(r->u);
    if (r->staging)
        r->m.be->host_free(r->staging);
    dt_optim_free(&r->opt);
    dt_amp_free(&r->amp);
    dt_model_free(&r->m);
}

/* STEPS steps both ways; write_in: the launched steps' host writes their in scalars (lr, step);
 * dropout: the small net with dropout instead of resnet8; frozen: the launched steps' in scalars keep
 * the captured step's model step (dropout's seed frozen, as an argument would be; lr and step right) */
static int compare(int write_in, int dropout, int frozen, size_t *ops, int *first_diff, double *scale)
{
    run ref, rep;
    const dt_backend *gb = dt_cpu_graph_backend();
    int ok = start(&ref, &dt_backend_cpu, dropout) && start(&rep, gb, dropout);
    int same = 1;
    dt_graph *g = NULL;
    *first_diff = -1;
    for (int s = 0; ok && s < STEPS; s++) {
        step(&ref, s);
        if (s == 0) { /* as issued (the optimiser's first step: its momentum starts) */
            step(&rep, s);
        } else { /* step 1 captures the graph; every step launches it after its host part */
            host_part(&rep, s, s == 1 || write_in);
            if (frozen && s > 1)
                rep.m.host_io[0].model_step = 1; /* the model's step when step 1 was captured */
            if (s == 1) {
                rep.ok = rep.ok && gb->graph_begin() == DT_OK;
                issued_part(&rep);
                rep.ok = rep.ok && (g = gb->graph_end()) != NULL;
                *ops = dt_cpu_graph_size(g);
            }
            if (rep.ok)
                gb->graph_launch(g);
            if (rep.ok && s > 1) /* what forward and backward count on the host (train/step.c) */
                dt_model_host_step(&rep.m);
            dt_amp_finish(&rep.amp.scaler, NULL, &rep.opt, &rep.m);
        }
        size_t na, nb;
        unsigned char *a = state(&ref, &na, frozen), *b = state(&rep, &nb, frozen);
        int eq = na == nb && !memcmp(a, b, na);
        if (!eq && *first_diff < 0)
            *first_diff = s;
        same &= eq;
        free(a);
        free(b);
    }
    *scale = ref.amp.scaler.scale;
    ok = ok && ref.ok && rep.ok;
    gb->graph_destroy(g);
    finish(&ref);
    finish(&rep);
    return ok && same;
}

int main(void)
{
    dt_log_init();
    dt_cpu_set_threads(2); /* the threaded ops replayed too (make check runs tests with OMP_NUM_THREADS=1) */
    size_t ops = 0;
    int diff;
    double scale;
    int same = compare(1, 0, 0, &ops, &diff, &scale);
    TAP_OK(same && ops > 50,
           "resnet8 O1: step 1 captured as a graph (%zu ops and copies) and launched for steps 1-%d with a new lr each step: "
           "weights, gradients, BN statistics, momentum, logits and step scalars equal the CPU backend's after every "
           "step, bit for bit (loss scale at the end %g)",
           ops, STEPS - 1, scale);
    if (diff >= 0)
        tap_diag("first difference after step %d", diff);
    TAP_OK(scale != 65536.0, "the dynamic scale moved on the backend during the run (%g)", scale);
    int broken = compare(0, 0, 0, &ops, &diff, &scale);
    TAP_OK(!broken && diff == 2,
           "control: with the launched steps' lr not written to the host buffer the graph keeps the captured one: "
           "it differs from step %d on",
           diff);
    same = compare(1, 1, 0, &ops, &diff, &scale);
    TAP_OK(same, "a net with dropout (p 0.5 before its classifier): each launch draws its step's masks, the model "
                 "step read from the scalars; equal the issued steps bit for bit after every step");
    if (diff >= 0)
        tap_diag("first difference after step %d", diff);
    broken = compare(1, 1, 1, &ops, &diff, &scale);
    TAP_OK(!broken && diff == 2,
           "control: with the launched steps' model step frozen at the captured one (lr and step written), the masks "
           "repeat: it differs from step %d on",
           diff);
    return tap_done();
}
