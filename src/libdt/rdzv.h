/* rdzv.h: a small TCP rendezvous for launches that give only an address and a port (torchrun's
 * MASTER_ADDR and MASTER_PORT; doc/design.md, "Launch").
 *
 * Rank 0 listens on the port (every address of its node); every other rank connects to host:port and
 * says its rank, its world size and its host name. Rank 0 answers at once (so a rank can tell a
 * rank 0 that waits for others from a port where something else listens), checks what each says
 * (the same world size, each rank once), and when all have come answers each with its node (ranks
 * grouped by host name, in rank order) and the number of ranks there. The connections then stay
 * open, a star through rank 0: rank 0 can broadcast a few bytes (the NCCL unique id) and all can
 * meet at a barrier. It is for the start, not a communicator: nothing large goes through it.
 *
 * Every call is held to a deadline, and every failure is one line (dt_error) naming the address and
 * port, or the rank: a port in use, a rank 0 that never answers, a world size that differs, a rank
 * twice, ranks that never came (by number). */
#ifndef DT_DIST_RDZV_H
#define DT_DIST_RDZV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_rdzv dt_rdzv;

/* Meets the other ranks: rank 0 listens on port, the others connect to host:port, within timeout_s
 * seconds. On success *out is the open rendezvous (the caller frees it with dt_rdzv_close) and
 * *node, *local_size say where this rank is. DT_ERR_SYS after one line (port in use, host unknown,
 * a system call), DT_ERR_TIMEOUT after one line (no rank 0 answered, ranks missing), DT_ERR_INPUT
 * after one line (world sizes differ, a rank twice); *out is then NULL. */
int dt_rdzv_open(dt_rdzv **out, const char *host, int port, int rank, int size, double timeout_s, int *node,
                 int *local_size);
/* Rank 0's n bytes of buf in every rank's buf (n the same on every rank, at most 1 MiB), within
 * timeout_s. DT_OK, or an error after one line (a rank gone, the deadline, n differing). */
int dt_rdzv_bcast(dt_rdzv *z, void *buf, size_t n, double timeout_s);
/* Returns once every rank has called it, or an error after one line naming the missing ranks. */
int dt_rdzv_barrier(dt_rdzv *z, double timeout_s);
/* Closes the connections and frees *z; sets *z to NULL. NULL is allowed. */
void dt_rdzv_close(dt_rdzv **z);

#ifdef __cplusplus
}
#endif
#endif
