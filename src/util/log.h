/* log.h: rank-tagged logging for every dtrain program and libdt.
 *
 * Each line reads
 *     2026-11-29T15:04:05.123 [rank 3/8 node2] info: message
 *     2026-11-29T15:04:05.123 [rank 3/8 node2 gpu1] error: message      (once a device is set)
 * and is written with one write under a lock, so lines from several threads never interleave.
 * Lines go to stderr (or the stream given to dt_log_set_stream) and, once dt_log_open_file has been
 * called, also to that file (each rank's logs/rank-<r>.log).
 *
 * The level threshold starts at info, or at $DT_LOG_LEVEL (error, warn, info, debug) when
 * dt_log_init is called. Nothing here allocates after dt_log_open_file; messages longer than
 * DT_LOG_LINE_MAX are cut in the middle, marked "[...]": their start says what failed and their end
 * (of up to 4 x DT_LOG_LINE_MAX) why, as "PATH: cannot create it: File name too long" does for a
 * path longer than a line.
 */
#ifndef DT_UTIL_LOG_H
#define DT_UTIL_LOG_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_LOG_LINE_MAX 4096

enum dt_log_level { DT_LOG_ERROR = 0, DT_LOG_WARN, DT_LOG_INFO, DT_LOG_DEBUG };

/* Reads $DT_LOG_LEVEL (an unknown value is reported once as a warning and ignored) and the host
 * name. Safe to call more than once; logging works without it (host found on first use). */
void dt_log_init(void);

/* Identity shown in each line. world <= 0 hides the "/W" part; device < 0 hides "gpuN". */
void dt_log_set_rank(int rank, int world);
void dt_log_set_device(int device);
/* host == NULL: the short host name from gethostname(). Longer names are cut to 63 bytes. */
void dt_log_set_host(const char *host);

void dt_log_set_level(enum dt_log_level level);
enum dt_log_level dt_log_get_level(void);
/* "error", "warn", "info" or "debug" into *out: 0, or -1 for anything else (*out untouched). */
int dt_log_parse_level(const char *text, enum dt_log_level *out);
const char *dt_log_level_name(enum dt_log_level level);

/* Where lines go: stream == NULL restores stderr. The stream stays the caller's. */
void dt_log_set_stream(FILE *stream);
/* Also append every line to path (created 0644, parent directory must exist).
 * Returns 0, or -1 after logging why (the previous file, if any, stays in use). */
int dt_log_open_file(const char *path);
void dt_log_close_file(void);

void dt_log(enum dt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dt_vlog(enum dt_log_level level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* The message of the last error this thread logged (without the line's prefix; cut at 1023 bytes),
 * "" when none since dt_log_clear_error: libdt gives it to the caller of a failed operation. */
const char *dt_log_last_error(void);
void dt_log_clear_error(void);
#define dt_error(...) dt_log(DT_LOG_ERROR, __VA_ARGS__)
#define dt_warn(...) dt_log(DT_LOG_WARN, __VA_ARGS__)
#define dt_info(...) dt_log(DT_LOG_INFO, __VA_ARGS__)
#define dt_debug(...) dt_log(DT_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
