/* bench_loader.c: throughput of dtrain's loader on a packed split (not a test).
 *   bench_loader DIR SPLIT WORKERS BATCH EPOCHS [CROP]
 * Training augmentation (RandomResizedCrop CROP, default 224, + flip) over EPOCHS epochs after one
 * warm-up pass of 2 batches; prints one line:
 *   dtrain loader: N images, W workers: X img/s (Y img/s per worker) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/loader.h"
#include "data/shard.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/cli.h"
#include "util/log.h"

int main(int argc, char **argv)
{
    long workers, batch, epochs, crop = 224;
    dt_log_init();
    if (argc < 6 || argc > 7 || dt_parse_long("WORKERS", argv[3], 1, 1024, &workers) ||
        dt_parse_long("BATCH", argv[4], 1, 4096, &batch) || dt_parse_long("EPOCHS", argv[5], 1, 1000, &epochs) ||
        (argc > 6 && dt_parse_long("CROP", argv[6], 8, 1024, &crop))) {
        fprintf(stderr, "usage: bench_loader DIR SPLIT WORKERS BATCH EPOCHS [CROP]\n");
        return 2;
    }
    dt_dataset ds;
    if (dt_dataset_open(&ds, argv[1], argv[2], 0) != DT_OK)
        return 1;
    dt_loader_cfg cfg = {.batch = (int)batch, .train = 1, .workers = (int)workers, .seed = 1};
    if (ds.kind == DT_SHARD_ENCODED)
        cfg.out_h = cfg.out_w = (int)crop;
    dt_loader *L;
    if (dt_loader_create(&L, &ds, &cfg) != DT_OK)
        return 1;
    const dt_batch *b;
    unsigned sum = 0;
    dt_loader_start(L, 100, 0); /* warm-up: threads started, page cache and allocations warm */
    for (int i = 0; i < 2 && dt_loader_next(L, &b) == 1; i++)
        sum += b->x[0];
    int64_t images = 0;
    double t0 = dt_seconds();
    for (long e = 0; e < epochs; e++) {
        dt_loader_start(L, e, 0);
        int rc;
        while ((rc = dt_loader_next(L, &b)) == 1) {
            images += b->n;
            sum += b->x[(size_t)b->n * b->h * b->w * b->c - 1];
        }
        if (rc < 0)
            return 1;
    }
    double dt = dt_seconds() - t0;
    printf("dtrain loader: %lld images, %ld workers: %.1f img/s (%.1f img/s per worker) [%u]\n", (long long)images,
           workers, images / dt, images / dt / workers, sum & 1);
    dt_loader_free(L);
    dt_dataset_close(&ds);
    return 0;
}
