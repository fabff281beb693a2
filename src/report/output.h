/* output.h: writing a file the user named (dtreport's -o FILE, its --plots files) without changing
 * what that name is.
 *
 * What the name is decides how the data goes there:
 *   - nothing yet, or a regular file: written to <name>.tmp.<pid> in the same folder, synced and
 *     renamed over the name, then the folder synced, so a reader sees the old file or the new one,
 *     never half of one; a replaced file's permission bits are kept;
 *   - a symbolic link (or a chain of them) ending at a regular file or at nothing yet: the same, at
 *     the chain's end (the target is replaced or created next to itself); the links stay links;
 *   - anything else (a FIFO, a character device such as /dev/full or a terminal, a socket), and a
 *     descriptor named through /proc (/dev/stdout, /dev/fd/N, /proc/self/fd/N): opened as it is,
 *     without creating or truncating anything, and written to directly, appending where it is a
 *     file. A FIFO waits for a reader, as a shell's redirection does.
 * A directory is refused.
 */
#ifndef DT_REPORT_OUTPUT_H
#define DT_REPORT_OUTPUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes data (n bytes) to path as above. what names the writer in the error line ("-o", "svg").
 * DT_OK, or DT_ERR_SYS (DT_ERR_NOMEM) after one dt_error line "WHAT PATH: ...: strerror", e.g.
 * "-o /dev/full: cannot write: No space left on device"; a failed replacement leaves the old file
 * as it was and no temporary file. */
int dt_output_write(const char *what, const char *path, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
