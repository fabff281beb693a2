/* arena.h: one allocation carved into aligned pieces, with a planning mode that only measures.
 *
 * The training step allocates nothing: every tensor and workspace is carved from an arena sized
 * once per (model, batch size). The same carving code runs twice:
 *
 *     dt_arena plan;
 *     dt_arena_init_plan(&plan, "activations");      measure: no memory behind it
 *     carve_all(&plan);                               offsets are computed, addresses are NULL
 *     void *mem = ...dt_arena_peak(&plan) bytes, DT_ARENA_ALIGN-aligned (the backend's allocation)...
 *     dt_arena a;
 *     dt_arena_init_buffer(&a, "activations", mem, dt_arena_peak(&plan));
 *     carve_all(&a);                                  same offsets, real memory
 *
 * Every piece starts at a multiple of DT_ARENA_ALIGN bytes from the base. The memory is always the
 * caller's (host or device): an arena never allocates or frees it.
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
    char name[48];       /* for messages */
} dt_arena;

/* Planning mode: carving succeeds at any size and only advances used/peak. */
void dt_arena_init_plan(dt_arena *a, const char *name);
/* Carves capacity bytes at base, memory owned elsewhere (a device buffer, say). base must be
 * DT_ARENA_ALIGN-aligned for the pieces' addresses to be. */
void dt_arena_init_buffer(dt_arena *a, const char *name, void *base, size_t capacity);

/* Reserves bytes at the next aligned offset and returns that offset, or DT_ARENA_FAIL after
 * logging (arena full, or a size that overflows). A zero-byte piece is allowed. */
size_t dt_arena_push(dt_arena *a, size_t bytes);
/* Address of an offset: NULL in planning mode. */
void *dt_arena_at(const dt_arena *a, size_t offset);
size_t dt_arena_peak(const dt_arena *a);

/* Forgets the memory (which stays the caller's to free): the arena is left empty (base NULL,
 * capacity 0). NULL is allowed. */
void dt_arena_free(dt_arena *a);

#ifdef __cplusplus
}
#endif
#endif
