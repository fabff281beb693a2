/* recipe.c: the recipes behind `dtrain --recipe NAME` (recipe.h), and putting one's flags into argv. */
#include "config.h"

#include "train/recipe.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

/* torchvision's resnet50 recipe of its IMAGENET1K_V2 weights (80.86% top-1), used for resnet101 and
 * resnet152's V2 weights too: 8 GPUs x 128, lr 0.5 for 1024 images (0.125 per 256) */
#define TV_NEW_FLAGS                                                                                              \
    "-b 128 --lr 0.125 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear "        \
    "--auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 --norm-weight-decay 0.0 "    \
    "--label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 --train-crop-size 176 --model-ema "             \
    "--val-resize-size 232 --val-crop-size 224"
#define TV_NEW_LINE                                                                                               \
    "--batch-size 128 --lr 0.5 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear " \
    "--auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 --norm-weight-decay 0.0 "    \
    "--label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 --train-crop-size 176 --model-ema "             \
    "--val-resize-size 232"
/* its original recipe (train.py's defaults: 8 GPUs x 32, SGD 0.1, StepLR 30 x 0.1, 90 epochs) */
#define TV_OLD_FLAGS "-b 32 --lr 0.1 --momentum 0.9 --weight-decay 1e-4 --lr-scheduler steplr --lr-step-size 30 " \
                     "--lr-gamma 0.1 --epochs 90"
/* AlexNet and VGG: the same with lr 0.01 */
#define TV_OLD_SMALL_LR_FLAGS "-b 32 --lr 0.01 --momentum 0.9 --weight-decay 1e-4 --lr-scheduler steplr " \
                              "--lr-step-size 30 --lr-gamma 0.1 --epochs 90"

/* ResNeXt: the original recipe for 100 epochs */
#define TV_OLD_100_FLAGS "-b 32 --lr 0.1 --momentum 0.9 --weight-decay 1e-4 --lr-scheduler steplr --lr-step-size 30 " \
                         "--lr-gamma 0.1 --epochs 100"
#define TV_MBV3_FLAGS                                                                                              \
    "-b 128 --opt rmsprop --lr 0.016 --momentum 0.9 --weight-decay 0.00001 --lr-scheduler steplr --lr-step-size 2 " \
    "--lr-gamma 0.973 --epochs 600 --auto-augment imagenet --random-erase 0.2"
#define TV_MBV3_LINE                                                                                               \
    "--epochs 600 --opt rmsprop --batch-size 128 --lr 0.064 --wd 0.00001 --lr-step-size 2 --lr-gamma 0.973 "     \
    "--auto-augment imagenet --random-erase 0.2"
/* RegNet: cosine after 5 linear warm-up epochs from 0.1, 100 epochs; the batch and lr by size (each lr is
 * 0.2 per 256 images) */
#define TV_REGNET_REST                                                                                             \
    " --momentum 0.9 --weight-decay 0.00005 --lr-scheduler cosineannealinglr --lr-warmup-method linear "           \
    "--lr-warmup-epochs 5 --lr-warmup-decay 0.1 --epochs 100"
#define TV_REGNET_LINE_REST                                                                                        \
    " --wd 0.00005 --lr-scheduler=cosineannealinglr --lr-warmup-method=linear --lr-warmup-epochs=5 "               \
    "--lr-warmup-decay=0.1"
#define TV_REGNET_FLAGS "-b 128 --lr 0.2" TV_REGNET_REST
#define TV_REGNET_LINE "--epochs 100 --batch-size 128 --lr=0.8" TV_REGNET_LINE_REST
/* ConvNeXt: AdamW lr 1e-3 for 8 x 128 (0.00025 per 256), the new recipe's augmentation, EMA, the
 * repeated-augmentation sampler */
#define TV_CONVNEXT_FLAGS                                                                                          \
    "-b 128 --opt adamw --lr 0.00025 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method "    \
    "linear --auto-augment ta_wide --epochs 600 --random-erase 0.1 --label-smoothing 0.1 --mixup-alpha 0.2 "        \
    "--cutmix-alpha 1.0 --weight-decay 0.05 --norm-weight-decay 0.0 --train-crop-size 176 --model-ema "             \
    "--val-resize-size 232 --val-crop-size 224 --ra-sampler --ra-reps 4"
