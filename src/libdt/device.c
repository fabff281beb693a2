/* device.c: the CUDA helpers of device.h for libdt's engine: events between the caller's stream and
 * an NCCL communicator's stream, device memory, and copies, zeroing and scaling queued on that
 * stream (the kernel is scale.cu's). Without CUDA every function fails with one line.
 * The caller's thread keeps its current device: functions that take a device switch to it and back
 * (the caller may be a framework's thread, whose current device is its own business); those that
 * take a communicator bind the calling thread to the communicator's device (bind_thread), which is
 * what the engine's threads want. */
#include "config.h"

#include "libdt/device.h"

#include <stdint.h>

#include "util/check.h"
#include "util/log.h"

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

#include "libdt/scale.h"
#include "util/clock.h"

int dt_dev_available(void)
{
    return 1;
}

/* Makes `device` current and says in *prev which one was, for leave_device. */
static int enter_device(int device, int *prev)
{
    *prev = -1;
    DT_CHECK_CUDA(cudaGetDevice(prev));
    if (*prev != device)
        DT_CHECK_CUDA(cudaSetDevice(device));
    return DT_OK;
}

static void leave_device(int device, int prev)
{
    if (prev >= 0 && prev != device)
        cudaSetDevice(prev);
}

/* c's stream with c's device current on this thread; NULL after one line for a communicator that is
 * not NCCL's device one */
static cudaStream_t comm_stream(dt_comm *c, const char *what)
{
    void *s = dt_comm_nccl_stream(c);
    if (!s) {
        dt_error("%s: the %s communicator has no CUDA stream (device tensors need the NCCL one)", what,
                 c ? c->ops->name : "(none)");
        return NULL;
    }
    if (c->ops->bind_thread(c) != DT_OK)
        return NULL;
    return (cudaStream_t)s;
}

int dt_dev_record(int device, void *stream, void **event)
{
    *event = NULL;
    int prev, rc = DT_OK;
    DT_TRY(enter_device(device, &prev));
    cudaEvent_t ev = NULL;
    /* no timing: the cheapest event, and the only kind a wait needs */
    DT_CHECK_CUDA_GOTO(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), rc, out);
    DT_CHECK_CUDA_GOTO(cudaEventRecord(ev, stream ? (cudaStream_t)stream : cudaStreamLegacy), rc, out);
    *event = ev;
    ev = NULL;
out:
    if (ev)
        cudaEventDestroy(ev);
    leave_device(device, prev);
    return rc;
}

int dt_dev_stream_wait(dt_comm *c, void *event)
{
    cudaStream_t s = comm_stream(c, "wait for the caller's stream");
    if (!s || !event) {
        if (event)
            cudaEventDestroy((cudaEvent_t)event);
        else
            dt_error("wait for the caller's stream: no event");
        return DT_ERR_STATE;
    }
    int rc = DT_OK;
    DT_CHECK_CUDA_GOTO(cudaStreamWaitEvent(s, (cudaEvent_t)event, 0), rc, out);
out:
    /* the wait is queued: destroying the event now releases it once it has happened */
    cudaEventDestroy((cudaEvent_t)event);
    return rc;
}

void *dt_dev_alloc(int device, size_t bytes)
{
    int prev;
    if (enter_device(device, &prev) != DT_OK)
        return NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1); /* a valid pointer for empty tensors too */
    if (e != cudaSuccess) {
        dt_error("%zu bytes of memory on CUDA device %d: %s", bytes, device, cudaGetErrorString(e));
        p = NULL;
    }
    leave_device(device, prev);
    return p;
}

void dt_dev_free(void *p)
{
    if (!p)
        return;
    /* on the device that holds it (cudaFree with another device current may make a context there) */
    struct cudaPointerAttributes a;
    int prev = -1, device = -1;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.device >= 0 && enter_device(a.device, &prev) == DT_OK)
        device = a.device;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        dt_warn("cudaFree of libdt's device buffer: %s", cudaGetErrorString(e));
    if (device >= 0)
        leave_device(device, prev);
}

int dt_dev_copy(dt_comm *c, void *dst, const void *src, size_t bytes)
{
    cudaStream_t s = comm_stream(c, "device copy");
    if (!s)
        return DT_ERR_STATE;
    if (bytes && dst != src)
        DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return DT_OK;
}

int dt_dev_zero(dt_comm *c, void *dst, size_t bytes)
{
    cudaStream_t s = comm_stream(c, "device zeroing");
    if (!s)
        return DT_ERR_STATE;
    if (bytes)
        DT_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, s));
    return DT_OK;
}

int dt_dev_scale(dt_comm *c, void *buf, size_t count, dt_dtype t, double factor)
{
    cudaStream_t s = comm_stream(c, "device scaling");
    if (!s)
        return DT_ERR_STATE;
    if (factor == 1.0) /* exact for every type: nothing to queue */
        return DT_OK;
    return dt_dev_scale_launch(s, buf, count, t, factor);
}

int dt_dev_sync(dt_comm *c)
{
    cudaStream_t s = comm_stream(c, "device sync");
    if (!s)
        return DT_ERR_STATE;
    double start = dt_seconds(), deadline = start + c->timeout_s;
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return DT_OK;
        if (e != cudaErrorNotReady) {
            dt_error("device work of the NCCL communicator (operation %llu, step %lld) failed: %s",
                     (unsigned long long)c->n_ops, (long long)c->step, cudaGetErrorString(e));
            return DT_ERR_CUDA;
        }
        if (dt_seconds() > deadline) {
            dt_error("device work of the NCCL communicator (operation %llu, step %lld) did not complete within "
                     "%.0f s",
                     (unsigned long long)c->n_ops, (long long)c->step, c->timeout_s);
            return DT_ERR_TIMEOUT;
        }
        dt_poll_pause(start);
    }
}

int dt_dev_memcpy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        DT_CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault)); /* the direction from the pointers */
    return DT_OK;
}

#else /* no CUDA */

static int no_cuda(const char *what)
{
    dt_error("%s: this libdt was built without CUDA (configure --with-cuda); device tensors need it", what);
    return DT_ERR_STATE;
}

int dt_dev_available(void)
{
    return 0;
}

void *dt_comm_nccl_stream(dt_comm *c)
{
    (void)c;
    return NULL;
}

int dt_dev_record(int device, void *stream, void **event)
{
    (void)device;
    (void)stream;
    *event = NULL;
    return no_cuda("recording an event");
}

int dt_dev_stream_wait(dt_comm *c, void *event)
{
    (void)c;
    (void)event;
    return no_cuda("waiting for an event");
}

void *dt_dev_alloc(int device, size_t bytes)
{
    (void)device;
    (void)bytes;
    no_cuda("device memory");
    return NULL;
}

void dt_dev_free(void *p)
{
    (void)p;
}

int dt_dev_copy(dt_comm *c, void *dst, const void *src, size_t bytes)
{
    (void)c;
    (void)dst;
    (void)src;
    (void)bytes;
    return no_cuda("device copy");
}

int dt_dev_zero(dt_comm *c, void *dst, size_t bytes)
{
    (void)c;
    (void)dst;
    (void)bytes;
    return no_cuda("device zeroing");
}

int dt_dev_scale(dt_comm *c, void *buf, size_t count, dt_dtype t, double factor)
{
    (void)c;
    (void)buf;
    (void)count;
    (void)t;
    (void)factor;
    return no_cuda("device scaling");
}

int dt_dev_sync(dt_comm *c)
{
    (void)c;
    return no_cuda("device sync");
}

int dt_dev_memcpy(void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return no_cuda("device copy");
}
#endif
