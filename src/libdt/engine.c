/* engine.c: dt.h's named operations (engine.h).
 *
 * Submission (any thread): an operation is a handle on the pending list, under one lock.
 * The coordinator thread, in rounds: every rank gives the others (one all-gather each on the control
 * communicator) how many operations it has pending, whether it has joined or is stopping, and then
 * a fixed-size description of each (name and its hash, kind, type, shape, reduction, scale factors,
 * root, host or device). Every rank then makes the same decision from the same data: the operations
 * of the lowest rank that has not joined, in its order, that every rank still training has
 * submitted too. Their descriptions are compared field by field: a difference fails the operation on
 * every rank with one line naming the tensor and what each rank gave. The others are cut into units
 * (consecutive compatible all-reduces fused up to the threshold; any other operation alone) and
 * handed round-robin to the workers, each running its units in order on its own communicator: the
 * same units reach the same worker in the same order on every rank, so no two ranks ever wait on
 * different collectives. An idle coordinator pauses cycle_s between rounds (or until something is
 * submitted), so ranks meet within a few milliseconds of each other's submissions.
 * Joined ranks take part in every round with nothing pending: zeros for all-reduces, no rows for
 * all-gathers, a scratch buffer for broadcasts. Once every rank that is not stopping has joined,
 * join returns on all of them. An operation of this rank still unmatched after the timeout fails,
 * naming the ranks that did not submit it. A failed control collective (a rank died) fails every
 * operation, now and later; dt_engine_stop then ends the job. */
#include "config.h"

#include "libdt/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/device.h"
#include "libdt/dt.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/half.h"
#include "util/log.h"

enum op_kind { K_ALLREDUCE, K_GROUPED, K_BROADCAST, K_ALLGATHER, K_ALLTOALL, K_REDUCESCATTER, K_BARRIER, K_KINDS };
static const char *const kind_name[K_KINDS] = {"allreduce",      "grouped_allreduce", "broadcast", "allgather",
                                               "alltoall",       "reducescatter",     "barrier"};

#define NAME_MAX_LEN 255
#define ROUND_MAX 1024 /* operations described per rank per round */

struct dt_handle {
    enum op_kind kind;
    char name[NAME_MAX_LEN + 1];
    uint64_t hash;
    int n; /* tensors (grouped: several) */
    dt_tensor *in, *out;
    dt_redop op;
    double pre, post;
    int root;
    int64_t *splits; /* all-to-all: rows to each rank */
    void **events;   /* device tensors: the caller's stream at submission, one per tensor */
    double submitted;
    /* the result */
    atomic_int done;
    int status;
    char *error;
    atomic_int parts_left;
    void *result; /* allgather, alltoall, reducescatter: libdt's (host or device) */
    dt_tensor result_t;
    int64_t *recv_splits;
    struct dt_handle *next;      /* pending list */
    struct dt_handle *live_next; /* every handle not yet done */
    int in_round;
};

/* What a rank says of one pending operation in a round (the same bytes on every rank). */
typedef struct desc {
    uint64_t hash;
    int32_t kind, type, op, root, ndim, device, n, pad;
    double pre, post;
    int64_t shape[DT_MAX_DIMS]; /* grouped: [0] elements in all, [1] a hash of every shape */
    char name[96];              /* for messages (cut) */
} desc;

typedef struct piece {
    dt_handle *h; /* NULL: a joined rank's stand-in */
    int t;
    size_t count;
} piece;

typedef struct unit {
    enum op_kind kind;
    dt_dtype type;
    dt_redop op;
    double pre, post;
    int device, root;
    piece *p;
    int np;
    size_t total;
    dt_handle *h;     /* non-fused operations (NULL on a joined rank) */
    int64_t *rows;    /* allgather: each rank's first dimension */
    size_t row_elems; /* elements per row of the first dimension */
    desc d;           /* the lead's description */
    struct unit *next;
} unit;

typedef struct worker {
    pthread_t th;
    int started;
    dt_comm *host, *dev;
    int dev_bound;
    unit *head, *tail;
    pthread_cond_t cv;
    void *buf; /* fusion buffers */
    size_t buf_n;
    void *dbuf;
    size_t dbuf_n;
} worker;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* submissions, join, stop: wakes the coordinator */
    pthread_cond_t done_cv; /* a handle done, a join completed */
    int running, stopping, stopped, quit;
    dt_handle *pend_head, *pend_tail;
    dt_handle *live;
    int npending;
    uint64_t nsubmit; /* submissions so far: one made during a round is not waited for */
    atomic_ullong noname[K_KINDS];
    dt_engine_cfg cfg;
    int rank, size;
    worker w[DT_ENGINE_MAX_STREAMS];
    int nw;
    uint64_t next_worker;
    pthread_t coord;
    int coord_started;
    int failed;
    char fail_msg[1024];
    int joined;               /* this rank waits in dt_join */
    uint64_t join_gen;        /* completed joins */
    int join_result;
    int64_t *join_round;      /* per rank: the round it was first seen joined, -1 */
    int peer_stopped;         /* some rank is stopping: new operations fail */
    uint64_t round;
    uint64_t rounds_busy, units, unit_elems; /* for the debug line at stop */
    int dev_tried;
} E = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER};

/* ---- small things -------------------------------------------------------------------------------- */

