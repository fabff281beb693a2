/* dt.h: libdt, dtrain's distributed runtime as a C library, with a Horovod-style API.
 *
 *   #include <dt.h>
 *   if (dt_init() != 0) return 1;            rank, size and local rank from Slurm's PMI2, MPI
 *   float g[n]; ...                          (mpirun, srun --mpi=pmix) or the Slurm environment
 *   dt_allreduce(g, g, n, DT_FLOAT32, DT_AVG);
 *   dt_finalize();
 * Build: cc app.c $(pkg-config --cflags --libs dt). Start: srun --mpi=pmix ./app, mpirun -np 4 ./app,
 * or plainly ./app (a world of one).
 *
 * Buffers are host memory. Every function returns 0 on success and a negative dtrain status on
 * failure, after one line on standard error naming the operation. Collectives time out (default
 * 600 s, dt_set_timeout): a rank that died or stalls makes the others fail instead of hanging, and
 * after such a failure dt_finalize ends the whole job (MPI_Abort) rather than wait. All ranks must
 * call the collectives in the same order with the same counts, types and roots.
 * Threads: the collectives may be called from any thread, with no set-up in a new thread, but one
 * at a time (a thread of the application's own, such as a gradient thread, takes its turn); two
 * threads in collectives at once could meet them in different orders on different ranks. */
#ifndef DT_H
#define DT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_dtype { DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16, DT_FLOAT64, DT_INT32, DT_INT64, DT_UINT8 } dt_dtype;
typedef enum dt_redop { DT_SUM, DT_AVG, DT_MAX, DT_MIN } dt_redop;

/* Detects the launch and sets up the communicator. Call once, before anything else here. */
int dt_init(void);
/* Tears down; after a failed collective, ends every rank of the job. */
int dt_finalize(void);

int dt_rank(void);        /* 0 .. dt_size() - 1 */
int dt_size(void);
int dt_local_rank(void);  /* among the ranks on this node: the GPU to use */
int dt_local_size(void);
/* How the ranks were found: "Slurm PMI2", "MPI", "Slurm environment (no PMI)", "single process". */
const char *dt_launch_name(void);

/* recv = op over all ranks of send, count elements of type t; send == recv works in place. fp16
 * and bf16 are reduced in fp32. DT_AVG divides the sum by dt_size(). */
int dt_allreduce(const void *send, void *recv, size_t count, dt_dtype t, dt_redop op);
/* root's buf to every rank */
int dt_broadcast(void *buf, size_t count, dt_dtype t, int root);
/* recv[r * count ...] = rank r's send */
int dt_allgather(const void *send, void *recv, size_t count, dt_dtype t);
int dt_barrier(void);
/* The n float32 tensors (params[i], counts[i] elements) of root on every rank: the start of
 * data-parallel training, so that all replicas begin from the same weights. */
int dt_broadcast_parameters(float *const *params, const size_t *counts, int n, int root);
/* Seconds after which a collective fails (default 600). */
void dt_set_timeout(double seconds);

#ifdef __cplusplus
}
#endif
#endif
