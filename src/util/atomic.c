/* atomic.c: durable whole-file replacement (contract in atomic.h). */
#include "config.h"

#include "util/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/log.h"

int dt_sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        dt_error("%s: cannot sync: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return DT_ERR_SYS;
    }
    close(fd);
    return DT_OK;
}

int dt_commit_file(const char *dir, const char *tmp, const char *final)
{
    if (dt_sync_path(tmp) != DT_OK) {
        unlink(tmp);
        return DT_ERR_SYS;
    }
    if (rename(tmp, final) != 0) {
        dt_error("%s: cannot rename to %s: %s", tmp, final, strerror(errno));
        unlink(tmp);
        return DT_ERR_SYS;
    }
    return dt_sync_path(dir);
}

hid_t dt_atomic_create_h5(const char *tmp, const char *what)
{
    dt_check_hdf5_init();
    unlink(tmp); /* a temporary left by a killed writer, or a FIFO: start from a new file */
    errno = 0;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f >= 0)
        return f;
    int saved = errno;
    char why[1024];
    /* errno says it in a few words (ENOSPC, ENAMETOOLONG, EACCES); HDF5's text spans lines */
    snprintf(why, sizeof why, "%s", saved ? strerror(saved) : dt_errstr_hdf5(f, 0));
    for (char *c = why; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    if (saved)
        H5Eclear2(H5E_DEFAULT);
    unlink(tmp);
    dt_error("%s %s: cannot create: %s", what, tmp, why);
    return -1;
}


int dt_remove_stale_tmp(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t len = strlen(name);
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *p = de->d_name;
        if (strncmp(p, name, len) || strncmp(p + len, ".tmp.", 5))
            continue;
        char *end;
        long pid = strtol(p + len + 5, &end, 10);
        if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, p);
        if (unlink(path) == 0) {
            dt_info("%s: removed, left by a writer that died (pid %ld)", path, pid);
            removed++;
        }
    }
    closedir(d);
    return removed;
}