size_t dt_tensor_count(const dt_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static int is_int(dt_dtype t)
{
    return t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 || t == DT_INT8;
}

static const char *op_name(dt_redop op)
{
    static const char *const n[] = {"sum", "average", "max", "min", "product"};
    return (unsigned)op < 5 ? n[op] : "?";
}

static void shape_str(char *b, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

/* rows of the first dimension split over size ranks as evenly as possible: rank r's share */
static int64_t even_rows(int64_t rows, int size, int r)
{
    return rows / size + (r < rows % size ? 1 : 0);
}

/* ---- handles --------------------------------------------------------------------------------------- */

static void handle_release_events(dt_handle *h)
{
    if (!h->events)
        return;
    free(h->events);
    h->events = NULL;
}

/* under E.mu */
static void unlink_live(dt_handle *h)
{
    for (dt_handle **p = &E.live; *p; p = &(*p)->live_next)
        if (*p == h) {
            *p = h->live_next;
            return;
        }
}

/* The handle's operation ended with status (the first failure's line kept). */
static void finish_part(dt_handle *h, int status, const char *msg)
{
    if (!h)
        return;
    pthread_mutex_lock(&E.mu);
    if (status != DT_OK && h->status == DT_OK) {
        h->status = status;
        free(h->error);
        h->error = strdup(msg && *msg ? msg : "the operation failed");
    }
    if (atomic_fetch_sub(&h->parts_left, 1) == 1) {
        unlink_live(h);
        atomic_store(&h->done, 1);
        pthread_cond_broadcast(&E.done_cv);
    }
    pthread_mutex_unlock(&E.mu);
}

/* Fails h whole (not yet in any unit), after logging msg as this rank's one line. */
static void fail_handle(dt_handle *h, int status, const char *msg)
{
    dt_error("%s", msg);
    atomic_store(&h->parts_left, 1);
    finish_part(h, status, msg);
}

static dt_handle *new_handle(enum op_kind kind, const char *name, int n)
{
    dt_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->kind = kind;
    h->n = n;
    h->in = calloc((size_t)(n ? n : 1), sizeof *h->in);
    h->out = calloc((size_t)(n ? n : 1), sizeof *h->out);
    if (!h->in || !h->out) {
        free(h->in);
        free(h->out);
        free(h);
        return NULL;
    }
    if (name && *name)
        snprintf(h->name, sizeof h->name, "%s", name);
    else
        snprintf(h->name, sizeof h->name, "%s.noname.%llu", kind_name[kind],
                 (unsigned long long)atomic_fetch_add(&E.noname[kind], 1));
    h->hash = fnv(h->name, strlen(h->name), 1469598103934665603ull);
    h->pre = h->post = 1;
    return h;
}

static void free_handle(dt_handle *h)
{
    if (!h)
        return;
    handle_release_events(h);
    if (h->result) {
        if (h->result_t.device >= 0)
            dt_dev_free(h->result);
        else
            free(h->result);
    }
    free(h->in);
    free(h->out);
    free(h->splits);
    free(h->recv_splits);
    free(h->error);
    free(h);
}

static int check_tensor(const char *what, const char *name, const dt_tensor *t)
{
    if (!t || (unsigned)t->type > DT_INT8 || t->ndim < 0 || t->ndim > DT_MAX_DIMS) {
        dt_error("%s '%s': not a tensor (type, or %d dimensions: 0 to %d)", what, name, t ? t->ndim : -1,
                 DT_MAX_DIMS);
        return DT_ERR_STATE;
    }
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0) {
            dt_error("%s '%s': dimension %d is %lld", what, name, i, (long long)t->shape[i]);
            return DT_ERR_STATE;
        }
    if (!t->data && dt_tensor_count(t)) {
        dt_error("%s '%s': no data", what, name);
        return DT_ERR_STATE;
    }
    if (t->device >= 0 && !dt_dev_available()) {
        dt_error("%s '%s': a tensor on CUDA device %d, and this libdt was built without CUDA", what, name,
                 t->device);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

/* Records the caller's streams, then queues h (or fails it at once). h is the caller's either way. */
static int submit(dt_handle *h, dt_handle **out)
{
    *out = h;
    const char *what = kind_name[h->kind];
    if (strlen(h->name) >= NAME_MAX_LEN) {
        char m[400];
        snprintf(m, sizeof m, "%s '%.60s...': a name of %zu bytes (at most %d)", what, h->name, strlen(h->name),
                 NAME_MAX_LEN - 1);
        fail_handle(h, DT_ERR_STATE, m);
        return DT_ERR_STATE;
    }
    for (int i = 0; i < h->n; i++) {
        dt_log_clear_error();
        int rc = check_tensor(what, h->name, &h->in[i]);
        if (rc == DT_OK && h->out[i].data && h->out[i].device != h->in[i].device) {
            dt_error("%s '%s': input and output on different devices", what, h->name);
            rc = DT_ERR_STATE;
        }
        if (rc != DT_OK) {
            atomic_store(&h->parts_left, 1);
            finish_part(h, rc, dt_log_last_error());
            return rc;
        }
    }
    if (h->n && h->in[0].device >= 0) {
        h->events = calloc((size_t)h->n, sizeof *h->events);
        if (!h->events)
            return DT_ERR_NOMEM;
        for (int i = 0; i < h->n; i++) {
            dt_log_clear_error();
            int rc = dt_dev_record(h->in[i].device, h->in[i].stream, &h->events[i]);
            if (rc != DT_OK) {
                atomic_store(&h->parts_left, 1);
                finish_part(h, rc, dt_log_last_error());
                return rc;
            }
        }
    }
    h->submitted = dt_seconds();
    pthread_mutex_lock(&E.mu);
    char msg[1200] = "";
    int rc = DT_OK;
    if (!E.running) {
        snprintf(msg, sizeof msg, "%s '%s': libdt is not initialised (dt_init, hvd.init)", what, h->name);
        rc = DT_ERR_STATE;
    } else if (E.failed) {
        snprintf(msg, sizeof msg, "%s '%s': not started, an earlier collective failed: %s", what, h->name,
                 E.fail_msg);
        rc = DT_ERR_STATE;
    } else if (E.stopping || E.peer_stopped) {
        snprintf(msg, sizeof msg, "%s '%s': not started, %s", what, h->name,
                 E.stopping ? "this rank is shutting down" : "another rank has shut down");
        rc = DT_ERR_STATE;
    } else {
        for (dt_handle *o = E.live; o; o = o->live_next)
            if (o->hash == h->hash && !strcmp(o->name, h->name)) {
                snprintf(msg, sizeof msg, "%s '%s': an operation of that name is already in flight on this rank "
                         "(names are unique until synchronised)", what, h->name);
                rc = DT_ERR_STATE;
                break;
            }
    }
    if (rc != DT_OK) {
        pthread_mutex_unlock(&E.mu);
        fail_handle(h, rc, msg);
        return rc;
    }
    atomic_store(&h->parts_left, 1);
    h->live_next = E.live;
    E.live = h;
    if (E.pend_tail)
        E.pend_tail->next = h;
    else
        E.pend_head = h;
    E.pend_tail = h;
    E.npending++;
    E.nsubmit++;
    pthread_cond_broadcast(&E.cv);
    pthread_mutex_unlock(&E.mu);
    return DT_OK;
}

/* ---- the public operations ------------------------------------------------------------------------ */

static int reduce_args(dt_handle *h, dt_redop op, double pre, double post)
{
    h->op = op;
    h->pre = pre ? pre : 1;
    h->post = post ? post : 1;
    if ((unsigned)op > DT_PRODUCT)
        return DT_ERR_STATE;
    return DT_OK;
}

int dt_allreduce_async(const char *name, const dt_tensor *in, const dt_tensor *out, dt_redop op, double prescale,
                       double postscale, dt_handle **h)
{
    return dt_grouped_allreduce_async(name, -1, in, out, op, prescale, postscale, h);
}

int dt_grouped_allreduce_async(const char *name, int n, const dt_tensor *in, const dt_tensor *out, dt_redop op,
                               double prescale, double postscale, dt_handle **hp)
{
    int single = n < 0;
    n = single ? 1 : n;
    dt_handle *x = new_handle(single ? K_ALLREDUCE : K_GROUPED, name, n);
    if (!x)
        return DT_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        x->in[i] = in[i];
        x->out[i] = out ? out[i] : in[i];
        if (!x->out[i].data)
            x->out[i] = in[i];
    }
    if (reduce_args(x, op, prescale, postscale) != DT_OK) {
        fail_handle(x, DT_ERR_STATE, "allreduce: no such reduction");
        *hp = x;
        return DT_ERR_STATE;
    }
    for (int i = 0; i < n; i++) {
        size_t c = dt_tensor_count(&x->in[i]);
        if (x->out[i].type != x->in[i].type || dt_tensor_count(&x->out[i]) != c) {
            char m[400];
            snprintf(m, sizeof m, "%s '%s': the output's type or size differs from the input's", kind_name[x->kind],
                     x->name);
            fail_handle(x, DT_ERR_STATE, m);
            *hp = x;
            return DT_ERR_STATE;
        }
        if (op == DT_AVG && is_int(x->in[i].type)) {
            char m[400];
            snprintf(m, sizeof m, "%s '%s': an average of %s is not defined (use sum)", kind_name[x->kind], x->name,
                     dt_dtype_name(x->in[i].type));
            fail_handle(x, DT_ERR_STATE, m);
            *hp = x;
            return DT_ERR_STATE;
        }
        if (i && (x->in[i].type != x->in[0].type || x->in[i].device != x->in[0].device)) {
            char m[400];
            snprintf(m, sizeof m, "grouped_allreduce '%s': tensor %d's type or device differs from tensor 0's", x->name,
                     i);
            fail_handle(x, DT_ERR_STATE, m);
            *hp = x;
            return DT_ERR_STATE;
        }
    }
    return submit(x, hp);
}

int dt_broadcast_async(const char *name, const dt_tensor *in, const dt_tensor *out, int root, dt_handle **hp)
{
    dt_handle *x = new_handle(K_BROADCAST, name, 1);
    if (!x)
        return DT_ERR_NOMEM;
    x->in[0] = *in;
    x->out[0] = out && out->data ? *out : *in;
    x->root = root;
    if (root < 0 || root >= E.size || x->out[0].type != in->type || dt_tensor_count(&x->out[0]) != dt_tensor_count(in)) {
        char m[400];
        snprintf(m, sizeof m, "broadcast '%s': root %d of %d ranks, or an output unlike the input", x->name, root,
                 E.size);
        fail_handle(x, DT_ERR_STATE, m);
        *hp = x;
        return DT_ERR_STATE;
    }
    return submit(x, hp);
}

static int first_dim_op(enum op_kind k, const char *name, const dt_tensor *in, dt_handle **hp)
{
    dt_handle *x = new_handle(k, name, 1);
    if (!x)
        return DT_ERR_NOMEM;
    x->in[0] = *in;
    *hp = x;
    if (in->ndim < 1) {
        char m[400];
        snprintf(m, sizeof m, "%s '%s': a scalar has no first dimension to %s", kind_name[k], x->name,
                 k == K_ALLGATHER ? "concatenate" : "split");
        fail_handle(x, DT_ERR_STATE, m);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

int dt_allgather_async(const char *name, const dt_tensor *in, dt_handle **hp)
{
    DT_TRY(first_dim_op(K_ALLGATHER, name, in, hp));
    return submit(*hp, hp);
}

int dt_alltoall_async(const char *name, const dt_tensor *in, const int64_t *splits, dt_handle **hp)
{
    DT_TRY(first_dim_op(K_ALLTOALL, name, in, hp));
    dt_handle *x = *hp;
    x->splits = calloc((size_t)E.size, sizeof *x->splits);
    if (!x->splits)
        return DT_ERR_NOMEM;
    int64_t sum = 0;
    for (int r = 0; r < E.size; r++) {
        x->splits[r] = splits ? splits[r] : even_rows(in->shape[0], E.size, r);
        if (x->splits[r] < 0)
            sum = -1 - in->shape[0];
        sum += x->splits[r];
    }
    if (sum != in->shape[0]) {
        char m[400];
        snprintf(m, sizeof m, "alltoall '%s': the splits add up to %lld rows, the tensor has %lld (splits are rows to "
                 "each of the %d ranks, none negative)", x->name, (long long)sum, (long long)in->shape[0], E.size);
        fail_handle(x, DT_ERR_STATE, m);
        return DT_ERR_STATE;
    }
    return submit(x, hp);
}

int dt_reducescatter_async(const char *name, const dt_tensor *in, dt_redop op, double prescale, double postscale,
                           dt_handle **hp)
{
    DT_TRY(first_dim_op(K_REDUCESCATTER, name, in, hp));
    dt_handle *x = *hp;
    if (reduce_args(x, op, prescale, postscale) != DT_OK || (op == DT_AVG && is_int(in->type))) {
        char m[400];
        snprintf(m, sizeof m, "reducescatter '%s': %s of %s is not defined", x->name, op_name(op),
                 dt_dtype_name(in->type));
        fail_handle(x, DT_ERR_STATE, m);
        return DT_ERR_STATE;
    }
    return submit(x, hp);
}

int dt_engine_barrier(void)
{
    dt_handle *x = new_handle(K_BARRIER, NULL, 0);
    if (!x)
        return DT_ERR_NOMEM;
    x->n = 0;
    int rc = submit(x, &x);
    if (rc == DT_OK)
        rc = dt_wait(x);
    dt_handle_free(x);
    return rc;
}

int dt_poll(const dt_handle *h)
{
    return h ? atomic_load(&h->done) : 1;
}

int dt_wait(dt_handle *h)
{
    if (!h)
        return DT_ERR_STATE;
    if (!atomic_load(&h->done)) {
        pthread_mutex_lock(&E.mu);
        while (!atomic_load(&h->done))
            pthread_cond_wait(&E.done_cv, &E.mu);
        pthread_mutex_unlock(&E.mu);
    }
    return h->status;
}

const char *dt_handle_error(const dt_handle *h)
{
    return h && atomic_load(&h->done) ? h->error : NULL;
}

int dt_output(const dt_handle *h, dt_tensor *out)
{
    if (!h || !atomic_load(&h->done) || h->status != DT_OK || !h->result_t.ndim) {
        dt_error("dt_output: %s", !h ? "no handle" : !atomic_load(&h->done) ? "the operation is still running"
                                     : h->status != DT_OK                   ? "the operation failed"
                                                                            : "this operation's result is its output tensor");
        return DT_ERR_STATE;
    }
    *out = h->result_t;
    out->data = h->result;
    return DT_OK;
}

int dt_output_copy(const dt_handle *h, void *dst)
{
    dt_tensor t;
    DT_TRY(dt_output(h, &t));
    size_t bytes = dt_tensor_count(&t) * dt_dtype_size(t.type);
    if (!bytes)
        return DT_OK;
    if (t.device >= 0)
        return dt_dev_memcpy(dst, t.data, bytes);
    memcpy(dst, t.data, bytes);
    return DT_OK;
}

int dt_received_splits(const dt_handle *h, int64_t *splits)
{
    if (!h || !atomic_load(&h->done) || !h->recv_splits) {
        dt_error("dt_received_splits: not a completed all-to-all");
        return DT_ERR_STATE;
    }
    memcpy(splits, h->recv_splits, (size_t)E.size * sizeof *splits);
    return DT_OK;
}

void dt_handle_free(dt_handle *h)
{
    if (!h)
        return;
    dt_wait(h);
    free_handle(h);
}

/* ---- joining --------------------------------------------------------------------------------------- */

int dt_engine_join(void)
{
    pthread_mutex_lock(&E.mu);
    if (!E.running || E.failed) {
        pthread_mutex_unlock(&E.mu);
        dt_error("join: %s", E.failed ? E.fail_msg : "libdt is not initialised");
        return DT_ERR_STATE;
    }
    uint64_t gen = E.join_gen;
    E.joined = 1;
    pthread_cond_broadcast(&E.cv);
    while (E.join_gen == gen && !E.failed && E.running)
        pthread_cond_wait(&E.done_cv, &E.mu);
    int rc = E.join_gen != gen ? E.join_result : DT_ERR_STATE;
    E.joined = 0;
    pthread_mutex_unlock(&E.mu);
    return rc;
}

/* ---- running units --------------------------------------------------------------------------------- */

static void scale_host(void *buf, size_t n, dt_dtype t, double f)
{
    if (f == 1)
        return;
    switch (t) {
    case DT_FLOAT32:
        for (size_t i = 0; i < n; i++)
            ((float *)buf)[i] = (float)(((float *)buf)[i] * f);
        break;
    case DT_FLOAT64:
        for (size_t i = 0; i < n; i++)
            ((double *)buf)[i] *= f;
        break;
    case DT_FLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = dt_f32_to_f16((float)(dt_f16_to_f32(((uint16_t *)buf)[i]) * f));
        break;
    case DT_BFLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = dt_f32_to_bf16((float)(dt_bf16_to_f32(((uint16_t *)buf)[i]) * f));
        break;
    case DT_INT32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)buf)[i] = (int32_t)(((int32_t *)buf)[i] * f);
        break;
    case DT_INT64:
        for (size_t i = 0; i < n; i++)
            ((int64_t *)buf)[i] = (int64_t)((double)((int64_t *)buf)[i] * f);
        break;
    case DT_UINT8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] * f);
        break;
    case DT_INT8:
        for (size_t i = 0; i < n; i++)
            ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] * f);
        break;
    }
}

