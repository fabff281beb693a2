/* cli.c: checked parsing of command-line values (contract in cli.h). */
#include "config.h"

#include "util/cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

/* strtol over text[0..len) only; 0 on success */
static int parse_long_span(const char *text, size_t len, long *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf || isspace((unsigned char)text[0]))
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int dt_parse_long(const char *flag, const char *text, long min, long max, long *out)
{
    long v;
    if (!text || parse_long_span(text, strlen(text), &v) != 0) {
        dt_error("%s: '%s' is not an integer (expected %ld..%ld)", flag, text ? text : "", min, max);
        return DT_ERR_INPUT;
    }
    if (v < min || v > max) {
        dt_error("%s: %ld is out of range (expected %ld..%ld)", flag, v, min, max);
        return DT_ERR_INPUT;
    }
    *out = v;
    return DT_OK;
}

int dt_parse_double(const char *flag, const char *text, double min, double max, double *out)
{
    char *end = NULL;
    double v = 0;
    if (text && *text && !isspace((unsigned char)text[0])) {
        errno = 0;
        v = strtod(text, &end);
    }
    if (!end || *end != '\0' || !isfinite(v) || (errno == ERANGE && v != 0)) {
        dt_error("%s: '%s' is not a finite number (expected %g..%g)", flag, text ? text : "", min, max);
        return DT_ERR_INPUT;
    }
    if (v < min || v > max) {
        dt_error("%s: %g is out of range (expected %g..%g)", flag, v, min, max);
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
    dt_error("%s: '%s' is not true or false", flag, text ? text : "");
    return DT_ERR_INPUT;
}

int dt_parse_choice(const char *flag, const char *text, const char *const *choices, int *out)
{
    char list[512];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; choices[i]; i++) {
        if (text && strcmp(text, choices[i]) == 0) {
            *out = i;
            return DT_OK;
        }
        if (n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
    }
    dt_error("%s: '%s' is not one of %s", flag, text ? text : "", list);
    return DT_ERR_INPUT;
}

int dt_parse_long_list(const char *flag, const char *text, long min, long max, long *out, int max_n, int *n)
{
    int k = 0;
    const char *p = text ? text : "";
    long prev = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        long v;
        if (parse_long_span(p, len, &v) != 0) {
            dt_error("%s: '%s' is not a comma-separated list of integers", flag, text ? text : "");
            return DT_ERR_INPUT;
        }
        if (v < min || v > max) {
            dt_error("%s: %ld is out of range (expected %ld..%ld)", flag, v, min, max);
            return DT_ERR_INPUT;
        }
        if (k > 0 && v <= prev) {
            dt_error("%s: '%s' must be strictly increasing", flag, text);
            return DT_ERR_INPUT;
        }
        if (k == max_n) {
            dt_error("%s: '%s' has more than %d values", flag, text, max_n);
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
