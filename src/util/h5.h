/* h5.h: small HDF5 helpers shared by the state_dict I/O and the shard format: datasets opened with
 * their shape checked, and scalar attributes read and written. Every failure is one logged line
 * naming the source (a file name) and the object, so callers only pass the status on. */
#ifndef DT_UTIL_H5_H
#define DT_UTIL_H5_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "[2, 3]" for a shape (a -1 entry prints as "*") */
void dt_h5_shape_text(char *buf, size_t n, int ndim, const int64_t *shape);

/* Opens dataset `name` and checks it has ndim dimensions equal to shape (an entry -1 matches any
 * size; found sizes are returned through found when not NULL). Returns the dataset, or -1 after
 * one line ("missing", "has shape X, expected Y"). `what` names the kind of object ("tensor"). */
hid_t dt_h5_open_checked(hid_t loc, const char *source, const char *what, const char *name, int ndim,
                         const int64_t *shape, int64_t *found);

/* dt_h5_open_checked, then the whole dataset read as `type` into out */
int dt_h5_read(hid_t loc, const char *source, const char *what, const char *name, int ndim, const int64_t *shape,
               hid_t type, void *out);

/* Opens an existing file read-only: the file, or -1 after one line "<what> <path> cannot be
 * opened as HDF5: <HDF5's reason>" (what: "shard", "checkpoint", ...). The file is first checked
 * by dt_h5_probe, so damaged metadata is refused in that one line instead of crashing here. */
hid_t dt_h5_open_ro(const char *path, const char *what);

/* Reads the whole of a file's HDF5 metadata (and the first rows of each dataset) in a forked child,
 * so that a file that would crash the HDF5 library is found without crashing this process.
 * DT_ERR_INPUT after one line when the child crashed or hung (over DT_H5_PROBE_TIMEOUT seconds,
 * default 120); DT_OK otherwise, also when the file merely has errors (the caller's own reads
 * report those). DT_H5_PROBE=0 skips it. Not thread-safe with respect to other HDF5 users. */
int dt_h5_probe(const char *path, const char *what);

/* Creates dataset `name` of file type ftype and shape dims[ndim] and writes data (in mtype). */
int dt_h5_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int ndim, const hsize_t *dims, const void *data);

/* Scalar attributes of an object. Reading: DT_ERR_INPUT after one line when missing or of the
 * wrong kind. Strings are copied into buf (truncated to n - 1). */
int dt_h5_attr_read_str(hid_t obj, const char *source, const char *name, char *buf, size_t n);
int dt_h5_attr_read_i64(hid_t obj, const char *source, const char *name, int64_t *v);
int dt_h5_attr_write_str(hid_t obj, const char *name, const char *value);
int dt_h5_attr_write_i64(hid_t obj, const char *name, int64_t v);

/* A 1-D dataset of variable-length UTF-8 strings: written from n pointers (NULL writes ""), or
 * read into n malloc'd strings (*out is malloc'd too; free with dt_h5_strings_free). */
int dt_h5_write_strings(hid_t loc, const char *name, const char *const *s, int64_t n);
int dt_h5_read_strings(hid_t loc, const char *source, const char *name, int64_t n, char ***out);
void dt_h5_strings_free(char **s, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
