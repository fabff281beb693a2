/* graph_types.h: a model's graph as data: the table of node kinds (DT_KINDS), and the parameters, values
 * and nodes a model is made of (model.h has the model and its life cycle; nn/layer.h what a node
 * kind's family file needs to run one).
 *
 * Adding a node kind (doc/design.md, "Adding a node kind"): one line in DT_KINDS, its family file
 * under nn/layers/ (its dt_kind: shape rule, saved state, backend planning, forward, backward, what
 * backward reads, O1's rule), its dt_layer_* builder in graph.c, and its tests. */
#ifndef DT_NN_GRAPH_TYPES_H
#define DT_NN_GRAPH_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every node kind, once: X(KIND, "name", family) gives the enum's DT_OP_KIND, the name the profile
 * and messages use, and the kind's entry in the table (nn/layers/kinds.c): the dt_kind called
 * dt_kind_<family>_<KIND>, which the family's file nn/layers/<family>.c defines */
#define DT_KINDS(X)                                                                                                    \
    X(CONV, "conv", conv)                                                                                              \
    X(BN, "batchnorm", bn)                                                                                             \
    X(RELU, "relu", act)                                                                                               \
    X(MAXPOOL, "maxpool", pool)                                                                                        \
    X(AVGPOOL, "avgpool", pool)                                                                                        \
    X(LINEAR, "linear", linear)                                                                                        \
    X(DROPOUT, "dropout", eltwise)                                                                                     \
    X(FLATTEN, "flatten", layout)                                                                                      \
    X(ADD, "add", eltwise)                                                                                             \
    X(ACT, "act", act)                                                                                                 \
    X(CHANMUL, "chanmul", eltwise)                                                                                     \
    X(SDEPTH, "sdepth", eltwise)                                                                                       \
    X(LN, "layernorm", ln)                                                                                             \
    X(SCALE, "scale", eltwise)                                                                                         \
    X(CONCAT, "concat", layout)                                                                                        \
    X(TOKENS, "tokens", attn)                                                                                          \
    X(ATTN, "attention", attn)                                                                                         \
    X(TOKEN0, "token0", layout)

#define DT_KIND_ENUM_(kind, name, family) DT_OP_##kind,
enum dt_op_kind { DT_KINDS(DT_KIND_ENUM_) DT_OP_KINDS };
#undef DT_KIND_ENUM_

/* --- precision, as planned (nn/precision.c decides it with the plan; forward and backward only run
 * it: nn/layer.h). A node's casts are copies and roundings around its op, in the phases below; a
 * conv or linear node reads an operand where operand[] says and writes a gradient where result[]
 * says (a copy in the compute type in the mixed-precision scratch, or, when .space is DT_AT_OWN, the
 * tensor itself). */
enum dt_at_space { DT_AT_OWN, DT_AT_ACT, DT_AT_GRAD, DT_AT_PARAM, DT_AT_PGRAD, DT_AT_SCRATCH };
/* a size in elements at a batch of n: k times value v's elements (v < 0: none) plus fixed */
typedef struct dt_extent {
    int v, k;
    int64_t fixed;
} dt_extent;
/* a tensor: value idx's activation or gradient, parameter idx's data or gradient, or the scratch
 * from `at` elements of the compute type on */
typedef struct dt_at {
    int space, idx;
    dt_extent at;
} dt_at;
enum dt_cast_kind { DT_CAST_COPY, DT_CAST_ROUND };
enum dt_cast_when { DT_WHEN_ALWAYS, DT_WHEN_TRAINING, DT_WHEN_GRAD_WRITTEN };
/* what a copy into a gradient adds to: nothing, the backward pass's accumulate, or the input
 * gradient's own (written already this pass) */
enum dt_cast_acc { DT_ACC_NONE, DT_ACC_PASS, DT_ACC_DX };
/* COPY: count elements from src (type st) to dst (type dt), added to dst as acc says; ROUND: dst
 * rounded in place to the reduced type (the emulation of reduced storage). when: always, in
 * training only, or when dst's value has its gradient written this pass. */
typedef struct dt_cast {
    int kind, when, acc;
    dt_at src, dst;
    dt_dtype st, dt;
    dt_extent count;
} dt_cast;
enum dt_phase { DT_PH_FWD_PRE, DT_PH_FWD_POST, DT_PH_BWD_PRE, DT_PH_BWD_MID, DT_PH_BWD_POST, DT_PHASES };
enum dt_operand { DT_X, DT_W, DT_B, DT_OPERANDS };

/* how a parameter is initialised (torchvision's rules, per architecture) */
enum dt_init { DT_INIT_ZEROS, DT_INIT_ONES, DT_INIT_KAIMING_FAN_OUT, DT_INIT_TORCH_DEFAULT, DT_INIT_NORMAL_001,
               DT_INIT_KAIMING_FAN_IN, /* kaiming_normal_ with its default mode: std sqrt(2/fan_in) (DenseNet) */
               DT_INIT_UNIFORM_FAN_OUT, /* U(-1/sqrt(fan_out), +): EfficientNet's linear layers */
               DT_INIT_TRUNC_NORMAL_002, /* trunc_normal_(std 0.02), cut at +-2: ConvNeXt's and ViT's */
               DT_INIT_CONSTANT, /* dt_param.init_value: ConvNeXt's layer scale */
               DT_INIT_NORMAL_STD, /* normal_(std = dt_param.init_value): ViT's position embedding, MLP biases */
               DT_INIT_XAVIER_UNIFORM, /* U(-a, a), a = sqrt(6 / (fan_in + fan_out)): ViT's attention and MLP */
               DT_INIT_TRUNC_NORMAL_FAN_IN /* trunc_normal_(std sqrt(1/fan_in)), cut at +-2: ViT's conv_proj */ };