/* memory on the unit's side: host, or the device through the worker's NCCL communicator */
static int mcopy(const unit *u, dt_comm *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return DT_OK;
    if (u->device)
        return dt_dev_copy(c, dst, src, bytes);
    memcpy(dst, src, bytes);
    return DT_OK;
}

static int mzero(const unit *u, dt_comm *c, void *dst, size_t bytes)
{
    if (!bytes)
        return DT_OK;
    if (u->device)
        return dt_dev_zero(c, dst, bytes);
    memset(dst, 0, bytes);
    return DT_OK;
}

static int mscale(const unit *u, dt_comm *c, void *buf, size_t n, double f)
{
    if (f == 1 || !n)
        return DT_OK;
    if (u->device)
        return dt_dev_scale(c, buf, n, u->type, f);
    scale_host(buf, n, u->type, f);
    return DT_OK;
}

static void *malloc_on(const unit *u, size_t bytes)
{
    if (u->device)
        return dt_dev_alloc(E.cfg.device, bytes ? bytes : 1);
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        dt_error("%s '%s': no memory for %zu bytes", kind_name[u->kind], u->d.name, bytes);
    return p;
}

static void free_on(const unit *u, void *p)
{
    if (u->device)
        dt_dev_free(p);
    else
        free(p);
}

