/* test_cli.c: checked value parsing: accepted forms, refused forms, bounds, and the one-line message
 * naming the flag. */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"


/* one error line containing want */
static int said(const char *want)
{
    char *s = tap_log_take();
    int ok = tap_count_lines(s) == 1 && strstr(s, want) != NULL;
    if (!ok)
        tap_diag("log was: %s", s);
    free(s);
    return ok;
}

int main(void)
{
    tap_log_begin();
    long v = -7;
    TAP_OK(dt_parse_long("--epochs", "90", 1, 100000, &v) == DT_OK && v == 90, "--epochs 90");
    TAP_OK(dt_parse_long("--x", "-3", -5, 5, &v) == DT_OK && v == -3, "negative in range");
    TAP_OK(dt_parse_long("--x", "+4", -5, 5, &v) == DT_OK && v == 4, "explicit plus");
    v = 11;
    const char *bad[] = {"", "abc", "12x", " 3", "3 ", "1.5", "0x10", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TAP_OK(dt_parse_long("--epochs", bad[i], 1, 100000, &v) == DT_ERR_INPUT && v == 11, "'%s' refused", bad[i]);
        TAP_OK(said("--epochs: '"), "and named");
    }
    TAP_OK(dt_parse_long("--epochs", NULL, 1, 100000, &v) == DT_ERR_INPUT, "missing value refused");
    free(tap_log_take());
    TAP_OK(dt_parse_long("--epochs", "0", 1, 100000, &v) == DT_ERR_INPUT && v == 11, "below range refused");
    TAP_OK(said("--epochs: 0 is out of range (expected 1..100000)"), "range in message");
    TAP_OK(dt_parse_long("--n", "9223372036854775807", 0, LONG_MAX, &v) == DT_OK && v == LONG_MAX, "LONG_MAX");

    double d = -1;
    TAP_OK(dt_parse_double("--lr", "0.1", 0, 10, &d) == DT_OK && d == 0.1, "--lr 0.1");
    TAP_OK(dt_parse_double("--wd", "1e-4", 0, 1, &d) == DT_OK && d == 1e-4, "--wd 1e-4");
    d = 5;
    const char *badd[] = {"", "nan", "inf", "-inf", "0.1x", " 1", "1e999", "abc"};
    for (size_t i = 0; i < sizeof badd / sizeof badd[0]; i++) {
        TAP_OK(dt_parse_double("--lr", badd[i], 0, 10, &d) == DT_ERR_INPUT && d == 5, "'%s' refused", badd[i]);
        TAP_OK(said("--lr: '"), "and named");
    }
    TAP_OK(dt_parse_double("--lr", "11", 0, 10, &d) == DT_ERR_INPUT && said("--lr: 11 is out of range (expected 0..10)"),
           "double above range refused");

    bool b = false;
    TAP_OK(dt_parse_bool("--keep-batchnorm-fp32", "true", &b) == DT_OK && b, "true");
    TAP_OK(dt_parse_bool("--keep-batchnorm-fp32", "off", &b) == DT_OK && !b, "off");
    TAP_OK(dt_parse_bool("--keep-batchnorm-fp32", "maybe", &b) == DT_ERR_INPUT &&
               said("--keep-batchnorm-fp32: 'maybe' is not true or false"),
           "maybe refused");

    static const char *const levels[] = {"O0", "O1", "O2", "O3", NULL};
    int k = -1;
    TAP_OK(dt_parse_choice("--opt-level", "O2", levels, &k) == DT_OK && k == 2, "O2 is choice 2");
    TAP_OK(dt_parse_choice("--opt-level", "o2", levels, &k) == DT_ERR_INPUT && k == 2 &&
               said("--opt-level: 'o2' is not one of O0, O1, O2, O3"),
           "case matters, choices listed");

    long steps[4];
    int n = -1;
    TAP_OK(dt_parse_long_list("--lr-steps", "30,60,80", 1, 1000, steps, 4, &n) == DT_OK && n == 3 && steps[0] == 30 &&
               steps[2] == 80,
           "30,60,80");
    TAP_OK(dt_parse_long_list("--lr-steps", "5", 1, 1000, steps, 4, &n) == DT_OK && n == 1 && steps[0] == 5, "one value");
    n = -1;
    const char *badl[] = {"", "30,", ",30", "30,,60", "30;60", "60,30", "30,30", "1,2,3,4,5", "0,5"};
    for (size_t i = 0; i < sizeof badl / sizeof badl[0]; i++) {
        TAP_OK(dt_parse_long_list("--lr-steps", badl[i], 1, 1000, steps, 4, &n) == DT_ERR_INPUT && n == -1,
               "'%s' refused", badl[i]);
        TAP_OK(said("--lr-steps: "), "and named");
    }
    tap_log_end();
    return tap_done();
}
