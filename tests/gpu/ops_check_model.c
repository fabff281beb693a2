/* ops_check_model.c: ops_check's whole-model check: a model's training steps on the CPU reference and
 * on the backend under test, and the step as a graph against the same steps issued (the rules and
 * tolerances are in ops_check.c's top comment). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/cuda.h"
#include "nn/model.h"
#include "train/amp.h"
#include "train/optim.h"
#include "ops_check.h"

#define MCLASSES 10
#define MLR 0.01f

#define MSTEPS_MAX 3
typedef struct trained {
    double loss[MSTEPS_MAX];
    int skipped[MSTEPS_MAX];
    double scale;
    int tail_ok;     /* the smaller batch's forward and backward ran */
    long unplanned;  /* device allocations inside ops after planning (CUDA) */
    float *weights, *buffers, *momentum, *master; /* host copies after the steps */
    float *weights0, *buffers0;                   /* ... and before them */
    int64_t nw, nb;
} trained;

static float *fetch(const dt_backend *be, const float *src, int64_t n)
{
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!h)
        exit(1);
    be->mem_get(h, src, (size_t)n * sizeof(float));
    return h;
}

/* a model's trainable parameters (buffers: its BN statistics) as fp32 at their places in the fp32
 * layout (dt_param.off), whatever their storage types */
static float *fetch_params(const dt_model *m, int buffers)
{
    int64_t n = buffers ? m->n_buffers : m->n_weights;
    float *h = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!h)
        exit(1);
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind != DT_P_BN_COUNT && dt_param_trainable(p) == !buffers)
            dt_param_get(m, p, h + p->off);
    }
    return h;
}

/* the device part of one training step as dtrain issues it (train/step.c): the in scalars, pixels
 * and labels uploaded from their host buffers (the pixels on the copy queue, the compute queue
 * waiting for them), normalisation, forward, the loss, backward, the scaler's check, the optimiser and
 * the download of the out scalars. Nothing here waits on the host: a capture keeps all of it. */
typedef struct step_io {
    dt_optim *opt;
    dt_amp *amp;
    float *x;              /* the normalised batch */
    uint8_t *u, *ud;       /* its uint8 pixels: the host buffer, the uploaded copy */
    dt_event *up;          /* after the upload from u */
    size_t nu;
} step_io;

static int issue_step(const dt_backend *be, dt_model *m, const step_io *io)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    dt_model_step_upload(m);
    be->upload(io->ud, io->u, io->nu, DT_QUEUE_COPY);
    be->event_record(io->up, DT_QUEUE_COPY);
    be->event_wait(DT_QUEUE_COMPUTE, io->up);
    be->normalize_u8((int64_t)io->nu, 3, io->ud, mean, sd, S32, io->x);
    dt_model_labels_upload(m, MB);
    if (dt_model_forward(m, io->x, MB) != DT_OK || dt_model_loss_async(m, MB, 0.1f) != DT_OK ||
        dt_model_backward(m, MB, 0) != DT_OK)
        return 0;
    dt_amp_check(m);
    dt_amp_update(io->opt, m, io->amp->master);
    return 1;
}

/* `steps` SGD steps (momentum, weight decay, label smoothing) at opt level `level` on fixed random
 * uint8 batches, as dtrain runs them; with graph, step 0 issued, step 1 captured as a graph and
 * launched, the steps after it launched again (train/step.c's single-rank path: be needs graphs).
 * Without graph, then a forward and backward of a smaller batch (planned with the full one, as an
 * epoch's last). *m keeps the model's parameter table for the comparison. */
