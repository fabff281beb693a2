/* output.c: writing a named file without changing what the name is (contract in output.h).
 *
 * The name's symbolic links are followed here, one readlink at a time, rather than with realpath:
 * a chain may end at nothing yet (the report is created there), and a link in /proc (/dev/stdout
 * is /proc/self/fd/1) names an open descriptor, whose readlink text ("pipe:[123]", or the name of
 * a file a shell opened for appending) is no place to put a temporary file. */
#include "config.h"

#include "report/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/check.h"
#include "util/log.h"

enum { MAX_LINKS = 40 }; /* Linux's limit on links followed in one lookup */

/* a malloc'd copy of p's folder: "." when it has none; NULL out of memory */
static char *folder_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    if (!slash)
        return strdup(".");
    if (slash == p)
        return strdup("/");
    return strndup(p, (size_t)(slash - p));
}

/* 1 when the link p lives in /proc (as /proc/self/fd/1, also reached as /dev/fd/1): an open
 * descriptor, not a name */
static int in_proc(const char *p)
{
    char *dir = folder_of(p), *real = dir ? realpath(dir, NULL) : NULL;
    int yes = real && (!strncmp(real, "/proc/", 6) || !strcmp(real, "/proc"));
    free(dir);
    free(real);
    return yes;
}

/* Follows the symbolic links from path. *end (malloc'd) is where the chain ends: what is there has
 * lstat *st, or nothing is (*exists 0); *fd_link is 1 when the chain reached a descriptor in /proc
 * (*end is then that link). 0, or -1 with errno set (ELOOP, ENOTDIR, EACCES, ENOMEM, ...). */
static int follow(const char *path, char **end, struct stat *st, int *exists, int *fd_link)
{
    char *p = strdup(path), t[PATH_MAX];
    *exists = *fd_link = 0;
    for (int hops = 0; p; hops++) {
        if (lstat(p, st) != 0) {
            if (errno != ENOENT)
                break;
            *end = p;
            return 0;
        }
        *exists = 1;
        if (!S_ISLNK(st->st_mode) || (*fd_link = in_proc(p))) {
            *end = p;
            return 0;
        }
        if (hops == MAX_LINKS) {
            errno = ELOOP;
            break;
        }
        ssize_t n = readlink(p, t, sizeof t);
        if (n < 0)
            break;
        if ((size_t)n >= sizeof t) {
            errno = ENAMETOOLONG;
            break;
        }
        t[n] = '\0';
        char *q = NULL, *dir = t[0] == '/' ? NULL : folder_of(p);
        if (t[0] == '/')
            q = strdup(t);
        else if (dir && (q = malloc(strlen(dir) + (size_t)n + 2)))
            sprintf(q, "%s/%s", dir, t);
        free(dir);
        free(p);
        p = q; /* NULL: out of memory, errno ENOMEM */
        *exists = 0;
    }
    int e = errno;
    free(p);
    errno = e;
    return -1;
}

/* all n bytes to fd: 0, or -1 with errno */
static int write_all(int fd, const char *d, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, d, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        d += w;
        n -= (size_t)w;
    }
    return 0;
}

/* a FIFO, a device, a descriptor: opened as it is (nothing created or truncated), written to */
static int write_through(const char *what, const char *path, const char *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        dt_error("%s %s: cannot open it for writing: %s", what, path, strerror(errno));
        return DT_ERR_SYS;
    }
    int bad = write_all(fd, data, n), e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        dt_error("%s %s: cannot write: %s", what, path, strerror(e));
        return DT_ERR_SYS;
    }
    return DT_OK;
}

/* target (path, or the end of its links) replaced through target.tmp.<pid>; mode: the replaced
 * file's permission bits, or -1 for a new file */
static int replace(const char *what, const char *path, const char *target, int mode, const char *data, size_t n)
{
    size_t len = strlen(target) + 32;
    char *tmp = malloc(len), *dir = folder_of(target);
    int rc = DT_ERR_SYS, fd = -1, dfd = -1;
    if (!tmp || !dir) {
        dt_error("%s %s: out of memory", what, path);
        free(tmp);
        free(dir);
        return DT_ERR_NOMEM;
    }
    snprintf(tmp, len, "%s.tmp.%ld", target, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        dt_error("%s %s: cannot create %s: %s", what, path, tmp, strerror(errno));
        goto out;
    }
    /* the replaced file's mode; a file system without modes (vfat) may refuse, which is no reason
     * to fail the report */
    if (mode >= 0 && fchmod(fd, (mode_t)mode) != 0)
        dt_debug("%s %s: cannot keep mode %o: %s", what, path, (unsigned)mode, strerror(errno));
    int bad = write_all(fd, data, n) || fsync(fd), e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    fd = -1;
    if (bad) {
        dt_error("%s %s: cannot write %s: %s", what, path, tmp, strerror(e));
        goto out;
    }
    if (rename(tmp, target) != 0) {
        dt_error("%s %s: cannot rename %s to %s: %s", what, path, tmp, target, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL; /* renamed: nothing to remove */
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(dfd) != 0) {
        dt_error("%s %s: cannot sync its folder %s: %s", what, path, dir, strerror(errno));
        goto out;
    }
    rc = DT_OK;
out:
    if (dfd >= 0)
        close(dfd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(dir);
    return rc;
}

int dt_output_write(const char *what, const char *path, const void *data, size_t n)
{
    char *end = NULL;
    struct stat st;
    int exists, fd_link, rc;
    if (follow(path, &end, &st, &exists, &fd_link) != 0) {
        int e = errno;
        dt_error("%s %s: cannot write: %s", what, path, strerror(e));
        return e == ENOMEM ? DT_ERR_NOMEM : DT_ERR_SYS;
    }
    if (exists && S_ISDIR(st.st_mode) && !fd_link) {
        dt_error("%s %s: cannot write: %s", what, path, strerror(EISDIR));
        rc = DT_ERR_SYS;
    } else if (fd_link || (exists && !S_ISREG(st.st_mode))) {
        rc = write_through(what, path, data, n);
    } else {
        rc = replace(what, path, end, exists ? (int)(st.st_mode & 07777) : -1, data, n);
    }
    free(end);
    return rc;
}
