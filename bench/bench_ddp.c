/* bench_ddp.c: DDP step time on the CPU (not a test), run under mpirun by bench/ddp.sh.
 *   bench_ddp ARCH BATCH SIZE STEPS OVERLAP
 * Every rank trains on its own synthetic BATCH images of SIZExSIZE (forward, backward with the
 * all-reduce, SGD) for 2 warm-up steps and STEPS timed ones; rank 0 prints
 *   dtrain ddp ARCH ranks W overlap on|off: X ms/step */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/model.h"
#include "train/ddp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/rng.h"

int main(int argc, char **argv)
{
    long batch, size, steps, overlap;
    dt_log_init();
    dt_log_set_level(DT_LOG_WARN);
    if (argc != 6 || dt_parse_long("BATCH", argv[2], 1, 4096, &batch) || dt_parse_long("SIZE", argv[3], 8, 1024, &size) ||
        dt_parse_long("STEPS", argv[4], 1, 100000, &steps) || dt_parse_long("OVERLAP", argv[5], 0, 1, &overlap)) {
        fprintf(stderr, "usage: bench_ddp ARCH BATCH SIZE STEPS OVERLAP\n");
        return 2;
    }
    dt_launch l;
    dt_comm *c;
    if (dt_launch_init(&l) || dt_comm_host(&c, &l, 600))
        return 1;
    dt_cpu_set_threads(0);
    dt_model m;
    dt_optim o;
    dt_ddp *d;
    dt_ddp_cfg cfg = {.no_overlap = !overlap};
    if (dt_model_create(&m, argv[1], 3, 1000, &dt_backend_cpu) || dt_model_plan(&m, (int)batch, (int)size, (int)size) ||
        dt_optim_init(&o, &m, 0.01f, 0.9f, 0, 1e-4f, 0, 0))
        return 1;
    dt_model_init_weights(&m, 1, 0);
    if (dt_ddp_create(&d, &m, c, &cfg))
        return 1;
    size_t nx = (size_t)batch * size * size * 3;
    float *x = malloc(nx * sizeof(float));
    int32_t *y = malloc((size_t)batch * sizeof(int32_t));
    dt_rng r;
    dt_rng_seed(&r, 3, (uint64_t)l.rank);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)dt_rng_normal(&r);
    for (long i = 0; i < batch; i++)
        y[i] = (int32_t)dt_rng_below(&r, 1000);
    double t0 = 0, loss;
    for (long s = 0; s < steps + 2; s++) {
        if (s == 2) {
            c->ops->barrier(c);
            t0 = dt_seconds();
        }
        dt_model_step_begin(&m, 0.01f, s, 0);
        if (dt_model_forward(&m, x, (int)batch) || dt_model_loss(&m, y, (int)batch, 0, &loss) ||
            dt_ddp_backward(d, (int)batch, 0, 1))
            return 1;
        dt_optim_step(&o, &m, NULL);
    }
    c->ops->barrier(c);
    double ms = (dt_seconds() - t0) / steps * 1e3;
    if (l.rank == 0)
        printf("dtrain ddp %s ranks %d overlap %s: %.1f ms/step (%d buckets)\n", argv[1], l.size, overlap ? "on" : "off",
               ms, dt_ddp_buckets(d));
    dt_ddp_free(d);
    dt_optim_free(&o);
    dt_model_free(&m);
    free(x);
    free(y);
    dt_comm_free(c);
    dt_launch_finalize(&l);
    return 0;
}