static int train_steps(const dt_backend *be, int level, int bf16, int steps, int graph, trained *t, dt_model *m)
{
    dt_optim opt;
    dt_amp amp;
    dt_amp_props props;
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = bf16};
    memset(t, 0, sizeof *t);
    memset(m, 0, sizeof *m);
    if (dt_model_create(m, MARCH, 3, MCLASSES, be) != DT_OK)
        return 0;
    dt_model_init_weights(m, MSEED, 0);
    const int tail = MB > 3 ? MB - 3 : 1;
    int ok = dt_amp_resolve(level, &ov, &props) == DT_OK && dt_amp_attach(&amp, m, &props) == DT_OK &&
             dt_model_plan_sizes(m, MB, MS, MS, &tail, 1) == DT_OK &&
             dt_optim_init(&opt, m, MLR, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    if (!ok)
        return 0;
    const long unplanned0 = dt_cuda_unplanned_allocs();
    t->weights0 = fetch_params(m, 0);
    t->buffers0 = fetch_params(m, 1);
    step_io io = {.opt = &opt, .amp = &amp, .nu = (size_t)MB * MS * MS * 3};
    io.x = be->mem_alloc(io.nu * sizeof(float));
    io.u = be->host_alloc(io.nu);
    io.ud = be->mem_alloc(io.nu);
    io.up = be->event_create();
    int32_t *y = malloc((size_t)MB * sizeof(int32_t));
    if (!io.x || !io.u || !io.ud || !y || !io.up)
        exit(1);
    dt_graph *g = NULL;
    dt_rng r;
    dt_rng_seed(&r, MSEED, 1);
    for (int s = 0; ok && s < steps; s++) {
        /* the host part: the in scalars, the batch into the host buffers (once the last upload from
         * them is done) */
        dt_model_step_write(m, MLR, s, 0);
        be->event_sync(io.up);
        for (size_t i = 0; i < io.nu; i++)
            io.u[i] = (uint8_t)dt_rng_below(&r, 256);
        for (int i = 0; i < MB; i++)
            y[i] = (int32_t)dt_rng_below(&r, MCLASSES);
        ok = dt_model_write_labels(m, y, MB) == DT_OK;
        if (ok && (!graph || s == 0)) {
            ok = issue_step(be, m, &io);
        } else if (ok && !g) {
            ok = be->graph_begin() == DT_OK;
            int issued = ok && issue_step(be, m, &io);
            g = ok ? be->graph_end() : NULL;
            ok = issued && g;
            if (ok)
                be->graph_launch(g);
        } else if (ok) {
            be->graph_launch(g);
            dt_model_host_step(m); /* what forward and backward count on the host */
        }
        if (!ok)
            break;
        const dt_scalars *out = dt_amp_finish(&amp.scaler, NULL, &opt, m);
        dt_scalars sc;
        ok = dt_model_get_scalars(m, &sc) == DT_OK; /* the step's loss (a check may read it) */
        t->loss[s] = sc.loss;
        t->skipped[s] = out ? out->skipped : -1;
    }
    if (g)
        be->graph_destroy(g);
    t->nw = m->n_weights;
    t->nb = m->n_buffers;
    t->scale = amp.scaler.scale;
    t->weights = fetch_params(m, 0);
    t->buffers = fetch_params(m, 1);
    t->momentum = fetch(be, opt.momentum_buf, m->n_weights);
    t->master = amp.master ? fetch(be, amp.master, m->n_weights) : NULL;
    double tail_loss = 0;
    t->tail_ok = ok && !graph && dt_model_forward(m, io.x, tail) == DT_OK &&
                 dt_model_loss(m, y, tail, 0.1f, &tail_loss) == DT_OK && dt_model_backward(m, tail, 0) == DT_OK;
    drain(be);
    t->unplanned = dt_cuda_unplanned_allocs() - unplanned0;
    be->event_sync(io.up);
    be->event_destroy(io.up);
    be->mem_free(io.x);
    be->mem_free(io.ud);
    be->host_free(io.u);
    free(y);
    dt_optim_free(&opt);
    dt_amp_free(&amp);
    return ok;
}

