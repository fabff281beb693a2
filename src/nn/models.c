/* models.c: the architectures dt_model_create knows (the table dt_models): torchvision's, and the
 * small-input variants, built as model graphs with torchvision's module names so that state_dict
 * names match. Adding one: doc/design.md, "Adding a model". */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/model.h"
#include "util/check.h"
#include "util/log.h"

/* conv (in groups) -> bn (-> relu): the common triple, named <prefix>.convN / <prefix>.bnN */
static int conv_bn(dt_model *m, const char *prefix, int idx, int x, int oc, int k, int s, int groups, int relu)
{
    char cn[DT_NAME_MAX], bn[DT_NAME_MAX];
    snprintf(cn, sizeof cn, "%s%sconv%d", prefix, prefix[0] ? "." : "", idx);
    snprintf(bn, sizeof bn, "%s%sbn%d", prefix, prefix[0] ? "." : "", idx);
    x = dt_layer_conv_grouped(m, cn, x, oc, k, s, k / 2, 1, groups, 0, DT_INIT_KAIMING_FAN_OUT);
    x = dt_layer_batchnorm(m, bn, x);
    return relu ? dt_layer_relu(m, x) : x;
}

/* mark the weight of the BN node that produced value v for zero_init_residual */
static void mark_zero_init(dt_model *m, int v)
{
    if (v >= 0 && !m->build_error)
        m->params[m->nodes[m->values[v].producer].param[DT_NODE_WEIGHT]].zero_init = 1;
}

/* one residual block (torchvision's BasicBlock or Bottleneck, stride on the 3x3 conv: v1.5); the
 * Bottleneck's inner width and its 3x3 conv's groups as info's groups and width_per_group */
static int block(dt_model *m, const char *name, int x, int planes, int stride, const dt_model_info *info)
{
    int in_c = m->values[x >= 0 ? x : 0].channels;
    int out_c = info->bottleneck ? planes * 4 : planes;
    int y;
    if (info->bottleneck) {
        /* torchvision's width = int(planes * (width_per_group / 64.)) * groups */
        int groups = info->groups ? info->groups : 1, per_group = info->width_per_group ? info->width_per_group : 64;
        int width = planes * per_group / 64 * groups;
        y = conv_bn(m, name, 1, x, width, 1, 1, 1, 1);
        y = conv_bn(m, name, 2, y, width, 3, stride, groups, 1);
        y = conv_bn(m, name, 3, y, out_c, 1, 1, 1, 0);
    } else {
        y = conv_bn(m, name, 1, x, planes, 3, stride, 1, 1);
        y = conv_bn(m, name, 2, y, planes, 3, 1, 1, 0);
    }
    mark_zero_init(m, y);
    int id = x;
    if (stride != 1 || in_c != out_c) {
        char cn[DT_NAME_MAX], bn[DT_NAME_MAX];
        snprintf(cn, sizeof cn, "%s.downsample.0", name);
        snprintf(bn, sizeof bn, "%s.downsample.1", name);
        id = dt_layer_conv(m, cn, x, out_c, 1, stride, 0, 0, DT_INIT_KAIMING_FAN_OUT);
        id = dt_layer_batchnorm(m, bn, id);
    }
    return dt_layer_relu(m, dt_layer_add(m, y, id));
}

static int stage(dt_model *m, int layer, int x, int planes, int blocks, int stride, const dt_model_info *info)
{
    char name[DT_NAME_MAX];
    for (int b = 0; b < blocks; b++) {
        snprintf(name, sizeof name, "layer%d.%d", layer, b);
        x = block(m, name, x, planes, b == 0 ? stride : 1, info);
    }
    return x;
}

static int head(dt_model *m, int x)
{
    x = dt_layer_adaptive_avgpool(m, x, 1, 1);
    x = dt_layer_flatten(m, x);
    return dt_layer_linear(m, "fc", x, m->num_classes, DT_INIT_TORCH_DEFAULT, DT_INIT_TORCH_DEFAULT);
}

/* torchvision's ResNet (v1.5), and its ResNeXt and wide ResNet (groups, width_per_group: a wider 3x3
 * conv in the Bottleneck); small_stem: a 3x3 stride-1 conv1 and no max pool (32x32 inputs) */
static int resnet(dt_model *m, const dt_model_info *info)
{
    int x = m->input;
    if (info->small_stem) {
        x = conv_bn(m, "", 1, x, 64, 3, 1, 1, 1);
    } else {
        x = dt_layer_conv(m, "conv1", x, 64, 7, 2, 3, 0, DT_INIT_KAIMING_FAN_OUT);
        x = dt_layer_relu(m, dt_layer_batchnorm(m, "bn1", x));
        x = dt_layer_maxpool(m, x, 3, 2, 1);
    }
    static const int planes[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4 && l < info->config_len; l++)
        x = stage(m, l + 1, x, planes[l], info->config[l], l == 0 ? 1 : 2, info);
    return head(m, x);
}

/* CIFAR-style 6n+2 ResNet (He et al. 2016, section 4.2): a 3x3 stem of 16, stages of 16/32/64
 * BasicBlocks, torchvision's names without layer4 */
static int resnet_cifar(dt_model *m, const dt_model_info *info)
{
    static const int planes[3] = {16, 32, 64};
    int x = conv_bn(m, "", 1, m->input, 16, 3, 1, 1, 1);
    for (int l = 0; l < 3 && l < info->config_len; l++)
        x = stage(m, l + 1, x, planes[l], info->config[l], l == 0 ? 1 : 2, info);
    return head(m, x);
}

