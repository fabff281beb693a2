/* jpeg.c: JPEG through libjpeg-turbo's libjpeg API: dt_image_probe and dt_image_decode_rgb (which
 * hand PNG bytes to png.c), dt_jpeg_size, the loader's box decode (DCT-domain scaling,
 * jpeg_crop_scanline / jpeg_skip_scanlines, then resize.c's resampler) and dt_jpeg_encode. An error
 * manager that longjmps turns libjpeg's errors and its corrupt-data warnings into err strings.
 * Contracts in image.h. */
#include "config.h"

#include "data/image.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "data/image_internal.h"
#include "util/check.h"
#include "util/grow.h"

/* 1 for JPEG bytes; else 0 with "empty input" or "not a JPEG" in err */
static int jpeg_or_say(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (dt_image_is_jpeg(buf, len))
        return 1;
    dt_image_err(err, errlen, "%s", len == 0 ? "empty input" : "not a JPEG");
    return 0;
}

/* libjpeg reports errors through error_exit (which must not return) and warnings through
 * emit_message(-1): both end up here with the message formatted, and longjmp back to the caller. */
typedef struct jpeg_fail {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int corrupt; /* the failure was a corrupt-data warning */
    char msg[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200];
} jpeg_fail;

static void jf_error_exit(j_common_ptr cinfo)
{
    jpeg_fail *f = (jpeg_fail *)(void *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, f->msg);
    longjmp(f->jb, 1);
}

static void jf_emit_message(j_common_ptr cinfo, int level)
{
    if (level >= 0) /* trace messages */
        return;
    switch (cinfo->err->msg_code) {
    /* warnings about markers, not image data: the pixels are intact (ImageNet has files with
     * bytes between markers, which PIL and torchvision read without a word) */
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC:
        cinfo->err->num_warnings++;
        return;
    default: break;
    }
    jpeg_fail *f = (jpeg_fail *)(void *)cinfo->err;
    f->corrupt = 1;
    (*cinfo->err->format_message)(cinfo, f->msg);
    longjmp(f->jb, 1);
}

static void jf_output_message(j_common_ptr cinfo)
{
    (void)cinfo; /* nothing is ever printed */
}

static void jf_install(jpeg_fail *f, struct jpeg_error_mgr **slot)
{
    *slot = jpeg_std_error(&f->pub);
    f->pub.error_exit = jf_error_exit;
    f->pub.emit_message = jf_emit_message;
    f->pub.output_message = jf_output_message;
}

/* A decoder and what must survive a longjmp out of it: it lives in the frame of the function that
 * calls the one doing setjmp, so nothing in it is an automatic object clobbered by the longjmp. */
typedef struct jdec {
    struct jpeg_decompress_struct ci;
    jpeg_fail f;
    uint8_t *out;  /* a full decode's malloc'd pixels (freed by the caller on failure) */
    int cropskip;  /* inside jpeg_crop_scanline / jpeg_skip_scanlines */
    int created;
} jdec;

static void jdec_init(jdec *d)
{
    memset(d, 0, sizeof *d);
    jf_install(&d->f, &d->ci.err);
}

static void jdec_destroy(jdec *d)
{
    if (d->created)
        jpeg_destroy_decompress(&d->ci);
    d->created = 0;
}

