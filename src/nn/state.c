/* state.c: state_dict I/O in HDF5 (contract in state.h). */
#include "config.h"

#include "nn/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* open `name`, check its shape; returns the dataset or -1 after one line */
static hid_t open_checked(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape)
{
    char want[128], got[128];
    shape_text(want, sizeof want, ndim, shape);
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) {
        dt_error("%s: tensor %s is missing (expected shape %s)", source, name, want);
        return -1;
    }
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0) {
        dt_error("%s: tensor %s cannot be opened as a dataset", source, name);
        return -1;
    }
    hid_t sp = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    int ok = nd == ndim && nd >= 0 && nd <= 8 && H5Sget_simple_extent_dims(sp, dims, NULL) == nd;
    int64_t found[8];
    for (int i = 0; i < nd && i < 8; i++) {
        found[i] = (int64_t)dims[i];
        ok = ok && found[i] == shape[i];
    }
    H5Sclose(sp);
    if (!ok) {
        shape_text(got, sizeof got, nd < 0 ? 0 : (nd > 8 ? 8 : nd), found);
        dt_error("%s: tensor %s has shape %s, expected %s", source, name, got, want);
        H5Dclose(ds);
        return -1;
    }
    return ds;
}

static int read_as(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, hid_t type,
                   void *out)
{
    dt_check_hdf5_init();
    hid_t ds = open_checked(loc, source, name, ndim, shape);
    if (ds < 0)
        return DT_ERR_INPUT;
    int rc = DT_OK;
    DT_CHECK_HDF5_GOTO(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), rc, out);
out:
    H5Dclose(ds);
    if (rc != DT_OK)
        dt_error("%s: tensor %s could not be read", source, name);
    return rc;
}

int dt_h5_read_floats(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, float *out)
{
    return read_as(loc, source, name, ndim, shape, H5T_NATIVE_FLOAT, out);
}

int dt_h5_read_doubles(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, double *out)
{
    return read_as(loc, source, name, ndim, shape, H5T_NATIVE_DOUBLE, out);
}

/* a buffer the size of m's largest tensor, or NULL */
static float *largest_tensor_buffer(const dt_model *m)
{
    int64_t max = 1;
    for (int i = 0; i < m->n_params; i++)
        max = m->params[i].numel > max ? m->params[i].numel : max;
    return malloc((size_t)max * sizeof(float));
}

int dt_model_load_state(dt_model *m, hid_t loc, const char *source)
{
    float *tmp = NULL;
    DT_CHECK_ALLOC(tmp = largest_tensor_buffer(m));
    int rc = DT_OK;
    for (int i = 0; i < m->n_params && rc == DT_OK; i++) {
        const dt_param *p = &m->params[i];
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        if (p->kind == DT_P_BN_COUNT) {
            rc = read_as(loc, source, p->name, 0, shape, H5T_NATIVE_INT64, &m->counts[p->off]);
            continue;
        }
        rc = dt_h5_read_floats(loc, source, p->name, p->ndim, shape, tmp);
        if (rc == DT_OK)
            dt_param_from_torch(p, tmp, dt_param_data(m, p));
    }
    free(tmp);
    if (rc != DT_OK)
        return rc;
    H5G_info_t gi;
    DT_CHECK_HDF5(H5Gget_info(loc, &gi));
    hsize_t n = gi.nlinks;
    if (n != (hsize_t)m->n_params) {
        dt_error("%s: holds %llu tensors, model %s has %d: not a state_dict of this model", source,
                 (unsigned long long)n, m->arch, m->n_params);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

int dt_model_save_state(const dt_model *m, hid_t loc)
{
    float *tmp = NULL;
    DT_CHECK_ALLOC(tmp = largest_tensor_buffer(m));
    int rc = DT_OK;
    for (int i = 0; i < m->n_params && rc == DT_OK; i++) {
        const dt_param *p = &m->params[i];
        hsize_t dims[4];
        for (int d = 0; d < p->ndim; d++)
            dims[d] = (hsize_t)p->shape[d];
        hid_t sp = -1, ds = -1;
        DT_CHECK_HDF5_GOTO(sp = p->ndim ? H5Screate_simple(p->ndim, dims, NULL) : H5Screate(H5S_SCALAR), rc, next);
        if (p->kind == DT_P_BN_COUNT) {
            DT_CHECK_HDF5_GOTO(ds = H5Dcreate2(loc, p->name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), rc, next);
            DT_CHECK_HDF5_GOTO(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &m->counts[p->off]), rc, next);
        } else {
            dt_param_to_torch(p, dt_param_data(m, p), tmp);
            DT_CHECK_HDF5_GOTO(ds = H5Dcreate2(loc, p->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), rc, next);
            DT_CHECK_HDF5_GOTO(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp), rc, next);
        }
    next:
        if (ds >= 0)
            H5Dclose(ds);
        if (sp >= 0)
            H5Sclose(sp);
    }
    free(tmp);
    return rc;
}