/* classifier of AlexNet and VGG: [dropout] linear relu [dropout] linear relu linear, numbered as torchvision */
static int classifier(dt_model *m, int x, int dropout_first, enum dt_init init_w, enum dt_init init_b)
{
    char name[DT_NAME_MAX];
    int i = 0;
    for (int l = 0; l < 2; l++) {
        if (dropout_first) {
            x = dt_layer_dropout(m, x, 0.5f);
            i++;
        }
        snprintf(name, sizeof name, "classifier.%d", i++);
        x = dt_layer_relu(m, dt_layer_linear(m, name, x, 4096, init_w, init_b));
        i++;
        if (!dropout_first) {
            x = dt_layer_dropout(m, x, 0.5f);
            i++;
        }
    }
    snprintf(name, sizeof name, "classifier.%d", i);
    return dt_layer_linear(m, name, x, m->num_classes, init_w, init_b);
}

/* torchvision's AlexNet (features: conv, relu, [max pool] five times, numbered as torchvision) */
static int alexnet(dt_model *m, const dt_model_info *info)
{
    static const struct { int oc, k, s, p, idx, pool; } L[5] = {
        {64, 11, 4, 2, 0, 1}, {192, 5, 1, 2, 3, 1}, {384, 3, 1, 1, 6, 0}, {256, 3, 1, 1, 8, 0}, {256, 3, 1, 1, 10, 1}};
    (void)info; /* nothing to choose */
    int x = m->input;
    char name[DT_NAME_MAX];
    for (int l = 0; l < 5; l++) {
        snprintf(name, sizeof name, "features.%d", L[l].idx);
        x = dt_layer_relu(m, dt_layer_conv(m, name, x, L[l].oc, L[l].k, L[l].s, L[l].p, 1, DT_INIT_TORCH_DEFAULT));
        if (L[l].pool)
            x = dt_layer_maxpool(m, x, 3, 2, 0);
    }
    x = dt_layer_flatten(m, dt_layer_adaptive_avgpool(m, x, 6, 6));
    return classifier(m, x, 1, DT_INIT_TORCH_DEFAULT, DT_INIT_TORCH_DEFAULT);
}

/* VGG: config holds each conv's channels, 0 for a max pool */
static int vgg(dt_model *m, const dt_model_info *info)
{
    int x = m->input, idx = 0;
    char name[DT_NAME_MAX];
    for (int i = 0; i < info->config_len; i++) {
        int oc = info->config[i];
        if (oc == 0) {
            x = dt_layer_maxpool(m, x, 2, 2, 0);
            idx++;
            continue;
        }
        snprintf(name, sizeof name, "features.%d", idx++);
        x = dt_layer_conv(m, name, x, oc, 3, 1, 1, 1, DT_INIT_KAIMING_FAN_OUT);
        if (info->batchnorm) {
            snprintf(name, sizeof name, "features.%d", idx++);
            x = dt_layer_batchnorm(m, name, x);
        }
        x = dt_layer_relu(m, x);
        idx++;
    }
    x = dt_layer_flatten(m, dt_layer_adaptive_avgpool(m, x, 7, 7));
    return classifier(m, x, 0, DT_INIT_NORMAL_001, DT_INIT_ZEROS);
}

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define LEN_(a) LEN(a)

/* --- MobileNet and EfficientNet: torchvision's Conv2dNormActivation, squeeze-and-excitation,
 * inverted residuals ------------------------------------------------------------------------------ */

enum { ACT_NONE = -1, ACT_RELU = -2 }; /* besides enum dt_act */

static int activation(dt_model *m, int x, int act)
{
    return act == ACT_NONE ? x : act == ACT_RELU ? dt_layer_relu(m, x) : dt_layer_act(m, x, act);
}

/* torchvision's Conv2dNormActivation: <prefix>.0 a conv (k x k, stride s, padding (k-1)/2, no bias),
 * <prefix>.1 its BN (info's eps and momentum), then the activation */
static int conv_norm_act(dt_model *m, const dt_model_info *info, const char *prefix, int x, int oc, int k, int s,
                         int groups, int act)
{
    char cn[DT_NAME_MAX], bn[DT_NAME_MAX];
    snprintf(cn, sizeof cn, "%s.0", prefix);
    snprintf(bn, sizeof bn, "%s.1", prefix);
    x = dt_layer_conv_grouped(m, cn, x, oc, k, s, (k - 1) / 2, 1, groups, 0, DT_INIT_KAIMING_FAN_OUT);
    x = dt_layer_batchnorm_eps(m, bn, x, info->bn_eps > 0 ? info->bn_eps : 1e-5f,
                               info->bn_momentum > 0 ? info->bn_momentum : 0.1f);
    return activation(m, x, act);
}

/* torchvision's SqueezeExcitation named <prefix>: x times scale_act(fc2(act(fc1(avgpool(x))))), fc1
 * and fc2 1x1 convs with biases, initialised as init_b (zeros where the model's init loop sets them,
 * else PyTorch's default) */
static int squeeze_excite(dt_model *m, const char *prefix, int x, int squeeze, int act, int scale_act,
                          enum dt_init init_b)
{
    char n1[DT_NAME_MAX], n2[DT_NAME_MAX];
    snprintf(n1, sizeof n1, "%s.fc1", prefix);
    snprintf(n2, sizeof n2, "%s.fc2", prefix);
    int c = x >= 0 ? m->values[x].channels : 1;
    int s = dt_layer_adaptive_avgpool(m, x, 1, 1);
    for (int k = 0; k < 2; k++) {
        s = dt_layer_conv(m, k ? n2 : n1, s, k ? c : squeeze, 1, 1, 0, 1, DT_INIT_KAIMING_FAN_OUT);
        if (s >= 0 && !m->build_error)
            m->params[m->nodes[m->values[s].producer].param[DT_NODE_BIAS]].init = init_b;
        s = activation(m, s, k ? scale_act : act);
    }
    return dt_layer_chanmul(m, x, s);
}

