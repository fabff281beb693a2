/* svg.c: standalone SVG line charts (contract in svg.h).
 *
 * Layout, in a 720 x 440 viewBox: the title on top, the plot area in the middle (grid, series
 * clipped to it, then the axis lines and tick marks over them), tick and axis labels to its left
 * and below, the legend to its right. Margins follow the lengths of the texts, estimated at 0.6 em
 * per character (no font metrics here), so long tick labels or legend entries shrink the plot
 * rather than overflow. The document is built in memory, then written by report/output.h (atomically
 * over a regular file, through a link to its target, straight into a FIFO or device). Every number is printed in a fixed format ("%.2f" for
 * coordinates; for tick labels, the step's decimals, or %g beyond 1e6 and below 1e-5), with no
 * time or random id anywhere, so the bytes depend on the input only. */
#include "config.h"

#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/output.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

#define MAX_ABS 1e300 /* larger values would overflow the tick arithmetic */

enum {
    W = 720,
    H = 440,
    MAX_TICKS = 8,          /* 4 to 8 ticks per linear axis on data limits */
    MARKER_MAX_POINTS = 60, /* more finite points than this: the line alone */
    LEGEND_MAX_CHARS = 28,  /* longer legend entries end in an ellipsis */
    LOG_PLAIN_MAX_EXP = 16, /* log ticks up to 2^16 = 65536 print as numbers, beyond as 2^k */
};

/* Tableau's palette less its grey and olive: eight hues apart from each other and from the axes. */
static const char *const palette[8] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* --- a growing string: the document ------------------------------------------------------------ */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (dt_grow((void **)&b->p, &b->cap, b->n + n + 1, 1) != DT_OK) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Only for short pieces: numbers and fixed markup (text goes through put_text). */
__attribute__((format(printf, 2, 3))) static void pf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        b->oom = 1;
    else
        put(b, tmp, (size_t)n);
}

/* A number printed by printf may carry the locale's decimal comma: make it a point. */
static void c_locale(char *s)
{
    for (; *s; s++)
        if (*s == ',')
            *s = '.';
}

/* ' name="12.34"': a coordinate, kept within +-1e5 (far outside the view, clipped there) */
static void attr(sbuf *b, const char *name, double v)
{
    char s[48];
    v = isnan(v) ? 0 : v < -1e5 ? -1e5 : v > 1e5 ? 1e5 : v;
    snprintf(s, sizeof s, "%.2f", v);
    c_locale(s);
    pf(b, " %s=\"%s\"", name, strcmp(s, "-0.00") ? s : "0.00");
}

/* "x,y " of a polyline's points */
static void point(sbuf *b, double x, double y, int first)
{
    char s[2][48];
    x = isnan(x) ? 0 : x < -1e5 ? -1e5 : x > 1e5 ? 1e5 : x;
    y = isnan(y) ? 0 : y < -1e5 ? -1e5 : y > 1e5 ? 1e5 : y;
    snprintf(s[0], sizeof s[0], "%.2f", x);
    snprintf(s[1], sizeof s[1], "%.2f", y);
    for (int i = 0; i < 2; i++) {
        c_locale(s[i]);
        if (!strcmp(s[i], "-0.00"))
            strcpy(s[i], "0.00");
    }
    pf(b, "%s%s,%s", first ? "" : " ", s[0], s[1]);
}

/* --- text: XML-escaped, valid UTF-8, cut to a number of characters ----------------------------- */

/* Length of the valid UTF-8 sequence at s that XML allows, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0], cp;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff) ||
        cp == 0xfffe || cp == 0xffff)
        return 0;
    return n;
}

/* Characters in s as put_text counts them (an invalid byte is one character). */
static int text_chars(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
        size_t k = utf8_len(p);
        p += k ? k : 1;
    }
    return n;
}

/* s escaped for XML text or an attribute: markup characters as entities, control characters as
 * spaces, invalid UTF-8 bytes as '?'. More than max characters: the first max-1 and an ellipsis. */
