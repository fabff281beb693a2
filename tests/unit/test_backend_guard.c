/* test_backend_guard.c: host code never touches a backend's memory except through mem_put/mem_get.
 *
 * A device backend (CUDA) has memory the host cannot read. Without a GPU, this test stands in for
 * one: the "guarded" backend runs the CPU backend's ops, but its memory is mapped PROT_NONE except
 * while one of its own calls runs, so any host access to a model's weights, gradients, activations,
 * momentum or master weights outside the backend faults (the test then dies with SIGSEGV: a failure).
 * Training steps (O0 to O3: fp32 master weights, the loss scaler), a state-dict save and load and
 * a checkpoint save and load run on it, and must give bit for bit what the plain CPU backend gives.
 * Op table v2's promise that a step runs without the host (nn/scalars.h) is counted here: mem_put
 * and mem_get are the host's reads and writes of the backend's memory, and inside a step there must
 * be none (the step's inputs travel by upload, its results by one download at its end; the loss and
 * hits are read only at print steps). A control reads the loss on the host every step and must be
 * counted. */
#include "config.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/backend_wrap.h"
#include "nn/model.h"
#include "nn/state.h"
#include "tap.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

/* --- the guarded backend: regions mapped PROT_NONE outside its calls ---------------------------- */

#define MAX_REGIONS 256
static struct {
    void *p;
    size_t bytes;
} regions[MAX_REGIONS];
static int n_regions, open_depth;
static long page;

static void set_all(int prot)
{
    for (int i = 0; i < n_regions; i++)
        if (regions[i].p && mprotect(regions[i].p, regions[i].bytes, prot) != 0) {
            perror("mprotect");
            abort();
        }
}
static void enter(void)
{
    if (open_depth++ == 0)
        set_all(PROT_READ | PROT_WRITE);
}
static void leave(void)
{
    if (--open_depth == 0)
        set_all(PROT_NONE);
}

static void *g_alloc(size_t bytes)
{
    size_t len = ((bytes ? bytes : 1) + (size_t)page - 1) / (size_t)page * (size_t)page;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zero-filled */
    if (p == MAP_FAILED || n_regions == MAX_REGIONS)
        return NULL;
    regions[n_regions].p = p;
    regions[n_regions++].bytes = len;
    return p;
}
static void g_free(void *p)
{
    for (int i = 0; p && i < n_regions; i++)
        if (regions[i].p == p) {
            munmap(p, regions[i].bytes);
            regions[i] = regions[--n_regions];
            return;
        }
}
/* host reads and writes of the backend's memory (mem_get, mem_put): counted */
static long host_reads, host_writes;
static void g_put(void *dst, const void *src, size_t n)
{
    host_writes++;
    enter();
    memcpy(dst, src, n);
    leave();
}
static void g_get(void *dst, const void *src, size_t n)
{
    host_reads++;
    enter();
    memcpy(dst, src, n);
    leave();
}
/* the asynchronous copies from and to host buffers: issued like ops, not counted */
static void g_copy_queued(void *dst, const void *src, size_t n, int queue)
{
    (void)queue;
    enter();
    memcpy(dst, src, n);
    leave();
}

/* each op of nn/backend.h's list: wrap_<name> opens the memory, runs the CPU backend's op, closes the
 * memory again and returns what the op returned */
#define GUARD(name, ret, params, args) DT_WRAP_AROUND(name, ret, params, enter(), dt_backend_cpu.name args, leave())
DT_OPS(GUARD)
#undef GUARD

static dt_backend guarded;

static void make_guarded(void)
{
    guarded = dt_backend_cpu;
    guarded.name = "cpu-guarded";
    guarded.host_memory = 0;
    guarded.mem_alloc = g_alloc;
    guarded.mem_free = g_free;
    guarded.mem_put = g_put;
    guarded.mem_get = g_get;
    guarded.upload = g_copy_queued;
    guarded.download = g_copy_queued;
    DT_WRAP_SET(&guarded, &dt_backend_cpu, DT_OPS);
}

/* --- training on either backend ---------------------------------------------------------------- */

#define N 8
#define S 16
#define CLASSES 10

#define STEPS 6
#define PRINT_EVERY 3 /* the steps after which the host reads the step's numbers, as dtrain prints */

typedef struct trained {
    float *weights, *buffers, *momentum, *master; /* host copies */
    size_t wb, bb, mb; /* bytes of weights, buffers (as stored) and of momentum and master weights (fp32) */
    double loss[STEPS / PRINT_EVERY], loss_sum[STEPS / PRINT_EVERY], scale; /* read at the print steps */
    int64_t hits[STEPS / PRINT_EVERY];
    long accesses[STEPS]; /* host reads and writes of the backend's memory during each step */
    int ckpt_ok;          /* the checkpoint round trip gave the same state */
} trained;

static void get_copy(const dt_backend *be, void *dst, const void *src, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    be->mem_get(h, src, bytes);
    memcpy(dst, &h, sizeof h);
}