/* torchvision's _make_divisible(v, 8): v to a multiple of 8, at least 8, not more than 10% below v */
static int make_divisible(double v)
{
    int n = (int)(v + 4) / 8 * 8;
    n = n < 8 ? 8 : n;
    return n < 0.9 * v ? n + 8 : n;
}

/* the heads' global average pool, flattened */
static int pooled(dt_model *m, int x)
{
    return dt_layer_flatten(m, dt_layer_adaptive_avgpool(m, x, 1, 1));
}

/* torchvision's MobileNetV2 (width 1.0): t (expansion), c (channels), n (blocks), s (first stride) */
static int mobilenet_v2(dt_model *m, const dt_model_info *info)
{
    static const int tcns[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                   {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    char name[DT_NAME_MAX], part[DT_NAME_MAX];
    int x = conv_norm_act(m, info, "features.0", m->input, 32, 3, 2, 1, DT_ACT_RELU6);
    int in = 32, idx = 1;
    for (int r = 0; r < 7; r++)
        for (int b = 0; b < tcns[r][2]; b++, idx++) {
            const int t = tcns[r][0], oc = tcns[r][1], stride = b == 0 ? tcns[r][3] : 1, hidden = in * t;
            int y = x, j = 0;
            if (t != 1) {
                snprintf(part, sizeof part, "features.%d.conv.%d", idx, j++);
                y = conv_norm_act(m, info, part, y, hidden, 1, 1, 1, DT_ACT_RELU6);
            }
            snprintf(part, sizeof part, "features.%d.conv.%d", idx, j++);
            y = conv_norm_act(m, info, part, y, hidden, 3, stride, hidden, DT_ACT_RELU6);
            snprintf(name, sizeof name, "features.%d.conv.%d", idx, j++);
            y = dt_layer_conv(m, name, y, oc, 1, 1, 0, 0, DT_INIT_KAIMING_FAN_OUT);
            snprintf(name, sizeof name, "features.%d.conv.%d", idx, j);
            y = dt_layer_batchnorm(m, name, y);
            x = stride == 1 && in == oc ? dt_layer_add(m, x, y) : y;
            in = oc;
        }
    snprintf(name, sizeof name, "features.%d", idx);
    x = dt_layer_dropout(m, pooled(m, conv_norm_act(m, info, name, x, 1280, 1, 1, 1, DT_ACT_RELU6)), info->dropout);
    return dt_layer_linear(m, "classifier.1", x, m->num_classes, DT_INIT_NORMAL_001, DT_INIT_ZEROS);
}

/* torchvision's MobileNetV3 (width 1.0, no reduced tail, no dilation): per block the kernel, the
 * expanded and output channels, SE, hardswish (else ReLU) and stride */
typedef struct { int k, exp, out, se, hs, s; } v3_block;

static int mobilenet_v3(dt_model *m, const dt_model_info *info)
{
    static const v3_block large[] = {
        {3, 16, 16, 0, 0, 1},   {3, 64, 24, 0, 0, 2},   {3, 72, 24, 0, 0, 1},   {5, 72, 40, 1, 0, 2},
        {5, 120, 40, 1, 0, 1},  {5, 120, 40, 1, 0, 1},  {3, 240, 80, 0, 1, 2},  {3, 200, 80, 0, 1, 1},
        {3, 184, 80, 0, 1, 1},  {3, 184, 80, 0, 1, 1},  {3, 480, 112, 1, 1, 1}, {3, 672, 112, 1, 1, 1},
        {5, 672, 160, 1, 1, 2}, {5, 960, 160, 1, 1, 1}, {5, 960, 160, 1, 1, 1}};
    static const v3_block small[] = {
        {3, 16, 16, 1, 0, 2},  {3, 72, 24, 0, 0, 2},  {3, 88, 24, 0, 0, 1},  {5, 96, 40, 1, 1, 2},
        {5, 240, 40, 1, 1, 1}, {5, 240, 40, 1, 1, 1}, {5, 120, 48, 1, 1, 1}, {5, 144, 48, 1, 1, 1},
        {5, 288, 96, 1, 1, 2}, {5, 576, 96, 1, 1, 1}, {5, 576, 96, 1, 1, 1}};
    const v3_block *cfg = info->variant ? small : large;
    const int blocks = info->variant ? LEN_(small) : LEN_(large), last = info->variant ? 1024 : 1280;
    char part[DT_NAME_MAX];
    int x = conv_norm_act(m, info, "features.0", m->input, 16, 3, 2, 1, DT_ACT_HARDSWISH), in = 16;
    for (int i = 0; i < blocks; i++) {
        const v3_block *b = &cfg[i];
        const int act = b->hs ? DT_ACT_HARDSWISH : ACT_RELU;
        int y = x, j = 0;
        if (b->exp != in) {
            snprintf(part, sizeof part, "features.%d.block.%d", i + 1, j++);
            y = conv_norm_act(m, info, part, y, b->exp, 1, 1, 1, act);
        }
        snprintf(part, sizeof part, "features.%d.block.%d", i + 1, j++);
        y = conv_norm_act(m, info, part, y, b->exp, b->k, b->s, b->exp, act);
        if (b->se) {
            snprintf(part, sizeof part, "features.%d.block.%d", i + 1, j++);
            y = squeeze_excite(m, part, y, make_divisible(b->exp / 4), ACT_RELU, DT_ACT_HARDSIGMOID, DT_INIT_ZEROS);
        }
        snprintf(part, sizeof part, "features.%d.block.%d", i + 1, j);
        y = conv_norm_act(m, info, part, y, b->out, 1, 1, 1, ACT_NONE);
        x = b->s == 1 && in == b->out ? dt_layer_add(m, y, x) : y;
        in = b->out;
    }
    snprintf(part, sizeof part, "features.%d", blocks + 1);
    x = pooled(m, conv_norm_act(m, info, part, x, 6 * in, 1, 1, 1, DT_ACT_HARDSWISH));
    x = dt_layer_act(m, dt_layer_linear(m, "classifier.0", x, last, DT_INIT_NORMAL_001, DT_INIT_ZEROS),
                     DT_ACT_HARDSWISH);
    x = dt_layer_dropout(m, x, info->dropout);
    return dt_layer_linear(m, "classifier.3", x, m->num_classes, DT_INIT_NORMAL_001, DT_INIT_ZEROS);
}

/* torchvision's EfficientNet: V1 (variant 1, MBConv stages scaled by width_mult and depth_mult) and V2-S
 * (variant 2: FusedMBConv stages first, 1280 features). Per stage: fused, expansion, kernel, stride,
 * input and output channels, blocks. */
typedef struct { int fused, expand, k, s, in, out, n; } eff_stage;

static int efficientnet(dt_model *m, const dt_model_info *info)
{
    static const eff_stage v1[] = {{0, 1, 3, 1, 32, 16, 1},   {0, 6, 3, 2, 16, 24, 2},  {0, 6, 5, 2, 24, 40, 2},
                                   {0, 6, 3, 2, 40, 80, 3},   {0, 6, 5, 1, 80, 112, 3}, {0, 6, 5, 2, 112, 192, 4},
                                   {0, 6, 3, 1, 192, 320, 1}};
    static const eff_stage v2s[] = {{1, 1, 3, 1, 24, 24, 2},  {1, 4, 3, 2, 24, 48, 4},   {1, 4, 3, 2, 48, 64, 4},
                                    {0, 4, 3, 2, 64, 128, 6}, {0, 6, 3, 1, 128, 160, 9}, {0, 6, 3, 2, 160, 256, 15}};
    const int v2 = info->variant == 2;
    const eff_stage *cfg = v2 ? v2s : v1;
    const int stages = v2 ? LEN_(v2s) : LEN_(v1);
    const double wm = v2 ? 1.0 : info->width_mult, dm = v2 ? 1.0 : info->depth_mult;
    const float sd_prob = 0.2f; /* torchvision's stochastic_depth_prob */
    int blocks[8], total = 0;
    for (int i = 0; i < stages; i++)
        total += blocks[i] = (int)ceil(cfg[i].n * dm);
    char part[DT_NAME_MAX];
    int x = conv_norm_act(m, info, "features.0", m->input, make_divisible(cfg[0].in * wm), 3, 2, 1, DT_ACT_SILU);
    int id = 0, out = 0;
    for (int i = 0; i < stages; i++) {
        const eff_stage *st = &cfg[i];
        out = make_divisible(st->out * wm);
        for (int b = 0; b < blocks[i]; b++, id++) {
            const int in = b == 0 ? make_divisible(st->in * wm) : out, stride = b == 0 ? st->s : 1;
            const int exp = make_divisible(in * (double)st->expand);
            int y = x, j = 0;
            if (st->fused) {
                snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                y = conv_norm_act(m, info, part, y, exp != in ? exp : out, st->k, stride, 1, DT_ACT_SILU);
                if (exp != in) {
                    snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                    y = conv_norm_act(m, info, part, y, out, 1, 1, 1, ACT_NONE);
                }
            } else {
                if (exp != in) {
                    snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                    y = conv_norm_act(m, info, part, y, exp, 1, 1, 1, DT_ACT_SILU);
                }
                snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                y = conv_norm_act(m, info, part, y, exp, st->k, stride, exp, DT_ACT_SILU);
                snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                y = squeeze_excite(m, part, y, in / 4 > 1 ? in / 4 : 1, DT_ACT_SILU, DT_ACT_SIGMOID, DT_INIT_ZEROS);
                snprintf(part, sizeof part, "features.%d.%d.block.%d", i + 1, b, j++);
                y = conv_norm_act(m, info, part, y, out, 1, 1, 1, ACT_NONE);
            }
            if (stride == 1 && in == out)
                y = dt_layer_add(m, dt_layer_sdepth(m, y, (float)id / (float)total, sd_prob), x);
            x = y;
        }
    }
    snprintf(part, sizeof part, "features.%d", stages + 1);
    x = pooled(m, conv_norm_act(m, info, part, x, v2 ? 1280 : 4 * out, 1, 1, 1, DT_ACT_SILU));
    x = dt_layer_dropout(m, x, info->dropout);
    return dt_layer_linear(m, "classifier.1", x, m->num_classes, DT_INIT_UNIFORM_FAN_OUT, DT_INIT_ZEROS);
}



/* torchvision's RegNetY: per stage its depth and width, and the group width of its 3x3 convs (what
 * BlockParams.from_init_params makes of each model's w_0, w_a, w_m: the tables below; bottleneck
 * multiplier 1, SE ratio 1/4 of the block's input width) */
typedef struct { int depth[4], width[4], group_width; } regnet_params;
static const regnet_params regnet_y_400mf_p = {{1, 3, 6, 6}, {48, 104, 208, 440}, 8},
                           regnet_y_800mf_p = {{1, 3, 8, 2}, {64, 144, 320, 784}, 16},
                           regnet_y_1_6gf_p = {{2, 6, 17, 2}, {48, 120, 336, 888}, 24},
                           regnet_y_3_2gf_p = {{2, 5, 13, 1}, {72, 216, 576, 1512}, 24},
                           regnet_y_8gf_p = {{2, 4, 10, 1}, {224, 448, 896, 2016}, 56},
                           regnet_y_16gf_p = {{2, 4, 11, 1}, {224, 448, 1232, 3024}, 112};

/* RegNetY: stem (3x3 stride 2, 32), four stages of ResBottleneckBlocks (x + f(x) or proj(x) + f(x),
 * then ReLU; f: 1x1, grouped 3x3 with the stride, SE with ReLU and Sigmoid, 1x1), pool, fc */
static int regnet(dt_model *m, const dt_model_info *info)
{
    const regnet_params *rp = (const regnet_params *)info->table;
    char name[DT_NAME_MAX], part[2 * DT_NAME_MAX];
    int x = conv_norm_act(m, info, "stem", m->input, 32, 3, 2, 1, ACT_RELU), in = 32;
    for (int st = 0; st < 4; st++)
        for (int b = 0; b < rp->depth[st]; b++) {
            const int out = rp->width[st], stride = b == 0 ? 2 : 1;
            snprintf(name, sizeof name, "trunk_output.block%d.block%d-%d", st + 1, st + 1, b);
            int id = x;
            if (in != out || stride != 1) {
                snprintf(part, sizeof part, "%s.proj", name);
                id = conv_norm_act(m, info, part, x, out, 1, stride, 1, ACT_NONE);
            }
            snprintf(part, sizeof part, "%s.f.a", name);
            int y = conv_norm_act(m, info, part, x, out, 1, 1, 1, ACT_RELU);
            snprintf(part, sizeof part, "%s.f.b", name);
            y = conv_norm_act(m, info, part, y, out, 3, stride, out / rp->group_width, ACT_RELU);
            snprintf(part, sizeof part, "%s.f.se", name);
            y = squeeze_excite(m, part, y, in / 4, ACT_RELU, DT_ACT_SIGMOID, DT_INIT_TORCH_DEFAULT);
            snprintf(part, sizeof part, "%s.f.c", name);
            y = conv_norm_act(m, info, part, y, out, 1, 1, 1, ACT_NONE);
            x = dt_layer_relu(m, dt_layer_add(m, id, y));
            in = out;
        }
    return dt_layer_linear(m, "fc", pooled(m, x), m->num_classes, DT_INIT_NORMAL_001, DT_INIT_ZEROS);
}

/* torchvision's ConvNeXt: a 4x4 stride-4 stem with a channels-last LayerNorm, four stages of CNBlocks
 * (7x7 depthwise conv, LayerNorm, pointwise linear to 4x, GELU, pointwise linear back, layer scale,
 * stochastic depth, residual add), a LayerNorm and a 2x2 stride-2 conv between stages, pool,
 * LayerNorm, linear. config: blocks per stage; widths 96, 192, 384, 768 (T and S) */
static int convnext(dt_model *m, const dt_model_info *info)
{
    static const int dims[4] = {96, 192, 384, 768};
    const float eps = 1e-6f;
    char name[DT_NAME_MAX], part[2 * DT_NAME_MAX];
    int x = dt_layer_conv(m, "features.0.0", m->input, dims[0], 4, 4, 0, 1, DT_INIT_TRUNC_NORMAL_002);
    x = dt_layer_layernorm(m, "features.0.1", x, eps);
    int total = 0, id = 0, f = 1;
    for (int st = 0; st < 4 && st < info->config_len; st++)
        total += info->config[st];
    for (int st = 0; st < 4 && st < info->config_len; st++, f++) {
        const int dim = dims[st];
        for (int b = 0; b < info->config[st]; b++, id++) {
            snprintf(name, sizeof name, "features.%d.%d", f, b);
            const int scale = dt_param_layer_scale(m, name, dim, 1e-6f); /* first in torchvision's state_dict */
            snprintf(part, sizeof part, "%s.block.0", name);
            int y = dt_layer_conv_grouped(m, part, x, dim, 7, 1, 3, 1, dim, 1, DT_INIT_TRUNC_NORMAL_002);
            snprintf(part, sizeof part, "%s.block.2", name);
            y = dt_layer_layernorm(m, part, y, eps);
            snprintf(part, sizeof part, "%s.block.3", name);
            y = dt_layer_linear_rows(m, part, y, 4 * dim, DT_INIT_TRUNC_NORMAL_002, DT_INIT_ZEROS);
            y = dt_layer_act(m, y, DT_ACT_GELU);
            snprintf(part, sizeof part, "%s.block.5", name);
            y = dt_layer_linear_rows(m, part, y, dim, DT_INIT_TRUNC_NORMAL_002, DT_INIT_ZEROS);
            y = dt_layer_sdepth(m, dt_layer_scale(m, y, scale), (float)id / (float)(total - 1), info->dropout);
            x = dt_layer_add(m, y, x);
        }
        if (st < 3) { /* downsampling */
            f++;
            snprintf(name, sizeof name, "features.%d.0", f);
            x = dt_layer_layernorm(m, name, x, eps);
            snprintf(name, sizeof name, "features.%d.1", f);
            x = dt_layer_conv(m, name, x, dims[st + 1], 2, 2, 0, 1, DT_INIT_TRUNC_NORMAL_002);
        }
    }
    x = dt_layer_layernorm(m, "classifier.0", dt_layer_adaptive_avgpool(m, x, 1, 1), eps);
    return dt_layer_linear(m, "classifier.2", dt_layer_flatten(m, x), m->num_classes, DT_INIT_TRUNC_NORMAL_002,
                           DT_INIT_ZEROS);
}

/* torchvision's DenseNet (growth 32, bottleneck 4 x 32, 64 initial features, no dropout): a 7x7 stem,
 * dense blocks whose every layer (BN, ReLU, 1x1 conv, BN, ReLU, 3x3 conv) reads the concatenation of
 * all features before it and adds 32, transitions (BN, ReLU, 1x1 conv to half, 2x2 average pool),
 * BN, ReLU, pool, linear. config: layers per block. */
static int densenet(dt_model *m, const dt_model_info *info)
{
    const int growth = 32, bottleneck = 4 * 32;
    char name[DT_NAME_MAX], part[2 * DT_NAME_MAX];
    int x = dt_layer_conv(m, "features.conv0", m->input, 64, 7, 2, 3, 0, DT_INIT_KAIMING_FAN_IN);
    x = dt_layer_maxpool(m, dt_layer_relu(m, dt_layer_batchnorm(m, "features.norm0", x)), 3, 2, 1);
    int c = 64;
    for (int b = 0; b < info->config_len; b++) {
        for (int l = 0; l < info->config[b]; l++) {
            snprintf(name, sizeof name, "features.denseblock%d.denselayer%d", b + 1, l + 1);
            snprintf(part, sizeof part, "%s.norm1", name);
            int y = dt_layer_relu(m, dt_layer_batchnorm(m, part, x));
            snprintf(part, sizeof part, "%s.conv1", name);
            y = dt_layer_conv(m, part, y, bottleneck, 1, 1, 0, 0, DT_INIT_KAIMING_FAN_IN);
            snprintf(part, sizeof part, "%s.norm2", name);
            y = dt_layer_relu(m, dt_layer_batchnorm(m, part, y));
            snprintf(part, sizeof part, "%s.conv2", name);
            y = dt_layer_conv(m, part, y, growth, 3, 1, 1, 0, DT_INIT_KAIMING_FAN_IN);
            x = dt_layer_concat(m, x, y);
            c += growth;
        }
        if (b + 1 < info->config_len) {
            snprintf(name, sizeof name, "features.transition%d.norm", b + 1);
            x = dt_layer_relu(m, dt_layer_batchnorm(m, name, x));
            snprintf(name, sizeof name, "features.transition%d.conv", b + 1);
            c /= 2;
            x = dt_layer_avgpool2(m, dt_layer_conv(m, name, x, c, 1, 1, 0, 0, DT_INIT_KAIMING_FAN_IN));
        }
    }
    x = pooled(m, dt_layer_relu(m, dt_layer_batchnorm(m, "features.norm5", x)));
    return dt_layer_linear(m, "classifier", x, m->num_classes, DT_INIT_TORCH_DEFAULT, DT_INIT_ZEROS);
}

/* the bias of the linear node just made is initialised normal_(std) (ViT's MLP) */
static int bias_normal(dt_model *m, int x, float std)
{
    if (x >= 0)
        m->params[m->nodes[m->n_nodes - 1].param[DT_NODE_BIAS]].init_value = std;
    return x;
}

/* torchvision's VisionTransformer (no representation layer, dropouts 0): conv_proj (patch x patch,
 * stride patch) makes the patches; the class token before them and the position embedding added;
 * encoder layers of ln_1, self-attention (in_proj, the attention core, out_proj), residual add, ln_2,
 * MLP (linear, GELU, linear), residual add; the final LayerNorm and the head on the class token (the
 * LayerNorm on token 0 alone: it works row by row, so the same numbers for less work). config:
 * patch size, layers, heads, hidden width, MLP width; the input size info->input_size. */
static int vit(dt_model *m, const dt_model_info *info)
{
    const int patch = info->config[0], layers = info->config[1], heads = info->config[2], dim = info->config[3],
              mlp = info->config[4], grid = info->input_size / patch;
    const float eps = 1e-6f;
    char name[DT_NAME_MAX], part[2 * DT_NAME_MAX];
    const int cls = dt_param_new(m, "class_token", 3, (const int[]){1, 1, dim}, DT_INIT_ZEROS, 0);
    int x = dt_layer_conv(m, "conv_proj", m->input, dim, patch, patch, 0, 1, DT_INIT_TRUNC_NORMAL_FAN_IN);
    const int pos = dt_param_new(m, "encoder.pos_embedding", 3, (const int[]){1, grid * grid + 1, dim},
                                 DT_INIT_NORMAL_STD, 0.02f);
    x = dt_layer_tokens(m, "encoder", x, cls, pos);
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "encoder.layers.encoder_layer_%d", l);
        snprintf(part, sizeof part, "%s.ln_1", name);
        int y = dt_layer_layernorm(m, part, x, eps);
        snprintf(part, sizeof part, "%s.self_attention", name);
        y = dt_layer_linear_rows_as(m, part, "in_proj_weight", "in_proj_bias", y, 3 * dim, DT_INIT_XAVIER_UNIFORM,
                                    DT_INIT_ZEROS);
        y = dt_layer_attention(m, part, y, heads);
        snprintf(part, sizeof part, "%s.self_attention.out_proj", name);
        y = dt_layer_linear_rows(m, part, y, dim, DT_INIT_TORCH_DEFAULT, DT_INIT_ZEROS);
        x = dt_layer_add(m, y, x);
        snprintf(part, sizeof part, "%s.ln_2", name);
        y = dt_layer_layernorm(m, part, x, eps);
        snprintf(part, sizeof part, "%s.mlp.0", name);
        y = bias_normal(m, dt_layer_linear_rows(m, part, y, mlp, DT_INIT_XAVIER_UNIFORM, DT_INIT_NORMAL_STD), 1e-6f);
        y = dt_layer_act(m, y, DT_ACT_GELU);
        snprintf(part, sizeof part, "%s.mlp.3", name);
        y = bias_normal(m, dt_layer_linear_rows(m, part, y, dim, DT_INIT_XAVIER_UNIFORM, DT_INIT_NORMAL_STD), 1e-6f);
        x = dt_layer_add(m, y, x);
    }
    x = dt_layer_layernorm(m, "encoder.ln", dt_layer_token0(m, x), eps);
    return dt_layer_linear(m, "heads.head", x, m->num_classes, DT_INIT_ZEROS, DT_INIT_ZEROS);
}