/* floats of a and b (n each; both NULL: none) whose bits differ */
static int64_t bits_differ(const float *a, const float *b, int64_t n)
{
    if (!a || !b)
        return a != b ? n : 0;
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void drop_trained(trained *t)
{
    free(t->weights);
    free(t->buffers);
    free(t->momentum);
    free(t->master);
    free(t->weights0);
    free(t->buffers0);
}

/* Per tensor of one of the flat arrays: |got - want| / |want - base| (norm-wise; base: the state
 * before training, so this is the relative error of what training changed) or |got - want| / |want|
 * without a base. One row: the worst tensor, named; --verbose prints every tensor. */
static void cmp_tensors(const char *what, const char *level, const dt_model *m, const float *got, const float *want,
                        const float *base, int buffers, double tol)
{
    if (LIST) {
        char op[64];
        snprintf(op, sizeof op, "model %s", what);
        list_row(op, level, "the worst tensor");
        return;
    }
    double worst = -1, all_num = 0, all_den = 0;
    const char *worst_name = "-";
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        int is_buf = p->kind == DT_P_BN_MEAN || p->kind == DT_P_BN_VAR;
        if (p->kind == DT_P_BN_COUNT || (buffers ? !is_buf : !dt_param_trainable(p)))
            continue;
        double num = 0, den = 0;
        for (int64_t k = p->off; k < p->off + p->numel; k++) {
            double d = (double)got[k] - want[k], r = (double)want[k] - (base ? base[k] : 0);
            num += d * d;
            den += r * r;
        }
        all_num += num;
        all_den += den;
        double r = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
        if (isnan(r))
            r = INFINITY;
        if (VERBOSE)
            printf("      %s %s %-40s %.3e (|change| %.3e)\n", level, what, p->name, r, sqrt(den));
        if (r > worst) {
            worst = r;
            worst_name = p->name;
        }
    }
    double all = all_den > 0 ? sqrt(all_num / all_den) : all_num > 0 ? INFINITY : 0;
    char op[64], shape[128];
    snprintf(op, sizeof op, "model %s", what);
    snprintf(shape, sizeof shape, "worst %s", worst_name);
    int pass = worst <= tol;
    printf("%-40s %-4s %-30s %9s %9.2e %8.1e  %s   (all tensors together %.2e)\n", op, level, shape, "-", worst, tol,
           pass ? "PASS" : "FAIL", all);
    tally(op, level, shape, pass, "");
}

/* The step as a graph (train/step.c): 3 steps with step 1 captured and launched and step 2 launched
 * again equal the same 3 steps issued, on the backend under test (the CPU's: its graph table),
 * bit for bit: the losses and skips of every step, weights, BN statistics, momentum, O2's master
 * weights and the loss scale. ops_check keeps to deterministic algorithms, so a launch runs what
 * issuing runs; what changes between steps (the lr's step, the batch) must travel through memory. */
static void test_model_graph(int level, int bf16, const char *name)
{
    if (!unit("model graph %s", name))
        return;
    const dt_backend *be = DEV; /* (with --backend cpu, BASE is the CPU's graph table) */
    char shape[96];
    snprintf(shape, sizeof shape, "%s b%d, 3 steps: 1 captured, 2 launched", MARCH, MB);
    if (LIST) {
        list_row("model steps as a graph = issued", name, shape);
        return;
    }
    if (!be->graph_begin) {
        row("model steps as a graph = issued", name, "the backend has no graphs", 0, 0, M_EXACT, 0, 0);
        return;
    }
    trained a, b;
    dt_model ma, mb;
    int ok_a = train_steps(be, level, bf16, 3, 0, &a, &ma), ok_b = train_steps(be, level, bf16, 3, 1, &b, &mb);
    int ok = ok_a && ok_b;
    int64_t d = 0;
    if (ok) {
        for (int s = 0; s < 3; s++)
            d += memcmp(&a.loss[s], &b.loss[s], sizeof(double)) != 0 || a.skipped[s] != b.skipped[s];
        d += bits_differ(a.weights, b.weights, a.nw) + bits_differ(a.momentum, b.momentum, a.nw) +
             bits_differ(a.master, b.master, a.nw) + bits_differ(a.buffers, b.buffers, a.nb) +
             (memcmp(&a.scale, &b.scale, sizeof(double)) != 0);
        if (d)
            printf("      %lld values differ; losses %.9g %.9g %.9g (issued) vs %.9g %.9g %.9g (graph)\n", (long long)d,
                   a.loss[0], a.loss[1], a.loss[2], b.loss[0], b.loss[1], b.loss[2]);
    } else {
        printf("      the steps did not run%s\n", BASE == &dt_backend_cuda ? " (DT_LOG_LEVEL=debug: the capture's error)" : "");
    }
    row("model steps as a graph = issued", name, shape, (double)d, (double)d, M_EXACT, 0, ok && d == 0);
    drop_trained(&a);
    drop_trained(&b);
    dt_model_free(&ma);
    dt_model_free(&mb);
}

