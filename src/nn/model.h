/* model.h: a network as a small graph of layers, planned once per (batch, height, width).
 *
 * A model is a list of nodes in execution order; each reads one or two values (activations, NHWC)
 * and writes one. Parameters are named with torchvision's state_dict names and live in three flat
 * arrays: `weights` (trainable, with `grads` and optimiser state laid out the same way), `buffers`
 * (BN running mean/var) and `counts` (BN num_batches_tracked). Conv weights are stored O,KH,KW,I
 * ("OHWI"); state-dict I/O converts to and from PyTorch's O,I,KH,KW. weights, grads, buffers and the
 * arenas are the backend's memory (nn/backend.h); counts are host memory.
 *
 * Life cycle:
 *   dt_model m; dt_model_create(&m, "resnet50", 3, 1000, &dt_backend_cpu)   architecture and parameters
 *   dt_model_init_weights(&m, seed, zero_init_residual)                     torchvision's init
 *   dt_model_plan_sizes(&m, batch, 224, 224, (int[]){tail, val_tail}, 2) all memory, once
 *   per step: dt_model_forward(&m, x, n); dt_model_loss(&m, labels, n, eps); dt_model_backward(&m, n, 0)
 *   dt_model_free(&m)
 * After planning nothing is allocated; any n <= the planned batch may be run. The backend prepares
 * itself for each planned batch size (nn/backend.h, "Planning": cuDNN's algorithm search, its
 * scratch), so a run plans every size it will run: an epoch's last, smaller batch, validation's
 * batch and tail. Any other n still runs, but a device backend then prepares it mid-run (the CUDA
 * backend warns once per shape).
 *
 * Memory plan: every activation a backward pass needs is kept, but a ReLU whose input has no other
 * reader runs in place (its backward needs only its output); activations backward does not read
 * give their bytes to later values. Activation gradients share one arena by lifetime: a value's
 * gradient lives from the backward of its last reader to the backward of its producer, and values
 * whose lifetimes do not overlap get the same bytes (the packing is nn/plan.h's). The gradient of
 * an add's input that nothing else reads is the add's output gradient itself: no copy, no bytes.
 *
 * The code: nn/graph_types.h has the graph's types and the table of node kinds (DT_KINDS); nn/graph.c builds
 * the graph (the dt_layer_* calls below) and owns the parameters; nn/models.c holds the architectures
 * (dt_models); nn/model_plan.c plans memory; nn/model_run.c runs forward and backward, each node by its
 * kind's family file under nn/layers/ (nn/layer.h); nn/precision.c decides mixed precision at plan
 * time; nn/step_io.c moves the step's numbers, nn/profile.c times it; nn/state.c reads and writes
 * state_dicts. */
