/* test_svg.c: the SVG line charts of src/report/svg.h, written to a temporary directory and read
 * back as text:
 *   - three sample charts (a learning curve with a missing validation epoch, a throughput chart with
 *     a dashed ideal line and integer x, a log-y loss-scale chart): they exist, are SVG, escape their
 *     texts, and the same input gives the same bytes;
 *   - series: a NaN y breaks the line, a non-finite x is skipped, markers only on short solid lines;
 *   - ticks: 1/2/5 x 10^k within 4..8 labels, integers on an integer x axis, fixed limits kept,
 *     powers of two (2^k beyond 65536) on a log axis, padded ranges for one point or one value;
 *   - errors (no finite point, too many series, a non-positive y on a log axis, bad fixed limits, a
 *     value beyond +-1e300, a path that cannot be written): -1, exactly one log line naming the
 *     path (and the chart), and no file or temporary file left.
 * test_svg --write DIR writes the three sample charts into DIR (created if missing) for
 * tests/report/svg.sh (xmllint, rsvg-convert), prints their paths, exits 0. */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/svg.h"
#include "tap.h"

#define TITLE_RAW "resnet20 top-1 (a < b & c)"
#define TITLE_ESC "resnet20 top-1 (a &lt; b &amp; c)"

/* --- the sample charts -------------------------------------------------------------------------- */
enum { N_EP = 12, N_GPU = 6, N_IT = 240 };
static double ep[N_EP], train1[N_EP], val1[N_EP], val5[N_EP];
static double gpus[N_GPU] = {1, 2, 4, 8, 16, 32}, meas[N_GPU] = {1210, 2350, 4550, 8700, 16400, 30100}, ideal[N_GPU];
static double it[N_IT], scale[N_IT];

static void make_data(void)
{
    for (int i = 0; i < N_EP; i++) {
        ep[i] = i + 1;
        train1[i] = 15 + 70 * (1 - exp(-(i + 1) / 3.5));
        val1[i] = i == 5 ? NAN : 12 + 62 * (1 - exp(-(i + 1) / 3.0));
        val5[i] = 40 + 55 * (1 - exp(-(i + 1) / 2.5));
    }
    for (int i = 0; i < N_GPU; i++)
        ideal[i] = meas[0] * gpus[i];
    double s = 65536;
    for (int i = 0; i < N_IT; i++) { /* halves on an overflow, doubles after 40 clean steps */
        it[i] = i;
        if (i == 3 || i == 4 || i == 5 || i == 130)
            s /= 2;
        else if (i % 40 == 39)
            s *= 2;
        scale[i] = s;
    }
}

static dt_svg_series learn_s[3];
static dt_svg_series thr_s[2];
static dt_svg_series ls_s[1];

static dt_svg_chart learning(void)
{
    learn_s[0] = (dt_svg_series){.label = "train", .x = ep, .y = train1, .n = N_EP};
    learn_s[1] = (dt_svg_series){.label = "val \"top-1\"", .x = ep, .y = val1, .n = N_EP};
    learn_s[2] = (dt_svg_series){.label = "val 'top-5'", .x = ep, .y = val5, .n = N_EP};
    return (dt_svg_chart){.title = TITLE_RAW, .xlabel = "epoch", .ylabel = "accuracy (%)", .series = learn_s,
                          .n_series = 3, .fixed_y = 1, .y_min = 0, .y_max = 100, .integer_x = 1};
}

static dt_svg_chart throughput(void)
{
    thr_s[0] = (dt_svg_series){.label = "measured", .x = gpus, .y = meas, .n = N_GPU};
    thr_s[1] = (dt_svg_series){.label = "ideal (linear)", .x = gpus, .y = ideal, .n = N_GPU, .dashed = 1};
    return (dt_svg_chart){.title = "ResNet-50 training throughput", .xlabel = "GPUs", .ylabel = "images/s",
                          .series = thr_s, .n_series = 2, .integer_x = 1};
}

static dt_svg_chart loss_scale(void)
{
    ls_s[0] = (dt_svg_series){.label = "loss scale", .x = it, .y = scale, .n = N_IT};
    return (dt_svg_chart){.title = "AMP loss scale", .xlabel = "iteration", .ylabel = "scale", .series = ls_s,
                          .n_series = 1, .log_y = 1};
}

