/* h5probe.c: reads an HDF5 file's metadata in a child process before this process trusts the HDF5
 * library with it (contract in h5.h, dt_h5_probe).
 *
 * Why: a damaged file can make libhdf5 itself crash (one flipped byte in a global heap made 1.10's
 * H5HG_read follow a wild pointer while reading variable-length strings), and no check of ours can
 * run before the library has parsed the bytes. So a forked child opens the file and walks all of
 * it the way a reader would: every group, every attribute read in full, every variable-length
 * dataset read in full, the first rows of every other dataset (which exercises its type, layout
 * and filters; the rest is plain file reads, bounds-checked by the library). The child touches
 * nothing but HDF5 and memory, logs nothing and leaves by _exit, so it is safe after fork in a
 * process with threads, MPI or a GPU context. If it dies of a signal, or takes longer than the
 * probe's limit (DT_H5_PROBE_TIMEOUT, default 120 s), the file is refused with one line; if it merely fails, the caller's own open and
 * reads go on and report the reason in their usual words. Set DT_H5_PROBE=0 to skip the probe (to
 * debug HDF5 itself). */
#include "config.h"

#include "util/h5.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/log.h"

enum {
    PROBE_MAX_DEPTH = 32,           /* groups inside groups: a link cycle ends here */
    PROBE_MAX_OBJECTS = 1 << 20,    /* objects visited */
    PROBE_ROW_BYTES = 1 << 12,      /* of a fixed-size dataset, about this much of its first rows: enough
                                     * to go through its type, layout and filters; little, because every
                                     * rank probes every shard at start (ImageNet: ~600 shards) */
    PROBE_MAX_VLEN = 1 << 24,       /* variable-length elements read in one dataset or attribute */
    PROBE_MAX_ATTR_BYTES = 1 << 26, /* a fixed-size attribute larger than this is not read */
};

typedef struct {
    int objects;
} probe_walk;

/* reads n elements of file type ft through `read` (an attribute or a dataset selection) */
typedef herr_t (*probe_read_fn)(hid_t obj, hid_t mtype, hid_t mspace, void *buf);

static herr_t read_attr(hid_t a, hid_t mtype, hid_t mspace, void *buf)
{
    (void)mspace;
    return H5Aread(a, mtype, buf);
}

static herr_t read_dset_all(hid_t d, hid_t mtype, hid_t mspace, void *buf)
{
    (void)mspace;
    return H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
}

static int is_vlen(hid_t t)
{
    return H5Tis_variable_str(t) > 0 || H5Tdetect_class(t, H5T_VLEN) > 0;
}

/* Reads all n elements of a variable-length type and frees what the library allocated. Returns 0,
 * or -1 when the library reports an error (not a crash: that is what the parent watches for). */
static int read_vlen(hid_t obj, hid_t ft, hssize_t n, probe_read_fn rd)
{
    if (n < 0 || n > PROBE_MAX_VLEN)
        return -1;
    int rc = -1;
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_DEFAULT);
    hid_t sp = -1;
    size_t sz = mt >= 0 ? H5Tget_size(mt) : 0;
    void *buf = sz ? calloc((size_t)(n ? n : 1), sz) : NULL;
    if (buf) {
        hsize_t dim = (hsize_t)(n ? n : 1);
        sp = H5Screate_simple(1, &dim, NULL);
        if (sp >= 0 && rd(obj, mt, sp, buf) >= 0) {
            rc = 0;
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, buf);
        }
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (mt >= 0)
        H5Tclose(mt);
    free(buf);
    return rc;
}

static herr_t probe_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    (void)data;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    int rc = -1;
    if (ft >= 0 && n >= 0) {
        if (is_vlen(ft))
            rc = read_vlen(a, ft, n, read_attr);
        else {
            hid_t mt = H5Tget_native_type(ft, H5T_DIR_DEFAULT);
            size_t sz = mt >= 0 ? H5Tget_size(mt) : 0;
            if (sz && (double)sz * (double)n <= PROBE_MAX_ATTR_BYTES) {
                void *buf = calloc((size_t)(n ? n : 1), sz);
                rc = buf && H5Aread(a, mt, buf) >= 0 ? 0 : -1;
                free(buf);
            }
            if (mt >= 0)
                H5Tclose(mt);
        }
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    H5Aclose(a);
    return rc < 0 ? -1 : 0;
}

