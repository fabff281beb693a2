/* backend_cpu.c: the CPU backend's op table and its thread setting. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "nn/cpu/cpu.h"

/* every op but the convolutions, shared by both tables */
#define CPU_COMMON_OPS                                                                               \
    .bn_fwd_train = dt_cpu_bn_fwd_train, .bn_fwd_infer = dt_cpu_bn_fwd_infer, .bn_bwd = dt_cpu_bn_bwd,    \
    .relu_fwd = dt_cpu_relu_fwd, .relu_bwd = dt_cpu_relu_bwd, .add_fwd = dt_cpu_add_fwd,                \
    .copy_grad = dt_cpu_copy_grad, .maxpool_fwd = dt_cpu_maxpool_fwd, .maxpool_bwd = dt_cpu_maxpool_bwd,  \
    .avgpool_fwd = dt_cpu_avgpool_fwd, .avgpool_bwd = dt_cpu_avgpool_bwd, .linear_fwd = dt_cpu_linear_fwd, \
    .linear_bwd = dt_cpu_linear_bwd, .dropout_fwd = dt_cpu_dropout_fwd, .dropout_bwd = dt_cpu_dropout_bwd, \
    .flatten_fwd = dt_cpu_flatten_fwd, .flatten_bwd = dt_cpu_flatten_bwd, .xent = dt_cpu_xent,          \
    .sgd = dt_cpu_sgd, .fill = dt_cpu_fill, .scale = dt_cpu_scale, .round_half = dt_cpu_round_half,            \
    .unscale_check = dt_cpu_unscale_check, .normalize_u8 = dt_cpu_normalize_u8, .host_memory = 1,           \
    .mem_alloc = dt_cpu_mem_alloc, .mem_free = dt_cpu_mem_free, .mem_put = dt_cpu_mem_copy,                  \
    .mem_get = dt_cpu_mem_copy, .sync = dt_cpu_sync

const dt_backend dt_backend_cpu_ref = {
    .name = "cpu-ref",
    .conv_workspace = dt_cpu_conv_workspace,
    .conv_fwd = dt_cpu_conv_fwd,
    .conv_bwd_data = dt_cpu_conv_bwd_data,
    .conv_bwd_filter = dt_cpu_conv_bwd_filter,
    CPU_COMMON_OPS,
};

/* the convolutions: oneDNN's where this build has it, else the reference's */
#ifdef HAVE_DNNL
#define CPU_CONV(op) dt_cpu_dnnl_conv_##op
#else
#define CPU_CONV(op) dt_cpu_conv_##op
#endif

const dt_backend dt_backend_cpu = {
    .name = "cpu",
    .conv_workspace = CPU_CONV(workspace),
    .conv_fwd = CPU_CONV(fwd),
    .conv_bwd_data = CPU_CONV(bwd_data),
    .conv_bwd_filter = CPU_CONV(bwd_filter),
    CPU_COMMON_OPS,
};

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

void dt_cpu_sync(void)
{
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
