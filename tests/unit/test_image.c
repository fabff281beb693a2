/* test_image.c: data/image.h on inputs made here: a synthetic RGB pattern (gradients, a ripple and
 * sharp squares) encoded by dt_jpeg_encode; gray and CMYK JPEGs written with libjpeg directly; PNGs
 * written with libpng's simplified API. Checks probing, decoding, the resampler (every filter of
 * enum dt_filter) against double-precision filters written here, box decoding (every DCT scale,
 * every filter, gray, CMYK) against full decode + crop + resize, failures on damaged input, and the
 * torchvision boxes. tests/data/resample.sh checks the same pixel for pixel against PIL. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "data/image.h"
#include "tap.h"
#include "util/rng.h"

#define W0 512
#define H0 384

static dt_rng rng;

/* --- inputs ----------------------------------------------------------------------------------- */

static uint8_t clamp8(double v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5);
}

/* smooth gradients and a ripple, with three sharp-edged squares */
static uint8_t *make_pattern(int w, int h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * w + x) * 3;
            q[0] = clamp8(255.0 * x / (w - 1));
            q[1] = clamp8(255.0 * y / (h - 1));
            q[2] = clamp8(128 + 90 * sin(x / 37.0) * cos(y / 23.0));
            if ((x >= w / 5 && x < w / 5 + 40 && y >= h / 4 && y < h / 4 + 40)
                || (x >= w / 2 && x < w / 2 + 64 && y >= h / 2 && y < h / 2 + 30)) {
                q[0] = 250;
                q[1] = 20;
                q[2] = 30;
            }
            if (x >= 3 * w / 4 && x < 3 * w / 4 + 25 && y >= h / 8 && y < h / 8 + 25)
                q[0] = q[1] = q[2] = 0;
        }
    return p;
}

/* a JPEG from libjpeg directly, 1 component (gray), 3 (RGB in, YCbCr out) or 4 (CMYK), with options */
enum { J_ADOBE = 1, J_PROGRESSIVE = 2, J_444 = 4, J_422 = 8, J_RESTART = 16, J_ARITH = 32 };
static uint8_t *write_jpeg(const uint8_t *px, int w, int h, int comps, int flags, size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr); /* an error here exits: the test fails */
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&ci, &out, &n);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comps;
    ci.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 95, TRUE);
    if (comps == 4)
        ci.write_Adobe_marker = (flags & J_ADOBE) ? TRUE : FALSE;
    if (flags & (J_444 | J_422)) {
        ci.comp_info[0].h_samp_factor = (flags & J_422) ? 2 : 1;
        ci.comp_info[0].v_samp_factor = 1;
    }
    if (flags & J_PROGRESSIVE)
        jpeg_simple_progression(&ci);
    if (flags & J_RESTART)
        ci.restart_in_rows = 1;
    if (flags & J_ARITH)
        ci.arith_code = TRUE;
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)w * comps);
    while (ci.next_scanline < ci.image_height) {
        memcpy(row, px + (size_t)ci.next_scanline * w * comps, (size_t)w * comps);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    *len = n;
    return out;
}

static uint8_t *write_png(const void *px, int w, int h, uint32_t format, const void *colormap, int entries,
                          size_t *len)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = format;
    im.colormap_entries = (png_uint_32)entries;
    png_alloc_size_t n = 0;
    if (!png_image_write_to_memory(&im, NULL, &n, 0, px, 0, colormap))
        return NULL;
    uint8_t *mem = malloc(n);
    if (!png_image_write_to_memory(&im, mem, &n, 0, px, 0, colormap)) {
        free(mem);
        return NULL;
    }
    *len = n;
    return mem;
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return c ^ 0xFFFFFFFFu;
}

/* --- comparisons ------------------------------------------------------------------------------ */

static double mean_abs(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs(a[i] - b[i]);
    return s / (double)n;
}

static int max_abs(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++)
        if (abs(a[i] - b[i]) > m)
            m = abs(a[i] - b[i]);
    return m;
}

static uint8_t *crop(const uint8_t *src, int w, dt_box b)
{
    uint8_t *c = malloc((size_t)b.w * b.h * 3);
    for (int y = 0; y < b.h; y++)
        memcpy(c + (size_t)y * b.w * 3, src + ((size_t)(b.y + y) * w + b.x) * 3, (size_t)b.w * 3);
    return c;
}

/* The filters as PIL defines them, written out plainly: distance x in input pixels at scale 1 */
static double sinc_pi(double x)
{
    return x == 0 ? 1 : sin(M_PI * x) / (M_PI * x);
}

static double ref_kernel(int filter, double x, double *support)
{
    double ax = fabs(x);
    switch (filter) {
    case DT_FILTER_BOX: *support = 0.5; return x > -0.5 && x <= 0.5 ? 1 : 0;
    case DT_FILTER_HAMMING: *support = 1; return ax < 1 ? sinc_pi(x) * (0.54 + 0.46 * cos(M_PI * x)) : 0;
    case DT_FILTER_BICUBIC: /* Keys, a = -0.5 */
        *support = 2;
        return ax < 1 ? 1.5 * ax * ax * ax - 2.5 * ax * ax + 1
               : ax < 2 ? -0.5 * ax * ax * ax + 2.5 * ax * ax - 4 * ax + 2
                        : 0;
    case DT_FILTER_LANCZOS: *support = 3; return ax < 3 ? sinc_pi(x) * sinc_pi(x / 3) : 0;
    default: *support = 1; return ax < 1 ? 1 - ax : 0; /* bilinear: the triangle */
    }
}

/* A filter the plain way: every input sample weighted by the kernel (stretched by the scale when
 * shrinking) around the output sample's centre (o + 0.5) * in / out, normalised. span[2 o], span[2 o + 1]:
 * the first and one past the last input with a weight (only to save time). */
static double *axis_weights(int in, int out, int filter, int *span)
{
    double *wt = calloc((size_t)in * out, sizeof(double));
    double scale = (double)in / out, fs = scale > 1 ? scale : 1, support;
    for (int o = 0; o < out; o++) {
        double c = (o + 0.5) * scale, sum = 0;
        span[2 * o] = in;
        span[2 * o + 1] = 0;
        for (int i = 0; i < in; i++) {
            wt[(size_t)o * in + i] = ref_kernel(filter, (i + 0.5 - c) / fs, &support);
            sum += wt[(size_t)o * in + i];
            if (wt[(size_t)o * in + i] != 0) {
                span[2 * o] = i < span[2 * o] ? i : span[2 * o];
                span[2 * o + 1] = i + 1;
            }
        }
        for (int i = 0; i < in; i++)
            wt[(size_t)o * in + i] /= sum;
    }
    return wt;
}

