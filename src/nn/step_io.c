/* step_io.c: the step's numbers and the batch's labels between the host and the backend (model.h, "a
 * step without host round trips"; nn/scalars.h): the scalars block, its host buffer and the event
 * that orders them, made by the first plan. */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/check.h"
#include "util/log.h"

/* The block, its event and the host buffer (two blocks: no room for labels yet), made once (by the
 * first plan, or by whoever sets the scaler before it): a static loss scale of 1 and no step taken */
static int ensure_scalars(dt_model *m)
{
    const dt_backend *be = m->be;
    if (m->scalars)
        return DT_OK;
    if (!(m->scalars = be->mem_alloc(sizeof *m->scalars)) || !(m->io_event = be->event_create()) ||
        !(m->host_io = be->host_alloc(2 * sizeof(dt_scalars)))) {
        dt_error("model %s: out of memory for the step's scalars", m->arch);
        return DT_ERR_NOMEM;
    }
    dt_scalars init = {.scale = 1, .scale_f = 1, .inv_scale = 1, .growth = 2, .backoff = 0.5, .max_scale = 0x1p24,
                       .growth_interval = 2000, .max_nonfinite = INT64_MAX};
    be->mem_put(m->scalars, &init, sizeof init);
    return DT_OK;
}

int dt_model_get_scalars(dt_model *m, dt_scalars *host)
{
    DT_TRY(ensure_scalars(m));
    m->be->mem_get(host, m->scalars, sizeof *host);
    return DT_OK;
}

int dt_model_put_scalars(dt_model *m, const dt_scalars *host)
{
    DT_TRY(ensure_scalars(m));
    m->be->mem_put(m->scalars, host, sizeof *host);
    return DT_OK;
}

void dt_model_put_metrics(dt_model *m, const dt_scalars *from)
{
    const size_t at = offsetof(dt_scalars, loss);
    m->be->mem_put((char *)m->scalars + at, (const char *)from + at, sizeof *from - at);
}

/* The block (ensure_scalars), and a plan's labels and host buffer (with room for n labels) */
int dt_model_plan_scalars(dt_model *m, int n)
{
    const dt_backend *be = m->be;
    DT_TRY(ensure_scalars(m));
    be->event_sync(m->io_event); /* every plan: its batch may be larger than the last one's */
    be->mem_free(m->labels);
    be->host_free(m->host_io);
    m->labels = be->mem_alloc((size_t)n * sizeof(int32_t));
    m->host_io = be->host_alloc(2 * sizeof(dt_scalars) + (size_t)n * sizeof(int32_t));
    if (!m->labels || !m->host_io) {
        dt_error("model %s: out of memory for the labels of a batch of %d", m->arch, n);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}
/* the host buffer's parts: [0] the in part to upload, [1] the out part downloaded, then labels */
static int32_t *host_labels(dt_model *m)
{
    return (int32_t *)(m->host_io + 2);
}

void dt_model_step_write(dt_model *m, float lr, int64_t step, int32_t signal)
{
    m->be->event_sync(m->io_event); /* the host buffer's last copy is done */
    dt_scalars *in = &m->host_io[0];
    in->agree[DT_AGREE_OVERFLOW] = 0;
    in->agree[DT_AGREE_SIGNAL] = signal;
    in->lr = lr;
    in->in_reserved = 0;
    in->step = step;
    in->model_step = (int64_t)m->step;
    /* mixing, mix_lam, mix_rest: the batch's own, written with its labels (dt_model_write_mix) */
    m->step_written = m->step;
}

/* an upload from the host buffer, the compute queue waiting for it */
static void upload_io(dt_model *m, void *dst, const void *src, size_t bytes)
{
    const dt_backend *be = m->be;
    be->upload(dst, src, bytes, DT_QUEUE_COPY);
    be->event_record(m->io_event, DT_QUEUE_COPY);
    be->event_wait(DT_QUEUE_COMPUTE, m->io_event);
}

void dt_model_step_upload(dt_model *m)
{
    dt_model_prof_mark(m, DT_PROF_UPLOAD);
    upload_io(m, m->scalars, &m->host_io[0], DT_SCALARS_IN_BYTES);
}

void dt_model_step_begin(dt_model *m, float lr, int64_t step, int32_t signal)
{
    dt_model_step_write(m, lr, step, signal);
    dt_model_step_upload(m);
}

void dt_model_write_mix(dt_model *m, int mixing, float lam, float rest)
{
    m->be->event_sync(m->io_event); /* the host buffer's last copy is done */
    dt_scalars *in = &m->host_io[0];
    in->mixing = mixing;
    in->mix_lam = mixing ? lam : 0.0f;
    in->mix_rest = mixing ? rest : 0.0f;
    in->in_reserved2 = 0;
}

int dt_model_write_labels(dt_model *m, const int32_t *labels_host, int n)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: %d labels, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    DT_TRY(dt_model_check_labels(m, labels_host, n));
    m->be->event_sync(m->io_event);
    memcpy(host_labels(m), labels_host, (size_t)n * sizeof *labels_host);
    return DT_OK;
}

void dt_model_labels_upload(dt_model *m, int n)
{
    dt_model_prof_mark(m, DT_PROF_UPLOAD);
    upload_io(m, m->labels, host_labels(m), (size_t)n * sizeof(int32_t));
    /* the batch's mixing with them: per batch, also under gradient accumulation */
    const size_t at = offsetof(dt_scalars, mixing), bytes = offsetof(dt_scalars, in_reserved2) + sizeof(int32_t) - at;
    upload_io(m, (char *)m->scalars + at, (const char *)&m->host_io[0] + at, bytes);
}

int dt_model_upload_labels(dt_model *m, const int32_t *labels_host, int n)
{
    DT_TRY(dt_model_write_labels(m, labels_host, n));
    dt_model_labels_upload(m, n);
    return DT_OK;
}

void dt_model_step_download(dt_model *m)
{
    dt_model_prof_mark(m, DT_PROF_OTHER);
    m->be->download(&m->host_io[1], m->scalars, DT_SCALARS_OUT_BYTES, DT_QUEUE_COMPUTE);
}

const dt_scalars *dt_model_step_wait(dt_model *m)
{
    const dt_backend *be = m->be;
    be->event_record(m->io_event, DT_QUEUE_COMPUTE);
    be->event_sync(m->io_event);
    return &m->host_io[1];
}

const dt_scalars *dt_model_step_out(dt_model *m)
{
    dt_model_step_download(m);
    return dt_model_step_wait(m);
}