/* a failure of ours (not libjpeg's), inside or outside the setjmp scope */
static int jdec_fail(jdec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jdec_fail(jdec *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->f.msg, sizeof d->f.msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Creates the decoder, reads the header, refuses oversized images (when limit), and picks the output colour space:
 * RGB for 1 and 3 components (libjpeg-turbo expands gray), CMYK for 4 (converted by us). Must be
 * called inside the caller's setjmp scope. */
static int jdec_begin(jdec *d, const uint8_t *buf, size_t len, enum dt_image_kind *kind, int limit)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    jpeg_create_decompress(ci);
    d->created = 1;
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    uint64_t px = (uint64_t)ci->image_width * ci->image_height;
    if (px == 0)
        return jdec_fail(d, "JPEG has an empty image (%ux%u)", (unsigned)ci->image_width, (unsigned)ci->image_height);
    if (limit && px > DT_IMAGE_MAX_PIXELS)
        return jdec_fail(d, "image too large: %ux%u is over 2^28 pixels", (unsigned)ci->image_width,
                         (unsigned)ci->image_height);
    switch (ci->num_components) {
    case 1:
        *kind = DT_IMAGE_JPEG_GRAY;
        ci->out_color_space = JCS_RGB;
        break;
    case 3:
        *kind = DT_IMAGE_JPEG_RGB;
        ci->out_color_space = JCS_RGB;
        break;
    case 4:
        *kind = DT_IMAGE_JPEG_CMYK;
        ci->out_color_space = JCS_CMYK; /* YCCK too: libjpeg converts it to CMYK */
        break;
    default:
        return jdec_fail(d, "unsupported JPEG: %d colour components", ci->num_components);
    }
    return 0;
}

static inline uint8_t mul255(unsigned a, unsigned b)
{
    return (uint8_t)((a * b + 127) / 255); /* a * b / 255 rounded (never exactly halfway: 255 is odd) */
}

/* n CMYK pixels to RGB. With an Adobe marker the stored values are inverted (Photoshop writes
 * 255 - ink), so R = C * K / 255; otherwise R = (255 - C) * (255 - K) / 255. */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, size_t n, int adobe)
{
    for (size_t i = 0; i < n; i++, in += 4, out += 3) {
        unsigned c = in[0], m = in[1], y = in[2], k = in[3];
        if (!adobe) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        out[0] = mul255(c, k);
        out[1] = mul255(m, k);
        out[2] = mul255(y, k);
    }
}

/* Decodes the whole image: into d->out (malloc'd RGB) when want_pixels, else only to check it, at
 * 1/8 scale (the entropy-coded data, where corruption shows, is decoded in full either way). */
static int jdec_full(jdec *d, const uint8_t *buf, size_t len, int want_pixels, enum dt_image_kind *kind, int *w,
                     int *h)
{
    if (setjmp(d->f.jb))
        return -1;
    struct jpeg_decompress_struct *ci = &d->ci;
    if (jdec_begin(d, buf, len, kind, 1) != 0)
        return -1;
    *w = (int)ci->image_width;
    *h = (int)ci->image_height;
    if (!want_pixels) {
        ci->scale_num = 1;
        ci->scale_denom = 8;
        ci->dct_method = JDCT_IFAST;
        ci->do_fancy_upsampling = FALSE;
    }
    jpeg_start_decompress(ci);
    JDIMENSION ow = ci->output_width, oh = ci->output_height;
    int comps = ci->output_components, cmyk = ci->out_color_space == JCS_CMYK;
    JSAMPARRAY row = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE, ow * (JDIMENSION)comps, 1);
    if (want_pixels) {
        d->out = malloc((size_t)ow * oh * 3);
        if (!d->out)
            return jdec_fail(d, "out of memory for %ux%u pixels", (unsigned)ow, (unsigned)oh);
    }
    while (ci->output_scanline < oh) {
        uint8_t *dst = want_pixels ? d->out + (size_t)ci->output_scanline * ow * 3 : NULL;
        JSAMPROW target = (want_pixels && !cmyk) ? dst : row[0];
        if (jpeg_read_scanlines(ci, &target, 1) != 1)
            return jdec_fail(d, "JPEG decoder stalled at row %u", (unsigned)ci->output_scanline);
        if (want_pixels && cmyk)
            cmyk_to_rgb(row[0], dst, ow, ci->saw_Adobe_marker);
    }
    jpeg_finish_decompress(ci); /* reads up to EOI: damage after the last row is reported too */
    return 0;
}

int dt_image_probe(const uint8_t *buf, size_t len, enum dt_image_kind *kind, int *w, int *h, char *err, size_t errlen)
{
    if (!buf)
        len = 0;
    if (dt_image_is_png(buf, len)) {
        uint8_t *rgb = NULL;
        if (dt_png_decode(buf, len, &rgb, w, h, err, errlen) != 0)
            return -1;
        free(rgb);
        *kind = DT_IMAGE_PNG;
        return 0;
    }
    if (!dt_image_is_jpeg(buf, len)) {
        dt_image_unknown_format(buf, len, err, errlen);
        return -1;
    }
    jdec d;
    jdec_init(&d);
    int rc = jdec_full(&d, buf, len, 0, kind, w, h);
    jdec_destroy(&d);
    if (rc != 0)
        dt_image_err(err, errlen, "%s", d.f.msg);
    return rc;
}

