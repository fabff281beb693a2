/* engine.h: the engine behind dt.h's named operations (engine.c): a coordinator thread that matches
 * submitted operations across ranks by name and checks them, and worker threads, one per
 * communicator ("stream"), that run them (doc/libdt.md, "The engine"). */
#ifndef DT_DIST_ENGINE_H
#define DT_DIST_ENGINE_H

#include <stddef.h>

#include "libdt/comm.h"
#include "libdt/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_engine_cfg {
    const dt_launch *launch; /* stays the caller's, valid until dt_engine_stop */
    dt_comm *ctrl;           /* host buffers: the engine's own (it dups one per stream and frees them all) */
    dt_comm *dev;            /* NCCL over the launch for device tensors, or NULL (created at the first) */
    int device;              /* the CUDA device of dev (or for creating it), -1 for none */
    double timeout_s;
    size_t fusion_bytes;
    int streams;             /* 1 .. DT_ENGINE_MAX_STREAMS */
    double cycle_s;          /* an idle coordinator's pause between rounds */
} dt_engine_cfg;

#define DT_ENGINE_MAX_STREAMS 8

/* Starts the threads; the engine owns cfg's communicators from now on (also on failure). */
int dt_engine_start(const dt_engine_cfg *cfg);
/* Fails what is still pending, meets the other ranks' stop, ends the threads and frees the
 * communicators (after a failed collective: ends the job, MPI_Abort). */
int dt_engine_stop(void);
void dt_engine_set_timeout(double seconds);
/* dt_barrier and dt_join: through the engine, so that they are ordered with the named operations */
int dt_engine_barrier(void);
int dt_engine_join(void);

#ifdef __cplusplus
}
#endif
#endif