/* the worker's fusion buffer of at least bytes */
static void *fusion_buf(worker *w, const unit *u, size_t bytes)
{
    void **b = u->device ? &w->dbuf : &w->buf;
    size_t *n = u->device ? &w->dbuf_n : &w->buf_n;
    bytes = bytes ? bytes : 1; /* empty tensors too get a buffer to point at */
    if (*n < bytes) {
        free_on(u, *b);
        *b = malloc_on(u, bytes);
        *n = *b ? bytes : 0;
    }
    return *b;
}

/* the caller's streams: the worker's stream waits for each piece's work queued before submission */
static int wait_events(const unit *u, dt_comm *c)
{
    if (!u->device)
        return DT_OK;
    for (int i = 0; i < u->np; i++) {
        dt_handle *h = u->p[i].h;
        if (h && h->events && h->events[u->p[i].t]) {
            void *ev = h->events[u->p[i].t];
            h->events[u->p[i].t] = NULL;
            DT_TRY(dt_dev_stream_wait(c, ev));
        }
    }
    if (u->h && u->h->events && u->h->events[0]) {
        void *ev = u->h->events[0];
        u->h->events[0] = NULL;
        DT_TRY(dt_dev_stream_wait(c, ev));
    }
    return DT_OK;
}

/* The reduction the communicator runs for u, and the factor its result is multiplied by after it:
 * an average without scale factors is the communicator's own (one rounding for fp16); with them,
 * a sum whose 1 / size joins the postscale. */
static dt_redop reduction(const unit *u, double *post)
{
    int plain = u->pre == 1 && u->post == 1;
    *post = u->post * (u->op == DT_AVG && !plain ? 1.0 / E.size : 1.0);
    return u->op == DT_AVG && !plain ? DT_SUM : u->op;
}

static int run_allreduce(worker *w, unit *u, dt_comm *c)
{
    size_t es = dt_dtype_size(u->type);
    DT_TRY(wait_events(u, c));
    double post;
    dt_redop op = reduction(u, &post);
    void *buf;
    if (u->np == 1 && u->p[0].h) { /* alone: in the output itself */
        dt_handle *h = u->p[0].h;
        buf = h->out[u->p[0].t].data;
        DT_TRY(mcopy(u, c, buf, h->in[u->p[0].t].data, u->total * es));
    } else {
        buf = fusion_buf(w, u, u->total * es);
        if (!buf)
            return DT_ERR_NOMEM;
        size_t off = 0;
        for (int i = 0; i < u->np; i++) {
            piece *p = &u->p[i];
            if (p->h)
                DT_TRY(mcopy(u, c, (char *)buf + off * es, p->h->in[p->t].data, p->count * es));
            else
                DT_TRY(mzero(u, c, (char *)buf + off * es, p->count * es));
            off += p->count;
        }
    }
    DT_TRY(mscale(u, c, buf, u->total, u->pre));
    DT_TRY(c->ops->allreduce(c, buf, buf, u->total, u->type, op));
    DT_TRY(mscale(u, c, buf, u->total, post));
    if (!(u->np == 1 && u->p[0].h)) {
        size_t off = 0;
        for (int i = 0; i < u->np; i++) {
            piece *p = &u->p[i];
            if (p->h)
                DT_TRY(mcopy(u, c, p->h->out[p->t].data, (char *)buf + off * es, p->count * es));
            off += p->count;
        }
    }
    return u->device ? dt_dev_sync(c) : DT_OK;
}

static int run_broadcast(worker *w, unit *u, dt_comm *c)
{
    (void)w;
    size_t bytes = u->total * dt_dtype_size(u->type);
    DT_TRY(wait_events(u, c));
    if (!u->h) { /* a joined rank: receives into scratch */
        void *s = malloc_on(u, bytes);
        if (!s)
            return DT_ERR_NOMEM;
        int rc = c->ops->broadcast(c, s, u->total, u->type, u->root);
        free_on(u, s);
        return rc;
    }
    void *buf = u->h->out[0].data;
    if (E.rank == u->root)
        DT_TRY(mcopy(u, c, buf, u->h->in[0].data, bytes));
    DT_TRY(c->ops->broadcast(c, buf, u->total, u->type, u->root));
    return u->device ? dt_dev_sync(c) : DT_OK;
}

static int set_result(unit *u, void *data, int64_t first)
{
    dt_handle *h = u->h;
    h->result = data;
    h->result_t = h->in[0];
    h->result_t.shape[0] = first;
    h->result_t.data = NULL;
    return DT_OK;
}

static int run_allgather(worker *w, unit *u, dt_comm *c)
{
    (void)w;
    size_t es = dt_dtype_size(u->type), *counts = calloc((size_t)E.size * 2, sizeof *counts);
    if (!counts)
        return DT_ERR_NOMEM;
    size_t *displs = counts + E.size, all = 0;
    for (int r = 0; r < E.size; r++) {
        counts[r] = (size_t)u->rows[r] * u->row_elems;
        displs[r] = all;
        all += counts[r];
    }
    int rc = wait_events(u, c);
    void *res = rc == DT_OK ? malloc_on(u, all * es) : NULL;
    if (!res) {
        free(counts);
        return rc == DT_OK ? DT_ERR_NOMEM : rc;
    }
    rc = c->ops->allgatherv(c, u->h ? u->h->in[0].data : NULL, counts[E.rank], res, counts, displs, u->type);
    if (rc == DT_OK && u->device)
        rc = dt_dev_sync(c);
    if (rc == DT_OK && u->h)
        set_result(u, res, (int64_t)(u->row_elems ? all / u->row_elems : 0));
    else
        free_on(u, res);
    free(counts);
    return rc;
}

static int run_alltoall(worker *w, unit *u, dt_comm *c)
{
    (void)w;
    dt_handle *h = u->h;
    int S = E.size;
    size_t es = dt_dtype_size(u->type);
    int64_t *rs = calloc((size_t)S, sizeof *rs);
    size_t *v = calloc((size_t)S * 6, sizeof *v);
    void *res = NULL;
    int rc = rs && v ? DT_OK : DT_ERR_NOMEM;
    size_t *one = v, *disp = v + S, *sc = v + 2 * S, *sd = v + 3 * S, *rcnt = v + 4 * S, *rd = v + 5 * S;
    if (rc == DT_OK) {
        for (int r = 0; r < S; r++) {
            one[r] = 1;
            disp[r] = (size_t)r;
        }
        /* the splits first: how many rows come from each rank (host memory: the host communicator) */
        dt_comm *hc = w->host;
        rc = hc->ops->alltoallv(hc, h->splits, one, disp, rs, one, disp, DT_INT64);
    }
    size_t all = 0, off = 0;
    if (rc == DT_OK) {
        for (int r = 0; r < S; r++) {
            sc[r] = (size_t)h->splits[r] * u->row_elems;
            sd[r] = off;
            off += sc[r];
            rcnt[r] = (size_t)rs[r] * u->row_elems;
            rd[r] = all;
            all += rcnt[r];
        }
        rc = wait_events(u, c);
    }
    if (rc == DT_OK && !(res = malloc_on(u, all * es)))
        rc = DT_ERR_NOMEM;
    if (rc == DT_OK)
        rc = c->ops->alltoallv(c, h->in[0].data, sc, sd, res, rcnt, rd, u->type);
    if (rc == DT_OK && u->device)
        rc = dt_dev_sync(c);
    if (rc == DT_OK) {
        set_result(u, res, (int64_t)(u->row_elems ? all / u->row_elems : 0));
        h->recv_splits = rs;
        rs = NULL;
        res = NULL;
    }
    if (res)
        free_on(u, res);
    free(rs);
    free(v);
    return rc;
}