int dt_image_decode_rgb(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen)
{
    *rgb = NULL;
    if (!buf)
        len = 0;
    if (dt_image_is_png(buf, len))
        return dt_png_decode(buf, len, rgb, w, h, err, errlen);
    if (!dt_image_is_jpeg(buf, len)) {
        dt_image_unknown_format(buf, len, err, errlen);
        return -1;
    }
    jdec d;
    jdec_init(&d);
    enum dt_image_kind kind;
    int rc = jdec_full(&d, buf, len, 1, &kind, w, h);
    jdec_destroy(&d);
    if (rc != 0) {
        free(d.out);
        dt_image_err(err, errlen, "%s", d.f.msg);
        return -1;
    }
    *rgb = d.out;
    return 0;
}

static int jdec_size(jdec *d, const uint8_t *buf, size_t len, int *w, int *h)
{
    if (setjmp(d->f.jb))
        return -1;
    enum dt_image_kind kind;
    if (jdec_begin(d, buf, len, &kind, 0) != 0)
        return -1;
    *w = (int)d->ci.image_width;
    *h = (int)d->ci.image_height;
    return 0;
}

int dt_jpeg_size(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    if (!buf)
        len = 0;
    if (!jpeg_or_say(buf, len, err, errlen))
        return -1;
    jdec d;
    jdec_init(&d);
    int rc = jdec_size(&d, buf, len, w, h);
    jdec_destroy(&d);
    if (rc != 0)
        dt_image_err(err, errlen, "%s", d.f.msg);
    return rc;
}

/* --- box decoding ------------------------------------------------------------------------------ */

typedef struct box_job {
    const uint8_t *buf;
    size_t len;
    dt_box box;
    int out_w, out_h, filter, flip;
    uint8_t *out;
    dt_image_scratch *scratch;
    int fast; /* use jpeg_crop_scanline / jpeg_skip_scanlines */
} box_job;

/* The DCT scaling (1, 2, 4 or 8) for resampling a bw x bh box to out_w x out_h with filter: the
 * largest that leaves the box at least margin times the output after scaling. libjpeg's scaled IDCT
 * averages d x d pixels on a grid of its own and the filter resamples from those, which is "exact up
 * to resampling" only where the filter's own averaging swamps the IDCT's. Measured with PIL (200
 * RandomResizedCrop boxes of a 512x600 photo to 16..224 pixels, its DCT-scaled decode against its
 * full-size one, the worst mean |diff| of a box), bilinear at margin 1, the rule this path always
 * had, strays up to 3.7 levels, and that is the bar for the others:
 *   - bilinear 1: the triangle attenuates what the averaging does;
 *   - bicubic, lanczos, hamming 2: sharper kernels with a flatter pass band show the averaging
 *     (4.5, 4.8, 6.0 at margin 1); twice the margin quarters it (1.8, 2.1, 1.5);
 *   - box 4: its footprint snaps to whole scaled pixels (9.1 at margin 1, 5.8 at 2, 2.9 at 4);
 *   - nearest never: it filters nothing, so an averaged pixel is none that PIL would pick, whatever
 *     the margin (5 to 17 levels off on average, edges and texture smoothed away).
 * tests/data/resample.sh checks the DCT-scaled results pixel for pixel against PIL's own DCT-scaled
 * decode, and each filter's distance from the full-size pixels against bilinear's. */
static int dct_denom(int64_t bw, int64_t bh, int out_w, int out_h, int filter)
{
    static const int margin[DT_FILTER_COUNT] = {[DT_FILTER_BILINEAR] = 1, [DT_FILTER_NEAREST] = 0,
                                                [DT_FILTER_BICUBIC] = 2,  [DT_FILTER_BOX] = 4,
                                                [DT_FILTER_HAMMING] = 2,  [DT_FILTER_LANCZOS] = 2};
    int64_t m = margin[filter];
    for (int dd = 8; m > 0 && dd > 1; dd /= 2)
        if ((bw + dd - 1) / dd >= m * out_w && (bh + dd - 1) / dd >= m * out_h)
            return dd;
    return 1;
}

