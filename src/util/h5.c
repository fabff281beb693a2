/* h5.c: small HDF5 helpers (contract in h5.h). */
#include "config.h"

#include "util/h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

void dt_h5_shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += shape[i] < 0 ? (size_t)snprintf(buf + k, n - k, "%s*", i ? ", " : "")
                          : (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

hid_t dt_h5_open_checked(hid_t loc, const char *source, const char *what, const char *name, int ndim,
                         const int64_t *shape, int64_t *found)
{
    char want[128], got[128];
    dt_check_hdf5_init();
    dt_h5_shape_text(want, sizeof want, ndim, shape);
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) {
        dt_error("%s: %s %s is missing (expected shape %s)", source, what, name, want);
        return -1;
    }
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0) {
        dt_error("%s: %s %s cannot be opened as a dataset", source, what, name);
        return -1;
    }
    hid_t sp = H5Dget_space(ds);
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    int ok = nd == ndim && nd >= 0 && nd <= 8 && H5Sget_simple_extent_dims(sp, dims, NULL) == nd;
    int64_t f[8] = {0};
    for (int i = 0; i < nd && i < 8; i++) {
        f[i] = (int64_t)dims[i];
        ok = ok && (shape[i] < 0 || f[i] == shape[i]);
        if (found && i < ndim)
            found[i] = f[i];
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (!ok) {
        dt_h5_shape_text(got, sizeof got, nd < 0 ? 0 : (nd > 8 ? 8 : nd), f);
        dt_error("%s: %s %s has shape %s, expected %s", source, what, name, got, want);
        H5Dclose(ds);
        return -1;
    }
    return ds;
}

int dt_h5_read(hid_t loc, const char *source, const char *what, const char *name, int ndim, const int64_t *shape,
               hid_t type, void *out)
{
    hid_t ds = dt_h5_open_checked(loc, source, what, name, ndim, shape, NULL);
    if (ds < 0)
        return DT_ERR_INPUT;
    /* Stored floats must be in an IEEE format: a damaged datatype message can describe a float of
     * another exponent bias or size, whose values HDF5 would convert into finite nonsense. (Other
     * conversions, such as integer labels read as floats, are HDF5's as before.) */
    hid_t ft = H5Dget_type(ds);
    int ok = ft >= 0;
    if (ok && H5Tget_class(ft) == H5T_FLOAT)
        ok = H5Tequal(ft, H5T_IEEE_F32LE) > 0 || H5Tequal(ft, H5T_IEEE_F32BE) > 0 || H5Tequal(ft, H5T_IEEE_F64LE) > 0 ||
             H5Tequal(ft, H5T_IEEE_F64BE) > 0;
    if (ft >= 0)
        H5Tclose(ft);
    if (!ok) {
        dt_error("%s: %s %s is not stored as IEEE 32- or 64-bit floats", source, what, name);
        H5Dclose(ds);
        return DT_ERR_INPUT;
    }
    int rc = DT_OK;
    herr_t e = H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    if (e < 0) { /* one line: ours and the library's reason */
        dt_error("%s: %s %s could not be read: %s", source, what, name, dt_errstr_hdf5(e, 0));
        rc = DT_ERR_INPUT;
    }
    H5Dclose(ds);
    return rc;
}

hid_t dt_h5_open_ro(const char *path, const char *what)
{
    dt_check_hdf5_init();
    if (dt_h5_probe(path, what) != DT_OK)
        return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        dt_error("%s %s cannot be opened as HDF5: %s", what, path, dt_errstr_hdf5(f, 0));
    return f;
}

int dt_h5_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int ndim, const hsize_t *dims, const void *data)
{
    int rc = DT_OK;
    hid_t sp = H5Screate_simple(ndim, dims, NULL), ds = -1;
    DT_CHECK_HDF5_GOTO(ds = H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), rc, out);
    DT_CHECK_HDF5_GOTO(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), rc, out);
out:
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
    return rc;
}

