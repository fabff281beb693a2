/* test_log.c: the log line format, levels, the per-rank file, long and concurrent lines. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "util/log.h"

#define STAMP "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} "


static void *writer(void *arg)
{
    long t = (long)arg;
    for (int i = 0; i < 500; i++)
        dt_info("thread %ld line %d %s", t, i, "padding padding padding padding padding padding");
    return NULL;
}

int main(void)
{
    tap_log_begin();
    dt_log_set_rank(3, 8);
    dt_log_set_host("node2");

    dt_info("hello %d", 5);
    char *s = tap_log_take();
    TAP_OK(tap_match(s, STAMP "\\[rank 3/8 node2\\] info: hello 5\n$"), "line format: %s", s);
    TAP_OK(tap_count_lines(s) == 1, "one line");
    free(s);

    dt_log_set_device(1);
    dt_warn("w");
    s = tap_log_take();
    TAP_OK(tap_match(s, STAMP "\\[rank 3/8 node2 gpu1\\] warn: w\n$"), "device shown: %s", s);
    free(s);
    dt_log_set_device(-1);

    dt_log_set_level(DT_LOG_WARN);
    dt_info("hidden");
    dt_debug("hidden");
    dt_error("shown");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "error: shown"), "threshold warn keeps error, drops info/debug");
    free(s);
    dt_log_set_level(DT_LOG_INFO);

    dt_log_set_rank(0, 8);

    enum dt_log_level lv = DT_LOG_ERROR;
    TAP_OK(dt_log_parse_level("debug", &lv) == 0 && lv == DT_LOG_DEBUG, "parse debug");
    TAP_OK(dt_log_parse_level("loud", &lv) == -1 && lv == DT_LOG_DEBUG, "parse rejects 'loud', output untouched");
    TAP_OK(dt_log_parse_level(NULL, &lv) == -1, "parse rejects NULL");

    setenv("DT_LOG_LEVEL", "debug", 1);
    dt_log_init();
    TAP_OK(dt_log_get_level() == DT_LOG_DEBUG, "DT_LOG_LEVEL=debug honoured");
    setenv("DT_LOG_LEVEL", "loud", 1);
    dt_log_init();
    s = tap_log_take();
    TAP_OK(dt_log_get_level() == DT_LOG_DEBUG && tap_match(s, "warn: DT_LOG_LEVEL='loud' is not one of"),
           "bad DT_LOG_LEVEL warned about and ignored: %s", s);
    free(s);
    unsetenv("DT_LOG_LEVEL");
    dt_log_set_level(DT_LOG_INFO);

    char big[10000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    dt_info("%s: cannot create it: File name too long", big); /* a path longer than a line: its reason kept */
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strlen(s) <= DT_LOG_LINE_MAX + 1 && tap_match(s, "info: xxx") &&
               tap_match(s, "x \\[\\.\\.\\.\\] x") && tap_match(s, "x: cannot create it: File name too long\n$"),
           "long message cut in the middle to one line of at most %d bytes, its start and its reason kept (%zu bytes)",
           DT_LOG_LINE_MAX, strlen(s));
    free(s);

    dt_info("ends in newline\n");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1, "trailing newline gives one line");
    free(s);

    errno = EDOM;
    dt_info("keep errno");
    TAP_OK(errno == EDOM, "errno preserved across a log call");
    free(tap_log_take());

    char path[] = "/tmp/dtrain-test-log-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    TAP_OK(dt_log_open_file(path) == 0, "open per-rank log file");
    dt_info("to both");
    dt_log_close_file();
    FILE *f = fopen(path, "r");
    char *fs = f ? tap_slurp(f) : NULL;
    s = tap_log_take();
    TAP_OK(fs && strstr(fs, "info: to both") && strstr(s, "info: to both"), "line in the stream and the file");
    free(fs);
    free(s);
    if (f)
        fclose(f);
    unlink(path);
    TAP_OK(dt_log_open_file("/nonexistent-dir/rank-0.log") == -1, "unopenable log file refused");
    s = tap_log_take();
    TAP_OK(tap_match(s, "error: cannot open log file /nonexistent-dir/rank-0.log: No such file"), "and says why: %s", s);
    free(s);

    pthread_t th[4];
    for (long t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, writer, (void *)t);
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    s = tap_log_take();
    int lines = tap_count_lines(s), good = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        good += tap_match(line, STAMP "\\[rank 0/8 node2\\] info: thread [0-3] line [0-9]+ padding( padding){5}$");
    TAP_OK(lines == 2000 && good == 2000, "4 threads x 500 lines: %d lines, %d well-formed", lines, good);
    free(s);

    dt_log_set_host(NULL);
    char host[256] = "";
    gethostname(host, sizeof host);
    host[strcspn(host, ".")] = '\0';
    dt_info("host");
    s = tap_log_take();
    char want[300];
    snprintf(want, sizeof want, "\\[rank 0/8 %s\\]", host);
    TAP_OK(tap_match(s, want), "default host is the short host name '%s'", host);
    free(s);

    tap_log_end();
    return tap_done();
}
