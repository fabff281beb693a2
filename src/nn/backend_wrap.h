/* backend_wrap.h: how a wrapper backend is built, a dt_backend whose members run something of their
 * own around another table's (the inner table's).
 *
 * The house's wrappers: the CPU's graphs (nn/cpu/capture.c: ops kept while a thread captures), the
 * guarded backend (tests/unit/test_backend_guard.c: memory readable only inside a call), the
 * recording backend (tests/libdt/ddp_order.c: what each op changed) and the deferred backend
 * (tests/libdt/deferred.c: ops queued for threads) and ops_check's W (tests/gpu/ops_check.c: each
 * call inside a setjmp, its memory, event and graph members as its ops). Each is a few lines per kind of
 * member it treats differently; the members themselves come from the lists, so an op added to
 * nn/backend.h's list is wrapped everywhere with no edit here or there.
 *
 * A wrapper's file:
 *   1. defines one function per op, wrap_<name>, by expanding the op list with an X of its own that
 *      calls DT_WRAP_AROUND (something before the inner op, the call, something after, its result
 *      returned) or DT_WRAP_DEFINE (a body of its own). DT_WRAP_IF_VOID picks by the op's return
 *      type (an op with a result is a planning op: capture and the deferred backend run those at
 *      once). For example the guarded backend:
 *        #define GUARD(name, ret, params, args) \
 *            DT_WRAP_AROUND(name, ret, params, enter(), dt_backend_cpu.name args, leave())
 *        DT_OPS(GUARD)
 *   2. writes the members outside the op list that it treats its own way, as wrap_<name> (or under
 *      any name, set by hand in 3). They are listed below in the op list's form, by group, so a
 *      wrapper that treats them as it treats its ops expands a group with the same X (ops_check).
 *   3. copies the inner table and sets what it wraps, a list or a group at a time:
 *        t = dt_backend_cpu;
 *        DT_WRAP_SET(&t, &dt_backend_cpu, DT_OPS);
 *        t.mem_put = my_put;  (one member: by hand)
 *      and it treats one op apart from the rest by setting that member after DT_WRAP_SET.
 * The members no list names (name, init and the data members: host_memory, storage_types, fuses,
 * max_tensor_elems) are the inner table's unless the wrapper sets them.
 *
 * The macros' statement arguments (before, call, after, a body) are pasted as they are: a comma in
 * one must be inside parentheses. Nothing here defines a function or an object: the functions are
 * made, static, where a wrapper's file expands the macros. */
#ifndef DT_NN_BACKEND_WRAP_H
#define DT_NN_BACKEND_WRAP_H

#include "nn/backend.h"

/* One-token names of the pointer types the members below return: a return type in the lists is one
 * token, as the op list's are, so a wrapper can pick by pasting it (DT_WRAP_IF_VOID, ops_check's
 * result on a fault). The same types: wrap_mem_alloc returning dt_wrap_ptr fits mem_alloc. */
typedef void *dt_wrap_ptr;
typedef dt_event *dt_wrap_event;
typedef dt_graph *dt_wrap_graph;
typedef dt_timer *dt_wrap_timer;

/* --- the members outside the op list, X(name, ret, (parameters), (arguments)) as DT_OPS gives them -- */

/* memory, host buffers, the queued copies, and the backend's scratch (nn/backend.h: all required) */
#define DT_BACKEND_MEMORY(X)                                                                                           \
    X(mem_alloc, dt_wrap_ptr, (size_t bytes), (bytes))                                                                 \
    X(mem_free, void, (void *p), (p))                                                                                  \
    X(mem_put, void, (void *dst, const void *src_host, size_t bytes), (dst, src_host, bytes))                          \
    X(mem_get, void, (void *dst_host, const void *src, size_t bytes), (dst_host, src, bytes))                          \
    X(host_alloc, dt_wrap_ptr, (size_t bytes), (bytes))                                                                \
    X(host_free, void, (void *p), (p))                                                                                 \
    X(upload, void, (void *dst, const void *src_host, size_t bytes, int queue), (dst, src_host, bytes, queue))         \
    X(download, void, (void *dst_host, const void *src, size_t bytes, int queue), (dst_host, src, bytes, queue))       \
    X(reserve_scratch, int, (size_t bytes), (bytes))