static int run_reducescatter(worker *w, unit *u, dt_comm *c)
{
    dt_handle *h = u->h;
    size_t es = dt_dtype_size(u->type);
    void *tmp = fusion_buf(w, u, u->total * es);
    if (!tmp)
        return DT_ERR_NOMEM;
    DT_TRY(wait_events(u, c));
    double post;
    dt_redop op = reduction(u, &post);
    DT_TRY(mcopy(u, c, tmp, h->in[0].data, u->total * es));
    DT_TRY(mscale(u, c, tmp, u->total, u->pre));
    DT_TRY(c->ops->allreduce(c, tmp, tmp, u->total, u->type, op));
    int64_t rows = h->in[0].shape[0], first = 0;
    for (int r = 0; r < E.rank; r++)
        first += even_rows(rows, E.size, r);
    int64_t mine = even_rows(rows, E.size, E.rank);
    size_t n = (size_t)mine * u->row_elems;
    void *res = malloc_on(u, n * es);
    if (!res)
        return DT_ERR_NOMEM;
    int rc = mcopy(u, c, res, (char *)tmp + (size_t)first * u->row_elems * es, n * es);
    if (rc == DT_OK)
        rc = mscale(u, c, res, n, post);
    if (rc == DT_OK && u->device)
        rc = dt_dev_sync(c);
    if (rc != DT_OK) {
        free_on(u, res);
        return rc;
    }
    return set_result(u, res, mine);
}

static int run_unit(worker *w, unit *u)
{
    dt_comm *c = u->device ? w->dev : w->host;
    if (!c) {
        dt_error("%s '%s': no communicator for device tensors (see the line above)", kind_name[u->kind], u->d.name);
        return DT_ERR_STATE;
    }
    if (u->device && !w->dev_bound) {
        DT_TRY(c->ops->bind_thread(c));
        w->dev_bound = 1;
    }
    switch (u->kind) {
    case K_ALLREDUCE:
    case K_GROUPED: return run_allreduce(w, u, c);
    case K_BROADCAST: return run_broadcast(w, u, c);
    case K_ALLGATHER: return run_allgather(w, u, c);
    case K_ALLTOALL: return run_alltoall(w, u, c);
    case K_REDUCESCATTER: return run_reducescatter(w, u, c);
    case K_BARRIER: return c->ops->barrier(c);
    default: return DT_ERR_STATE;
    }
}

static void unit_done(unit *u, int rc)
{
    const char *msg = dt_log_last_error();
    char fallback[400];
    if (rc != DT_OK && !*msg) {
        snprintf(fallback, sizeof fallback, "%s '%s' failed (status %d)", kind_name[u->kind], u->d.name, rc);
        msg = fallback;
    }
    if (rc != DT_OK) {
        pthread_mutex_lock(&E.mu);
        if (!E.failed) { /* a collective that did not complete: every later one fails too */
            E.failed = rc == DT_ERR_TIMEOUT || rc == DT_ERR_MPI || rc == DT_ERR_NCCL;
            if (E.failed)
                snprintf(E.fail_msg, sizeof E.fail_msg, "%s", msg);
        }
        pthread_mutex_unlock(&E.mu);
    }
    if (u->h)
        finish_part(u->h, rc, msg);
    else
        for (int i = 0; i < u->np; i++)
            finish_part(u->p[i].h, rc, msg);
    free(u->p);
    free(u->rows);
    free(u);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    if (w->host)
        w->host->ops->bind_thread(w->host);
    for (;;) {
        pthread_mutex_lock(&E.mu);
        while (!w->head && !E.quit)
            pthread_cond_wait(&w->cv, &E.mu);
        unit *u = w->head;
        if (u) {
            w->head = u->next;
            if (!w->head)
                w->tail = NULL;
        }
        pthread_mutex_unlock(&E.mu);
        if (!u)
            break;
        dt_log_clear_error();
        int rc = run_unit(w, u);
        unit_done(u, rc);
    }
    return NULL;
}

/* under E.mu */
static void dispatch(unit *u)
{
    E.units++;
    E.unit_elems += u->total;
    worker *w = &E.w[E.next_worker++ % (uint64_t)E.nw];
    u->next = NULL;
    if (w->tail)
        w->tail->next = u;
    else
        w->head = u;
    w->tail = u;
    pthread_cond_signal(&w->cv);
}

/* ---- the coordinator ------------------------------------------------------------------------------- */

static void describe(const dt_handle *h, desc *d)
{
    memset(d, 0, sizeof *d);
    d->hash = h->hash;
    d->kind = h->kind;
    d->op = h->op;
    d->root = h->root;
    d->pre = h->pre;
    d->post = h->post;
    d->n = h->n;
    size_t len = strlen(h->name); /* cut: for messages; the hash tells names apart */
    memcpy(d->name, h->name, len < sizeof d->name ? len : sizeof d->name - 1);
    if (!h->n)
        return;
    d->type = h->in[0].type;
    d->device = h->in[0].device >= 0;
    if (h->kind == K_GROUPED) {
        uint64_t sh = 1469598103934665603ull;
        size_t all = 0;
        for (int i = 0; i < h->n; i++) {
            sh = fnv(&h->in[i].ndim, sizeof h->in[i].ndim, sh);
            sh = fnv(h->in[i].shape, (size_t)h->in[i].ndim * sizeof(int64_t), sh);
            all += dt_tensor_count(&h->in[i]);
        }
        d->ndim = 2;
        d->shape[0] = (int64_t)all;
        d->shape[1] = (int64_t)(sh & 0x7fffffffffffffffull);
        return;
    }
    d->ndim = h->in[0].ndim;
    memcpy(d->shape, h->in[0].shape, sizeof d->shape);
}

/* The value of field f of d, for a mismatch line. */
static void field_str(const desc *d, int f, char *b, size_t n)
{
    switch (f) {
    case 0: snprintf(b, n, "%s", kind_name[d->kind]); break;
    case 1: snprintf(b, n, "%s", dt_dtype_name((dt_dtype)d->type)); break;
    case 2: snprintf(b, n, "%s", d->device ? "a CUDA tensor" : "a host tensor"); break;
    case 3: snprintf(b, n, "%s", op_name((dt_redop)d->op)); break;
    case 4: snprintf(b, n, "prescale %g, postscale %g", d->pre, d->post); break;
    case 5: snprintf(b, n, "root %d", d->root); break;
    case 6:
        if (d->kind == K_GROUPED)
            snprintf(b, n, "%d tensors of %lld elements in all (shapes hash %llx)", d->n, (long long)d->shape[0],
                     (unsigned long long)d->shape[1]);
        else
            shape_str(b, n, d->ndim, d->shape);
        break;
    default: b[0] = 0;
    }
}

static const char *const field_name[7] = {"operation", "type", "device", "reduction", "scale factors", "root", "shape"};

