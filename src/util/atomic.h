/* atomic.h: files that appear complete or not at all: write under a temporary name in the same
 * directory, then dt_commit_file syncs the file, renames it over the final name and syncs the
 * directory. A crash at any point leaves the previous file (or none), never half of a new one; a
 * failure reported by these helpers leaves no temporary behind either. */
#ifndef DT_UTIL_ATOMIC_H
#define DT_UTIL_ATOMIC_H

#include <hdf5.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fsync a file or directory by path; DT_OK or DT_ERR_SYS after one line */
int dt_sync_path(const char *path);
/* tmp -> final, durably; dir is final's directory. DT_OK or DT_ERR_SYS after one line; when the
 * sync or the rename fails, tmp is removed (once renamed, a failed sync of dir removes nothing:
 * final is complete). */
int dt_commit_file(const char *dir, const char *tmp, const char *final);

/* Creates the temporary tmp as a new, empty HDF5 file (whatever was at tmp is removed first: a
 * temporary name belongs to its writer). Returns the file, or -1 after one line "<what> <tmp>:
 * cannot create: <reason>" with nothing left at tmp: HDF5 creates the file before it can fail
 * (a full disk leaves 0 bytes there), so the helper removes it. The caller removes tmp after any
 * later failure (H5Fclose first). */
hid_t dt_atomic_create_h5(const char *tmp, const char *what);

/* Removes <dir>/<name>.tmp.<pid> files that a writer killed mid-write left behind: those whose pid
 * is no live process on this host (kill(pid, 0) fails with ESRCH). Returns how many it removed. */
int dt_remove_stale_tmp(const char *dir, const char *name);

#ifdef __cplusplus
}
#endif
#endif
