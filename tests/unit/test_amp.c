/* test_amp.c: Apex's opt-level table and override rules, the start-up print, and the dynamic
 * loss scaler: growth after 2000 clean steps, halving on overflow with one log line naming the
 * step, the cap and the floor, a skipped step leaving weights and momentum bit-identical, the
 * inf/NaN check, and the state's round trip through an HDF5 checkpoint group. (Skipping on every
 * rank when one rank overflows: tests/libdt/ddp_mpi.sh.) */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/model.h"
#include "tap.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"

static const dt_amp_overrides none = {.keep_batchnorm_fp32 = -1, .master_weights = -1};

/* 1 when n values of type t at x are of the reduced type: stored so, or fp32 holding such values */
static int holds_reduced(const void *x, dt_dtype t, int64_t n, int bf16)
{
    return t == (bf16 ? DT_BFLOAT16 : DT_FLOAT16) || (t == DT_FLOAT32 && dt_is_half(x, n, bf16));
}

/* unscale_check's flag on n fp32 gradients at 1/scale inv */
static int overflows(int64_t n, const float *g, float inv)
{
    dt_scalars s = {.inv_scale = inv};
    dt_backend_cpu.unscale_check(n, DT_FLOAT32, g, &s);
    return s.agree[DT_AGREE_OVERFLOW];
}