static int jdec_box(jdec *d, const box_job *j)
{
    if (setjmp(d->f.jb))
        return -1;
    struct jpeg_decompress_struct *ci = &d->ci;
    enum dt_image_kind kind;
    if (jdec_begin(d, j->buf, j->len, &kind, 1) != 0)
        return -1;
    int64_t W = ci->image_width, H = ci->image_height;

    /* the box clipped to the image, in source pixels */
    int64_t x0 = j->box.x, y0 = j->box.y, x1 = x0 + j->box.w, y1 = y0 + j->box.h;
    if (x0 < 0)
        x0 = 0;
    if (y0 < 0)
        y0 = 0;
    if (x1 > W)
        x1 = W;
    if (y1 > H)
        y1 = H;
    if (x1 <= x0 || y1 <= y0)
        return jdec_fail(d, "box %d,%d %dx%d lies outside the %dx%d image", j->box.x, j->box.y, j->box.w, j->box.h,
                         (int)W, (int)H);

    int denom = dct_denom(x1 - x0, y1 - y0, j->out_w, j->out_h, j->filter);
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)denom;
    jpeg_start_decompress(ci);
    int64_t OW = ci->output_width, OH = ci->output_height;

    /* the box in scaled pixels: whole pixels covering it (the fraction is resampled below) */
    int64_t sx0 = x0 / denom, sy0 = y0 / denom;
    int64_t sx1 = (x1 + denom - 1) / denom, sy1 = (y1 + denom - 1) / denom;
    if (sx1 > OW)
        sx1 = OW;
    if (sy1 > OH)
        sy1 = OH;
    int sw = (int)(sx1 - sx0), sh = (int)(sy1 - sy0);

    /* columns: jpeg_crop_scanline may move the start left to an iMCU boundary. It is asked for
     * CROP_PAD columns more on each side: libjpeg-turbo's fancy chroma upsampling takes the crop's
     * edges for the image's (it repeats the edge chroma sample there), so a box column next to one
     * came out up to 11 levels off the full decode PIL makes (4:2:0, tests/data/resample.sh). One
     * chroma sample spans at most 4 output pixels (h_samp_factor 4). */
    enum { CROP_PAD = 4 };
    JDIMENSION xoff = 0, cw = (JDIMENSION)OW;
    if (j->fast) {
        int64_t c0 = sx0 > CROP_PAD ? sx0 - CROP_PAD : 0, c1 = sx1 + CROP_PAD < OW ? sx1 + CROP_PAD : OW;
        xoff = (JDIMENSION)c0;
        cw = (JDIMENSION)(c1 - c0);
        d->cropskip = 1;
        jpeg_crop_scanline(ci, &xoff, &cw);
        d->cropskip = 0;
    }
    size_t in_row = (size_t)(sx0 - xoff); /* where the box starts in a decoded row */
    int comps = ci->output_components, cmyk = ci->out_color_space == JCS_CMYK;

    /* The box's exact edges in scaled pixels, relative to the decoded region, are resampled as PIL's
     * resize(box=...) does: rounding them out to whole scaled pixels would shift and stretch the crop
     * by up to denom - 1 source pixels. At scale 1 they are whole: the same as resizing the crop. */
    double rbox[4] = {(double)x0 / denom - (double)sx0, (double)y0 / denom - (double)sy0,
                      (double)x1 / denom - (double)sx0, (double)y1 / denom - (double)sy0};
    /* scratch: the decoded box, one decoded row, the resampler's memory */
    dt_resample_plan plan;
    if (dt_resample_plan_make(sw, sh, rbox, j->out_w, j->out_h, j->filter, &plan) != 0)
        return jdec_fail(d, "cannot resample a %dx%d box to %dx%d", sw, sh, j->out_w, j->out_h);
    size_t need = 0;
    if (!dt_image_add_aligned(&need, (uint64_t)sw * sh * 3))
        return jdec_fail(d, "box too large");
    size_t row_off = need;
    if (!dt_image_add_aligned(&need, (uint64_t)cw * comps) || plan.need > SIZE_MAX / 2 - need)
        return jdec_fail(d, "box too large");
    size_t work_off = need;
    need += plan.need;
    if (dt_image_scratch_reserve(j->scratch, need) != 0)
        return jdec_fail(d, "out of memory for %zu bytes of scratch", need);
    uint8_t *region = j->scratch->buf;
    JSAMPROW row = (uint8_t *)j->scratch->buf + row_off;
    uint8_t *work = (uint8_t *)j->scratch->buf + work_off;

    /* rows: skip those above the box, read the box's, stop after its last one */
    if (sy0 > 0) {
        if (j->fast) {
            d->cropskip = 1;
            JDIMENSION got = jpeg_skip_scanlines(ci, (JDIMENSION)sy0);
            d->cropskip = 0;
            if (got != (JDIMENSION)sy0)
                return jdec_fail(d, "skipped %u rows of %u", (unsigned)got, (unsigned)sy0);
        } else {
            while (ci->output_scanline < (JDIMENSION)sy0)
                if (jpeg_read_scanlines(ci, &row, 1) != 1)
                    return jdec_fail(d, "JPEG decoder stalled at row %u", (unsigned)ci->output_scanline);
        }
    }
    for (int y = 0; y < sh; y++) {
        if (jpeg_read_scanlines(ci, &row, 1) != 1)
            return jdec_fail(d, "JPEG decoder stalled at row %u", (unsigned)ci->output_scanline);
        uint8_t *dst = region + (size_t)y * sw * 3;
        if (cmyk)
            cmyk_to_rgb(row + in_row * 4, dst, (size_t)sw, ci->saw_Adobe_marker);
        else
            memcpy(dst, row + in_row * 3, (size_t)sw * 3);
    }
    /* stopping early is no error: abort drops the rest without reading or warning */
    jpeg_abort_decompress(ci);

    dt_resample_run(region, sw, sh, rbox, j->out, j->out_w, j->out_h, &plan, work);
    if (j->flip)
        dt_image_mirror_rows(j->out, j->out_w, j->out_h);
    return 0;
}