/* 0, or the field in which a and b differ (as far as their kind compares it), plus one */
static int differs(const desc *a, const desc *b)
{
    if (a->kind != b->kind)
        return 1;
    if (a->kind == K_BARRIER)
        return 0;
    if (a->type != b->type)
        return 2;
    if (a->device != b->device)
        return 3;
    int reduces = a->kind == K_ALLREDUCE || a->kind == K_GROUPED || a->kind == K_REDUCESCATTER;
    if (reduces && a->op != b->op)
        return 4;
    if (reduces && (a->pre != b->pre || a->post != b->post))
        return 5;
    if (a->kind == K_BROADCAST && a->root != b->root)
        return 6;
    if (a->ndim != b->ndim || (a->kind == K_GROUPED && a->n != b->n))
        return 7;
    int from = a->kind == K_ALLGATHER || a->kind == K_ALLTOALL ? 1 : 0; /* their first dimension may differ */
    for (int i = from; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 7;
    return 0;
}

/* "allreduce 'x': shape differs across ranks: [3, 4] on ranks 0, 2; [3, 5] on rank 1" */
static void mismatch_line(char *m, size_t n, const desc *const *per, const int *has, int field)
{
    const desc *lead = NULL;
    for (int r = 0; r < E.size && !lead; r++)
        if (has[r])
            lead = per[r];
    if (!lead) {
        snprintf(m, n, "a mismatch with no rank to name");
        return;
    }
    size_t k = (size_t)snprintf(m, n, "%s '%s': the %s differs across ranks:", kind_name[lead->kind], lead->name,
                                field_name[field]);
    char *done = calloc((size_t)E.size, 1);
    for (int r = 0; r < E.size && k < n && done; r++) {
        if (!has[r] || done[r])
            continue;
        char v[200], v2[200];
        field_str(per[r], field, v, sizeof v);
        int count = 0;
        for (int q = r; q < E.size; q++) {
            if (!has[q] || done[q])
                continue;
            field_str(per[q], field, v2, sizeof v2);
            if (strcmp(v, v2) != 0 && !(field == 6 && !differs(per[r], per[q])))
                continue;
            done[q] = 1;
            count++;
        }
        k += (size_t)snprintf(m + k, n - k, "%s %s on rank%s", r == 0 || k == 0 ? "" : ";", v, count > 1 ? "s" : "");
        int first = 1;
        for (int q = r; q < E.size && k < n; q++)
            if (has[q] && done[q] == 1) {
                k += (size_t)snprintf(m + k, n - k, "%s %d", first ? "" : ",", q);
                first = 0;
                done[q] = 2;
            }
    }
    free(done);
}

/* ranks listed into b: those with flag set to want */
static void ranks_str(char *b, size_t n, const char *flag, char want)
{
    size_t k = 0;
    b[0] = 0;
    for (int r = 0; r < E.size && k < n; r++)
        if (flag[r] == want)
            k += (size_t)snprintf(b + k, n - k, "%s%d", k ? ", " : "", r);
}

static int lazy_device_comms(void)
{
    if (E.w[0].dev)
        return DT_OK;
    if (E.dev_tried)
        return DT_ERR_STATE;
    E.dev_tried = 1;
    if (!dt_dev_available()) {
        dt_error("a CUDA tensor, and this libdt was built without CUDA");
        return DT_ERR_STATE;
    }
    int device = E.cfg.device >= 0 ? E.cfg.device : (E.cfg.launch->local_rank % (dt_gpu_count() ? dt_gpu_count() : 1));
    E.cfg.device = device;
    dt_comm *d = E.cfg.dev;
    if (!d)
        DT_TRY(dt_comm_nccl(&d, E.cfg.launch, device, E.cfg.timeout_s));
    E.cfg.dev = NULL;
    E.w[0].dev = d;
    for (int s = 1; s < E.nw; s++)
        DT_TRY(d->ops->dup(d, &E.w[s].dev));
    return DT_OK;
}

/* Units of the agreed operations, in the lead's order, to the workers. */
typedef struct agreed {
    const desc *d;       /* the lead's */
    dt_handle *mine;     /* NULL on a joined rank */
    int64_t *rows;       /* allgather: per rank */
    int fail;            /* a mismatch (the line said) */
} agreed;

static size_t row_elems_of(const desc *d)
{
    size_t e = 1;
    for (int i = 1; i < d->ndim; i++)
        e *= (size_t)d->shape[i];
    return e;
}

static unit *new_unit(const agreed *a)
{
    unit *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->kind = (enum op_kind)a->d->kind;
    u->type = (dt_dtype)a->d->type;
    u->op = (dt_redop)a->d->op;
    u->pre = a->d->pre;
    u->post = a->d->post;
    u->device = a->d->device;
    u->root = a->d->root;
    u->d = *a->d;
    u->h = a->mine;
    u->row_elems = row_elems_of(a->d);
    u->total = 1;
    for (int i = 0; i < a->d->ndim && u->kind != K_GROUPED; i++)
        u->total *= (size_t)a->d->shape[i];
    if (u->kind == K_BARRIER)
        u->total = 0;
    return u;
}

static int add_piece(unit *u, dt_handle *h, int t, size_t count)
{
    piece *p = realloc(u->p, (size_t)(u->np + 1) * sizeof *p);
    if (!p)
        return DT_ERR_NOMEM;
    u->p = p;
    u->p[u->np++] = (piece){h, t, count};
    return DT_OK;
}

static int same_reduction(const unit *u, const desc *d)
{
    return u->type == (dt_dtype)d->type && u->op == (dt_redop)d->op && u->pre == d->pre && u->post == d->post &&
           u->device == d->device;
}

/* the tensors of an agreed all-reduce: their counts from this rank's handle, or (joined) the lead's
 * description: a grouped one's tensors then go as one stand-in piece of all their elements */
static void execute(agreed *list, int n)
{
    size_t thr = E.cfg.fusion_bytes;
    unit *open = NULL;
    pthread_mutex_lock(&E.mu);
    for (int i = 0; i < n; i++) {
        agreed *a = &list[i];
        if (a->fail)
            continue;
        if (a->d->device && lazy_device_comms() != DT_OK) {
            if (a->mine) {
                atomic_store(&a->mine->parts_left, 1);
                pthread_mutex_unlock(&E.mu);
                finish_part(a->mine, DT_ERR_STATE, dt_log_last_error());
                pthread_mutex_lock(&E.mu);
            }
            continue;
        }
        int reduce = a->d->kind == K_ALLREDUCE || a->d->kind == K_GROUPED;
        if (!reduce) {
            if (open) {
                dispatch(open);
                open = NULL;
            }
            unit *u = new_unit(a);
            if (!u)
                continue; /* out of memory: the handle stays pending and times out with a line */
            if (a->mine)
                atomic_store(&a->mine->parts_left, 1);
            u->rows = a->rows;
            a->rows = NULL;
            dispatch(u);
            continue;
        }
        size_t es = dt_dtype_size((dt_dtype)a->d->type);
        int grouped = a->d->kind == K_GROUPED;
        /* a grouped all-reduce is a unit of its own, whatever its size: a joined rank, which knows only
         * its element count, then cuts the same units as the others */
        int nt = a->mine ? a->mine->n : 1;
        if (a->mine)
            atomic_store(&a->mine->parts_left, nt);
        if (grouped && open) {
            dispatch(open);
            open = NULL;
        }
        for (int t = 0; t < nt; t++) {
            size_t count;
            if (a->mine)
                count = dt_tensor_count(&a->mine->in[t]);
            else if (grouped)
                count = (size_t)a->d->shape[0];
            else {
                count = 1;
                for (int k = 0; k < a->d->ndim; k++)
                    count *= (size_t)a->d->shape[k];
            }
            if (open && !grouped && (!same_reduction(open, a->d) || (open->total + count) * es > thr)) {
                dispatch(open);
                open = NULL;
            }
            if (!open) {
                open = new_unit(a);
                if (!open)
                    break;
                open->kind = K_ALLREDUCE;
                open->h = NULL;
                open->total = 0;
            }
            add_piece(open, a->mine, t, count);
            open->total += count;
            if (!grouped && open->total * es >= thr) {
                dispatch(open);
                open = NULL;
            }
        }
        if (grouped && open) {
            dispatch(open);
            open = NULL;
        }
    }
    if (open)
        dispatch(open);
    pthread_mutex_unlock(&E.mu);
}

/* Takes h off the pending list: 1, or 0 when it was not there (agreed, or failed by dt_finalize). */
static int take_pending(dt_handle *h)
{
    int found = 0;
    pthread_mutex_lock(&E.mu);
    for (dt_handle **p = &E.pend_head; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            found = 1;
            break;
        }
    if (found) {
        E.pend_tail = NULL;
        for (dt_handle *p = E.pend_head; p; p = p->next)
            E.pend_tail = p;
        E.npending--;
    }
    pthread_mutex_unlock(&E.mu);
    return found;
}

/* One round. DT_OK, or the failure of a control collective (every rank's operations then fail). */
static int round_once(int *progress, int *all_stopped)
{
    dt_comm *c = E.cfg.ctrl;
    int S = E.size;
    *progress = 0;
    *all_stopped = 0;
    /* this rank's pending operations, in submission order */
    pthread_mutex_lock(&E.mu);
    int n = 0, joined = E.joined, stopping = E.stopping;
    /* described under the lock: a pending handle can be failed (dt_finalize) and freed by its owner
     * at any time once off the list, so outside the lock mine[] is only compared, never read */
    size_t cap = (size_t)(E.npending < ROUND_MAX ? E.npending : ROUND_MAX) + 1;
    dt_handle **mine = malloc(cap * sizeof *mine);
    desc *mine_d = malloc(cap * sizeof *mine_d);
    double *mine_t = malloc(cap * sizeof *mine_t);
    for (dt_handle *h = E.pend_head; h && n < ROUND_MAX && mine && mine_d && mine_t && !joined; h = h->next) {
        describe(h, &mine_d[n]);
        mine_t[n] = h->submitted;
        mine[n++] = h;
    }
    pthread_mutex_unlock(&E.mu);
    if (!mine || !mine_d || !mine_t) {
        free(mine);
        free(mine_d);
        free(mine_t);
        return DT_ERR_NOMEM;
    }
    int32_t hdr[4] = {n, joined, stopping, 0}, *all = malloc((size_t)S * sizeof hdr);
    desc *ds = NULL, *alld = NULL;
    agreed *list = NULL;
    char *flag = NULL;
    int rc = all ? DT_OK : DT_ERR_NOMEM;
    if (rc == DT_OK)
        rc = c->ops->allgather(c, hdr, all, 4, DT_INT32);
    int maxn = 0;
    for (int r = 0; rc == DT_OK && r < S; r++)
        maxn = all[4 * r] > maxn ? all[4 * r] : maxn;
    if (rc == DT_OK && maxn) {
        ds = calloc((size_t)maxn, sizeof *ds);
        alld = calloc((size_t)maxn * (size_t)S, sizeof *alld);
        if (!ds || !alld)
            rc = DT_ERR_NOMEM;
        if (rc == DT_OK && n)
            memcpy(ds, mine_d, (size_t)n * sizeof *ds);
        if (rc == DT_OK)
            rc = c->ops->allgather(c, ds, alld, (size_t)maxn * sizeof *ds, DT_UINT8);
    }
    if (rc != DT_OK)
        goto out;
    E.round++;
    int nstop = 0, njoined = 0, lead = -1;
    for (int r = 0; r < S; r++) {
        int j = all[4 * r + 1], st = all[4 * r + 2];
        nstop += st;
        if (j && E.join_round[r] < 0)
            E.join_round[r] = (int64_t)E.round;
        if (!j)
            E.join_round[r] = -1;
        njoined += j && !st;
        if (!j && !st && lead < 0)
            lead = r;
    }
    if (nstop == S) {
        *all_stopped = 1;
        goto out;
    }
    if (nstop) { /* a rank is shutting down: nothing more can complete on every rank */
        pthread_mutex_lock(&E.mu);
        int first = !E.peer_stopped;
        E.peer_stopped = 1;
        pthread_mutex_unlock(&E.mu);
        if (first && !stopping && n) /* said only where it costs something: a normal end is quiet */
            for (int r = 0; r < S; r++)
                if (all[4 * r + 2]) {
                    dt_warn("rank %d has shut down (dt_finalize, hvd.shutdown): operations from now on fail", r);
                    break;
                }
    }
    if (njoined && njoined == S - nstop) { /* every rank still here has joined */
        int last = -1;
        int64_t lr = -1;
        for (int r = 0; r < S; r++)
            if (all[4 * r + 1] && E.join_round[r] >= lr) {
                lr = E.join_round[r];
                last = r;
            }
        for (int r = 0; r < S; r++)
            E.join_round[r] = -1;
        pthread_mutex_lock(&E.mu);
        if (E.joined) {
            E.join_result = last;
            E.join_gen++;
            E.joined = 0;
            pthread_cond_broadcast(&E.done_cv);
        }
        pthread_mutex_unlock(&E.mu);
        *progress = 1;
        goto out;
    }
    if (lead < 0 || !all[4 * lead])
        goto stalls;
    /* the lead's operations that every rank still training has submitted */
    const desc **per = calloc((size_t)S, sizeof *per);
    int *has = calloc((size_t)S, sizeof *has);
    list = calloc((size_t)all[4 * lead], sizeof *list);
    int na = 0;
    if (!per || !has || !list) {
        free(per);
        free(has);
        rc = DT_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < all[4 * lead]; i++) {
        const desc *d = &alld[(size_t)lead * maxn + i];
        int everywhere = 1;
        for (int r = 0; r < S; r++) {
            per[r] = NULL;
            has[r] = 0;
            if (all[4 * r + 1] || all[4 * r + 2])
                continue;
            for (int k = 0; k < all[4 * r]; k++) {
                const desc *o = &alld[(size_t)r * maxn + k];
                if (o->hash == d->hash && !strcmp(o->name, d->name)) {
                    per[r] = o;
                    has[r] = 1;
                    break;
                }
            }
            everywhere &= has[r];
        }
        if (!everywhere || nstop)
            continue;
        agreed *a = &list[na++];
        a->d = d;
        for (int k = 0; k < n; k++)
            if (ds[k].hash == d->hash && !strcmp(ds[k].name, d->name))
                a->mine = mine[k];
        /* off the pending list first: once failed or done, its owner may free it. Not there any more
         * (dt_finalize failed it meanwhile): this rank takes part with a stand-in, as a joined one */
        if (a->mine && !take_pending(a->mine))
            a->mine = NULL;
        int field = 0;
        for (int r = 0; r < S && !field; r++)
            if (has[r])
                field = differs(d, per[r]);
        if (!field && njoined && (d->kind == K_ALLTOALL || d->kind == K_REDUCESCATTER))
            field = -1;
        if (!field && njoined && d->kind == K_BROADCAST && all[4 * d->root + 1])
            field = -2;
        if (field) {
            char m[1200];
            if (field > 0)
                mismatch_line(m, sizeof m, per, has, field - 1);
            else
                snprintf(m, sizeof m, "%s '%s': %s has joined (hvd.join): only all-reduce, all-gather and broadcast "
                         "from a rank that has not joined run beside a joined rank", kind_name[d->kind], d->name,
                         field == -2 ? "its root" : "a rank");
            a->fail = 1;
            if (a->mine)
                fail_handle(a->mine, DT_ERR_INPUT, m);
        } else if (d->kind == K_ALLGATHER) {
            a->rows = calloc((size_t)S, sizeof *a->rows);
            for (int r = 0; r < S && a->rows; r++)
                a->rows[r] = has[r] ? per[r]->shape[0] : 0;
            if (!a->rows)
                a->fail = 1;
        }
    }
    free(per);
    free(has);
    if (na) {
        E.rounds_busy++;
        *progress = 1;
        execute(list, na);
        for (int i = 0; i < na; i++)
            free(list[i].rows);
    }
stalls:
    /* this rank's operations that some rank has not submitted within the timeout */
    flag = calloc((size_t)S, 1);
    for (int k = 0; k < n && flag; k++) {
        if (dt_seconds() - mine_t[k] < E.cfg.timeout_s)
            continue;
        for (int r = 0; r < S; r++) {
            flag[r] = 0;
            for (int q = 0; q < all[4 * r] && !flag[r]; q++)
                flag[r] = alld[(size_t)r * maxn + q].hash == ds[k].hash;
        }
        char have[300], lack[300], m[1000];
        ranks_str(have, sizeof have, flag, 1);
        ranks_str(lack, sizeof lack, flag, 0);
        snprintf(m, sizeof m, "%s '%s' was submitted on rank%s %s but not on rank%s %s within %.0f s (every rank "
                 "submits each named operation; DT_COMM_TIMEOUT sets the limit)", kind_name[ds[k].kind],
                 ds[k].name, strchr(have, ',') ? "s" : "", have, strchr(lack, ',') ? "s" : "", lack,
                 E.cfg.timeout_s);
        if (take_pending(mine[k])) /* still pending (not agreed, not failed): it is this thread's to fail */
            fail_handle(mine[k], DT_ERR_TIMEOUT, m);
    }
out:
    free(flag);
    free(mine_d);
    free(mine_t);
    free(list);
    free(mine);
    free(all);
    free(ds);
    free(alld);
    return rc;
}

/* every pending handle fails with msg (under no lock) */
static void fail_pending(int status, const char *msg)
{
    for (;;) {
        pthread_mutex_lock(&E.mu);
        dt_handle *h = E.pend_head;
        if (h) {
            E.pend_head = h->next;
            if (!E.pend_head)
                E.pend_tail = NULL;
            E.npending--;
        }
        pthread_mutex_unlock(&E.mu);
        if (!h)
            return;
        char m[1400];
        snprintf(m, sizeof m, "%s '%s': %s", kind_name[h->kind], h->name, msg);
        atomic_store(&h->parts_left, 1);
        finish_part(h, status, m);
    }
}

static void *coord_main(void *arg)
{
    (void)arg;
    dt_comm *c = E.cfg.ctrl;
    c->ops->bind_thread(c);
    int progress = 0, all_stopped;
    uint64_t seen = 0;
    for (;;) {
        /* At once while this rank has operations to match and the last round ran some, or one was
         * submitted during it; otherwise a pause of up to cycle_s, which a submission ends. (Waiting
         * cycle_s after every busy round, to fuse more of a backward pass's gradients, cost each small
         * operation a millisecond and did not make resnet18's steps faster: its gradients come
         * further apart than that.) */
        pthread_mutex_lock(&E.mu);
        if (!(E.npending && !E.joined && (progress || E.nsubmit != seen))) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double t = (double)ts.tv_nsec * 1e-9 + E.cfg.cycle_s;
            ts.tv_sec += (time_t)t;
            ts.tv_nsec = (long)((t - floor(t)) * 1e9);
            pthread_cond_timedwait(&E.cv, &E.mu, &ts);
        }
        seen = E.nsubmit;
        pthread_mutex_unlock(&E.mu);
        dt_log_clear_error();
        int rc = round_once(&progress, &all_stopped);
        if (rc != DT_OK) {
            char msg[sizeof E.fail_msg];
            snprintf(msg, sizeof msg, "%s", *dt_log_last_error() ? dt_log_last_error() : "a collective failed");
            pthread_mutex_lock(&E.mu);
            if (!E.failed) {
                E.failed = 1;
                snprintf(E.fail_msg, sizeof E.fail_msg, "%s", msg);
            }
            pthread_cond_broadcast(&E.done_cv);
            pthread_mutex_unlock(&E.mu);
            fail_pending(rc, msg);
            break;
        }
        if (all_stopped)
            break;
    }
    return NULL;
}

