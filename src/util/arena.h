/* arena.h: one allocation carved into aligned pieces, with a planning mode that only measures.
 *
 * The training step allocates nothing: every tensor and workspace is carved from an arena sized
 * once per (model, batch size). The same carving code runs twice:
 *
 *     dt_arena plan;
 *     dt_arena_init_plan(&plan, "activations");      measure: no memory behind it
 *     carve_all(&plan);                               offsets are computed, pointers are NULL
 *     dt_arena a;
 *     DT_TRY(dt_arena_init(&a, "activations", dt_arena_peak(&plan)));
 *     carve_all(&a);                                  same offsets, real memory
 *
 * Every piece starts at a multiple of DT_ARENA_ALIGN bytes from the base (the base itself is
 * DT_ARENA_ALIGN-aligned for arenas from dt_arena_init). dt_arena_mark/dt_arena_reset give stack
 * discipline for scratch space that is reused (workspaces of successive layers).
 * An arena is not thread-safe: one owner carves it.
 */
#ifndef DT_UTIL_ARENA_H
#define DT_UTIL_ARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_ARENA_ALIGN ((size_t)64)
#define DT_ARENA_FAIL SIZE_MAX /* dt_arena_push's failure value */

typedef struct dt_arena {
    unsigned char *base; /* NULL in planning mode */
    size_t capacity;     /* bytes usable at base; SIZE_MAX in planning mode */
    size_t used;         /* end of the last piece */
    size_t peak;         /* largest `used` so far: the size to allocate after planning */
    int owned;           /* base was allocated by dt_arena_init and is freed by dt_arena_free */
    char name[48];       /* for messages */
} dt_arena;

/* Allocates capacity bytes (rounded up to DT_ARENA_ALIGN, at least one block), zero-filled.
 * Returns DT_OK, or DT_ERR_NOMEM after logging (the arena is then empty and safe to free). */
int dt_arena_init(dt_arena *a, const char *name, size_t capacity);
/* Planning mode: carving succeeds at any size and only advances used/peak. */
void dt_arena_init_plan(dt_arena *a, const char *name);
/* Carves from memory owned elsewhere (a device buffer, say): never freed by dt_arena_free.
 * base must be DT_ARENA_ALIGN-aligned for the alignment promise to hold. */
void dt_arena_init_buffer(dt_arena *a, const char *name, void *base, size_t capacity);

/* Reserves bytes at the next aligned offset and returns that offset, or DT_ARENA_FAIL after
 * logging (arena full, or a size that overflows). A zero-byte piece is allowed. */
size_t dt_arena_push(dt_arena *a, size_t bytes);
/* Address of an offset: NULL in planning mode. */
void *dt_arena_at(const dt_arena *a, size_t offset);
/* push + at: NULL on failure and always NULL in planning mode (use dt_arena_planning to tell). */
void *dt_arena_alloc(dt_arena *a, size_t bytes);
int dt_arena_planning(const dt_arena *a);

size_t dt_arena_mark(const dt_arena *a);
/* Pieces carved after mark are given back (their memory is reused by later pieces). */
void dt_arena_reset(dt_arena *a, size_t mark);
size_t dt_arena_peak(const dt_arena *a);

/* Frees owned memory; the arena is left empty (base NULL, capacity 0). NULL is allowed. */
void dt_arena_free(dt_arena *a);

#ifdef __cplusplus
}
#endif
#endif