int dt_jpeg_decode_box(const uint8_t *buf, size_t len, dt_box box, int out_w, int out_h, int filter, int flip,
                       uint8_t *out, dt_image_scratch *s, char *err, size_t errlen)
{
    if (!buf)
        len = 0;
    if (!out || !s || out_w <= 0 || out_h <= 0 || (uint64_t)out_w * out_h > DT_IMAGE_MAX_PIXELS) {
        dt_image_err(err, errlen, "bad arguments: output %dx%d", out_w, out_h);
        return -1;
    }
    if (!jpeg_or_say(buf, len, err, errlen))
        return -1;
    if (box.w <= 0 || box.h <= 0) {
        dt_image_err(err, errlen, "empty box %dx%d", box.w, box.h);
        return -1;
    }
    if (filter < 0 || filter >= DT_FILTER_COUNT) {
        dt_image_err(err, errlen, "unknown resampling filter %d", filter);
        return -1;
    }
    box_job j = {buf, len, box, out_w, out_h, filter, flip, out, s, 1};
    jdec d;
    jdec_init(&d);
    int rc = jdec_box(&d, &j);
    if (rc != 0 && d.cropskip && !d.f.corrupt) {
        /* libjpeg-turbo refused to crop or skip with this image's settings: decode whole rows */
        jdec_destroy(&d);
        jdec_init(&d);
        j.fast = 0;
        rc = jdec_box(&d, &j);
    }
    jdec_destroy(&d);
    if (rc != 0)
        dt_image_err(err, errlen, "%s", d.f.msg);
    return rc;
}

/* --- encoding ---------------------------------------------------------------------------------- */

/* A growing malloc'd destination (like jpeg_mem_dest, but the buffer stays reachable after an error
 * so that it can be freed). */
typedef struct mem_dest {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap, len;
} mem_dest;

