/* ema.c: the model's exponential moving average (contract in ema.h). */
#include "config.h"

#include "train/ema.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

double dt_ema_adjusted_decay(double decay, int world_size, int batch, int64_t every, int epochs)
{
    double adjust = (double)world_size * batch * (double)every / (epochs > 0 ? epochs : 1);
    double alpha = (1.0 - decay) * adjust;
    return 1.0 - (alpha < 1.0 ? alpha : 1.0);
}

int dt_ema_init(dt_ema *e, const dt_model *m, double decay, int64_t every)
{
    memset(e, 0, sizeof *e);
    e->decay = decay;
    e->empty = 1;
    e->every = every > 0 ? every : 1;
    e->be = m->be;
    const size_t nw = (size_t)(m->n_weights ? m->n_weights : 1), nb = (size_t)(m->n_buffers ? m->n_buffers : 1),
                 nc = (size_t)(m->n_counts ? m->n_counts : 1);
    if (!(e->avg_w = m->be->mem_alloc(nw * sizeof(float))) || !(e->avg_b = m->be->mem_alloc(nb * sizeof(float))) ||
        !(e->swap_w = m->be->mem_alloc(m->weights_bytes ? m->weights_bytes : 1)) ||
        !(e->swap_b = m->be->mem_alloc(m->buffers_bytes ? m->buffers_bytes : 1)) ||
        !(e->counts = calloc(nc, sizeof(int64_t))) || !(e->swap_counts = calloc(nc, sizeof(int64_t)))) {
        dt_error("--model-ema: cannot allocate the average of %s", m->arch);
        dt_ema_free(e);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

void dt_ema_update(dt_ema *e, dt_model *m, const float *master)
{
    const double d = e->n_averaged == 0 ? 0.0 : e->decay;
    const float df = (float)d, one_minus = (float)(1.0 - d);
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT) { /* an int64 buffer: torch averages it in fp32 and truncates */
            int64_t *c = e->counts + p->off;
            *c = d == 0 ? m->counts[p->off] : (int64_t)(df * (float)*c + one_minus * (float)m->counts[p->off]);
        } else if (dt_param_trainable(p)) {
            if (master)
                m->be->ema_update(p->numel, e->avg_w + p->off, master + p->off, DT_FLOAT32, d);
            else
                m->be->ema_update(p->numel, e->avg_w + p->off, dt_param_data(m, p), p->dtype, d);
        } else {
            m->be->ema_update(p->numel, e->avg_b + p->off, dt_param_data(m, p), p->dtype, d);
        }
    }
    e->n_averaged++;
    e->empty = 0;
}

void dt_ema_start(dt_ema *e, dt_model *m, const float *master)
{
    e->n_averaged = 0; /* a copy */
    dt_ema_update(e, m, master);
    e->n_averaged = 0;
}

/* exchange the model's storage with the swap storage */
static void exchange(dt_ema *e, dt_model *m)
{
    void *w = m->weights, *b = m->buffers;
    int64_t *c = m->counts;
    m->weights = e->swap_w;
    m->buffers = e->swap_b;
    m->counts = e->swap_counts;
    e->swap_w = w;
    e->swap_b = b;
    e->swap_counts = c;
    e->swapped = !e->swapped;
}

void dt_ema_swap(dt_ema *e, dt_model *m)
{
    if (e->swapped) {
        exchange(e, m);
        return;
    }
    exchange(e, m); /* the model now points at the swap storage: fill it from the average */
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT)
            m->counts[p->off] = e->counts[p->off];
        else
            m->be->copy_grad(p->numel, (dt_param_trainable(p) ? e->avg_w : e->avg_b) + p->off, DT_FLOAT32,
                             dt_param_data(m, p), p->dtype, 0);
    }
}

void dt_ema_free(dt_ema *e)
{
    if (!e || !e->be)
        return;
    void *dev[4] = {e->avg_w, e->avg_b, e->swap_w, e->swap_b};
    for (int i = 0; i < 4; i++)
        if (dev[i])
            e->be->mem_free(dev[i]);
    free(e->counts);
    free(e->swap_counts);
    memset(e, 0, sizeof *e);
}
