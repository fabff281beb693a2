/* cli_main.c: the options every program of the suite shares and the refusals of getopt_long
 * (dt_cli_common), and the check of standard output at the end of main (dt_cli_exit); contracts in
 * cli.h. Not in libdt (Makefile.am's LIBDT_SOURCES): --version needs the build information of
 * libdtcore. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>

#include "util/buildinfo.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

/* The option getopt_long just refused or took, as the user wrote it, into buf (escaped): the long
 * option elem ("--name[=value]") up to its '=', else the short option opt. (getopt_long moves
 * optind past a short option only when it is the last of its group, "-eb": so argv[optind - 1] is
 * not always the one refused, and a short one is named by its letter.) */
static const char *written(int opt, const char *elem, char *buf, size_t n)
{
    if (elem && !strncmp(elem, "--", 2)) {
        char name[160];
        size_t len = strcspn(elem, "=");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), elem);
        return dt_cli_escape(name, buf, n);
    }
    char letter[2] = {(char)opt, '\0'}, e[8];
    snprintf(buf, n, "-%s", dt_cli_escape(letter, e, sizeof e));
    return buf;
}

/* the long options whose names start with name[0..len), ", "-separated into buf; their count */
static int prefixed(const struct option *opts, const char *name, size_t len, char *buf, size_t n)
{
    int count = 0;
    size_t k = 0;
    buf[0] = '\0';
    for (const struct option *o = opts; o && o->name; o++)
        if (!strncmp(o->name, name, len)) {
            if (k < n)
                k += (size_t)snprintf(buf + k, n - k, "%s--%s", count ? ", " : "", o->name);
            count++;
        }
    return count;
}

/* the option of opts that takes no value and whose getopt value is val, when elem ("--nesterov=0",
 * or an abbreviation "--nest=0") names it with a value; else NULL */
static const struct option *took_no_value(const struct option *opts, const char *elem, int val)
{
    if (!elem || strncmp(elem, "--", 2) || !strchr(elem, '='))
        return NULL;
    size_t len = strcspn(elem + 2, "=");
    for (const struct option *o = opts; o && o->name; o++)
        if (o->has_arg == no_argument && o->val == val && !strncmp(o->name, elem + 2, len))
            return o;
    return NULL;
}

/* a refusal by getopt_long (':' or '?'): one line naming the option as written */
static void refused(int opt, const char *prog, char *const argv[], const struct option *opts)
{
    char name[200], e[160], list[400];
    const char *elem = optind > 0 ? argv[optind - 1] : NULL;
    const struct option *o;
    if (opt == ':') {
        dt_error("%s: missing value (see %s --help)", written(optopt, elem, name, sizeof name), prog);
    } else if (optopt == 0 && elem && !strncmp(elem, "--", 2)) { /* not in opts, or an abbreviation of several */
        written(0, elem, name, sizeof name);
        if (prefixed(opts, elem + 2, strcspn(elem + 2, "="), list, sizeof list) > 1)
            dt_error("%s: ambiguous option: it could be %s (see %s --help)", name, list, prog);
        else
            dt_error("%s: unknown option (see %s --help)", name, prog);
    } else if ((o = took_no_value(opts, elem, optopt))) {
        written(0, elem, name, sizeof name);
        if (!strcmp(name + 2, o->name))
            dt_error("%s: the option takes no value (see %s --help)", dt_cli_escape(elem, e, sizeof e), prog);
        else
            dt_error("%s: --%s takes no value (see %s --help)", dt_cli_escape(elem, e, sizeof e), o->name, prog);
    } else { /* a short option not in the optstring */
        dt_error("%s: unknown option (see %s --help)", written(optopt, NULL, name, sizeof name), prog);
    }
}

int dt_cli_common(int opt, int log_opt, const char *prog, char *const argv[], const struct option *opts,
                  void (*usage)(FILE *))
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    if (opt == ':' || opt == '?') {
        refused(opt, prog, argv, opts);
        return 2;
    }
    if (optarg) { /* names, paths and values go into file names and messages: no control bytes */
        /* the option is argv[optind - 2] when its value was the next element, else the element
         * holding both ("--run-name=x", "-ax") */
        const char *elem = optarg == argv[optind - 1] && optind >= 2 ? argv[optind - 2] : argv[optind - 1];
        char name[200];
        if (dt_parse_text(written(opt, elem, name, sizeof name), optarg) != DT_OK)
            return 2;
    }
    if (opt == log_opt) {
        int lv;
        if (dt_parse_choice("--log-level", optarg, levels, &lv))
            return 2;
        dt_log_set_level((enum dt_log_level)lv);
        return DT_CLI_GO_ON;
    }
    switch (opt) {
    case 'h': usage(stdout); return 0;
    case 'V': dt_buildinfo_print(stdout, prog); return 0;
    default: return DT_CLI_MINE;
    }
}

int dt_cli_exit(int status)
{
    /* as coreutils' close_stdout: a stream in error, or one whose close failed with bytes still
     * pending or for another reason than a descriptor that was never open (dtrain >&-, which wrote
     * nothing), lost output */
    int pending = __fpending(stdout) != 0, failed = ferror(stdout) != 0;
    errno = 0;
    if (fflush(stdout) != 0)
        failed = 1;
    int err = errno;
    if (fclose(stdout) != 0 && (pending || errno != EBADF)) {
        failed = 1;
        err = errno;
    }
    if (failed && status == 0) {
        dt_error("standard output: %s", err ? strerror(err) : "write error");
        return 1;
    }
    return status;
}
