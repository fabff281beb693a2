/* test_model_plan.c: planning prepares the backend for every batch size a run will meet, and
 * refuses a batch whose tensors pass the backend's limit.
 *
 * - dt_model_plan_sizes calls the backend's planning ops (conv_workspace and the *_scratch ops) for
 *   every node at every planned batch size, once per size (repeats ignored), and reserve_scratch
 *   once with the most scratch any of them returned; a model so planned runs forward and backward
 *   at each size. A recording backend (dt_backend_cpu with its planning ops wrapped) sees the calls.
 * - dt_model_plan_inputs / dt_model_set_input: a model planned for two input sizes plans the backend
 *   at both, holds the larger in its arenas, gives at the second the logits of a model planned for it
 *   alone, and returns every value to its place when switched back.
 * - dt_model_max_batch: the largest batch under a tensor limit and the layer that bounds it;
 *   planning past a backend's max_tensor_elems is refused with one line naming both.
 * - dt_batch_sizes / dt_run_batch_sizes (train/data.c): the sizes a loader gives each rank,
 *   checked against the sampler's per-rank counts (train/trainer_int.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "nn/model.h"
#include "tap.h"
#include "train/trainer_int.h"
#include "util/check.h"

/* --- a backend that records its planning calls ------------------------------------------------- */

#define MAX_CALLS 4096
static dt_conv_desc conv_calls[MAX_CALLS];
static int n_conv_calls;
static int64_t bn_rows[MAX_CALLS], linear_n[MAX_CALLS], xent_n[MAX_CALLS], norm_n[MAX_CALLS];
static int n_bn, n_linear, n_xent, n_norm;
static size_t most_returned; /* the largest *_scratch answer */
static size_t reserved[16];
static int n_reserved;

static size_t note(size_t v)
{
    most_returned = v > most_returned ? v : most_returned;
    return v;
}

static size_t r_conv_workspace(const dt_conv_desc *d)
{
    if (n_conv_calls < MAX_CALLS)
        conv_calls[n_conv_calls++] = *d;
    return dt_backend_cpu.conv_workspace(d); /* the real op: its primitives are made here */
}
/* the *_scratch wrappers answer made-up sizes (the CPU's are 0), so the reserve shows the maximum */
static size_t r_bn_scratch(const dt_bn_desc *d)
{
    if (n_bn < MAX_CALLS)
        bn_rows[n_bn++] = d->rows;
    return note((size_t)d->rows * (size_t)d->c * 3 + dt_backend_cpu.bn_scratch(d));
}
static size_t r_linear_scratch(int n, int in, int out, dt_dtype t)
{
    if (n_linear < MAX_CALLS)
        linear_n[n_linear++] = n;
    return note((size_t)n * 7 + dt_backend_cpu.linear_scratch(n, in, out, t));
}
static size_t r_xent_scratch(int n, int k)
{
    if (n_xent < MAX_CALLS)
        xent_n[n_xent++] = n;
    return note((size_t)n * (size_t)k + dt_backend_cpu.xent_scratch(n, k));
}
static size_t r_normalize_scratch(int64_t n)
{
    if (n_norm < MAX_CALLS)
        norm_n[n_norm++] = n;
    return note((size_t)n + dt_backend_cpu.normalize_scratch(n));
}
static int r_reserve_scratch(size_t bytes)
{
    if (n_reserved < 16)
        reserved[n_reserved] = bytes;
    n_reserved++;
    return dt_backend_cpu.reserve_scratch(bytes);
}

static void forget_calls(void)
{
    n_conv_calls = n_bn = n_linear = n_xent = n_norm = n_reserved = 0;
    most_returned = 0;
}

static int count_in(const int64_t *a, int n, int64_t v)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += a[i] == v;
    return k;
}

/* how many recorded conv_workspace calls were for node nd's convolution at a batch of n */
static int conv_seen(const dt_model *m, const dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_conv_desc want;
    if (dt_conv_desc_set(&want, n, x->height, x->width, x->channels, y->channels, nd->attr.kernel, nd->attr.kernel,
                         nd->attr.stride, nd->attr.stride, nd->attr.pad, nd->attr.pad, nd->attr.dilation,
                         nd->attr.dilation, nd->attr.groups) != 0)
        return -1;
    int k = 0;
    for (int i = 0; i < n_conv_calls; i++) {
        const dt_conv_desc *c = &conv_calls[i];
        k += c->n == want.n && c->h == want.h && c->w == want.w && c->c == want.c && c->oc == want.oc &&
             c->oh == want.oh && c->ow == want.ow && c->kh == want.kh && c->kw == want.kw && c->sh == want.sh &&
             c->sw == want.sw && c->ph == want.ph && c->pw == want.pw && c->dh == want.dh && c->dw == want.dw &&
             c->groups == want.groups;
    }
    return k;
}

