/* jobs.h: an op call kept with its arguments, to run later: what the CPU backend's graphs
 * (nn/cpu/capture.c) record and replay, and what the deferred test backend (tests/libdt/deferred.c)
 * queues for its threads.
 *
 * dt_job_<name>(be, parameters...) exists for every op of nn/backend.h's list (DT_OPS) and keeps the
 * call: running the job calls be-><name> with the same arguments. Descriptors (conv, BN, pool) are
 * copied into the job, as are normalize_u8's host arrays (the caller's may be gone when it runs);
 * every other argument is kept as it is: pointers stay pointers, so a job run again reads and writes
 * the same memory, which is what a captured CUDA graph does. dt_job_copy keeps a copy (an upload or
 * a download: memcpy of bytes when it runs, reading the source then). Jobs chain through next (the
 * caller's list); out of memory aborts (the callers cannot fail where they record). */
#ifndef DT_NN_JOBS_H
#define DT_NN_JOBS_H

#include <stddef.h>

#include "nn/backend.h"

typedef struct dt_job dt_job;
struct dt_job {
    void (*run)(dt_job *j);
    dt_job *next;
    const dt_backend *be; /* whose op runs */
    union {               /* the descriptor the op reads, copied */
        dt_conv_desc conv;
        dt_bn_desc bn;
        dt_pool_desc pool;
    } desc;
    void *owned; /* freed with the job (normalize_u8's copies of its host arrays) */
};

#define DT_JOB_DECLARE(name, ret, params, args) dt_job *dt_job_##name(const dt_backend *be, DT_PP_UNPAREN_ params);
DT_OPS(DT_JOB_DECLARE)
#undef DT_JOB_DECLARE

dt_job *dt_job_copy(void *dst, const void *src, size_t bytes);
/* runs j (again: a job may run any number of times) */
void dt_job_run(dt_job *j);
/* frees j alone (not what follows it) */
void dt_job_free(dt_job *j);

#endif
