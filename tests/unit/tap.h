/* tap.h: a small TAP producer for dtrain's C unit tests (run by automake's tap-driver.sh).
 *
 *     TAP_OK(x == 3, "x is %d", x);          "ok 1 - x is 3" or "not ok 1 - ..." plus where
 *     tap_skip_all("no MPI in this build");   "1..0 # SKIP ..." (the whole file skipped, with reason)
 *     return tap_done();                      prints the plan, exit status 1 if anything failed
 */
#ifndef DT_TESTS_TAP_H
#define DT_TESTS_TAP_H

#include <stdio.h>

int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define TAP_OK(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tap_skip(const char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tap_skip_all(const char *why);
int tap_done(void);

/* Send dtrain's log lines to a temporary file from now on (tap_log_end restores stderr). */
void tap_log_begin(void);
/* The log lines written since tap_log_begin or the last tap_log_take (malloc'd; the caller frees). */
char *tap_log_take(void);
void tap_log_end(void);

/* The whole contents of f from its start, NUL-terminated (malloc'd; the caller frees), or NULL. */
char *tap_slurp(FILE *f);
/* Does text match the POSIX extended regular expression re? (A bad re fails the test.) */
int tap_match(const char *text, const char *re);
/* Number of lines (newline-terminated) in text. */
int tap_count_lines(const char *text);

#endif
