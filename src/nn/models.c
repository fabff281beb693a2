/* models.c: torchvision's architectures (and the small-input variants) built as model graphs,
 * with torchvision's module names so state_dict names match. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "nn/model.h"
#include "util/check.h"
#include "util/log.h"

const char *const dt_model_archs[] = {"resnet18", "resnet34",  "resnet50", "resnet101", "resnet152",     "resnet8",
                                      "resnet20", "resnet56",  "resnet18_small", "alexnet", "vgg11", "vgg11_bn",
                                      "vgg16",    "vgg16_bn", NULL};

/* conv -> bn (-> relu): the common triple, named <prefix>.convN / <prefix>.bnN */
static int conv_bn(dt_model *m, const char *prefix, int idx, int x, int oc, int k, int s, int relu)
{
    char cn[DT_NAME_MAX], bn[DT_NAME_MAX];
    snprintf(cn, sizeof cn, "%s%sconv%d", prefix, prefix[0] ? "." : "", idx);
    snprintf(bn, sizeof bn, "%s%sbn%d", prefix, prefix[0] ? "." : "", idx);
    x = dt_b_conv(m, cn, x, oc, k, s, k / 2, 0, DT_INIT_KAIMING_FAN_OUT);
    x = dt_b_bn(m, bn, x);
    return relu ? dt_b_relu(m, x) : x;
}

/* mark the weight of the BN node that produced value v for zero_init_residual */
static void mark_zero_init(dt_model *m, int v)
{
    if (v >= 0 && !m->build_error)
        m->params[m->nodes[m->values[v].producer].p[0]].zero_init = 1;
}

/* one residual block (torchvision's BasicBlock or Bottleneck, stride on the 3x3 conv: v1.5) */
static int block(dt_model *m, const char *name, int x, int planes, int stride, int bottleneck)
{
    int in_c = m->values[x >= 0 ? x : 0].c;
    int out_c = bottleneck ? planes * 4 : planes;
    int y;
    if (bottleneck) {
        y = conv_bn(m, name, 1, x, planes, 1, 1, 1);
        y = conv_bn(m, name, 2, y, planes, 3, stride, 1);
        y = conv_bn(m, name, 3, y, out_c, 1, 1, 0);
    } else {
        y = conv_bn(m, name, 1, x, planes, 3, stride, 1);
        y = conv_bn(m, name, 2, y, planes, 3, 1, 0);
    }
    mark_zero_init(m, y);
    int id = x;
    if (stride != 1 || in_c != out_c) {
        char cn[DT_NAME_MAX], bn[DT_NAME_MAX];
        snprintf(cn, sizeof cn, "%s.downsample.0", name);
        snprintf(bn, sizeof bn, "%s.downsample.1", name);
        id = dt_b_conv(m, cn, x, out_c, 1, stride, 0, 0, DT_INIT_KAIMING_FAN_OUT);
        id = dt_b_bn(m, bn, id);
    }
    return dt_b_relu(m, dt_b_add(m, y, id));
}

static int stage(dt_model *m, int layer, int x, int planes, int blocks, int stride, int bottleneck)
{
    char name[DT_NAME_MAX];
    for (int b = 0; b < blocks; b++) {
        snprintf(name, sizeof name, "layer%d.%d", layer, b);
        x = block(m, name, x, planes, b == 0 ? stride : 1, bottleneck);
    }
    return x;
}

static int head(dt_model *m, int x)
{
    x = dt_b_avgpool(m, x, 1, 1);
    x = dt_b_flatten(m, x);
    return dt_b_linear(m, "fc", x, m->num_classes, DT_INIT_TORCH_DEFAULT, DT_INIT_TORCH_DEFAULT);
}

/* torchvision ResNet; small_stem: 3x3 stride-1 conv1 and no max pool (32x32 inputs) */
static int resnet(dt_model *m, const int *blocks, int bottleneck, int small_stem)
{
    int x = m->input;
    if (small_stem) {
        x = conv_bn(m, "", 1, x, 64, 3, 1, 1);
    } else {
        x = dt_b_conv(m, "conv1", x, 64, 7, 2, 3, 0, DT_INIT_KAIMING_FAN_OUT);
        x = dt_b_relu(m, dt_b_bn(m, "bn1", x));
        x = dt_b_maxpool(m, x, 3, 2, 1);
    }
    static const int planes[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; l++)
        x = stage(m, l + 1, x, planes[l], blocks[l], l == 0 ? 1 : 2, bottleneck);
    return head(m, x);
}

/* CIFAR-style 6n+2 ResNet: 3x3 stem of 16, stages of 16/32/64 BasicBlocks */
static int resnet_cifar(dt_model *m, int n)
{
    int x = conv_bn(m, "", 1, m->input, 16, 3, 1, 1);
    x = stage(m, 1, x, 16, n, 1, 0);
    x = stage(m, 2, x, 32, n, 2, 0);
    x = stage(m, 3, x, 64, n, 2, 0);
    return head(m, x);
}

