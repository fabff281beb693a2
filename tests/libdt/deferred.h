/* deferred.h: a test backend that runs dt_backend_cpu's ops later, as a device does.
 *
 * Each op with no result is queued and returns at once; a thread per queue (DT_QUEUE_COMPUTE,
 * DT_QUEUE_COPY) runs its queue's ops in order, each after a pause of delay_us microseconds, so the
 * host and the communicator run far ahead of them. Only events order a queue with the host, another
 * queue or a communicator (nn/backend.h, "Queues and fences"): code that reads backend memory
 * without waiting on one reads it before the ops wrote it, and its results change. Ops that return
 * a value (the planning ops), mem_get, mem_put, mem_free and reserve_scratch
 * wait for the compute queue first, as they do on CUDA. Descriptors and normalize_u8's host arrays
 * are copied when the op is queued (the caller's may be gone when it runs). host_memory is 0, so
 * code takes a device backend's paths; the memory is host memory all the same (a communicator may
 * read it, as MPI does in the tests). */
#ifndef DT_TESTS_DEFERRED_H
#define DT_TESTS_DEFERRED_H

#include <stdint.h>

#include "nn/backend.h"

/* The backend (one per process; its threads start on the first call). With ignore_events, event
 * waits return at once: the fences removed, to show that a test notices. */
const dt_backend *dt_deferred_backend(unsigned delay_us, int ignore_events);
/* ops run so far on the queues */
uint64_t dt_deferred_ops_run(void);

#endif
