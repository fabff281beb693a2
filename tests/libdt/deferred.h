/* deferred.h: test backends that run dt_backend_cpu's ops later, as a device does: the deferred
 * backend (below) and the record-and-replay backend (at the end).
 *
 * Each op with no result is queued and returns at once; a thread per queue (DT_QUEUE_COMPUTE,
 * DT_QUEUE_COPY) runs its queue's ops in order, each after a pause of delay_us microseconds, so the
 * host and the communicator run far ahead of them. Only events order a queue with the host, another
 * queue or a communicator (nn/backend.h, "Queues and fences"): code that reads backend memory
 * without waiting on one reads it before the ops wrote it, and its results change. Ops that return
 * a value (the planning ops, xent, unscale_check), mem_get, mem_put, mem_free and reserve_scratch
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

/* The record-and-replay backend (a process uses it or the deferred one): dt_backend_cpu's ops run
 * at once, and while recording each one is also kept with its arguments (descriptors and
 * normalize_u8's host arrays copied); dt_replay_run runs the kept sequence again, with the same
 * pointers and values, as a captured CUDA graph would replay a step. What a step changes between
 * steps must therefore live in backend memory (an uploaded batch), not in arguments. */
const dt_backend *dt_replay_backend(void);
/* on: start a new recording (the last one dropped); 0: stop */
void dt_replay_record(int on);
/* runs the recording; returns its number of ops */
size_t dt_replay_run(void);

#endif
