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

#ifdef __cplusplus
}
#endif
#endif
