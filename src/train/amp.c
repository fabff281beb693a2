/* amp.c: opt-level properties and the dynamic loss scaler (contract in amp.h). */
#include "config.h"

#include "train/amp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/cli.h"
#include "util/h5.h"
#include "util/log.h"

static int bad_combo(const char *flag, const char *why)
{
    dt_error("%s: %s", flag, why);
    return DT_ERR_INPUT;
}

int dt_amp_resolve(int level, const dt_amp_overrides *o, dt_amp_props *p)
{
    static const dt_amp_overrides none = {.keep_batchnorm_fp32 = -1, .master_weights = -1};
    if (!o)
        o = &none;
    if (level < 0 || level > 3)
        return bad_combo("--opt-level", "must be O0, O1, O2 or O3");
    dt_dtype red = o->bf16 ? DT_BFLOAT16 : DT_FLOAT16;
    memset(p, 0, sizeof *p);
    p->opt_level = level;
    p->reduced = red;
    p->model_type = level >= 2 ? red : DT_FLOAT32;
    p->cast_ops = level == 1;
    p->keep_batchnorm_fp32 = level != 3;
    p->master_weights = level == 2;
    /* fp16 needs loss scaling under O1/O2; bf16 has fp32's exponent range and does not */
    p->dynamic_loss_scale = (level == 1 || level == 2) && !o->bf16;
    p->loss_scale = p->dynamic_loss_scale ? 65536.0 : 1.0;
    p->allreduce_type = level >= 2 ? red : DT_FLOAT32;
    if (o->keep_batchnorm_fp32 >= 0) {
        if (level < 2)
            return bad_combo("--keep-batchnorm-fp32", "only for O2 and O3 (O0 and O1 keep every weight in fp32)");
        p->keep_batchnorm_fp32 = o->keep_batchnorm_fp32;
    }
    if (o->master_weights >= 0) {
        if (level < 2 && o->master_weights)
            return bad_combo("--master-weights", "only for O2 and O3: under O0 and O1 the weights are fp32 already");
        if (level == 2 && !o->master_weights)
            return bad_combo("--master-weights", "O2 keeps fp32 master weights (use O3 for none)");
        p->master_weights = o->master_weights;
    }
    if (o->loss_scale) {
        if (!strcmp(o->loss_scale, "dynamic")) {
            p->dynamic_loss_scale = 1;
            p->loss_scale = 65536.0;
        } else {
            double v;
            if (dt_parse_double("--loss-scale", o->loss_scale, 1e-30, 1e30, &v) != DT_OK)
                return DT_ERR_INPUT;
            p->dynamic_loss_scale = 0;
            p->loss_scale = v;
        }
    }
    if (o->allreduce_fp32)
        p->allreduce_type = DT_FLOAT32;
    return DT_OK;
}

static const char *type_name(dt_dtype t)
{
    return t == DT_FLOAT16 ? "fp16" : t == DT_BFLOAT16 ? "bf16" : "fp32";
}

static void print_props(const dt_amp_props *p, FILE *f)
{
    char scale[64];
    if (p->dynamic_loss_scale)
        snprintf(scale, sizeof scale, "dynamic (start %g)", p->loss_scale);
    else
        snprintf(scale, sizeof scale, "%g", p->loss_scale);
    fprintf(f,
            "opt_level              : O%d\n"
            "model weights          : %s\n"
            "casts per op           : %s\n"
            "keep_batchnorm_fp32    : %s\n"
            "master_weights         : %s\n"
            "loss_scale             : %s\n"
            "allreduce              : %s\n",
            p->opt_level, type_name(p->model_type), p->cast_ops ? "conv/linear in the reduced type" : "no",
            p->keep_batchnorm_fp32 ? "True" : "False", p->master_weights ? "True" : "False", scale,
            type_name(p->allreduce_type));
}

void dt_amp_print(const dt_amp_props *defaults, const dt_amp_props *p, FILE *f)
{
    static const char *const what[] = {"FP32 training.", "Insert automatic casts around conv and linear.",
                                       " training with FP32 batchnorm and FP32 master weights.", " training."};
    const char *red = p->reduced == DT_BFLOAT16 ? "BF16" : "FP16";
    fprintf(f, "Selected optimization level O%d:  %s%s%s\n\nDefaults for this optimization level are:\n",
            p->opt_level, p->opt_level == 3 ? "Pure " : "", p->opt_level >= 2 ? red : "", what[p->opt_level]);
    print_props(defaults, f);
    if (memcmp(defaults, p, sizeof *p) != 0) {
        fprintf(f, "Processing user overrides...\nAfter processing overrides, optimization options are:\n");
        print_props(p, f);
    }
}

