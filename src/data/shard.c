/* shard.c: the HDF5 shard format, written and read (contract in shard.h, schema in doc/formats.md). */
#include "config.h"

#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/atomic.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/crc.h"
#include "util/h5.h"
#include "util/log.h"

static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m)  ? "a FIFO"
           : S_ISDIR(m)  ? "a directory"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a plain file";
}

int dt_open_regular(const char *path, const char *what, const char *hint, uint64_t *size)
{
    /* O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        dt_error("%s: cannot open the %s: %s%s%s%s", path, what, strerror(errno), hint ? " (" : "", hint ? hint : "",
                 hint ? ")" : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        dt_error("%s: the %s is %s, not a regular file", path, what, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        dt_error("%s: cannot use the %s: %s", path, what, strerror(errno));
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

/* CRC-32 and size of a whole file, read from fd's start; fd stays open */
static int file_crc(int fd, const char *path, uint32_t *crc, uint64_t *bytes)
{
    enum { BUF = 1 << 20 };
    uint8_t *buf = malloc(BUF);
    uint32_t c = 0;
    uint64_t total = 0;
    int rc = buf ? DT_OK : DT_ERR_NOMEM;
    while (rc == DT_OK) {
        ssize_t got = pread(fd, buf, BUF, (off_t)total);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            dt_error("%s: read failed: %s", path, strerror(errno));
            rc = DT_ERR_SYS;
        }
        if (got <= 0)
            break;
        c = dt_crc32(c, buf, (size_t)got);
        total += (uint64_t)got;
    }
    free(buf);
    *crc = c;
    *bytes = total;
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* writing                                                                                        */

void dt_shard_writer_init(dt_shard_writer *w, const dt_shard_spec *spec, int index)
{
    memset(w, 0, sizeof *w);
    w->spec = *spec;
    w->index = index;
}

int dt_shard_writer_add(dt_shard_writer *w, const uint8_t *data, size_t bytes, int32_t label, const char *name)
{
    size_t need = (size_t)w->count + 2;
    if (dt_grow((void **)&w->data, &w->cap, w->bytes + bytes, 1) ||
        dt_grow((void **)&w->offsets, &w->cap_offsets, need, sizeof *w->offsets) ||
        dt_grow((void **)&w->labels, &w->cap_labels, need, sizeof *w->labels) ||
        dt_grow((void **)&w->names, &w->cap_names, need, sizeof *w->names))
        return DT_ERR_NOMEM;
    memcpy(w->data + w->bytes, data, bytes);
    w->offsets[w->count] = (int64_t)w->bytes;
    w->labels[w->count] = label;
    w->names[w->count] = name ? strdup(name) : NULL;
    if (name && !w->names[w->count])
        return DT_ERR_NOMEM;
    w->bytes += bytes;
    w->count++;
    w->offsets[w->count] = (int64_t)w->bytes;
    return DT_OK;
}

static int write_shard_file(const dt_shard_writer *w, const char *path)
{
    const dt_shard_spec *s = &w->spec;
    hid_t f = dt_atomic_create_h5(path, "shard");
    if (f < 0)
        return DT_ERR_SYS; /* it said why, and left nothing at path */
    int rc = DT_OK;
    hsize_t n = (hsize_t)w->count;
    DT_TRY_GOTO(dt_h5_attr_write_str(f, "schema", DT_SHARD_SCHEMA), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_i64(f, "version", DT_SHARD_VERSION), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_str(f, "split", s->split), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_str(f, "kind", s->kind == DT_SHARD_RAW ? "raw" : "encoded"), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_i64(f, "shard", w->index), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_i64(f, "count", w->count), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_i64(f, "num_classes", s->num_classes), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_str(f, "source", s->source ? s->source : ""), rc, out);
    DT_TRY_GOTO(dt_h5_attr_write_str(f, "created_by", "dtpack " PACKAGE_VERSION), rc, out);
    DT_TRY_GOTO(dt_h5_write_strings(f, "classes", s->classes, s->num_classes), rc, out);
    DT_TRY_GOTO(dt_h5_write(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, &n, w->labels), rc, out);
    if (s->kind == DT_SHARD_RAW) {
        hsize_t dims[4] = {n, (hsize_t)s->h, (hsize_t)s->w, (hsize_t)s->c};
        DT_TRY_GOTO(dt_h5_write(f, "pixels", H5T_STD_U8LE, H5T_NATIVE_UINT8, 4, dims, w->data), rc, out);
    } else {
        hsize_t nb = (hsize_t)w->bytes, no = n + 1;
        DT_TRY_GOTO(dt_h5_write(f, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, &nb, w->data), rc, out);
        DT_TRY_GOTO(dt_h5_write(f, "offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, &no, w->offsets), rc, out);
        DT_TRY_GOTO(dt_h5_write_strings(f, "names", (const char *const *)w->names, w->count), rc, out);
    }
out:
    if (H5Fclose(f) < 0 && rc == DT_OK) {
        dt_error("%s: closing failed: %s", path, dt_errstr_hdf5(-1, 0));
        rc = DT_ERR_HDF5;
    }
    if (rc != DT_OK)
        dt_error("%s: shard not written", path);
    return rc;
}

int dt_shard_writer_flush(dt_shard_writer *w, char *file, size_t file_len, int64_t *count, uint64_t *bytes,
                          uint32_t *crc)
{
    char tmp[4200], final[4200];
    snprintf(file, file_len, "%s-%05d.h5", w->spec.split, w->index);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", w->spec.dir, file);
    snprintf(final, sizeof final, "%s/%s", w->spec.dir, file);
    int rc = write_shard_file(w, tmp);
    if (rc == DT_OK) {
        int fd = open(tmp, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            dt_error("%s: cannot open: %s", tmp, strerror(errno));
            rc = DT_ERR_SYS;
        } else {
            rc = file_crc(fd, tmp, crc, bytes);
            close(fd);
        }
    }
    if (rc == DT_OK)
        rc = dt_commit_file(w->spec.dir, tmp, final);
    if (rc != DT_OK)
        unlink(tmp); /* every failure above: no temporary stays behind */
    *count = w->count;
    for (int64_t i = 0; i < w->count; i++)
        free(w->names[i]);
    w->count = 0;
    w->bytes = 0;
    w->index++;
    return rc;
}

void dt_shard_writer_free(dt_shard_writer *w)
{
    for (int64_t i = 0; i < w->count; i++)
        free(w->names[i]);
    free(w->data);
    free(w->offsets);
    free(w->labels);
    free(w->names);
    memset(w, 0, sizeof *w);
}

/* ---------------------------------------------------------------------------------------------- */
/* the manifest                                                                                   */

int dt_manifest_write(const char *dir, const dt_manifest_entry *e, int n)
{
    char tmp[4200], final[4200];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, DT_MANIFEST_NAME);
    snprintf(final, sizeof final, "%s/%s", dir, DT_MANIFEST_NAME);
    unlink(tmp); /* ours: left by a killed dtpack (or a FIFO, which fopen would block on) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        dt_error("%s: cannot create: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return DT_ERR_SYS;
    }
    fprintf(f, "%s\n# split\tfile\tcount\tbytes\tcrc32\n", DT_MANIFEST_HEADER);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\t%s\t%lld\t%llu\t%08x\n", e[i].split, e[i].file, (long long)e[i].count,
                (unsigned long long)e[i].bytes, e[i].crc);
    if (ferror(f) | (fclose(f) != 0)) {
        dt_error("%s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        return DT_ERR_SYS;
    }
    return dt_commit_file(dir, tmp, final); /* removes tmp when it fails */
}

typedef struct file_line {
    const char *file;
    int line;
} file_line;

static int cmp_file_line(const void *a, const void *b)
{
    const file_line *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* a shard listed twice would be read twice (its images counted twice, or in two splits) */
static int check_listed_once(const char *path, const dt_manifest_entry *e, const int *lines, int n)
{
    if (n < 2)
        return DT_OK;
    file_line *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return DT_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        v[i] = (file_line){e[i].file, lines[i]};
    qsort(v, (size_t)n, sizeof *v, cmp_file_line);
    int rc = DT_OK;
    for (int i = 1; i < n && rc == DT_OK; i++)
        if (!strcmp(v[i].file, v[i - 1].file)) {
            dt_error("%s:%d: shard %s is listed again (first on line %d): a shard may appear once", path, v[i].line,
                     v[i].file, v[i - 1].line);
            rc = DT_ERR_INPUT;
        }
    free(v);
    return rc;
}

int dt_manifest_read(const char *dir, dt_manifest_entry **out, int *n_out)
{
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/%s", dir, DT_MANIFEST_NAME);
    *out = NULL;
    *n_out = 0;
    char hint[4300];
    snprintf(hint, sizeof hint, "is %s a directory packed by dtpack?", dir);
    uint64_t size;
    int fd = dt_open_regular(path, "manifest", hint, &size);
    if (fd < 0)
        return DT_ERR_INPUT;
    if (size == 0) {
        dt_error("%s: the manifest is empty (its first line should be '%s'; was the copy cut short?)", path,
                 DT_MANIFEST_HEADER);
        close(fd);
        return DT_ERR_INPUT;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        dt_error("%s: cannot read the manifest: %s", path, strerror(errno));
        close(fd);
        return DT_ERR_INPUT;
    }
    dt_manifest_entry *e = NULL;
    int *lines = NULL;
    int n = 0, lineno = 0, rc = DT_OK;
    size_t cap_e = 0, cap_lines = 0;
    while (rc == DT_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno == 1 && strncmp(line, DT_MANIFEST_HEADER, strlen(DT_MANIFEST_HEADER)) != 0) {
            dt_error("%s:1: not a dtrain manifest version 1 (first line should be '%s')", path, DT_MANIFEST_HEADER);
            rc = DT_ERR_INPUT;
            break;
        }
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (dt_grow((void **)&e, &cap_e, (size_t)n + 1, sizeof *e) ||
            dt_grow((void **)&lines, &cap_lines, (size_t)n + 1, sizeof *lines)) {
            rc = DT_ERR_NOMEM;
            break;
        }
        dt_manifest_entry *m = &e[n];
        long long count = -1;
        unsigned long long bytes = 0;
        unsigned crc = 0;
        char extra;
        if (sscanf(line, "%15[^\t]\t%63[^\t]\t%lld\t%llu\t%8x %c", m->split, m->file, &count, &bytes, &crc, &extra) !=
                5 ||
            count < 0 || strchr(m->file, '/')) {
            dt_error("%s:%d: malformed line (want split, file, count, bytes, crc32 separated by tabs)", path, lineno);
            rc = DT_ERR_INPUT;
            break;
        }
        m->count = count;
        m->bytes = bytes;
        m->crc = crc;
        lines[n] = lineno;
        n++;
    }
    if (rc == DT_OK && ferror(f)) {
        dt_error("%s: reading the manifest failed: %s", path, strerror(errno));
        rc = DT_ERR_INPUT;
    }
    fclose(f);
    if (rc == DT_OK)
        rc = check_listed_once(path, e, lines, n);
    free(lines);
    if (rc != DT_OK) {
        free(e);
        return rc;
    }
    *out = e;
    *n_out = n;
    return DT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* reading                                                                                        */

static void raise_fd_limit(int need)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < (rlim_t)need) {
        r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= (rlim_t)need ? (rlim_t)need : r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* The data address of a contiguous dataset, or 0 after one line. */
static uint64_t data_address(hid_t ds, const char *path, const char *name)
{
    haddr_t a = H5Dget_offset(ds);
    if (a == HADDR_UNDEF) {
        dt_error("shard %s: /%s is not stored contiguously (was it written by dtpack?)", path, name);
        return 0;
    }
    return (uint64_t)a;
}

/* opens and checks one shard; sh->path and the manifest entry are set */
static int open_shard(dt_dataset *ds, dt_shard *sh, const dt_manifest_entry *me, int first_shard, int verify_crc)
{
    const char *p = sh->path;
    char hint[4300];
    snprintf(hint, sizeof hint, "listed in %s/%s", ds->dir, DT_MANIFEST_NAME);
    uint64_t size;
    /* a regular file before HDF5 sees it: H5Fopen of a FIFO blocks, of a directory says little */
    if ((sh->fd = dt_open_regular(p, "shard", hint, &size)) < 0)
        return DT_ERR_INPUT;
    if (size != me->bytes) {
        dt_error("shard %s is %llu bytes but the manifest says %llu: truncated or changed since packing", p,
                 (unsigned long long)size, (unsigned long long)me->bytes);
        return DT_ERR_INPUT;
    }
    if (verify_crc) {
        uint32_t crc;
        uint64_t bytes;
        if (file_crc(sh->fd, p, &crc, &bytes) != DT_OK)
            return DT_ERR_INPUT;
        if (crc != me->crc) {
            dt_error("shard %s has CRC-32 %08x but the manifest says %08x: the file is corrupt", p, crc, me->crc);
            return DT_ERR_INPUT;
        }
    }
    hid_t f = dt_h5_open_ro(p, "shard");
    if (f < 0)
        return DT_ERR_INPUT;
    int rc = DT_ERR_INPUT;
    char schema[64], split[32], kind[16];
    int64_t version = 0, count = 0, ncls = 0;
    hid_t d = -1;
    if (dt_h5_attr_read_str(f, p, "schema", schema, sizeof schema) || dt_h5_attr_read_i64(f, p, "version", &version))
        goto out;
    if (strcmp(schema, DT_SHARD_SCHEMA) != 0) {
        dt_error("shard %s: schema '%s', expected '%s'", p, schema, DT_SHARD_SCHEMA);
        goto out;
    }
    if (version != DT_SHARD_VERSION) {
        dt_error("shard %s: schema version %lld, this dtrain reads version %d (re-pack with this dtpack)", p,
                 (long long)version, DT_SHARD_VERSION);
        goto out;
    }
    if (dt_h5_attr_read_str(f, p, "split", split, sizeof split) || dt_h5_attr_read_str(f, p, "kind", kind, sizeof kind) ||
        dt_h5_attr_read_i64(f, p, "count", &count) || dt_h5_attr_read_i64(f, p, "num_classes", &ncls))
        goto out;
    enum dt_shard_kind k = !strcmp(kind, "raw") ? DT_SHARD_RAW : DT_SHARD_ENCODED;
    if (strcmp(kind, "raw") && strcmp(kind, "encoded")) {
        dt_error("shard %s: kind '%s', expected 'encoded' or 'raw'", p, kind);
        goto out;
    }
    if (strcmp(split, ds->split) != 0 || count != me->count || count < 0 || ncls < 1 || ncls > 1000000) {
        dt_error("shard %s: split '%s' with %lld images of %lld classes, the manifest says split '%s' with %lld", p, split,
                 (long long)count, (long long)ncls, me->split, (long long)me->count);
        goto out;
    }
    char **classes = NULL;
    if (dt_h5_read_strings(f, p, "classes", ncls, &classes) != DT_OK)
        goto out;
    if (first_shard) {
        ds->kind = k;
        ds->num_classes = (int)ncls;
        ds->classes = classes;
    } else {
        int same = k == ds->kind && ncls == ds->num_classes;
        for (int64_t i = 0; same && i < ncls; i++)
            same = strcmp(classes[i], ds->classes[i]) == 0;
        dt_h5_strings_free(classes, ncls);
        if (!same) {
            dt_error("shard %s: its kind or class list differs from the first shard's (%s)", p, ds->shards[0].path);
            goto out;
        }
    }
    sh->count = count;
    int64_t shape1[1] = {count}, found[4];
    /* labels go straight into the dataset's global array */
    if (dt_h5_read(f, p, "dataset", "labels", 1, shape1, H5T_NATIVE_INT32, ds->labels + sh->first) != DT_OK)
        goto out;
    for (int64_t i = 0; i < count; i++) {
        int32_t l = ds->labels[sh->first + i];
        if (l < 0 || l >= ncls) {
            dt_error("shard %s: image %lld has label %d, outside 0..%lld", p, (long long)i, l, (long long)ncls - 1);
            goto out;
        }
    }
    if (k == DT_SHARD_RAW) {
        int64_t shape4[4] = {count, -1, -1, -1};
        if ((d = dt_h5_open_checked(f, p, "dataset", "pixels", 4, shape4, found)) < 0)
            goto out;
        if (first_shard) {
            ds->h = (int)found[1];
            ds->w = (int)found[2];
            ds->c = (int)found[3];
        } else if (found[1] != ds->h || found[2] != ds->w || found[3] != ds->c) {
            dt_error("shard %s: images are %lldx%lldx%lld, the first shard's %dx%dx%d", p, (long long)found[1],
                     (long long)found[2], (long long)found[3], ds->h, ds->w, ds->c);
            goto out;
        }
        if (found[1] < 1 || found[2] < 1 || found[3] < 1 || found[3] > 4) {
            dt_error("shard %s: images of %lldx%lldx%lld make no sense", p, (long long)found[1], (long long)found[2],
                     (long long)found[3]);
            goto out;
        }
        if (count && !(sh->data_addr = data_address(d, p, "pixels")))
            goto out;
    } else {
        int64_t shape[1] = {-1}, shape_off[1] = {count + 1};
        if ((d = dt_h5_open_checked(f, p, "dataset", "images", 1, shape, found)) < 0)
            goto out;
        int64_t total = found[0];
        if (total && !(sh->data_addr = data_address(d, p, "images")))
            goto out;
        if (!(sh->offsets = malloc((size_t)(count + 1) * sizeof(int64_t)))) {
            rc = DT_ERR_NOMEM;
            goto out;
        }
        if (dt_h5_read(f, p, "dataset", "offsets", 1, shape_off, H5T_NATIVE_INT64, sh->offsets) != DT_OK)
            goto out;
        for (int64_t i = 0; i <= count; i++) {
            int64_t o = sh->offsets[i];
            if (o < 0 || o > total) {
                dt_error("shard %s: image %lld has offset %lld beyond the data (%lld bytes)", p, (long long)i,
                         (long long)o, (long long)total);
                goto out;
            }
            if (i && o < sh->offsets[i - 1]) {
                dt_error("shard %s: image %lld starts at offset %lld, before the previous one's %lld", p,
                         (long long)i - 1, (long long)o, (long long)sh->offsets[i - 1]);
                goto out;
            }
        }
        if (sh->offsets[0] != 0 || sh->offsets[count] != total) {
            dt_error("shard %s: offsets run from %lld to %lld, the data is %lld bytes", p, (long long)sh->offsets[0],
                     (long long)sh->offsets[count], (long long)total);
            goto out;
        }
    }
    rc = DT_OK; /* sh->fd, opened above, serves the reads */
out:
    if (d >= 0)
        H5Dclose(d);
    H5Fclose(f);
    return rc;
}

/* whether name is one of the items of list ("a, b, c") */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

int dt_dataset_open(dt_dataset *ds, const char *dir, const char *split, int verify_crc)
{
    memset(ds, 0, sizeof *ds);
    snprintf(ds->dir, sizeof ds->dir, "%s", dir);
    snprintf(ds->split, sizeof ds->split, "%s", split);
    dt_manifest_entry *e;
    int n;
    int rc = dt_manifest_read(dir, &e, &n);
    if (rc != DT_OK)
        return rc;
    if (n == 0) {
        dt_error("%s/%s lists no shards, only its header (was dtpack interrupted?)", dir, DT_MANIFEST_NAME);
        free(e);
        return DT_ERR_INPUT;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].split, split)) {
            ds->n_shards++;
            total += e[i].count;
        }
    if (!ds->n_shards || !total) {
        char have[256] = "";
        for (int i = 0; i < n; i++)
            if (!in_list(have, e[i].split) && strlen(have) + strlen(e[i].split) + 3 < sizeof have)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", *have ? ", " : "", e[i].split);
        dt_error("%s/%s lists no images of split '%s' (it has: %s)", dir, DT_MANIFEST_NAME, split, *have ? have : "none");
        free(e);
        return DT_ERR_INPUT;
    }
    ds->shards = calloc((size_t)ds->n_shards, sizeof *ds->shards);
    ds->labels = malloc((size_t)total * sizeof(int32_t));
    if (!ds->shards || !ds->labels) {
        free(e);
        dt_dataset_close(ds);
        return DT_ERR_NOMEM;
    }
    raise_fd_limit(ds->n_shards + 256);
    for (int s = 0; s < ds->n_shards; s++)
        ds->shards[s].fd = -1;
    int k = 0;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        if (strcmp(e[i].split, split) != 0)
            continue;
        dt_shard *sh = &ds->shards[k];
        snprintf(sh->path, sizeof sh->path, "%s/%s", dir, e[i].file);
        sh->first = ds->count;
        rc = open_shard(ds, sh, &e[i], k == 0, verify_crc);
        ds->count += e[i].count;
        k++;
    }
    free(e);
    if (rc != DT_OK)
        dt_dataset_close(ds);
    return rc;
}

