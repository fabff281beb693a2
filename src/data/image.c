/* image.c: images for the loader and dtpack (contract in image.h). JPEG through libjpeg-turbo's
 * libjpeg API (an error manager that longjmps, corrupt-data warnings made errors, DCT-domain scaling,
 * jpeg_crop_scanline / jpeg_skip_scanlines for box decodes), PNG through libpng's simplified API,
 * PIL's separable bilinear resampling in fixed point, and torchvision's crop boxes. */
#include "config.h"

#include "data/image.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "util/clones.h"

/* Images with more pixels than this are refused before anything is allocated for them. */
#define MAX_PIXELS ((uint64_t)1 << 28)

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int is_jpeg(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8;
}

/* 1 for JPEG bytes; else 0 with "empty input" or "not a JPEG" in err */
static int jpeg_or_say(const uint8_t *buf, size_t len, char *err, size_t errlen);

static int is_png(const uint8_t *buf, size_t len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    return len >= 8 && memcmp(buf, sig, 8) == 0;
}

/* the reason for input that is neither a JPEG nor a PNG */
static int jpeg_or_say(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (is_jpeg(buf, len))
        return 1;
    set_err(err, errlen, "%s", len == 0 ? "empty input" : "not a JPEG");
    return 0;
}

static void unknown_format(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (len == 0)
        set_err(err, errlen, "empty input");
    else if (len == 1)
        set_err(err, errlen, "not a JPEG or PNG (1 byte: 0x%02x)", buf[0]);
    else
        set_err(err, errlen, "not a JPEG or PNG (starts with 0x%02x 0x%02x)", buf[0], buf[1]);
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

/* at least need bytes in s->buf (contents not kept); grows by half again so that a run of slightly
 * larger requests settles after a few allocations */
static int scratch_reserve(dt_image_scratch *s, size_t need)
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

/* n rounded up to SCRATCH_ALIGN, added to *total; 0 on overflow */
static int add_aligned(size_t *total, uint64_t n)
{
    uint64_t a = (n + SCRATCH_ALIGN - 1) & ~(uint64_t)(SCRATCH_ALIGN - 1);
    if (n > SIZE_MAX / 2 || a > SIZE_MAX / 2 - *total)
        return 0;
    *total += (size_t)a;
    return 1;
}

/* --- resampling (PIL's ImagingResample with the bilinear filter) ------------------------------ */

/* Fixed point as PIL's 8-bit path: weights scaled by 2^22, sums rounded by adding half, and the
 * horizontal pass rounded to 8 bits before the vertical one, so results match Image.resize. */
#define RS_PREC 22
#define RS_HALF ((int32_t)1 << (RS_PREC - 1))

static inline uint8_t clip8(int32_t v)
{
    if (v >= ((int32_t)256 << RS_PREC))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> RS_PREC);
}