/* the CPU backend with its planning ops wrapped to record what they are asked */
static dt_backend recording_backend(void)
{
    dt_backend rec = dt_backend_cpu;
    rec.name = "cpu-recording";
    rec.conv_workspace = r_conv_workspace;
    rec.bn_scratch = r_bn_scratch;
    rec.linear_scratch = r_linear_scratch;
    rec.xent_scratch = r_xent_scratch;
    rec.normalize_scratch = r_normalize_scratch;
    rec.reserve_scratch = r_reserve_scratch;
    return rec;
}

/* n images of h x w x c of a fixed pattern in [-1, 1] */
static float *pattern_images(int n, int h, int w, int c)
{
    int64_t nx = (int64_t)n * h * w * c;
    float *x = malloc((size_t)nx * sizeof(float));
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    return x;
}

/* forward, loss and backward at a batch of n: DT_OK and a finite loss */
static int runs_at(dt_model *m, int n, int h, int w)
{
    float *x = pattern_images(n, h, w, m->in_c);
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)((i * 7) % m->num_classes);
    double loss = NAN;
    int ok = dt_model_forward(m, x, n) == DT_OK && dt_model_loss(m, labels, n, 0.1f, &loss) == DT_OK &&
             dt_model_backward(m, n, 0) == DT_OK && isfinite(loss);
    free(x);
    free(labels);
    return ok;
}

static void test_plan_sizes(void)
{
    dt_backend rec = recording_backend();

    const int H = 32, W = 32, sizes[3] = {8, 5, 3};
    dt_model m;
    TAP_OK(dt_model_create(&m, "resnet8", 3, 10, &rec) == DT_OK, "resnet8 on a recording CPU backend");
    dt_model_init_weights(&m, 7, 0);
    forget_calls();
    const int also[] = {5, 3, 5, 8}; /* repeats, and n itself: each size is planned once */
    TAP_OK(dt_model_plan_sizes(&m, 8, H, W, also, 4) == DT_OK, "planned for 8 images, also batches 5 and 3");

    int convs = 0, bns = 0, linears = 0, every_conv = 1, every_bn = 1;
    for (int i = 0; i < m.n_nodes; i++) {
        const dt_node *nd = &m.nodes[i];
        const dt_value *x = &m.values[nd->in0];
        for (int s = 0; s < 3; s++) {
            if (nd->op == DT_OP_CONV && conv_seen(&m, nd, sizes[s]) < 1) {
                every_conv = 0;
                tap_diag("conv %s: conv_workspace never saw a batch of %d", nd->name, sizes[s]);
            }
            if (nd->op == DT_OP_BN && count_in(bn_rows, n_bn, (int64_t)sizes[s] * x->height * x->width) < 1) {
                every_bn = 0;
                tap_diag("%s: bn_scratch never saw a batch of %d", nd->name, sizes[s]);
            }
        }
        convs += nd->op == DT_OP_CONV;
        bns += nd->op == DT_OP_BN;
        linears += nd->op == DT_OP_LINEAR;
    }
    TAP_OK(convs > 0 && every_conv, "every one of the %d convolutions saw batches 8, 5 and 3", convs);
    TAP_OK(n_conv_calls == 3 * convs, "conv_workspace: %d calls, one per convolution and size (want %d)", n_conv_calls,
           3 * convs);
    TAP_OK(bns > 0 && every_bn && n_bn == 3 * bns, "every one of the %d BNs saw batches 8, 5 and 3 (%d calls)", bns,
           n_bn);
    int lin_ok = n_linear == 3 * linears, xent_ok = n_xent == 3, norm_ok = n_norm == 3;
    for (int s = 0; s < 3; s++) {
        lin_ok = lin_ok && count_in(linear_n, n_linear, sizes[s]) == linears;
        xent_ok = xent_ok && count_in(xent_n, n_xent, sizes[s]) == 1;
        norm_ok = norm_ok && count_in(norm_n, n_norm, (int64_t)sizes[s] * H * W * 3) == 1;
    }
    TAP_OK(linears > 0 && lin_ok, "linear_scratch saw batches 8, 5 and 3 for the %d linear layer(s)", linears);
    TAP_OK(xent_ok, "xent_scratch saw batches 8, 5 and 3");
    TAP_OK(norm_ok, "normalize_scratch saw the input of batches 8, 5 and 3 (n x 32 x 32 x 3 values)");
    TAP_OK(n_reserved == 1 && reserved[0] == most_returned && most_returned > 0,
           "reserve_scratch called once (%d), with the most any planning op returned (%zu, want %zu)", n_reserved,
           n_reserved ? reserved[0] : 0, most_returned);
    size_t ws = 0;
    for (int i = 0; i < n_conv_calls; i++) {
        size_t b = dt_backend_cpu.conv_workspace(&conv_calls[i]);
        ws = b > ws ? b : ws;
    }
    TAP_OK(m.workspace.capacity >= ws, "the workspace (%zu bytes) is the most any size needs (%zu)",
           m.workspace.capacity, ws);
    for (int s = 0; s < 3; s++)
        TAP_OK(runs_at(&m, sizes[s], H, W), "forward, loss and backward run at a batch of %d", sizes[s]);

    /* sizes outside 1..n are refused, and the plan made before stays */
    forget_calls();
    const int too_big[] = {9}, zero[] = {0};
    TAP_OK(dt_model_plan_sizes(&m, 8, H, W, too_big, 1) == DT_ERR_INPUT, "a batch of 9 next to 8 refused");
    char *s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "cannot plan a batch of 9 as well"), "one line: %s", s);
    free(s);
    TAP_OK(dt_model_plan_sizes(&m, 8, H, W, zero, 1) == DT_ERR_INPUT, "a batch of 0 refused");
    free(tap_log_take());
    TAP_OK(n_conv_calls == 0 && n_reserved == 0, "nothing planned for a refused list");
    TAP_OK(runs_at(&m, 5, H, W), "the earlier plan still runs");
    /* dt_model_plan is the one-size call */
    forget_calls();
    int rc = dt_model_plan(&m, 4, H, W);
    TAP_OK(rc == DT_OK && n_conv_calls == convs && n_xent == 1 && n_reserved == 1,
           "dt_model_plan(4): one size (%d conv calls, %d xent)", n_conv_calls, n_xent);
    dt_model_free(&m);
}

