/* state.c: state_dict I/O in HDF5 (contract in state.h). */
#include "config.h"

#include "nn/state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/h5.h"
#include "util/log.h"

int dt_h5_read_floats(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, float *out)
{
    return dt_h5_read(loc, source, "tensor", name, ndim, shape, H5T_NATIVE_FLOAT, out);
}

int dt_h5_read_doubles(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, double *out)
{
    return dt_h5_read(loc, source, "tensor", name, ndim, shape, H5T_NATIVE_DOUBLE, out);
}

int64_t dt_floats_nonfinite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

/* two host buffers the size of m's largest tensor (PyTorch's layout, then ours), or NULL */
static float *largest_tensor_buffer(const dt_model *m, float **ours)
{
    int64_t max = 1;
    for (int i = 0; i < m->n_params; i++)
        max = m->params[i].numel > max ? m->params[i].numel : max;
    float *b = malloc(2 * (size_t)max * sizeof(float));
    *ours = b ? b + max : NULL;
    return b;
}

/* where p's fp32 values are in s */
static float *fp32_of(const dt_param *p, const dt_fp32_state *s)
{
    return (dt_param_trainable(p) ? s->weights : s->buffers) + p->off;
}

/* p's values as fp32 (our layout) into ours: from s when it is given, else from the model */
static void get_values(const dt_model *m, const dt_param *p, const dt_fp32_state *s, float *ours)
{
    if (s)
        m->be->mem_get(ours, fp32_of(p, s), (size_t)p->numel * sizeof(float));
    else
        dt_param_get(m, p, ours);
}

static void put_values(dt_model *m, const dt_param *p, const dt_fp32_state *s, const float *ours)
{
    if (s)
        m->be->mem_put(fp32_of(p, s), ours, (size_t)p->numel * sizeof(float));
    else
        dt_param_put(m, p, ours); /* rounded to its type */
}

int dt_model_load_state(dt_model *m, hid_t loc, const char *source)
{
    return dt_model_load_state_to(m, loc, source, NULL);
}

int dt_model_save_state(const dt_model *m, hid_t loc)
{
    return dt_model_save_state_from(m, loc, NULL);
}

int dt_model_load_state_to(dt_model *m, hid_t loc, const char *source, const dt_fp32_state *s)
{
    float *tmp = NULL, *ours;
    DT_CHECK_ALLOC(tmp = largest_tensor_buffer(m, &ours));
    int rc = DT_OK;
    for (int i = 0; i < m->n_params && rc == DT_OK; i++) {
        const dt_param *p = &m->params[i];
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        if (p->kind == DT_P_BN_COUNT) {
            rc = dt_h5_read(loc, source, "tensor", p->name, 0, shape, H5T_NATIVE_INT64,
                            s ? &s->counts[p->off] : &m->counts[p->off]);
            continue;
        }
        rc = dt_h5_read_floats(loc, source, p->name, p->ndim, shape, tmp);
        int64_t bad = rc == DT_OK ? dt_floats_nonfinite(tmp, p->numel) : -1;
        if (bad >= 0) { /* what a diverged run (or a damaged file) holds: nothing to start from */
            dt_error("%s: tensor %s holds %g at element %lld: every value must be finite (a diverged run?)", source, p->name, tmp[bad],
                     (long long)bad);
            rc = DT_ERR_INPUT;
        }
        if (rc == DT_OK) {
            dt_param_from_torch(p, tmp, ours);
            put_values(m, p, s, ours);
        }
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

int dt_model_save_state_from(const dt_model *m, hid_t loc, const dt_fp32_state *s)
{
    float *tmp = NULL, *ours;
    DT_CHECK_ALLOC(tmp = largest_tensor_buffer(m, &ours));
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
            DT_CHECK_HDF5_GOTO(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                        s ? &s->counts[p->off] : &m->counts[p->off]),
                               rc, next);
        } else {
            get_values(m, p, s, ours);
            int64_t bad = dt_floats_nonfinite(ours, p->numel);
            if (bad >= 0) { /* never a file that cannot be resumed from */
                dt_error("tensor %s holds %g: a diverged model is not saved", p->name, ours[bad]);
                rc = DT_ERR_STATE;
                goto next;
            }
            dt_param_to_torch(p, ours, tmp);
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
