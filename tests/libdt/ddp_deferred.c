/* ddp_deferred.c: DDP's fences, checked by running its training steps on a backend whose ops run
 * later (tests/libdt/deferred.h: each op queued and run on the backend's own thread after a pause)
 * and on the CPU backend, which runs each op at once; run by tests/libdt/ddp_deferred.sh under
 * mpirun (2 ranks). Both run the same ops in the same order, so with every fence in place (a
 * bucket's all-reduce waits on the event recorded after its last gradient, a broadcast on one
 * recorded after the ops that wrote what it sends) the weights, BN statistics, momentum and losses
 * after the steps are equal bit for bit. Then the same run with the backend's event waits ignored
 * (the fences removed) must differ: the all-reduces read gradients not written yet. Settings: overlap
 * with small buckets (the communication thread reduces while backward goes on), no overlap, and
 * gradient accumulation, and AMP O2 (fp16 weights and gradients stored for real, BN's in fp32, the
 * reduced ones sent as fp16): there the CPU backend packs the gradients on the host and the deferred
 * one, a device to DDP (host_memory 0), through its wire in backend memory with copy ops (ddp.c,
 * "The wire"), which must give the same bits; the input comes from host pixels uploaded from a host
 * buffer on the copy queue and normalised after the upload's event each step, the lr with
 * dt_model_step_begin.
 * Prints one line per setting on rank 0; exits non-zero when any rank saw a difference where there
 * must be none, or none where there must be one. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deferred.h"
#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/backend.h"
#include "nn/model.h"
#include "train/ddp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

enum { HW = 16, B = 4, STEPS = 3, CLASSES = 10, DELAY_US = 50 };

typedef struct result {
    unsigned char *weights, *buffers, *momentum;
    size_t weights_bytes, buffers_bytes, momentum_bytes;
    double loss[STEPS];
    int ok;
} result;

static unsigned char *fetch(const dt_backend *be, const void *p, size_t bytes)
{
    unsigned char *h = malloc(bytes ? bytes : 1);
    if (!h)
        abort();
    be->mem_get(h, p, bytes);
    return h;
}

/* STEPS steps of resnet8 on be under DDP with cfg, accum micro-batches each, at AMP level amp (0 or
 * 2: fp16 storage, BN fp32); a rank's own data */
static result train(const dt_backend *be, dt_comm *c, const dt_ddp_cfg *cfg, int accum, int amp)
{
    result r = {0};
    const int mb = B / accum;
    const size_t values = (size_t)mb * HW * HW * 3;
    const float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.25f, 0.2f, 0.3f};
    dt_model m;
    dt_optim o;
    dt_ddp *d = NULL;
    uint8_t *pixels = be->host_alloc(values), *u = be->mem_alloc(values); /* host buffer, backend copy */
    dt_event *up = be->event_create();
    int32_t y[B];
    float *x = be->mem_alloc(values * sizeof(float));
    r.ok = pixels && u && up && x && dt_model_create(&m, "resnet8", 3, CLASSES, be) == DT_OK &&
           (!amp || dt_model_set_amp(&m, amp, 0, 1) == DT_OK) && dt_model_plan(&m, mb, HW, HW) == DT_OK && dt_optim_init(&o, &m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    if (!r.ok)
        return r;
    dt_model_init_weights(&m, 10 + (uint64_t)c->rank, 0); /* different on every rank until DDP's broadcast */
    m.training = 1;
    r.ok = dt_ddp_create(&d, &m, c, cfg) == DT_OK;
    dt_rng g;
    dt_rng_seed(&g, 20, (uint64_t)c->rank);
    for (int s = 0; r.ok && s < STEPS; s++) {
        dt_model_step_begin(&m, 0.05f, s, 0);
        for (int a = 0; r.ok && a < accum; a++) {
            be->event_sync(up); /* the host buffer's last upload is done: a new batch in it */
            for (size_t i = 0; i < values; i++)
                pixels[i] = (uint8_t)dt_rng_below(&g, 256);
            for (int i = 0; i < mb; i++)
                y[i] = (int32_t)dt_rng_below(&g, CLASSES);
            be->upload(u, pixels, values, DT_QUEUE_COPY);
            be->event_record(up, DT_QUEUE_COPY);
            be->event_wait(DT_QUEUE_COMPUTE, up);
            be->normalize_u8((int64_t)values, 3, u, mean, std, DT_FLOAT32, x);
            double loss;
            r.ok = dt_ddp_before_forward(d) == DT_OK && dt_model_forward(&m, x, mb) == DT_OK &&
                   dt_model_loss(&m, y, mb, 0.1f, &loss) == DT_OK &&
                   dt_ddp_backward(d, mb, a > 0, a == accum - 1) == DT_OK;
            r.loss[s] += loss;
        }
        if (r.ok)
            dt_optim_step(&o, &m, NULL);
    }
    r.ok = r.ok && dt_model_forward(&m, x, mb) == DT_OK && dt_ddp_sync_buffers(d) == DT_OK;
    r.weights_bytes = m.weights_bytes;
    r.buffers_bytes = m.buffers_bytes;
    r.momentum_bytes = (size_t)m.n_weights * sizeof(float);
    r.weights = fetch(be, m.weights, r.weights_bytes);
    r.buffers = fetch(be, m.buffers, r.buffers_bytes);
    r.momentum = fetch(be, o.momentum_buf, r.momentum_bytes);
    dt_ddp_free(d);
    dt_optim_free(&o);
    be->event_sync(up);
    be->event_destroy(up);
    be->mem_free(x);
    be->mem_free(u);
    be->host_free(pixels);
    dt_model_free(&m);
    return r;
}