static void md_init(j_compress_ptr cinfo)
{
    mem_dest *m = (mem_dest *)(void *)cinfo->dest;
    m->pub.next_output_byte = m->buf;
    m->pub.free_in_buffer = m->cap;
}

static boolean md_empty(j_compress_ptr cinfo)
{
    mem_dest *m = (mem_dest *)(void *)cinfo->dest;
    /* called with the whole buffer full */
    size_t full = m->cap;
    if (dt_grow((void **)&m->buf, &m->cap, full + 1, 1) != DT_OK)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
    m->pub.next_output_byte = m->buf + full;
    m->pub.free_in_buffer = m->cap - full;
    return TRUE;
}

static void md_term(j_compress_ptr cinfo)
{
    mem_dest *m = (mem_dest *)(void *)cinfo->dest;
    m->len = m->cap - m->pub.free_in_buffer;
}

typedef struct jenc {
    struct jpeg_compress_struct ci;
    jpeg_fail f;
    mem_dest dest;
    int created;
} jenc;

static int jenc_run(jenc *e, const uint8_t *rgb, int w, int h, int quality)
{
    if (setjmp(e->f.jb))
        return -1;
    struct jpeg_compress_struct *ci = &e->ci;
    jpeg_create_compress(ci);
    e->created = 1;
    ci->dest = &e->dest.pub;
    ci->image_width = (JDIMENSION)w;
    ci->image_height = (JDIMENSION)h;
    ci->input_components = 3;
    ci->in_color_space = JCS_RGB;
    jpeg_set_defaults(ci);
    jpeg_set_quality(ci, quality, TRUE); /* baseline quantisation tables */
    /* 4:2:0: luma 2x2, chroma 1x1 (the defaults, made explicit) */
    ci->comp_info[0].h_samp_factor = 2;
    ci->comp_info[0].v_samp_factor = 2;
    for (int comp = 1; comp < 3; comp++) {
        ci->comp_info[comp].h_samp_factor = 1;
        ci->comp_info[comp].v_samp_factor = 1;
    }
    JSAMPARRAY row = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_PERMANENT, (JDIMENSION)w * 3, 1);
    jpeg_start_compress(ci, TRUE);
    while (ci->next_scanline < ci->image_height) {
        /* a copy: libjpeg's rows are not const */
        memcpy(row[0], rgb + (size_t)ci->next_scanline * w * 3, (size_t)w * 3);
        jpeg_write_scanlines(ci, row, 1);
    }
    jpeg_finish_compress(ci);
    return 0;
}

int dt_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len, char *err,
                   size_t errlen)
{
    *out = NULL;
    *len = 0;
    if (!rgb || w <= 0 || h <= 0 || w > JPEG_MAX_DIMENSION || h > JPEG_MAX_DIMENSION) {
        dt_image_err(err, errlen, "cannot encode a %dx%d image as JPEG", w, h);
        return -1;
    }
    if (quality < 1 || quality > 100) {
        dt_image_err(err, errlen, "JPEG quality %d is not in 1..100", quality);
        return -1;
    }
    jenc e;
    memset(&e, 0, sizeof e);
    jf_install(&e.f, &e.ci.err);
    e.dest.pub.init_destination = md_init;
    e.dest.pub.empty_output_buffer = md_empty;
    e.dest.pub.term_destination = md_term;
    /* a quarter byte per pixel fits most photos at usual qualities; it doubles when not */
    e.dest.cap = (size_t)w * h / 4 + 4096;
    if (e.dest.cap > ((size_t)1 << 26))
        e.dest.cap = (size_t)1 << 26;
    e.dest.buf = malloc(e.dest.cap);
    if (!e.dest.buf) {
        dt_image_err(err, errlen, "out of memory");
        return -1;
    }
    int rc = jenc_run(&e, rgb, w, h, quality);
    if (e.created)
        jpeg_destroy_compress(&e.ci);
    if (rc != 0) {
        free(e.dest.buf);
        dt_image_err(err, errlen, "%s", e.f.msg);
        return -1;
    }
    *out = e.dest.buf;
    *len = e.dest.len;
    return 0;
}