/* ---- start and stop -------------------------------------------------------------------------------- */

int dt_engine_start(const dt_engine_cfg *cfg)
{
    E.cfg = *cfg;
    E.rank = cfg->launch->rank;
    E.size = cfg->launch->size;
    E.nw = cfg->streams < 1 ? 1 : cfg->streams > DT_ENGINE_MAX_STREAMS ? DT_ENGINE_MAX_STREAMS : cfg->streams;
    E.failed = E.stopping = E.peer_stopped = E.quit = E.joined = 0;
    E.round = 0;
    E.dev_tried = 0;
    E.next_worker = 0;
    for (int k = 0; k < K_KINDS; k++)
        atomic_store(&E.noname[k], 0);
    E.join_round = malloc((size_t)E.size * sizeof *E.join_round);
    if (!E.join_round)
        return DT_ERR_NOMEM;
    for (int r = 0; r < E.size; r++)
        E.join_round[r] = -1;
    int rc = DT_OK;
    for (int s = 0; s < E.nw && rc == DT_OK; s++) {
        memset(&E.w[s], 0, sizeof E.w[s]);
        pthread_cond_init(&E.w[s].cv, NULL);
        rc = cfg->ctrl->ops->dup(cfg->ctrl, &E.w[s].host);
    }
    if (rc == DT_OK && cfg->dev) { /* the launch's NCCL communicator (PMI2 GPU ranks): the workers' */
        E.cfg.dev = NULL;
        E.w[0].dev = cfg->dev;
        E.dev_tried = 1;
        for (int s = 1; s < E.nw && rc == DT_OK; s++)
            rc = cfg->dev->ops->dup(cfg->dev, &E.w[s].dev);
    }
    E.running = 1;
    for (int s = 0; s < E.nw && rc == DT_OK; s++) {
        int e = pthread_create(&E.w[s].th, NULL, worker_main, &E.w[s]);
        E.w[s].started = e == 0;
        if (e) {
            dt_error("libdt: cannot start a worker thread: %s", strerror(e));
            rc = DT_ERR_SYS;
        }
    }
    if (rc == DT_OK) {
        int e = pthread_create(&E.coord, NULL, coord_main, NULL);
        E.coord_started = e == 0;
        if (e) {
            dt_error("libdt: cannot start the coordinator thread: %s", strerror(e));
            rc = DT_ERR_SYS;
        }
    }
    if (rc != DT_OK)
        dt_engine_stop();
    return rc;
}