static int same(const result *a, const result *b)
{
    return a->ok && b->ok && a->weights_bytes == b->weights_bytes && a->buffers_bytes == b->buffers_bytes &&
           a->momentum_bytes == b->momentum_bytes && !memcmp(a->weights, b->weights, a->weights_bytes) &&
           !memcmp(a->buffers, b->buffers, a->buffers_bytes) && !memcmp(a->momentum, b->momentum, a->momentum_bytes) &&
           !memcmp(a->loss, b->loss, sizeof a->loss);
}

static void result_free(result *r)
{
    free(r->weights);
    free(r->buffers);
    free(r->momentum);
}

static int all_max(dt_comm *c, int v)
{
    c->ops->allreduce(c, &v, &v, 1, DT_INT32, DT_MAX);
    return v;
}

int main(void)
{
    dt_log_init();
    dt_launch l;
    dt_comm *c;
    if (dt_launch_init(&l) || dt_comm_host(&c, &l, 120))
        return 1;
    if (c->size < 2) {
        fprintf(stderr, "ddp_deferred: needs at least 2 ranks (mpirun -np 2)\n");
        return 1;
    }
    struct {
        const char *name;
        dt_ddp_cfg cfg;
        int accum, fenced; /* fenced 0: the deferred backend ignores event waits */
        int amp;
    } runs[] = {
        {"overlap, 4 KiB buckets", {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .broadcast_buffers = 1}, 1, 1, 0},
        {"no overlap", {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .broadcast_buffers = 1, .no_overlap = 1}, 1,
         1, 0},
        {"overlap, 2 accumulation steps", {.bucket_bytes = 4096, .first_bucket_bytes = 1024}, 2, 1, 0},
        {"O2 fp16 gradients, overlap, 2 accumulation steps",
         {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .wire = DT_FLOAT16}, 2, 1, 2},
        {"O2 fp16 gradients, no overlap",
         {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .no_overlap = 1, .wire = DT_FLOAT16}, 1, 1, 2},
        {"overlap, fences removed", {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .broadcast_buffers = 1}, 1, 0, 0},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        result ref = train(&dt_backend_cpu, c, &runs[k].cfg, runs[k].accum, runs[k].amp);
        uint64_t ran0 = dt_deferred_ops_run();
        result def = train(dt_deferred_backend(DELAY_US, !runs[k].fenced), c, &runs[k].cfg, runs[k].accum, runs[k].amp);
        uint64_t ran = dt_deferred_ops_run() - ran0;
        int ok = all_max(c, !(ref.ok && def.ok)) == 0;
        int differ = all_max(c, !same(&ref, &def));
        int fine = ok && differ == !runs[k].fenced;
        bad += !fine;
        if (c->rank == 0)
            printf("ddp deferred, %s: %llu ops run later; training %s; weights, statistics, momentum and losses %s "
                   "the CPU backend's: %s\n",
                   runs[k].name, (unsigned long long)ran, ok ? "ran" : "FAILED",
                   differ ? "differ from" : "equal", fine ? "as they must" : "WRONG");
        result_free(&ref);
        result_free(&def);
    }
    dt_comm_free(c);
    dt_launch_finalize(&l);
    return bad ? 1 : 0;
}