/* classifier of AlexNet and VGG: [dropout] linear relu [dropout] linear relu linear, numbered as torchvision */
static int classifier(dt_model *m, int x, int dropout_first, enum dt_init init_w, enum dt_init init_b)
{
    char name[DT_NAME_MAX];
    int i = 0;
    for (int l = 0; l < 2; l++) {
        if (dropout_first) {
            x = dt_b_dropout(m, x, 0.5f);
            i++;
        }
        snprintf(name, sizeof name, "classifier.%d", i++);
        x = dt_b_relu(m, dt_b_linear(m, name, x, 4096, init_w, init_b));
        i++;
        if (!dropout_first) {
            x = dt_b_dropout(m, x, 0.5f);
            i++;
        }
    }
    snprintf(name, sizeof name, "classifier.%d", i);
    return dt_b_linear(m, name, x, m->num_classes, init_w, init_b);
}

static int alexnet(dt_model *m)
{
    static const struct { int oc, k, s, p, idx, pool; } L[5] = {
        {64, 11, 4, 2, 0, 1}, {192, 5, 1, 2, 3, 1}, {384, 3, 1, 1, 6, 0}, {256, 3, 1, 1, 8, 0}, {256, 3, 1, 1, 10, 1}};
    int x = m->input;
    char name[DT_NAME_MAX];
    for (int l = 0; l < 5; l++) {
        snprintf(name, sizeof name, "features.%d", L[l].idx);
        x = dt_b_relu(m, dt_b_conv(m, name, x, L[l].oc, L[l].k, L[l].s, L[l].p, 1, DT_INIT_TORCH_DEFAULT));
        if (L[l].pool)
            x = dt_b_maxpool(m, x, 3, 2, 0);
    }
    x = dt_b_flatten(m, dt_b_avgpool(m, x, 6, 6));
    return classifier(m, x, 1, DT_INIT_TORCH_DEFAULT, DT_INIT_TORCH_DEFAULT);
}

/* VGG configuration: channels, 0 for a max pool */
static int vgg(dt_model *m, const int *cfg, int n, int bn)
{
    int x = m->input, idx = 0;
    char name[DT_NAME_MAX];
    for (int i = 0; i < n; i++) {
        if (cfg[i] == 0) {
            x = dt_b_maxpool(m, x, 2, 2, 0);
            idx++;
            continue;
        }
        snprintf(name, sizeof name, "features.%d", idx++);
        x = dt_b_conv(m, name, x, cfg[i], 3, 1, 1, 1, DT_INIT_KAIMING_FAN_OUT);
        if (bn) {
            snprintf(name, sizeof name, "features.%d", idx++);
            x = dt_b_bn(m, name, x);
        }
        x = dt_b_relu(m, x);
        idx++;
    }
    x = dt_b_flatten(m, dt_b_avgpool(m, x, 7, 7));
    return classifier(m, x, 0, DT_INIT_NORMAL_001, DT_INIT_ZEROS);
}

int dt_model_create(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be)
{
    static const int r18[4] = {2, 2, 2, 2}, r34[4] = {3, 4, 6, 3}, r101[4] = {3, 4, 23, 3}, r152[4] = {3, 8, 36, 3};
    static const int vgg11[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    static const int vgg16[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    if (in_c < 1 || num_classes < 1) {
        dt_error("model %s: %d input channels and %d classes: both must be at least 1", arch, in_c, num_classes);
        return DT_ERR_INPUT;
    }
    dt_model_begin(m, arch, in_c, num_classes, be);
    int out;
    if (!strcmp(arch, "resnet18"))
        out = resnet(m, r18, 0, 0);
    else if (!strcmp(arch, "resnet34"))
        out = resnet(m, r34, 0, 0);
    else if (!strcmp(arch, "resnet50"))
        out = resnet(m, r34, 1, 0);
    else if (!strcmp(arch, "resnet101"))
        out = resnet(m, r101, 1, 0);
    else if (!strcmp(arch, "resnet152"))
        out = resnet(m, r152, 1, 0);
    else if (!strcmp(arch, "resnet18_small"))
        out = resnet(m, r18, 0, 1);
    else if (!strcmp(arch, "resnet8"))
        out = resnet_cifar(m, 1);
    else if (!strcmp(arch, "resnet20"))
        out = resnet_cifar(m, 3);
    else if (!strcmp(arch, "resnet56"))
        out = resnet_cifar(m, 9);
    else if (!strcmp(arch, "alexnet"))
        out = alexnet(m);
    else if (!strcmp(arch, "vgg11") || !strcmp(arch, "vgg11_bn"))
        out = vgg(m, vgg11, (int)(sizeof vgg11 / sizeof vgg11[0]), !strcmp(arch, "vgg11_bn"));
    else if (!strcmp(arch, "vgg16") || !strcmp(arch, "vgg16_bn"))
        out = vgg(m, vgg16, (int)(sizeof vgg16 / sizeof vgg16[0]), !strcmp(arch, "vgg16_bn"));
    else {
        char list[512];
        size_t k = 0;
        list[0] = '\0';
        for (int i = 0; dt_model_archs[i] && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", dt_model_archs[i]);
        dt_error("unknown model '%s' (known: %s)", arch, list);
        dt_model_free(m);
        return DT_ERR_INPUT;
    }
    int rc = dt_model_end(m, out);
    if (rc != DT_OK)
        dt_model_free(m);
    return rc;
}
