/* load.c: finding dtrain's run directories under the PATHs given and reading their two files
 * (runs.h states the rules; runs.c parses what is read).
 *
 * A file is opened without waiting (O_NONBLOCK: a FIFO's open would wait for a writer forever) and
 * checked with fstat before a byte is read: only a regular file is read, anything else skips the
 * run with a note saying what it is. Discovery counts a name of any type as present, so a FIFO
 * run.json is a run reported as skipped, not a folder silently passed over. */
#include "config.h"

#include "report/runs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

#define MAX_CONFIG_BYTES (16L << 20) /* run.json: a few KiB in practice */

/* what a file that is not a regular one is, for a note */
static const char *kind_of(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISDIR(mode)  ? "a directory" : S_ISSOCK(mode) ? "a socket" : "of an unknown type";
}

/* Opens a run's file for reading: 0 and *f; 1 absent; 2 unreadable (*err: errno); 4 not a regular
 * file (*kind says what). The open does not wait (O_NONBLOCK: a FIFO would block it until a writer
 * came), and the descriptor is checked with fstat before anything is read from it. *size: its size. */
static int open_input(const char *path, FILE **f, int *err, const char **kind, off_t *size)
{
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return errno == ENOENT ? 1 : 2;
    }
    struct stat st;
    int fl;
    if (fstat(fd, &st) != 0) {
        *err = errno;
        close(fd);
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        *kind = kind_of(st.st_mode);
        close(fd);
        return 4;
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(*f = fdopen(fd, "rb"))) {
        *err = errno;
        close(fd);
        return 2;
    }
    *size = st.st_size;
    return 0;
}

