/* recipe.h: `dtrain --recipe NAME`: the command lines torchvision's reference classification scripts
 * document for their models (references/classification/README.md), NVIDIA's DeepLearningExamples
 * ResNet-50 and MLPerf's LARS ResNet-50, as dtrain flags.
 *
 * A recipe is a list of flags put in front of the user's own, so any flag given on the command line
 * wins over the recipe's (flags are read left to right; the last one counts). Learning rates are
 * dtrain's: per 256 images, scaled by the global batch (torchvision's are for the global batch its
 * README used, given in `gpus` x the recipe's -b); everything else is named as torchvision names it.
 * doc/recipes.md shows each next to torchvision's own line; tests/train/recipes.sh checks that the two
 * agree and that every recipe parses. */
#ifndef DT_TRAIN_RECIPE_H
#define DT_TRAIN_RECIPE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_recipe {
    const char *name;        /* what --recipe takes */
    const char *flags;       /* dtrain's flags, separated by single spaces */
    const char *torchvision; /* the documented command line it reproduces (its flags after train.py) */
    int gpus;                /* the GPUs that line was documented for (its global batch: gpus x -b) */
} dt_recipe;

/* the recipe of that name, or NULL */
const dt_recipe *dt_recipe_find(const char *name);
/* every recipe, "name: flags", one per line (dtrain --recipe list) */
void dt_recipe_print(FILE *out);

/* argv with the named recipe's flags put first, after argv[0] (the rest as given, "--recipe NAME" or
 * "--recipe=NAME" included: the caller reads the name from it; the same name given twice is one
 * recipe), in a new NULL-terminated array *out_argv of *out_argc entries (free it
 * and (*strings) with free()). 0 when argv names no recipe (*out_argv NULL), 1 when it was expanded,
 * 2 for the name "list" (the recipes printed to stdout), -1 after one line for an unknown name, a
 * missing one, two different ones, one holding a control byte (or out of memory). Stops looking at
 * "--". *recipe_args: how many entries after (*out_argv)[0] are the recipe's (0 unless expanded). */
int dt_recipe_expand(int argc, char **argv, int *out_argc, char ***out_argv, char **strings, int *recipe_args);

#ifdef __cplusplus
}
#endif
#endif
