/* svg.h: line charts as standalone SVG files, written in plain C (no plotting dependency), for
 * dtreport's --plots.
 *
 * A chart has a title, axis labels, linear axes with "nice" ticks (1, 2, 5 x 10^k) chosen from the
 * data (or fixed limits), a legend, and up to DT_SVG_MAX_SERIES series, each a polyline with point
 * markers, drawn in a fixed colour cycle (or dashed: an ideal-scaling line, say). NaN y values
 * break a line (a missing validation epoch). The output is well-formed XML (text escaped), the same
 * bytes for the same input (numbers printed with a fixed format), viewBox-scaled so that browsers
 * and GitHub's Markdown preview show it at any size.
 *
 *     dt_svg_series s[2] = {{.label = "train", .x = ep, .y = t1, .n = n},
 *                           {.label = "val", .x = ep, .y = v1, .n = n}};
 *     dt_svg_chart c = {.title = "resnet50 top-1", .xlabel = "epoch", .ylabel = "top-1 (%)",
 *                       .series = s, .n_series = 2, .y_min = 0, .y_max = 100, .fixed_y = 1};
 *     dt_svg_write("plots/run-top1.svg", &c);
 */
#ifndef DT_REPORT_SVG_H
#define DT_REPORT_SVG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_SVG_MAX_SERIES 16

typedef struct dt_svg_series {
    const char *label;   /* legend text (escaped when written) */
    const double *x, *y; /* n points; y may be NaN (a gap) */
    size_t n;
    int dashed;          /* 1: a dashed line without markers (a reference such as ideal scaling) */
} dt_svg_series;

typedef struct dt_svg_chart {
    const char *title, *xlabel, *ylabel;
    const dt_svg_series *series;
    int n_series;
    int fixed_x, fixed_y;       /* 1: use x_min/x_max (y_min/y_max) instead of the data's range */
    double x_min, x_max, y_min, y_max;
    int log_y;                  /* 1: logarithmic y axis (powers of 2 ticks: a loss scale) */
    int integer_x;              /* 1: x ticks at integers only (epochs, GPU counts) */
} dt_svg_chart;

/* Writes the chart to path as report/output.h writes a named file (a regular file replaced through
 * <path>.tmp.<pid>, removed on failure; a symbolic link kept, its target replaced; a FIFO or a
 * device written through). 0, or -1 after one dt_error line naming the path (cannot write) or the
 * path and the chart's title (no point with a finite x and y at all, more than DT_SVG_MAX_SERIES
 * series, a non-positive y value or y_min on a log axis, fixed limits not min < max, a value beyond
 * +-1e300, a series with points but no x or y array); nothing is written then.
 * Points with a non-finite x are skipped; a non-finite y breaks the line. Series past the 8th
 * reuse the colours with square markers; a series with more than 60 finite points has no markers. */
int dt_svg_write(const char *path, const dt_svg_chart *c);

#ifdef __cplusplus
}
#endif
#endif