/* both axes in double (the first pass clipped to 0..255 as PIL's 8-bit one is), rounded once */
static uint8_t *ref_resize(const uint8_t *src, int w, int h, int ow, int oh, int filter)
{
    int *sx = malloc((size_t)ow * 2 * sizeof(int)), *sy = malloc((size_t)oh * 2 * sizeof(int));
    double *wx = axis_weights(w, ow, filter, sx), *wy = axis_weights(h, oh, filter, sy);
    double *mid = calloc((size_t)ow * h * 3, sizeof(double));
    for (int y = 0; y < h; y++)
        for (int o = 0; o < ow; o++)
            for (int c = 0; c < 3; c++) {
                double *m = &mid[((size_t)y * ow + o) * 3 + c];
                for (int x = sx[2 * o]; x < sx[2 * o + 1]; x++)
                    *m += wx[(size_t)o * w + x] * src[((size_t)y * w + x) * 3 + c];
                *m = *m < 0 ? 0 : *m > 255 ? 255 : *m;
            }
    uint8_t *out = malloc((size_t)ow * oh * 3);
    for (int o = 0; o < oh; o++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) {
                double s = 0;
                for (int y = sy[2 * o]; y < sy[2 * o + 1]; y++)
                    s += wy[(size_t)o * h + y] * mid[((size_t)y * ow + x) * 3 + c];
                out[((size_t)o * ow + x) * 3 + c] = clamp8(s);
            }
    free(sx);
    free(sy);
    free(wx);
    free(wy);
    free(mid);
    return out;
}

/* nearest: output pixel o of an axis is input pixel floor((o + 0.5) * in / out); where that is an
 * integer up to rounding (PIL steps the position by adding in / out), either neighbour may be it */
static int nearest_ok(const uint8_t *src, int w, int h, const uint8_t *out, int ow, int oh)
{
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            double cx = (x + 0.5) * w / ow, cy = (y + 0.5) * h / oh;
            int x0 = (int)floor(cx - 1e-9), x1 = (int)floor(cx + 1e-9), y0 = (int)floor(cy - 1e-9),
                y1 = (int)floor(cy + 1e-9), hit = 0;
            for (int yy = y0; yy <= y1; yy++)
                for (int xx = x0; xx <= x1; xx++)
                    hit |= yy >= 0 && yy < h && xx >= 0 && xx < w
                           && memcmp(out + ((size_t)y * ow + x) * 3, src + ((size_t)yy * w + xx) * 3, 3) == 0;
            if (!hit)
                return 0;
        }
    return 1;
}

static int is_mirror(const uint8_t *a, const uint8_t *b, int w, int h)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (memcmp(a + ((size_t)y * w + x) * 3, b + ((size_t)y * w + (w - 1 - x)) * 3, 3) != 0)
                return 0;
    return 1;
}

/* the DCT scale dt_jpeg_decode_box picks (its documented rule: the box at least margin times the
 * output after scaling; never for nearest), for the report */
static int expected_denom(dt_box b, int ow, int oh, int filter)
{
    int m = filter == DT_FILTER_BILINEAR  ? 1
            : filter == DT_FILTER_NEAREST ? 0
            : filter == DT_FILTER_BOX     ? 4
                                          : 2;
    for (int d = 8; m && d > 1; d /= 2)
        if ((b.w + d - 1) / d >= m * ow && (b.h + d - 1) / d >= m * oh)
            return d;
    return 1;
}

/* decode_box against decode_rgb + crop + dt_image_resize of the same box with a filter; returns the
 * mean error */
static double box_vs_full_f(const uint8_t *jpg, size_t len, const uint8_t *full, int fw, dt_box b, int ow, int oh,
                            int filter, dt_image_scratch *s, int *maxerr, int *mirror_ok, int *rc)
{
    char err[256] = "";
    uint8_t *got = malloc((size_t)ow * oh * 3), *flipped = malloc((size_t)ow * oh * 3);
    uint8_t *want = malloc((size_t)ow * oh * 3);
    uint8_t *c = crop(full, fw, b);
    dt_image_resize(c, b.w, b.h, want, ow, oh, filter, s);
    *rc = dt_jpeg_decode_box(jpg, len, b, ow, oh, filter, 0, got, s, err, sizeof err);
    *rc |= dt_jpeg_decode_box(jpg, len, b, ow, oh, filter, 1, flipped, s, err, sizeof err);
    if (*rc)
        tap_diag("decode_box: %s", err);
    double e = mean_abs(got, want, (size_t)ow * oh * 3);
    *maxerr = max_abs(got, want, (size_t)ow * oh * 3);
    *mirror_ok = is_mirror(got, flipped, ow, oh);
    free(got);
    free(flipped);
    free(want);
    free(c);
    return e;
}

static double box_vs_full(const uint8_t *jpg, size_t len, const uint8_t *full, int fw, dt_box b, int ow, int oh,
                          dt_image_scratch *s, int *maxerr, int *mirror_ok, int *rc)
{
    return box_vs_full_f(jpg, len, full, fw, b, ow, oh, DT_FILTER_BILINEAR, s, maxerr, mirror_ok, rc);
}

/* --- the checks ------------------------------------------------------------------------------- */

static void test_roundtrip(const uint8_t *src, const uint8_t *jpg, size_t len)
{
    char err[256] = "";
    enum dt_image_kind kind = DT_IMAGE_PNG;
    int w = 0, h = 0;
    int rc = dt_image_probe(jpg, len, &kind, &w, &h, err, sizeof err);
    TAP_OK(rc == 0 && kind == DT_IMAGE_JPEG_RGB && w == W0 && h == H0, "probe: JPEG_RGB %dx%d (rc %d kind %d %s)", w,
           h, rc, (int)kind, err);
    int sw = 0, sh = 0;
    rc = dt_jpeg_size(jpg, len, &sw, &sh, err, sizeof err);
    TAP_OK(rc == 0 && sw == W0 && sh == H0, "dt_jpeg_size agrees: %dx%d", sw, sh);

    uint8_t *rgb = NULL;
    rc = dt_image_decode_rgb(jpg, len, &rgb, &w, &h, err, sizeof err);
    double e = rc == 0 ? mean_abs(rgb, src, (size_t)W0 * H0 * 3) : 999;
    TAP_OK(rc == 0 && w == W0 && h == H0 && e < 3.0, "decode_rgb of the quality-95 JPEG: mean abs error %.3f < 3",
           e);
    free(rgb);
}