static void put_text(sbuf *b, const char *s, int max)
{
    int total = text_chars(s), n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
        if (total > max && n == max - 1) {
            puts_(b, "\xe2\x80\xa6");
            return;
        }
        size_t k = utf8_len(p);
        if (k == 0) {
            puts_(b, "?");
            p++;
            continue;
        }
        switch (*p) {
        case '&': puts_(b, "&amp;"); break;
        case '<': puts_(b, "&lt;"); break;
        case '>': puts_(b, "&gt;"); break;
        case '"': puts_(b, "&quot;"); break;
        case '\'': puts_(b, "&apos;"); break;
        default:
            if (*p < 0x20)
                puts_(b, " ");
            else
                put(b, (const char *)p, k);
        }
        p += k;
    }
}

/* estimated width of n characters of the given font size */
static double text_width(int n, double size) { return n * size * 0.6; }

/* --- axes --------------------------------------------------------------------------------------- */
typedef struct {
    double lo, hi; /* limits in axis units: the value, or its log2 on a log axis */
    int n;
    double t[MAX_TICKS + 1]; /* tick positions, axis units */
    char label[MAX_TICKS + 1][32];
    int log;
} axis;

/* Data limits on the outer ticks: a line along the lowest or highest value would lie on the frame
 * (the x axis hides it), so a limit the data reaches moves out by 3% of the span, between ticks. */
static void clear_frame(axis *a, double lo, double hi)
{
    double span = a->hi - a->lo;
    if (lo - a->lo < 0.01 * span)
        a->lo -= 0.03 * span;
    if (a->hi - hi < 0.01 * span)
        a->hi += 0.03 * span;
}

/* Grows a data range that is one value (or as good as) to something that can be drawn. */
static void pad_degenerate(double *lo, double *hi, int integer)
{
    double mag = fmax(fabs(*lo), fabs(*hi));
    if (*hi - *lo > 1e-9 * mag)
        return;
    double c = *lo / 2 + *hi / 2;
    double pad = integer || c == 0 ? 1 : fabs(c) * 0.1;
    *lo = c - pad;
    *hi = c + pad;
}

/* the tick indices i0..i1 (ticks at i x step) for [lo, hi]: inside fixed limits, or covering the
 * data; returns how many */
static double tick_range(double lo, double hi, double step, int fixed, double *i0, double *i1)
{
    if (fixed) {
        *i0 = ceil(lo / step - 1e-9);
        *i1 = floor(hi / step + 1e-9);
    } else {
        *i0 = floor(lo / step + 1e-9);
        *i1 = ceil(hi / step - 1e-9);
    }
    return *i1 - *i0 + 1;
}

/* Ticks at multiples of the smallest step in 1, 2, 5 x 10^k (integers when integer is set) that
 * gives at most MAX_TICKS of them. Data limits (!fixed) grow to the outer multiples, then clear of
 * the data (clear_frame). lo < hi. */
static void linear_axis(axis *a, double lo, double hi, int fixed, int integer)
{
    static const double m[3] = {1, 2, 5};
    double half = hi / 2 - lo / 2; /* half the span: finite even for +-DBL_MAX */
    double p = pow(10, floor(log10(half / 10)));
    double step = 1, i0 = 0, i1 = 0;
    for (int it = 0; it < 3 * 400; it++) {
        step = m[it % 3] * p;
        if (it % 3 == 2)
            p *= 10;
        if (integer && step < 1)
            continue;
        if (tick_range(lo, hi, step, fixed, &i0, &i1) <= MAX_TICKS)
            break;
    }
    a->log = 0;
    a->lo = fixed ? lo : i0 * step;
    a->hi = fixed ? hi : i1 * step;
    if (!fixed)
        clear_frame(a, lo, hi);
    a->n = i1 - i0 + 1 > 0 ? (int)(i1 - i0 + 1) : 0;
    if (a->n > MAX_TICKS)
        a->n = 0;
    double mag = 0;
    for (int k = 0; k < a->n; k++) {
        double v = (i0 + k) * step;
        a->t[k] = fabs(v) < step * 1e-9 ? 0 : v;
        mag = fmax(mag, fabs(a->t[k]));
    }
    int e = (int)floor(log10(step) + 1e-9); /* the step is 1, 2 or 5 x 10^e */
    int sci = mag >= 1e6 || e < -5;
    int digits = sci ? (mag > 0 ? (int)floor(log10(mag) + 1e-9) - e + 1 : 1) : (e < 0 ? -e : 0);
    digits = digits < 1 && sci ? 1 : digits > 15 ? 15 : digits;
    for (int k = 0; k < a->n; k++) {
        snprintf(a->label[k], sizeof a->label[k], sci ? "%.*g" : "%.*f", digits, a->t[k]);
        c_locale(a->label[k]);
    }
}