/* STEPS steps of resnet8 at opt level `level` on fixed random uint8 batches, as dtrain runs a step
 * (step.c): the step's lr (a schedule: it changes every step), number and signal uploaded, the
 * batch's pixels and labels uploaded from host buffers and normalised on the backend, forward, the
 * loss on the backend, backward, the scaler's step; the host reads the step's numbers (loss, hits)
 * only every PRINT_EVERY steps. host_loss: the loss read back every step instead (dt_model_loss, as
 * a host loop would: the control, which must show accesses). The state afterwards, and (when
 * ckpt) a checkpoint saved and loaded back into a second model. */
static int train(const dt_backend *be, int level, const char *ckpt, int host_loss, trained *t)
{
    dt_model m;
    dt_optim opt;
    dt_amp amp;
    int ok = dt_model_create(&m, "resnet8", 3, CLASSES, be) == DT_OK;
    dt_model_init_weights(&m, 5, 0);
    dt_amp_props props;
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = -1, .master_weights = -1};
    ok = ok && dt_amp_resolve(level, &ov, &props) == DT_OK && dt_amp_attach(&amp, &m, &props) == DT_OK &&
         dt_model_plan(&m, N, S, S) == DT_OK && dt_optim_init(&opt, &m, 0.1f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    if (level == 1) /* a dynamic scale that grows within the run, so that the scaler's update shows */
        amp.scaler.growth_interval = 3;
    ok = ok && dt_amp_put_state(&amp.scaler, 0, &m) == DT_OK;
    enum { VALUES = N * S * S * 3 };
    float *x = be->mem_alloc((size_t)VALUES * sizeof(float));
    uint8_t *u = be->mem_alloc(VALUES), *staging = be->host_alloc(VALUES);
    dt_event *up = be->event_create();
    int32_t y[N];
    float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.25f, 0.2f, 0.3f};
    dt_rng g;
    dt_rng_seed(&g, 11, 0);
    for (int s = 0; ok && s < STEPS; s++) {
        long before = host_reads + host_writes;
        dt_model_step_begin(&m, 0.1f * (float)(1 + s % 3) / 3.0f, s, 0);
        be->event_sync(up);
        for (size_t i = 0; i < VALUES; i++)
            staging[i] = (uint8_t)dt_rng_below(&g, 256);
        for (int i = 0; i < N; i++)
            y[i] = (int32_t)dt_rng_below(&g, CLASSES);
        be->upload(u, staging, VALUES, DT_QUEUE_COPY);
        be->event_record(up, DT_QUEUE_COPY);
        be->event_wait(DT_QUEUE_COMPUTE, up);
        be->normalize_u8(VALUES, 3, u, mean, std, DT_FLOAT32, x);
        double loss;
        const dt_scalars *out;
        ok = dt_model_upload_labels(&m, y, N) == DT_OK && dt_model_forward(&m, x, N) == DT_OK &&
             (host_loss ? dt_model_loss(&m, y, N, 0.1f, &loss) : dt_model_loss_async(&m, N, 0.1f)) == DT_OK &&
             dt_model_backward(&m, N, 0) == DT_OK &&
             dt_amp_step(&amp.scaler, NULL, &opt, &m, amp.master, &out) == DT_OK;
        ok = ok && !out->skipped;
        t->accesses[s] = host_reads + host_writes - before;
        if ((s + 1) % PRINT_EVERY == 0) { /* a progress line: the step's numbers, then cleared */
            dt_scalars sc;
            int k = s / PRINT_EVERY;
            ok = ok && dt_model_get_scalars(&m, &sc) == DT_OK;
            dt_model_put_metrics(&m, &(dt_scalars){0}); /* cleared */
            t->loss[k] = sc.loss;
            t->loss_sum[k] = sc.loss_sum;
            t->hits[k] = sc.hits5;
            ok = ok && sc.rows == (int64_t)N * PRINT_EVERY;
        }
    }
    t->wb = m.weights_bytes;
    t->bb = m.buffers_bytes;
    t->mb = (size_t)m.n_weights * sizeof(float);
    t->scale = amp.scaler.scale;
    get_copy(be, &t->weights, m.weights, t->wb);
    get_copy(be, &t->buffers, m.buffers, t->bb);
    get_copy(be, &t->momentum, opt.momentum_buf, t->mb);
    t->master = NULL;
    if (amp.master)
        get_copy(be, &t->master, amp.master, t->mb);
    t->ckpt_ok = 0;
    if (ok && ckpt) { /* save, then load into a fresh model and optimiser, and compare */
        dt_progress pr = {.epoch = 1, .step = 2, .global_step = 3, .best_top1 = 12.5};
        int ok2 = dt_checkpoint_save(ckpt, &m, &opt, &amp, NULL, &pr, "{}") == DT_OK;
        dt_model m2;
        dt_optim o2;
        dt_amp a2;
        dt_progress p2;
        ok2 = ok2 && dt_model_create(&m2, "resnet8", 3, CLASSES, be) == DT_OK && dt_amp_attach(&a2, &m2, &props) == DT_OK &&
             dt_optim_init(&o2, &m2, 0.1f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK &&
             dt_checkpoint_load(ckpt, &m2, &o2, &a2, NULL, &p2) == DT_OK;
        float *w2, *mo2;
        get_copy(be, &w2, m2.weights, m2.weights_bytes);
        get_copy(be, &mo2, o2.momentum_buf, t->mb);
        ok2 = ok2 && m2.weights_bytes == t->wb && !memcmp(w2, t->weights, t->wb) && !memcmp(mo2, t->momentum, t->mb) &&
              p2.global_step == 3 && a2.scaler.scale == amp.scaler.scale;
        if (ok2 && a2.master) {
            float *ma2;
            get_copy(be, &ma2, a2.master, t->mb);
            ok2 = !memcmp(ma2, t->master, t->mb);
            free(ma2);
        }
        t->ckpt_ok = ok2;
        free(w2);
        free(mo2);
        dt_optim_free(&o2);
        dt_amp_free(&a2);
        dt_model_free(&m2);
    }
    be->event_sync(up);
    be->event_destroy(up);
    be->mem_free(x);
    be->mem_free(u);
    be->host_free(staging);
    dt_optim_free(&opt);
    dt_amp_free(&amp);
    dt_model_free(&m);
    return ok;
}

