/* tap.c: the TAP producer of tap.h. */
#include "config.h"

#include "tap.h"

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static int n_run, n_failed;

int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++n_run);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) {
        n_failed++;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void tap_skip(const char *why, const char *fmt, ...)
{
    va_list ap;
    printf("ok %d - ", ++n_run);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" # SKIP %s\n", why);
    fflush(stdout);
}

int tap_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    return 0;
}

int tap_done(void)
{
    printf("1..%d\n", n_run);
    if (n_failed)
        printf("# %d of %d failed\n", n_failed, n_run);
    return n_failed || n_run == 0 ? 1 : 0;
}

char *tap_slurp(FILE *f)
{
    fflush(f);
    if (fseek(f, 0, SEEK_END) != 0)
        return NULL;
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    return buf;
}

int tap_match(const char *text, const char *re)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB | REG_NEWLINE) != 0) {
        tap_diag("bad regular expression: %s", re);
        return 0;
    }
    int m = regexec(&r, text ? text : "", 0, NULL, 0) == 0;
    regfree(&r);
    return m;
}

int tap_count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n';
    return n;
}

static FILE *log_capture;

void tap_log_begin(void)
{
    log_capture = tmpfile();
    if (!log_capture) {
        perror("tap_log_begin: tmpfile");
        exit(99); /* a hard error for the harness */
    }
    dt_log_set_stream(log_capture);
}

char *tap_log_take(void)
{
    char *s = tap_slurp(log_capture);
    fclose(log_capture);
    tap_log_begin();
    return s ? s : calloc(1, 1);
}

void tap_log_end(void)
{
    dt_log_set_stream(NULL);
    if (log_capture)
        fclose(log_capture);
    log_capture = NULL;
}