static void test_resize(const uint8_t *src)
{
    dt_image_scratch s = {0};
    uint8_t *out = malloc((size_t)W0 * H0 * 3);
    uint8_t *flat = malloc((size_t)64 * 48 * 3);
    for (size_t i = 0; i < (size_t)64 * 48; i++) {
        flat[3 * i] = 200;
        flat[3 * i + 1] = 17;
        flat[3 * i + 2] = 99;
    }
    /* shrinking by a non-integer factor, by a large one, stretching, and one axis each way */
    static const int sizes[][4] = {{W0, H0, 200, 150}, {W0, H0, 37, 29}, {50, 40, 97, 83}, {W0, H0, 300, H0},
                                   {W0, H0, W0, 100}, {60, 50, 45, 130}};
    for (int f = 0; f < DT_FILTER_COUNT; f++) {
        const char *fn = dt_filter_name(f);
        int rc = dt_image_resize(src, W0, H0, out, W0, H0, f, &s);
        TAP_OK(rc == 0 && memcmp(out, src, (size_t)W0 * H0 * 3) == 0, "%s: resize to the same size returns the input",
               fn);
        int constant = 1;
        for (int k = 0; k < 2; k++) { /* 2x down, then 1.5x up */
            int ow = k ? 96 : 32, oh = k ? 72 : 24;
            constant &= dt_image_resize(flat, 64, 48, out, ow, oh, f, &s) == 0;
            for (size_t i = 0; i < (size_t)ow * oh && constant; i++)
                constant = out[3 * i] == 200 && out[3 * i + 1] == 17 && out[3 * i + 2] == 99;
        }
        TAP_OK(constant, "%s: a constant image stays constant (2x down, 1.5x up)", fn);
        int worst = 0, ok = 1;
        for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
            int w = sizes[t][0], h = sizes[t][1], ow = sizes[t][2], oh = sizes[t][3];
            uint8_t *in = w == W0 ? (uint8_t *)NULL : make_pattern(w, h);
            const uint8_t *img = in ? in : src;
            rc = dt_image_resize(img, w, h, out, ow, oh, f, &s);
            if (f == DT_FILTER_NEAREST) {
                ok &= rc == 0 && nearest_ok(img, w, h, out, ow, oh);
            } else {
                uint8_t *ref = ref_resize(img, w, h, ow, oh, f);
                int m = max_abs(out, ref, (size_t)ow * oh * 3);
                worst = m > worst ? m : worst;
                ok &= rc == 0 && m <= 1;
                free(ref);
            }
            free(in);
        }
        if (f == DT_FILTER_NEAREST)
            TAP_OK(ok, "nearest: 6 resizes, every pixel the source pixel under its centre");
        else
            TAP_OK(ok, "%s: 6 resizes match the double-precision filter: max error %d", fn, worst);
    }
    free(flat);

    /* the scratch grows once: the same call again does not reallocate */
    dt_image_resize(src, W0, H0, out, 200, 150, DT_FILTER_BILINEAR, &s);
    void *buf = s.buf;
    size_t cap = s.cap;
    dt_image_resize(src, W0, H0, out, 200, 150, DT_FILTER_BILINEAR, &s);
    TAP_OK(s.buf == buf && s.cap == cap, "resize reuses its scratch (%zu bytes)", cap);
    TAP_OK(dt_image_resize(src, 0, H0, out, 10, 10, DT_FILTER_BILINEAR, &s) == -1
               && dt_image_resize(src, W0, H0, out, 10, -1, DT_FILTER_BILINEAR, &s) == -1,
           "resize refuses empty sizes");
    TAP_OK(dt_image_resize(src, W0, H0, out, 10, 10, -1, &s) == -1
               && dt_image_resize(src, W0, H0, out, 10, 10, DT_FILTER_COUNT, &s) == -1,
           "resize refuses unknown filters");
    dt_image_scratch_free(&s);
    free(out);
}

/* torchvision's names; every filter through the box decode, against the full decode's crop resized */
static void test_filters(const uint8_t *jpg, size_t len)
{
    static const char *const names[] = {"bilinear", "nearest", "bicubic", "box", "hamming", "lanczos"};
    int ok = 1;
    for (int f = 0; f < DT_FILTER_COUNT; f++)
        ok &= strcmp(dt_filter_name(f), names[f]) == 0 && dt_filter_parse(names[f]) == f;
    TAP_OK(ok, "dt_filter_parse and dt_filter_name: torchvision's six names both ways");
    TAP_OK(dt_filter_parse("nearest-exact") == DT_FILTER_NEAREST && dt_filter_parse("Bilinear") == -1
               && dt_filter_parse("") == -1 && dt_filter_parse(NULL) == -1 && dt_filter_parse("lanczos3") == -1
               && strcmp(dt_filter_name(-1), "?") == 0 && strcmp(dt_filter_name(DT_FILTER_COUNT), "?") == 0,
           "nearest-exact is nearest; other names are -1, other values \"?\"");

    char err[256] = "";
    uint8_t *full = NULL, out[16 * 16 * 3];
    int w = 0, h = 0;
    dt_image_scratch s = {0};
    if (dt_image_decode_rgb(jpg, len, &full, &w, &h, err, sizeof err) != 0) {
        TAP_OK(0, "decode_rgb for the filter tests: %s", err);
        return;
    }
    TAP_OK(dt_jpeg_decode_box(jpg, len, (dt_box){0, 0, 64, 64}, 16, 16, DT_FILTER_COUNT, 0, out, &s, err, sizeof err)
                   == -1
               && strstr(err, "filter"),
           "decode_box refuses an unknown filter: %s", err);
    /* At scale 1 the box decode is the full decode's crop, resampled: the same pixels (the crop's
     * columns are decoded with context, so chroma upsampling sees no edge). Scaled, the IDCT's
     * averaging comes first: within 4 levels on average. Nearest never scales. */
    static const dt_box boxes[] = {
        {37, 21, 400, 300}, {16, 16, 61, 183}, {5, 200, 61, 183}, {W0 - 101, H0 - 77, 101, 77}};
    static const int outs[][2] = {{224, 224}, {150, 120}, {90, 70}, {40, 30}, {17, 40}};
    for (int f = 0; f < DT_FILTER_COUNT; f++) {
        int exact = 1, close = 1, mirror_all = 1, n1 = 0, ns = 0, worst1 = 0;
        double worst_mean = 0;
        for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++)
            for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
                int ow = outs[k][0], oh = outs[k][1], maxerr = 0, mirror = 0, rc = 0;
                int d = expected_denom(boxes[i], ow, oh, f);
                double e = box_vs_full_f(jpg, len, full, w, boxes[i], ow, oh, f, &s, &maxerr, &mirror, &rc);
                mirror_all &= rc == 0 && mirror;
                if (d == 1) {
                    exact &= rc == 0 && maxerr == 0;
                    worst1 = maxerr > worst1 ? maxerr : worst1;
                    n1++;
                } else {
                    close &= rc == 0 && e < 4.0;
                    worst_mean = e > worst_mean ? e : worst_mean;
                    ns++;
                }
            }
        TAP_OK(exact && close && mirror_all && (f != DT_FILTER_NEAREST || ns == 0),
               "%s decode_box: %d boxes at scale 1 exact (max error %d), %d DCT-scaled within mean %.3f < 4, flips "
               "mirror",
               dt_filter_name(f), n1, worst1, ns, worst_mean);
    }
    free(full);
    dt_image_scratch_free(&s);
}