enum dt_param_kind { DT_P_WEIGHT, DT_P_BIAS, DT_P_BN_WEIGHT, DT_P_BN_BIAS, DT_P_BN_MEAN, DT_P_BN_VAR, DT_P_BN_COUNT };

#define DT_NAME_MAX 96

typedef struct dt_param {
    char name[DT_NAME_MAX]; /* state_dict name, e.g. "layer1.0.conv1.weight" */
    enum dt_param_kind kind;
    int ndim;
    int shape[4];           /* PyTorch's shape */
    int ohwi;               /* 1: stored O,KH,KW,I (a conv weight) */
    int64_t numel;
    int64_t off;            /* index into the fp32 layout of the trainable parameters (momentum, master
                             * weights; n_weights elements, each tensor 64-byte aligned), into buffers'
                             * elements, or into counts */
    size_t boff;            /* byte offset in weights and grads (trainable) or buffers, as stored */
    dt_dtype dtype;         /* the storage type of the data and of the gradient (model.h: mixed precision) */
    int reduced;            /* 1 when the opt level reduces it (stored so, or emulated): dt_model_set_amp */
    int fan_in, fan_out;    /* for initialisation */
    enum dt_init init;
    float init_value;       /* DT_INIT_CONSTANT's value */
    int zero_init;          /* the last BN weight of a residual block (zero_init_residual) */
} dt_param;

typedef struct dt_value {
    int channels;           /* features after flatten */
    int height, width;      /* per image, set by planning */
    int producer;           /* node index, -1 for the model input */
    size_t act_off;         /* data offset in the activation arena */
    size_t grad_off;        /* gradient offset in the gradient arena */
    int grad_ready;         /* backward bookkeeping: gradient written this pass */
    int consumers;          /* nodes reading this value */
    int act_alias;          /* value whose activation memory this one reuses (an in-place ReLU), or -1 */
    dt_dtype dtype;         /* the storage type of the activation and of its gradient */
    int reduced;            /* 1 when the opt level stores it in the reduced type (whether or not the
                             * model emulates that: then dtype is fp32 and the values are rounded) */
    int grad_alias;         /* value whose gradient memory this one's gradient is (an add's input), or -1 */
    int place_in;           /* a concatenation laid out in place (planning): the concatenation's output in
                             * whose channels this input's activation and gradient live, or -1 */
    int place_off;          /* ... from this channel of it on */
    int ld;                 /* planning: elements from one position's channels to the next's (channels,
                             * or the channels of the outermost value it is laid in) */
} dt_value;

/* what dt_node.param[] holds, by position: conv and linear use WEIGHT and BIAS, batch norm all five */
enum dt_node_param { DT_NODE_WEIGHT, DT_NODE_BIAS, DT_NODE_RUNNING_MEAN, DT_NODE_RUNNING_VAR,
                     DT_NODE_BATCHES_TRACKED, DT_NODE_PARAMS };

typedef struct dt_node {
    enum dt_op_kind op;
    char name[DT_NAME_MAX]; /* module name, e.g. "layer1.0.bn1" */
    int in0, in1, out;      /* value indices (in1 only for ADD, CONCAT and CHANMUL: the scale) */
    /* (TOKENS: param[WEIGHT] is the class token, param[BIAS] the position embedding) */
    int param[DT_NODE_PARAMS]; /* parameter indices (enum dt_node_param), -1 when absent */
    struct {                /* the op's settings */
        int kernel, stride, pad, dilation, groups; /* conv; maxpool (kernel, stride, pad); attention: groups
                                                    * is its heads */
        int has_bias;                     /* conv, linear */
        int pointwise;                    /* linear: on every position's channels (NHWC rows), not flattened */
        int out_h, out_w;                 /* adaptive average pool (kernel 2: a 2x2 stride-2 pool instead) */
        float eps, momentum;              /* batch norm; layer norm's eps */
        float drop_prob;                  /* dropout's or stochastic depth's probability */
        int act;                          /* the activation (enum dt_act) of an act node */
        float depth;                      /* stochastic depth: the block's depth fraction (dt_layer_sdepth) */
        int fused_relu;                   /* BN: the in-place ReLU node fused into it, or -1 */
        int fused_act;                    /* BN: the activation node (DT_OP_ACT) fused into it, or -1 */
        int fused_into_bn;                /* ReLU or activation: runs inside the BN before it (or a ReLU
                                           * inside its tail's add) */
        /* a residual block's tail BN -> add -> in-place ReLU run as one op (bn_add_relu_*) at the
         * add's turn, each way: the add's BN node and its ReLU node (-1 when not fused); the BN's
         * own turn does nothing (fused_tail on the BN: its add) */
        int tail_bn, tail_relu, fused_tail;
    } attr;
    size_t save_off;        /* saved state in the activation arena (BN mean/invstd, argmax, mask) */
    /* precision (planned): where a conv or linear node reads x, w, b (enum dt_operand) and writes their
     * gradients, and its casts: cast[phase] from index cast_at[phase] in the model's casts */
    dt_at operand[DT_OPERANDS], result[DT_OPERANDS];
    int cast_at[DT_PHASES], casts[DT_PHASES];
} dt_node;

#ifdef __cplusplus
}
#endif
#endif
