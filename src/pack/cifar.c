/* cifar.c: dt_pack_cifar10 (pack.h): CIFAR-10's binary batches (a label byte, then the R, G and B
 * planes of a 32x32 image, per record), checked for whole records before anything is written,
 * then packed as raw 3-channel HWC shards (pack.c) with the class names of batches.meta.txt when
 * it is there. */
#include "config.h"

#include "pack/pack.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/shard.h"
#include "pack/pack_internal.h"
#include "util/check.h"
#include "util/log.h"

enum { CIFAR_REC = 1 + 3 * 1024 }; /* label, then the R, G and B planes of 32x32 */

/* every batch a non-empty regular file of whole records: checked before anything is written */
static int cifar_check(const char *src, const char *const *files, int n_files)
{
    for (int f = 0; f < n_files; f++) {
        char path[4200];
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", src, files[f]);
        int fd = dt_open_regular(path, "CIFAR-10 batch", NULL, &size);
        if (fd < 0)
            return DT_ERR_INPUT;
        close(fd);
        if (size == 0) {
            dt_error("%s: empty file (a CIFAR-10 batch holds records of %d bytes)", path, (int)CIFAR_REC);
            return DT_ERR_INPUT;
        }
        if (size % CIFAR_REC) {
            dt_error("%s: record %llu is cut short (%llu of %d bytes): the file is truncated", path,
                     (unsigned long long)(size / CIFAR_REC), (unsigned long long)(size % CIFAR_REC), (int)CIFAR_REC);
            return DT_ERR_INPUT;
        }
    }
    return DT_OK;
}

/* path opened for stdio as a regular file (a FIFO is refused without blocking); NULL after one line */
static FILE *open_stream(const char *path, const char *what, const char *mode)
{
    uint64_t size;
    int fd = dt_open_regular(path, what, NULL, &size);
    FILE *f = fd < 0 ? NULL : fdopen(fd, mode);
    if (!f && fd >= 0) {
        dt_error("%s: cannot read: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

static int pack_cifar_split(const char *src, const char *const *files, int n_files, const char *split,
                            const char *const *classes, const dt_pack_opts *o, dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_RAW, .num_classes = 10, .classes = classes,
                          .h = 32, .w = 32, .c = 3, .source = src};
    dt_pack_split so;
    DT_TRY(dt_pack_split_begin(&so, &spec, o));
    int rc = DT_OK;
    uint8_t rec[CIFAR_REC], hwc[3 * 1024];
    for (int f = 0; f < n_files && rc == DT_OK; f++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", src, files[f]);
        FILE *fp = open_stream(path, "CIFAR-10 batch", "rb");
        if (!fp) {
            rc = DT_ERR_INPUT;
            break;
        }
        for (int64_t i = 0; rc == DT_OK; i++) {
            size_t got = fread(rec, 1, CIFAR_REC, fp);
            if (got == 0 && feof(fp))
                break;
            if (got != CIFAR_REC) {
                dt_error("%s: record %lld is cut short (%zu of %d bytes)", path, (long long)i, got, (int)CIFAR_REC);
                rc = DT_ERR_INPUT;
            } else if (rec[0] > 9) {
                dt_error("%s: record %lld has label %u, outside 0..9", path, (long long)i, rec[0]);
                rc = DT_ERR_INPUT;
            } else {
                for (int p = 0; p < 1024; p++) /* planes R, G, B -> interleaved */
                    for (int ch = 0; ch < 3; ch++)
                        hwc[p * 3 + ch] = rec[1 + ch * 1024 + p];
                rc = dt_pack_split_add(&so, hwc, sizeof hwc, rec[0], NULL, st);
                st->passed++;
            }
        }
        fclose(fp);
    }
    int rc2 = dt_pack_split_end(&so, st, rc == DT_OK);
    return rc ? rc : rc2;
}

int dt_pack_cifar10(const char *src, const dt_pack_opts *o, dt_pack_stats *st)
{
    static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin"};
    static const char *const test[] = {"test_batch.bin"};
    const char *names[10] = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
    char buf[10][64];
    memset(st, 0, sizeof *st);
    DT_TRY(cifar_check(src, train, 5));
    DT_TRY(cifar_check(src, test, 1));
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/batches.meta.txt", src);
    if (access(meta, F_OK) == 0) { /* the class names the batches come with, when present */
        FILE *m = open_stream(meta, "class name file", "r");
        if (!m)
            return DT_ERR_INPUT;
        int k = 0;
        char line[128];
        while (k < 10 && fgets(line, sizeof line, m)) {
            line[strcspn(line, "\r\n")] = 0;
            if (*line)
                snprintf(buf[k++], sizeof buf[0], "%.63s", line);
        }
        fclose(m);
        for (int i = 0; k == 10 && i < 10; i++)
            names[i] = buf[i];
    }
    DT_TRY(dt_pack_make_dir(o->out));
    DT_TRY(pack_cifar_split(src, train, 5, "train", names, o, st));
    return pack_cifar_split(src, test, 1, "val", names, o, st);
}