/* queues and fences (required) */
#define DT_BACKEND_EVENTS(X)                                                                                           \
    X(event_create, dt_wrap_event, (void), ())                                                                         \
    X(event_destroy, void, (dt_event *e), (e))                                                                        \
    X(event_record, void, (dt_event *e, int queue), (e, queue))                                                       \
    X(event_wait, void, (int queue, dt_event *e), (queue, e))                                                          \
    X(event_sync, void, (dt_event *e), (e))

/* graphs (optional: all four or none) */
#define DT_BACKEND_GRAPHS(X)                                                                                           \
    X(graph_begin, int, (void), ())                                                                                    \
    X(graph_end, dt_wrap_graph, (void), ())                                                                            \
    X(graph_launch, void, (dt_graph *g), (g))                                                                         \
    X(graph_destroy, void, (dt_graph *g), (g))

/* the profile's timers (optional: all four or none) */
#define DT_BACKEND_TIMERS(X)                                                                                           \
    X(timer_create, dt_wrap_timer, (void), ())                                                                         \
    X(timer_destroy, void, (dt_timer *t), (t))                                                                        \
    X(timer_record, void, (dt_timer *t), (t))                                                                         \
    X(timer_ms, double, (dt_timer *a, dt_timer *b), (a, b))

/* --- the wrapper functions ------------------------------------------------------------------------------ */

/* if_void for a member returning void, otherwise for one with a result (ret: a return type of the
 * lists). A return type new to the lists needs its line here (the compiler names the missing one). */
#define DT_WRAP_IF_VOID(ret, if_void, otherwise) DT_WRAP_IF_VOID_##ret(if_void, otherwise)
#define DT_WRAP_IF_VOID_void(if_void, otherwise) if_void
#define DT_WRAP_IF_VOID_int(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_double(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_size_t(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_dt_wrap_ptr(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_dt_wrap_event(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_dt_wrap_graph(if_void, otherwise) otherwise
#define DT_WRAP_IF_VOID_dt_wrap_timer(if_void, otherwise) otherwise

/* static ret wrap_<name> params { body } */
#define DT_WRAP_DEFINE(name, ret, params, body)                                                                        \
    static ret wrap_##name params                                                                                      \
    {                                                                                                                  \
        body                                                                                                           \
    }

/* static ret wrap_<name> params: runs before, then call (the inner member, e.g. inner.name args),
 * then after, and returns what call returned. before may return early (a member with a result
 * must then return one); after sees before's declarations. */
#define DT_WRAP_AROUND(name, ret, params, before, call, after)                                                         \
    DT_WRAP_DEFINE(name, ret, params,                                                                                  \
                   DT_WRAP_IF_VOID(ret, DT_WRAP_RUN_VOID_, DT_WRAP_RUN_VALUE_)(ret, before, call, after))
#define DT_WRAP_RUN_VOID_(ret, before, call, after)                                                                   \
    before;                                                                                                            \
    call;                                                                                                              \
    after;
#define DT_WRAP_RUN_VALUE_(ret, before, call, after)                                                                  \
    before;                                                                                                            \
    ret dt_wrap_r_ = call;                                                                                             \
    after;                                                                                                             \
    return dt_wrap_r_;

/* --- the table ------------------------------------------------------------------------------------------- */

/* For each member of LIST (DT_OPS or a group above) that inner has: t->name = wrap_<name>; one that
 * inner lacks (NULL: an optional member) is set NULL, so the wrapper offers no more than its inner
 * table. t is usually a copy of inner made just before. */
#define DT_WRAP_SET(t, inner, LIST)                                                                                    \
    do {                                                                                                               \
        dt_backend *const dt_wrap_t_ = (t);                                                                            \
        const dt_backend *const dt_wrap_in_ = (inner);                                                                 \
        LIST(DT_WRAP_SET_ONE_)                                                                                         \
    } while (0)
#define DT_WRAP_SET_ONE_(name, ret, params, args) dt_wrap_t_->name = dt_wrap_in_->name ? wrap_##name : NULL;

#endif
