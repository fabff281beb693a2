/* cli.h: checked parsing of command-line values.
 *
 * Each parser takes the flag's name (as the user typed it, for messages), the text and the accepted
 * range, stores the value and returns DT_OK, or logs one line naming the flag, the text and what was
 * expected and returns DT_ERR_INPUT (the output is untouched). Whole-string matches only: "12x",
 * "", " 3" and out-of-range values are refused, never clamped.
 *
 * Numbers, one rule for every numeric flag: decimal text only. Integers are [+-]digits; other
 * numbers are [+-]digits[.digits][e[+-]digits] (".5" and "5." too). Hex ("0x10", "0x1p3"), "inf",
 * "nan" and spaces are "not a number". A number that is well formed but past the type is "out of
 * range (expected A..B)", as one past the flag's range is: an integer beyond long (2^63), a number
 * beyond double (1e999). A number too small for a normal double (1e-310) is a number: its nearest
 * double (a denormal, or 0) is range-checked as usual.
 *
 * Text in messages is escaped: a control byte (0x01..0x1f, 0x7f) shows as \xNN, never raw.
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
/* decimal number in [min, max] (0.1, 1e-4; the rule above) */
int dt_parse_double(const char *flag, const char *text, double min, double max, double *out);
/* true/false, yes/no, on/off, 1/0 */
int dt_parse_bool(const char *flag, const char *text, bool *out);
/* one of the NULL-terminated choices: its index into *out */
int dt_parse_choice(const char *flag, const char *text, const char *const *choices, int *out);
/* the same, case ignored (ASCII): "SGD" is "sgd" */
int dt_parse_choice_nocase(const char *flag, const char *text, const char *const *choices, int *out);
/* text that goes into a file name or a message (a name, a path): DT_OK, or DT_ERR_INPUT after one line
 * when it holds a control byte (0x01..0x1f, 0x7f), shown escaped */
int dt_parse_text(const char *flag, const char *text);
/* text escaped into buf (n > 4 bytes): control bytes as \xNN; cut with "..." when longer than buf.
 * Returns buf. */
const char *dt_cli_escape(const char *text, char *buf, size_t n);
/* comma-separated integers in [min, max], strictly increasing, 1..max_n of them, e.g. "30,60,80";
 * on failure *n is untouched but out[] may have been partly written */
int dt_parse_long_list(const char *flag, const char *text, long min, long max, long *out, int max_n, int *n);

struct option; /* <getopt.h> */

/* Inside a program's getopt_long loop (optstring starting with ':', opterr = 0), called for every
 * value getopt_long returns: the options all of dtrain, dtpack and dtreport share, and the checks
 * every option gets. -h prints usage to stdout, -V the build (as prog), log_opt is --log-level.
 * Refused, each with one line pointing to prog --help and naming the option as the user wrote it
 * (escaped): a missing value (':'), an unknown option, an ambiguous abbreviation (with the options
 * it could be), a value given to an option that takes none ("--nesterov=0"), and a value holding a
 * control byte (dt_parse_text). opts is the table given to getopt_long. Returns DT_CLI_MINE when opt
 * is none of these (the program's own), DT_CLI_GO_ON after --log-level, else the exit status to
 * return now (0 after -h/-V, 2). In libdtcore (cli_main.c). */
enum { DT_CLI_MINE = -1, DT_CLI_GO_ON = -2 };
int dt_cli_common(int opt, int log_opt, const char *prog, char *const argv[], const struct option *opts,
                  void (*usage)(FILE *));

/* The end of every program's main(): return dt_cli_exit(status). Standard output is flushed and
 * closed and its errors checked (a full disk, a closed descriptor, an error on close): when status
 * is 0 and what was written to it was lost, one line ("error: standard output: No space left on
 * device") and 1; otherwise status. Nothing may write to stdout after it. In libdtcore. */
int dt_cli_exit(int status);

#ifdef __cplusplus
}
#endif
#endif
