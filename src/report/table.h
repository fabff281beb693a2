/* table.h: dtreport's outputs from a computed run set (runs.h): the Markdown report, CSV, JSON and
 * the SVG plots (svg.h).
 *
 * Markdown: a header (the sources as given, the date), then one table per (arch, dataset) in the
 * set's order with the columns of doc/dtreport.1, the plots of that table's runs below it when
 * plots_href is set, and a last section "Skipped or partial runs" with every run's notes. Numbers
 * have fixed formats, so the same runs and date give the same bytes.
 * CSV: a header row and one row per run (skipped ones too), numbers to 10 significant digits, empty
 * when missing.
 * JSON: an array of one object per run, null for what is missing.
 * In both, ranks_per_node is missing unless nodes x ranks_per_node is the world size: run.json's
 * ranks_per_node is the count on rank 0's node, which says nothing of the others when it is not.
 *
 * Writers return DT_OK, or DT_ERR_SYS after a dt_error line when the stream fails (DT_ERR_NOMEM
 * when memory runs out). They print nothing else.
 */
#ifndef DT_REPORT_TABLE_H
#define DT_REPORT_TABLE_H

#include <stdio.h>
#include <time.h>

#include "report/runs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_report_opts {
    time_t date;            /* the header's date (UTC) */
    const char *plots_href; /* the plots' folder relative to the report ("." for the same), or NULL: no plots */
} dt_report_opts;

int dt_report_md(FILE *out, const dt_run_set *s, const dt_report_opts *o);
int dt_report_csv(FILE *out, const dt_run_set *s);
int dt_report_json(FILE *out, const dt_run_set *s);

/* Writes into the existing directory dir, for each run with a row, <stem>-top1.svg and
 * <stem>-top5.svg (train and val per epoch), <stem>-loss-scale.svg when its loss scale is dynamic
 * or ever not 1, and for each table <arch>-<dataset>-throughput.svg (made file-name safe) when one
 * of its configurations has runs of more than one size. These are the files dt_report_md links.
 * DT_OK, or the first failure of dt_svg_write (logged). */
int dt_report_plots(const dt_run_set *s, const char *dir);

/* The relative path from directory from to to, both absolute and normalised (realpath's output),
 * into out: "plots", "../plots", "." when equal. DT_OK, or DT_ERR_INPUT when either is not absolute
 * or out is too small. */
int dt_report_relpath(const char *from, const char *to, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