#ifndef DT_NN_MODEL_H
#define DT_NN_MODEL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "nn/backend.h"
#include "nn/graph_types.h"
#include "util/arena.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the profile (DT_PROFILE, dt_model_prof_mark) attributes a step's time to: a node kind's
 * forward is its dt_op_kind, its backward DT_PROF_BWD + its dt_op_kind (a convolution's weight
 * gradient; its input gradient is DT_PROF_CONV_DGRAD), then the rest of a step: the input's upload
 * (with the step's scalars and labels) and normalisation, the loss, DDP's copies into its device wire
 * during backward and back after the all-reduces (with the wait for them), the loss scaler's check,
 * the optimiser (with the masters' copy into the model), the rest (the out scalars' download). */
enum dt_prof_kind { DT_PROF_BWD = DT_OP_KINDS, DT_PROF_CONV_DGRAD = 2 * DT_OP_KINDS, DT_PROF_UPLOAD,
                    DT_PROF_NORMALIZE, DT_PROF_LOSS, DT_PROF_DDP_PACK, DT_PROF_DDP_UNPACK, DT_PROF_SCALER,
                    DT_PROF_OPTIMIZER, DT_PROF_OTHER, DT_PROF_KINDS };

typedef struct dt_model {
    char arch[32];
    int in_c, num_classes;
    const dt_backend *be;
    dt_node *nodes;
    int n_nodes;
    size_t cap_nodes;
    dt_value *values;
    int n_values;
    size_t cap_values;
    dt_param *params;
    int n_params;
    size_t cap_params;
    int input, output;      /* value indices */
    const float *input_data; /* the input of the last forward (the caller's memory) */
    int build_error;        /* set by a dt_layer_* call that failed; checked by dt_model_end */

    void *weights, *grads;  /* each parameter at its boff, stored in its dtype */
    size_t weights_bytes;
    int64_t n_weights;      /* elements of the fp32 layout (dt_param.off) */
    void *buffers;
    size_t buffers_bytes;
    int64_t n_buffers;
    int64_t *counts;
    int64_t n_counts;

    int plan_n, plan_h, plan_w; /* the planned batch, the input size the model now runs at */
    int plan_inputs[2][2];  /* the input sizes planned (h, w each; the same twice for one) */
    int plan_rule;          /* enum dt_plan_order (nn/plan.h): 0 the smallest packing, 1..3 force one
                             * (tests check that all give the same numbers) */
    int concat_apart;       /* 1: every concatenation copies its inputs (dt_model_set_concat_in_place) */
    int shapes_only;        /* 1: made by dt_model_create_shapes: layers and parameters' shapes, no storage */
    /* mixed precision (dt_model_set_amp; nn/precision.c): values and parameters the opt level makes
     * reduced are stored in fp16/bf16 and computed in fp32 (the ops widen and round: backend.h);
     * emulated (prec_emulate), they are fp32 arrays rounded to the reduced type after every write,
     * which holds exactly the same numbers. Planning turns that into casts (graph_types.h): forward and
     * backward run them and never ask about the level. */
    int prec_level;         /* 0 (fp32), 1 (conv/linear cast), 2, 3 (reduced model) */
    int prec_bf16;          /* the reduced type: 0 fp16, 1 bf16 */
    int prec_keep_bn_fp32;  /* BN parameters, statistics and compute in fp32 */
    int prec_emulate;       /* 1: the reduced type is emulated in fp32 storage (rounded values), as on a
                             * backend whose storage_types lacks it; set before dt_model_set_amp to
                             * force it (the oracle of the real storage) */
    dt_dtype compute_type;  /* what conv and linear compute in: the reduced type stored for real, else fp32 */
    int params_16;          /* 1 when a trainable parameter is stored in 16 bits (dt_model_set_amp) */
    dt_arena prec_scratch;  /* copies of conv/linear operands and gradients in the compute type */
    dt_cast *casts;         /* every node's casts (dt_node.cast_at), then the loss's (loss_cast_at) */
    int n_casts, loss_cast_at, loss_casts;
    size_t cap_casts;
    /* the step's numbers in backend memory (nn/scalars.h; made by the first plan): xent seeds backward
     * with the loss times its scale_f and writes the loss and hits there; the labels of the batch
     * (backend int32[plan_n]); a host buffer of two dt_scalars for the step's uploads and downloads
     * (backend.h, host_alloc) and the event that orders them */
    dt_scalars *scalars;
    int32_t *labels;
    dt_scalars *host_io;
    dt_event *io_event;
    dt_arena act, grad, workspace; /* activations (and saved state), activation gradients, conv workspace */
    int training;           /* 1: BN uses batch statistics, dropout is active */
    uint64_t dropout_seed;  /* with the step counter, seeds each dropout layer */
    uint64_t step;
    uint64_t step_written;  /* step when the in scalars (their model_step) were last written */
    int profile;            /* DT_PROFILE set (not empty, not 0) at dt_model_begin */
    int profiling;          /* 1: dt_model_prof_mark records (dt_model_begin: profile; the trainer sets it
                             * per step) */
    /* called by dt_model_backward after each node's backward, when set: that node's parameter
     * gradients are final (DDP starts all-reduces from here) */
    void (*on_grads)(void *ctx, int node);
    void *on_grads_ctx;
    /* SyncBN, when set: every training BN sums its statistics over the replicas (backend.h) */
    int (*bn_sync)(void *ctx, double *buf, int n);
    void *bn_sync_ctx;
    struct dt_prof *prof;   /* the profile's timers and totals (profile.c): NULL until its first mark */
} dt_model;

/* An architecture dt_model_create knows (models.c's table; doc/design.md, "Adding a model"). */
typedef struct dt_model_info dt_model_info;
struct dt_model_info {
    const char *name;       /* -a NAME; torchvision's name where torchvision has the model */
    /* adds the layers to m (after dt_model_begin, from m->input) and returns the output value */
    int (*build)(dt_model *m, const dt_model_info *info);
    const int *config;      /* ResNet: blocks per stage; VGG: each conv's channels, 0 for a max pool */
    int config_len;
    int bottleneck;         /* ResNet: Bottleneck blocks (1x1, 3x3, 1x1 x4) instead of BasicBlocks */
    int small_stem;         /* ResNet: a 3x3 stride-1 conv1 and no max pool */
    /* ResNet's Bottleneck as torchvision's groups and width_per_group (0: 1 and 64, a plain ResNet): its
     * 3x3 conv is int(planes * width_per_group / 64) * groups wide, in groups groups (ResNeXt; a wide
     * ResNet: width_per_group 128) */
    int groups, width_per_group;
    int batchnorm;          /* VGG: a BN after every conv */
    /* MobileNet and EfficientNet: which of the family (MobileNetV3: 0 large, 1 small; EfficientNet: 1 V1
     * B0-B7, 2 V2), the width and depth multipliers, the classifier's dropout (ConvNeXt: its stochastic
     * depth probability) and the BN's eps and momentum (0: PyTorch's 1e-5 and 0.1) as torchvision
     * builds them */
    int variant;
    const void *table;      /* a builder's own table (RegNetY: its stages) */
    double width_mult, depth_mult;
    float dropout, bn_eps, bn_momentum;
    int input_size;         /* the height and width it is made for (224: ImageNet, 32: CIFAR) */
    int64_t params;         /* trainable parameters at 3 channels and 1000 classes: torchvision's count
                             * (for resnet8/20/56 and resnet18_small, that of the PyTorch definitions
                             * in tests/fixtures/make_fixtures.py); test_model checks it */
};
/* every architecture, in the order listings use */
extern const dt_model_info dt_models[];
extern const int dt_n_models;
/* The architecture called name, or NULL. */
const dt_model_info *dt_model_lookup(const char *name);
/* Writes the names of dt_models separated by ", " to f, starting a new line (indented by indent
 * spaces) before a line would pass width columns; col is the column f is at. No final newline. */
void dt_model_print_names(FILE *f, int col, int indent, int width);

/* Builds the named architecture for in_c input channels and num_classes outputs. Returns DT_OK,
 * DT_ERR_INPUT after logging an unknown name (with the list of known ones), or DT_ERR_NOMEM. */
int dt_model_create(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be);
/* The same layers and parameters' shapes without their storage (nothing on the backend): for
 * dt_model_check_input before the model is made (milliseconds, where VGG's weights take seconds and
 * a gigabyte); only dt_model_check_input and dt_model_free may be called on it. */
int dt_model_create_shapes(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be);
void dt_model_free(dt_model *m);

/* The fused schedule, before planning: plans every instance of the patterns (DT_FUSE_* bits,
 * nn/backend.h) that the model's backend also names in its fuses as one op each way, the rest as
 * separate ops; returns the patterns applied. Building applies DT_FUSE_ALL. The same numbers in
 * fp32; with reduced storage a fused residual tail rounds once where the three ops round twice, and
 * a fused BN+activation once where the two ops round twice (its backward: the activation's derivative
 * at the unrounded BN output, the product unrounded). */
unsigned dt_model_set_fusion(dt_model *m, unsigned patterns);

/* Concatenations laid out in place, before planning (on after building): an input of a
 * concatenation lives in its channels of the output, written there by its producer and read there by
 * its other readers, when they can (its producer a conv, a pool or another such concatenation; its
 * other readers batch norms, not in a fused residual tail, before the concatenation; its type the
 * output's; storage not emulated); the concatenation then copies nothing. Off (on = 0): every
 * concatenation copies its inputs, the same numbers bit for bit. */
void dt_model_set_concat_in_place(dt_model *m, int on);

/* torchvision's initialisation, drawn from seed; zero_init_residual zeroes each block's last BN weight. */
void dt_model_init_weights(dt_model *m, uint64_t seed, int zero_init_residual);

/* Shapes for input [n, h, w, in_c] and all activation, gradient and workspace memory for batches of
 * up to n; the backend's planning ops (conv_workspace, the *_scratch ops: every node, the loss, and
 * normalize_u8 into the model's input) for n and for each batch size in also[0..n_also) (each 1..n;
 * repeats are fine), the workspace the most any size needs; then the backend's reserve_scratch once.
 * Returns DT_OK; DT_ERR_INPUT when the input is too small for a layer (the layer is named), when a
 * size is outside 1..n, or when a tensor of a batch of n would pass the backend's max_tensor_elems
 * (one line naming the layer and the largest batch that fits); or DT_ERR_NOMEM. A plan made before
 * stays usable when the new one is refused for its input. */
int dt_model_plan_sizes(dt_model *m, int n, int h, int w, const int *also, int n_also);
/* Whether an input of h x w can pass every layer: DT_OK, or DT_ERR_INPUT after the line
 * dt_model_plan_sizes gives (naming the layer). Shapes only: nothing allocated or planned; on a model
 * of dt_model_create_shapes, a size it cannot take is refused before its weights are made (VGG at
 * 28x28 took 5-25 s and a gigabyte to say so). */
int dt_model_check_input(dt_model *m, int h, int w);
/* dt_model_plan_sizes for a second input size as well (validation at another resolution, as
 * torchvision's --val-crop-size): both sizes are checked and planned on the backend, each arena holds
 * what the larger of the two needs, and the model runs at h x w until dt_model_set_input. h2, w2 equal
 * to h, w: dt_model_plan_sizes. */
int dt_model_plan_inputs(dt_model *m, int n, int h, int w, int h2, int w2, const int *also, int n_also);
/* Runs the planned model on inputs of h x w from now on, one of the sizes it was planned for: the
 * shapes and every value's place in the planned arenas (no backend memory is allocated; the same size
 * gives the same places again, so graphs captured at it stay valid). DT_OK, or DT_ERR_INPUT after one
 * line for a size not planned; DT_ERR_NOMEM (host memory for the offsets). */
int dt_model_set_input(dt_model *m, int h, int w);
/* dt_model_plan_sizes for batch n alone */
int dt_model_plan(dt_model *m, int n, int h, int w);
/* The largest batch of h x w images whose every tensor (each node's input and output, for which a
 * backend may make a descriptor; a weight passing limit fits no batch) holds at most limit elements:
 * 0 when not even one image fits; DT_ERR_INPUT after one line when the input is too small for a layer
 * (or h, w or limit is below 1). layer (layer_size bytes, may be NULL) gets the first layer that
 * bounds it, as the model names it ("layer1.0.conv1"; a node without a name is named after the last
 * named node before it: "relu after bn1"). A planned model keeps its plan. */
int64_t dt_model_max_batch(dt_model *m, int h, int w, int64_t limit, char *layer, size_t layer_size);

/* Forward on n <= planned images x [n, h, w, in_c] (the backend's memory: from mem_alloc, filled by
 * normalize_u8 or mem_put); logits afterwards at dt_model_logits. x is read where it is, not copied:
 * it must stay unchanged until dt_model_backward has returned. */
int dt_model_forward(dt_model *m, const float *x, int n);
/* The logits [n, num_classes] of the last forward, in the backend's memory (of the output value's
 * type: reduced under O1-O3 stored for real); dt_model_get_logits copies the first n rows to host
 * memory as fp32. */
void *dt_model_logits(const dt_model *m);
void dt_model_get_logits(const dt_model *m, int n, float *host);
/* Mean softmax cross-entropy of the last forward (label smoothing eps), seeding backward's gradient
 * (times the loss scale in m->scalars), with the host labels copied in first (mem_put) and the loss
 * read back (mem_get): the convenience for tests and tools. Labels outside [0, num_classes) give
 * DT_ERR_INPUT naming the index. */
int dt_model_loss(dt_model *m, const int32_t *labels, int n, float eps, double *loss);
/* DT_ERR_INPUT after one line naming the first of n host labels outside [0, num_classes) */
int dt_model_check_labels(const dt_model *m, const int32_t *labels, int n);

/* --- a step without host round trips (nn/scalars.h) ---
 * dt_model_step_begin(m, lr, step, signal) uploads the step's in scalars from the model's host
 * buffer (the copy queue; the compute queue waits for it); the caller uploads the batch's labels
 * into m->labels itself (or dt_model_upload_labels); dt_model_loss_async then runs the loss on
 * them, leaving the loss and hits in m->scalars; after the optimiser, dt_model_step_out downloads
 * the out part and returns the host copy (the one point where the host waits for the step). */
void dt_model_step_begin(dt_model *m, float lr, int64_t step, int32_t signal);
/* n host labels (checked) into m->labels through the model's host buffer's room: upload on the copy
 * queue, the compute queue waiting for it */
int dt_model_upload_labels(dt_model *m, const int32_t *labels_host, int n);
/* the host-buffer halves of the two (no upload issued): what a replayed step (a captured graph,
 * whose recorded uploads read the host buffer again) needs before it is replayed; they wait for
 * the host buffer's last copy first (event_sync: never inside a capture) */
void dt_model_step_write(dt_model *m, float lr, int64_t step, int32_t signal);
int dt_model_write_labels(dt_model *m, const int32_t *labels_host, int n);
/* The batch whose labels were just written is mixed (mixup, cutmix: dt_scalars.mixing) with
 * (float)lambda and (float)(1 - lambda), or not (mixing 0): into the host buffer, uploaded with the
 * labels (dt_model_labels_upload). */
void dt_model_write_mix(dt_model *m, int mixing, float lam, float rest);
/* and the upload halves (issued only: what a capture keeps): the in scalars, n labels */
void dt_model_step_upload(dt_model *m);
void dt_model_labels_upload(dt_model *m, int n);
int dt_model_loss_async(dt_model *m, int n, float eps);
/* dt_model_step_download issues the out part's download (what a capture keeps), dt_model_step_wait
 * waits for it and returns the host copy; dt_model_step_out does both */
void dt_model_step_download(dt_model *m);
const dt_scalars *dt_model_step_wait(dt_model *m);
const dt_scalars *dt_model_step_out(dt_model *m);
/* the whole block to the host and back (mem_get, mem_put: setup, checkpoints, progress lines),
 * made first when the model has none yet; DT_OK or DT_ERR_NOMEM after one line */
int dt_model_get_scalars(dt_model *m, dt_scalars *host);
int dt_model_put_scalars(dt_model *m, const dt_scalars *host);
/* the metrics part (loss, loss sum, hits, rows) of from into the model's block (mem_put; zeros clear it) */
void dt_model_put_metrics(dt_model *m, const dt_scalars *from);
/* What a training forward and backward count on the host, without running them: each BN's batches
 * tracked, and the model's step (dropout's seeds). For a step launched as a captured graph, which
 * ran their ops but not their host code. */
void dt_model_host_step(dt_model *m);
/* Backward of the last forward: parameter gradients into grads (added when accumulate). */
int dt_model_backward(dt_model *m, int n, int accumulate);

/* Mixed precision at Apex's opt level (0..3) in fp16 or bf16; call once, before dt_model_plan.
 * Decides every value's and parameter's type: O1 stores what conv and linear make (and an in-place
 * ReLU of it) reduced, O2/O3 every value and gradient, and the weights (BN's too unless
 * keep_bn_fp32); a gradient has its value's type. The parameters move to their types now (rounded).
 * Real storage when the backend stores the reduced type (its storage_types), else emulated (and
 * when prec_emulate is set before the call). DT_OK or DT_ERR_NOMEM after one line. */
int dt_model_set_amp(dt_model *m, int level, int bf16, int keep_bn_fp32);
/* Emulation only: rounds every reduced parameter to its type (after an optimiser changed them in
 * fp32 storage); nothing to do with real storage. */
void dt_model_round_params(dt_model *m);
/* 1 when every trainable parameter is stored in fp32: weights and grads are then the flat fp32
 * layout of n_weights floats (dt_param.off) */
static inline int dt_model_params_fp32(const dt_model *m)
{
    return !m->params_16;
}
/* The reduced type (DT_FLOAT16 or DT_BFLOAT16) of a model with mixed precision, else DT_FLOAT32 */
dt_dtype dt_model_reduced_type(const dt_model *m);

/* Sets the probability of every dropout layer (torchvision's default is 0.5). */
void dt_model_set_dropout(dt_model *m, float p);
/* Sets the model's stochastic depth probability: each stochastic depth layer then drops with its
 * depth fraction times p (torchvision's stochastic_depth_prob; EfficientNet's default 0.2). */
void dt_model_set_stochastic_depth(dt_model *m, float p);

/* The profile (DT_PROFILE; doc/dtrain.1 has the report's format). While m->profiling, each kind
 * change is marked with one of the backend's timers on the compute queue (backend.h: device time on
 * CUDA, the host's clock on the CPU), and the time between two marks is the first one's kind's.
 * dt_model_prof_mark: the work issued from here on is kind's (enum dt_prof_kind); nothing unless
 * m->profiling (never while capturing a graph: a profiled step is issued). dt_model_prof_step_end:
 * a profiled step has ended: waits for its last mark and adds the times between its marks to the
 * totals, one step more. dt_model_profile_report: "profile: N steps, ms per step by kind (B
 * timers)", a "kind ms/step share" header, one row per kind marked (the most time first) and
 * "total", to f (the step in progress ended first; "profile: no step was profiled" when none);
 * then the totals are cleared. */
void dt_model_prof_mark(dt_model *m, int kind);
void dt_model_prof_step_end(dt_model *m);
void dt_model_profile_report(dt_model *m, FILE *f);

/* Parameter lookup by state_dict name: index or -1. */
int dt_model_find_param(const dt_model *m, const char *name);
/* 1 for a trainable parameter (a weight or bias, BN's too: it has a gradient and optimiser state) */
static inline int dt_param_trainable(const dt_param *p)
{
    return p->kind == DT_P_WEIGHT || p->kind == DT_P_BIAS || p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS;
}
/* 1 when parameter p is reduced at the model's level (stored so, or emulated): decided by
 * dt_model_set_amp */
static inline int dt_param_reduced(const dt_model *m, const dt_param *p)
{
    (void)m;
    return p->reduced;
}
/* Pointer to a parameter's storage (weights, buffers) and gradient (NULL for buffers), of type
 * p->dtype: the backend's memory (not counts: a BN_COUNT parameter's off indexes counts, on the
 * host). */
void *dt_param_data(const dt_model *m, const dt_param *p);
void *dt_param_grad(const dt_model *m, const dt_param *p);
/* A parameter's values (or gradient: trainable ones) as fp32 to host (p->numel floats), and values
 * from host (rounded to its type). */
void dt_param_get(const dt_model *m, const dt_param *p, float *host);
void dt_param_get_grad(const dt_model *m, const dt_param *p, float *host);
void dt_param_put(const dt_model *m, const dt_param *p, const float *host);
/* Copy between PyTorch layout (src/dst in O,I,KH,KW order for conv weights) and our storage. */
void dt_param_from_torch(const dt_param *p, const float *torch, float *ours);
void dt_param_to_torch(const dt_param *p, const float *ours, float *torch);

/* --- building (models.c's builders use these) ---
 * dt_model_begin makes the graph's input value (m->input); each dt_layer_* call appends one node
 * reading value x (and returns its output value, or -1 with m->build_error set: a chain of calls
 * needs one check, at dt_model_end). Named layers own parameters called "<name>.weight" and so on. */
int dt_model_begin(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be);
/* k x k convolution to oc channels, stride s, zero padding pad; bias as torchvision's bias=True */
int dt_layer_conv(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int bias, enum dt_init init);
/* the same with dilation and groups (ResNeXt, MobileNet: no model here uses them yet) */
int dt_layer_conv_grouped(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int dil, int groups,
                          int bias, enum dt_init init);
int dt_layer_batchnorm(dt_model *m, const char *name, int x);
int dt_layer_relu(dt_model *m, int x);
int dt_layer_maxpool(dt_model *m, int x, int k, int s, int pad);
/* adaptive average pool to oh x ow */
int dt_layer_adaptive_avgpool(dt_model *m, int x, int oh, int ow);
/* [n, h, w, c] -> [n, h*w*c]; must follow an adaptive pool (the feature count cannot depend on the input size) */
int dt_layer_flatten(dt_model *m, int x);
int dt_layer_linear(dt_model *m, const char *name, int x, int out, enum dt_init init_w, enum dt_init init_b);
int dt_layer_dropout(dt_model *m, int x, float p);
/* a + b (a residual connection): the same channels */
int dt_layer_add(dt_model *m, int a, int b);
/* a and b side by side along the channels (torch.cat(dim=1)): [h, w, ca + cb] */
int dt_layer_concat(dt_model *m, int a, int b);
/* nn.AvgPool2d(2, 2) (DenseNet's transitions): planning refuses an odd height or width */
int dt_layer_avgpool2(dt_model *m, int x);
/* layer norm over each position's channels (ConvNeXt's LayerNorm2d on NHWC; weight and bias [c]) */
int dt_layer_layernorm(dt_model *m, const char *name, int x, float eps);
/* nn.Linear on each position's channels of x [h, w, c] (ConvNeXt's pointwise layers): y [h, w, out] */
int dt_layer_linear_rows(dt_model *m, const char *name, int x, int out, enum dt_init init_w, enum dt_init init_b);
/* a trainable per-channel scale <name>.layer_scale of shape [c, 1, 1], every value `value` (made
 * apart from its use, so that it comes where torchvision's state_dict has it): its parameter index */
int dt_param_layer_scale(dt_model *m, const char *name, int c, float value);
/* x times the per-channel parameter param (dt_param_layer_scale) */
int dt_layer_scale(dt_model *m, int x, int param);
/* batch norm with PyTorch's eps and momentum given (dt_layer_batchnorm: 1e-5 and 0.1) */
int dt_layer_batchnorm_eps(dt_model *m, const char *name, int x, float eps, float momentum);
/* an activation (enum dt_act: ReLU6, Hardswish, SiLU, ...); its backward reads its input */
int dt_layer_act(dt_model *m, int x, int act);
/* squeeze-and-excitation's scale: x [h, w, c] times s [1, 1, c] per image (s: a pooled branch of x) */
int dt_layer_chanmul(dt_model *m, int x, int s);
/* stochastic depth (torchvision's StochasticDepth, "row"): each image of x dropped in training with
 * probability depth * p, scaled by 1/(1-that) when kept (seeded as dropout is); depth: the block's
 * place in the network, torchvision's stage_block_id / total_stage_blocks, and p the model's
 * stochastic_depth_prob (dt_model_set_stochastic_depth changes it) */
int dt_layer_sdepth(dt_model *m, int x, float depth, float p);
/* --- ViT (nn.MultiheadAttention and the encoder's tokens). A sequence of s tokens of d features is
 * a value of height 1, width s and d channels, so layer norm and pointwise linear layers run on it
 * as they run on NHWC positions. */
/* a trainable parameter called name (exactly), of PyTorch's shape[ndim], initialised by init (value:
 * init_value's), made where torchvision's state_dict has it: its index (ViT's class_token,
 * encoder.pos_embedding) */
int dt_param_new(dt_model *m, const char *name, int ndim, const int *shape, enum dt_init init, float init_value);
/* dt_layer_linear_rows with the weight and bias called <name>.<wleaf> and <name>.<bleaf>
 * (nn.MultiheadAttention's in_proj_weight, in_proj_bias) */
int dt_layer_linear_rows_as(dt_model *m, const char *name, const char *wleaf, const char *bleaf, int x, int out,
                            enum dt_init init_w, enum dt_init init_b);
/* ViT's tokens: the patches x [gh, gw, d] (conv_proj's output) into a sequence [1, 1 + gh*gw, d]: the
 * class token (parameter cls, [1, 1, d]) first, then the patches row by row, plus the position
 * embedding (parameter pos, [1, s, d]; its s fixes the input size planning accepts) */
int dt_layer_tokens(dt_model *m, const char *name, int x, int cls, int pos);
/* self-attention's core on a sequence of qkv [1, s, 3d] (in_proj's output): [1, s, d], heads heads
 * (backend.h's attn_fwd) */
int dt_layer_attention(dt_model *m, const char *name, int qkv, int heads);
/* the first token of a sequence [1, s, d]: [1, 1, d] (ViT's x[:, 0], the class token's features) */
int dt_layer_token0(dt_model *m, int x);
/* Finishes building: the memory analysis (model.h's top), then parameter storage (zero-filled).
 * DT_OK or the first builder error. */
int dt_model_end(dt_model *m, int output);

#ifdef __cplusplus
}
#endif
#endif