void dt_scaler_init(dt_scaler *s, const dt_amp_props *p)
{
    memset(s, 0, sizeof *s);
    s->dynamic = p ? p->dynamic_loss_scale : 0;
    s->scale = p ? p->loss_scale : 1.0;
    s->growth_interval = 2000;
    s->growth = 2.0;
    s->backoff = 0.5;
    s->max_scale = 16777216.0; /* 2^24 */
    s->max_nonfinite = INT64_MAX;
}

/* the scaler's state into a block of scalars (the ops' scale and 1/scale with it), and back */
static void scaler_to_scalars(const dt_scaler *s, dt_scalars *b)
{
    b->dynamic = s->dynamic;
    b->scale = s->scale;
    b->clean_steps = s->clean_steps;
    b->growth_interval = s->growth_interval;
    b->growth = s->growth;
    b->backoff = s->backoff;
    b->max_scale = s->max_scale;
    b->min_scale = s->min_scale;
    b->overflows = s->overflows;
    b->in_a_row = s->in_a_row;
    b->max_nonfinite = s->max_nonfinite;
    b->scale_f = (float)s->scale;
    b->inv_scale = (float)(1.0 / s->scale);
}

static void scaler_from_scalars(dt_scaler *s, const dt_scalars *b)
{
    s->scale = b->scale;
    s->clean_steps = b->clean_steps;
    s->overflows = b->overflows;
    s->in_a_row = b->in_a_row;
}

static void say_overflow(const dt_scaler *s, int64_t step)
{
    dt_warn("step %lld: Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to %.1f",
            (long long)step, s->scale);
}

int dt_amp_put_state(const dt_scaler *s, int64_t sgd_steps, dt_model *m)
{
    dt_scalars b;
    DT_TRY(dt_model_get_scalars(m, &b));
    if (s)
        scaler_to_scalars(s, &b);
    b.sgd_steps = sgd_steps;
    b.diverged = 0;
    b.agree[DT_AGREE_OVERFLOW] = 0;
    return dt_model_put_scalars(m, &b);
}

int dt_scaler_update(dt_scaler *s, int overflow, int64_t step, int rank)
{
    dt_scalars b = {0};
    scaler_to_scalars(s, &b);
    b.agree[DT_AGREE_OVERFLOW] = overflow != 0;
    dt_scalars_step_end(&b);
    scaler_from_scalars(s, &b);
    if (overflow && s->dynamic && rank == 0)
        say_overflow(s, step);
    return overflow != 0;
}

/* between the model's weights (each tensor in its type) and master (fp32, the fp32 layout):
 * to_master copies them into master, else master is rounded into them */
static void master_copy(dt_model *m, float *master, int to_master)
{
    const dt_backend *be = m->be;
    if (dt_model_params_fp32(m)) { /* one flat copy */
        be->copy_grad(m->n_weights, to_master ? m->weights : master, DT_FLOAT32, to_master ? master : m->weights,
                      DT_FLOAT32, 0);
        return;
    }
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (!dt_param_trainable(p))
            continue;
        if (to_master)
            be->copy_grad(p->numel, dt_param_data(m, p), p->dtype, master + p->off, DT_FLOAT32, 0);
        else
            be->copy_grad(p->numel, master + p->off, DT_FLOAT32, dt_param_data(m, p), p->dtype, 0);
    }
}

int dt_amp_attach(dt_amp *a, dt_model *m, const dt_amp_props *p)
{
    dt_amp_props copy = *p; /* p may point into a */
    memset(a, 0, sizeof *a);
    a->props = copy;
    p = &a->props;
    dt_scaler_init(&a->scaler, p);
    DT_TRY(dt_model_set_amp(m, p->opt_level, p->reduced == DT_BFLOAT16, p->keep_batchnorm_fp32));
    if (p->opt_level >= 2 && p->master_weights) { /* Apex: fp32 copies of the (already rounded) model weights */
        a->be = m->be;
        if (!(a->master = m->be->mem_alloc((size_t)m->n_weights * sizeof(float)))) {
            dt_error("mixed precision: cannot allocate the fp32 master weights of %s", m->arch);
            return DT_ERR_NOMEM;
        }
        dt_amp_master_from_model(a, m);
    }
    return dt_amp_put_state(&a->scaler, 0, m);
}

void dt_amp_master_from_model(dt_amp *a, dt_model *m)
{
    if (a->master)
        master_copy(m, a->master, 1);
}

void dt_amp_free(dt_amp *a)
{
    if (a->master)
        a->be->mem_free(a->master);
    a->master = NULL;
}

/* the overflow flag in the model's scalars when a gradient times 1/scale is inf or NaN: one check
 * over the flat fp32 array, or tensor by tensor in their types */
static void check_grads(dt_model *m)
{
    if (dt_model_params_fp32(m)) {
        m->be->unscale_check(m->n_weights, DT_FLOAT32, m->grads, m->scalars);
        return;
    }
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (dt_param_trainable(p))
            m->be->unscale_check(p->numel, p->dtype, dt_param_grad(m, p), m->scalars);
    }
}

