/* png.c: PNG decoding through libpng's simplified API, for dtpack's conversions (dt_image_probe
 * and dt_image_decode_rgb in jpeg.c hand PNG bytes here). Contract in image_internal.h. */
#include "config.h"

#include "data/image.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "data/image_internal.h"

/* libpng's simplified API (its own setjmp inside) read as 8-bit RGBA, then the alpha dropped: the
 * colour values are kept as they are, as PIL's convert("RGB") keeps them. */
int dt_png_decode(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, buf, len)) {
        dt_image_err(err, errlen, "PNG: %s", im.message[0] ? im.message : "unreadable header");
        png_image_free(&im);
        return -1;
    }
    uint64_t px = (uint64_t)im.width * im.height;
    if (px == 0 || px > DT_IMAGE_MAX_PIXELS) {
        dt_image_err(err, errlen, "image too large: %ux%u is over 2^28 pixels", (unsigned)im.width,
                     (unsigned)im.height);
        png_image_free(&im);
        return -1;
    }
    im.format = PNG_FORMAT_RGBA;
    /* 16-bit files without gAMA/sRGB are sRGB-encoded like 8-bit ones (libpng would assume linear) */
    im.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    uint8_t *p = malloc((size_t)px * 4);
    if (!p) {
        dt_image_err(err, errlen, "out of memory for %ux%u pixels", (unsigned)im.width, (unsigned)im.height);
        png_image_free(&im);
        return -1;
    }
    if (!png_image_finish_read(&im, NULL, p, 0, NULL)) { /* frees im's state either way */
        dt_image_err(err, errlen, "PNG: %s", im.message[0] ? im.message : "cannot decode");
        free(p);
        return -1;
    }
    for (size_t i = 0; i < (size_t)px; i++) {
        p[3 * i] = p[4 * i];
        p[3 * i + 1] = p[4 * i + 1];
        p[3 * i + 2] = p[4 * i + 2];
    }
    uint8_t *q = realloc(p, (size_t)px * 3);
    *rgb = q ? q : p;
    *w = (int)im.width;
    *h = (int)im.height;
    return 0;
}