/* blocks per stage (ResNet), channels per conv or 0 for a max pool (VGG): torchvision's (VGG's configs A,
 * B, D and E for vgg11, 13, 16 and 19) */
static const int resnet18_blocks[] = {2, 2, 2, 2}, resnet34_blocks[] = {3, 4, 6, 3}, resnet50_blocks[] = {3, 4, 6, 3},
                 resnet101_blocks[] = {3, 4, 23, 3}, resnet152_blocks[] = {3, 8, 36, 3};
static const int resnet8_blocks[] = {1, 1, 1}, resnet20_blocks[] = {3, 3, 3}, resnet56_blocks[] = {9, 9, 9};
static const int densenet121_blocks[] = {6, 12, 24, 16};
static const int convnext_tiny_blocks[] = {3, 3, 9, 3}, convnext_small_blocks[] = {3, 3, 27, 3};
/* ViT: patch size, layers, heads, hidden width, MLP width (vit_test: tests/fixtures/make_fixtures.py's
 * VisionTransformer(32, 8, 2, 4, 64, 128), a small one for the fixture) */
static const int vit_b_16_config[] = {16, 12, 12, 768, 3072}, vit_test_config[] = {8, 2, 4, 64, 128};
static const int vgg11_config[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
static const int vgg13_config[] = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
static const int vgg16_config[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
static const int vgg19_config[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0,
                                   512, 512, 512, 512, 0};

const dt_model_info dt_models[] = {
    {"resnet18", resnet, resnet18_blocks, LEN(resnet18_blocks), .input_size = 224, .params = 11689512},
    {"resnet34", resnet, resnet34_blocks, LEN(resnet34_blocks), .input_size = 224, .params = 21797672},
    {"resnet50", resnet, resnet50_blocks, LEN(resnet50_blocks), .bottleneck = 1, .input_size = 224, .params = 25557032},
    {"resnet101", resnet, resnet101_blocks, LEN(resnet101_blocks), .bottleneck = 1, .input_size = 224,
     .params = 44549160},
    {"resnet152", resnet, resnet152_blocks, LEN(resnet152_blocks), .bottleneck = 1, .input_size = 224,
     .params = 60192808},
    /* ResNeXt (groups x width_per_group in each Bottleneck's 3x3 conv) and wide ResNet (twice the width) */
    {"resnext50_32x4d", resnet, resnet50_blocks, LEN(resnet50_blocks), .bottleneck = 1, .groups = 32,
     .width_per_group = 4, .input_size = 224, .params = 25028904},
    {"resnext101_32x8d", resnet, resnet101_blocks, LEN(resnet101_blocks), .bottleneck = 1, .groups = 32,
     .width_per_group = 8, .input_size = 224, .params = 88791336},
    {"resnext101_64x4d", resnet, resnet101_blocks, LEN(resnet101_blocks), .bottleneck = 1, .groups = 64,
     .width_per_group = 4, .input_size = 224, .params = 83455272},
    {"wide_resnet50_2", resnet, resnet50_blocks, LEN(resnet50_blocks), .bottleneck = 1, .width_per_group = 128,
     .input_size = 224, .params = 68883240},
    {"wide_resnet101_2", resnet, resnet101_blocks, LEN(resnet101_blocks), .bottleneck = 1, .width_per_group = 128,
     .input_size = 224, .params = 126886696},
    {"resnet8", resnet_cifar, resnet8_blocks, LEN(resnet8_blocks), .input_size = 32, .params = 142392},
    {"resnet20", resnet_cifar, resnet20_blocks, LEN(resnet20_blocks), .input_size = 32, .params = 336824},
    {"resnet56", resnet_cifar, resnet56_blocks, LEN(resnet56_blocks), .input_size = 32, .params = 920120},
    {"resnet18_small", resnet, resnet18_blocks, LEN(resnet18_blocks), .small_stem = 1, .input_size = 32,
     .params = 11681832},
    {"alexnet", alexnet, .input_size = 224, .params = 61100840},
    {"vgg11", vgg, vgg11_config, LEN(vgg11_config), .input_size = 224, .params = 132863336},
    {"vgg11_bn", vgg, vgg11_config, LEN(vgg11_config), .batchnorm = 1, .input_size = 224, .params = 132868840},
    {"vgg13", vgg, vgg13_config, LEN(vgg13_config), .input_size = 224, .params = 133047848},
    {"vgg13_bn", vgg, vgg13_config, LEN(vgg13_config), .batchnorm = 1, .input_size = 224, .params = 133053736},
    {"vgg16", vgg, vgg16_config, LEN(vgg16_config), .input_size = 224, .params = 138357544},
    {"vgg16_bn", vgg, vgg16_config, LEN(vgg16_config), .batchnorm = 1, .input_size = 224, .params = 138365992},
    {"vgg19", vgg, vgg19_config, LEN(vgg19_config), .input_size = 224, .params = 143667240},
    {"vgg19_bn", vgg, vgg19_config, LEN(vgg19_config), .batchnorm = 1, .input_size = 224, .params = 143678248},
    /* MobileNet and EfficientNet (torchvision's dropout, BN eps and momentum, and width and depth) */
    {"mobilenet_v2", mobilenet_v2, .dropout = 0.2f, .input_size = 224, .params = 3504872},
    {"mobilenet_v3_large", mobilenet_v3, .dropout = 0.2f, .bn_eps = 1e-3f, .bn_momentum = 0.01f, .input_size = 224,
     .params = 5483032},
    {"mobilenet_v3_small", mobilenet_v3, .variant = 1, .dropout = 0.2f, .bn_eps = 1e-3f, .bn_momentum = 0.01f,
     .input_size = 224, .params = 2542856},
    {"efficientnet_b0", efficientnet, .variant = 1, .width_mult = 1.0, .depth_mult = 1.0, .dropout = 0.2f,
     .input_size = 224, .params = 5288548},
    {"efficientnet_b1", efficientnet, .variant = 1, .width_mult = 1.0, .depth_mult = 1.1, .dropout = 0.2f,
     .input_size = 240, .params = 7794184},
    {"efficientnet_b2", efficientnet, .variant = 1, .width_mult = 1.1, .depth_mult = 1.2, .dropout = 0.3f,
     .input_size = 288, .params = 9109994},
    {"efficientnet_b3", efficientnet, .variant = 1, .width_mult = 1.2, .depth_mult = 1.4, .dropout = 0.3f,
     .input_size = 300, .params = 12233232},
    {"efficientnet_b4", efficientnet, .variant = 1, .width_mult = 1.4, .depth_mult = 1.8, .dropout = 0.4f,
     .input_size = 380, .params = 19341616},
    {"efficientnet_v2_s", efficientnet, .variant = 2, .dropout = 0.2f, .bn_eps = 1e-3f, .input_size = 384,
     .params = 21458488},
    /* ConvNeXt (dropout: its stochastic depth probability, torchvision's 0.1 and 0.4) */
    {"convnext_tiny", convnext, convnext_tiny_blocks, LEN(convnext_tiny_blocks), .dropout = 0.1f, .input_size = 224,
     .params = 28589128},
    {"convnext_small", convnext, convnext_small_blocks, LEN(convnext_small_blocks), .dropout = 0.4f,
     .input_size = 224, .params = 50223688},
    {"densenet121", densenet, densenet121_blocks, LEN(densenet121_blocks), .input_size = 224, .params = 7978856},
    /* RegNetY (its stage table as info->table) */
    {"regnet_y_400mf", regnet, .table = &regnet_y_400mf_p, .input_size = 224, .params = 4344144},
    {"regnet_y_800mf", regnet, .table = &regnet_y_800mf_p, .input_size = 224, .params = 6432512},
    {"regnet_y_1_6gf", regnet, .table = &regnet_y_1_6gf_p, .input_size = 224, .params = 11202430},
    {"regnet_y_3_2gf", regnet, .table = &regnet_y_3_2gf_p, .input_size = 224, .params = 19436338},
    {"regnet_y_8gf", regnet, .table = &regnet_y_8gf_p, .input_size = 224, .params = 39381472},
    {"regnet_y_16gf", regnet, .table = &regnet_y_16gf_p, .input_size = 224, .params = 83590140},
    /* Vision Transformer (config: patch, layers, heads, width, MLP width) */
    {"vit_b_16", vit, vit_b_16_config, LEN(vit_b_16_config), .input_size = 224, .params = 86567656},
    {"vit_test", vit, vit_test_config, LEN(vit_test_config), .input_size = 32, .params = 145576},
};
const int dt_n_models = LEN(dt_models);

const dt_model_info *dt_model_lookup(const char *name)
{
    for (int i = 0; i < dt_n_models; i++)
        if (strcmp(dt_models[i].name, name) == 0)
            return &dt_models[i];
    return NULL;
}

void dt_model_print_names(FILE *f, int col, int indent, int width)
{
    for (int i = 0; i < dt_n_models; i++) {
        int len = (int)strlen(dt_models[i].name) + (i + 1 < dt_n_models ? 1 : 0); /* the name and its comma */
        if (i > 0) {
            if (col + 1 + len > width) {
                fprintf(f, "\n%*s", indent, "");
                col = indent;
            } else {
                fputc(' ', f);
                col++;
            }
        }
        fprintf(f, "%s%s", dt_models[i].name, i + 1 < dt_n_models ? "," : "");
        col += len;
    }
}

/* "resnet18, resnet34, ..." into buf (cut short when it does not fit) */
static void model_names(char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < dt_n_models && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", dt_models[i].name);
}

static int create(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be, int shapes_only)
{
    if (in_c < 1 || num_classes < 1) {
        dt_error("model %s: %d input channels and %d classes: both must be at least 1", arch, in_c, num_classes);
        return DT_ERR_INPUT;
    }
    const dt_model_info *info = dt_model_lookup(arch);
    if (!info) {
        char list[512];
        model_names(list, sizeof list);
        dt_error("unknown model '%s' (known: %s)", arch, list);
        memset(m, 0, sizeof *m); /* safe to free, as after any failure */
        return DT_ERR_INPUT;
    }
    dt_model_begin(m, arch, in_c, num_classes, be);
    m->shapes_only = shapes_only;
    int rc = dt_model_end(m, info->build(m, info));
    if (rc != DT_OK)
        dt_model_free(m);
    return rc;
}

int dt_model_create(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be)
{
    return create(m, arch, in_c, num_classes, be, 0);
}

int dt_model_create_shapes(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be)
{
    return create(m, arch, in_c, num_classes, be, 1);
}
