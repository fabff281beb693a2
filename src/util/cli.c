/* cli.c: checked parsing of command-line values (contract in cli.h). */
#include "config.h"

#include "util/cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/check.h"
#include "util/log.h"

/* a control byte: never written raw into a message or a file name */
static int is_control(unsigned char c)
{
    return (c > 0 && c < 0x20) || c == 0x7f;
}

/* text[0..len) into buf (n > 4) with control bytes as \xNN, cut with "..." where buf is short */
static const char *escape_span(const char *text, size_t len, char *buf, size_t n)
{
    size_t k = 0, total = 0;
    for (size_t i = 0; i < len; i++)
        total += is_control((unsigned char)text[i]) ? 4 : 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        size_t w = is_control(c) ? 4 : 1;
        if (total >= n && k + w + 4 > n) { /* too long: room for "..." and the '\0' */
            memcpy(buf + k, "...", 4);
            return buf;
        }
        if (w == 4)
            snprintf(buf + k, 5, "\\x%02x", c);
        else
            buf[k] = (char)c;
        k += w;
    }
    buf[k] = '\0';
    return buf;
}

const char *dt_cli_escape(const char *text, char *buf, size_t n)
{
    return escape_span(text ? text : "", text ? strlen(text) : 0, buf, n);
}

int dt_parse_text(const char *flag, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++)
        if (is_control((unsigned char)*p)) {
            char e[160];
            dt_error("%s: '%s' holds a control character (\\x%02x): not allowed in names, paths or values", flag,
                     dt_cli_escape(text, e, sizeof e), (unsigned char)*p);
            return DT_ERR_INPUT;
        }
    return DT_OK;
}

/* the length of the decimal number at s (the rule in cli.h): [+-]digits, and for a non-integer an
 * optional fraction and exponent; 0 when s does not start with one */
static size_t decimal_len(const char *s, int integer)
{
    size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0, digits = 0;
    for (; isdigit((unsigned char)s[i]); i++)
        digits++;
    if (!integer && s[i] == '.')
        for (i++; isdigit((unsigned char)s[i]); i++)
            digits++;
    if (digits == 0)
        return 0;
    if (!integer && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1 + (s[i + 1] == '+' || s[i + 1] == '-');
        if (!isdigit((unsigned char)s[j]))
            return 0;
        while (isdigit((unsigned char)s[j]))
            j++;
        i = j;
    }
    return i;
}

/* decimal integer text[0..len) (text[len] is ',' or '\0'): 0, -1 when it is not one, -2 when it is one
 * beyond long's range */
static int parse_long_span(const char *text, size_t len, long *out)
{
    if (len == 0 || decimal_len(text, 1) != len)
        return -1;
    errno = 0;
    long v = strtol(text, NULL, 10);
    if (errno == ERANGE)
        return -2;
    *out = v;
    return 0;
}

int dt_parse_long(const char *flag, const char *text, long min, long max, long *out)
{
    long v = 0;
    char e[160];
    int rc = text ? parse_long_span(text, strlen(text), &v) : -1;
    if (rc == -1) {
        dt_error("%s: '%s' is not an integer (expected %ld..%ld)", flag, dt_cli_escape(text, e, sizeof e), min, max);
        return DT_ERR_INPUT;
    }
    if (rc == -2 || v < min || v > max) {
        dt_error("%s: %s is out of range (expected %ld..%ld)", flag, dt_cli_escape(text, e, sizeof e), min, max);
        return DT_ERR_INPUT;
    }
    *out = v;
    return DT_OK;
}

int dt_parse_double(const char *flag, const char *text, double min, double max, double *out)
{
    char e[160];
    if (!text || !*text || decimal_len(text, 0) != strlen(text)) {
        dt_error("%s: '%s' is not a number (expected %g..%g)", flag, dt_cli_escape(text, e, sizeof e), min, max);
        return DT_ERR_INPUT;
    }
    /* the syntax is checked: strtod's ERANGE is either an overflow (inf, refused below as out of
     * range) or an underflow, whose result (a denormal or 0) is the nearest double */
    double v = strtod(text, NULL);
    if (!isfinite(v) || v < min || v > max) {
        dt_error("%s: %s is out of range (expected %g..%g)", flag, dt_cli_escape(text, e, sizeof e), min, max);
        return DT_ERR_INPUT;
    }
    *out = v;
    return DT_OK;
}

int dt_parse_bool(const char *flag, const char *text, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; text && i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(text, yes[i]) == 0) {
            *out = true;
            return DT_OK;
        }
        if (strcmp(text, no[i]) == 0) {
            *out = false;
            return DT_OK;
        }
    }
    char e[160];
    dt_error("%s: '%s' is not true or false", flag, dt_cli_escape(text, e, sizeof e));
    return DT_ERR_INPUT;
}

static int choice(const char *flag, const char *text, const char *const *choices, int nocase, int *out)
{
    char list[512], e[160];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; choices[i]; i++) {
        if (text && (nocase ? strcasecmp(text, choices[i]) : strcmp(text, choices[i])) == 0) {
            *out = i;
            return DT_OK;
        }
        if (n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
    }
    dt_error("%s: '%s' is not one of %s", flag, dt_cli_escape(text, e, sizeof e), list);
    return DT_ERR_INPUT;
}

int dt_parse_choice(const char *flag, const char *text, const char *const *choices, int *out)
{
    return choice(flag, text, choices, 0, out);
}

int dt_parse_choice_nocase(const char *flag, const char *text, const char *const *choices, int *out)
{
    return choice(flag, text, choices, 1, out);
}

int dt_parse_long_list(const char *flag, const char *text, long min, long max, long *out, int max_n, int *n)
{
    int k = 0;
    const char *p = text ? text : "";
    long prev = 0;
    char e[160];
    for (;;) {
        size_t len = strcspn(p, ",");
        long v = 0;
        int rc = parse_long_span(p, len, &v);
        if (rc == -1) {
            dt_error("%s: '%s' is not a comma-separated list of integers", flag, dt_cli_escape(text, e, sizeof e));
            return DT_ERR_INPUT;
        }
        if (rc == -2 || v < min || v > max) {
            dt_error("%s: %s is out of range (expected %ld..%ld)", flag, escape_span(p, len, e, sizeof e), min, max);
            return DT_ERR_INPUT;
        }
        if (k > 0 && v <= prev) {
            dt_error("%s: '%s' must be strictly increasing", flag, dt_cli_escape(text, e, sizeof e));
            return DT_ERR_INPUT;
        }
        if (k == max_n) {
            dt_error("%s: '%s' has more than %d values", flag, dt_cli_escape(text, e, sizeof e), max_n);
            return DT_ERR_INPUT;
        }
        out[k++] = prev = v;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *n = k;
    return DT_OK;
}