int main(void)
{
    dt_log_init();
    /* the table */
    dt_amp_props p[4];
    int ok = 1;
    for (int l = 0; l < 4; l++)
        ok = ok && dt_amp_resolve(l, &none, &p[l]) == DT_OK;
    TAP_OK(ok && p[0].model_type == DT_FLOAT32 && !p[0].cast_ops && p[0].keep_batchnorm_fp32 && !p[0].master_weights &&
               !p[0].dynamic_loss_scale && p[0].loss_scale == 1.0 && p[0].allreduce_type == DT_FLOAT32,
           "O0: fp32 weights, no casts, fp32 BN, no master weights, static scale 1, fp32 all-reduce");
    TAP_OK(p[1].model_type == DT_FLOAT32 && p[1].cast_ops && p[1].keep_batchnorm_fp32 && !p[1].master_weights &&
               p[1].dynamic_loss_scale && p[1].loss_scale == 65536.0 && p[1].allreduce_type == DT_FLOAT32,
           "O1: fp32 weights, conv/linear cast, fp32 BN, dynamic scale from 2^16, fp32 all-reduce");
    TAP_OK(p[2].model_type == DT_FLOAT16 && !p[2].cast_ops && p[2].keep_batchnorm_fp32 && p[2].master_weights &&
               p[2].dynamic_loss_scale && p[2].allreduce_type == DT_FLOAT16,
           "O2: fp16 weights, fp32 BN, fp32 master weights, dynamic scale, fp16 all-reduce");
    TAP_OK(p[3].model_type == DT_FLOAT16 && !p[3].keep_batchnorm_fp32 && !p[3].master_weights &&
               !p[3].dynamic_loss_scale && p[3].loss_scale == 1.0,
           "O3: fp16 everywhere, BN too, no master weights, static scale 1");
    dt_amp_overrides o = none;
    dt_amp_props q;
    o.bf16 = 1;
    TAP_OK(dt_amp_resolve(2, &o, &q) == DT_OK && q.model_type == DT_BFLOAT16 && !q.dynamic_loss_scale &&
               q.loss_scale == 1.0 && q.allreduce_type == DT_BFLOAT16,
           "O2 with bf16: bf16 weights, no loss scaling by default");
    o.loss_scale = "dynamic";
    TAP_OK(dt_amp_resolve(2, &o, &q) == DT_OK && q.dynamic_loss_scale, "  unless --loss-scale dynamic");
    o = none;
    o.keep_batchnorm_fp32 = 1;
    o.master_weights = 1;
    o.loss_scale = "128";
    o.allreduce_fp32 = 1;
    TAP_OK(dt_amp_resolve(3, &o, &q) == DT_OK && q.keep_batchnorm_fp32 && q.master_weights && !q.dynamic_loss_scale &&
               q.loss_scale == 128 && q.allreduce_type == DT_FLOAT32 && q.model_type == DT_FLOAT16,
           "O3 overrides: keep BN fp32, master weights, static 128, fp32 all-reduce; weights stay fp16");
    struct {
        int level;
        dt_amp_overrides o;
        const char *flag;
    } refused[] = {
        {1, {.keep_batchnorm_fp32 = 1, .master_weights = -1}, "--keep-batchnorm-fp32"},
        {0, {.keep_batchnorm_fp32 = -1, .master_weights = 1}, "--master-weights"},
        {2, {.keep_batchnorm_fp32 = -1, .master_weights = 0}, "--master-weights"},
        {2, {.keep_batchnorm_fp32 = -1, .master_weights = -1, .loss_scale = "lots"}, "--loss-scale"},
        {2, {.keep_batchnorm_fp32 = -1, .master_weights = -1, .loss_scale = "-1"}, "--loss-scale"},
        {4, {.keep_batchnorm_fp32 = -1, .master_weights = -1}, "--opt-level"},
    };
    tap_log_begin();
    int nref = 0;
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        int rc = dt_amp_resolve(refused[i].level, &refused[i].o, &q);
        char *log = tap_log_take();
        nref += rc == DT_ERR_INPUT && tap_count_lines(log) == 1 && strstr(log, refused[i].flag);
        if (!(rc == DT_ERR_INPUT && strstr(log, refused[i].flag)))
            tap_diag("case %zu: %s", i, log);
        free(log);
    }
    tap_log_end();
    TAP_OK(nref == (int)(sizeof refused / sizeof *refused), "%d combinations Apex refused: one line naming the flag",
           nref);

    /* the print */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    o = none;
    o.loss_scale = "1024";
    dt_amp_resolve(2, &o, &q);
    dt_amp_print(&p[2], &q, f);
    fclose(f);
    TAP_OK(strstr(text, "Selected optimization level O2:  FP16 training with FP32 batchnorm and FP32 master weights.") &&
               strstr(text, "Defaults for this optimization level are:") &&
               strstr(text, "loss_scale             : dynamic (start 65536)") &&
               strstr(text, "After processing overrides, optimization options are:") &&
               strstr(text, "loss_scale             : 1024"),
           "the resolved properties print as Apex printed them, overrides after the defaults");
    free(text);

    /* the scaler */
    dt_scaler s;
    dt_scaler_init(&s, &p[1]);
    int skips = 0;
    for (int i = 0; i < 1999; i++)
        skips += dt_scaler_update(&s, 0, i, 0);
    TAP_OK(!skips && s.scale == 65536.0, "1999 clean steps: 2^16 still");
    dt_scaler_update(&s, 0, 1999, 0);
    TAP_OK(s.scale == 131072.0 && s.clean_steps == 0, "the 2000th doubles it: %g", s.scale);
    tap_log_begin();
    int skip = dt_scaler_update(&s, 1, 17, 0);
    char *log = tap_log_take();
    TAP_OK(skip && s.scale == 65536.0 && tap_count_lines(log) == 1 &&
               strstr(log, "step 17: Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 65536.0"),
           "an overflow skips, halves, and rank 0 says so once: %s", log);
    free(log);
    skip = dt_scaler_update(&s, 1, 18, 1);
    log = tap_log_take();
    tap_log_end();
    TAP_OK(skip && s.scale == 32768.0 && !*log, "on another rank: the same skip and scale, no line");
    free(log);
    s.scale = 16777216.0;
    for (int i = 0; i < 2000; i++)
        dt_scaler_update(&s, 0, i, 1);
    TAP_OK(s.scale == 16777216.0, "capped at 2^24");
    s.min_scale = 4;
    for (int i = 0; i < 40; i++)
        dt_scaler_update(&s, 1, i, 1);
    TAP_OK(s.scale == 4.0, "floored at 4 after 40 overflows in a row");
    dt_scaler st;
    dt_scaler_init(&st, &p[0]);
    TAP_OK(dt_scaler_update(&st, 1, 5, 1) == 1 && st.scale == 1.0, "a static scale skips an inf step too, scale unchanged");

    /* the check */
    float g[1000];
    for (int i = 0; i < 1000; i++)
        g[i] = (float)(i - 500) * 1024.0f;
    int bad = overflows(1000, g, 1.0f / 1024.0f), kept = 1;
    for (int i = 0; i < 1000; i++)
        kept = kept && g[i] == (float)(i - 500) * 1024.0f;
    g[777] = INFINITY;
    int inf = overflows(1000, g, 1.0f);
    g[777] = NAN;
    int nan = overflows(1000, g, 1.0f);
    g[777] = 3e38f;
    int big = overflows(1000, g, 1.0f);
    int over = overflows(1000, g, 4.0f); /* 3e38 * 4 overflows */
    TAP_OK(!bad && kept && inf && nan && !big && over,
           "the check leaves the gradients as they are; inf and NaN are caught, 3e38 is not, 3e38 * 4 is");

    /* a skipped step touches nothing */
    dt_model m;
    dt_optim opt;
    ok = dt_model_create(&m, "resnet8", 1, 10, &dt_backend_cpu) == DT_OK && dt_model_plan(&m, 4, 12, 12) == DT_OK &&
         dt_optim_init(&opt, &m, 0.1f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    dt_model_init_weights(&m, 3, 0);
    float x[4 * 12 * 12];
    for (int i = 0; i < 4 * 12 * 12; i++)
        x[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
    int32_t y[4] = {1, 2, 3, 4};
    double loss;
    dt_scaler_init(&s, &p[2]);
    int skipped1 = -1, skipped2 = -1;
    const dt_scalars *out;
    dt_amp_put_state(&s, 0, &m);
    dt_model_step_begin(&m, 0.1f, 1, 0);
    ok = ok && dt_model_forward(&m, x, 4) == DT_OK && dt_model_loss(&m, y, 4, 0, &loss) == DT_OK &&
         dt_model_backward(&m, 4, 0) == DT_OK && dt_amp_step(&s, NULL, &opt, &m, NULL, &out) == DT_OK;
    skipped1 = out->skipped;
    size_t wb = (size_t)m.n_weights * sizeof(float);
    float *w0 = malloc(wb), *mo0 = malloc(wb);
    memcpy(w0, m.weights, wb);
    memcpy(mo0, opt.momentum_buf, wb);
    int64_t steps0 = opt.steps;
    dt_model_step_begin(&m, 0.1f, 2, 0);
    ok = ok && dt_model_forward(&m, x, 4) == DT_OK && dt_model_loss(&m, y, 4, 0, &loss) == DT_OK &&
         dt_model_backward(&m, 4, 0) == DT_OK;
    ((float *)m.grads)[m.n_weights / 2] = INFINITY; /* O0: fp32 gradients */
    tap_log_begin();
    ok = ok && dt_amp_step(&s, NULL, &opt, &m, NULL, &out) == DT_OK;
    skipped2 = out->skipped;
    free(tap_log_take());
    tap_log_end();
    TAP_OK(ok && !skipped1 && skipped2 && !memcmp(w0, m.weights, wb) && !memcmp(mo0, opt.momentum_buf, wb) &&
               opt.steps == steps0 && s.scale == 32768.0,
           "resnet8: a clean step updates; an inf gradient skips the next, weights and momentum bit-identical");
    free(w0);
    free(mo0);
    dt_optim_free(&opt);
    dt_model_free(&m);

    /* storage per level: after a forward and backward of resnet8, which values are of the reduced type */
    struct {
        int level, bf16, keep;
        const char *name;
    } lv[] = {{0, 0, -1, "O0"}, {1, 0, -1, "O1"}, {2, 0, -1, "O2"}, {3, 0, -1, "O3"}, {3, 0, 1, "O3 keep BN fp32"},
              {2, 1, -1, "O2 bf16"}};
    for (size_t k = 0; k < sizeof lv / sizeof *lv; k++) {
        dt_amp_overrides ov = none;
        ov.bf16 = lv[k].bf16;
        ov.keep_batchnorm_fp32 = lv[k].keep;
        dt_amp_props ap;
        dt_amp a;
        dt_model mm;
        ok = dt_amp_resolve(lv[k].level, &ov, &ap) == DT_OK && dt_model_create(&mm, "resnet8", 1, 10, &dt_backend_cpu) == DT_OK;
        dt_model_init_weights(&mm, 5, 0);
        /* BN weights away from 1 so that their type shows */
        int pbn = dt_model_find_param(&mm, "bn1.weight"), pconv = dt_model_find_param(&mm, "layer1.0.conv1.weight");
        float *bnw = dt_param_data(&mm, &mm.params[pbn]);
        for (int j = 0; j < mm.params[pbn].numel; j++)
            bnw[j] = 1.0f + (float)j * 1e-5f;
        ok = ok && dt_amp_attach(&a, &mm, &ap) == DT_OK && dt_model_plan(&mm, 4, 12, 12) == DT_OK &&
             dt_model_forward(&mm, x, 4) == DT_OK && dt_model_loss(&mm, y, 4, 0, &loss) == DT_OK;
        const dt_node *c1 = &mm.nodes[0]; /* conv1 */
        int bf = lv[k].bf16;
        const dt_value *cv = &mm.values[c1->out], *lg = &mm.values[mm.output];
        int64_t nout = 4LL * 12 * 12 * cv->channels;
        int conv_red = holds_reduced(dt_arena_at(&mm.act, cv->act_off), cv->dtype, nout, bf);
        int logits_red = holds_reduced(dt_model_logits(&mm), lg->dtype, 40, bf);
        ok = ok && dt_model_backward(&mm, 4, 0) == DT_OK;
        const dt_param *pc = &mm.params[pconv], *pb = &mm.params[pbn];
        int w_red = holds_reduced(dt_param_data(&mm, pc), pc->dtype, pc->numel, bf);
        int bn_red = holds_reduced(dt_param_data(&mm, pb), pb->dtype, pb->numel, bf);
        int g_red = holds_reduced(dt_param_grad(&mm, pc), pc->dtype, pc->numel, bf);
        int want_conv = lv[k].level >= 1, want_w = lv[k].level >= 2, want_bn = lv[k].level == 3 && lv[k].keep != 1;
        TAP_OK(ok && conv_red == want_conv && logits_red == want_conv && w_red == want_w && bn_red == want_bn &&
                   g_red == want_conv && (a.master != NULL) == (lv[k].level == 2),
               "%s: conv outputs and logits %s, conv weights %s, BN weights %s, conv weight gradients %s, master "
               "weights %s",
               lv[k].name, conv_red ? "reduced" : "fp32", w_red ? "reduced" : "fp32", bn_red ? "reduced" : "fp32",
               g_red ? "reduced" : "fp32", a.master ? "yes" : "no");
        dt_amp_free(&a);
        dt_model_free(&mm);
    }

    /* O2's fp32 master weights keep updates smaller than half an fp16 step; O3 loses them */
    float wgt[2];
    for (int level = 2; level <= 3; level++) {
        dt_amp_props ap;
        dt_amp a;
        dt_model mm;
        dt_optim so;
        dt_amp_resolve(level, NULL, &ap);
        dt_model_create(&mm, "resnet8", 1, 10, &dt_backend_cpu);
        int pconv = dt_model_find_param(&mm, "layer1.0.conv1.weight");
        const dt_param *pc = &mm.params[pconv];
        float *w = dt_param_data(&mm, pc);
        for (int j = 0; j < pc->numel; j++)
            w[j] = 1.5f; /* fp16 spacing around 1.5 is 2^-10 */
        dt_amp_attach(&a, &mm, &ap);
        dt_optim_init(&so, &mm, 0.01f, 0, 0, 0, 0, 0);
        const dt_scalars *out2;
        for (int it = 0; it < 10; it++) {
            dt_model_step_begin(&mm, 0.01f, it, 0);
            memset(mm.grads, 0, mm.weights_bytes);
            /* lr * g = 0.3 of the spacing, times the loss scale (the gradient stored fp16 at O2 and O3) */
            uint16_t *gr = dt_param_grad(&mm, pc);
            for (int j = 0; j < pc->numel; j++)
                gr[j] = dt_f32_to_f16((float)(0.3 * 0.0009765625 / 0.01 * a.scaler.scale));
            dt_amp_step(&a.scaler, NULL, &so, &mm, a.master, &out2);
        }
        wgt[level - 2] = dt_f16_to_f32(((const uint16_t *)dt_param_data(&mm, pc))[0]);
        dt_optim_free(&so);
        dt_amp_free(&a);
        dt_model_free(&mm);
    }
    TAP_OK(wgt[0] == 1.5f - 3 * 0.0009765625f && wgt[1] == 1.5f,
           "10 updates of 0.3 fp16 steps: O2 (master weights) moved 1.5 to %.7f, O3 kept %.7f", wgt[0], wgt[1]);

    /* checkpoint round trip */
    char path[] = "tmp-test-amp-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    s.clean_steps = 1234;
    s.min_scale = 0.125;
    hid_t h5 = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t grp = H5Gcreate2(h5, "scaler", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = dt_scaler_save(&s, grp);
    H5Gclose(grp);
    H5Fclose(h5);
    dt_scaler back;
    memset(&back, 0, sizeof back);
    h5 = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    grp = H5Gopen2(h5, "scaler", H5P_DEFAULT);
    rc = rc || dt_scaler_load(&back, grp, path);
    H5Gclose(grp);
    H5Fclose(h5);
    unlink(path);
    back.in_a_row = s.in_a_row; /* not saved: the streak of skipped steps and --max-nonfinite are the run's */
    back.max_nonfinite = s.max_nonfinite;
    TAP_OK(rc == DT_OK && !memcmp(&back, &s, sizeof s), "scaler state round-trips through a checkpoint group (scale %g, "
                                                        "%lld clean steps)",
           back.scale, (long long)back.clean_steps);
    return tap_done();
}
