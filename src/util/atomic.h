/* atomic.h: files that appear complete or not at all: write under a temporary name in the same
 * directory, then dt_commit_file syncs the file, renames it over the final name and syncs the
 * directory. A crash at any point leaves the previous file (or none), never half of a new one. */
#ifndef DT_UTIL_ATOMIC_H
#define DT_UTIL_ATOMIC_H

#ifdef __cplusplus
extern "C" {
#endif

/* fsync a file or directory by path; DT_OK or DT_ERR_SYS after one line */
int dt_sync_path(const char *path);
/* tmp -> final, durably; dir is final's directory. DT_OK or DT_ERR_SYS after one line. */
int dt_commit_file(const char *dir, const char *tmp, const char *final);

/* Removes <dir>/<name>.tmp.<pid> files that a writer killed mid-write left behind: those whose pid
 * is no live process on this host (kill(pid, 0) fails with ESRCH). Returns how many it removed. */
int dt_remove_stale_tmp(const char *dir, const char *name);

#ifdef __cplusplus
}
#endif
#endif