/* Ticks at powers of two, every k-th exponent with k the smallest giving at most MAX_TICKS. Data
 * limits grow to the outer ticks (one power more on each side when all values are equal), then
 * clear of the data (clear_frame). Labels are numbers from 1 to 2^16, "2^k" beyond and below
 * (put_tick_label draws k as a superscript). */
static void log_axis(axis *a, double lo, double hi, int fixed)
{
    double l = log2(lo), h = log2(hi), i0 = 0, i1 = 0, step = 1, dl = l, dh = h;
    if (!fixed) {
        l = floor(l + 1e-9);
        h = ceil(h - 1e-9);
        if (h <= l)
            l -= 1, h += 1;
    }
    for (step = 1; step < 4096; step++) {
        if (tick_range(l, h, step, fixed, &i0, &i1) <= MAX_TICKS)
            break;
    }
    a->log = 1;
    a->lo = fixed ? l : i0 * step;
    a->hi = fixed ? h : i1 * step;
    if (!fixed)
        clear_frame(a, dl, dh);
    a->n = i1 - i0 + 1 > 0 && i1 - i0 + 1 <= MAX_TICKS ? (int)(i1 - i0 + 1) : 0;
    for (int k = 0; k < a->n; k++) {
        int e = (int)((i0 + k) * step);
        a->t[k] = e;
        if (e >= 0 && e <= LOG_PLAIN_MAX_EXP)
            snprintf(a->label[k], sizeof a->label[k], "%ld", 1L << e);
        else
            snprintf(a->label[k], sizeof a->label[k], "2^%d", e);
    }
}

/* A tick label: "2^k" as 2 with a raised k. */
static void put_tick_label(sbuf *b, const char *label)
{
    const char *hat = strchr(label, '^');
    if (!hat) {
        puts_(b, label);
        return;
    }
    put(b, label, (size_t)(hat - label));
    pf(b, "<tspan dy=\"-5\" font-size=\"8.5\">%s</tspan>", hat + 1);
}

static int label_chars(const char *label)
{
    const char *hat = strchr(label, '^');
    return hat ? (int)(hat - label) + (int)strlen(hat + 1) : (int)strlen(label);
}

/* --- the chart ---------------------------------------------------------------------------------- */
typedef struct {
    double left, right, top, bottom; /* the plot area */
    axis x, y;
} frame;

static double map_x(const frame *f, double v) { return f->left + (v - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left); }

static double map_y(const frame *f, double v)
{
    if (f->y.log)
        v = log2(v);
    return f->bottom - (v - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top);
}

static int finite_points(const dt_svg_series *s)
{
    int n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += isfinite(s->x[i]) && isfinite(s->y[i]);
    return n;
}

static void put_marker(sbuf *b, int series, double x, double y, double r)
{
    if (series < 8) {
        puts_(b, "<circle");
        attr(b, "cx", x);
        attr(b, "cy", y);
        attr(b, "r", r);
    } else { /* the colours come round again: squares tell these apart */
        puts_(b, "<rect");
        attr(b, "x", x - r);
        attr(b, "y", y - r);
        attr(b, "width", 2 * r);
        attr(b, "height", 2 * r);
    }
    puts_(b, "/>\n");
}

/* Series i: polylines broken at non-finite y (non-finite x skipped), then its markers. A piece of
 * one point would draw nothing as a line: it gets a marker whatever the marker rule says. */
