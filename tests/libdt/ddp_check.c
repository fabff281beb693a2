/* ddp_check.c: data-parallel equivalence, run by tests/libdt/ddp_mpi.sh under mpirun (W ranks).
 * Every rank trains a reference model alone on the whole batch (W x b images) and a DDP replica on
 * its own b images; BN is in eval mode, so the two are the same computation up to fp32 rounding
 * (the mean over W x b is the average of W means over b). Replicas start from different weights:
 * DDP's broadcast must fix that. Run for several DDP settings (overlap on and off, tiny buckets,
 * one bucket, gradient accumulation over two half batches), and SyncBN with BN in training mode
 * against the reference in training mode (weights and running statistics); prints on rank 0
 *   ddp <setting>: <buckets> buckets, weight updates vs single-process <error>, replicas identical yes|no, ...
 * and exits non-zero when an error exceeds the tolerance or replicas differ. The error is that of
 * the updates (weights after minus before), which a wrong gradient would change by far more. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/model.h"
#include "train/amp.h"
#include "train/ddp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"

enum { HW = 16, STEPS = 3 };
static const float LR = 0.05f, MOM = 0.9f, WD = 1e-4f;
static const double TOL = 1e-5; /* norm-wise on the updates; fp32 sums in another order (measured: 1e-7) */

static int train_ref(const char *arch, int n, const float *x, const int32_t *y, int training, float *out, float *start,
                     float *buffers, int64_t nw)
{
    dt_model m;
    dt_optim o;
    if (dt_model_create(&m, arch, 3, 10, &dt_backend_cpu) || dt_model_plan(&m, n, HW, HW) ||
        dt_optim_init(&o, &m, LR, MOM, 0, WD, 0, 0))
        return -1;
    dt_model_init_weights(&m, 1, 0);
    memcpy(start, m.weights, (size_t)nw * sizeof(float));
    m.training = training;
    double loss;
    for (int s = 0; s < STEPS; s++) {
        dt_model_step_begin(&m, LR, s, 0);
        if (dt_model_forward(&m, x, n) || dt_model_loss(&m, y, n, 0, &loss) || dt_model_backward(&m, n, 0))
            return -1;
        dt_optim_step(&o, &m, NULL);
    }
    memcpy(out, m.weights, (size_t)nw * sizeof(float));
    memcpy(buffers, m.buffers, (size_t)m.n_buffers * sizeof(float));
    dt_optim_free(&o);
    dt_model_free(&m);
    return 0;
}

/* one DDP run; accum > 1 splits the rank's b images into accum micro-batches */
static int train_ddp(const char *arch, dt_comm *c, const dt_ddp_cfg *cfg, int b, int accum, int training,
                     const float *x, const int32_t *y, float *out, float *buffers, int *nbuckets)
{
    dt_model m;
    dt_optim o;
    dt_ddp *d;
    int mb = b / accum;
    if (dt_model_create(&m, arch, 3, 10, &dt_backend_cpu) || dt_model_plan(&m, mb, HW, HW) ||
        dt_optim_init(&o, &m, LR, MOM, 0, WD, 0, 0))
        return -1;
    /* rank 0 starts as the reference does, the others elsewhere until DDP broadcasts rank 0s weights */
    dt_model_init_weights(&m, c->rank == 0 ? 1 : 100 + (uint64_t)c->rank, 0);
    m.training = training;
    if (dt_ddp_create(&d, &m, c, cfg))
        return -1;
    *nbuckets = dt_ddp_buckets(d);
    double loss;
    const size_t img = (size_t)HW * HW * 3;
    for (int s = 0; s < STEPS; s++) {
        dt_model_step_begin(&m, LR, s, 0);
        for (int a = 0; a < accum; a++) {
            const float *xa = x + (size_t)(c->rank * b + a * mb) * img;
            const int32_t *ya = y + c->rank * b + a * mb;
            if (dt_ddp_before_forward(d) || dt_model_forward(&m, xa, mb) || dt_model_loss(&m, ya, mb, 0, &loss) ||
                dt_ddp_backward(d, mb, a > 0, a == accum - 1))
                return -1;
        }
        dt_optim_step(&o, &m, NULL);
    }
    memcpy(out, m.weights, (size_t)m.n_weights * sizeof(float));
    memcpy(buffers, m.buffers, (size_t)m.n_buffers * sizeof(float));
    dt_ddp_free(d);
    dt_optim_free(&o);
    dt_model_free(&m);
    return 0;
}