/* --- a second input size (validation at another resolution) ------------------------------------ */

/* every value's and saved state's place in the arenas */
static size_t *places(const dt_model *m)
{
    size_t *p = malloc((size_t)(2 * m->n_values + m->n_nodes) * sizeof(size_t));
    for (int v = 0; v < m->n_values; v++) {
        p[2 * v] = m->values[v].act_off;
        p[2 * v + 1] = m->values[v].grad_off;
    }
    for (int i = 0; i < m->n_nodes; i++)
        p[2 * m->n_values + i] = m->nodes[i].save_off;
    return p;
}

/* the logits of an evaluation forward of n images of h x w (the pattern runs_at uses) */
static float *eval_logits(dt_model *m, int n, int h, int w)
{
    float *x = pattern_images(n, h, w, m->in_c), *out = malloc((size_t)n * m->num_classes * sizeof(float));
    m->training = 0;
    if (dt_model_forward(m, x, n) == DT_OK)
        dt_model_get_logits(m, n, out);
    else
        out[0] = NAN;
    m->training = 1;
    free(x);
    return out;
}

static void test_two_inputs(void)
{
    dt_backend rec = recording_backend();
    const int N = 6, T = 24, V = 32, also[] = {3};
    dt_model a, b;
    TAP_OK(dt_model_create(&a, "resnet8", 3, 10, &rec) == DT_OK && dt_model_create(&b, "resnet8", 3, 10, &rec) == DT_OK,
           "two resnet8");
    dt_model_init_weights(&a, 11, 0);
    dt_model_init_weights(&b, 11, 0);
    forget_calls();
    TAP_OK(dt_model_plan_inputs(&a, N, T, T, V, V, also, 1) == DT_OK, "planned for %dx%d and %dx%d", T, T, V, V);
    TAP_OK(a.plan_h == T && a.plan_w == T, "it runs at the first size after planning (%dx%d)", a.plan_h, a.plan_w);
    size_t *first = places(&a), act_two = a.act.capacity, grad_two = a.grad.capacity;
    TAP_OK(dt_model_set_input(&a, V, V) == DT_OK && a.plan_h == V, "switched to %dx%d", V, V);
    int every = 1, convs = 0;
    for (int i = 0; i < a.n_nodes; i++) /* the backend planned the second size too, at each batch */
        if (a.nodes[i].op == DT_OP_CONV) {
            convs++;
            every = every && conv_seen(&a, &a.nodes[i], N) >= 1 && conv_seen(&a, &a.nodes[i], 3) >= 1;
        }
    TAP_OK(convs > 0 && every && n_conv_calls == 4 * convs,
           "conv_workspace saw every convolution at %dx%d for batches %d and 3, and the first size too (%d calls)", V,
           V, N, n_conv_calls);
    TAP_OK(dt_model_plan(&b, N, V, V) == DT_OK, "the other planned for %dx%d alone", V, V);
    TAP_OK(act_two >= b.act.capacity && grad_two >= b.grad.capacity,
           "the arenas hold the larger size (activations %zu >= %zu, gradients %zu >= %zu)", act_two, b.act.capacity,
           grad_two, b.grad.capacity);
    float *la = eval_logits(&a, N, V, V), *lb = eval_logits(&b, N, V, V);
    TAP_OK(isfinite(la[0]) && !memcmp(la, lb, (size_t)N * 10 * sizeof(float)),
           "at %dx%d its logits equal those of the model planned for that size alone, bit for bit", V, V);
    TAP_OK(runs_at(&a, N, V, V), "forward, loss and backward run at %dx%d", V, V);
    TAP_OK(dt_model_set_input(&a, T, T) == DT_OK, "back to %dx%d", T, T);
    size_t *again = places(&a);
    TAP_OK(!memcmp(first, again, (size_t)(2 * a.n_values + a.n_nodes) * sizeof(size_t)) && a.act.capacity == act_two,
           "every value and saved state is where it was before the switch (graphs captured there stay valid)");
    TAP_OK(runs_at(&a, N, T, T) && runs_at(&a, 3, T, T), "forward, loss and backward run at %dx%d, batches %d and 3",
           T, T, N);
    TAP_OK(dt_model_set_input(&a, 40, 40) == DT_ERR_INPUT, "a size not planned is refused");
    char *s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "40x40") && strstr(s, "24x24") && strstr(s, "32x32"), "one line: %s", s);
    free(s);
    TAP_OK(a.plan_h == T && runs_at(&a, N, T, T), "and the model still runs at %dx%d", T, T);
    free(first);
    free(again);
    free(la);
    free(lb);
    dt_model_free(&a);
    dt_model_free(&b);
}

