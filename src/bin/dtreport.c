/* dtreport.c: turns dtrain's run directories into one comparison (doc/dtreport.1 is the manual).
 *   dtreport [--format md|csv|json] [--plots DIR] [-o FILE] PATH...
 * Reads src/report/runs.h's runs under each PATH, writes the report (Markdown by default) to
 * standard output or to FILE (report/output.h: atomically over a regular file or a link's target,
 * straight into a FIFO or a device), and with --plots the SVG charts it links. What is wrong
 * with a run goes to standard error and the report's footnote; it is no error.
 * Exit codes: 0 report written, 1 failure at run time (I/O), 2 bad command line or PATH. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report/output.h"
#include "report/runs.h"
#include "report/table.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

enum { EXIT_USAGE = 2 };
enum { FMT_MD, FMT_CSV, FMT_JSON };
enum { OPT_FORMAT = 256, OPT_PLOTS, OPT_LOG };

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: dtreport [OPTIONS] PATH...\n"
            "Compares dtrain runs: one table per (arch, dataset) of every run directory (run.json and\n"
            "metrics.jsonl) in each PATH, or PATH itself when it is one. Runs in progress, unreadable or\n"
            "corrupt are named on standard error and in the report's last section.\n"
            "\n"
            "Options:\n"
            "  -f, --format FMT      md (Markdown), csv or json (default md)\n"
            "  -o, --output FILE     write the report to FILE (default: standard output): a regular file (or\n"
            "                        a link's target) is replaced atomically, a FIFO or device written to\n"
            "      --plots DIR       also write SVG charts into DIR (created when missing): per run top-1\n"
            "                        and top-5 by epoch and the loss scale, per table throughput against\n"
            "                        ranks; the Markdown links them relative to FILE's folder (default:\n"
            "                        none)\n"
            "      --log-level LEVEL error, warn, info or debug (default warn)\n"
            "  -h, --help            show this help;  -V, --version  show the version\n"
            "\n"
            "The header's date is $SOURCE_DATE_EPOCH's when set (reproducible reports), else today's (UTC).\n"
            "Exit codes: 0 report written (skipped runs included); 1 a failure at run time; 2 a bad\n"
            "command line or PATH.\n");
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char p[4200];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        dt_error("--plots %s: path too long", path);
        return DT_ERR_INPUT;
    }
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || !c) {
            *s = 0;
            struct stat st;
            if (mkdir(p, 0777) != 0 && (errno != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) {
                dt_error("--plots %s: cannot create %s: %s", path, p,
                         errno == EEXIST ? "not a directory" : strerror(errno));
                return DT_ERR_SYS;
            }
            *s = c;
        }
        if (!c)
            return DT_OK;
    }
}

/* the folder part of a file name: "." when it has none */
static void dir_of(const char *file, char *out, size_t n)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == file)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - file), file);
}

static int write_report(FILE *f, int fmt, const dt_run_set *s, const dt_report_opts *o)
{
    return fmt == FMT_CSV ? dt_report_csv(f, s) : fmt == FMT_JSON ? dt_report_json(f, s) : dt_report_md(f, s, o);
}

/* the report built in memory, then written to path by report/output.h: a regular file replaced
 * atomically, a symbolic link's target likewise, a FIFO or a device written through */
static int write_file(const char *path, int fmt, const dt_run_set *s, const dt_report_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        dt_error("-o %s: cannot build the report: %s", path, strerror(errno));
        return DT_ERR_NOMEM;
    }
    int rc = write_report(f, fmt, s, o);
    if (fclose(f) != 0 && rc == DT_OK) {
        dt_error("-o %s: cannot build the report: %s", path, strerror(errno));
        rc = DT_ERR_NOMEM;
    }
    if (rc == DT_OK)
        rc = dt_output_write("-o", path, buf, len);
    free(buf);
    return rc;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"plots", required_argument, NULL, OPT_PLOTS},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    static const char *const formats[] = {"md", "csv", "json", NULL};
    dt_log_init();
    if (!getenv("DT_LOG_LEVEL"))
        dt_log_set_level(DT_LOG_WARN);
    const char *out = NULL, *plots = NULL;
    int fmt = FMT_MD, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:hV", opts, NULL)) != -1) {
        int common = dt_cli_common(c, OPT_LOG, "dtreport", argv, opts, usage);
        if (common == DT_CLI_GO_ON)
            continue;
        if (common != DT_CLI_MINE)
            return common;
        switch (c) {
        case 'f':
            if (dt_parse_choice("--format", optarg, formats, &fmt))
                return EXIT_USAGE;
            break;
        case 'o':
            if (!*optarg) {
                dt_error("-o: empty file name");
                return EXIT_USAGE;
            }
            out = optarg;
            break;
        case OPT_PLOTS:
            if (!*optarg) {
                dt_error("--plots: empty directory name");
                return EXIT_USAGE;
            }
            plots = optarg;
            break;
        }
    }
    if (optind >= argc) {
        dt_error("no PATH: name the results folders or run directories to read (see dtreport --help)");
        return EXIT_USAGE;
    }
    for (int i = optind; i < argc; i++) /* each goes into messages and the report */
        if (dt_parse_text("PATH", argv[i]) != DT_OK)
            return EXIT_USAGE;
    dt_report_opts o = {.date = time(NULL)};
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde) {
        long v;
        if (dt_parse_long("SOURCE_DATE_EPOCH", sde, 0, LONG_MAX, &v))
            return EXIT_USAGE;
        o.date = (time_t)v;
    }
    dt_run_set s = {0};
    int rc = dt_runs_load(&s, (const char *const *)(argv + optind), argc - optind);
    if (rc != DT_OK) {
        dt_runs_free(&s);
        return rc == DT_ERR_INPUT ? EXIT_USAGE : EXIT_FAILURE;
    }
    for (size_t i = 0; i < s.n; i++)
        for (size_t k = 0; k < s.runs[i].n_notes; k++) {
            const dt_run_note *n = &s.runs[i].notes[k];
            dt_warn("%s: %s%s%s%s", s.runs[i].dir, n->text, n->detail ? " (" : "", n->detail ? n->detail : "",
                    n->detail ? ")" : "");
        }
    char href[8400];
    if (plots) {
        char *to = NULL, *from = NULL, dir[4200];
        rc = make_dirs(plots);
        if (rc == DT_OK)
            rc = dt_report_plots(&s, plots);
        dir_of(out ? out : "x", dir, sizeof dir);
        if (rc == DT_OK && (!(to = realpath(plots, NULL)) || !(from = realpath(dir, NULL)))) {
            dt_error("%s: cannot resolve: %s", to ? dir : plots, strerror(errno));
            rc = DT_ERR_SYS;
        }
        if (rc == DT_OK && dt_report_relpath(from, to, href, sizeof href) != DT_OK) {
            dt_error("--plots %s: no relative path from %s", plots, from);
            rc = DT_ERR_SYS;
        }
        free(to);
        free(from);
        o.plots_href = href;
    }
    if (rc == DT_OK)
        rc = out ? write_file(out, fmt, &s, &o) : write_report(stdout, fmt, &s, &o);
    dt_runs_free(&s);
    return rc == DT_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
    return dt_cli_exit(run(argc, argv)); /* 1 when what went to standard output was lost (cli.h) */
}