static void test_decode_box(const uint8_t *jpg, size_t len)
{
    char err[256] = "";
    uint8_t *full = NULL;
    int w = 0, h = 0;
    if (dt_image_decode_rgb(jpg, len, &full, &w, &h, err, sizeof err) != 0) {
        TAP_OK(0, "decode_rgb for the box tests: %s", err);
        return;
    }
    dt_image_scratch s = {0};
    /* One box, outputs that make each DCT scale the largest that keeps the box >= the output.
     * Tolerances: at scale 1 only the resampling differs from the reference in fractions (mean < 1);
     * at 1/2..1/8 libjpeg's scaled IDCT is itself a block average of 2..8 pixels, so the box is
     * resampled from pre-averaged pixels (a slightly wider, box-shaped filter): mean < 4 levels. */
    dt_box b = {37, 21, 400, 300};
    static const int outs[][2] = {{224, 224}, {150, 120}, {90, 70}, {40, 30}, {400, 300}};
    for (size_t t = 0; t < sizeof outs / sizeof outs[0]; t++) {
        int ow = outs[t][0], oh = outs[t][1], maxerr = 0, mirror = 0, rc = 0;
        int d = expected_denom(b, ow, oh, DT_FILTER_BILINEAR);
        double e = box_vs_full(jpg, len, full, w, b, ow, oh, &s, &maxerr, &mirror, &rc);
        double tol = d == 1 ? 1.0 : 4.0;
        TAP_OK(rc == 0 && e < tol, "decode_box %dx%d -> %dx%d (DCT scale 1/%d): mean abs error %.3f < %.0f (max %d)", b.w,
               b.h, ow, oh, d, e, tol, maxerr);
        TAP_OK(rc == 0 && mirror, "decode_box 1/%d: flip is the exact mirror", d);
    }
    /* boxes touching the edges, odd positions, a box sticking out of the image */
    static const dt_box more[] = {{0, 0, W0, H0}, {W0 - 101, H0 - 77, 101, 77}, {5, 200, 61, 183}, {255, 1, 3, 2}};
    for (size_t t = 0; t < sizeof more / sizeof more[0]; t++) {
        int maxerr = 0, mirror = 0, rc = 0;
        double e = box_vs_full(jpg, len, full, w, more[t], 56, 48, &s, &maxerr, &mirror, &rc);
        TAP_OK(rc == 0 && e < 4.0 && mirror, "decode_box %d,%d %dx%d -> 56x48: mean abs error %.3f < 4 (max %d)",
               more[t].x, more[t].y, more[t].w, more[t].h, e, maxerr);
    }
    uint8_t *a = malloc(64 * 64 * 3), *c = malloc(64 * 64 * 3);
    dt_box out_of = {W0 - 50, H0 - 40, 100, 100}, clipped = {W0 - 50, H0 - 40, 50, 40};
    int rc1 = dt_jpeg_decode_box(jpg, len, out_of, 64, 64, DT_FILTER_BILINEAR, 0, a, &s, err, sizeof err);
    int rc2 = dt_jpeg_decode_box(jpg, len, clipped, 64, 64, DT_FILTER_BILINEAR, 0, c, &s, err, sizeof err);
    TAP_OK(rc1 == 0 && rc2 == 0 && memcmp(a, c, 64 * 64 * 3) == 0, "a box partly outside is clipped to the image");
    dt_box outside = {W0 + 10, 0, 50, 50};
    err[0] = '\0';
    int rc = dt_jpeg_decode_box(jpg, len, outside, 64, 64, DT_FILTER_BILINEAR, 0, a, &s, err, sizeof err);
    TAP_OK(rc == -1 && err[0], "a box outside the image is an error: %s", err);

    /* the loader's steady state: no reallocation once the scratch is big enough */
    dt_box vb = dt_center_box(W0, H0, 256, 224);
    uint8_t *o = malloc(224 * 224 * 3);
    dt_jpeg_decode_box(jpg, len, vb, 224, 224, DT_FILTER_BILINEAR, 0, o, &s, err, sizeof err);
    void *buf = s.buf;
    size_t cap = s.cap;
    rc = dt_jpeg_decode_box(jpg, len, vb, 224, 224, DT_FILTER_BILINEAR, 1, o, &s, err, sizeof err);
    TAP_OK(rc == 0 && s.buf == buf && s.cap == cap, "decode_box reuses its scratch");
    free(o);
    free(a);
    free(c);
    dt_image_scratch_free(&s);
    free(full);
}