/* --- the backend's limit on a tensor ------------------------------------------------------------ */

static void test_tensor_limit(void)
{
    dt_backend small = dt_backend_cpu;
    small.name = "cpu-small";
    small.max_tensor_elems = 1 << 16;
    dt_model m;
    char layer[128];
    TAP_OK(dt_model_create(&m, "resnet8", 3, 10, &small) == DT_OK, "resnet8 on a CPU backend of 65536 elements");
    /* resnet8 at 32x32: conv1's output, 16 x 32 x 32 = 16384 per image, is the largest: 4 images fit */
    int64_t fit = dt_model_max_batch(&m, 32, 32, 1 << 16, layer, sizeof layer);
    TAP_OK(fit == 4 && strcmp(layer, "conv1") == 0, "max batch at 32x32: %lld (want 4), bound by %s (want conv1)",
           (long long)fit, layer);
    fit = dt_model_max_batch(&m, 16, 16, 1 << 16, layer, sizeof layer);
    TAP_OK(fit == 16, "at 16x16: %lld (want 16)", (long long)fit);
    fit = dt_model_max_batch(&m, 32, 32, 3 * 16384, NULL, 0);
    TAP_OK(fit == 3, "with a limit of exactly three images' tensor: %lld", (long long)fit);
    fit = dt_model_max_batch(&m, 32, 32, 3 * 16384 - 1, NULL, 0);
    TAP_OK(fit == 2, "one element less: %lld", (long long)fit);
    fit = dt_model_max_batch(&m, 32, 32, 20000, layer, sizeof layer);
    TAP_OK(fit == 0 && strcmp(layer, "layer3.0.conv2") == 0,
           "a weight over the limit (layer3.0.conv2: 64 x 3 x 3 x 64) fits no batch: %lld, %s", (long long)fit, layer);
    fit = dt_model_max_batch(&m, 32, 32, 1000, layer, sizeof layer);
    TAP_OK(fit == 0 && strcmp(layer, "conv1") == 0, "a limit below one image: %lld, bound by %s", (long long)fit,
           layer);

    TAP_OK(dt_model_plan(&m, 8, 32, 32) == DT_ERR_INPUT, "a batch of 8 refused at planning");
    char *s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "a batch of 8 images of 32x32 is too large for the cpu-small backend") &&
               strstr(s, "layer conv1 has tensors of 16384 elements per image") &&
               strstr(s, "one tensor holds at most 65536 elements; the largest batch that fits is 4"),
           "one line naming the layer and the largest batch: %s", s);
    free(s);
    const int also[] = {3};
    TAP_OK(dt_model_plan_sizes(&m, 4, 32, 32, also, 1) == DT_OK, "a batch of 4 (and 3) plans");
    TAP_OK(runs_at(&m, 4, 32, 32) && runs_at(&m, 3, 32, 32), "and runs");
    /* asking at another input size leaves the plan's shapes alone */
    int h_before = m.values[m.output].height, c1 = m.nodes[0].out, c1h = m.values[c1].height;
    TAP_OK(dt_model_max_batch(&m, 64, 64, 1 << 16, NULL, 0) == 1, "at 64x64: 1 image");
    TAP_OK(m.values[c1].height == c1h && m.values[m.output].height == h_before && runs_at(&m, 4, 32, 32),
           "the planned shapes are kept (conv1 output %d high) and the model still runs", m.values[c1].height);
    TAP_OK(dt_model_plan(&m, 8, 32, 32) == DT_ERR_INPUT && runs_at(&m, 4, 32, 32),
           "a refused plan leaves the one before usable");
    free(tap_log_take());
    dt_model_free(&m);

    TAP_OK(dt_model_create(&m, "resnet8", 3, 10, &dt_backend_cpu) == DT_OK && dt_model_plan(&m, 64, 32, 32) == DT_OK,
           "the CPU backend has no limit (max_tensor_elems %lld)", (long long)dt_backend_cpu.max_tensor_elems);
    dt_model_free(&m);

    /* the CUDA backend's limit (INT32_MAX: cuDNN's int-indexed descriptors) for resnet50 at 224: its
     * stem's output, 112 x 112 x 64 per image, bounds the batch */
    TAP_OK(dt_model_create(&m, "resnet50", 3, 1000, &dt_backend_cpu) == DT_OK, "resnet50");
    fit = dt_model_max_batch(&m, 224, 224, INT32_MAX, layer, sizeof layer);
    TAP_OK(fit == 2674 && strcmp(layer, "conv1") == 0, "resnet50 at 224x224 under 2^31-1: %lld images (want 2674), %s",
           (long long)fit, layer);
    dt_model_free(&m);

    TAP_OK(dt_model_create(&m, "alexnet", 3, 10, &dt_backend_cpu) == DT_OK, "alexnet");
    TAP_OK(dt_model_max_batch(&m, 32, 32, INT32_MAX, layer, sizeof layer) == DT_ERR_INPUT,
           "an input too small for a layer: DT_ERR_INPUT");
    s = tap_log_take();
    TAP_OK(strstr(s, "too small for layer") != NULL, "naming it: %s", s);
    free(s);
    fit = dt_model_max_batch(&m, 224, 224, 100000, layer, sizeof layer);
    TAP_OK(fit == 0 && strcmp(layer, "features.0") == 0, "alexnet under 100000 elements: %lld, %s", (long long)fit,
           layer);
    fit = dt_model_max_batch(&m, 224, 224, 40000000, layer, sizeof layer);
    TAP_OK(fit == 206 && strcmp(layer, "features.0") == 0,
           "under 4e7: %lld images (want 206: 55 x 55 x 64 = 193600 per image), %s", (long long)fit, layer);
    fit = dt_model_max_batch(&m, 224, 224, 30000000, layer, sizeof layer);
    TAP_OK(fit == 0 && strcmp(layer, "classifier.1") == 0,
           "under 3e7: no batch, bound by classifier.1's weight (4096 x 9216): %lld, %s", (long long)fit, layer);
    dt_model_free(&m);
}

