/* ddp.c: buckets, the backward hook and the communication thread (contract in ddp.h).
 *
 * Threads: the communication thread binds itself to the communicator (bind_thread: NCCL makes the
 * rank's device current) before anything else, and dt_ddp_create waits for that to succeed; the
 * thread calling dt_ddp_create is bound there too.
 * Order of device work: every collective on model memory (weights, buffers, gradients) comes after
 * model_written, on the thread that queued the ops that wrote it (see there). */
#include "config.h"

#include "train/ddp.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/half.h"
#include "util/log.h"

typedef struct bucket {
    int64_t lo, hi;     /* range of the flat gradient array (params and their alignment padding) */
    int first_param;    /* its parameters are first_param, first_param - 1, ... (n_params of them) */
    int n_params;
    int pending;        /* parameters whose gradient is not final yet this backward */
    dt_event *ready;    /* recorded on the compute queue once its gradients are final */
    size_t h0, f0;      /* device wire (below): where its gradients start in dev16 and dev32 */
} bucket;

struct dt_ddp {
    dt_model *model;
    dt_comm *comm;
    dt_ddp_cfg cfg;
    bucket *buckets;
    int n_buckets;
    int *param_bucket;  /* per model parameter: its bucket, or -1 */
    /* the communication thread */
    pthread_t thread;
    int have_thread;
    int thread_up;      /* the thread has bound itself (thread_rc: how that went) */
    int thread_rc;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready_upto;     /* buckets [0, ready_upto) may be sent (in order) */
    int done_upto;      /* buckets [0, done_upto) are averaged */
    int active;         /* a synchronised backward is under way */
    int quit, err;
    dt_comm *bn_comm;   /* SyncBN's own communicator */
    uint16_t *wire;     /* the largest bucket in the wire's reduced type */
    float *wire32;      /* and its fp32 parameters (AMP keeps BN in fp32): they go as fp32 */
    void *dev16;        /* device wire: every bucket's gradients that go in the reduced type, backend memory */
    float *dev32;       /* and those that go as fp32 */
    size_t dev16_n, dev32_n; /* their elements */
    int bn_err;         /* a SyncBN reduction failed: later ones are skipped, the step fails */
    dt_event *written;  /* model_written's */
};

/* Ordering (backend.h, "Queues and fences"): a backend may still be running the ops it was given
 * (a device backend on its stream, the deferred test backend on its thread), and the communicator
 * runs on another stream (NCCL) or thread, which nothing orders after them but an event. So:
 *   - each bucket's event is recorded on the compute queue when its last gradient's op has been
 *     issued (the backward hook, on the thread that issues ops; after backward for the rest), and
 *     the reduction waits on it (reduce_bucket, on the communication thread): backward goes on;
 *   - before create's and sync_buffers' broadcasts, model_written records and waits on one event.
 * After a collective nothing is needed: a communicator returns only once its operation is complete
 * (comm.h; NCCL drains its stream), so ops issued afterwards, on any queue, read the result. */
static void model_written(dt_ddp *d)
{
    const dt_backend *be = d->model->be;
    be->event_record(d->written, DT_QUEUE_COMPUTE);
    be->event_sync(d->written);
}

typedef void (*wire_mover)(dt_ddp *d, void *dst, dt_dtype dt, const void *src, dt_dtype st, size_t n);
static void wire_move(dt_ddp *d, const bucket *k, int to_wire, void *w16, float *w32, wire_mover move, size_t *nh,
                      size_t *nf);
static void device_move(dt_ddp *d, void *dst, dt_dtype dt, const void *src, dt_dtype st, size_t n);

/* buckets [from, to) are final: their events mark the compute queue now (after the copies into the
 * device wire, when there is one) */
static void buckets_written(dt_ddp *d, int from, int to)
{
    for (int i = from; i < to; i++) {
        const bucket *k = &d->buckets[i];
        if (d->dev16) {
            size_t nh, nf;
            dt_model_prof_mark(d->model, DT_PROF_DDP_PACK);
            wire_move(d, k, 1, (uint16_t *)d->dev16 + k->h0, d->dev32 + k->f0, device_move, &nh, &nf);
        }
        d->model->be->event_record(k->ready, DT_QUEUE_COMPUTE);
    }
}

