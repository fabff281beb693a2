/* tap.h: a small TAP producer for dtrain's C tests (run by automake's tap-driver.sh). Header only:
 * each test is one C file that includes it, so the tests link nothing but the default LDADD.
 *
 *     TAP_OK(x == 3, "x is %d", x);          "ok 1 - x is 3" or "not ok 1 - ..." plus where
 *     tap_skip_all("no MPI in this build");   "1..0 # SKIP ..." (the whole file skipped, with reason)
 *     return tap_done();                      prints the plan, exit status 1 if anything failed
 *
 * Also: tap_diag (a "# " line), tap_skip (one skipped test with its reason); tap_log_begin /
 * tap_log_take / tap_log_end (capture dtrain's log lines); tap_slurp (a whole FILE as a string),
 * tap_match (POSIX extended regex), tap_count_lines.
 */
#ifndef DT_TESTS_TAP_H
#define DT_TESTS_TAP_H

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define TAP_FN static __attribute__((unused))
#define TAP_OK(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
TAP_FN int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
TAP_FN void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TAP_FN void tap_skip(const char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int tap_n_run, tap_n_failed;

TAP_FN int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n_run);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) {
        tap_n_failed++;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

TAP_FN void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

TAP_FN void tap_skip(const char *why, const char *fmt, ...)
{
    va_list ap;
    printf("ok %d - ", ++tap_n_run);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" # SKIP %s\n", why);
    fflush(stdout);
}

TAP_FN int tap_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    return 0;
}

TAP_FN int tap_done(void)
{
    printf("1..%d\n", tap_n_run);
    if (tap_n_failed)
        printf("# %d of %d failed\n", tap_n_failed, tap_n_run);
    return tap_n_failed || tap_n_run == 0 ? 1 : 0;
}

TAP_FN char *tap_slurp(FILE *f)
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

TAP_FN int tap_match(const char *text, const char *re)
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

TAP_FN int tap_count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n';
    return n;
}

static FILE *tap_log_capture;

TAP_FN void tap_log_begin(void)
{
    tap_log_capture = tmpfile();
    if (!tap_log_capture) {
        perror("tap_log_begin: tmpfile");
        exit(99); /* a hard error for the harness */
    }
    dt_log_set_stream(tap_log_capture);
}

TAP_FN char *tap_log_take(void)
{
    char *s = tap_slurp(tap_log_capture);
    fclose(tap_log_capture);
    tap_log_begin();
    return s ? s : calloc(1, 1);
}

TAP_FN void tap_log_end(void)
{
    dt_log_set_stream(NULL);
    if (tap_log_capture)
        fclose(tap_log_capture);
    tap_log_capture = NULL;
}

#endif