static void test_gray_cmyk(const uint8_t *src)
{
    char err[256] = "";
    int w = 160, h = 120;
    dt_image_scratch s = {0};
    /* gray: the green channel of the pattern */
    uint8_t *g = malloc((size_t)w * h);
    for (int i = 0; i < w * h; i++)
        g[i] = (uint8_t)((src[((size_t)(i / w) * W0 + i % w) * 3 + 1] + src[((size_t)(i / w) * W0 + i % w) * 3 + 2]) / 2);
    size_t glen = 0;
    uint8_t *gj = write_jpeg(g, w, h, 1, 0, &glen);
    enum dt_image_kind kind = DT_IMAGE_PNG;
    int pw = 0, ph = 0;
    int rc = dt_image_probe(gj, glen, &kind, &pw, &ph, err, sizeof err);
    TAP_OK(rc == 0 && kind == DT_IMAGE_JPEG_GRAY && pw == w && ph == h, "gray JPEG probes as JPEG_GRAY %dx%d", pw, ph);
    uint8_t *rgb = NULL;
    rc = dt_image_decode_rgb(gj, glen, &rgb, &pw, &ph, err, sizeof err);
    int equal = rc == 0, close = 0;
    double e = 0;
    if (rc == 0) {
        for (int i = 0; i < w * h && equal; i++)
            equal = rgb[3 * i] == rgb[3 * i + 1] && rgb[3 * i] == rgb[3 * i + 2];
        for (int i = 0; i < w * h; i++)
            e += abs(rgb[3 * i] - g[i]);
        e /= w * h;
        close = e < 2.0;
    }
    TAP_OK(equal && close, "gray JPEG decodes to R = G = B, mean abs error %.3f from the source", e);
    dt_box gb = {13, 7, 120, 100};
    int maxerr = 0, mirror = 0;
    double be = rc == 0 ? box_vs_full(gj, glen, rgb, w, gb, 50, 40, &s, &maxerr, &mirror, &rc) : 999;
    TAP_OK(rc == 0 && be < 4.0 && mirror, "gray decode_box (1/%d): mean abs error %.3f (max %d)",
           expected_denom(gb, 50, 40, DT_FILTER_BILINEAR), be, maxerr);
    be = rc == 0 ? box_vs_full(gj, glen, rgb, w, gb, 100, 90, &s, &maxerr, &mirror, &rc) : 999;
    TAP_OK(rc == 0 && be < 1.0 && mirror, "gray decode_box (1/%d): mean abs error %.3f (max %d)",
           expected_denom(gb, 100, 90, DT_FILTER_BILINEAR), be, maxerr);
    free(rgb);
    free(gj);
    free(g);

    /* CMYK: smooth inks from the pattern */
    uint8_t *cm = malloc((size_t)w * h * 4);
    for (int i = 0; i < w * h; i++) {
        const uint8_t *p = src + ((size_t)(i / w) * W0 + i % w) * 3;
        cm[4 * i] = p[0];
        cm[4 * i + 1] = p[1];
        cm[4 * i + 2] = p[2];
        cm[4 * i + 3] = (uint8_t)(60 + (i % w));
    }
    for (int adobe = 0; adobe <= 1; adobe++) {
        size_t clen = 0;
        uint8_t *cj = write_jpeg(cm, w, h, 4, adobe ? J_ADOBE : 0, &clen);
        rc = dt_image_probe(cj, clen, &kind, &pw, &ph, err, sizeof err);
        TAP_OK(rc == 0 && kind == DT_IMAGE_JPEG_CMYK && pw == w && ph == h, "CMYK JPEG (%s Adobe marker) probes as CMYK",
               adobe ? "with" : "without");
        rc = dt_image_decode_rgb(cj, clen, &rgb, &pw, &ph, err, sizeof err);
        e = 999;
        if (rc == 0) {
            /* what was written is what libjpeg hands back (lossy); the marker decides the convention */
            e = 0;
            for (int i = 0; i < w * h; i++)
                for (int c = 0; c < 3; c++) {
                    double ink = cm[4 * i + c], k = cm[4 * i + 3];
                    double want = adobe ? ink * k / 255 : (255 - ink) * (255 - k) / 255;
                    e += fabs(rgb[3 * i + c] - want);
                }
            e /= w * h * 3;
        }
        TAP_OK(rc == 0 && e < 3.0, "CMYK JPEG (%s Adobe marker) decodes to the expected RGB: mean abs error %.3f",
               adobe ? "with" : "without", e);
        be = rc == 0 ? box_vs_full(cj, clen, rgb, w, gb, 50, 40, &s, &maxerr, &mirror, &rc) : 999;
        TAP_OK(rc == 0 && be < 4.0 && mirror, "CMYK decode_box (1/%d): mean abs error %.3f (max %d)",
               expected_denom(gb, 50, 40, DT_FILTER_BILINEAR), be, maxerr);
        be = rc == 0 ? box_vs_full(cj, clen, rgb, w, gb, 100, 90, &s, &maxerr, &mirror, &rc) : 999;
        TAP_OK(rc == 0 && be < 1.0 && mirror, "CMYK decode_box (1/%d): mean abs error %.3f (max %d)",
               expected_denom(gb, 100, 90, DT_FILTER_BILINEAR), be, maxerr);
        free(rgb);
        free(cj);
    }
    free(cm);
    dt_image_scratch_free(&s);
}

/* other ways of writing a colour JPEG: decoded, box-decoded (1/2 and 1/1) and truncated like the
 * 4:2:0 baseline ones */
static void test_flavours(const uint8_t *src)
{
    static const struct {
        int flags;
        const char *name;
    } fl[] = {{J_PROGRESSIVE, "progressive"}, {J_444, "4:4:4"}, {J_422, "4:2:2"}, {J_RESTART, "restart markers"},
#ifdef C_ARITH_CODING_SUPPORTED
              {J_ARITH, "arithmetic-coded"},
#endif
              {J_PROGRESSIVE | J_444, "progressive 4:4:4"}};
    dt_image_scratch s = {0};
    for (size_t t = 0; t < sizeof fl / sizeof fl[0]; t++) {
        char err[256] = "";
        size_t len = 0;
        uint8_t *j = write_jpeg(src, W0, H0, 3, fl[t].flags, &len);
        enum dt_image_kind kind = DT_IMAGE_PNG;
        int w = 0, h = 0;
        uint8_t *rgb = NULL;
        int rc = dt_image_probe(j, len, &kind, &w, &h, err, sizeof err);
        rc |= dt_image_decode_rgb(j, len, &rgb, &w, &h, err, sizeof err);
        double e = rc == 0 ? mean_abs(rgb, src, (size_t)W0 * H0 * 3) : 999;
        TAP_OK(rc == 0 && kind == DT_IMAGE_JPEG_RGB && e < 3.0, "%s JPEG: probe and decode (mean abs error %.3f) %s",
               fl[t].name, e, err);
        dt_box b = {77, 45, 300, 260};
        int maxerr = 0, mirror = 0;
        double be = rc == 0 ? box_vs_full(j, len, rgb, W0, b, 140, 120, &s, &maxerr, &mirror, &rc) : 999;
        TAP_OK(rc == 0 && be < 4.0 && mirror, "%s decode_box (1/%d): mean abs error %.3f (max %d)", fl[t].name,
               expected_denom(b, 140, 120, DT_FILTER_BILINEAR), be, maxerr);
        be = rc == 0 ? box_vs_full(j, len, rgb, W0, b, 200, 180, &s, &maxerr, &mirror, &rc) : 999;
        TAP_OK(rc == 0 && be < 1.0 && mirror, "%s decode_box (1/%d): mean abs error %.3f (max %d)", fl[t].name,
               expected_denom(b, 200, 180, DT_FILTER_BILINEAR), be, maxerr);
        err[0] = '\0';
        rc = dt_image_probe(j, len / 2, &kind, &w, &h, err, sizeof err);
        TAP_OK(rc == -1 && err[0], "%s JPEG truncated at half: probe fails: %s", fl[t].name, err);
        free(rgb);
        free(j);
    }
    dt_image_scratch_free(&s);
}

