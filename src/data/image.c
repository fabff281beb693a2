/* image.c: what the image files share (image_internal.h): error text, telling a JPEG from a PNG by
 * its first bytes, and the scratch memory of image.h. The formats are in jpeg.c and png.c, the
 * resampling in resize.c, torchvision's boxes and flip in crop.c. */
#include "config.h"

#include "data/image.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_internal.h"

void dt_image_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int dt_image_is_jpeg(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8;
}

int dt_image_is_png(const uint8_t *buf, size_t len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    return len >= 8 && memcmp(buf, sig, 8) == 0;
}

void dt_image_unknown_format(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (len == 0)
        dt_image_err(err, errlen, "empty input");
    else if (len == 1)
        dt_image_err(err, errlen, "not a JPEG or PNG (1 byte: 0x%02x)", buf[0]);
    else
        dt_image_err(err, errlen, "not a JPEG or PNG (starts with 0x%02x 0x%02x)", buf[0], buf[1]);
}

/* --- scratch memory ---------------------------------------------------------------------------- */

void dt_image_scratch_free(dt_image_scratch *s)
{
    if (!s)
        return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

/* grows by half again so that a run of slightly larger requests settles after a few allocations */
int dt_image_scratch_reserve(dt_image_scratch *s, size_t need)
{
    if (s->buf && s->cap >= need)
        return 0;
    size_t cap = need;
    if (s->cap <= SIZE_MAX / 3 && s->cap + s->cap / 2 > cap)
        cap = s->cap + s->cap / 2;
    free(s->buf);
    s->buf = malloc(cap);
    s->cap = s->buf ? cap : 0;
    return s->buf ? 0 : -1;
}

#define SCRATCH_ALIGN ((size_t)64)

int dt_image_add_aligned(size_t *total, uint64_t n)
{
    uint64_t a = (n + SCRATCH_ALIGN - 1) & ~(uint64_t)(SCRATCH_ALIGN - 1);
    if (n > SIZE_MAX / 2 || a > SIZE_MAX / 2 - *total)
        return 0;
    *total += (size_t)a;
    return 1;
}
