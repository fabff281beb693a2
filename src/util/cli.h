/* cli.h: checked parsing of command-line values.
 *
 * Each parser takes the flag's name (as the user typed it, for messages), the text and the accepted
 * range, stores the value and returns DT_OK, or logs one line naming the flag, the text and what was
 * expected and returns DT_ERR_INPUT (the output is untouched). Whole-string matches only: "12x",
 * "", " 3" and out-of-range values are refused, never clamped.
 */
#ifndef DT_UTIL_CLI_H
#define DT_UTIL_CLI_H

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* decimal integer in [min, max] */
int dt_parse_long(const char *flag, const char *text, long min, long max, long *out);
/* finite number in [min, max] (strtod syntax: 0.1, 1e-4) */
int dt_parse_double(const char *flag, const char *text, double min, double max, double *out);
/* true/false, yes/no, on/off, 1/0 */
int dt_parse_bool(const char *flag, const char *text, bool *out);
/* one of the NULL-terminated choices: its index into *out */
int dt_parse_choice(const char *flag, const char *text, const char *const *choices, int *out);
/* comma-separated integers in [min, max], strictly increasing, 1..max_n of them, e.g. "30,60,80";
 * on failure *n is untouched but out[] may have been partly written */
int dt_parse_long_list(const char *flag, const char *text, long min, long max, long *out, int max_n, int *n);

/* Inside a program's getopt_long loop (optstring starting with ':', opterr = 0): the options all of
 * dtrain, dtpack and dtreport share. -h prints usage to stdout, -V the build (as prog), log_opt is
 * --log-level; ':' (a missing value) and '?' (an unknown option) get one line naming the option
 * and pointing to prog --help. Returns DT_CLI_MINE when opt is none of these (the program's own),
 * DT_CLI_GO_ON after --log-level, else the exit status to return now (0 after -h/-V, 2). In
 * libdtcore (cli_main.c). */
enum { DT_CLI_MINE = -1, DT_CLI_GO_ON = -2 };
int dt_cli_common(int opt, int log_opt, const char *prog, char *const argv[], void (*usage)(FILE *));

#ifdef __cplusplus
}
#endif
#endif