static void check_png(const char *what, const uint8_t *png, size_t len, const uint8_t *want, int w, int h)
{
    char err[256] = "";
    enum dt_image_kind kind = DT_IMAGE_JPEG_RGB;
    int pw = 0, ph = 0;
    int rc = dt_image_probe(png, len, &kind, &pw, &ph, err, sizeof err);
    TAP_OK(png && rc == 0 && kind == DT_IMAGE_PNG && pw == w && ph == h, "%s PNG probes as PNG %dx%d %s", what, pw,
           ph, err);
    uint8_t *rgb = NULL;
    rc = dt_image_decode_rgb(png, len, &rgb, &pw, &ph, err, sizeof err);
    TAP_OK(rc == 0 && pw == w && ph == h && memcmp(rgb, want, (size_t)w * h * 3) == 0,
           "%s PNG decodes to the exact pixels %s", what, err);
    free(rgb);
}

static void test_png(const uint8_t *src)
{
    int w = 97, h = 61;
    uint8_t *rgb = crop(src, W0, (dt_box){300, 150, w, h});
    size_t len = 0;
    uint8_t *png = write_png(rgb, w, h, PNG_FORMAT_RGB, NULL, 0, &len);
    check_png("RGB", png, len, rgb, w, h);
    free(png);

    /* RGBA with every kind of alpha: the colours come back as they are (alpha ignored, as PIL) */
    uint8_t *rgba = malloc((size_t)w * h * 4);
    for (int i = 0; i < w * h; i++) {
        memcpy(rgba + 4 * i, rgb + 3 * i, 3);
        rgba[4 * i + 3] = (uint8_t)(i * 7);
    }
    png = write_png(rgba, w, h, PNG_FORMAT_RGBA, NULL, 0, &len);
    check_png("RGBA", png, len, rgb, w, h);
    free(png);
    free(rgba);

    uint8_t *gray = malloc((size_t)w * h), *gray3 = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++) {
        gray[i] = rgb[3 * i + 1];
        memset(gray3 + 3 * i, gray[i], 3);
    }
    png = write_png(gray, w, h, PNG_FORMAT_GRAY, NULL, 0, &len);
    check_png("gray", png, len, gray3, w, h);
    free(png);

    /* palette: 16 colours, indices from the pattern */
    uint8_t cmap[16 * 3], *idx = malloc((size_t)w * h), *pal3 = malloc((size_t)w * h * 3);
    for (int k = 0; k < 16; k++) {
        cmap[3 * k] = (uint8_t)(k * 17);
        cmap[3 * k + 1] = (uint8_t)(255 - k * 13);
        cmap[3 * k + 2] = (uint8_t)((k * 71) & 255);
    }
    for (int i = 0; i < w * h; i++) {
        idx[i] = (uint8_t)(rgb[3 * i] >> 4);
        memcpy(pal3 + 3 * i, cmap + 3 * idx[i], 3);
    }
    png = write_png(idx, w, h, PNG_FORMAT_RGB_COLORMAP, cmap, 16, &len);
    check_png("palette", png, len, pal3, w, h);

    /* damage: a flipped byte in the image data (CRC mismatch) */
    char err[256] = "";
    uint8_t *bad = malloc(len);
    memcpy(bad, png, len);
    bad[len - 20] ^= 0x10; /* inside IDAT (the file ends with IDAT's tail, its CRC and IEND) */
    uint8_t *out = NULL;
    int pw = 0, ph = 0;
    enum dt_image_kind kind;
    int rc = dt_image_probe(bad, len, &kind, &pw, &ph, err, sizeof err);
    TAP_OK(rc == -1 && err[0], "PNG with a flipped byte: probe fails: %s", err);
    err[0] = '\0';
    rc = dt_image_decode_rgb(bad, len, &out, &pw, &ph, err, sizeof err);
    TAP_OK(rc == -1 && err[0] && !out, "PNG with a flipped byte: decode fails: %s", err);

    /* a flipped bit in IHDR (interlace 0 -> 1, valid in itself): only the CRC shows it */
    memcpy(bad, png, len);
    bad[28] ^= 0x01;
    err[0] = '\0';
    rc = dt_image_probe(bad, len, &kind, &pw, &ph, err, sizeof err);
    TAP_OK(rc == -1 && err[0], "PNG with a bad IHDR CRC: probe fails: %s", err);

    /* a header claiming 60000 x 60000 (with a correct CRC): refused before allocating */
    memcpy(bad, png, len);
    bad[16] = 0, bad[17] = 0, bad[18] = 0xEA, bad[19] = 0x60; /* IHDR width */
    bad[20] = 0, bad[21] = 0, bad[22] = 0xEA, bad[23] = 0x60; /* IHDR height */
    uint32_t crc = crc32_of(bad + 12, 17);                       /* "IHDR" + 13 bytes of data */
    bad[29] = (uint8_t)(crc >> 24), bad[30] = (uint8_t)(crc >> 16), bad[31] = (uint8_t)(crc >> 8), bad[32] = (uint8_t)crc;
    err[0] = '\0';
    rc = dt_image_probe(bad, len, &kind, &pw, &ph, err, sizeof err);
    TAP_OK(rc == -1 && strstr(err, "too large"), "PNG claiming 60000x60000 is refused: %s", err);
    free(bad);
    free(png);
    free(idx);
    free(pal3);
    free(gray);
    free(gray3);
    free(rgb);
}

/* every entry point on one input: 0, or -1 with a reason; returns 1 when that holds */
static int survives(const uint8_t *buf, size_t len, dt_image_scratch *s, int *failed)
{
    char err[256];
    enum dt_image_kind kind;
    int w, h, ok = 1;
    uint8_t *rgb = NULL, out[32 * 24 * 3];
    err[0] = '\0';
    int rc = dt_image_probe(buf, len, &kind, &w, &h, err, sizeof err);
    ok &= rc == 0 || (rc == -1 && err[0]);
    *failed = rc != 0;
    err[0] = '\0';
    rc = dt_image_decode_rgb(buf, len, &rgb, &w, &h, err, sizeof err);
    ok &= rc == 0 || (rc == -1 && err[0] && !rgb);
    free(rgb);
    err[0] = '\0';
    rc = dt_jpeg_decode_box(buf, len, (dt_box){3, 2, 40, 30}, 32, 24, DT_FILTER_BILINEAR, 1, out, s, err, sizeof err);
    ok &= rc == 0 || (rc == -1 && err[0]);
    err[0] = '\0';
    rc = dt_jpeg_size(buf, len, &w, &h, err, sizeof err);
    ok &= rc == 0 || (rc == -1 && err[0]);
    return ok;
}

