/* list_params.c [ARCH...]: the state_dict of each architecture of the model table (nn/models.c; all of
 * them without arguments) as dtrain builds it for 3 channels and 1000 classes: a line "model ARCH", then
 * one line "NAME SHAPE" per parameter in the model's order, SHAPE in PyTorch's layout as "64x3x7x7" ("-"
 * for a scalar, num_batches_tracked). tests/torch/names.sh compares it with torchvision's state_dicts.
 * Exit status: 0, or 1 when a model does not build. */
#include "config.h"

#include <stdio.h>

#include "nn/model.h"
#include "util/check.h"

static int list(const char *arch)
{
    dt_model m;
    if (dt_model_create(&m, arch, 3, 1000, &dt_backend_cpu) != DT_OK)
        return 1;
    printf("model %s\n", arch);
    for (int i = 0; i < m.n_params; i++) {
        const dt_param *p = &m.params[i];
        printf("%s ", p->name);
        if (p->ndim == 0)
            putchar('-');
        for (int d = 0; d < p->ndim; d++)
            printf("%s%d", d ? "x" : "", p->shape[d]);
        putchar('\n');
    }
    dt_model_free(&m);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 0;
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            rc |= list(argv[i]);
    else
        for (int i = 0; i < dt_n_models; i++)
            rc |= list(dt_models[i].name);
    return rc;
}
