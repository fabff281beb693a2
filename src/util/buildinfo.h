/* buildinfo.h: what this build of dtrain contains, for --version and run.json.
 * Versions are both the ones compiled against and, where the library can say, the ones loaded now. */
#ifndef DT_UTIL_BUILDINFO_H
#define DT_UTIL_BUILDINFO_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "<program> <version>" and one line per required and optional part:
 *     CUDA    yes  runtime 13.0 (built with 13.0), driver none, 0 devices
 *     MPI     no   (configure: no pkg-config ompi-c and no mpicc)
 * Touches no GPU beyond asking the driver for its version and device count. */
void dt_buildinfo_print(FILE *out, const char *program);

#ifdef __cplusplus
}
#endif
#endif