static double triangle(double x)
{
    if (x < 0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* taps per output sample for resampling [in0, in1) of an axis to out samples */
static int rs_ksize(double in0, double in1, int out)
{
    double scale = (in1 - in0) / out;
    double support = scale < 1.0 ? 1.0 : scale; /* the triangle's support (1) widened when shrinking */
    return (int)ceil(support) * 2 + 1;
}

/* PIL's precompute_coeffs: output sample o is centred at in0 + (o + 0.5) * scale; its taps are the
 * input samples [first, first + count) (clipped to the axis of in_size samples), weighted by the
 * triangle stretched by the scale and normalised to sum 1. tmp holds ksize doubles. */
static void rs_coeffs(int in_size, double in0, double in1, int out, int ksize, int *bounds, int32_t *kk, double *tmp)
{
    double scale = (in1 - in0) / out;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = fscale, ss = 1.0 / fscale;
    for (int o = 0; o < out; o++) {
        double center = in0 + (o + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        int n = xmax - xmin;
        if (n < 0)
            n = 0;
        double ww = 0.0;
        for (int x = 0; x < n; x++) {
            tmp[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += tmp[x];
        }
        int32_t *k = kk + (size_t)o * ksize;
        for (int x = 0; x < ksize; x++) {
            double v = x < n ? (ww != 0.0 ? tmp[x] / ww : tmp[x]) : 0.0;
            k[x] = (int32_t)(v < 0 ? v * (1 << RS_PREC) - 0.5 : v * (1 << RS_PREC) + 0.5);
        }
        bounds[2 * o] = xmin;
        bounds[2 * o + 1] = n;
    }
}

typedef struct rs_plan {
    int ksx, ksy;
    int need_h, need_v;
    size_t need; /* scratch bytes */
} rs_plan;

/* Plans resampling the box [x0,x1) x [y0,y1) of a w x h image to ow x oh; -1 when sizes overflow. */
static int rs_make_plan(int w, int h, const double box[4], int ow, int oh, rs_plan *p)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || !(box[2] > box[0]) || !(box[3] > box[1]))
        return -1;
    /* a pass is skipped when it would copy (same size, whole axis), as PIL does */
    p->need_h = !(ow == w && box[0] == 0.0 && box[2] == (double)w);
    p->need_v = !(oh == h && box[1] == 0.0 && box[3] == (double)h);
    p->ksx = rs_ksize(box[0], box[2], ow);
    p->ksy = rs_ksize(box[1], box[3], oh);
    int kmax = p->ksx > p->ksy ? p->ksx : p->ksy;
    size_t t = 0;
    int ok = add_aligned(&t, (uint64_t)ow * p->ksx * sizeof(int32_t)) && add_aligned(&t, (uint64_t)ow * 2 * sizeof(int))
             && add_aligned(&t, (uint64_t)oh * p->ksy * sizeof(int32_t))
             && add_aligned(&t, (uint64_t)oh * 2 * sizeof(int)) && add_aligned(&t, (uint64_t)kmax * sizeof(double))
             && add_aligned(&t, (uint64_t)ow * h * 3)  /* horizontal pass output */
             && add_aligned(&t, (uint64_t)ow * 3 * sizeof(int32_t)); /* vertical pass sums */
    if (!ok)
        return -1;
    p->need = t;
    return 0;
}

/* horizontal pass over rows [row0, row0 + nrows) of src (w wide) into dst (ow wide, nrows rows) */
DT_CLONES
static void rs_horizontal(const uint8_t *src, int w, int row0, int nrows, uint8_t *dst, int ow, const int *bounds,
                          const int32_t *kk, int ksize)
{
    for (int y = 0; y < nrows; y++) {
        const uint8_t *in = src + ((size_t)(row0 + y) * w) * 3;
        uint8_t *o = dst + (size_t)y * ow * 3;
        for (int xx = 0; xx < ow; xx++) {
            const int32_t *k = kk + (size_t)xx * ksize;
            const uint8_t *p = in + (size_t)bounds[2 * xx] * 3;
            int n = bounds[2 * xx + 1];
            int32_t s0 = RS_HALF, s1 = RS_HALF, s2 = RS_HALF;
            for (int x = 0; x < n; x++) {
                s0 += p[3 * x] * k[x];
                s1 += p[3 * x + 1] * k[x];
                s2 += p[3 * x + 2] * k[x];
            }
            o[3 * xx] = clip8(s0);
            o[3 * xx + 1] = clip8(s1);
            o[3 * xx + 2] = clip8(s2);
        }
    }
}

/* vertical pass: src rows are numbered from row0 (w wide). Each output row sums whole input rows
 * into acc (w * 3 int32), so the inner loop runs along a row and vectorises (widening multiply-add). */
DT_CLONES
static void rs_vertical(const uint8_t *src, int w, int row0, uint8_t *dst, int oh, const int *bounds,
                        const int32_t *kk, int ksize, int32_t *restrict acc)
{
    size_t n3 = (size_t)w * 3;
    for (int yy = 0; yy < oh; yy++) {
        const int32_t *k = kk + (size_t)yy * ksize;
        int n = bounds[2 * yy + 1];
        const uint8_t *base = src + (size_t)(bounds[2 * yy] - row0) * n3;
        uint8_t *restrict o = dst + (size_t)yy * n3;
#pragma omp simd
        for (size_t c = 0; c < n3; c++)
            acc[c] = RS_HALF;
        for (int y = 0; y < n; y++) {
            const uint8_t *restrict p = base + (size_t)y * n3;
            int32_t ky = k[y];
#pragma omp simd
            for (size_t c = 0; c < n3; c++)
                acc[c] += p[c] * ky;
        }
#pragma omp simd
        for (size_t c = 0; c < n3; c++) { /* clip8, branch-free */
            int32_t v = acc[c] >> RS_PREC;
            v = v < 0 ? 0 : v;
            o[c] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

/* Resamples the box of src (w x h) to dst (ow x oh) with the plan's layout in work (p->need bytes). */
static void rs_run(const uint8_t *src, int w, int h, const double box[4], uint8_t *dst, int ow, int oh,
                   const rs_plan *p, uint8_t *work)
{
    if (!p->need_h && !p->need_v) {
        memcpy(dst, src, (size_t)w * h * 3);
        return;
    }
    size_t off = 0;
    int32_t *kx = (int32_t *)(void *)(work + off);
    add_aligned(&off, (uint64_t)ow * p->ksx * sizeof(int32_t));
    int *bx = (int *)(void *)(work + off);
    add_aligned(&off, (uint64_t)ow * 2 * sizeof(int));
    int32_t *ky = (int32_t *)(void *)(work + off);
    add_aligned(&off, (uint64_t)oh * p->ksy * sizeof(int32_t));
    int *by = (int *)(void *)(work + off);
    add_aligned(&off, (uint64_t)oh * 2 * sizeof(int));
    double *tmp = (double *)(void *)(work + off);
    add_aligned(&off, (uint64_t)(p->ksx > p->ksy ? p->ksx : p->ksy) * sizeof(double));
    uint8_t *mid = work + off;
    add_aligned(&off, (uint64_t)ow * h * 3);
    int32_t *acc = (int32_t *)(void *)(work + off);

    if (p->need_h)
        rs_coeffs(w, box[0], box[2], ow, p->ksx, bx, kx, tmp);
    if (p->need_v)
        rs_coeffs(h, box[1], box[3], oh, p->ksy, by, ky, tmp);
    if (p->need_h && !p->need_v) {
        rs_horizontal(src, w, 0, h, dst, ow, bx, kx, p->ksx);
    } else if (!p->need_h) {
        rs_vertical(src, w, 0, dst, oh, by, ky, p->ksy, acc);
    } else {
        /* only the rows some output row reads go through the horizontal pass */
        int r0 = by[0], r1 = by[2 * (oh - 1)] + by[2 * (oh - 1) + 1];
        for (int yy = 0; yy < oh; yy++) {
            if (by[2 * yy] < r0)
                r0 = by[2 * yy];
            if (by[2 * yy] + by[2 * yy + 1] > r1)
                r1 = by[2 * yy] + by[2 * yy + 1];
        }
        rs_horizontal(src, w, r0, r1 - r0, mid, ow, bx, kx, p->ksx);
        rs_vertical(mid, ow, r0, dst, oh, by, ky, p->ksy, acc);
    }
}

int dt_image_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, dt_image_scratch *s)
{
    if (!src || !dst || !s)
        return -1;
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || (uint64_t)w * h > MAX_PIXELS || (uint64_t)ow * oh > MAX_PIXELS)
        return -1;
    double box[4] = {0.0, 0.0, (double)w, (double)h};
    rs_plan p;
    if (rs_make_plan(w, h, box, ow, oh, &p) != 0 || scratch_reserve(s, p.need) != 0)
        return -1;
    rs_run(src, w, h, box, dst, ow, oh, &p, s->buf);
    return 0;
}

static void mirror_rows(uint8_t *img, int w, int h)
{
    for (int y = 0; y < h; y++) {
        uint8_t *row = img + (size_t)y * w * 3;
        for (int a = 0, b = w - 1; a < b; a++, b--) {
            for (int c = 0; c < 3; c++) {
                uint8_t t = row[3 * a + c];
                row[3 * a + c] = row[3 * b + c];
                row[3 * b + c] = t;
            }
        }
    }
}

/* --- libjpeg plumbing ------------------------------------------------------------------------- */

/* libjpeg reports errors through error_exit (which must not return) and warnings through
 * emit_message(-1): both end up here with the message formatted, and longjmp back to the caller. */
typedef struct jpeg_fail {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int corrupt; /* the failure was a corrupt-data warning */
    char msg[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200];
} jpeg_fail;

static void jf_error_exit(j_common_ptr c)
{
    jpeg_fail *f = (jpeg_fail *)(void *)c->err;
    (*c->err->format_message)(c, f->msg);
    longjmp(f->jb, 1);
}

static void jf_emit_message(j_common_ptr c, int level)
{
    if (level >= 0) /* trace messages */
        return;
    switch (c->err->msg_code) {
    /* warnings about markers, not image data: the pixels are intact (ImageNet has files with
     * bytes between markers, which PIL and torchvision read without a word) */
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC:
        c->err->num_warnings++;
        return;
    default: break;
    }
    jpeg_fail *f = (jpeg_fail *)(void *)c->err;
    f->corrupt = 1;
    (*c->err->format_message)(c, f->msg);
    longjmp(f->jb, 1);
}

static void jf_output_message(j_common_ptr c)
{
    (void)c; /* nothing is ever printed */
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
    if (limit && px > MAX_PIXELS)
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

static int png_decode(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen);

int dt_image_probe(const uint8_t *buf, size_t len, enum dt_image_kind *kind, int *w, int *h, char *err, size_t errlen)
{
    if (!buf)
        len = 0;
    if (is_png(buf, len)) {
        uint8_t *rgb = NULL;
        if (png_decode(buf, len, &rgb, w, h, err, errlen) != 0)
            return -1;
        free(rgb);
        *kind = DT_IMAGE_PNG;
        return 0;
    }
    if (!is_jpeg(buf, len)) {
        unknown_format(buf, len, err, errlen);
        return -1;
    }
    jdec d;
    jdec_init(&d);
    int rc = jdec_full(&d, buf, len, 0, kind, w, h);
    jdec_destroy(&d);
    if (rc != 0)
        set_err(err, errlen, "%s", d.f.msg);
    return rc;
}

int dt_image_decode_rgb(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen)
{
    *rgb = NULL;
    if (!buf)
        len = 0;
    if (is_png(buf, len))
        return png_decode(buf, len, rgb, w, h, err, errlen);
    if (!is_jpeg(buf, len)) {
        unknown_format(buf, len, err, errlen);
        return -1;
    }
    jdec d;
    jdec_init(&d);
    enum dt_image_kind kind;
    int rc = jdec_full(&d, buf, len, 1, &kind, w, h);
    jdec_destroy(&d);
    if (rc != 0) {
        free(d.out);
        set_err(err, errlen, "%s", d.f.msg);
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
        set_err(err, errlen, "%s", d.f.msg);
    return rc;
}

/* --- box decoding ------------------------------------------------------------------------------ */

typedef struct box_job {
    const uint8_t *buf;
    size_t len;
    dt_box box;
    int out_w, out_h, flip;
    uint8_t *out;
    dt_image_scratch *s;
    int fast; /* use jpeg_crop_scanline / jpeg_skip_scanlines */
} box_job;

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

    /* the largest DCT scaling that keeps the box at least out_w x out_h */
    int denom = 1;
    for (int dd = 8; dd > 1; dd /= 2) {
        if ((x1 - x0 + dd - 1) / dd >= j->out_w && (y1 - y0 + dd - 1) / dd >= j->out_h) {
            denom = dd;
            break;
        }
    }
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

    /* columns: jpeg_crop_scanline may move the start left to an iMCU boundary */
    JDIMENSION xoff = 0, cw = (JDIMENSION)OW;
    if (j->fast) {
        xoff = (JDIMENSION)sx0;
        cw = (JDIMENSION)sw;
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
    rs_plan plan;
    if (rs_make_plan(sw, sh, rbox, j->out_w, j->out_h, &plan) != 0)
        return jdec_fail(d, "cannot resample a %dx%d box to %dx%d", sw, sh, j->out_w, j->out_h);
    size_t need = 0;
    if (!add_aligned(&need, (uint64_t)sw * sh * 3))
        return jdec_fail(d, "box too large");
    size_t row_off = need;
    if (!add_aligned(&need, (uint64_t)cw * comps) || plan.need > SIZE_MAX / 2 - need)
        return jdec_fail(d, "box too large");
    size_t work_off = need;
    need += plan.need;
    if (scratch_reserve(j->s, need) != 0)
        return jdec_fail(d, "out of memory for %zu bytes of scratch", need);
    uint8_t *region = j->s->buf;
    JSAMPROW row = (uint8_t *)j->s->buf + row_off;
    uint8_t *work = (uint8_t *)j->s->buf + work_off;

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

    rs_run(region, sw, sh, rbox, j->out, j->out_w, j->out_h, &plan, work);
    if (j->flip)
        mirror_rows(j->out, j->out_w, j->out_h);
    return 0;
}

int dt_jpeg_decode_box(const uint8_t *buf, size_t len, dt_box box, int out_w, int out_h, int flip, uint8_t *out,
                       dt_image_scratch *s, char *err, size_t errlen)
{
    if (!buf)
        len = 0;
    if (!out || !s || out_w <= 0 || out_h <= 0 || (uint64_t)out_w * out_h > MAX_PIXELS) {
        set_err(err, errlen, "bad arguments: output %dx%d", out_w, out_h);
        return -1;
    }
    if (!jpeg_or_say(buf, len, err, errlen))
        return -1;
    if (box.w <= 0 || box.h <= 0) {
        set_err(err, errlen, "empty box %dx%d", box.w, box.h);
        return -1;
    }
    box_job j = {buf, len, box, out_w, out_h, flip, out, s, 1};
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
        set_err(err, errlen, "%s", d.f.msg);
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

static void md_init(j_compress_ptr c)
{
    mem_dest *m = (mem_dest *)(void *)c->dest;
    m->pub.next_output_byte = m->buf;
    m->pub.free_in_buffer = m->cap;
}

static boolean md_empty(j_compress_ptr c)
{
    mem_dest *m = (mem_dest *)(void *)c->dest;
    /* called with the whole buffer full */
    size_t ncap = m->cap <= SIZE_MAX / 2 ? m->cap * 2 : 0;
    uint8_t *nb = ncap ? realloc(m->buf, ncap) : NULL;
    if (!nb)
        ERREXIT1(c, JERR_OUT_OF_MEMORY, 1);
    m->buf = nb;
    m->pub.next_output_byte = nb + m->cap;
    m->pub.free_in_buffer = ncap - m->cap;
    m->cap = ncap;
    return TRUE;
}

static void md_term(j_compress_ptr c)
{
    mem_dest *m = (mem_dest *)(void *)c->dest;
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
    for (int c = 1; c < 3; c++) {
        ci->comp_info[c].h_samp_factor = 1;
        ci->comp_info[c].v_samp_factor = 1;
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
        set_err(err, errlen, "cannot encode a %dx%d image as JPEG", w, h);
        return -1;
    }
    if (quality < 1 || quality > 100) {
        set_err(err, errlen, "JPEG quality %d is not in 1..100", quality);
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
        set_err(err, errlen, "out of memory");
        return -1;
    }
    int rc = jenc_run(&e, rgb, w, h, quality);
    if (e.created)
        jpeg_destroy_compress(&e.ci);
    if (rc != 0) {
        free(e.dest.buf);
        set_err(err, errlen, "%s", e.f.msg);
        return -1;
    }
    *out = e.dest.buf;
    *len = e.dest.len;
    return 0;
}

/* --- PNG --------------------------------------------------------------------------------------- */

/* libpng's simplified API (its own setjmp inside) read as 8-bit RGBA, then the alpha dropped: the
 * colour values are kept as they are, as PIL's convert("RGB") keeps them. */
static int png_decode(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, buf, len)) {
        set_err(err, errlen, "PNG: %s", im.message[0] ? im.message : "unreadable header");
        png_image_free(&im);
        return -1;
    }
    uint64_t px = (uint64_t)im.width * im.height;
    if (px == 0 || px > MAX_PIXELS) {
        set_err(err, errlen, "image too large: %ux%u is over 2^28 pixels", (unsigned)im.width, (unsigned)im.height);
        png_image_free(&im);
        return -1;
    }
    im.format = PNG_FORMAT_RGBA;
    /* 16-bit files without gAMA/sRGB are sRGB-encoded like 8-bit ones (libpng would assume linear) */
    im.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    uint8_t *p = malloc((size_t)px * 4);
    if (!p) {
        set_err(err, errlen, "out of memory for %ux%u pixels", (unsigned)im.width, (unsigned)im.height);
        png_image_free(&im);
        return -1;
    }
    if (!png_image_finish_read(&im, NULL, p, 0, NULL)) { /* frees im's state either way */
        set_err(err, errlen, "PNG: %s", im.message[0] ? im.message : "cannot decode");
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

/* --- torchvision's boxes --------------------------------------------------------------------- */

/* Python's round(): halves to even, which nearbyint does in the default rounding mode */
static double py_round(double x)
{
    return nearbyint(x);
}

dt_box dt_rrc_box(int W, int H, double smin, double smax, double rmin, double rmax, dt_rng *r)
{
    dt_box b = {0, 0, 0, 0};
    if (W <= 0 || H <= 0)
        return b;
    double area = (double)W * H;
    double lr0 = log(rmin), lr1 = log(rmax);
    for (int t = 0; t < 10; t++) {
        double target = area * (smin + (smax - smin) * dt_rng_uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * dt_rng_uniform(r));
        double w = py_round(sqrt(target * aspect)), h = py_round(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            b.w = (int)w;
            b.h = (int)h;
            b.y = (int)dt_rng_below(r, (uint64_t)(H - b.h) + 1); /* torch.randint(0, H - h + 1) */
            b.x = (int)dt_rng_below(r, (uint64_t)(W - b.w) + 1);
            return b;
        }
    }
    /* fallback: the centre crop of the whole image with its ratio clamped to the range */
    double lo = rmin < rmax ? rmin : rmax, hi = rmin < rmax ? rmax : rmin;
    double in_ratio = (double)W / H;
    double w = W, h = H;
    if (in_ratio < lo)
        h = py_round(w / lo);
    else if (in_ratio > hi)
        w = py_round(h * hi);
    b.w = w < 1 ? 1 : w > W ? W : (int)w;
    b.h = h < 1 ? 1 : h > H ? H : (int)h;
    b.y = (H - b.h) / 2;
    b.x = (W - b.w) / 2;
    return b;
}

/* one axis of dt_center_box: the crop [start, start + crop) of the axis resized from n to m samples,
 * mapped back to [b0, b1) in source samples (edges rounded to the nearest and clipped) */
static void center_axis(int n, int m, int crop, int *b0, int *len)
{
    double start = py_round((m - crop) / 2.0); /* CenterCrop: int(round((m - crop) / 2.0)) */
    double s0 = py_round(start * n / m), s1 = py_round((start + crop) * n / m);
    if (s0 < 0)
        s0 = 0;
    if (s1 > n)
        s1 = n;
    if (s1 < s0 + 1) { /* never empty */
        s1 = s0 + 1 > n ? n : s0 + 1;
        s0 = s1 - 1;
    }
    *b0 = (int)s0;
    *len = (int)(s1 - s0);
}

dt_box dt_center_box(int W, int H, int resize, int crop)
{
    dt_box b = {0, 0, 0, 0};
    if (W <= 0 || H <= 0 || resize <= 0 || crop <= 0)
        return b;
    /* Resize(resize): the shorter side becomes resize, the longer int(resize * long / short) */
    int nw, nh;
    if (W <= H) {
        nw = resize;
        nh = (int)((double)resize * H / W);
    } else {
        nh = resize;
        nw = (int)((double)resize * W / H);
    }
    center_axis(W, nw, crop, &b.x, &b.w);
    center_axis(H, nh, crop, &b.y, &b.h);
    return b;
}