/* opens attribute `name` of obj and checks its class; -1 after one line */
static hid_t attr_open(hid_t obj, const char *source, const char *name, H5T_class_t want)
{
    dt_check_hdf5_init();
    if (H5Aexists(obj, name) <= 0) {
        dt_error("%s: attribute %s is missing", source, name);
        return -1;
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    hid_t sp = a >= 0 ? H5Aget_space(a) : -1;
    int ok = t >= 0 && H5Tget_class(t) == want && sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (!ok) {
        dt_error("%s: attribute %s is not a single %s", source, name, want == H5T_STRING ? "string" : "integer");
        if (a >= 0)
            H5Aclose(a);
        return -1;
    }
    return a;
}

int dt_h5_attr_read_str(hid_t obj, const char *source, const char *name, char *buf, size_t n)
{
    hid_t a = attr_open(obj, source, name, H5T_STRING);
    if (a < 0)
        return DT_ERR_INPUT;
    hid_t ft = H5Aget_type(a);
    int rc = DT_OK;
    buf[0] = 0;
    if (H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 converts no character sets: ASCII and UTF-8 must match */
        if (H5Aread(a, mt, &s) < 0 || !s)
            rc = DT_ERR_INPUT;
        else
            snprintf(buf, n, "%s", s);
        free(s); /* allocated by HDF5's default malloc */
        H5Tclose(mt);
    } else {
        size_t sz = H5Tget_size(ft);
        char *tmp = calloc(sz + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz + 1);
        H5Tset_cset(mt, H5Tget_cset(ft));
        if (!tmp || H5Aread(a, mt, tmp) < 0)
            rc = DT_ERR_INPUT;
        else
            snprintf(buf, n, "%s", tmp);
        free(tmp);
        H5Tclose(mt);
    }
    H5Tclose(ft);
    H5Aclose(a);
    if (rc != DT_OK)
        dt_error("%s: attribute %s could not be read", source, name);
    return rc;
}

int dt_h5_attr_read_i64(hid_t obj, const char *source, const char *name, int64_t *v)
{
    hid_t a = attr_open(obj, source, name, H5T_INTEGER);
    if (a < 0)
        return DT_ERR_INPUT;
    long long x = 0;
    int rc = H5Aread(a, H5T_NATIVE_LLONG, &x) < 0 ? DT_ERR_INPUT : DT_OK;
    H5Aclose(a);
    if (rc != DT_OK)
        dt_error("%s: attribute %s could not be read", source, name);
    *v = x;
    return rc;
}

/* a scalar attribute of file type ftype from *value in mtype */
static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *value)
{
    int rc = DT_OK;
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    DT_CHECK_HDF5_GOTO(a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT), rc, out);
    DT_CHECK_HDF5_GOTO(H5Awrite(a, mtype, value), rc, out);
out:
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

int dt_h5_attr_write_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE); /* variable length: h5py reads it as str, not bytes */
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = attr_write(obj, name, t, t, &value);
    H5Tclose(t);
    return rc;
}

int dt_h5_attr_write_i64(hid_t obj, const char *name, int64_t v)
{
    long long x = v;
    return attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &x);
}

static hid_t vlen_utf8(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

int dt_h5_write_strings(hid_t loc, const char *name, const char *const *s, int64_t n)
{
    int rc = DT_OK;
    hsize_t dim = (hsize_t)n;
    hid_t t = vlen_utf8(), sp = H5Screate_simple(1, &dim, NULL), ds = -1;
    const char **p = malloc((size_t)(n ? n : 1) * sizeof *p);
    DT_CHECK_ALLOC_GOTO(p, rc, out);
    for (int64_t i = 0; i < n; i++)
        p[i] = s && s[i] ? s[i] : "";
    DT_CHECK_HDF5_GOTO(ds = H5Dcreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), rc, out);
    if (n)
        DT_CHECK_HDF5_GOTO(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, p), rc, out);
out:
    free(p);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

int dt_h5_read_strings(hid_t loc, const char *source, const char *name, int64_t n, char ***out)
{
    int64_t shape[1] = {n};
    *out = NULL;
    hid_t ds = dt_h5_open_checked(loc, source, "dataset", name, 1, shape, NULL);
    if (ds < 0)
        return DT_ERR_INPUT;
    hid_t ft = H5Dget_type(ds), t = vlen_utf8();
    H5Tset_cset(t, H5Tget_cset(ft));
    int rc = DT_OK;
    char **s = calloc((size_t)(n ? n : 1), sizeof *s);
    if (!s) {
        rc = DT_ERR_NOMEM;
    } else if (H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) <= 0) {
        dt_error("%s: dataset %s is not of variable-length strings", source, name);
        rc = DT_ERR_INPUT;
    } else if (n && H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) {
        dt_error("%s: dataset %s could not be read: %s", source, name, dt_errstr_hdf5(-1, 0));
        rc = DT_ERR_INPUT;
    }
    for (int64_t i = 0; rc == DT_OK && i < n; i++)
        if (!s[i]) { /* an empty string may come back as NULL */
            s[i] = calloc(1, 1);
            if (!s[i])
                rc = DT_ERR_NOMEM;
        }
    H5Tclose(t);
    H5Tclose(ft);
    H5Dclose(ds);
    if (rc != DT_OK) {
        dt_h5_strings_free(s, n);
        return rc;
    }
    *out = s;
    return DT_OK;
}

void dt_h5_strings_free(char **s, int64_t n)
{
    if (!s)
        return;
    for (int64_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}