/* the first rows of a fixed-size dataset: about PROBE_ROW_BYTES, at least one row */
static int probe_rows(hid_t d, hid_t ft, hid_t fsp)
{
    int nd = H5Sget_simple_extent_ndims(fsp);
    hsize_t dims[H5S_MAX_RANK];
    if (nd < 0 || nd > H5S_MAX_RANK || H5Sget_simple_extent_dims(fsp, dims, NULL) < 0)
        return -1;
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_DEFAULT);
    size_t sz = mt >= 0 ? H5Tget_size(mt) : 0;
    int rc = -1;
    if (sz) {
        double row = (double)sz; /* one index of the first dimension */
        for (int i = 1; i < nd; i++)
            row *= (double)dims[i];
        hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
        memcpy(count, dims, sizeof(hsize_t) * (size_t)(nd ? nd : 0));
        double total = nd ? row * (double)dims[0] : (double)sz;
        if (nd && total > PROBE_ROW_BYTES) {
            double rows = PROBE_ROW_BYTES / (row > 0 ? row : 1);
            count[0] = rows < 1 ? 1 : (hsize_t)rows;
            total = row * (double)count[0];
        }
        void *buf = total <= 8.0 * PROBE_ROW_BYTES ? malloc((size_t)total + 1) : NULL;
        hid_t fs = buf ? H5Scopy(fsp) : -1;
        hid_t ms = -1;
        if (fs >= 0 && nd) {
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
            ms = H5Screate_simple(nd, count, NULL);
        } else if (fs >= 0)
            ms = H5Scopy(fs);
        if (fs >= 0 && ms >= 0 && total > 0 && H5Dread(d, mt, ms, fs, H5P_DEFAULT, buf) >= 0)
            rc = 0;
        else if (total == 0)
            rc = 0;
        if (ms >= 0)
            H5Sclose(ms);
        if (fs >= 0)
            H5Sclose(fs);
        free(buf);
    }
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

static int probe_dataset(hid_t d)
{
    hid_t ft = H5Dget_type(d), sp = H5Dget_space(d);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    int rc = -1;
    if (ft >= 0 && n >= 0)
        rc = is_vlen(ft) ? read_vlen(d, ft, n, read_dset_all) : probe_rows(d, ft, sp);
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    return rc;
}

/* an object and, for a group, everything below it */
static int probe_object(hid_t obj, probe_walk *w, int depth)
{
    if (depth > PROBE_MAX_DEPTH || ++w->objects > PROBE_MAX_OBJECTS)
        return -1;
    hsize_t idx = 0;
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, probe_attr, NULL) < 0)
        return -1;
    H5I_type_t kind = H5Iget_type(obj);
    if (kind == H5I_DATASET)
        return probe_dataset(obj);
    if (kind != H5I_GROUP && kind != H5I_FILE)
        return 0; /* a committed datatype: its attributes were all there is */
    H5G_info_t gi;
    if (H5Gget_info(obj, &gi) < 0)
        return -1;
    for (hsize_t i = 0; i < gi.nlinks; i++) {
        hid_t o = H5Oopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT);
        if (o < 0)
            return -1;
        int rc = probe_object(o, w, depth + 1);
        H5Oclose(o);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* the child: exit 0 when the whole walk succeeded, 1 when the library reported an error */
static void probe_child(const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    probe_walk w = {0};
    int rc = f >= 0 ? probe_object(f, &w, 0) : -1;
    if (f >= 0 && H5Fclose(f) < 0) /* closing frees what the walk cached: a damaged cache shows here */
        rc = -1;
    _exit(rc == 0 ? 0 : 1); /* no atexit handlers: nothing of the parent's runs here */
}

static double probe_limit(void)
{
    const char *s = getenv("DT_H5_PROBE_TIMEOUT");
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    return s && end != s && *end == 0 && v > 0 ? v : 120.0;
}

int dt_h5_probe(const char *path, const char *what)
{
    const char *env = getenv("DT_H5_PROBE");
    if (env && !strcmp(env, "0"))
        return DT_OK;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        dt_warn("%s %s: cannot fork to check it first (%s); reading it directly", what, path, strerror(errno));
        return DT_OK;
    }
    if (pid == 0)
        probe_child(path);
    struct timespec t0, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double limit = probe_limit();
    int status = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR) {
            dt_warn("%s %s: lost its check (%s); reading it directly", what, path, strerror(errno));
            return DT_OK;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (t > limit) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            dt_error("%s %s: reading its HDF5 metadata took over %.0f s, so it is taken as damaged "
                     "(DT_H5_PROBE_TIMEOUT sets the limit)", what, path, limit);
            return DT_ERR_INPUT;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 50000000)
            nap.tv_nsec *= 2;
    }
    if (WIFSIGNALED(status)) {
        dt_error("%s %s: damaged HDF5 metadata (reading it crashed the HDF5 library: %s)", what, path,
                 strsignal(WTERMSIG(status)));
        return DT_ERR_INPUT;
    }
    return DT_OK; /* read, or failed with an error that the caller's own reads will report */
}
