/* test_backend_guard.c: host code never touches a backend's memory except through mem_put/mem_get.
 *
 * A device backend (CUDA) has memory the host cannot read. Without a GPU, this test stands in for
 * one: the "guarded" backend runs the CPU backend's ops, but its memory is mapped PROT_NONE except
 * while one of its own calls runs, so any host access to a model's weights, gradients, activations,
 * momentum or master weights outside the backend faults (the test then dies with SIGSEGV: a failure).
 * Training steps (O0, and O2 with fp32 master weights and the loss scaler), a state-dict save and
 * load and a checkpoint save and load run on it, and must give bit for bit what the plain CPU
 * backend gives. */
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

#include "nn/model.h"
#include "nn/state.h"
#include "tap.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/sgd.h"
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
static void g_put(void *dst, const void *src, size_t n)
{
    enter();
    memcpy(dst, src, n);
    leave();
}
static void g_get(void *dst, const void *src, size_t n)
{
    enter();
    memcpy(dst, src, n);
    leave();
}

/* each op of nn/backend.h's list: g_<name> opens the memory, runs the CPU backend's op, closes the
 * memory again and returns what the op returned. RETURN_<type> is the end of the wrapper for each
 * return type in the list. */
#define CPU dt_backend_cpu
#define RETURN_void(call) call; leave();
#define RETURN_int(call) int r_ = call; leave(); return r_;
#define RETURN_double(call) double r_ = call; leave(); return r_;
#define RETURN_size_t(call) size_t r_ = call; leave(); return r_;
#define GUARD(name, ret, params, args) \
    static ret g_##name params         \
    {                                  \
        enter();                       \
        RETURN_##ret(CPU.name args)    \
    }
DT_OPS(GUARD)

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
#define SET(name, ret, params, args) guarded.name = g_##name;
    DT_OPS(SET)
#undef SET
}

/* --- training on either backend ---------------------------------------------------------------- */

#define N 8
#define S 16
#define CLASSES 10

typedef struct trained {
    float *weights, *buffers, *momentum, *master; /* host copies */
    size_t wb, bb, mb; /* bytes of weights, buffers (as stored) and of momentum and master weights (fp32) */
    double loss[3], scale;
    int ckpt_ok;         /* the checkpoint round trip gave the same state */
} trained;

static void get_copy(const dt_backend *be, void *dst, const void *src, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    be->mem_get(h, src, bytes);
    memcpy(dst, &h, sizeof h);
}

/* 3 steps of resnet8 at opt level `level` on fixed random uint8 batches; the state afterwards, and
 * (when ckpt) a checkpoint saved and loaded back into a second model */
static int train(const dt_backend *be, int level, const char *ckpt, trained *t)
{
    dt_model m;
    dt_sgd opt;
    dt_amp amp;
    int ok = dt_model_create(&m, "resnet8", 3, CLASSES, be) == DT_OK;
    dt_model_init_weights(&m, 5, 0);
    dt_amp_props props;
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = -1, .master_weights = -1};
    ok = ok && dt_amp_resolve(level, &ov, &props) == DT_OK && dt_amp_attach(&amp, &m, &props) == DT_OK &&
         dt_model_plan(&m, N, S, S) == DT_OK && dt_sgd_init(&opt, &m, 0.1f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    float *x = be->mem_alloc((size_t)N * S * S * 3 * sizeof(float));
    uint8_t u[N * S * S * 3];
    int32_t y[N];
    float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.25f, 0.2f, 0.3f};
    dt_rng g;
    dt_rng_seed(&g, 11, 0);
    for (int s = 0; ok && s < 3; s++) {
        for (size_t i = 0; i < sizeof u; i++)
            u[i] = (uint8_t)dt_rng_below(&g, 256);
        for (int i = 0; i < N; i++)
            y[i] = (int32_t)dt_rng_below(&g, CLASSES);
        be->normalize_u8((int64_t)sizeof u, 3, u, mean, std, DT_FLOAT32, x);
        float z[N * CLASSES];
        int skipped;
        ok = dt_model_forward(&m, x, N) == DT_OK && dt_model_loss(&m, y, N, 0.1f, &t->loss[s]) == DT_OK &&
             dt_model_backward(&m, N, 0) == DT_OK &&
             dt_amp_step(&amp.scaler, NULL, &opt, &m, amp.master, 0.1f, s, 0, &skipped) == DT_OK;
        dt_model_get_logits(&m, N, z); /* host copy: readable */
        ok = ok && z[0] == z[0];
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
        int ok2 = dt_checkpoint_save(ckpt, &m, &opt, &amp, &pr, "{}") == DT_OK;
        dt_model m2;
        dt_sgd o2;
        dt_amp a2;
        dt_progress p2;
        ok2 = ok2 && dt_model_create(&m2, "resnet8", 3, CLASSES, be) == DT_OK && dt_amp_attach(&a2, &m2, &props) == DT_OK &&
             dt_sgd_init(&o2, &m2, 0.1f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK &&
             dt_checkpoint_load(ckpt, &m2, &o2, &a2, &p2) == DT_OK;
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
        dt_sgd_free(&o2);
        dt_amp_free(&a2);
        dt_model_free(&m2);
    }
    be->mem_free(x);
    dt_sgd_free(&opt);
    dt_amp_free(&amp);
    dt_model_free(&m);
    return ok;
}

static int same(const trained *a, const trained *b)
{
    return a->wb == b->wb && a->bb == b->bb && a->mb == b->mb && !memcmp(a->weights, b->weights, a->wb) &&
           !memcmp(a->buffers, b->buffers, a->bb) && !memcmp(a->momentum, b->momentum, a->mb) &&
           (!a->master) == (!b->master) && (!a->master || !memcmp(a->master, b->master, a->mb)) &&
           !memcmp(a->loss, b->loss, sizeof a->loss) && a->scale == b->scale;
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
        int ok_a = train(&dt_backend_cpu, level, NULL, &a);
        int ok_b = train(&guarded, level, path, &b);
        TAP_OK(ok_a && ok_b, "O%d: 3 training steps%s on the guarded backend with no host access to its memory",
               level, level == 2 ? " (fp32 master weights, loss scaler)" : level ? " (loss scaler)" : "");
        TAP_OK(b.ckpt_ok, "O%d: a checkpoint saved and loaded through the guarded backend holds the same state",
               level);
        TAP_OK(same(&a, &b), "O%d: weights, BN statistics, momentum%s and losses equal the CPU backend's, bit for bit",
               level, level == 2 ? ", master weights, loss scale" : level ? ", loss scale" : "");
        drop(&a);
        drop(&b);
    }
    unlink(path);
    rmdir(dir);
    return tap_done();
}