static void test_failures(const uint8_t *jpg, size_t len)
{
    char err[256];
    enum dt_image_kind kind;
    int w, h, failed;
    uint8_t *rgb = NULL, out[64 * 64 * 3];
    dt_image_scratch s = {0};

    err[0] = '\0';
    TAP_OK(dt_image_probe(jpg, 0, &kind, &w, &h, err, sizeof err) == -1 && err[0], "zero bytes: %s", err);
    err[0] = '\0';
    TAP_OK(dt_jpeg_decode_box(jpg, 0, (dt_box){0, 0, 8, 8}, 8, 8, DT_FILTER_BILINEAR, 0, out, &s, err, sizeof err) == -1
               && err[0],
           "zero bytes, decode_box: %s", err);
    uint8_t noise[100];
    for (int i = 0; i < 100; i++)
        noise[i] = (uint8_t)dt_rng_next(&rng);
    err[0] = '\0';
    TAP_OK(dt_image_probe(noise, 100, &kind, &w, &h, err, sizeof err) == -1 && err[0], "100 random bytes: %s", err);
    noise[0] = 0xFF, noise[1] = 0xD8;
    TAP_OK(survives(noise, 100, &s, &failed) && failed, "100 random bytes after a JPEG SOI fail cleanly");

    /* truncated at half: must be an error, not a grey-filled success */
    err[0] = '\0';
    TAP_OK(dt_image_probe(jpg, len / 2, &kind, &w, &h, err, sizeof err) == -1 && err[0],
           "JPEG truncated at half: probe fails: %s", err);
    err[0] = '\0';
    TAP_OK(dt_image_decode_rgb(jpg, len / 2, &rgb, &w, &h, err, sizeof err) == -1 && err[0] && !rgb,
           "JPEG truncated at half: decode_rgb fails: %s", err);
    err[0] = '\0';
    TAP_OK(dt_jpeg_decode_box(jpg, len / 2, (dt_box){0, 0, W0, H0}, 64, 64, DT_FILTER_BILINEAR, 0, out, &s, err,
                              sizeof err) == -1
               && err[0],
           "JPEG truncated at half: decode_box of the whole image fails: %s", err);

    /* a byte of the entropy-coded data turned into 0xFF (followed by a byte that is neither 0x00
     * nor 0xFF): the decoder meets a marker in mid-scan, which it always reports */
    uint8_t *bad = malloc(len);
    memcpy(bad, jpg, len);
    size_t at = len * 3 / 5;
    while (bad[at + 1] == 0x00 || bad[at + 1] == 0xFF || bad[at] == 0xFF)
        at++;
    bad[at] = 0xFF;
    err[0] = '\0';
    TAP_OK(dt_image_probe(bad, len, &kind, &w, &h, err, sizeof err) == -1 && err[0],
           "JPEG with a corrupted entropy-coded byte: probe fails: %s", err);
    err[0] = '\0';
    TAP_OK(dt_jpeg_decode_box(bad, len, (dt_box){0, 0, W0, H0}, 64, 64, DT_FILTER_BILINEAR, 0, out, &s, err,
                              sizeof err) == -1
               && err[0],
           "JPEG with a corrupted entropy-coded byte: decode_box fails: %s", err);
    /* plain bit flips in the entropy-coded data: libjpeg notices most but not all (a flip can leave
     * a valid code sequence), so this is reported, not checked */
    int noticed = 0, tries = 0;
    for (size_t pos = len / 4; pos < len - 16; pos += len / 23, tries++) {
        memcpy(bad, jpg, len);
        bad[pos] ^= 0x04;
        noticed += dt_image_probe(bad, len, &kind, &w, &h, err, sizeof err) != 0;
    }
    tap_diag("single bit flips in the scan: %d of %d made probe fail", noticed, tries);

    /* a header claiming 60000 x 60000: refused with a reason, nothing allocated for it */
    memcpy(bad, jpg, len);
    size_t sof = 2;
    while (sof + 9 < len && !(bad[sof] == 0xFF && bad[sof + 1] == 0xC0))
        sof++;
    bad[sof + 5] = 0xEA, bad[sof + 6] = 0x60, bad[sof + 7] = 0xEA, bad[sof + 8] = 0x60;
    err[0] = '\0';
    int rc = dt_image_probe(bad, len, &kind, &w, &h, err, sizeof err);
    TAP_OK(rc == -1 && strstr(err, "too large"), "JPEG claiming 60000x60000: probe refuses: %s", err);
    err[0] = '\0';
    rc = dt_jpeg_decode_box(bad, len, (dt_box){0, 0, 100, 100}, 64, 64, DT_FILTER_BILINEAR, 0, out, &s, err,
                            sizeof err);
    TAP_OK(rc == -1 && strstr(err, "too large"), "JPEG claiming 60000x60000: decode_box refuses: %s", err);
    rc = dt_jpeg_size(bad, len, &w, &h, err, sizeof err);
    TAP_OK(rc == 0 && w == 60000 && h == 60000, "dt_jpeg_size reads the claim: %dx%d", w, h);

    /* fuzzing: random damage to a small JPEG (and bits of it), every entry point, must never crash */
    uint8_t *small = make_pattern(64, 48), *sj = NULL;
    size_t slen = 0;
    dt_jpeg_encode(small, 64, 48, 90, &sj, &slen, err, sizeof err);
    uint8_t *m = malloc(slen);
    int all_ok = 1, nfail = 0, n = 0;
    for (; n < 400; n++) {
        memcpy(m, sj, slen);
        int k = 1 + (int)dt_rng_below(&rng, 4);
        for (int i = 0; i < k; i++)
            m[dt_rng_below(&rng, slen)] = (uint8_t)dt_rng_next(&rng);
        size_t l = n % 5 == 0 ? 1 + dt_rng_below(&rng, slen) : slen;
        all_ok &= survives(m, l, &s, &failed);
        nfail += failed;
    }
    TAP_OK(all_ok, "%d randomly damaged JPEGs: every call gave 0 or -1 with a reason (%d refused by probe)", n, nfail);
    free(m);
    free(sj);
    free(small);
    free(bad);
    dt_image_scratch_free(&s);
}

