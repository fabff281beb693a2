/* bench_train.c: training throughput of dtrain's CPU engine on synthetic input (not a test).
 *   bench_train ARCH BATCH SIZE STEPS [THREADS] [CHANNELS] [LEVEL]
 * LEVEL: Apex's opt level, O0 (the default: fp32), O1, O2 or O3, in fp16, or in bf16 with the
 * suffix bf16 (O2bf16 or O2-bf16), attached as dtrain does it (train/amp.h: the level's defaults).
 * Runs 2 warm-up steps, then STEPS timed forward+backward+SGD steps; prints one line:
 *   dtrain ARCH bBATCH SIZExSIZE threads T LEVEL: X img/s, peak RSS Y MiB
 * (LEVEL as O0, or O2 fp16, O2 bf16...), and on stderr how many steps the loss scaler skipped, if any.
 * DT_BENCH_CONCAT_COPY=1 in the environment: concatenations copy their inputs instead of being laid
 * out in place (dt_model_set_concat_in_place), to time the difference. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "nn/model.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/rng.h"

/* "O0".."O3", then nothing, "bf16" or "-bf16": the level (0..3), *bf16 set; -1 for anything else */
static int parse_level(const char *t, int *bf16)
{
    if (t[0] != 'O' || t[1] < '0' || t[1] > '3')
        return -1;
    const char *rest = t + 2 + (t[2] == '-');
    *bf16 = !strcmp(rest, "bf16");
    return *bf16 || !strcmp(t + 2, "") ? t[1] - '0' : -1;
}

int main(int argc, char **argv)
{
    long batch, size, steps, threads = 0, ch = 3;
    int lvl = 0, bf16 = 0;
    dt_log_init();
    if (argc < 5 || argc > 8 || dt_parse_long("BATCH", argv[2], 1, 4096, &batch) ||
        dt_parse_long("SIZE", argv[3], 8, 1024, &size) || dt_parse_long("STEPS", argv[4], 1, 100000, &steps) ||
        (argc > 5 && dt_parse_long("THREADS", argv[5], 0, 1024, &threads)) ||
        (argc > 6 && dt_parse_long("CHANNELS", argv[6], 1, 64, &ch)) ||
        (argc > 7 && (lvl = parse_level(argv[7], &bf16)) < 0)) {
        fprintf(stderr, "usage: bench_train ARCH BATCH SIZE STEPS [THREADS] [CHANNELS] [O0|O1|O2|O3[bf16]]\n");
        return 2;
    }
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = bf16};
    dt_amp_props ap;
    if (dt_amp_resolve(lvl, &ov, &ap) != DT_OK)
        return 2;
    char level[16]; /* as printed: O0, O2 fp16, O2 bf16... */
    snprintf(level, sizeof level, "O%d%s", lvl, lvl == 0 ? "" : bf16 ? " bf16" : " fp16");
    dt_cpu_set_threads((int)threads);
    dt_model m;
    dt_optim opt;
    dt_amp amp = {0};
    /* in dtrain's order (src/train/trainer.c): the weights, then above O0 AMP attached (the master
     * weights copy them) before the plan and the scaler's state put into the model's scalars after
     * it, and dt_amp_step for dt_optim_step; O0 as before */
    if (dt_model_create(&m, argv[1], (int)ch, 1000, &dt_backend_cpu))
        return 1;
    dt_model_init_weights(&m, 1, 0);
    const char *copy = getenv("DT_BENCH_CONCAT_COPY");
    if (copy && strcmp(copy, "1") == 0) /* concatenations copying their inputs (the comparison) */
        dt_model_set_concat_in_place(&m, 0);
    if ((lvl > 0 && dt_amp_attach(&amp, &m, &ap)) || dt_model_plan(&m, (int)batch, (int)size, (int)size) ||
        dt_optim_init(&opt, &m, 0.01f, 0.9f, 0, 1e-4f, 0, 0) || (lvl > 0 && dt_amp_put_state(&amp.scaler, opt.steps, &m)))
        return 1;
    int64_t nx = batch * size * size * ch;
    float *x = malloc((size_t)nx * sizeof(float));
    int32_t *y = malloc((size_t)batch * sizeof(int32_t));
    dt_rng r;
    dt_rng_seed(&r, 5, 0);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)dt_rng_normal(&r);
    for (long i = 0; i < batch; i++)
        y[i] = (int32_t)dt_rng_below(&r, 1000);
    double t0 = 0, loss;
    for (long s = 0; s < steps + 2; s++) {
        if (s == 2)
            t0 = dt_seconds();
        dt_model_step_begin(&m, 0.01f, s, 0);
        if (dt_model_forward(&m, x, (int)batch) || dt_model_loss(&m, y, (int)batch, 0, &loss) ||
            dt_model_backward(&m, (int)batch, 0))
            return 1;
        const dt_scalars *out;
        if (lvl == 0)
            dt_optim_step(&opt, &m, NULL);
        else if (dt_amp_step(&amp.scaler, NULL, &opt, &m, amp.master, &out))
            return 1;
        dt_model_prof_step_end(&m); /* DT_PROFILE: the step's times into the totals (nothing without it) */
    }
    double dt = dt_seconds() - t0;
    if (m.profile) /* DT_PROFILE=1: where the time went, warm-up steps included */
        dt_model_profile_report(&m, stderr);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("dtrain %s b%ld %ldx%ld threads %d %s: %.1f img/s, peak RSS %.0f MiB\n", argv[1], batch, size, size,
           dt_cpu_threads(), level, steps * batch / dt, ru.ru_maxrss / 1024.0);
    if (amp.scaler.overflows) /* a skipped step costs no update: rare after the first steps of a real run */
        fprintf(stderr, "bench_train %s %s: %lld of %ld steps skipped by the loss scaler (scale now %g)\n", argv[1],
                level, (long long)amp.scaler.overflows, steps + 2, amp.scaler.scale);
    free(x);
    free(y);
    dt_optim_free(&opt);
    if (lvl > 0)
        dt_amp_free(&amp);
    dt_model_free(&m);
    return 0;
}
