/* jobs.c: op calls kept with their arguments (jobs.h). Every op of nn/backend.h's list gets a job
 * type holding its arguments (from DT_OPS_TYPED: each parameter's type and name), a function that
 * calls the backend's op on them, and dt_job_<name>, which fills one. */
#include "config.h"

#include "nn/jobs.h"

#include <stdlib.h>
#include <string.h>

static void *job_new(size_t bytes, void (*run)(dt_job *), const dt_backend *be)
{
    dt_job *j = calloc(1, bytes);
    if (!j)
        abort();
    j->run = run;
    j->be = be;
    return j;
}

/* a descriptor argument points at the job's copy; any other argument stays as it is */
static void keep_conv(dt_job *j, void *slot)
{
    const dt_conv_desc **p = slot;
    j->desc.conv = **p;
    *p = &j->desc.conv;
}
static void keep_bn(dt_job *j, void *slot)
{
    const dt_bn_desc **p = slot;
    j->desc.bn = **p;
    *p = &j->desc.bn;
}
static void keep_pool(dt_job *j, void *slot)
{
    const dt_pool_desc **p = slot;
    j->desc.pool = **p;
    *p = &j->desc.pool;
}
static void keep_value(dt_job *j, void *slot)
{
    (void)j;
    (void)slot;
}

/* For op `name`: struct job_name (the job and its arguments), run_name (the backend's op on them)
 * and dt_job_name. */
#define MEMBER_(type, name) type name;
#define STORE_(type, name) j->a.name = name;
#define KEEP_(type, name)                                                                                     \
    _Generic(j->a.name, const dt_conv_desc *: keep_conv, const dt_bn_desc *: keep_bn,                         \
             const dt_pool_desc *: keep_pool, default: keep_value)(&j->hdr, (void *)&j->a.name);
#define STORED_(type, name) j->a.name
#define JOB(name, ret, ...)                                                                                   \
    struct job_##name {                                                                                       \
        dt_job hdr;                                                                                           \
        struct {                                                                                              \
            DT_PP_MAP_(MEMBER_, DT_PP_NOTHING_, __VA_ARGS__)                                                  \
        } a;                                                                                                  \
    };                                                                                                        \
    static void run_##name(dt_job *h)                                                                         \
    {                                                                                                         \
        struct job_##name *j = (struct job_##name *)(void *)h;                                                \
        (void)h->be->name(DT_PP_MAP_(STORED_, DT_PP_COMMA_, __VA_ARGS__));                                    \
    }                                                                                                         \
    static dt_job *job_##name(const dt_backend *be, DT_PP_MAP_(DT_PP_DECL_, DT_PP_COMMA_, __VA_ARGS__))        \
    {                                                                                                         \
        struct job_##name *j = job_new(sizeof *j, run_##name, be);                                            \
        DT_PP_MAP_(STORE_, DT_PP_NOTHING_, __VA_ARGS__)                                                       \
        DT_PP_MAP_(KEEP_, DT_PP_NOTHING_, __VA_ARGS__)                                                        \
        return &j->hdr;                                                                                       \
    }
DT_OPS_TYPED(JOB)
#undef JOB

/* normalize_u8 reads its host arrays when issued: copies of them go with the job */
static void keep_norm_arrays(dt_job *h)
{
    struct job_normalize_u8 *j = (struct job_normalize_u8 *)(void *)h;
    const int c = j->a.c;
    float *own = malloc(2 * (size_t)(c > 0 ? c : 1) * sizeof(float));
    if (!own)
        abort();
    memcpy(own, j->a.mean_host, (size_t)c * sizeof(float));
    memcpy(own + c, j->a.std_host, (size_t)c * sizeof(float));
    h->owned = own;
    j->a.mean_host = own;
    j->a.std_host = own + c;
}

/* the public names */
#define PUBLIC(name, ret, params, args)                                                                       \
    dt_job *dt_job_##name(const dt_backend *be, DT_PP_UNPAREN_ params)                                        \
    {                                                                                                         \
        dt_job *j = job_##name(be, DT_PP_UNPAREN_ args);                                                      \
        if (DT_BACKEND_OP_##name == DT_BACKEND_OP_normalize_u8)                                               \
            keep_norm_arrays(j);                                                                              \
        return j;                                                                                             \
    }
DT_OPS(PUBLIC)
#undef PUBLIC

/* an upload or a download */
struct job_copy {
    dt_job hdr;
    void *dst;
    const void *src;
    size_t bytes;
};

static void run_copy(dt_job *h)
{
    struct job_copy *j = (struct job_copy *)(void *)h;
    if (j->bytes)
        memcpy(j->dst, j->src, j->bytes);
}

dt_job *dt_job_copy(void *dst, const void *src, size_t bytes)
{
    struct job_copy *j = job_new(sizeof *j, run_copy, NULL);
    j->dst = dst;
    j->src = src;
    j->bytes = bytes;
    return &j->hdr;
}

void dt_job_run(dt_job *j)
{
    j->run(j);
}

void dt_job_free(dt_job *j)
{
    if (!j)
        return;
    free(j->owned);
    free(j);
}