static int write_samples(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && access(dir, W_OK) != 0) {
        perror(dir);
        return 1;
    }
    struct {
        const char *name;
        dt_svg_chart c;
    } s[] = {{"learning.svg", learning()}, {"throughput.svg", throughput()}, {"loss_scale.svg", loss_scale()}};
    for (int i = 0; i < 3; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, s[i].name);
        if (dt_svg_write(path, &s[i].c) != 0)
            return 1;
        printf("%s\n", path);
    }
    return 0;
}

/* --- reading the output back ------------------------------------------------------------------- */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = tap_slurp(f);
    fclose(f);
    return s;
}

static int count(const char *s, size_t len, const char *needle)
{
    int n = 0;
    size_t k = strlen(needle);
    for (const char *p = s; p && (size_t)(p - s) + k <= len; p++)
        if (!strncmp(p, needle, k))
            n++;
    return n;
}

/* The element <g id="id" ...> ... </g> (nested groups included) in doc: its start, length in *len. */
static const char *group(const char *doc, const char *id, size_t *len)
{
    char open[128];
    snprintf(open, sizeof open, "<g id=\"%s\"", id);
    const char *p = doc ? strstr(doc, open) : NULL;
    *len = 0;
    if (!p)
        return NULL;
    int depth = 0;
    for (const char *q = p; *q; q++) {
        if (!strncmp(q, "<g ", 3) || !strncmp(q, "<g>", 3))
            depth++;
        else if (!strncmp(q, "</g>", 4) && --depth == 0) {
            *len = (size_t)(q + 4 - p);
            return p;
        }
    }
    return NULL;
}

/* The texts of the <text> elements in a group, tags removed, "|"-joined into out. Returns how many. */
static int tick_labels(const char *doc, const char *id, char *out, size_t cap)
{
    size_t len;
    const char *g = group(doc, id, &len);
    int n = 0;
    out[0] = '\0';
    for (const char *p = g; p && (p = strstr(p, "<text")) && p < g + len; n++) {
        p = strchr(p, '>') + 1;
        const char *end = strstr(p, "</text>");
        size_t o = strlen(out);
        if (n && o + 1 < cap)
            out[o++] = '|', out[o] = '\0';
        for (int in_tag = 0; p < end && o + 1 < cap; p++) {
            if (*p == '<')
                in_tag = 1;
            else if (*p == '>')
                in_tag = 0;
            else if (!in_tag)
                out[o++] = *p;
        }
        out[o] = '\0';
    }
    return n;
}

/* polylines in series i (1-based), and the points of the first one */
static int polylines(const char *doc, int i, int *points_first)
{
    char id[32];
    size_t len;
    snprintf(id, sizeof id, "series-%d", i);
    const char *g = group(doc, id, &len);
    *points_first = 0;
    if (!g)
        return -1;
    const char *p = strstr(g, "points=\"");
    if (p && p < g + len)
        for (p += 8; *p != '"'; p++)
            *points_first += *p == ',';
    return count(g, len, "<polyline");
}