/* the model's SyncBN hook: sums n doubles over the replicas */
static int bn_sync(void *ctx, double *buf, int n)
{
    dt_ddp *d = ctx;
    if (d->bn_err)
        return d->bn_err;
    int rc = d->bn_comm->ops->allreduce(d->bn_comm, buf, buf, (size_t)n, DT_FLOAT64, DT_SUM);
    if (rc != DT_OK)
        d->bn_err = rc;
    return rc;
}

/* The wire: how gradients stored in several types travel (AMP O2/O3: the reduced type for most,
 * fp32 for BN's under keep_batchnorm_fp32). A reduced parameter's gradient goes in the wire's reduced
 * type when that is cfg.wire, every other as fp32 (BN's; reduced ones widened when the wire is fp32,
 * and rounded back on return). Stored reduced, a gradient moves as it is; emulated (fp32 storage of
 * rounded values), it is converted, which gives the same bits. Two places hold the wire:
 *   host memory (a host backend: MPI reads it): wire and wire32, the largest bucket's worth, reused
 *     by each bucket in turn on the thread that reduces it, moved by host conversions;
 *   backend memory (a device backend with gradients of several types: NCCL reads it): dev16 and
 *     dev32, every bucket's region at its h0 and f0, filled by copy_grad ops on the compute queue
 *     before the bucket's event (buckets_written), reduced in place, and moved back into the
 *     gradients by ops after the last bucket (unpack_device): no op is issued from the
 *     communication thread, and the ops of backward are not held behind a copy. */

static void host_move(dt_ddp *d, void *dst, dt_dtype dt, const void *src, dt_dtype st, size_t n)
{
    (void)d;
    if (dt == st)
        memcpy(dst, src, n * dt_dtype_size(dt));
    else if (dt == DT_FLOAT32) /* widened */
        st == DT_BFLOAT16 ? dt_bf16_to_f32_n(n, src, dst) : dt_f16_to_f32_n(n, src, dst);
    else /* rounded */
        dt == DT_BFLOAT16 ? dt_f32_to_bf16_n(n, src, dst) : dt_f32_to_f16_n(n, src, dst);
}

static void device_move(dt_ddp *d, void *dst, dt_dtype dt, const void *src, dt_dtype st, size_t n)
{
    d->model->be->copy_grad((int64_t)n, src, st, dst, dt, 0);
}

/* Moves bucket k's gradients to the wire (to_wire) or back: the reduced-type ones at w16, the others
 * at w32; *nh and *nf count the elements of each. */
static void wire_move(dt_ddp *d, const bucket *k, int to_wire, void *w16, float *w32, wire_mover move, size_t *nh,
                      size_t *nf)
{
    const dt_dtype half = d->cfg.wire;
    *nh = *nf = 0;
    for (int j = 0, p = k->first_param; j < k->n_params; p--) {
        const dt_param *q = &d->model->params[p];
        if (!dt_param_trainable(q))
            continue;
        j++;
        void *g = dt_param_grad(d->model, q);
        size_t n = (size_t)q->numel;
        if (dt_param_reduced(d->model, q) && (half == DT_FLOAT16 || half == DT_BFLOAT16)) {
            uint16_t *w = (uint16_t *)w16 + *nh;
            if (to_wire)
                move(d, w, half, g, q->dtype, n);
            else
                move(d, g, q->dtype, w, half, n);
            *nh += n;
        } else {
            float *w = w32 + *nf;
            if (to_wire)
                move(d, w, DT_FLOAT32, g, q->dtype, n);
            else
                move(d, g, q->dtype, w, DT_FLOAT32, n);
            *nf += n;
        }
    }
}

/* gradients times cfg.grad_scale (after averaging), bucket k's */
static void scale_bucket(dt_ddp *d, const bucket *k)
{
    if (d->cfg.grad_scale == 1.0f)
        return;
    for (int j = 0, p = k->first_param; j < k->n_params; p--) {
        const dt_param *q = &d->model->params[p];
        if (!dt_param_trainable(q))
            continue;
        j++;
        d->model->be->scale(q->numel, q->dtype, d->cfg.grad_scale, dt_param_grad(d->model, q));
    }
}