static void test_encode_args(const uint8_t *src)
{
    char err[256] = "";
    uint8_t *out = NULL;
    size_t len = 0;
    TAP_OK(dt_jpeg_encode(src, W0, H0, 0, &out, &len, err, sizeof err) == -1 && err[0] && !out,
           "encode refuses quality 0: %s", err);
    err[0] = '\0';
    TAP_OK(dt_jpeg_encode(src, 0, H0, 90, &out, &len, err, sizeof err) == -1 && err[0] && !out,
           "encode refuses width 0: %s", err);
    /* baseline 4:2:0: SOF0, luma sampled 2x2, chroma 1x1 */
    int rc = dt_jpeg_encode(src, W0, H0, 75, &out, &len, err, sizeof err);
    size_t sof = 2;
    while (rc == 0 && sof + 17 < len && !(out[sof] == 0xFF && (out[sof + 1] & 0xF0) == 0xC0 && out[sof + 1] != 0xC4))
        sof++;
    TAP_OK(rc == 0 && out[sof + 1] == 0xC0 && out[sof + 9] == 3 && out[sof + 11] == 0x22 && out[sof + 14] == 0x11
               && out[sof + 17] == 0x11,
           "encode writes baseline 4:2:0 (SOF 0x%02x)", rc == 0 ? out[sof + 1] : 0);
    free(out);
}

static void test_boxes(void)
{
    dt_rng a, b;
    dt_rng_seed(&a, 1234, 7);
    dt_rng_seed(&b, 1234, 7);
    int W = 500, H = 375, inside = 1, area_ok = 1, ratio_ok = 1, same = 1;
    double fmin = 2, fmax = 0, rlo = 9, rhi = 0;
    for (int i = 0; i < 10000; i++) {
        dt_box x = dt_rrc_box(W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &a);
        dt_box y = dt_rrc_box(W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &b);
        same &= memcmp(&x, &y, sizeof x) == 0;
        inside &= x.x >= 0 && x.y >= 0 && x.w > 0 && x.h > 0 && x.x + x.w <= W && x.y + x.h <= H;
        /* w and h are each rounded, so the bounds hold for the unrounded sides within 0.5 */
        area_ok &= (x.w + 0.5) * (x.h + 0.5) >= 0.08 * W * H && (x.w - 0.5) * (x.h - 0.5) <= (double)W * H;
        ratio_ok &= (x.w + 0.5) / (x.h - 0.5) >= 0.75 && (x.w - 0.5) / (x.h + 0.5) <= 4.0 / 3;
        double f = (double)x.w * x.h / (W * H), r = (double)x.w / x.h;
        fmin = f < fmin ? f : fmin;
        fmax = f > fmax ? f : fmax;
        rlo = r < rlo ? r : rlo;
        rhi = r > rhi ? r : rhi;
    }
    TAP_OK(inside, "10000 RandomResizedCrop boxes on 500x375 lie inside the image");
    TAP_OK(area_ok && fmin < 0.09 && fmax > 0.9, "area fractions within [0.08, 1] (seen %.4f..%.4f)", fmin, fmax);
    TAP_OK(ratio_ok && rlo < 0.76 && rhi > 1.32, "aspect ratios within [3/4, 4/3] (seen %.4f..%.4f)", rlo, rhi);
    TAP_OK(same, "the same seed gives the same boxes");

    /* 2000x10: every try needs h >= sqrt(0.08 * 20000 * 3/4) = 34.6 > 10, so the fallback: the ratio
     * 200 is clamped to 4/3: h = 10, w = round(13.33) = 13, centred: x = (2000 - 13) // 2 = 993 */
    dt_box f = dt_rrc_box(2000, 10, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &a);
    TAP_OK(f.x == 993 && f.y == 0 && f.w == 13 && f.h == 10, "fallback on 2000x10: %d,%d %dx%d (want 993,0 13x10)", f.x,
           f.y, f.w, f.h);
    f = dt_rrc_box(10, 2000, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &a);
    TAP_OK(f.x == 0 && f.y == 993 && f.w == 10 && f.h == 13, "fallback on 10x2000: %d,%d %dx%d (want 0,993 10x13)", f.x,
           f.y, f.w, f.h);

    /* Resize(256) + CenterCrop(224) on 500x375: the short side 375 -> 256, the long side
     * int(256 * 500 / 375) = int(341.33) = 341. Crop top = round((256 - 224) / 2) = 16, left =
     * round((341 - 224) / 2) = round(58.5) = 58 (Python rounds halves to even). Back in source pixels
     * (x * 500 / 341, y * 375 / 256, edges rounded): left 58 -> 85.04 -> 85, right 282 -> 413.49 -> 413,
     * top 16 -> 23.44 -> 23, bottom 240 -> 351.56 -> 352: the box 85,23 328x329. */
    dt_box c = dt_center_box(500, 375, 256, 224);
    TAP_OK(c.x == 85 && c.y == 23 && c.w == 328 && c.h == 329, "center box of 500x375: %d,%d %dx%d (want 85,23 328x329)",
           c.x, c.y, c.w, c.h);
    c = dt_center_box(375, 500, 256, 224);
    TAP_OK(c.x == 23 && c.y == 85 && c.w == 329 && c.h == 328, "center box of 375x500: %d,%d %dx%d (want 23,85 329x328)",
           c.x, c.y, c.w, c.h);
    c = dt_center_box(256, 256, 256, 224); /* no resize: the crop itself, 16 from each side */
    TAP_OK(c.x == 16 && c.y == 16 && c.w == 224 && c.h == 224, "center box of 256x256: %d,%d %dx%d (want 16,16 224x224)",
           c.x, c.y, c.w, c.h);
}

int main(void)
{
    dt_rng_seed(&rng, 42, 0);
    uint8_t *src = make_pattern(W0, H0);
    char err[256] = "";
    uint8_t *jpg = NULL;
    size_t len = 0;
    int rc = dt_jpeg_encode(src, W0, H0, 95, &jpg, &len, err, sizeof err);
    TAP_OK(rc == 0 && len > 1000, "encode %dx%d at quality 95: %zu bytes %s", W0, H0, len, err);
    if (rc != 0)
        return tap_done();
    test_roundtrip(src, jpg, len);
    test_resize(src);
    test_decode_box(jpg, len);
    test_filters(jpg, len);
    test_gray_cmyk(src);
    test_flavours(src);
    test_png(src);
    test_failures(jpg, len);
    test_encode_args(src);
    test_boxes();
    free(jpg);
    free(src);
    return tap_done();
}
