/* device.h: what libdt's engine (engine.c) needs of CUDA for device tensors, apart from the NCCL
 * collectives themselves: events between the caller's stream and a communicator's stream, memory,
 * copies and scaling on the communicator's stream (device.c with CUDA; without CUDA every function
 * fails with one line, and dt_dev_available says 0). Every stream argument is the NCCL
 * communicator's own stream (dt_comm_nccl_stream) unless named otherwise. */
#ifndef DT_DIST_DEVICE_H
#define DT_DIST_DEVICE_H

#include <stddef.h>

#include "libdt/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 in a CUDA build (whether or not a GPU is present), 0 otherwise */
int dt_dev_available(void);
/* The cudaStream_t an NCCL communicator (dt_comm_nccl) queues its collectives on; NULL for other
 * communicators. */
void *dt_comm_nccl_stream(dt_comm *c);
/* Records an event on the caller's stream (a cudaStream_t; NULL the legacy default stream) on device
 * `device`, for the engine's thread to wait on: *event is the new event. */
int dt_dev_record(int device, void *stream, void **event);
/* c's stream waits for the event (on the device), then the event is destroyed. */
int dt_dev_stream_wait(dt_comm *c, void *event);
/* Device memory on `device` (cudaMalloc); NULL after one line. */
void *dt_dev_alloc(int device, size_t bytes);
void dt_dev_free(void *p);
/* Device-to-device copy, and zeroing, queued on c's stream. */
int dt_dev_copy(dt_comm *c, void *dst, const void *src, size_t bytes);
int dt_dev_zero(dt_comm *c, void *dst, size_t bytes);
/* buf[i] *= factor for count elements of type t (floating types in their own precision, fp16 and bf16
 * through fp32; integers rounded toward zero), queued on c's stream. */
int dt_dev_scale(dt_comm *c, void *buf, size_t count, dt_dtype t, double factor);
/* Waits until c's stream has drained, within c's timeout (DT_ERR_TIMEOUT after one line). */
int dt_dev_sync(dt_comm *c);
/* Synchronous copies between host and device memory (cudaMemcpy), for results handed to the caller. */
int dt_dev_memcpy(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
