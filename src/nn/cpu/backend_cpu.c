/* backend_cpu.c: the CPU backend's op table, its scratch and its thread setting. The CPU ops store
 * fp32, fp16 and bf16; only a linear layer on reduced operands uses the backend's scratch (to widen
 * them); tensors are indexed with int64_t (no limit on a tensor's elements). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "nn/cpu/cpu.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

/* memory: host memory, plain C; planning: nothing to reserve, no limit on a tensor */
#define CPU_MEMORY                                                                                            \
    .host_memory = 1, .storage_types = 1u << DT_FLOAT32 | 1u << DT_FLOAT16 | 1u << DT_BFLOAT16,               \
    .fuses = DT_FUSE_ALL, /* BN's passes take the ReLU, the residual, the activations (bn.c) */               \
    .mem_alloc = dt_cpu_mem_alloc, .mem_free = dt_cpu_mem_free, .mem_put = dt_cpu_mem_copy,                   \
    .mem_get = dt_cpu_mem_copy, .host_alloc = dt_cpu_mem_alloc, .host_free = dt_cpu_mem_free,                \
    .upload = dt_cpu_mem_copy_queued, .download = dt_cpu_mem_copy_queued,                                     \
    .event_create = dt_cpu_event_create, .event_destroy = dt_cpu_event_destroy,                               \
    .event_record = dt_cpu_event_record, .event_wait = dt_cpu_event_wait, .event_sync = dt_cpu_event_sync,    \
    .timer_create = dt_cpu_timer_create, .timer_destroy = dt_cpu_timer_destroy,                               \
    .timer_record = dt_cpu_timer_record, .timer_ms = dt_cpu_timer_ms,                                         \
    .reserve_scratch = dt_cpu_reserve_scratch,                                                                \
    .max_tensor_elems = INT64_MAX

/* .<name> = dt_cpu_<name> for each op of nn/backend.h's list; for oneDNN's convolutions, dt_cpu_dnnl_<name> */
#define CPU_OP(name, ret, params, args) .name = dt_cpu_##name,
#define CPU_DNNL_OP(name, ret, params, args) .name = dt_cpu_dnnl_##name,

const dt_backend dt_backend_cpu_ref = {
    .name = "cpu-ref",
    CPU_MEMORY,
    DT_OPS(CPU_OP)
};

/* the convolutions: oneDNN's where this build has it, else the reference's */
const dt_backend dt_backend_cpu = {
    .name = "cpu",
    CPU_MEMORY,
#ifdef HAVE_DNNL
    DT_CONV_OPS(CPU_DNNL_OP)
#else
    DT_CONV_OPS(CPU_OP)
#endif
    DT_OTHER_OPS(CPU_OP)
};

#ifndef HAVE_DNNL
void dt_cpu_set_half_kernels(int on)
{
    (void)on; /* without oneDNN every reduced convolution widens into fp32 */
}

int dt_cpu_half_kernels_for(const dt_conv_desc *d)
{
    (void)d;
    return 0;
}

void dt_cpu_set_conv_layout(int mode)
{
    (void)mode; /* without oneDNN every convolution runs on NHWC (conv.c) */
}

int dt_cpu_conv_blocked(const dt_conv_desc *d)
{
    (void)d;
    return 0;
}
#endif

void *dt_cpu_mem_alloc(size_t bytes)
{
    void *p = NULL;
    bytes = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    if (posix_memalign(&p, 64, bytes))
        return NULL;
    memset(p, 0, bytes);
    return p;
}

void dt_cpu_mem_free(void *p)
{
    free(p);
}

void dt_cpu_mem_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
}

/* upload and download: at once, like every CPU op */
void dt_cpu_mem_copy_queued(void *dst, const void *src, size_t bytes, int queue)
{
    (void)queue;
    dt_cpu_mem_copy(dst, src, bytes);
}

struct dt_event {
    int unused;
};
static dt_event the_event;

dt_event *dt_cpu_event_create(void)
{
    return &the_event;
}

void dt_cpu_event_destroy(dt_event *e)
{
    (void)e;
}

void dt_cpu_event_record(dt_event *e, int queue)
{
    (void)e;
    (void)queue;
}

void dt_cpu_event_wait(int queue, dt_event *e)
{
    (void)queue;
    (void)e;
}

void dt_cpu_event_sync(dt_event *e)
{
    (void)e;
}

/* timers: the host's clock when recorded (the op before has run by then) */
struct dt_timer {
    double seconds;
};

dt_timer *dt_cpu_timer_create(void)
{
    return calloc(1, sizeof(dt_timer));
}

void dt_cpu_timer_destroy(dt_timer *t)
{
    free(t);
}

void dt_cpu_timer_record(dt_timer *t)
{
    t->seconds = dt_seconds();
}

double dt_cpu_timer_ms(dt_timer *a, dt_timer *b)
{
    return 1e3 * (b->seconds - a->seconds);
}

/* one scratch for every model of the process (one op runs at a time): it only grows */
static void *scratch;
static size_t scratch_bytes;

int dt_cpu_reserve_scratch(size_t bytes)
{
    if (bytes <= scratch_bytes)
        return DT_OK;
    void *p = dt_cpu_mem_alloc(bytes);
    if (!p) {
        dt_error("cpu: cannot allocate %.1f MiB of scratch", bytes / 1048576.0);
        return DT_ERR_NOMEM;
    }
    free(scratch);
    scratch = p;
    scratch_bytes = bytes;
    return DT_OK;
}

void *dt_cpu_scratch(void)
{
    return scratch;
}

static int cpu_threads = 1;

void dt_cpu_set_threads(int n)
{
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        char *end = NULL;
        long v = env ? strtol(env, &end, 10) : 0;
        n = (env && *env && end && *end == '\0' && v > 0 && v <= 4096) ? (int)v : 0; /* else: all cores */
#ifdef _OPENMP
        if (n <= 0)
            n = omp_get_num_procs();
#endif
        if (n <= 0)
            n = 1;
    }
    cpu_threads = n;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(n);
#endif
}

int dt_cpu_threads(void)
{
    return cpu_threads;
}
