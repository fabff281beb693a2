/* atomic.c: durable whole-file replacement (contract in atomic.h). */
#include "config.h"

#include "util/atomic.h"

#include <errno.h>
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
    if (dt_sync_path(tmp) != DT_OK)
        return DT_ERR_SYS;
    if (rename(tmp, final) != 0) {
        dt_error("%s: cannot rename to %s: %s", tmp, final, strerror(errno));
        return DT_ERR_SYS;
    }
    return dt_sync_path(dir);
}