#define TV_CONVNEXT_LINE                                                                                           \
    "--batch-size 128 --opt adamw --lr 1e-3 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 "                \
    "--lr-warmup-method linear --auto-augment ta_wide --epochs 600 --random-erase 0.1 --label-smoothing 0.1 "      \
    "--mixup-alpha 0.2 --cutmix-alpha 1.0 --weight-decay 0.05 --norm-weight-decay 0.0 --train-crop-size 176 "      \
    "--model-ema --val-resize-size 232 --ra-sampler --ra-reps 4"

static const dt_recipe recipes[] = {
    {"resnet50", "-a resnet50 " TV_NEW_FLAGS, "--model resnet50 " TV_NEW_LINE, 8},
    {"resnet101", "-a resnet101 " TV_NEW_FLAGS, "--model resnet101 " TV_NEW_LINE, 8},
    {"resnet152", "-a resnet152 " TV_NEW_FLAGS, "--model resnet152 " TV_NEW_LINE, 8},
    {"resnet50_v1", "-a resnet50 " TV_OLD_FLAGS, "--model resnet50", 8},
    {"resnet18", "-a resnet18 " TV_OLD_FLAGS, "--model resnet18", 8},
    {"resnet34", "-a resnet34 " TV_OLD_FLAGS, "--model resnet34", 8},
    {"alexnet", "-a alexnet " TV_OLD_SMALL_LR_FLAGS, "--model alexnet --lr 1e-2", 8},
    {"vgg11", "-a vgg11 " TV_OLD_SMALL_LR_FLAGS, "--model vgg11 --lr 1e-2", 8},
    {"vgg16", "-a vgg16 " TV_OLD_SMALL_LR_FLAGS, "--model vgg16 --lr 1e-2", 8},
    {"vgg11_bn", "-a vgg11_bn " TV_OLD_SMALL_LR_FLAGS, "--model vgg11_bn --lr 1e-2", 8},
    {"vgg16_bn", "-a vgg16_bn " TV_OLD_SMALL_LR_FLAGS, "--model vgg16_bn --lr 1e-2", 8},
    /* the zoo, each as torchvision's references/classification/README.md trains it on 8 GPUs */
    {"resnext50_32x4d", "-a resnext50_32x4d " TV_OLD_100_FLAGS, "--model resnext50_32x4d --epochs 100", 8},
    {"resnext101_32x8d", "-a resnext101_32x8d " TV_OLD_100_FLAGS, "--model resnext101_32x8d --epochs 100", 8},
    /* MobileNetV2: lr 0.045 for 8 x 32 = 256 images, StepLR every epoch x 0.98 */
    {"mobilenet_v2",
     "-a mobilenet_v2 -b 32 --lr 0.045 --momentum 0.9 --weight-decay 0.00004 --lr-scheduler steplr "
     "--lr-step-size 1 --lr-gamma 0.98 --epochs 300",
     "--model mobilenet_v2 --epochs 300 --lr 0.045 --wd 0.00004 --lr-step-size 1 --lr-gamma 0.98", 8},
    /* MobileNetV3: RMSprop (train.py's alpha 0.9, eps 0.0316, momentum 0.9), lr 0.064 for 8 x 128 */
    {"mobilenet_v3_large", "-a mobilenet_v3_large " TV_MBV3_FLAGS, "--model mobilenet_v3_large " TV_MBV3_LINE, 8},
    {"mobilenet_v3_small", "-a mobilenet_v3_small " TV_MBV3_FLAGS, "--model mobilenet_v3_small " TV_MBV3_LINE, 8},
    /* RegNetY: the small models lr 0.8 for 8 x 128, but -400MF 0.4 (torchvision's note: the paper's
     * accuracy); the medium ones 0.4 for 8 x 64, the large one 0.2 for 8 x 32 */
    {"regnet_y_400mf", "-a regnet_y_400mf -b 128 --lr 0.1" TV_REGNET_REST,
     "--model regnet_y_400mf --epochs 100 --batch-size 128 --lr=0.4" TV_REGNET_LINE_REST, 8},
    {"regnet_y_800mf", "-a regnet_y_800mf " TV_REGNET_FLAGS, "--model regnet_y_800mf " TV_REGNET_LINE, 8},
    {"regnet_y_1_6gf", "-a regnet_y_1_6gf " TV_REGNET_FLAGS, "--model regnet_y_1_6gf " TV_REGNET_LINE, 8},
    {"regnet_y_3_2gf", "-a regnet_y_3_2gf -b 64 --lr 0.2" TV_REGNET_REST,
     "--model regnet_y_3_2gf --epochs 100 --batch-size 64 --lr=0.4" TV_REGNET_LINE_REST, 8},
    {"regnet_y_8gf", "-a regnet_y_8gf -b 64 --lr 0.2" TV_REGNET_REST,
     "--model regnet_y_8gf --epochs 100 --batch-size 64 --lr=0.4" TV_REGNET_LINE_REST, 8},
    {"regnet_y_16gf", "-a regnet_y_16gf -b 32 --lr 0.2" TV_REGNET_REST,
     "--model regnet_y_16gf --epochs 100 --batch-size 32 --lr=0.2" TV_REGNET_LINE_REST, 8},
    /* EfficientNet-V2-S: SGD lr 0.5 for 8 x 128 (0.125 per 256), trained at 300, validated at 384 */
    {"efficientnet_v2_s",
     "-a efficientnet_v2_s -b 128 --lr 0.125 --momentum 0.9 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 "
     "--lr-warmup-method linear --auto-augment ta_wide --epochs 600 --random-erase 0.1 --label-smoothing 0.1 "
     "--mixup-alpha 0.2 --cutmix-alpha 1.0 --weight-decay 0.00002 --norm-weight-decay 0.0 --train-crop-size 300 "
     "--model-ema --val-crop-size 384 --val-resize-size 384 --ra-sampler --ra-reps 4",
     "--model efficientnet_v2_s --batch-size 128 --lr 0.5 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 "
     "--lr-warmup-method linear --auto-augment ta_wide --epochs 600 --random-erase 0.1 --label-smoothing 0.1 "
     "--mixup-alpha 0.2 --cutmix-alpha 1.0 --weight-decay 0.00002 --norm-weight-decay 0.0 --train-crop-size 300 "
     "--model-ema --val-crop-size 384 --val-resize-size 384 --ra-sampler --ra-reps 4",
     8},
    /* ConvNeXt-T and -S: one line */
    {"convnext_tiny", "-a convnext_tiny " TV_CONVNEXT_FLAGS, "--model convnext_tiny " TV_CONVNEXT_LINE, 8},
    {"convnext_small", "-a convnext_small " TV_CONVNEXT_FLAGS, "--model convnext_small " TV_CONVNEXT_LINE, 8},
    /* ViT-B/16: AdamW lr 0.003 for 8 x 512 (0.0001875 per 256), weight decay 0.3, 30 warm-up epochs of
     * cosine, autocast, label smoothing 0.11, mixup and cutmix, RandAugment, clipping at norm 1, the
     * repeated-augmentation sampler, EMA */
    {"vit_b_16",
     "-a vit_b_16 -b 512 --opt adamw --lr 0.0001875 --weight-decay 0.3 --lr-scheduler cosineannealinglr "
     "--lr-warmup-method linear --lr-warmup-epochs 30 --lr-warmup-decay 0.033 --amp --label-smoothing 0.11 "
     "--mixup-alpha 0.2 --auto-augment ra --clip-grad-norm 1 --ra-sampler --cutmix-alpha 1.0 --model-ema "
     "--epochs 300",
     "--model vit_b_16 --epochs 300 --batch-size 512 --opt adamw --lr 0.003 --wd 0.3 "
     "--lr-scheduler cosineannealinglr --lr-warmup-method linear --lr-warmup-epochs 30 --lr-warmup-decay 0.033 "
     "--amp --label-smoothing 0.11 --mixup-alpha 0.2 --auto-augment ra --clip-grad-norm 1 --ra-sampler "
     "--cutmix-alpha 1.0 --model-ema",
     8},
    /* NVIDIA DeepLearningExamples' ResNet-50 v1.5 at 250 epochs with mixup (78.9% top-1): 256 per GPU,
     * lr 0.256 per 256, momentum 0.875, wd 1/32768 without it on BN, cosine after 8 warm-up epochs,
     * label smoothing 0.1 (not a torchvision line: its own main.py's) */
    {"resnet50_dle",
     "-a resnet50 -b 256 --lr 0.256 --momentum 0.875 --weight-decay 3.0517578125e-05 --norm-weight-decay 0 "
     "--lr-schedule cosine --warmup-epochs 8 --label-smoothing 0.1 --mixup-alpha 0.2 --epochs 250",
     "(DeepLearningExamples main.py) --arch resnet50 -b 256 --lr 0.256 --momentum 0.875 --wd 3.0517578125e-05 "
     "--lr-schedule cosine --warmup 8 --label-smoothing 0.1 --mixup 0.2 --epochs 250",
     8},
    /* the quick start's demo (bench/fmnist.sh's two recipes), resnet20 on Fashion-MNIST */
    {"fmnist", "-a resnet20 -b 64 --epochs 5 --lr 0.4 --lr-schedule cosine --wd 5e-4 --crop-padding 2",
     "(bench/torch_fmnist.py sgd)", 2},
    {"fmnist_adamw",
     "-a resnet20 -b 64 --epochs 10 --crop-padding 2 --opt adamw --lr 0.002 --no-lr-scaling --wd 0.05 "
     "--norm-weight-decay 0 --label-smoothing 0.1 --lr-scheduler cosineannealinglr --lr-warmup-epochs 1 "
     "--lr-warmup-method linear --mixup-alpha 0.2 --cutmix-alpha 1.0 --model-ema --model-ema-steps 32 "
     "--model-ema-decay 0.99998",
     "--opt adamw --lr 0.002 --weight-decay 0.05 --norm-weight-decay 0 --label-smoothing 0.1 "
     "--lr-scheduler cosineannealinglr --lr-warmup-epochs 1 --lr-warmup-method linear --mixup-alpha 0.2 "
     "--cutmix-alpha 1.0 --model-ema --model-ema-steps 32 --model-ema-decay 0.99998",
     2},
};

