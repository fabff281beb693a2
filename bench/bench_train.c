/* bench_train.c: training throughput of dtrain's CPU engine on synthetic input (not a test).
 *   bench_train ARCH BATCH SIZE STEPS [THREADS] [CHANNELS]
 * Runs 2 warm-up steps, then STEPS timed forward+backward+SGD steps; prints one line:
 *   dtrain ARCH bBATCH SIZExSIZE threads T: X img/s, peak RSS Y MiB */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "nn/model.h"
#include "train/sgd.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/rng.h"

int main(int argc, char **argv)
{
    long batch, size, steps, threads = 0, ch = 3;
    dt_log_init();
    if (argc < 5 || argc > 7 || dt_parse_long("BATCH", argv[2], 1, 4096, &batch) || dt_parse_long("SIZE", argv[3], 8, 1024, &size) ||
        dt_parse_long("STEPS", argv[4], 1, 100000, &steps) || (argc > 5 && dt_parse_long("THREADS", argv[5], 0, 1024, &threads)) ||
        (argc > 6 && dt_parse_long("CHANNELS", argv[6], 1, 64, &ch))) {
        fprintf(stderr, "usage: bench_train ARCH BATCH SIZE STEPS [THREADS] [CHANNELS]\n");
        return 2;
    }
    dt_cpu_set_threads((int)threads);
    dt_model m;
    dt_sgd opt;
    if (dt_model_create(&m, argv[1], (int)ch, 1000, &dt_backend_cpu) || dt_model_plan(&m, (int)batch, (int)size, (int)size) ||
        dt_sgd_init(&opt, &m, 0.01f, 0.9f, 0, 1e-4f, 0, 0))
        return 1;
    dt_model_init_weights(&m, 1, 0);
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
        if (dt_model_forward(&m, x, (int)batch) || dt_model_loss(&m, y, (int)batch, 0, &loss) ||
            dt_model_backward(&m, (int)batch, 0))
            return 1;
        dt_sgd_step(&opt, &m, 0.01f, 1.0f, NULL);
    }
    double dt = dt_seconds() - t0;
    if (m.profile) /* DT_PROFILE=1: where the time went, warm-up steps included */
        dt_model_profile_report(&m, stderr);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("dtrain %s b%ld %ldx%ld threads %d: %.1f img/s, peak RSS %.0f MiB\n", argv[1], batch, size, size,
           dt_cpu_threads(), steps * batch / dt, ru.ru_maxrss / 1024.0);
    free(x);
    free(y);
    dt_sgd_free(&opt);
    dt_model_free(&m);
    return 0;
}
