/* resample_check.c: our side of tests/data/resample.sh (PIL's resampling as the oracle). Reads jobs
 * from stdin, one a line, and writes each result as raw RGB (rows packed) for resample_pil.py to
 * compare with PIL's pixels:
 *   raw FILTER W H IN X0 Y0 X1 Y1 OW OH OUT   the box (fractional source pixels) of the W x H RGB in
 *                                             file IN resampled to OW x OH (dt_resample_plan_make and
 *                                             dt_resample_run: the resampler behind both entry points)
 *   full FILTER W H IN OW OH OUT              all of IN through dt_image_resize
 *   jpeg FILTER IN BX BY BW BH OW OH OUT      dt_jpeg_decode_box of the JPEG file IN (flip off)
 * FILTER is torchvision's name (dt_filter_parse). Exits 1 after the first job that fails, naming it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "data/image_internal.h" /* the box-taking resampler: PIL's resize(box=...) */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int spill(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* one job; 0, or -1 with the reason in err */
static int job(const char *line, char *err, size_t errlen)
{
    char kind[8], fname[32], in[4096], out[4096];
    int w, h, ow, oh, filter, n = 0;
    size_t len = 0;
    if (sscanf(line, "%7s %31s", kind, fname) != 2 || (filter = dt_filter_parse(fname)) < 0) {
        snprintf(err, errlen, "bad job (kind, filter)");
        return -1;
    }
    dt_image_scratch s = {0};
    uint8_t *src = NULL, *dst = NULL;
    int rc = -1;
    if (strcmp(kind, "raw") == 0 || strcmp(kind, "full") == 0) {
        double box[4];
        int raw = kind[0] == 'r';
        if (raw)
            n = sscanf(line, "%*s %*s %d %d %4095s %lf %lf %lf %lf %d %d %4095s", &w, &h, in, &box[0], &box[1], &box[2],
                       &box[3], &ow, &oh, out);
        else
            n = sscanf(line, "%*s %*s %d %d %4095s %d %d %4095s", &w, &h, in, &ow, &oh, out);
        if (n != (raw ? 10 : 6) || w <= 0 || h <= 0 || ow <= 0 || oh <= 0) {
            snprintf(err, errlen, "bad %s job", kind);
            return -1;
        }
        src = slurp(in, &len);
        dst = malloc((size_t)ow * oh * 3);
        if (!src || len != (size_t)w * h * 3 || !dst) {
            snprintf(err, errlen, "%.300s: cannot read %dx%d RGB", in, w, h);
        } else if (raw) {
            dt_resample_plan p;
            if (dt_resample_plan_make(w, h, box, ow, oh, filter, &p) != 0 || dt_image_scratch_reserve(&s, p.need) != 0)
                snprintf(err, errlen, "cannot plan the resampling");
            else {
                dt_resample_run(src, w, h, box, dst, ow, oh, &p, s.buf);
                rc = 0;
            }
        } else if (dt_image_resize(src, w, h, dst, ow, oh, filter, &s) != 0) {
            snprintf(err, errlen, "dt_image_resize failed");
        } else {
            rc = 0;
        }
    } else if (strcmp(kind, "jpeg") == 0) {
        dt_box b;
        n = sscanf(line, "%*s %*s %4095s %d %d %d %d %d %d %4095s", in, &b.x, &b.y, &b.w, &b.h, &ow, &oh, out);
        if (n != 8 || ow <= 0 || oh <= 0) {
            snprintf(err, errlen, "bad jpeg job");
            return -1;
        }
        src = slurp(in, &len);
        dst = malloc((size_t)ow * oh * 3);
        if (!src || !dst)
            snprintf(err, errlen, "%.300s: cannot read it", in);
        else
            rc = dt_jpeg_decode_box(src, len, b, ow, oh, filter, 0, dst, &s, err, errlen);
    } else {
        snprintf(err, errlen, "unknown job kind %s", kind);
    }
    if (rc == 0 && spill(out, dst, (size_t)ow * oh * 3) != 0) {
        snprintf(err, errlen, "%.300s: cannot write it", out);
        rc = -1;
    }
    free(src);
    free(dst);
    dt_image_scratch_free(&s);
    return rc;
}

int main(void)
{
    char line[16384], err[512];
    int jobs = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (line[0] == '\n' || line[0] == '#')
            continue;
        err[0] = '\0';
        if (job(line, err, sizeof err) != 0) {
            fprintf(stderr, "resample_check: %s in job %s", err, line);
            return 1;
        }
        jobs++;
    }
    printf("resample_check: %d jobs done\n", jobs);
    return 0;
}
