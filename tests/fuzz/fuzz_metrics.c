/* fuzz_metrics.c: the metrics reader and the report writers on arbitrary bytes (src/report/runs.h,
 * table.h). Each input is read as the metrics.jsonl of two runs of one configuration (1 and 2
 * ranks, so speed-ups are computed) and as both files of a third run, then every report is written
 * to /dev/null, and now and then the plots into a temporary folder. The input is also streamed
 * through dt_run_read_metrics in reads of 1 to 97 bytes (so lines cross reads in every way); its
 * records, state and notes must be those of dt_run_parse_metrics on the same bytes. A crash, a
 * sanitizer report, a difference between the two readers, or a plot that cannot be written (the
 * report links it) is a failure.
 *
 * Two builds:
 *   libFuzzer:  clang -fsanitize=fuzzer,address,undefined -DDT_LIBFUZZER ... (its own main);
 *               DT_FUZZ_PLOTS=1 also writes the plots for every input.
 *   plain:      any compiler; "fuzz_metrics [-t SECONDS] [-s SEED] [CORPUS...]" runs each corpus
 *               file, then random mutations of them (bit flips, JSON tokens, cut, repeated and
 *               spliced lines) until SECONDS (default 10) have passed, and prints the count. Under
 *               ASan/UBSan a failing input is saved as fuzz_metrics-crash.jsonl in the current
 *               folder; the same seed replays the same inputs.
 * Exit 0 when nothing failed. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report/runs.h"
#include "report/table.h"
#include "util/log.h"

static const char config[] =
    "{\"arch\":\"resnet50\",\"dataset\":\"imagenet\",\"device\":\"cuda\",\"world_size\":2,\"nodes\":1,"
    "\"ranks_per_node\":2,\"batch_per_rank\":256,\"global_batch\":512,\"epochs\":3,\"desired_acc\":50.0,"
    "\"amp\":{\"opt_level\":1,\"precision\":\"fp16\",\"loss_scale\":\"dynamic\"}}";

static FILE *sink;
static int plots_every; /* 0: never; n: every n-th input */
static char plots_dir[4200];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void add_run(dt_run_set *s, const char *dir, const char *cfg, size_t cfg_len, int ranks, const uint8_t *data,
                    size_t size)
{
    dt_run r;
    if (dt_run_init(&r, "fuzz", dir) != 0)
        abort();
    if (dt_run_parse_config(&r, cfg, cfg_len) != 0)
        abort();
    if (ranks > 0 && r.have_config)
        r.world_size = ranks;
    if (dt_run_parse_metrics(&r, (const char *)data, size) != 0 || dt_runs_append(s, &r) != 0)
        abort();
}