const dt_recipe *dt_recipe_find(const char *name)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcmp(recipes[i].name, name))
            return &recipes[i];
    return NULL;
}

void dt_recipe_print(FILE *out)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        fprintf(out, "%s: %s\n", recipes[i].name, recipes[i].flags);
}

int dt_recipe_expand(int argc, char **argv, int *out_argc, char ***out_argv, char **strings, int *recipe_args)
{
    *out_argv = NULL;
    *recipe_args = 0;
    *strings = NULL;
    const char *name = NULL;
    char e1[160], e2[160];
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *got = NULL;
        if (!strcmp(argv[i], "--recipe")) {
            if (i + 1 >= argc) {
                dt_error("--recipe: needs a name (dtrain --recipe list shows them)");
                return -1;
            }
            got = argv[++i];
        } else if (!strncmp(argv[i], "--recipe=", 9)) {
            got = argv[i] + 9;
        }
        if (got && dt_parse_text("--recipe", got) != DT_OK)
            return -1;
        /* one recipe: the flags of two would mix, and which one's value counted would depend on the
         * order of flags inside them (the same name twice is one recipe) */
        if (got && name && strcmp(got, name)) {
            dt_error("--recipe %s and --recipe %s: give one recipe (its flags can be overridden one by one)",
                     dt_cli_escape(name, e1, sizeof e1), dt_cli_escape(got, e2, sizeof e2));
            return -1;
        }
        if (got)
            name = got;
    }
    if (!name)
        return 0;
    if (!strcmp(name, "list")) {
        dt_recipe_print(stdout);
        return 2;
    }
    const dt_recipe *rc = dt_recipe_find(name);
    if (!rc) {
        dt_error("--recipe %s: no such recipe (dtrain --recipe list shows them)", dt_cli_escape(name, e1, sizeof e1));
        return -1;
    }
    char *s = strdup(rc->flags);
    char **v = s ? calloc((size_t)argc + strlen(s) + 2, sizeof *v) : NULL;
    if (!v) {
        free(s);
        dt_error("--recipe %s: out of memory", name);
        return -1;
    }
    int k = 0;
    v[k++] = argv[0];
    for (char *save = NULL, *t = strtok_r(s, " ", &save); t; t = strtok_r(NULL, " ", &save))
        v[k++] = t;
    *recipe_args = k - 1; /* v[1 .. k - 1]: the recipe's, for dtrain's rule on flags without effect */
    /* then the command line as given, its --recipe NAME too: dtrain records the name (run.json), and
     * a worker that --nproc-per-node starts with the command line expands it again */
    for (i = 1; i < argc; i++)
        v[k++] = argv[i];
    v[k] = NULL;
    *out_argc = k;
    *out_argv = v;
    *strings = s;
    return 1;
}