static int markers(const char *doc, int i)
{
    char id[32];
    size_t len;
    snprintf(id, sizeof id, "series-%d", i);
    const char *g = group(doc, id, &len);
    return g ? count(g, len, "<circle") + count(g, len, "<rect") : -1;
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* Writes c to dir/name; returns the document (malloc'd) or NULL. */
static char *chart(const char *dir, const char *name, const dt_svg_chart *c)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = dt_svg_write(path, c);
    TAP_OK(rc == 0, "%s written", name);
    return rc == 0 ? slurp(path) : NULL;
}

/* An error case: -1, one log line naming the path (and want, when given), nothing new in dir
 * (path itself left as it was: absent, or a directory in the way). */
static void expect_error(const char *dir, const char *path, const dt_svg_chart *c, const char *want, const char *what)
{
    int before = entries(dir), existed = access(path, F_OK) == 0;
    tap_log_begin();
    int rc = dt_svg_write(path, c);
    char *log = tap_log_take();
    tap_log_end();
    int lines = log ? tap_count_lines(log) : 0;
    if (log && *log && log[strlen(log) - 1] == '\n')
        log[strlen(log) - 1] = '\0';
    TAP_OK(rc == -1 && lines == 1 && strstr(log, path) && (!want || strstr(log, want)),
           "%s: -1 (%d) and one line (%d) naming the path: %s", what, rc, lines, log ? log : "(none)");
    TAP_OK(entries(dir) == before && (access(path, F_OK) == 0) == existed, "%s: no file and no temporary file left", what);
    free(log);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            if (unlink(p) != 0)
                rmdir(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    make_data();
    if (argc == 3 && !strcmp(argv[1], "--write"))
        return write_samples(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
        return 2;
    }
    const char *td = getenv("TMPDIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/dtrain-svg.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(root)) {
        TAP_OK(0, "mkdtemp %s", root);
        return tap_done();
    }
    char labels[1024];
    int pts = 0;

    /* the learning curve */
    dt_svg_chart lc = learning();
    char *doc = chart(root, "learning.svg", &lc);
    TAP_OK(doc && !strncmp(doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"", 36) && strstr(doc, "\n<svg xmlns=\"http://www.w3.org/2000/svg\"") &&
               strstr(doc, "viewBox=\"0 0 720 440\"") && strlen(doc) > 7 && !strcmp(doc + strlen(doc) - 7, "</svg>\n"),
           "learning: an XML declaration, <svg ... viewBox> and </svg> at the end");
    TAP_OK(doc && strstr(doc, "<title>" TITLE_ESC "</title>") && strstr(doc, ">" TITLE_ESC "</text>") && !strstr(doc, "a < b"),
           "learning: the title is escaped, as the document's <title> and as text");
    TAP_OK(doc && strstr(doc, ">val &quot;top-1&quot;</text>") && strstr(doc, ">val &apos;top-5&apos;</text>"),
           "learning: legend entries escape quotes and apostrophes");
    int np = polylines(doc, 1, &pts);
    TAP_OK(np == 1 && pts == N_EP, "learning: train is %d polyline(s), the first of %d points", np, pts);
    np = polylines(doc, 2, &pts);
    TAP_OK(np == 2 && pts == 5, "learning: the NaN at epoch 6 breaks val top-1 into %d polylines (the first of %d points)", np, pts);
    TAP_OK(markers(doc, 1) == N_EP && markers(doc, 2) == N_EP - 1, "learning: a marker at each finite point (%d, %d)", markers(doc, 1), markers(doc, 2));
    int nx = tick_labels(doc, "x-tick-labels", labels, sizeof labels);
    TAP_OK(nx >= 4 && nx <= 8 && tap_match(labels, "^[0-9]+(\\|[0-9]+)*$"), "learning: %d integer x ticks: %s", nx, labels);
    TAP_OK(tick_labels(doc, "y-tick-labels", labels, sizeof labels) == 6 && !strcmp(labels, "0|20|40|60|80|100"),
           "learning: fixed y 0..100 ticks: %s", labels);
    TAP_OK(doc && strstr(doc, "clip-path=\"url(#plot-area)\"") && count(doc, strlen(doc), "<g id=\"series-") == 3 &&
               count(doc, strlen(doc), "<polyline") == 4,
           "learning: three series groups, four polylines, clipped to the plot area");
    char *again = chart(root, "learning-again.svg", &lc);
    TAP_OK(doc && again && !strcmp(doc, again), "learning: the same input gives the same bytes");
    free(again);
    free(doc);

    /* throughput: a dashed ideal line, integer x */
    dt_svg_chart tc = throughput();
    doc = chart(root, "throughput.svg", &tc);
    size_t len;
    const char *g2 = group(doc, "series-2", &len);
    TAP_OK(g2 && count(g2, len, "stroke-dasharray") == 1 && markers(doc, 2) == 0 && markers(doc, 1) == N_GPU,
           "throughput: the ideal line is dashed without markers, the measured one has %d", markers(doc, 1));
    nx = tick_labels(doc, "x-tick-labels", labels, sizeof labels);
    TAP_OK(nx >= 4 && nx <= 8 && tap_match(labels, "^0\\|[0-9]+(\\|[0-9]+)*$"), "throughput: %d integer x ticks from 0: %s", nx, labels);
    int ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(ny >= 4 && ny <= 8 && !strcmp(labels, "0|10000|20000|30000|40000"), "throughput: y ticks on data limits: %s", labels);
    free(doc);

    /* the loss scale on a log axis */
    dt_svg_chart sc = loss_scale();
    doc = chart(root, "loss_scale.svg", &sc);
    np = polylines(doc, 1, &pts);
    TAP_OK(np == 1 && pts == N_IT && markers(doc, 1) == 0, "loss scale: %d polyline(s) of %d points, no markers", np, pts);
    ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(!strcmp(labels, "8192|16384|32768|65536|217|218"), "loss scale: powers of two, 2^17 raised: %s", labels);
    TAP_OK(doc && strstr(doc, ">2<tspan dy=\"-5\" font-size=\"8.5\">17</tspan></text>"), "loss scale: 2^17 as 2 and a superscript 17");
    again = chart(root, "loss_scale-again.svg", &sc);
    TAP_OK(doc && again && !strcmp(doc, again), "loss scale: the same input gives the same bytes");
    free(again);
    free(doc);

    /* ticks on data limits, fractional */
    double fx[4] = {0, 1, 2, 3}, fy[4] = {0.013, 0.5, 0.87, 0.2};
    dt_svg_series fs = {.label = "f", .x = fx, .y = fy, .n = 4};
    dt_svg_chart fc = {.title = "fractions", .series = &fs, .n_series = 1};
    doc = chart(root, "fractions.svg", &fc);
    ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(!strcmp(labels, "0.0|0.2|0.4|0.6|0.8|1.0"), "0.013..0.87 gets ticks at 0.2 steps: %s", labels);
    nx = tick_labels(doc, "x-tick-labels", labels, sizeof labels);
    TAP_OK(nx >= 4 && nx <= 8, "0..3 gets %d x ticks: %s", nx, labels);
    free(doc);

    /* a large log range: every other power or fewer, no more than 8 ticks */
    double wy[4] = {1.0 / 64, 1, 1024, 1 << 30};
    dt_svg_series ws = {.label = "w", .x = fx, .y = wy, .n = 4};
    dt_svg_chart wc = {.title = "wide log", .series = &ws, .n_series = 1, .log_y = 1};
    doc = chart(root, "wide.svg", &wc);
    ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(ny >= 4 && ny <= 8 && strstr(labels, "2-") && strstr(labels, "|1|"), "2^-6..2^30: %d ticks: %s", ny, labels);
    free(doc);

    /* degenerate ranges */
    double one_x = 3, one_y = 5;
    dt_svg_series os = {.label = "one", .x = &one_x, .y = &one_y, .n = 1};
    dt_svg_chart oc = {.title = "one point", .series = &os, .n_series = 1, .integer_x = 1};
    doc = chart(root, "one.svg", &oc);
    nx = tick_labels(doc, "x-tick-labels", labels, sizeof labels);
    TAP_OK(nx >= 3 && strstr(labels, "3"), "one point: %d x ticks around it: %s", nx, labels);
    ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(ny >= 3 && strstr(labels, "5"), "one point: %d y ticks around it: %s", ny, labels);
    TAP_OK(polylines(doc, 1, &pts) == 0 && markers(doc, 1) == 1, "one point: a marker, no line");
    free(doc);
    double flat[4] = {0, 0, 0, 0};
    fs.y = flat;
    fc.title = "flat at zero";
    doc = chart(root, "flat.svg", &fc);
    ny = tick_labels(doc, "y-tick-labels", labels, sizeof labels);
    TAP_OK(ny >= 3 && strstr(labels, "0.0") && strstr(labels, "-"), "all y equal (0): %d y ticks around it: %s", ny, labels);
    free(doc);

    /* non-finite points, text oddities */
    double gx[6] = {NAN, 1, INFINITY, 3, 4, 5}, gy[6] = {1, 2, 3, NAN, 5, -INFINITY};
    double hx[4] = {1, INFINITY, 3, 4}, hy[4] = {1, 2, 3, 4}, kx[70], ky[70];
    for (int i = 0; i < 70; i++)
        kx[i] = i, ky[i] = i == 10 || i == 12 ? NAN : 1 + i % 5;
    dt_svg_series gs[4] = {{.label = "a label much longer than the legend has room for, surely", .x = gx, .y = gy, .n = 6},
                           {.label = "bad \xff utf-8\tand tab", .x = fx, .y = fy, .n = 4},
                           {.label = "x inf", .x = hx, .y = hy, .n = 4},
                           {.label = "70 points", .x = kx, .y = ky, .n = 70}};
    dt_svg_chart gc = {.title = "gaps", .series = gs, .n_series = 4};
    doc = chart(root, "gaps.svg", &gc);
    np = polylines(doc, 1, &pts);
    TAP_OK(np == 0 && markers(doc, 1) == 2, "x NaN/inf skipped, y NaN/-inf break: two lone points as markers (%d polylines)", np);
    np = polylines(doc, 3, &pts);
    TAP_OK(np == 1 && pts == 3, "an infinite x is skipped without breaking the line: %d polyline(s), the first of %d points", np, pts);
    np = polylines(doc, 4, &pts);
    TAP_OK(np == 2 && markers(doc, 4) == 1, "70 points: no markers but one for the lone point between two NaNs (%d polylines, %d markers)",
           np, markers(doc, 4));
    TAP_OK(doc && strstr(doc, ">a label much longer than th\xe2\x80\xa6</text>"), "a long legend entry ends in an ellipsis");
    TAP_OK(doc && strstr(doc, ">bad ? utf-8 and tab</text>"), "an invalid byte becomes '?', a tab a space");
    free(doc);

    /* replacing a file */
    char path[4400];
    snprintf(path, sizeof path, "%s/old.svg", root);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("old contents\n", f);
        fclose(f);
    }
    doc = chart(root, "old.svg", &lc);
    TAP_OK(doc && !strncmp(doc, "<?xml", 5), "an existing file is replaced");
    free(doc);

    /* errors */
    char sub[4300];
    snprintf(sub, sizeof sub, "%s/errors", root);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/bad.svg", sub);
    double nan4[4] = {NAN, NAN, NAN, NAN};
    dt_svg_series ns = {.label = "nan", .x = fx, .y = nan4, .n = 4};
    dt_svg_chart nc = {.title = "all NaN", .series = &ns, .n_series = 1};
    expect_error(sub, path, &nc, "\"all NaN\"", "no finite point");
    ns.x = NULL;
    expect_error(sub, path, &nc, "\"all NaN\"", "a series without x values");
    ns.x = fx;
    nc.n_series = 0;
    expect_error(sub, path, &nc, "\"all NaN\"", "no series");
    dt_svg_series many[DT_SVG_MAX_SERIES + 1];
    for (int i = 0; i <= DT_SVG_MAX_SERIES; i++)
        many[i] = (dt_svg_series){.label = "s", .x = fx, .y = fy, .n = 4};
    dt_svg_chart mc = {.title = "too many", .series = many, .n_series = DT_SVG_MAX_SERIES + 1};
    expect_error(sub, path, &mc, "\"too many\"", "17 series");
    mc.n_series = DT_SVG_MAX_SERIES;
    snprintf(path, sizeof path, "%s/sixteen.svg", root);
    doc = chart(root, "sixteen.svg", &mc);
    TAP_OK(doc && markers(doc, 16) == 4 && count(doc, strlen(doc), "<rect") > 4 * 8, "16 series: drawn, the last eight with square markers");
    free(doc);
    snprintf(path, sizeof path, "%s/bad.svg", sub);
    double zy[4] = {1, 2, 0, 4};
    dt_svg_series zs = {.label = "z", .x = fx, .y = zy, .n = 4};
    dt_svg_chart zc = {.title = "log of zero", .series = &zs, .n_series = 1, .log_y = 1};
    expect_error(sub, path, &zc, "\"log of zero\"", "y = 0 on a log axis");
    zy[2] = -3;
    expect_error(sub, path, &zc, "\"log of zero\"", "y < 0 on a log axis");
    zy[2] = 3;
    zc.fixed_y = 1, zc.y_min = 0, zc.y_max = 8;
    expect_error(sub, path, &zc, "\"log of zero\"", "fixed y_min = 0 on a log axis");
    zc.log_y = 0, zc.fixed_y = 0, zc.fixed_x = 1, zc.x_min = 2, zc.x_max = 2;
    expect_error(sub, path, &zc, "\"log of zero\"", "fixed x limits with x_min == x_max");
    zc.fixed_x = 0;
    zy[2] = 1e301;
    expect_error(sub, path, &zc, "\"log of zero\"", "a value beyond +-1e300");
    char missing[4400];
    snprintf(missing, sizeof missing, "%s/no/such/dir/c.svg", sub);
    expect_error(sub, missing, &lc, NULL, "a missing directory");
    char isdir[4400];
    snprintf(isdir, sizeof isdir, "%s/a-directory", sub);
    mkdir(isdir, 0755);
    expect_error(sub, isdir, &lc, NULL, "a directory in the way");
    struct stat st;
    TAP_OK(stat(isdir, &st) == 0 && S_ISDIR(st.st_mode), "the directory in the way is still one");

    remove_dir(isdir);
    remove_dir(sub);
    remove_dir(root);
    return tap_done();
}