static int same_double(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* 1 when the two readers left the same run (field by field: structs have padding) */
static int same_run(const dt_run *a, const dt_run *b)
{
    if (a->n_epoch_lines != b->n_epoch_lines || a->n_step_lines != b->n_step_lines || a->n_notes != b->n_notes ||
        a->state != b->state ||
        a->in_progress != b->in_progress || a->stopped != b->stopped || a->ended != b->ended ||
        strcmp(a->end_reason, b->end_reason) || a->end_signal != b->end_signal || a->end_epoch != b->end_epoch ||
        a->end_step != b->end_step)
        return 0;
    for (size_t i = 0; i < a->n_epoch_lines; i++) {
        const dt_run_epoch *x = &a->epoch_lines[i], *y = &b->epoch_lines[i];
        if (x->epoch != y->epoch || x->step != y->step || !same_double(x->train_loss, y->train_loss) ||
            !same_double(x->train_top1, y->train_top1) || !same_double(x->train_top5, y->train_top5) ||
            !same_double(x->val_loss, y->val_loss) || !same_double(x->val_top1, y->val_top1) ||
            !same_double(x->val_top5, y->val_top5) || !same_double(x->img_per_s, y->img_per_s) ||
            !same_double(x->time_s, y->time_s) || !same_double(x->loss_scale, y->loss_scale))
            return 0;
    }
    for (size_t i = 0; i < a->n_step_lines; i++) {
        const dt_run_step *x = &a->step_lines[i], *y = &b->step_lines[i];
        if (x->epoch != y->epoch || x->epoch_step != y->epoch_step || x->step != y->step ||
            !same_double(x->img_per_s, y->img_per_s) || !same_double(x->loss_scale, y->loss_scale))
            return 0;
    }
    for (size_t i = 0; i < a->n_notes; i++)
        if (strcmp(a->notes[i].text, b->notes[i].text) ||
            (!a->notes[i].detail) != (!b->notes[i].detail) ||
            (a->notes[i].detail && strcmp(a->notes[i].detail, b->notes[i].detail)))
            return 0;
    return 1;
}

/* the input streamed in reads of chunk bytes: the same run as from the buffer, or abort */
static void check_stream(const uint8_t *data, size_t size, size_t chunk)
{
    dt_run a, b;
    if (dt_run_init(&a, "fuzz", "fuzz/a") || dt_run_init(&b, "fuzz", "fuzz/a") ||
        dt_run_parse_config(&a, config, sizeof config - 1) || dt_run_parse_config(&b, config, sizeof config - 1))
        abort();
    /* fmemopen wants a writable buffer, and refuses a size of 0 in older C libraries: an empty
     * input is an empty file */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    FILE *f = size ? fmemopen(copy, size, "rb") : fopen("/dev/null", "rb");
    if (!f || dt_run_parse_metrics(&a, (const char *)data, size) || dt_run_read_metrics(&b, f, chunk))
        abort();
    fclose(f);
    free(copy);
    if (!same_run(&a, &b)) {
        fprintf(stderr, "fuzz_metrics: reads of %zu bytes give another run than the buffer\n", chunk);
        abort();
    }
    dt_run_free(&a);
    dt_run_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long count;
    if (!sink) {
        dt_log_set_level(DT_LOG_ERROR);
        if (!(sink = fopen("/dev/null", "w")))
            abort();
        const char *e = getenv("DT_FUZZ_PLOTS");
        if (e && *e == '1')
            plots_every = 1;
    }
    dt_run_set s = {0};
    static char name[] = "fuzz";
    char *source = name;
    s.sources = &source;
    s.n_sources = 1;
    add_run(&s, "fuzz/a", config, sizeof config - 1, 1, data, size);
    add_run(&s, "fuzz/b", config, sizeof config - 1, 2, data, size);
    add_run(&s, "fuzz/c", (const char *)data, size, 0, data, size);
    check_stream(data, size, 1 + (size * 31 + (size ? data[size / 2] : 0)) % 97);
    if (dt_runs_compute(&s) != 0)
        abort();
    dt_report_opts o = {.date = 0, .plots_href = "plots"};
    if (dt_report_md(sink, &s, &o) != 0 || dt_report_csv(sink, &s) != 0 || dt_report_json(sink, &s) != 0)
        abort();
    if (plots_every && ++count % plots_every == 0) {
        if (!plots_dir[0]) {
            const char *tmp = getenv("TMPDIR");
            snprintf(plots_dir, sizeof plots_dir, "%s/fuzz_metrics.XXXXXX", tmp && *tmp ? tmp : "/tmp");
            if (!mkdtemp(plots_dir))
                abort();
        }
        if (dt_report_plots(&s, plots_dir) != 0) /* the report would link a missing file */
            abort();
    }
    s.sources = NULL;
    s.n_sources = 0;
    dt_runs_free(&s);
    return 0;
}

#ifndef DT_LIBFUZZER
#define MAX_INPUT 65536

static uint64_t rng_state;
static uint64_t next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

static const char *const tokens[] = {
    "null", "-1", "0", "1e309", "1e300", "-0.0", "1.5", "100.0001", "9223372036854775807", "18446744073709551616",
    "true", "[]", "{}", "\"\"", "\n", "\r\n", ",", ":", "\"kind\":\"epoch\",", "\"kind\":\"step\",", "\"kind\":7,",
    "\"epoch\":", "\"val_top1\":null,", "\"time_s\":", "\"img_per_s\":", "\"loss_scale\":0,", "\"step\":-5,",
    "\"epoch_step\":0,", "\"\\u0000\"", "\xff\xfe", "{\"kind\":\"epoch\",\"epoch\":0,\"train_top1\":1,\"train_top5\":2,"
    "\"img_per_s\":3,\"time_s\":4}\n",
};

/* one random edit of b (n bytes, room for MAX_INPUT); returns the new length */
static size_t mutate(char *b, size_t n, char *const *corpus, const size_t *lens, size_t nc)
{
    size_t at = below(n + 1);
    switch (below(9)) {
    case 0: /* flip a bit */
        if (n)
            b[below(n)] ^= (char)(1u << below(8));
        break;
    case 1: { /* a byte from the JSON alphabet */
        static const char alpha[] = "\n{}[]\",:0123456789.-e \\ntf";
        if (n)
            b[below(n)] = alpha[below(sizeof alpha - 1)];
        break;
    }
    case 2: { /* delete a range */
        size_t len = below(n - at + 1) % 64;
        memmove(b + at, b + at + len, n - at - len);
        n -= len;
        break;
    }
    case 3: { /* repeat a range */
        size_t len = below(n - at + 1) % 256;
        if (n + len <= MAX_INPUT) {
            memmove(b + at + len, b + at, n - at);
            n += len;
        }
        break;
    }
    case 4: { /* insert a token */
        const char *t = tokens[below(sizeof tokens / sizeof *tokens)];
        size_t len = strlen(t);
        if (n + len <= MAX_INPUT) {
            memmove(b + at + len, b + at, n - at);
            memcpy(b + at, t, len);
            n += len;
        }
        break;
    }
    case 5: /* cut: a line being written */
        n = at;
        break;
    case 6: { /* splice another entry's tail */
        if (!nc)
            break;
        size_t k = below(nc), from = below(lens[k] + 1), len = lens[k] - from;
        if (at + len > MAX_INPUT)
            len = MAX_INPUT - at;
        memcpy(b + at, corpus[k] + from, len);
        n = at + len;
        break;
    }
    case 7: { /* repeat a whole line (an epoch logged twice) */
        char *s = memchr(b + at, '\n', n - at);
        char *e = s ? memchr(s + 1, '\n', (size_t)(b + n - s - 1)) : NULL;
        if (s && e && n + (size_t)(e - s) <= MAX_INPUT) {
            size_t len = (size_t)(e - s);
            memmove(e + len, e, (size_t)(b + n - e));
            memcpy(e, s, len);
            n += len;
        }
        break;
    }
    default: { /* a number replaced by another */
        size_t i = at;
        while (i < n && (b[i] < '0' || b[i] > '9'))
            i++;
        size_t j = i;
        while (j < n && ((b[j] >= '0' && b[j] <= '9') || b[j] == '.' || b[j] == 'e' || b[j] == '-'))
            j++;
        char num[32];
        static const double vals[] = {0, -1, 1, 100, 100.5, 1e-300, 1e300, 65536, 4294967296.0, 0.5};
        int len = below(3) ? snprintf(num, sizeof num, "%g", vals[below(10)])
                           : snprintf(num, sizeof num, "%llu", (unsigned long long)next() >> below(64));
        if (i < n && n - (j - i) + (size_t)len <= MAX_INPUT) {
            memmove(b + i + len, b + j, n - j);
            memcpy(b + i, num, (size_t)len);
            n = n - (j - i) + (size_t)len;
        }
        break;
    }
    }
    return n;
}

static char *current;
static size_t current_len;

/* ASan/UBSan call this before they exit on a finding: keep the input */
static void save_input(void)
{
    FILE *f = fopen("fuzz_metrics-crash.jsonl", "wb");
    if (f) {
        fwrite(current, 1, current_len, f);
        fclose(f);
        fprintf(stderr, "fuzz_metrics: the failing input is in fuzz_metrics-crash.jsonl\n");
    }
}
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    double seconds = 10;
    uint64_t seed = (uint64_t)time(NULL);
    int c;
    while ((c = getopt(argc, argv, "t:s:h")) != -1) {
        char *end;
        switch (c) {
        case 't':
            seconds = strtod(optarg, &end);
            if (*end || !(seconds >= 0 && seconds <= 86400)) {
                fprintf(stderr, "fuzz_metrics: -t %s: seconds in 0..86400 expected\n", optarg);
                return 2;
            }
            break;
        case 's':
            seed = strtoull(optarg, &end, 10);
            if (*end || !*optarg) {
                fprintf(stderr, "fuzz_metrics: -s %s: a decimal seed expected\n", optarg);
                return 2;
            }
            break;
        default: fprintf(stderr, "usage: fuzz_metrics [-t SECONDS] [-s SEED] [CORPUS...]\n"); return c == 'h' ? 0 : 2;
        }
    }
    size_t nc = (size_t)(argc - optind);
    char **corpus = calloc(nc + 1, sizeof *corpus);
    size_t *lens = calloc(nc + 1, sizeof *lens);
    current = malloc(MAX_INPUT + 1);
    if (!corpus || !lens || !current)
        return 1;
    for (size_t i = 0; i < nc; i++) {
        FILE *f = fopen(argv[optind + (int)i], "rb");
        if (!f || !(corpus[i] = malloc(MAX_INPUT))) {
            fprintf(stderr, "fuzz_metrics: %s: cannot read\n", argv[optind + (int)i]);
            return 1;
        }
        lens[i] = fread(corpus[i], 1, MAX_INPUT, f);
        fclose(f);
    }
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(save_input);
    rng_state = seed * 2654435761u + 88172645463325252ull;
    printf("fuzz_metrics: seed %llu, %zu corpus files, %.0f s\n", (unsigned long long)seed, nc, seconds);
    fflush(stdout);
    plots_every = 16;
    long runs = 0;
    for (size_t i = 0; i < nc; i++, runs++) {
        memcpy(current, corpus[i], lens[i]);
        current_len = lens[i];
        LLVMFuzzerTestOneInput((const uint8_t *)current, current_len);
    }
    double t0 = now();
    while (now() - t0 < seconds) {
        size_t k = below(nc + 1); /* nc: start from nothing */
        current_len = k < nc ? lens[k] : 0;
        if (current_len)
            memcpy(current, corpus[k], current_len);
        for (size_t m = 1 + below(8); m > 0; m--)
            current_len = mutate(current, current_len, corpus, lens, nc);
        LLVMFuzzerTestOneInput((const uint8_t *)current, current_len);
        runs++;
    }
    printf("fuzz_metrics: %ld inputs in %.1f s, no failure\n", runs, now() - t0);
    if (plots_dir[0]) { /* the plots' scratch folder */
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", plots_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "fuzz_metrics: could not remove %s\n", plots_dir);
    }
    for (size_t i = 0; i < nc; i++)
        free(corpus[i]);
    free(corpus);
    free(lens);
    free(current);
    return 0;
}
#endif