/* run.json into a NUL-terminated buffer: 0, -1 out of memory, or open_input's 1, 2, 4, or 3 over max */
static int slurp(const char *path, long max, char **out, size_t *len, int *err, const char **kind)
{
    *out = NULL;
    *len = 0;
    FILE *f;
    off_t size = 0;
    int rc = open_input(path, &f, err, kind, &size);
    if (rc)
        return rc;
    if (size > max) {
        fclose(f);
        return 3;
    }
    size_t cap = 0, n = 0;
    char *b = NULL;
    for (;;) {
        if (dt_grow((void **)&b, &cap, n + 65536 + 1, 1) != DT_OK) {
            rc = -1;
            break;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if ((long)n > max) {
            rc = 3;
            break;
        }
        if (got == 0) {
            if (ferror(f)) {
                *err = errno;
                rc = 2;
            }
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

/* reads one run directory (run.json present or not) and appends it */
static int load_run(dt_run_set *s, const char *source, const char *dir, int has_config)
{
    dt_run r;
    DT_TRY(dt_run_init(&r, source, dir));
    char path[4200], *buf = NULL;
    size_t len;
    int err = 0, rc = DT_OK, got;
    const char *kind = NULL;
    FILE *f = NULL;
    off_t size = 0;
    if (!strcmp(r.name, ".") || !strcmp(r.name, "..") || !*r.name) { /* "dtreport ." in a run directory */
        char *real = realpath(dir, NULL), *b = real ? strrchr(real, '/') : NULL;
        if (b && b[1]) {
            char *nm = strdup(b + 1);
            if (nm) {
                free(r.name);
                r.name = nm;
            }
        }
        free(real);
    }
    if (!has_config) {
        rc = dt_run_note_add(&r, DT_RUN_SKIPPED, NULL, "metrics.jsonl but no run.json: skipped");
        goto done;
    }
    snprintf(path, sizeof path, "%s/run.json", dir);
    if ((got = slurp(path, MAX_CONFIG_BYTES, &buf, &len, &err, &kind)) != 0) {
        rc = got < 0    ? DT_ERR_NOMEM
             : got == 4 ? dt_run_note_add(&r, DT_RUN_SKIPPED, NULL, "run.json: not a regular file (%s): run skipped", kind)
                        : dt_run_note_add(&r, DT_RUN_SKIPPED, got == 3 ? NULL : strerror(err),
                                          "run.json: %s: run skipped", got == 3 ? "over 16 MiB" : "cannot be read");
        goto done;
    }
    rc = dt_run_parse_config(&r, buf, len);
    free(buf);
    buf = NULL;
    if (rc != DT_OK || r.state == DT_RUN_SKIPPED)
        goto done;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if ((got = open_input(path, &f, &err, &kind, &size)) == 0) { /* over 1 GiB: skipped unread, with a note */
        rc = dt_run_read_metrics(&r, f, 0);
        fclose(f);
    } else if (got == 1) {
        rc = dt_run_note_add(&r, DT_RUN_PARTIAL, NULL, "no metrics.jsonl yet: no row");
    } else if (got == 4) {
        rc = dt_run_note_add(&r, DT_RUN_SKIPPED, NULL, "metrics.jsonl: not a regular file (%s): run skipped", kind);
    } else {
        rc = dt_run_note_add(&r, DT_RUN_SKIPPED, strerror(err), "metrics.jsonl: cannot be read: run skipped");
    }
done:
    free(buf);
    if (rc == DT_OK)
        rc = dt_runs_append(s, &r);
    if (rc != DT_OK) {
        if (rc == DT_ERR_NOMEM)
            dt_error("out of memory reading %s", dir);
        dt_run_free(&r);
    }
    return rc;
}

/* 1 when dir holds something named name, of any type (a FIFO run.json is a run to report skipped,
 * not a folder to pass over); what it is decides when it is read */
static int present(const char *dir, const char *name)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_path(dt_run_set *s, const char *path)
{
    struct stat st;
    if (strlen(path) > 4000) {
        dt_error("%s: path too long", path);
        return DT_ERR_INPUT;
    }
    if (stat(path, &st) != 0) {
        int e = errno;
        dt_error("%s: %s", path, strerror(e));
        return e == ENOENT || e == ENOTDIR ? DT_ERR_INPUT : DT_ERR_SYS;
    }
    if (!S_ISDIR(st.st_mode)) {
        dt_error("%s: not a directory (give results folders or run directories)", path);
        return DT_ERR_INPUT;
    }
    if (present(path, "run.json"))
        return load_run(s, path, path, 1);
    DIR *d = opendir(path);
    if (!d) {
        dt_error("%s: cannot list it: %s", path, strerror(errno));
        return DT_ERR_SYS;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = DT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *nm = strdup(e->d_name);
        if (!nm || dt_grow((void **)&names, &cap, n + 1, sizeof *names) != DT_OK) {
            free(nm);
            rc = DT_ERR_NOMEM;
            break;
        }
        names[n++] = nm;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    size_t found = 0, len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    for (size_t i = 0; i < n && rc == DT_OK; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%.*s/%s", (int)len, path, names[i]);
        if (strlen(dir) > 4000 || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        int cfg = present(dir, "run.json");
        if (cfg || present(dir, "metrics.jsonl")) {
            rc = load_run(s, path, dir, cfg);
            found++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == DT_ERR_NOMEM)
        dt_error("out of memory listing %s", path);
    if (rc == DT_OK && !found)
        dt_warn("%s: no run directories (with run.json) in it", path);
    return rc;
}

int dt_runs_load(dt_run_set *s, const char *const *paths, int n_paths)
{
    s->sources = calloc(n_paths > 0 ? (size_t)n_paths : 1, sizeof *s->sources);
    if (!s->sources) {
        dt_error("out of memory");
        return DT_ERR_NOMEM;
    }
    for (int i = 0; i < n_paths; i++) {
        int repeat = 0;
        for (size_t k = 0; k < s->n_sources; k++)
            repeat |= !strcmp(s->sources[k], paths[i]);
        if (repeat) /* the same text twice: read once */
            continue;
        if (!(s->sources[s->n_sources] = strdup(paths[i]))) {
            dt_error("out of memory");
            return DT_ERR_NOMEM;
        }
        s->n_sources++;
        DT_TRY(load_path(s, paths[i]));
    }
    return dt_runs_compute(s);
}