int dt_engine_stop(void)
{
    if (!E.running)
        return DT_OK;
    pthread_mutex_lock(&E.mu);
    E.stopping = 1;
    pthread_cond_broadcast(&E.cv);
    pthread_mutex_unlock(&E.mu);
    fail_pending(DT_ERR_STATE, "not run: this rank shut down before every rank had submitted it");
    if (E.coord_started)
        pthread_join(E.coord, NULL);
    E.coord_started = 0;
    pthread_mutex_lock(&E.mu);
    E.quit = 1;
    for (int s = 0; s < E.nw; s++)
        pthread_cond_broadcast(&E.w[s].cv);
    pthread_mutex_unlock(&E.mu);
    for (int s = 0; s < E.nw; s++)
        if (E.w[s].started)
            pthread_join(E.w[s].th, NULL);
    pthread_mutex_lock(&E.mu);
    E.running = 0;
    pthread_cond_broadcast(&E.done_cv);
    pthread_mutex_unlock(&E.mu);
    int failed = E.failed;
    dt_debug("libdt engine: %llu rounds, %llu of them agreeing on operations; %llu units of %.0f elements on average",
             (unsigned long long)E.round, (unsigned long long)E.rounds_busy, (unsigned long long)E.units,
             E.units ? (double)E.unit_elems / (double)E.units : 0.0);
    for (int s = 0; s < E.nw; s++) {
        worker *w = &E.w[s];
        free(w->buf);
        if (w->dbuf)
            dt_dev_free(w->dbuf);
        dt_comm_free(w->dev);
        dt_comm_free(w->host);
        pthread_cond_destroy(&w->cv);
        memset(w, 0, sizeof *w);
    }
    dt_comm_free(E.cfg.dev);
    dt_comm_free(E.cfg.ctrl); /* after a failure: ends the job */
    E.cfg.ctrl = E.cfg.dev = NULL;
    free(E.join_round);
    E.join_round = NULL;
    return failed ? DT_ERR_STATE : DT_OK;
}

void dt_engine_set_timeout(double seconds)
{
    E.cfg.timeout_s = seconds;
    if (E.cfg.ctrl)
        E.cfg.ctrl->timeout_s = seconds;
    for (int s = 0; s < E.nw; s++) {
        if (E.w[s].host)
            E.w[s].host->timeout_s = seconds;
        if (E.w[s].dev)
            E.w[s].dev->timeout_s = seconds;
    }
}