/* --- the sizes a loader gives ------------------------------------------------------------------- */

/* the distinct batch sizes rank r gets from a loader over the sampler's share, as the loader cuts it
 * (whole batches, then the rest unless drop_last), into out (at most 2); returns how many */
static int loader_sizes(int64_t images, int rank, int world, int batch, int drop_last, int *out)
{
    dt_sampler smp;
    if (dt_sampler_init(&smp, images, rank, world, 0, 1) != DT_OK)
        return -1;
    int64_t per = smp.per_rank;
    dt_sampler_free(&smp);
    int k = 0;
    for (int64_t at = 0; at < per; at += batch) {
        int size = per - at < batch ? (int)(per - at) : batch;
        if (size < batch && drop_last)
            break;
        int seen = 0;
        for (int j = 0; j < k; j++)
            seen |= out[j] == size;
        if (!seen && k < 2)
            out[k++] = size;
    }
    return k;
}

static void test_batch_sizes(void)
{
    int out[2], k;
    k = dt_batch_sizes(1000, 1, 64, 0, out);
    TAP_OK(k == 2 && out[0] == 64 && out[1] == 40, "1000 images, batch 64: 64 and a tail of 40");
    k = dt_batch_sizes(1000, 1, 64, 1, out);
    TAP_OK(k == 1 && out[0] == 64, "with drop_last: only 64");
    k = dt_batch_sizes(1000, 3, 64, 0, out);
    TAP_OK(k == 2 && out[0] == 64 && out[1] == 14, "over 3 ranks (334 each, padded): 64 and 14");
    k = dt_batch_sizes(128, 2, 64, 0, out);
    TAP_OK(k == 1 && out[0] == 64, "128 over 2 ranks: 64 only");
    k = dt_batch_sizes(50, 1, 64, 0, out);
    TAP_OK(k == 1 && out[0] == 50, "50 images under a batch of 64: one batch of 50");
    k = dt_batch_sizes(50, 1, 64, 1, out);
    TAP_OK(k == 0, "with drop_last: none");

    /* against the sampler and the loader's cut, every rank */
    int bad = 0, cases = 0;
    static const int64_t images[] = {1, 7, 63, 64, 65, 1000, 10000, 50001};
    static const int worlds[] = {1, 2, 3, 8}, batches[] = {1, 5, 64, 256};
    for (size_t a = 0; a < sizeof images / sizeof images[0]; a++)
        for (size_t b = 0; b < sizeof worlds / sizeof worlds[0]; b++)
            for (size_t c = 0; c < sizeof batches / sizeof batches[0]; c++)
                for (int drop = 0; drop <= 1; drop++)
                    for (int r = 0; r < worlds[b]; r++) {
                        int want[2], got[2];
                        int nw = loader_sizes(images[a], r, worlds[b], batches[c], drop, want);
                        int ng = dt_batch_sizes(images[a], worlds[b], batches[c], drop, got);
                        int same = nw == ng;
                        for (int j = 0; same && j < ng; j++)
                            same = got[j] == want[j];
                        if (!same && bad++ < 5)
                            tap_diag("%lld images, world %d, rank %d, batch %d, drop_last %d: got %d sizes, want %d",
                                     (long long)images[a], worlds[b], r, batches[c], drop, ng, nw);
                        cases++;
                    }
    TAP_OK(bad == 0, "the sizes match the sampler's share cut into batches: %d cases, %d off", cases, bad);

    /* a run's list: the batch, the training loader's (drop_last), validation's (its tail) */
    dt_train_cfg cfg;
    dt_train_defaults(&cfg);
    cfg.batch = 64;
    dt_run *r = calloc(1, sizeof *r);
    r->cfg = &cfg;
    r->launch.size = 3;
    r->have_train_set = r->have_val_set = 1;
    r->train_set.count = 1000; /* 334 per rank: 64 x 5, the 14 left dropped */
    r->val_set.count = 500;    /* 167 per rank: 64, 64, 39 */
    int list[5], n = dt_run_batch_sizes(r, list), has39 = 0, others = 1;
    for (int i = 0; i < n; i++) {
        has39 |= list[i] == 39;
        others &= list[i] == 64 || list[i] == 39;
    }
    TAP_OK(n >= 2 && list[0] == 64 && has39 && others, "run list: batch 64 and validation's tail 39 (%d sizes)", n);
    r->have_train_set = r->have_val_set = 0; /* --synthetic */
    n = dt_run_batch_sizes(r, list);
    TAP_OK(n == 1 && list[0] == 64, "--synthetic: the batch alone");
    free(r);
}

int main(void)
{
    tap_log_begin();
    dt_cpu_set_threads(2);
    test_plan_sizes();
    test_two_inputs();
    test_tensor_limit();
    test_batch_sizes();
    tap_log_end();
    return tap_done();
}