/* device wire: every bucket back into the gradients, scaled (after the last all-reduce) */
static void unpack_device(dt_ddp *d)
{
    size_t nh, nf;
    for (int i = 0; i < d->n_buckets; i++) {
        const bucket *k = &d->buckets[i];
        wire_move(d, k, 0, (uint16_t *)d->dev16 + k->h0, d->dev32 + k->f0, device_move, &nh, &nf);
        scale_bucket(d, k);
    }
}

static int reduce_bucket(dt_ddp *d, int i)
{
    bucket *k = &d->buckets[i];
    d->model->be->event_sync(k->ready); /* its gradients complete (on the device wire: packed) */
    size_t nh, nf;
    if (d->dev16) { /* the bucket's regions of the device wire, in place; unpacked after the last */
        const bucket *next = i + 1 < d->n_buckets ? &d->buckets[i + 1] : NULL;
        nh = (next ? next->h0 : d->dev16_n) - k->h0;
        nf = (next ? next->f0 : d->dev32_n) - k->f0;
        if (nh)
            DT_TRY(d->comm->ops->allreduce(d->comm, (uint16_t *)d->dev16 + k->h0, (uint16_t *)d->dev16 + k->h0, nh,
                                           d->cfg.wire, DT_AVG));
        if (nf)
            DT_TRY(d->comm->ops->allreduce(d->comm, d->dev32 + k->f0, d->dev32 + k->f0, nf, DT_FLOAT32, DT_AVG));
        return DT_OK;
    }
    if (d->wire32) { /* half the bytes for the reduced-type gradients (AMP O2/O3); fp32 ones as fp32 */
        wire_move(d, k, 1, d->wire, d->wire32, host_move, &nh, &nf);
        if (nh)
            DT_TRY(d->comm->ops->allreduce(d->comm, d->wire, d->wire, nh, d->cfg.wire, DT_AVG));
        if (nf)
            DT_TRY(d->comm->ops->allreduce(d->comm, d->wire32, d->wire32, nf, DT_FLOAT32, DT_AVG));
        wire_move(d, k, 0, d->wire, d->wire32, host_move, &nh, &nf);
    } else { /* every gradient fp32, the bucket's range in place */
        float *g = (float *)d->model->grads + k->lo;
        DT_TRY(d->comm->ops->allreduce(d->comm, g, g, (size_t)(k->hi - k->lo), DT_FLOAT32, DT_AVG));
    }
    scale_bucket(d, k);
    return DT_OK;
}