static void put_series(sbuf *b, const frame *f, const dt_svg_series *s, int i)
{
    const char *colour = palette[i % 8];
    int markers = !s->dashed && finite_points(s) <= MARKER_MAX_POINTS;
    pf(b, "<g id=\"series-%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\"%s>\n", i + 1, colour,
       s->dashed ? " stroke-dasharray=\"7 4\"" : "");
    puts_(b, "<title>");
    if (s->label)
        put_text(b, s->label, 200);
    else
        pf(b, "series %d", i + 1);
    puts_(b, "</title>\n");
    size_t i0 = 0;
    while (i0 < s->n) {
        while (i0 < s->n && !(isfinite(s->x[i0]) && isfinite(s->y[i0])))
            i0++;
        if (i0 == s->n)
            break;
        size_t i1 = i0, count = 0; /* the piece: i0 .. i1-1, until a non-finite y */
        while (i1 < s->n && isfinite(s->y[i1]))
            count += isfinite(s->x[i1++]);
        if (count == 1) {
            if (!markers) {
                pf(b, "<g fill=\"%s\" stroke=\"none\">", colour);
                put_marker(b, i, map_x(f, s->x[i0]), map_y(f, s->y[i0]), 2.5);
                puts_(b, "</g>\n");
            }
        } else {
            puts_(b, "<polyline points=\"");
            int first = 1;
            for (size_t k = i0; k < i1; k++)
                if (isfinite(s->x[k])) {
                    point(b, map_x(f, s->x[k]), map_y(f, s->y[k]), first);
                    first = 0;
                }
            puts_(b, "\"/>\n");
        }
        i0 = i1;
    }
    if (markers) {
        pf(b, "<g fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\">\n", colour);
        for (size_t k = 0; k < s->n; k++)
            if (isfinite(s->x[k]) && isfinite(s->y[k]))
                put_marker(b, i, map_x(f, s->x[k]), map_y(f, s->y[k]), 3);
        puts_(b, "</g>\n");
    }
    puts_(b, "</g>\n");
}

static void put_line(sbuf *b, double x1, double y1, double x2, double y2)
{
    puts_(b, "<line");
    attr(b, "x1", x1);
    attr(b, "y1", y1);
    attr(b, "x2", x2);
    attr(b, "y2", y2);
    puts_(b, "/>\n");
}

static void put_axes(sbuf *b, const frame *f)
{
    puts_(b, "<g id=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n");
    for (int k = 0; k < f->x.n; k++)
        put_line(b, map_x(f, f->x.t[k]), f->top, map_x(f, f->x.t[k]), f->bottom);
    for (int k = 0; k < f->y.n; k++) {
        double y = f->bottom - (f->y.t[k] - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top);
        put_line(b, f->left, y, f->right, y);
    }
    puts_(b, "</g>\n");
}

static void put_ticks(sbuf *b, const frame *f)
{
    puts_(b, "<g id=\"axes\" stroke=\"#333333\" stroke-width=\"1\" stroke-linecap=\"square\">\n");
    put_line(b, f->left, f->bottom, f->right, f->bottom);
    put_line(b, f->left, f->top, f->left, f->bottom);
    for (int k = 0; k < f->x.n; k++)
        put_line(b, map_x(f, f->x.t[k]), f->bottom, map_x(f, f->x.t[k]), f->bottom + 5);
    double ys[MAX_TICKS + 1];
    for (int k = 0; k < f->y.n; k++) {
        ys[k] = f->bottom - (f->y.t[k] - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top);
        put_line(b, f->left - 5, ys[k], f->left, ys[k]);
    }
    puts_(b, "</g>\n<g id=\"x-tick-labels\" font-size=\"11\" fill=\"#333333\" text-anchor=\"middle\">\n");
    for (int k = 0; k < f->x.n; k++) {
        puts_(b, "<text");
        attr(b, "x", map_x(f, f->x.t[k]));
        attr(b, "y", f->bottom + 18);
        puts_(b, ">");
        put_tick_label(b, f->x.label[k]);
        puts_(b, "</text>\n");
    }
    puts_(b, "</g>\n<g id=\"y-tick-labels\" font-size=\"11\" fill=\"#333333\" text-anchor=\"end\">\n");
    for (int k = 0; k < f->y.n; k++) {
        puts_(b, "<text");
        attr(b, "x", f->left - 8);
        attr(b, "y", ys[k] + 4);
        puts_(b, ">");
        put_tick_label(b, f->y.label[k]);
        puts_(b, "</text>\n");
    }
    puts_(b, "</g>\n");
}

