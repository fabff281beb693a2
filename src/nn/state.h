/* state.h: a model's state_dict in HDF5, under torchvision's names and in PyTorch's layouts.
 *
 * One dataset per state_dict entry, named by its key (dots included), in a group of an open file:
 * float32 for parameters and BN running statistics, int64 for num_batches_tracked, conv weights
 * [O, I, KH, KW]. This is the layout of our checkpoints and of the PyTorch test fixtures, and what a
 * few lines of h5py turn into a torchvision state_dict. */
#ifndef DT_NN_STATE_H
#define DT_NN_STATE_H

#include <hdf5.h>
#include <stdint.h>

#include "nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads dataset `name` under loc as float32 into out (converting from any float type), checking
 * that its shape is exactly shape[0..ndim) (ndim 0: a scalar). `source` names the file in messages.
 * Returns DT_OK, or DT_ERR_INPUT after one line naming the file, the tensor, and the expected and
 * found shapes (or that it is missing). */
int dt_h5_read_floats(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, float *out);
int dt_h5_read_doubles(hid_t loc, const char *source, const char *name, int ndim, const int64_t *shape, double *out);

/* Loads every parameter and buffer of m from group loc (each must exist with its exact shape; the
 * group must hold no entry the model lacks). DT_OK or DT_ERR_INPUT (one line) / DT_ERR_HDF5. */
int dt_model_load_state(dt_model *m, hid_t loc, const char *source);
/* The index of x's first NaN or infinity, or -1 when all n are finite. Saving refuses a tensor
 * that is not finite (DT_ERR_STATE after one line naming it), loading too (DT_ERR_INPUT). */
int64_t dt_floats_nonfinite(const float *x, int64_t n);
/* Writes every parameter and buffer of m into group loc. */
int dt_model_save_state(const dt_model *m, hid_t loc);

/* Values of m's parameters kept apart from the model, in fp32 whatever the model stores (the
 * model's average, train/ema.h): weights in the fp32 layout of the trainable parameters
 * (dt_param.off, n_weights floats), buffers at their dt_param.off (n_buffers floats), both the
 * backend's memory; counts on the host (n_counts). */
typedef struct dt_fp32_state {
    float *weights, *buffers;
    int64_t *counts;
} dt_fp32_state;
/* dt_model_load_state and dt_model_save_state with s in the model's place (s NULL: the model's own
 * storage): the same names, shapes, layouts and checks, no rounding to the model's types. */
int dt_model_load_state_to(dt_model *m, hid_t loc, const char *source, const dt_fp32_state *s);
int dt_model_save_state_from(const dt_model *m, hid_t loc, const dt_fp32_state *s);

#ifdef __cplusplus
}
#endif
#endif
