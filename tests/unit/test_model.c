/* test_model.c: every architecture of the table (nn/models.c) builds with torchvision's parameter
 * count and names, plans for its input size and is listed in doc/dtrain.1; bad names and
 * too-small inputs are refused with one line; initialisation follows torchvision's rules and is
 * reproducible; a forward/backward pass runs and gives finite numbers. */
#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "tap.h"
#include "util/check.h"

static int64_t count_params(const dt_model *m, int trainable_only)
{
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (!trainable_only || dt_param_trainable(&m->params[i]))
            n += m->params[i].numel;
    return n;
}

/* sample standard deviation of a parameter */
static double param_std(const dt_model *m, const char *name)
{
    const dt_param *p = &m->params[dt_model_find_param(m, name)];
    const float *d = dt_param_data(m, p);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < p->numel; i++) {
        s += d[i];
        s2 += (double)d[i] * d[i];
    }
    double mean = s / p->numel;
    return sqrt(s2 / p->numel - mean * mean);
}

/* the text of doc/dtrain.1's entry for -a/--arch (from its line to the next .TP), or NULL */
static char *read_man_arch_entry(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/doc/dtrain.1", top ? top : ".");
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[1024], *text = calloc(1, 1);
    size_t len = 0;
    int in = 0;
    while (text && fgets(line, sizeof line, f)) {
        if (in && strncmp(line, ".TP", 3) == 0)
            break;
        if (!in && strstr(line, "\\-\\-arch"))
            in = 1;
        if (in) {
            char *t = realloc(text, len + strlen(line) + 1);
            if (!t) {
                free(text);
                text = NULL;
                break;
            }
            text = t;
            memcpy(text + len, line, strlen(line) + 1);
            len += strlen(line);
        }
    }
    fclose(f);
    if (text && !in) {
        free(text);
        text = NULL;
    }
    return text;
}

/* does text hold name as a whole word (not as a part of resnet18_small, say)? */
static int has_word(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        int before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (before && after)
            return 1;
    }
    return 0;
}

