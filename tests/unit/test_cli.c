/* test_cli.c: checked value parsing: accepted forms, refused forms, bounds, and the one-line message
 * naming the flag; the one rule for numbers (decimal only, 2^63 and 1e999 out of range, 1e-310 a
 * number), and control bytes refused and shown escaped. */
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

/* one error line containing both */
static int said2(const char *want, const char *also)
{
    char *s = tap_log_take();
    int ok = tap_count_lines(s) == 1 && strstr(s, want) != NULL && strstr(s, also) != NULL;
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
    const char *bad[] = {"", "abc", "12x", " 3", "3 ", "1.5", "0x10", "1e3", "+", "-", "+-3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TAP_OK(dt_parse_long("--epochs", bad[i], 1, 100000, &v) == DT_ERR_INPUT && v == 11, "'%s' refused", bad[i]);
        TAP_OK(said("--epochs: '"), "and named");
    }
    TAP_OK(dt_parse_long("--epochs", NULL, 1, 100000, &v) == DT_ERR_INPUT, "missing value refused");
    free(tap_log_take());
    TAP_OK(dt_parse_long("--epochs", "0", 1, 100000, &v) == DT_ERR_INPUT && v == 11, "below range refused");
    TAP_OK(said("--epochs: 0 is out of range (expected 1..100000)"), "range in message");
    TAP_OK(dt_parse_long("--n", "9223372036854775807", 0, LONG_MAX, &v) == DT_OK && v == LONG_MAX, "LONG_MAX");
    /* an integer beyond long is out of range, as one beyond the flag's range is (cli.h) */
    TAP_OK(dt_parse_long("--n", "9223372036854775808", 0, LONG_MAX, &v) == DT_ERR_INPUT &&
               said("--n: 9223372036854775808 is out of range (expected 0..9223372036854775807)"),
           "2^63 is out of range");
    TAP_OK(dt_parse_long("--n", "-99999999999999999999999", -5, 5, &v) == DT_ERR_INPUT &&
               said("--n: -99999999999999999999999 is out of range (expected -5..5)"),
           "-10^23 is out of range");
    TAP_OK(dt_parse_long("--n", "0000000000000000000000000000000000000042", 0, 100, &v) == DT_OK && v == 42,
           "leading zeros");

    double d = -1;
    TAP_OK(dt_parse_double("--lr", "0.1", 0, 10, &d) == DT_OK && d == 0.1, "--lr 0.1");
    TAP_OK(dt_parse_double("--wd", "1e-4", 0, 1, &d) == DT_OK && d == 1e-4, "--wd 1e-4");
    d = 5;
    /* decimal only: hex, inf and nan, which strtod reads, are not numbers here (cli.h) */
    const char *badd[] = {"", "nan", "inf", "-inf", "infinity", "0.1x", " 1", "abc", "0x10", "0x1p3", "1e", "e5", ".",
                          "1e+", "--1", "1.2.3"};
    for (size_t i = 0; i < sizeof badd / sizeof badd[0]; i++) {
        TAP_OK(dt_parse_double("--lr", badd[i], 0, 10, &d) == DT_ERR_INPUT && d == 5, "'%s' refused", badd[i]);
        TAP_OK(said2("--lr: '", "' is not a number (expected 0..10)"), "and named");
    }
    TAP_OK(dt_parse_double("--lr", "1e999", 0, 10, &d) == DT_ERR_INPUT && d == 5 &&
               said("--lr: 1e999 is out of range (expected 0..10)"),
           "1e999 is out of range");
    TAP_OK(dt_parse_double("--lr", "1e-310", 0, 10, &d) == DT_OK && d > 0 && d < 1e-300,
           "1e-310 is a number (denormal)");
    TAP_OK(dt_parse_double("--lr", "1e-400", 0, 10, &d) == DT_OK && d == 0, "1e-400 is a number (0)");
    TAP_OK(dt_parse_double("--eps", "1e-310", 1e-30, 1, &d) == DT_ERR_INPUT &&
               said("--eps: 1e-310 is out of range (expected 1e-30..1)"),
           "a denormal is range-checked");
    TAP_OK(dt_parse_double("--lr", ".5", 0, 10, &d) == DT_OK && d == 0.5, ".5");
    TAP_OK(dt_parse_double("--lr", "+5.", 0, 10, &d) == DT_OK && d == 5, "+5.");
    TAP_OK(dt_parse_double("--lr", "2E-1", 0, 10, &d) == DT_OK && d == 0.2, "2E-1");
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
    static const char *const opts[] = {"sgd", "adamw", NULL};
    TAP_OK(dt_parse_choice_nocase("--opt", "AdamW", opts, &k) == DT_OK && k == 1, "--opt AdamW (case ignored)");

    /* control bytes: refused by dt_parse_text, and escaped in every message */
    TAP_OK(dt_parse_text("--run-name", "plain name/é") == DT_OK, "plain text (UTF-8 too) passes");
    TAP_OK(dt_parse_text("--run-name", "a\nb") == DT_ERR_INPUT &&
               said("--run-name: 'a\\x0ab' holds a control character (\\x0a)"),
           "a newline refused, escaped");
    TAP_OK(dt_parse_long("--epochs", "1\x1b[2J", 1, 9, &v) == DT_ERR_INPUT && said("--epochs: '1\\x1b[2J' is not"),
           "escaped in a parser's message");
    char buf[16];
    TAP_OK(!strcmp(dt_cli_escape("\x7f\x01" "abcdefghijklmnop", buf, sizeof buf), "\\x7f\\x01abcd..."),
           "cut with ...: %s", buf);
    TAP_OK(!strcmp(dt_cli_escape("abcdefghijklmno", buf, sizeof buf), "abcdefghijklmno"), "15 bytes fit in 16: %s", buf);

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