/* ||(a - s) - (b - s)|| / ||b - s||: the error of what training changed, not of the weights */
static double rel_err(const float *a, const float *b, const float *s, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double da = (double)a[i] - s[i], db = (double)b[i] - s[i];
        num += (da - db) * (da - db);
        den += db * db;
    }
    return sqrt(num / (den + 1e-30));
}

int main(int argc, char **argv)
{
    const char *arch = argc > 1 ? argv[1] : "resnet8";
    int b = argc > 2 ? atoi(argv[2]) : 4;
    dt_log_init();
    dt_launch l;
    dt_comm *c;
    if (dt_launch_init(&l) || dt_comm_host(&c, &l, 120))
        return 1;
    int W = c->size, n = W * b;
    const size_t img = (size_t)HW * HW * 3;
    float *x = malloc((size_t)n * img * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    dt_rng r;
    dt_rng_seed(&r, 7, 0);
    for (size_t i = 0; i < (size_t)n * img; i++)
        x[i] = (float)dt_rng_normal(&r);
    for (int i = 0; i < n; i++)
        y[i] = (int32_t)dt_rng_below(&r, 10);
    dt_model probe;
    dt_model_create(&probe, arch, 3, 10, &dt_backend_cpu);
    int64_t nw = probe.n_weights, nbuf = probe.n_buffers;
    dt_model_free(&probe);
    float *rbuf[2] = {malloc((size_t)nbuf * sizeof(float)), malloc((size_t)nbuf * sizeof(float))},
          *buf = malloc((size_t)nbuf * sizeof(float)), *ref_train = malloc((size_t)nw * sizeof(float));
    float *ref = malloc((size_t)nw * sizeof(float)), *w = malloc((size_t)nw * sizeof(float)),
          *first = malloc((size_t)nw * sizeof(float)), *start = malloc((size_t)nw * sizeof(float)),
          *setting1 = malloc((size_t)nw * sizeof(float));
    /* references: BN in eval mode, and in training mode (for SyncBN) */
    if (train_ref(arch, n, x, y, 0, ref, start, rbuf[0], nw) || train_ref(arch, n, x, y, 1, ref_train, start, rbuf[1], nw))
        return 1;
    struct {
        const char *name;
        dt_ddp_cfg cfg;
        int accum, training;
    } runs[] = {
        {"overlap, default buckets", {0}, 1, 0},
        {"no overlap", {.no_overlap = 1}, 1, 0},
        {"overlap, 4 KiB buckets", {.bucket_bytes = 4096, .first_bucket_bytes = 4096}, 1, 0},
        {"overlap, one bucket", {.bucket_bytes = (size_t)1 << 30, .first_bucket_bytes = (size_t)1 << 30}, 1, 0},
        {"2 accumulation steps", {.grad_scale = 0.5f}, 2, 0},
        {"SyncBN, BN in training mode", {.sync_bn = 1}, 1, 1},
        {"SyncBN, 4 KiB buckets", {.sync_bn = 1, .bucket_bytes = 4096, .first_bucket_bytes = 4096}, 1, 1},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        int nb = 0;
        if (train_ddp(arch, c, &runs[k].cfg, b, runs[k].accum, runs[k].training, x, y, w, buf, &nb))
            return 1;
        double e = rel_err(w, runs[k].training ? ref_train : ref, start, nw), emax = e;
        /* BN running statistics: SyncBN's are the whole batch's, as the reference's */
        double ebuf = 0;
        for (int64_t i = 0; i < nbuf; i++)
            ebuf = fmax(ebuf, fabs((double)buf[i] - rbuf[runs[k].training][i]) / (fabs(rbuf[runs[k].training][i]) + 1e-3));
        c->ops->allreduce(c, &ebuf, &ebuf, 1, DT_FLOAT64, DT_MAX);
        bad += ebuf > 1e-4;
        if (k == 0)
            memcpy(setting1, w, (size_t)nw * sizeof(float));
        /* the replicas must hold the same weights: compare rank 0's copy on every rank */
        memcpy(first, w, (size_t)nw * sizeof(float));
        c->ops->broadcast(c, first, (size_t)nw, DT_FLOAT32, 0);
        int differ = memcmp(first, w, (size_t)nw * sizeof(float)) != 0, any = differ;
        c->ops->allreduce(c, &emax, &emax, 1, DT_FLOAT64, DT_MAX);
        c->ops->allreduce(c, &any, &any, 1, DT_INT32, DT_MAX);
        /* bucketing and overlap change when a sum happens, not its order: the same bits */
        int same1 = memcmp(setting1, w, (size_t)nw * sizeof(float)) == 0;
        bad += emax > TOL || any || (runs[k].accum == 1 && !runs[k].training && !same1);
        if (c->rank == 0)
            printf("ddp %s: %d buckets, weight updates vs single-process %.2e (tolerance %.0e), BN buffers %.1e, "
                   "replicas identical %s, bitwise equal to the first setting %s\n",
                   runs[k].name, nb, emax, TOL, ebuf, any ? "no" : "yes", same1 ? "yes" : "no");
    }
    /* AMP: an inf in the last rank's gradients skips the step on every rank */
    {
        dt_model m;
        dt_optim o;
        dt_ddp *d;
        dt_amp_props ap;
        dt_scaler sc;
        dt_amp_resolve(2, NULL, &ap);
        dt_scaler_init(&sc, &ap);
        int ok = dt_model_create(&m, arch, 3, 10, &dt_backend_cpu) == DT_OK && dt_model_plan(&m, b, HW, HW) == DT_OK &&
                 dt_optim_init(&o, &m, LR, MOM, 0, WD, 0, 0) == DT_OK;
        dt_model_init_weights(&m, 1, 0);
        m.training = 0;
        ok = ok && dt_ddp_create(&d, &m, c, NULL) == DT_OK;
        double loss;
        const float *xr = x + (size_t)c->rank * b * img;
        const int32_t *yr = y + c->rank * b;
        int sk1 = -1, sk2 = -1;
        const dt_scalars *out;
        ok = ok && !dt_amp_put_state(&sc, 0, &m);
        dt_model_step_begin(&m, LR, 1, 0);
        ok = ok && !dt_model_forward(&m, xr, b) && !dt_model_loss(&m, yr, b, 0, &loss) && !dt_ddp_backward(d, b, 0, 1) &&
             !dt_amp_step(&sc, c, &o, &m, NULL, &out);
        sk1 = ok ? out->skipped : -1;
        size_t wb = (size_t)m.n_weights * sizeof(float);
        float *w0 = malloc(wb), *mo0 = malloc(wb);
        memcpy(w0, m.weights, wb);
        memcpy(mo0, o.momentum_buf, wb);
        dt_model_step_begin(&m, LR, 2, 0);
        ok = ok && !dt_model_forward(&m, xr, b) && !dt_model_loss(&m, yr, b, 0, &loss) && !dt_ddp_backward(d, b, 0, 1);
        if (c->rank == W - 1)
            ((float *)m.grads)[m.n_weights / 3] = INFINITY; /* after the all-reduce: only this rank sees it */
        ok = ok && !dt_amp_step(&sc, c, &o, &m, NULL, &out);
        sk2 = ok ? out->skipped : -1;
        int same = ok && !sk1 && sk2 && !memcmp(w0, m.weights, wb) && !memcmp(mo0, o.momentum_buf, wb) &&
                   sc.scale == 32768.0,
            all = same;
        c->ops->allreduce(c, &all, &all, 1, DT_INT32, DT_MIN);
        bad += !all;
        if (c->rank == 0)
            printf("amp: an inf on rank %d skipped the step on every rank, weights and momentum untouched, scale "
                   "halved: %s\n",
                   W - 1, all ? "yes" : "no");
        free(w0);
        free(mo0);
        dt_ddp_free(d);
        dt_optim_free(&o);
        dt_model_free(&m);
    }
    /* AMP O2: gradients travel as fp16; that must equal the fp32 average rounded to fp16 */
    {
        float *gw[2] = {NULL, NULL};
        for (int wire = 0; wire < 2; wire++) {
            dt_model m;
            dt_ddp *d;
            dt_amp_props ap;
            dt_amp a;
            dt_amp_resolve(2, NULL, &ap);
            dt_model_create(&m, arch, 3, 10, &dt_backend_cpu);
            dt_model_init_weights(&m, 1, 0);
            m.training = 0;
            dt_ddp_cfg dc = {.wire = wire ? DT_FLOAT16 : DT_FLOAT32};
            double loss;
            int ok = dt_amp_attach(&a, &m, &ap) == DT_OK && dt_model_plan(&m, b, HW, HW) == DT_OK &&
                     dt_ddp_create(&d, &m, c, &dc) == DT_OK;
            ok = ok && !dt_model_forward(&m, x + (size_t)c->rank * b * img, b) &&
                 !dt_model_loss(&m, y + c->rank * b, b, 0, &loss) && !dt_ddp_backward(d, b, 0, 1);
            gw[wire] = calloc((size_t)m.n_weights, sizeof(float));
            for (int p = 0; p < m.n_params; p++) /* each gradient as fp32 at its place in the fp32 layout */
                if (dt_param_trainable(&m.params[p]))
                    dt_param_get_grad(&m, &m.params[p], gw[wire] + m.params[p].off);
            if (!wire) /* the fp32 average, rounded where the gradient is of the reduced type (not BN's) */
                for (int p = 0; p < m.n_params; p++)
                    if (dt_param_trainable(&m.params[p]) && dt_param_reduced(&m, &m.params[p]))
                        dt_round_half(gw[0] + m.params[p].off, m.params[p].numel, 0);
            bad += !ok;
            dt_ddp_free(d);
            dt_amp_free(&a);
            dt_model_free(&m);
        }
        int same = !memcmp(gw[0], gw[1], (size_t)nw * sizeof(float)), all = same;
        if (!same)
            for (int64_t i = 0, shown = 0; i < nw && shown < 3; i++)
                if (memcmp(&gw[0][i], &gw[1][i], 4)) {
                    printf("  rank %d gradient %lld: fp32 average rounded %.9g, fp16 wire %.9g\n", c->rank, (long long)i, gw[0][i], gw[1][i]);
                    shown++;
                }
        c->ops->allreduce(c, &all, &all, 1, DT_INT32, DT_MIN);
        bad += !all;
        if (c->rank == 0)
            printf("amp O2: fp16 gradients on the wire (BN's in fp32) equal the fp32 average rounded to fp16: %s\n",
                   all ? "yes" : "no");
        free(gw[0]);
        free(gw[1]);
    }
    free(x);
    free(y);
    free(ref);
    free(w);
    free(first);
    free(start);
    free(setting1);
    free(rbuf[0]);
    free(rbuf[1]);
    free(buf);
    free(ref_train);
    dt_comm_free(c);
    dt_launch_finalize(&l);
    return bad != 0;
}
