/* plan.h: the memory planner: buffers with known lifetimes packed into one arena.
 *
 * A plain interval problem. Buffer i needs `bytes` from step `first` to step `last` (both
 * inclusive). Two buffers whose step ranges overlap must not overlap in memory; two whose ranges
 * are disjoint may share bytes. dt_plan_pack gives every buffer an offset and returns the arena
 * size (the peak of the packing). Nothing here knows about models: nn/model_plan.c turns activation
 * and gradient lifetimes into these problems (model.h says which lifetimes).
 *
 *     dt_plan_buffer b[3] = {{.bytes = 100, .first = 0, .last = 1},
 *                            {.bytes = 100, .first = 1, .last = 2},
 *                            {.bytes = 100, .first = 2, .last = 3}};
 *     size_t peak = dt_plan_pack(b, 3, 64, DT_PLAN_SMALLEST);    b[0] and b[2] share bytes: 256
 *
 * The packing is first fit: buffers are placed one by one, each at the lowest offset free of every
 * buffer placed before it whose lifetime overlaps its own. The order of placement decides how good
 * the packing is, and no order is best for every network, so three are tried and the smallest
 * packing is kept (or one order is forced: tests check that every order gives the same numbers). */
#ifndef DT_NN_PLAN_H
#define DT_NN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_PLAN_FAIL SIZE_MAX /* dt_plan_pack's failure value (out of memory, or a size that overflows) */

typedef struct dt_plan_buffer {
    size_t bytes;    /* 0: needs no memory (its offset is 0 and it conflicts with nothing) */
    int first, last; /* the steps of its first and last use, inclusive; first <= last */
    size_t offset;   /* set by dt_plan_pack: a multiple of the alignment */
} dt_plan_buffer;

/* the order of placement (dt_model's plan_rule takes these values) */
enum dt_plan_order {
    DT_PLAN_SMALLEST = 0,   /* try the three below, keep the smallest packing (the first on ties) */
    DT_PLAN_LARGEST_FIRST,  /* by size, descending */
    DT_PLAN_LONGEST_FIRST,  /* by lifetime (last - first), descending; then by size */
    DT_PLAN_EARLIEST_FIRST  /* by first use, ascending; then by size, descending */
};

/* Sets buf[i].offset for n buffers, every size rounded up to align (a power of two; 0 or 1: no
 * rounding). Returns the bytes the arena needs (a multiple of align; 0 when no buffer needs memory),
 * or DT_PLAN_FAIL. Ties in an order keep the buffers' index order, so the result is reproducible. */
size_t dt_plan_pack(dt_plan_buffer *buf, int n, size_t align, enum dt_plan_order order);

#ifdef __cplusplus
}
#endif
#endif