static void put_legend(sbuf *b, const dt_svg_chart *c, double x0, double y0, double width)
{
    puts_(b, "<g id=\"legend\" font-size=\"12\" fill=\"#222222\">\n<rect");
    attr(b, "x", x0);
    attr(b, "y", y0);
    attr(b, "width", width);
    attr(b, "height", 10 + 18.0 * c->n_series);
    puts_(b, " fill=\"#ffffff\" stroke=\"#cccccc\"/>\n");
    for (int i = 0; i < c->n_series; i++) {
        const dt_svg_series *s = &c->series[i];
        double y = y0 + 5 + 18.0 * i + 9;
        pf(b, "<g stroke=\"%s\" stroke-width=\"2\"%s>", palette[i % 8], s->dashed ? " stroke-dasharray=\"7 4\"" : "");
        put_line(b, x0 + 8, y, x0 + 34, y);
        puts_(b, "</g>\n");
        if (!s->dashed && finite_points(s) <= MARKER_MAX_POINTS) {
            pf(b, "<g fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\">", palette[i % 8]);
            put_marker(b, i, x0 + 21, y, 3);
            puts_(b, "</g>\n");
        }
        puts_(b, "<text");
        attr(b, "x", x0 + 40);
        attr(b, "y", y + 4);
        puts_(b, ">");
        if (s->label)
            put_text(b, s->label, LEGEND_MAX_CHARS);
        else
            pf(b, "series %d", i + 1);
        puts_(b, "</text>\n");
    }
    puts_(b, "</g>\n");
}

static void put_label(sbuf *b, double x, double y, const char *attrs, const char *s, double room, double size)
{
    int max = (int)(room / text_width(1, size));
    puts_(b, "<text");
    attr(b, "x", x);
    attr(b, "y", y);
    pf(b, " %s>", attrs);
    put_text(b, s, max > 8 ? max : 8);
    puts_(b, "</text>\n");
}

static void build(sbuf *b, const dt_svg_chart *c, frame *f)
{
    int ychars = 0, lchars = 0;
    for (int k = 0; k < f->y.n; k++)
        ychars = label_chars(f->y.label[k]) > ychars ? label_chars(f->y.label[k]) : ychars;
    for (int i = 0; i < c->n_series; i++) {
        int n = c->series[i].label ? text_chars(c->series[i].label) : 9;
        lchars = n > lchars ? n : lchars;
    }
    lchars = lchars > LEGEND_MAX_CHARS ? LEGEND_MAX_CHARS : lchars;
    double legend_w = 48 + text_width(lchars, 12);
    int has_title = c->title && *c->title, has_xl = c->xlabel && *c->xlabel, has_yl = c->ylabel && *c->ylabel;
    f->left = fmax(48, 10 + (has_yl ? 20 : 0) + text_width(ychars, 11) + 12);
    f->right = W - 10 - legend_w - 14;
    f->top = has_title ? 44 : 16;
    f->bottom = H - (has_xl ? 50 : 30);

    pf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\"\n",
       W, H, W, H);
    puts_(b, "     font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>");
    put_text(b, has_title ? c->title : "chart", 200);
    pf(b, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n<defs><clipPath id=\"plot-area\"><rect", W, H);
    /* a little wider than the plot area: markers on its edge show whole */
    attr(b, "x", f->left - 4);
    attr(b, "y", f->top - 4);
    attr(b, "width", f->right - f->left + 8);
    attr(b, "height", f->bottom - f->top + 8);
    puts_(b, "/></clipPath></defs>\n");
    put_axes(b, f);
    puts_(b, "<g id=\"series\" clip-path=\"url(#plot-area)\">\n");
    for (int i = 0; i < c->n_series; i++)
        put_series(b, f, &c->series[i], i);
    puts_(b, "</g>\n");
    put_ticks(b, f);
    if (has_title) {
        double w = text_width(text_chars(c->title), 15), cx = (f->left + f->right) / 2;
        cx = fmin(fmax(cx, 8 + w / 2), W - 8 - w / 2);
        put_label(b, cx, 26, "font-size=\"15\" font-weight=\"bold\" fill=\"#111111\" text-anchor=\"middle\"", c->title, W - 16, 15);
    }
    if (has_xl)
        put_label(b, (f->left + f->right) / 2, H - 14, "font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"", c->xlabel,
                  f->right - f->left, 13);
    if (has_yl) {
        char rot[96];
        double cy = (f->top + f->bottom) / 2;
        snprintf(rot, sizeof rot, "font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\" transform=\"rotate(-90 %.2f %.2f)\"",
                 18.0, cy);
        c_locale(rot);
        put_label(b, 18, cy, rot, c->ylabel, f->bottom - f->top, 13);
    }
    put_legend(b, c, f->right + 14, f->top, legend_w);
    puts_(b, "</svg>\n");
}