int main(void)
{
    tap_log_begin();
    /* every architecture of the table: its parameter count (torchvision's, in the table), one name
     * that must exist where listed here, planning for its input size, and the dtrain(1) man page
     * lists it under -a */
    static const struct {
        const char *arch, *a_name;
    } names[] = {
        {"resnet18", "layer4.1.bn2.running_var"},
        {"resnet34", "layer3.5.conv2.weight"},
        {"resnet50", "layer4.0.downsample.1.num_batches_tracked"},
        {"resnet101", "layer3.22.conv3.weight"},
        {"resnet152", "layer2.7.bn3.bias"},
        {"resnext50_32x4d", "layer4.2.conv2.weight"},
        {"resnext101_32x8d", "layer3.22.bn2.running_var"},
        {"resnext101_64x4d", "layer3.22.conv2.weight"},
        {"wide_resnet50_2", "layer4.0.downsample.0.weight"},
        {"wide_resnet101_2", "layer3.22.conv3.weight"},
        {"resnet56", "layer3.8.bn2.weight"},
        {"resnet18_small", "layer4.1.conv2.weight"},
        {"alexnet", "classifier.6.bias"},
        {"vgg11", "features.18.weight"},
        {"vgg11_bn", "features.26.running_mean"},
        {"vgg13", "features.22.weight"},
        {"vgg13_bn", "features.32.running_mean"},
        {"vgg16", "features.28.weight"},
        {"vgg16_bn", "features.41.weight"},
        {"vgg19", "features.34.weight"},
        {"vgg19_bn", "features.50.bias"},
    };
    char *man = read_man_arch_entry();
    TAP_OK(man != NULL, "doc/dtrain.1 has an entry for --arch");
    for (int i = 0; i < dt_n_models; i++) {
        const dt_model_info *info = &dt_models[i];
        const char *a_name = NULL;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(names[k].arch, info->name) == 0)
                a_name = names[k].a_name;
        dt_model m;
        int rc = dt_model_create(&m, info->name, 3, 1000, &dt_backend_cpu);
        long long got = rc == DT_OK ? (long long)count_params(&m, 1) : -1LL;
        TAP_OK(rc == DT_OK && got == info->params && (!a_name || dt_model_find_param(&m, a_name) >= 0),
               "%s: %lld trainable parameters (torchvision: %lld)%s%s", info->name, got, (long long)info->params,
               a_name ? ", has " : "", a_name ? a_name : "");
        int size = info->input_size;
        TAP_OK(rc == DT_OK && size > 0 && dt_model_plan(&m, 1, size, size) == DT_OK, "%s plans for its input size %d",
               info->name, size);
        if (rc == DT_OK)
            dt_model_free(&m);
        TAP_OK(dt_model_lookup(info->name) == info, "%s: found by name", info->name);
        TAP_OK(man && has_word(man, info->name), "%s: listed under --arch in doc/dtrain.1", info->name);
    }
    free(man);
    TAP_OK(dt_model_lookup("resnet") == NULL && dt_model_lookup("") == NULL, "no model called resnet or ''");

    dt_model m;
    TAP_OK(dt_model_create(&m, "resnet50x", 3, 10, &dt_backend_cpu) == DT_ERR_INPUT, "unknown arch refused");
    char *s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "unknown model 'resnet50x' (known: resnet18, resnet34,"),
           "with one line listing the known ones: %s", s);
    free(s);
    TAP_OK(dt_model_create(&m, "resnet20", 0, 10, &dt_backend_cpu) == DT_ERR_INPUT, "0 input channels refused");
    free(tap_log_take());

    /* resnet20 for Fashion-MNIST: 1 channel, 10 classes */
    TAP_OK(dt_model_create(&m, "resnet20", 1, 10, &dt_backend_cpu) == DT_OK, "resnet20 with 1 input channel");
    const dt_param *c1 = &m.params[dt_model_find_param(&m, "conv1.weight")];
    TAP_OK(c1->shape[0] == 16 && c1->shape[1] == 1 && c1->shape[2] == 3 && c1->shape[3] == 3,
           "conv1.weight is [16, 1, 3, 3]");
    TAP_OK(dt_model_find_param(&m, "layer2.0.downsample.0.weight") >= 0 &&
               dt_model_find_param(&m, "layer1.0.downsample.0.weight") < 0 && dt_model_find_param(&m, "layer4.0.conv1.weight") < 0,
           "downsample only where the shape changes; three stages");
    dt_model_init_weights(&m, 42, 0);
    double sd = param_std(&m, "layer3.2.conv1.weight"); /* kaiming fan_out: sqrt(2 / (64*9)) */
    TAP_OK(fabs(sd / sqrt(2.0 / (64 * 9)) - 1) < 0.05, "kaiming_normal fan_out std %.5f (want %.5f)", sd, sqrt(2.0 / 576));
    const dt_param *fc = &m.params[dt_model_find_param(&m, "fc.weight")];
    const float *fw = dt_param_data(&m, fc);
    float mx = 0;
    for (int64_t i = 0; i < fc->numel; i++)
        mx = fabsf(fw[i]) > mx ? fabsf(fw[i]) : mx;
    TAP_OK(mx <= 1 / sqrtf(64) && mx > 0.9f / sqrtf(64), "fc weight uniform within 1/sqrt(64): max %.4f", mx);
    const float *g = dt_param_data(&m, &m.params[dt_model_find_param(&m, "layer1.0.bn2.weight")]);
    TAP_OK(g[0] == 1.0f, "BN weight 1 without zero_init_residual");
    float first = fw[0];
    dt_model_init_weights(&m, 42, 1);
    TAP_OK(fw[0] == first && g[0] == 0.0f &&
               ((const float *)dt_param_data(&m, &m.params[dt_model_find_param(&m, "bn1.weight")]))[0] == 1.0f,
           "same seed, same weights; zero_init_residual zeroes only the blocks' last BN");
    dt_model_init_weights(&m, 43, 0);
    TAP_OK(fw[0] != first, "another seed, other weights");

    TAP_OK(dt_model_plan(&m, 4, 28, 28) == DT_OK, "plan 4x28x28");
    float *x = malloc(4 * 28 * 28 * sizeof(float));
    for (int i = 0; i < 4 * 28 * 28; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    int32_t labels[4] = {0, 3, 9, 3};
    double loss = 0;
    TAP_OK(dt_model_forward(&m, x, 4) == DT_OK && dt_model_loss(&m, labels, 4, 0.0f, &loss) == DT_OK &&
               isfinite(loss) && loss > 0.5 && loss < 10,
           "forward + loss finite: %.4f", loss);
    TAP_OK(dt_model_backward(&m, 4, 0) == DT_OK, "backward runs");
    int finite = 1;
    for (int64_t i = 0; i < m.n_weights; i++)
        finite = finite && isfinite(((const float *)m.grads)[i]);
    TAP_OK(finite, "every gradient finite");
    TAP_OK(m.counts[m.params[dt_model_find_param(&m, "bn1.num_batches_tracked")].off] == 1, "BN counted one batch");
    int32_t bad[4] = {0, 10, 1, 1};
    TAP_OK(dt_model_loss(&m, bad, 4, 0.0f, &loss) == DT_ERR_INPUT, "label 10 of 10 classes refused");
    s = tap_log_take();
    TAP_OK(strstr(s, "label 10 of batch index 1 is outside 0..9") != NULL, "naming the index: %s", s);
    free(s);
    TAP_OK(dt_model_forward(&m, x, 5) == DT_ERR_STATE, "more images than planned refused");
    free(tap_log_take());
    free(x);
    dt_model_free(&m);

    /* Memory plans: every packing of the arenas must give the same numbers bit for bit. A lifetime
     * that ends too early shows up as some packing putting a later value over live bytes. */
    const char *plan_archs[] = {"resnet50", "resnet18", "vgg11_bn", "resnet20"};
    for (int a = 0; a < 4; a++) {
        const int n = 2, hw = 32, nx = n * hw * hw * 3;
        float *xi = malloc((size_t)nx * sizeof(float)), *ref = NULL;
        int32_t lab[2] = {1, 7};
        int same = 1;
        for (int i = 0; i < nx; i++)
            xi[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
        for (int rule = 1; rule <= 3; rule++) {
            dt_model pm;
            if (dt_model_create(&pm, plan_archs[a], 3, 10, &dt_backend_cpu) != DT_OK) {
                same = 0;
                break;
            }
            pm.plan_rule = rule;
            dt_model_init_weights(&pm, 7, 0);
            double l = 0;
            int ok = dt_model_plan(&pm, n, hw, hw) == DT_OK && dt_model_forward(&pm, xi, n) == DT_OK &&
                     dt_model_loss(&pm, lab, n, 0.0f, &l) == DT_OK && dt_model_backward(&pm, n, 0) == DT_OK;
            if (!ok)
                same = 0;
            else if (!ref)
                ref = memcpy(malloc((size_t)pm.n_weights * sizeof(float)), pm.grads, (size_t)pm.n_weights * sizeof(float));
            else
                same = same && memcmp(ref, pm.grads, (size_t)pm.n_weights * sizeof(float)) == 0;
            dt_model_free(&pm);
        }
        TAP_OK(same, "%s: the three memory packings give the same gradients, bit for bit", plan_archs[a]);
        free(ref);
        free(xi);
    }
    free(tap_log_take());

    TAP_OK(dt_model_create(&m, "resnet50", 3, 10, &dt_backend_cpu) == DT_OK, "resnet50");
    TAP_OK(dt_model_plan(&m, 2, 16, 16) == DT_OK, "resnet50 plans for 16x16 (layer4 gets 1x1)");
    TAP_OK(dt_model_plan(&m, 2, 8, 8) == DT_OK, "and for 8x8");
    free(tap_log_take());
    dt_model_free(&m);
    TAP_OK(dt_model_create(&m, "alexnet", 3, 10, &dt_backend_cpu) == DT_OK, "alexnet");
    TAP_OK(dt_model_plan(&m, 2, 32, 32) == DT_ERR_INPUT, "alexnet refuses 32x32");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "an input of 32x32 is too small for layer"), "naming the layer: %s", s);
    free(s);
    dt_model_free(&m);

    /* ViT: torchvision's initialisation per parameter, and the one input size its position embedding takes */
    TAP_OK(dt_model_create(&m, "vit_b_16", 3, 1000, &dt_backend_cpu) == DT_OK, "vit_b_16");
    dt_model_init_weights(&m, 7, 0);
    const struct {
        const char *name;
        double want; /* the standard deviation torchvision draws with */
    } vit_init[] = {
        {"conv_proj.weight", sqrt(1.0 / (3 * 16 * 16))},                          /* trunc_normal_, fan_in */
        {"encoder.pos_embedding", 0.02},                                           /* normal_(std=0.02) */
        {"encoder.layers.encoder_layer_3.self_attention.in_proj_weight", sqrt(2.0 / (768 + 2304))}, /* xavier */
        {"encoder.layers.encoder_layer_3.self_attention.out_proj.weight", 1 / sqrt(3.0 * 768)}, /* U(+-1/sqrt(in)) */
        {"encoder.layers.encoder_layer_3.mlp.0.weight", sqrt(2.0 / (768 + 3072))},             /* xavier */
        {"encoder.layers.encoder_layer_3.mlp.3.bias", 1e-6},                                   /* normal_(std=1e-6) */
    };
    for (size_t k = 0; k < sizeof vit_init / sizeof vit_init[0]; k++) {
        double got = param_std(&m, vit_init[k].name);
        TAP_OK(fabs(got / vit_init[k].want - 1) < 0.05, "vit_b_16 %s: std %.3g (torchvision's %.3g)", vit_init[k].name,
               got, vit_init[k].want);
    }
    const char *vit_zero[] = {"class_token", "conv_proj.bias", "heads.head.weight", "heads.head.bias",
                              "encoder.layers.encoder_layer_0.self_attention.in_proj_bias",
                              "encoder.layers.encoder_layer_0.self_attention.out_proj.bias"};
    for (size_t k = 0; k < sizeof vit_zero / sizeof vit_zero[0]; k++) {
        const dt_param *p = &m.params[dt_model_find_param(&m, vit_zero[k])];
        const float *d = dt_param_data(&m, p);
        int zero = 1;
        for (int64_t i = 0; i < p->numel; i++)
            zero &= d[i] == 0.0f;
        TAP_OK(zero, "vit_b_16 %s: zeros", vit_zero[k]);
    }
    TAP_OK(dt_model_plan(&m, 1, 256, 256) == DT_ERR_INPUT, "vit_b_16 refuses 256x256");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "gives 257 tokens, but encoder.pos_embedding holds 197"),
           "naming the position embedding: %s", s);
    free(s);
    dt_model_free(&m);
    tap_log_end();
    return tap_done();
}
