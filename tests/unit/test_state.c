/* test_state.c: a model's state_dict through HDF5: save and load round-trip exactly (conv weights
 * go out as PyTorch's O,I,KH,KW and come back as ours); a missing tensor, a mis-shaped tensor, an
 * extra tensor and another architecture's file are refused with one line naming the file, the
 * tensor and the expected and found shapes. */
#include "config.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/model.h"
#include "nn/state.h"
#include "tap.h"
#include "util/check.h"

static char path[] = "/tmp/dtrain-test-state-XXXXXX";

/* a file holding m's state, then edited by edit (may be NULL) */
static void write_state(const dt_model *m, void (*edit)(hid_t))
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    dt_model_save_state(m, g);
    if (edit)
        edit(g);
    H5Gclose(g);
    H5Fclose(f);
}

static int load_state(dt_model *m)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "params", H5P_DEFAULT);
    int rc = dt_model_load_state(m, g, path);
    H5Gclose(g);
    H5Fclose(f);
    return rc;
}

static void drop_tensor(hid_t g)
{
    H5Ldelete(g, "layer2.0.conv1.weight", H5P_DEFAULT);
}

static void reshape_tensor(hid_t g)
{
    H5Ldelete(g, "layer2.0.conv1.weight", H5P_DEFAULT);
    hsize_t dims[4] = {32, 8, 3, 3};
    hid_t sp = H5Screate_simple(4, dims, NULL);
    hid_t ds = H5Dcreate2(g, "layer2.0.conv1.weight", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(sp);
}

static void extra_tensor(hid_t g)
{
    hsize_t dims[1] = {3};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t ds = H5Dcreate2(g, "layer4.0.conv1.weight", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(sp);
}

int main(void)
{
    int fd = mkstemp(path);
    close(fd);
    tap_log_begin();
    dt_check_hdf5_init();
    dt_model a, b;
    dt_model_create(&a, "resnet20", 3, 10, &dt_backend_cpu);
    dt_model_create(&b, "resnet20", 3, 10, &dt_backend_cpu);
    dt_model_init_weights(&a, 1, 0);
    a.counts[0] = 17;
    for (int64_t i = 0; i < a.n_buffers; i++)
        ((float *)a.buffers)[i] = (float)i * 0.25f;
    write_state(&a, NULL);
    TAP_OK(load_state(&b) == DT_OK, "save then load");
    TAP_OK(memcmp(a.weights, b.weights, (size_t)a.n_weights * sizeof(float)) == 0 &&
               memcmp(a.buffers, b.buffers, (size_t)a.n_buffers * sizeof(float)) == 0 && b.counts[0] == 17,
           "weights, BN statistics and counts round-trip exactly");
    /* PyTorch's layout on disk: element [o][i][y][x] of conv1.weight is ours at [o][y][x][i] */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    float disk[16 * 3 * 3 * 3];
    int64_t shape[4] = {16, 3, 3, 3};
    dt_h5_read_floats(f, path, "params/conv1.weight", 4, shape, disk);
    H5Fclose(f);
    const dt_param *p = &a.params[dt_model_find_param(&a, "conv1.weight")];
    const float *ours = dt_param_data(&a, p);
    TAP_OK(disk[((5 * 3 + 2) * 3 + 1) * 3 + 0] == ours[((5 * 3 + 1) * 3 + 0) * 3 + 2], "conv weights on disk are O,I,KH,KW");
    free(tap_log_take());

    write_state(&a, drop_tensor);
    TAP_OK(load_state(&b) == DT_ERR_INPUT, "a missing tensor is refused");
    char *s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "tensor layer2.0.conv1.weight is missing (expected shape [32, 16, 3, 3])"),
           "one line naming it and its shape: %s", s);
    free(s);

    write_state(&a, reshape_tensor);
    TAP_OK(load_state(&b) == DT_ERR_INPUT, "a mis-shaped tensor is refused");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "tensor layer2.0.conv1.weight has shape [32, 8, 3, 3], expected [32, 16, 3, 3]"),
           "one line with both shapes: %s", s);
    free(s);

    write_state(&a, extra_tensor);
    TAP_OK(load_state(&b) == DT_ERR_INPUT, "an extra tensor is refused");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "not a state_dict of this model"), "one line: %s", s);
    free(s);

    dt_model c;
    dt_model_create(&c, "resnet8", 3, 10, &dt_backend_cpu);
    write_state(&a, NULL);
    TAP_OK(load_state(&c) == DT_ERR_INPUT, "another architecture's state is refused");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, path), "naming the file: %s", s);
    free(s);
    dt_model_free(&a);
    dt_model_free(&b);
    dt_model_free(&c);
    unlink(path);
    tap_log_end();
    return tap_done();
}
