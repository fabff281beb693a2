/* image_internal.h: what the image files (image.c, jpeg.c, png.c, resize.c, crop.c) share behind
 * image.h; nothing outside src/data includes it but tests/data/resample_check.c, which puts the
 * box-taking resampler next to PIL's resize(box=...).
 *
 * image.c  error text, telling JPEG from PNG by content, the scratch memory
 * jpeg.c   libjpeg-turbo: probing, full and box decodes, encoding
 * png.c    libpng: full decodes
 * resize.c PIL's resampling filters (image.h's enum dt_filter), planned once and run on caller memory
 * crop.c   torchvision's boxes and the horizontal flip
 *
 * The error convention is image.h's: 0, or -1 with one reason in err[errlen], never a log line. */
#ifndef DT_DATA_IMAGE_INTERNAL_H
#define DT_DATA_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "data/image.h"

/* Images with more pixels than this are refused before anything is allocated for them. */
#define DT_IMAGE_MAX_PIXELS ((uint64_t)1 << 28)

/* --- image.c ---------------------------------------------------------------------------------- */

/* printf into err[errlen]; nothing when err is NULL or errlen 0 */
void dt_image_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* the signatures: FF D8 for a JPEG, the 8-byte PNG signature */
int dt_image_is_jpeg(const uint8_t *buf, size_t len);
int dt_image_is_png(const uint8_t *buf, size_t len);
/* the reason for input that is neither a JPEG nor a PNG: "empty input" or its first bytes */
void dt_image_unknown_format(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* At least need bytes in s->buf (contents not kept); -1 when out of memory. */
int dt_image_scratch_reserve(dt_image_scratch *s, size_t need);
/* n rounded up to 64 bytes, added to *total: how scratch is laid out in pieces; 0 on overflow */
int dt_image_add_aligned(size_t *total, uint64_t n);

/* --- png.c ------------------------------------------------------------------------------------ */

/* A PNG (any bit depth, palette, alpha dropped) to RGB in a malloc'd *rgb the caller frees. */
int dt_png_decode(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen);

/* --- resize.c --------------------------------------------------------------------------------- */

/* The resampling of a box of a w x h image to ow x oh with one filter: the kernel sizes, the passes
 * that are not copies, and the scratch bytes dt_resample_run needs. */
typedef struct dt_resample_plan {
    int filter;         /* enum dt_filter */
    int ksx, ksy;       /* taps per output column, per output row (convolutions) */
    int need_h, need_v; /* the horizontal, vertical pass runs (it is skipped when it would copy) */
    size_t need;        /* scratch bytes */
} dt_resample_plan;

/* Plans resampling the box [box[0],box[2]) x [box[1],box[3]) (fractional source pixels, taken as
 * float32 as PIL takes them) of a w x h image to ow x oh with filter (enum dt_filter), as PIL's
 * Image.resize(size, filter, box) does; -1 for empty sizes, sizes that overflow, unknown filters. */
int dt_resample_plan_make(int w, int h, const double box[4], int ow, int oh, int filter, dt_resample_plan *p);
/* Resamples the box of src (w x h RGB) to dst (ow x oh RGB) in work (p->need bytes); cannot fail. */
void dt_resample_run(const uint8_t *src, int w, int h, const double box[4], uint8_t *dst, int ow, int oh,
                     const dt_resample_plan *p, uint8_t *work);

/* --- crop.c ----------------------------------------------------------------------------------- */

/* RandomHorizontalFlip: mirrors each row of w x h RGB left-right in place. */
void dt_image_mirror_rows(uint8_t *img, int w, int h);

#endif