static void test_model(void)
{
    /* tolerances: see the comment at the top */
    static const struct {
        int level, bf16;
        const char *name;
        double loss_tol, tol;
    } L[] = {
        {0, 0, "O0", 1e-5, 2e-2},
        {2, 0, "O2", 1e-3, 0.25},
        {2, 1, "O2bf", 2e-3, 0.4},
    };
    for (size_t k = 0; k < sizeof L / sizeof L[0]; k++) {
        if (!unit("model %s", L[k].name)) {
            test_model_graph(L[k].level, L[k].bf16, L[k].name);
            continue;
        }
        trained a, b;
        dt_model ma, mb;
        int ok_a = train_steps(CREF, L[k].level, L[k].bf16, 2, 0, &a, &ma);
        int ok_b = train_steps(DEV, L[k].level, L[k].bf16, 2, 0, &b, &mb);
        char shape[96];
        snprintf(shape, sizeof shape, "%s b%d %dx%d, 2 steps", MARCH, MB, MS, MS);
        row("model training runs", L[k].name, shape, 0, 0, M_EXACT, 0, ok_a && ok_b);
        if (LIST || (ok_a && ok_b)) {
            snprintf(shape, sizeof shape, "b%d after b%d, planned together", MB > 3 ? MB - 3 : 1, MB);
            row("model smaller batch runs, allocates nothing", L[k].name, shape, (double)b.unplanned,
                (double)b.unplanned, M_EXACT, 0, a.tail_ok && b.tail_ok && b.unplanned == 0);
            if (!LIST && b.unplanned)
                printf("      %ld device allocations inside the ops after planning (DT_LOG_LEVEL=debug names "
                       "them)\n", b.unplanned);
            for (int s = 0; s < 2; s++) {
                double d = fabs(b.loss[s] - a.loss[s]), r = d / fmax(fabs(a.loss[s]), 1e-30);
                int pass = r <= L[k].loss_tol && a.skipped[s] == b.skipped[s];
                char op[48], sh[96];
                snprintf(op, sizeof op, "model loss step %d", s + 1);
                if (LIST) {
                    list_row(op, L[k].name, "the loss");
                    continue;
                }
                snprintf(sh, sizeof sh, "%.7f vs %.7f%s", b.loss[s], a.loss[s],
                         a.skipped[s] != b.skipped[s] ? " SKIP DIFFERS" : a.skipped[s] ? " (skipped)" : "");
                printf("%-40s %-4s %-30s %9.2e %9.2e %8.1e  %s\n", op, L[k].name, sh, d, r, L[k].loss_tol,
                       pass ? "PASS" : "FAIL");
                tally(op, L[k].name, sh, pass, "");
            }
            if (a.master && b.master) {
                /* O2: the fp32 master weights carry the update; the model's weights are their
                 * rounding, compared as they are */
                cmp_tensors("master weight change", L[k].name, &ma, b.master, a.master, a.weights0, 0, L[k].tol);
                cmp_tensors("weights", L[k].name, &ma, b.weights, a.weights, NULL, 0, L[k].tol);
            } else {
                cmp_tensors("weight change", L[k].name, &ma, b.weights, a.weights, a.weights0, 0, L[k].tol);
            }
            cmp_tensors("momentum", L[k].name, &ma, b.momentum, a.momentum, NULL, 0, L[k].tol);
            cmp_tensors("BN running stats change", L[k].name, &ma, b.buffers, a.buffers, a.buffers0, 1, L[k].tol);
            row("model loss scale", L[k].name, "after 2 steps", fabs(a.scale - b.scale), 0, M_EXACT, 0,
                LIST || a.scale == b.scale);
        }
        drop_trained(&a);
        drop_trained(&b);
        dt_model_free(&ma);
        dt_model_free(&mb);
        test_model_graph(L[k].level, L[k].bf16, L[k].name);
    }
}

static void model(int dt_unused)
{
    (void)dt_unused;
    if (MODEL)
        test_model();
    else if (QUICK)
        test_model_graph(2, 0, "O2"); /* --quick: one step as a graph, O2, on a small model */
}

static const ops_test TESTS[] = {
    {ST_MODEL, "model", model},
};
OPS_FAMILY(OPS_MODEL, "the whole model", TESTS);