static int comm_rank(const dt_comm *comm)
{
    return comm ? comm->rank : 0;
}

void dt_amp_check(dt_model *m)
{
    dt_model_prof_mark(m, DT_PROF_SCALER);
    check_grads(m);
}

int dt_amp_agree(dt_comm *comm, dt_model *m)
{
    if (!comm || comm->size < 2)
        return DT_OK;
    /* the step's one collective: overflow and stop signal, max over the ranks */
    const dt_backend *be = m->be;
    be->event_record(m->io_event, DT_QUEUE_COMPUTE); /* the communicator reads what the ops wrote */
    be->event_sync(m->io_event);
    return comm->ops->allreduce(comm, m->scalars->agree, m->scalars->agree, DT_AGREE_N, DT_INT32, DT_MAX);
}

void dt_amp_update(dt_optim *opt, dt_model *m, float *master)
{
    dt_model_prof_mark(m, DT_PROF_OPTIMIZER);
    dt_optim_step(opt, m, master); /* skipped by the ops on an overflow; on the fp32 masters when there are */
    if (master) /* the model gets them rounded (a skipped step copies back what is there) */
        master_copy(m, master, 0);
    dt_model_round_params(m); /* emulation: what the model stores, rounded */
    dt_model_step_download(m);
}

const dt_scalars *dt_amp_finish(dt_scaler *s, dt_comm *comm, dt_optim *opt, dt_model *m)
{
    const dt_scalars *o = dt_model_step_wait(m);
    scaler_from_scalars(s, o);
    opt->steps = o->sgd_steps;
    if (o->skipped && s->dynamic && !o->diverged && comm_rank(comm) == 0)
        say_overflow(s, o->step + 1); /* the step's number as metrics.jsonl counts it (after the step) */
    return o;
}

int dt_amp_step(dt_scaler *s, dt_comm *comm, dt_optim *opt, dt_model *m, float *master, const dt_scalars **out)
{
    dt_amp_check(m);
    DT_TRY(dt_amp_agree(comm, m));
    dt_amp_update(opt, m, master);
    *out = dt_amp_finish(s, comm, opt, m);
    return DT_OK;
}

int dt_scaler_save(const dt_scaler *s, hid_t g)
{
    DT_TRY(dt_h5_attr_write_i64(g, "dynamic", s->dynamic));
    DT_TRY(dt_h5_attr_write_i64(g, "clean_steps", s->clean_steps));
    DT_TRY(dt_h5_attr_write_i64(g, "growth_interval", s->growth_interval));
    DT_TRY(dt_h5_attr_write_i64(g, "overflows", s->overflows));
    /* doubles as their exact bit patterns: no text round trip */
    int64_t bits[5];
    double v[5] = {s->scale, s->growth, s->backoff, s->max_scale, s->min_scale};
    static const char *const names[5] = {"scale_bits", "growth_bits", "backoff_bits", "max_scale_bits",
                                         "min_scale_bits"};
    for (int i = 0; i < 5; i++) {
        memcpy(&bits[i], &v[i], 8);
        DT_TRY(dt_h5_attr_write_i64(g, names[i], bits[i]));
    }
    return DT_OK;
}

int dt_scaler_load(dt_scaler *s, hid_t g, const char *source)
{
    int64_t dyn, clean, interval, overflows, bits[5];
    static const char *const names[5] = {"scale_bits", "growth_bits", "backoff_bits", "max_scale_bits",
                                         "min_scale_bits"};
    if (dt_h5_attr_read_i64(g, source, "dynamic", &dyn) || dt_h5_attr_read_i64(g, source, "clean_steps", &clean) ||
        dt_h5_attr_read_i64(g, source, "growth_interval", &interval) ||
        dt_h5_attr_read_i64(g, source, "overflows", &overflows))
        return DT_ERR_INPUT;
    for (int i = 0; i < 5; i++)
        if (dt_h5_attr_read_i64(g, source, names[i], &bits[i]))
            return DT_ERR_INPUT;
    double v[5];
    for (int i = 0; i < 5; i++)
        memcpy(&v[i], &bits[i], 8);
    if (!(v[0] > 0) || !isfinite(v[0]) || interval < 1 || clean < 0) {
        dt_error("%s: loss scaler state makes no sense (scale %g, interval %lld, clean steps %lld)", source, v[0],
                 (long long)interval, (long long)clean);
        return DT_ERR_INPUT;
    }
    s->dynamic = (int)dyn;
    s->clean_steps = clean;
    s->growth_interval = interval;
    s->overflows = overflows;
    s->scale = v[0];
    s->growth = v[1];
    s->backoff = v[2];
    s->max_scale = v[3];
    s->min_scale = v[4];
    return DT_OK;
}
