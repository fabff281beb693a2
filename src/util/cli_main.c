/* cli_main.c: the options every program of the suite shares (cli.h, dt_cli_common). Not in libdt
 * (Makefile.am's LIBDT_SOURCES): --version needs the build information of libdtcore. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>

#include "util/buildinfo.h"
#include "util/cli.h"
#include "util/log.h"

int dt_cli_common(int opt, int log_opt, const char *prog, char *const argv[], void (*usage)(FILE *))
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
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
    case ':': dt_error("%s: missing value (see %s --help)", argv[optind - 1], prog); return 2;
    case '?':
        if (optopt)
            dt_error("-%c: unknown option (see %s --help)", optopt, prog);
        else
            dt_error("%s: unknown option (see %s --help)", argv[optind - 1], prog);
        return 2;
    default: return DT_CLI_MINE;
    }
}