int dt_dataset_check_splits(const dt_dataset *ref, const dt_dataset *other)
{
    const char *rp = ref->n_shards ? ref->shards[0].path : ref->dir;
    const char *op = other->n_shards ? other->shards[0].path : other->dir;
    static const char *const kinds[] = {"encoded", "raw"};
    if (other->kind != ref->kind) {
        dt_error("split %s (%s) holds %s images, split %s (%s) %s ones: pack the splits from one source", other->split,
                 op, kinds[other->kind], ref->split, rp, kinds[ref->kind]);
        return DT_ERR_INPUT;
    }
    if (other->num_classes != ref->num_classes) {
        dt_error("split %s (%s) has %d classes, split %s (%s) %d: every split needs the same class list", other->split,
                 op, other->num_classes, ref->split, rp, ref->num_classes);
        return DT_ERR_INPUT;
    }
    for (int i = 0; i < ref->num_classes; i++)
        if (strcmp(other->classes[i], ref->classes[i]) != 0) {
            dt_error("split %s (%s): class %d is '%s', in split %s (%s) '%s': every split needs the same class list",
                     other->split, op, i, other->classes[i], ref->split, rp, ref->classes[i]);
            return DT_ERR_INPUT;
        }
    if (ref->kind == DT_SHARD_RAW && (other->h != ref->h || other->w != ref->w || other->c != ref->c)) {
        dt_error("split %s (%s) holds %dx%dx%d images, split %s (%s) %dx%dx%d: every split needs the same size",
                 other->split, op, other->h, other->w, other->c, ref->split, rp, ref->h, ref->w, ref->c);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

void dt_dataset_close(dt_dataset *ds)
{
    for (int s = 0; ds->shards && s < ds->n_shards; s++) {
        if (ds->shards[s].fd >= 0)
            close(ds->shards[s].fd);
        free(ds->shards[s].offsets);
    }
    free(ds->shards);
    dt_h5_strings_free(ds->classes, ds->num_classes);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

const dt_shard *dt_dataset_locate(const dt_dataset *ds, int64_t i, int64_t *local)
{
    int lo = 0, hi = ds->n_shards - 1;
    while (lo < hi) { /* the last shard whose first index is <= i */
        int mid = (lo + hi + 1) / 2;
        if (ds->shards[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    *local = i - ds->shards[lo].first;
    return &ds->shards[lo];
}

size_t dt_dataset_item_bytes(const dt_dataset *ds, int64_t i)
{
    if (ds->kind == DT_SHARD_RAW)
        return (size_t)ds->h * (size_t)ds->w * (size_t)ds->c;
    int64_t j;
    const dt_shard *sh = dt_dataset_locate(ds, i, &j);
    return (size_t)(sh->offsets[j + 1] - sh->offsets[j]);
}

int dt_dataset_read(const dt_dataset *ds, int64_t i, uint8_t *buf)
{
    int64_t j;
    const dt_shard *sh = dt_dataset_locate(ds, i, &j);
    size_t n = dt_dataset_item_bytes(ds, i);
    uint64_t at = sh->data_addr + (ds->kind == DT_SHARD_RAW ? (uint64_t)j * n : (uint64_t)sh->offsets[j]);
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(sh->fd, buf + done, n - done, (off_t)(at + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            dt_error("shard %s: image %lld (index %lld of the split): reading %zu bytes at %llu failed: %s", sh->path,
                     (long long)j, (long long)i, n, (unsigned long long)at,
                     got < 0 ? strerror(errno) : "end of file (truncated?)");
            return DT_ERR_INPUT;
        }
        done += (size_t)got;
    }
    return DT_OK;
}