static int same(const trained *a, const trained *b)
{
    return a->wb == b->wb && a->bb == b->bb && a->mb == b->mb && !memcmp(a->weights, b->weights, a->wb) &&
           !memcmp(a->buffers, b->buffers, a->bb) && !memcmp(a->momentum, b->momentum, a->mb) &&
           (!a->master) == (!b->master) && (!a->master || !memcmp(a->master, b->master, a->mb)) &&
           !memcmp(a->loss, b->loss, sizeof a->loss) && !memcmp(a->loss_sum, b->loss_sum, sizeof a->loss_sum) &&
           !memcmp(a->hits, b->hits, sizeof a->hits) && a->scale == b->scale;
}

static void drop(trained *t)
{
    free(t->weights);
    free(t->buffers);
    free(t->momentum);
    free(t->master);
}

int main(void)
{
    dt_log_init();
    dt_cpu_set_threads(2);
    page = sysconf(_SC_PAGESIZE);
    make_guarded();
    char dir[] = "/tmp/test-guard-XXXXXX", path[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/ckpt.h5", dir);

    /* the guard itself: a host read of guarded memory outside a call faults */
    float *probe = guarded.mem_alloc(4096);
    pid_t pid = fork();
    if (pid == 0) {
        volatile float v = probe[0]; /* must fault */
        (void)v;
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    /* killed by SIGSEGV, or (under ASan, whose handler reports the fault) exited non-zero */
    TAP_OK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !(WIFSIGNALED(st) && WTERMSIG(st) != SIGSEGV),
           "the guard works: a host read of its memory faults (child %s %d)", WIFSIGNALED(st) ? "signal" : "exit",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    guarded.mem_free(probe);

    for (int level = 0; level <= 3; level++) {
        trained a, b;
        int ok_a = train(&dt_backend_cpu, level, NULL, 0, &a);
        int ok_b = train(&guarded, level, path, 0, &b);
        TAP_OK(ok_a && ok_b, "O%d: %d training steps%s on the guarded backend with no host access to its memory",
               level, STEPS, level == 2 ? " (fp32 master weights, loss scaler)" : level ? " (loss scaler)" : "");
        TAP_OK(b.ckpt_ok, "O%d: a checkpoint saved and loaded through the guarded backend holds the same state",
               level);
        TAP_OK(same(&a, &b),
               "O%d: weights, BN statistics, momentum%s and the numbers read at print steps equal the CPU backend's, "
               "bit for bit",
               level, level == 2 ? ", master weights, loss scale" : level ? ", loss scale" : "");
        long inside = 0;
        for (int s = 0; s < STEPS; s++)
            inside += b.accesses[s];
        TAP_OK(inside == 0, "O%d: no host read or write of the backend's memory inside any of the %d steps (%ld); "
               "the step's numbers read only at the %d print steps", level, STEPS, inside, STEPS / PRINT_EVERY);
        if (level == 1)
            TAP_OK(b.scale == 65536.0 * 4, "O1: the dynamic scale grew on the backend every 3 clean steps: %g",
                   b.scale);
        drop(&a);
        drop(&b);
    }
    /* the control: the loss read back by the host every step (a mem_put of the labels, a mem_get of
     * the loss) is seen */
    trained c;
    int ok_c = train(&guarded, 0, NULL, 1, &c);
    TAP_OK(ok_c && c.accesses[0] == 2 && c.accesses[STEPS - 1] == 2,
           "control: reading the loss on the host every step counts 2 accesses a step (%ld, %ld)", c.accesses[0],
           c.accesses[STEPS - 1]);
    drop(&c);
    unlink(path);
    rmdir(dir);
    return tap_done();
}