/* --- checks and the file ------------------------------------------------------------------------ */

/* The data's limits into f's axes. 0, or -1 after one line naming the chart. */
static int make_axes(const char *path, const char *title, const dt_svg_chart *c, frame *f)
{
    if (c->n_series < 0 || c->n_series > DT_SVG_MAX_SERIES || (c->n_series > 0 && !c->series)) {
        dt_error("svg %s: chart \"%s\": %d series; 1 to %d can be drawn", path, title, c->n_series, DT_SVG_MAX_SERIES);
        return -1;
    }
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < c->n_series; i++) {
        const dt_svg_series *s = &c->series[i];
        if (s->n && (!s->x || !s->y)) {
            dt_error("svg %s: chart \"%s\": series %d has %zu points but no %s values", path, title, i + 1, s->n, s->x ? "y" : "x");
            return -1;
        }
        for (size_t k = 0; k < s->n; k++) {
            if (c->log_y && isfinite(s->y[k]) && s->y[k] <= 0) {
                dt_error("svg %s: chart \"%s\": series %d point %zu has y = %g, not positive, on a log axis", path, title, i + 1,
                         k, s->y[k]);
                return -1;
            }
            if (!isfinite(s->x[k]) || !isfinite(s->y[k]))
                continue;
            if (fabs(s->x[k]) > MAX_ABS || fabs(s->y[k]) > MAX_ABS) {
                dt_error("svg %s: chart \"%s\": series %d point %zu (%g, %g) is beyond +-%g, too large to draw", path, title, i + 1,
                         k, s->x[k], s->y[k], MAX_ABS);
                return -1;
            }
            xlo = fmin(xlo, s->x[k]), xhi = fmax(xhi, s->x[k]);
            ylo = fmin(ylo, s->y[k]), yhi = fmax(yhi, s->y[k]);
        }
    }
    if (!(xlo <= xhi)) {
        dt_error("svg %s: chart \"%s\": no point with a finite x and y to plot", path, title);
        return -1;
    }
    if ((c->fixed_x && !(fabs(c->x_min) <= MAX_ABS && fabs(c->x_max) <= MAX_ABS && c->x_min < c->x_max)) ||
        (c->fixed_y && !(fabs(c->y_min) <= MAX_ABS && fabs(c->y_max) <= MAX_ABS && c->y_min < c->y_max))) {
        dt_error("svg %s: chart \"%s\": fixed limits need min < max, both within +-%g (x %g..%g, y %g..%g)", path, title,
                 MAX_ABS, c->x_min, c->x_max, c->y_min, c->y_max);
        return -1;
    }
    if (c->log_y && c->fixed_y && c->y_min <= 0) {
        dt_error("svg %s: chart \"%s\": y_min = %g, not positive, on a log axis", path, title, c->y_min);
        return -1;
    }
    if (c->fixed_x)
        xlo = c->x_min, xhi = c->x_max;
    else
        pad_degenerate(&xlo, &xhi, c->integer_x);
    linear_axis(&f->x, xlo, xhi, c->fixed_x, c->integer_x);
    if (c->fixed_y)
        ylo = c->y_min, yhi = c->y_max;
    if (c->log_y) {
        log_axis(&f->y, ylo, yhi, c->fixed_y);
    } else {
        if (!c->fixed_y)
            pad_degenerate(&ylo, &yhi, 0);
        linear_axis(&f->y, ylo, yhi, c->fixed_y, 0);
    }
    return 0;
}

int dt_svg_write(const char *path, const dt_svg_chart *c)
{
    if (!path || !*path || !c) {
        dt_error("svg: %s", !c ? "no chart given" : "no path given");
        return -1;
    }
    const char *title = c->title && *c->title ? c->title : "(untitled)";
    frame f;
    memset(&f, 0, sizeof f);
    if (make_axes(path, title, c, &f) != 0)
        return -1;
    sbuf b = {0};
    build(&b, c, &f);
    int rc;
    if (b.oom) {
        dt_error("svg %s: chart \"%s\": out of memory", path, title);
        rc = -1;
    } else {
        rc = dt_output_write("svg", path, b.p, b.n) == DT_OK ? 0 : -1;
    }
    free(b.p);
    return rc;
}