static void *comm_thread(void *arg)
{
    dt_ddp *d = arg;
    int rc = d->comm->ops->bind_thread(d->comm); /* first: NCCL and CUDA from here on the rank's device */
    pthread_mutex_lock(&d->mu);
    d->thread_rc = rc;
    d->thread_up = 1;
    pthread_cond_broadcast(&d->cv);
    while (rc == DT_OK) { /* unbound, it ends here (dt_ddp_create fails) */
        while (!d->quit && !(d->active && !d->err && d->done_upto < d->ready_upto))
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->quit)
            break;
        int i = d->done_upto;
        pthread_mutex_unlock(&d->mu);
        int e = reduce_bucket(d, i);
        pthread_mutex_lock(&d->mu);
        if (e != DT_OK)
            d->err = e;
        else
            d->done_upto = i + 1;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* the model's hook: a node's gradients are final */
static void on_grads(void *ctx, int node)
{
    dt_ddp *d = ctx;
    const dt_node *nd = &d->model->nodes[node];
    pthread_mutex_lock(&d->mu); /* only this (the compute) thread changes pending and ready_upto */
    for (int j = 0; j < DT_NODE_PARAMS; j++) {
        int p = nd->param[j];
        if (p >= 0 && d->param_bucket[p] >= 0)
            d->buckets[d->param_bucket[p]].pending--;
    }
    int upto = d->ready_upto;
    while (upto < d->n_buckets && d->buckets[upto].pending == 0) /* in order: the same on every rank */
        upto++;
    pthread_mutex_unlock(&d->mu);
    if (upto == d->ready_upto)
        return;
    buckets_written(d, d->ready_upto, upto); /* the communication thread waits on these */
    pthread_mutex_lock(&d->mu);
    d->ready_upto = upto;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static int make_buckets(dt_ddp *d)
{
    dt_model *m = d->model;
    size_t cap0 = d->cfg.first_bucket_bytes, cap = d->cfg.bucket_bytes;
    d->param_bucket = malloc((size_t)m->n_params * sizeof(int));
    d->buckets = calloc((size_t)m->n_params + 1, sizeof *d->buckets);
    if (!d->param_bucket || !d->buckets)
        return DT_ERR_NOMEM;
    size_t bytes = 0;
    for (int p = m->n_params - 1; p >= 0; p--) { /* reverse creation order: the last layers first */
        const dt_param *q = &m->params[p];
        d->param_bucket[p] = -1;
        if (!dt_param_trainable(q))
            continue;
        bucket *k = &d->buckets[d->n_buckets];
        if (!k->n_params) {
            k->lo = q->off;
            k->hi = q->off + q->numel;
            k->first_param = p;
        }
        k->lo = q->off < k->lo ? q->off : k->lo;
        k->hi = q->off + q->numel > k->hi ? q->off + q->numel : k->hi;
        k->n_params++;
        d->param_bucket[p] = d->n_buckets;
        bytes += (size_t)q->numel * sizeof(float);
        if (bytes >= (d->n_buckets == 0 ? cap0 : cap)) { /* full: the next parameter opens a new bucket */
            d->n_buckets++;
            bytes = 0;
        }
    }
    if (d->buckets[d->n_buckets].n_params)
        d->n_buckets++;
    /* parameters are laid out in creation order, so each bucket's range is its own */
    for (int i = 1; i < d->n_buckets; i++)
        if (d->buckets[i].hi > d->buckets[i - 1].lo) {
            dt_error("ddp: buckets %d and %d overlap in the gradient array (parameters out of order)", i - 1, i);
            return DT_ERR_STATE;
        }
    return DT_OK;
}

/* the device wire (above): each bucket's region in dev16 and dev32, the buckets in order */
static int make_device_wire(dt_ddp *d)
{
    size_t h = 0, f = 0;
    for (int i = 0; i < d->n_buckets; i++) {
        bucket *k = &d->buckets[i];
        k->h0 = h;
        k->f0 = f;
        for (int j = 0, p = k->first_param; j < k->n_params; p--) {
            const dt_param *q = &d->model->params[p];
            if (!dt_param_trainable(q))
                continue;
            j++;
            if (dt_param_reduced(d->model, q) && (d->cfg.wire == DT_FLOAT16 || d->cfg.wire == DT_BFLOAT16))
                h += (size_t)q->numel;
            else
                f += (size_t)q->numel;
        }
    }
    const dt_backend *be = d->model->be;
    d->dev16_n = h;
    d->dev32_n = f;
    d->dev16 = be->mem_alloc((h ? h : 1) * sizeof(uint16_t));
    d->dev32 = be->mem_alloc((f ? f : 1) * sizeof(float));
    if (!d->dev16 || !d->dev32) {
        dt_error("ddp: out of %s memory for the gradients' wire (%.1f MiB)", be->name,
                 (h * 2.0 + f * 4.0) / 1048576.0);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

/* rank 0's bytes at x (model memory, of any types) to every rank */
static int broadcast_model(dt_ddp *d, void *x, size_t bytes)
{
    dt_comm *comm = d->comm;
    const size_t chunk = (size_t)1 << 30; /* MPI counts in an int */
    model_written(d); /* initialisation, loading, the last forward's BN updates: complete */
    for (size_t o = 0; o < bytes; o += chunk)
        DT_TRY(comm->ops->broadcast(comm, (char *)x + o, bytes - o < chunk ? bytes - o : chunk, DT_UINT8, 0));
    return DT_OK;
}

int dt_ddp_create(dt_ddp **out, dt_model *m, dt_comm *comm, const dt_ddp_cfg *cfg)
{
    *out = NULL;
    dt_ddp *d = calloc(1, sizeof *d);
    if (!d)
        return DT_ERR_NOMEM;
    d->model = m;
    d->comm = comm;
    d->cfg = cfg ? *cfg : (dt_ddp_cfg){0};
    if (!d->cfg.bucket_bytes)
        d->cfg.bucket_bytes = (size_t)25 << 20;
    if (!d->cfg.first_bucket_bytes)
        d->cfg.first_bucket_bytes = (size_t)1 << 20;
    if (d->cfg.grad_scale == 0)
        d->cfg.grad_scale = 1.0f;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    int rc = comm->ops->bind_thread(comm); /* this thread's collectives (the broadcasts below) too */
    if (rc == DT_OK)
        rc = make_buckets(d);
    if (rc == DT_OK && !(d->written = m->be->event_create()))
        rc = DT_ERR_NOMEM;
    for (int i = 0; rc == DT_OK && i < d->n_buckets; i++)
        if (!(d->buckets[i].ready = m->be->event_create()))
            rc = DT_ERR_NOMEM;
    int typed = 0; /* gradients stored in reduced types: they go through the wire buffers */
    for (int i = 0; i < m->n_params; i++)
        typed |= dt_param_trainable(&m->params[i]) && m->params[i].dtype != DT_FLOAT32;
    const int device = !m->be->host_memory && comm->size > 1; /* gradients in backend memory (NCCL) */
    if (device && !typed && (d->cfg.wire == DT_FLOAT16 || d->cfg.wire == DT_BFLOAT16))
        d->cfg.wire = DT_FLOAT32; /* emulated: the reduced-type gradients are fp32 arrays of rounded values, sent so */
    if (rc == DT_OK && device && typed)
        rc = make_device_wire(d);
    /* every replica starts from rank 0's weights and buffers */
    if (rc == DT_OK && comm->size > 1) {
        rc = broadcast_model(d, m->weights, m->weights_bytes);
        if (rc == DT_OK && m->n_buffers)
            rc = broadcast_model(d, m->buffers, m->buffers_bytes);
    }
    if (rc == DT_OK && !device && (typed || d->cfg.wire == DT_FLOAT16 || d->cfg.wire == DT_BFLOAT16)) {
        size_t most = 0;
        for (int i = 0; i < d->n_buckets; i++) {
            size_t len = (size_t)(d->buckets[i].hi - d->buckets[i].lo);
            most = len > most ? len : most;
        }
        d->wire = malloc((most ? most : 1) * sizeof(uint16_t));
        d->wire32 = malloc((most ? most : 1) * sizeof(float));
        if (!d->wire || !d->wire32)
            rc = DT_ERR_NOMEM;
    }
    if (rc == DT_OK && d->cfg.sync_bn && comm->size > 1)
        rc = comm->ops->dup(comm, &d->bn_comm);
    if (rc == DT_OK && comm->size > 1 && !d->cfg.no_overlap) {
        int e = pthread_create(&d->thread, NULL, comm_thread, d);
        if (e) {
            dt_error("ddp: cannot start the communication thread: %s", strerror(e));
            rc = DT_ERR_SYS;
        } else {
            d->have_thread = 1;
            pthread_mutex_lock(&d->mu); /* bound before any bucket can go to it */
            while (!d->thread_up)
                pthread_cond_wait(&d->cv, &d->mu);
            rc = d->thread_rc;
            pthread_mutex_unlock(&d->mu);
        }
    }
    if (rc != DT_OK) {
        dt_ddp_free(d);
        return rc;
    }
    m->on_grads = on_grads;
    m->on_grads_ctx = d;
    if (d->bn_comm) {
        m->bn_sync = bn_sync;
        m->bn_sync_ctx = d;
    }
    if (comm->rank == 0)
        dt_debug("ddp: %d buckets (first %.1f MiB, then %.1f MiB), overlap %s", d->n_buckets,
                 d->cfg.first_bucket_bytes / 1048576.0, d->cfg.bucket_bytes / 1048576.0, d->cfg.no_overlap ? "off" : "on");
    *out = d;
    return DT_OK;
}

int dt_ddp_sync_buffers(dt_ddp *d)
{
    if (d->comm->size > 1 && d->model->n_buffers)
        return broadcast_model(d, d->model->buffers, d->model->buffers_bytes);
    return DT_OK;
}

int dt_ddp_before_forward(dt_ddp *d)
{
    return d->cfg.broadcast_buffers ? dt_ddp_sync_buffers(d) : DT_OK;
}

int dt_ddp_backward_issue(dt_ddp *d, int n, int accumulate, int sync, int capture)
{
    int comm = sync && d->comm->size > 1;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->n_buckets; i++)
        d->buckets[i].pending = d->buckets[i].n_params;
    d->ready_upto = d->done_upto = 0;
    d->err = 0;
    d->active = comm && d->have_thread && !capture; /* a capture runs nothing: the thread waits for the launch */
    pthread_mutex_unlock(&d->mu);
    d->model->on_grads = comm && d->have_thread ? on_grads : NULL;
    int rc = dt_model_backward(d->model, n, accumulate);
    d->model->on_grads = on_grads;
    if (rc == DT_OK && d->bn_err) /* a SyncBN reduction of this forward or backward failed */
        rc = d->bn_err;
    if (!comm)
        return rc;
    buckets_written(d, d->have_thread ? d->ready_upto : 0, d->n_buckets); /* the rest (without overlap: all) */
    pthread_mutex_lock(&d->mu);
    d->ready_upto = d->n_buckets; /* buckets whose nodes were skipped (unused) go too */
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int dt_ddp_reduce(dt_ddp *d)
{
    int rc = DT_OK;
    if (d->comm->size < 2)
        return DT_OK;
    dt_model_prof_mark(d->model, DT_PROF_DDP_UNPACK); /* the compute queue waits for the all-reduces */
    if (!d->have_thread) { /* no overlap: every bucket now, in order */
        for (int i = 0; rc == DT_OK && i < d->n_buckets; i++)
            rc = reduce_bucket(d, i);
        return rc;
    }
    pthread_mutex_lock(&d->mu);
    if (!d->active) { /* a launched graph's backward: every bucket goes now, each waiting on its event */
        d->done_upto = 0;
        d->err = 0;
        d->active = 1;
    }
    d->ready_upto = d->n_buckets;
    pthread_cond_broadcast(&d->cv);
    while (!d->err && d->done_upto < d->n_buckets)
        pthread_cond_wait(&d->cv, &d->mu);
    d->active = 0;
    rc = d->err;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void dt_ddp_unpack(dt_ddp *d)
{
    if (d->dev16 && d->comm->size > 1) { /* the averages back into the gradients (after every all-reduce returned) */
        dt_model_prof_mark(d->model, DT_PROF_DDP_UNPACK);
        unpack_device(d);
    }
}

int dt_ddp_backward(dt_ddp *d, int n, int accumulate, int sync)
{
    int rc = dt_ddp_backward_issue(d, n, accumulate, sync, 0);
    if (rc != DT_OK || !sync)
        return rc;
    rc = dt_ddp_reduce(d);
    if (rc == DT_OK)
        dt_ddp_unpack(d);
    return rc;
}

int dt_ddp_buckets(const dt_ddp *d)
{
    return d->n_buckets;
}

void dt_ddp_free(dt_ddp *d)
{
    if (!d)
        return;
    if (d->have_thread) {
        pthread_mutex_lock(&d->mu);
        d->quit = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    if (d->model && d->model->on_grads_ctx == d) {
        d->model->on_grads = NULL;
        d->model->on_grads_ctx = NULL;
    }
    if (d->model && d->model->bn_sync_ctx == d) {
        d->model->bn_sync = NULL;
        d->model->bn_sync_ctx = NULL;
    }
    dt_comm_free(d->bn_comm);
    free(d->wire);
    free(d->wire32);
    if (d->model) {
        d->model->be->mem_free(d->dev16);
        d->model->be->mem_free(d->dev32);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    for (int i = 0; d->buckets && i < d->n_buckets; i++)
        d->model->be->event_destroy(d->buckets[i].ready);
    if (d->written)
        d->model->be->event_destroy(d->written);
    free(d->buckets);
    free(d->param_bucket);
    free(d);
}
