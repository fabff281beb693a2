/* compare.c FIXTURE.h5: our engine against PyTorch. Loads the fixture's initial weights, runs the
 * fixture's two SGD steps on its batch and compares, per tensor, with what PyTorch computed:
 * logits and loss (norm-wise relative error under 1e-4), every parameter gradient and every weight and
 * BN statistic after each step (under 1e-3), num_batches_tracked exactly.
 *
 * Errors are norm-wise relative, |ours - ref| / |ref|. The gradient of a conv bias followed by BN
 * is zero in exact arithmetic (PyTorch's is rounding noise): there ours must be under 1e-5 of the
 * norm of the conv weight's gradient, and the bias after a step must be within 1e-6 (RMS) of PyTorch's. When the fixture has float64 results (/fp64: resnet50 and resnet20, whose fp32 gradients are
 * ill-conditioned at initialisation: PyTorch's own fp32 result is up to 5e-2 from its fp64 one), the
 * reference is the float64 result and each tensor's tolerance is the larger of the base tolerance
 * and 10x PyTorch's own fp32-vs-fp64 error for that tensor: two fp32 implementations with different
 * summation orders, each compared with the exact answer.
 *
 * Kinks: an input of a ReLU within rounding error of zero can fall on the other side of zero in our
 * fp32 forward than in PyTorch's (a "flip"): every gradient upstream of that ReLU then legitimately
 * differs (measured: 3e-2 on a BN bias after one flip of an input of 3e-7). The same holds at ReLU6's
 * kinks (0, 6) and Hardswish's and Hardsigmoid's (-3, 3). The fixture lists the inputs of these
 * activations within 1e-4 RMS of a kink (/kinks1, /kinks2); where ours is on the other side of it,
 * the parameters of the layers before that activation are held to KINK_TOL instead, and the test
 * says so.
 *
 * Step 2 starts from PyTorch's state after step 1 (weights, BN buffers, momentum buffer), so that it
 * tests the momentum update from a common start whatever step 1's flips did. A fixture trained with
 * AdamW (opt "adamw") keeps our two moments after step 1 instead (the fixture does not hold
 * torch's): they come from step 1's gradients, checked above. */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "nn/state.h"
#include "../unit/tap.h"
#include "train/optim.h"
#include "util/arena.h"
#include "util/check.h"
#include "util/h5.h"
#include "util/log.h"

#define KINK_TOL 0.2

static hid_t fix;
static const char *path;
static int has_fp64;
static int relaxed_below = -1; /* parameters of nodes before this one are upstream of a kink flip */

static double err_rel(const double *a, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* the gradient of a conv bias whose output goes straight into BN is zero in exact arithmetic (BN
 * removes any per-channel constant): returns the conv weight's parameter index, or -1 */
static int zero_grad_bias(const dt_model *m, int param)
{
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (nd->op != DT_OP_CONV || nd->param[DT_NODE_BIAS] != param)
            continue;
        for (int k = i + 1; k < m->n_nodes; k++)
            if (m->nodes[k].in0 == nd->out || m->nodes[k].in1 == nd->out)
                return m->nodes[k].op == DT_OP_BN ? nd->param[DT_NODE_WEIGHT] : -1;
    }
    return -1;
}

static double norm(const float *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return sqrt(s);
}

/* a numeric root attribute read as memory type mt into v */
static int attr_num(const char *name, hid_t mt, void *v)
{
    hid_t a = H5Aopen(fix, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    int rc = H5Aread(a, mt, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

static int attr_int(const char *name, long long *v)
{
    return attr_num(name, H5T_NATIVE_LLONG, v);
}

static int attr_double(const char *name, double *v)
{
    return attr_num(name, H5T_NATIVE_DOUBLE, v);
}

static int attr_str(const char *name, char *buf, size_t n)
{
    hid_t a = H5Aopen(fix, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t t = H5Aget_type(a), mt = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mt, H5Tget_cset(t)); /* h5py writes UTF-8 */
    int rc = -1;
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        H5Tset_size(mt, H5T_VARIABLE);
        if (H5Aread(a, mt, &s) >= 0 && s) {
            snprintf(buf, n, "%s", s);
            H5free_memory(s);
            rc = 0;
        }
    } else {
        size_t sz = H5Tget_size(t);
        char *s = calloc(sz + 1, 1);
        H5Tset_size(mt, sz + 1);
        if (s && H5Aread(a, mt, s) >= 0) {
            snprintf(buf, n, "%s", s);
            rc = 0;
        }
        free(s);
    }
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* ours (float, torch layout) vs group/name, and PyTorch's fp32-vs-fp64 spread when there is fp64 */
static double compare(const char *group, const char *name, const float *ours, int ndim, const int64_t *shape, int64_t n,
                      double *spread)
{
    char path32[256], path64[300];
    snprintf(path32, sizeof path32, "%s%s%s", group, group[0] ? "/" : "", name);
    snprintf(path64, sizeof path64, "fp64/%s", path32);
    double *r32 = malloc((size_t)n * sizeof(double)), *r64 = malloc((size_t)n * sizeof(double)),
           *o = malloc((size_t)n * sizeof(double));
    double e = INFINITY;
    *spread = 0;
    for (int64_t i = 0; i < n; i++)
        o[i] = ours[i];
    if (dt_h5_read_doubles(fix, path, path32, ndim, shape, r32) == DT_OK) {
        if (has_fp64 && dt_h5_read_doubles(fix, path, path64, ndim, shape, r64) == DT_OK) {
            *spread = err_rel(r32, r64, n);
            e = err_rel(o, r64, n);
        } else if (!has_fp64) {
            e = err_rel(o, r32, n);
        }
    }
    free(r32);
    free(r64);
    free(o);
    return e;
}

/* the node that owns parameter i */
static int param_node(const dt_model *m, int i)
{
    for (int k = 0; k < m->n_nodes; k++)
        for (int j = 0; j < DT_NODE_PARAMS; j++)
            if (m->nodes[k].param[j] == i)
                return k;
    return -1;
}

/* The kinks of node nd's activation into points (when not NULL): how many it has, 0 for a node that
 * is no piecewise activation (make_fixtures.py's KINKS, in the same order of calls) */
static int kink_points(const dt_node *nd, double *points)
{
    static const double relu[] = {0}, relu6[] = {0, 6}, hard[] = {-3, 3};
    const double *p = NULL;
    int n = 0;
    if (nd->op == DT_OP_RELU) {
        p = relu;
        n = 1;
    } else if (nd->op == DT_OP_ACT && nd->attr.act == DT_ACT_RELU6) {
        p = relu6;
        n = 2;
    } else if (nd->op == DT_OP_ACT && (nd->attr.act == DT_ACT_HARDSWISH || nd->attr.act == DT_ACT_HARDSIGMOID)) {
        p = hard;
        n = 2;
    }
    for (int i = 0; points && i < n; i++)
        points[i] = p[i];
    return n;
}

/* After a forward: which recorded inputs near a kink are on its other side in ours. Moves
 * relaxed_below to the deepest ReLU with a flip. Returns the number of flips, -1 on a bad fixture. */
static int check_kinks(const dt_model *m, const char *name)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s%s", has_fp64 ? "fp64/" : "", name);
    hid_t ds = H5Dopen2(fix, nm, H5P_DEFAULT);
    if (ds < 0)
        return -1;
    long long calls = -1;
    hid_t a = H5Aopen(ds, "relu_calls", H5P_DEFAULT);
    if (a >= 0) {
        H5Aread(a, H5T_NATIVE_LLONG, &calls);
        H5Aclose(a);
    }
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    double *rows = malloc((size_t)(dims[0] * 3 + 1) * sizeof(double));
    if (dims[0])
        H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows);
    H5Dclose(ds);
    int relu[512], nr = 0;
    for (int k = 0; k < m->n_nodes && nr < 512; k++)
        if (kink_points(&m->nodes[k], NULL))
            relu[nr++] = k;
    int flips = 0;
    if (calls != nr) {
        tap_diag("%s: the fixture has %lld ReLU calls, the model %d", name, calls, nr);
        free(rows);
        return -1;
    }
    for (hsize_t r = 0; r < dims[0]; r++) {
        int call = (int)rows[3 * r];
        int64_t at = (int64_t)rows[3 * r + 1];
        const dt_node *nd = &m->nodes[relu[call]];
        float ours;
        if (nd->attr.fused_into_bn) { /* its output is not kept: recompute BN's pre-ReLU value as the BN does */
            const dt_node *bn = &m->nodes[m->values[nd->in0].producer];
            const dt_value *xv = &m->values[bn->in0]; /* rows of ld elements (a concatenation's first channels) */
            const float *x = dt_arena_at(&m->act, xv->act_off), *saved = dt_arena_at(&m->act, bn->save_off);
            int c = xv->channels, j = (int)(at % c);
            ours = x[at / c * xv->ld + j] * saved[2 * c + j] + saved[3 * c + j];
        } else { /* an in-place ReLU has overwritten its input with max(0, x): the same "> 0" as x */
            const float *x = dt_arena_at(&m->act, m->values[nd->in0].act_off);
            ours = x[at];
        }
        /* the side of the kink nearest to PyTorch's value */
        double points[2], ref = rows[3 * r + 2], at_kink = 0;
        int np = kink_points(nd, points);
        for (int q = 0; q < np; q++)
            if (q == 0 || fabs(ref - points[q]) < fabs(ref - at_kink))
                at_kink = points[q];
        if ((ours > at_kink) != (ref > at_kink)) {
            flips++;
            tap_diag("%s: activation input %lld before node %d (after %s) is %.3g here, %.3g in PyTorch: a kink flip", name,
                     (long long)at, relu[call], m->nodes[relu[call] - 1].name, ours, rows[3 * r + 2]);
            if (relu[call] > relaxed_below)
                relaxed_below = relu[call];
        }
    }
    free(rows);
    return flips;
}

/* every gradient (what = "grads") or every state entry (what = "after1"/"after2") */
static void compare_all(dt_model *m, const char *what, double base_tol)
{
    int grads = strcmp(what, "grads") == 0, n = 0, bad = 0;
    double worst = -1, worst_tol = base_tol, max_spread = 0;
    const char *worst_name = "";
    float *tmp = NULL;
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (grads && !dt_param_trainable(p))
            continue;
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        if (p->kind == DT_P_BN_COUNT) {
            long long want = -1;
            char nm[256];
            snprintf(nm, sizeof nm, "%s/%s", what, p->name);
            hid_t ds = H5Dopen2(fix, nm, H5P_DEFAULT);
            if (ds >= 0) {
                H5Dread(ds, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &want);
                H5Dclose(ds);
            }
            n++;
            if (want != m->counts[p->off]) {
                bad++;
                tap_diag("%s %s: %lld, PyTorch %lld", what, p->name, (long long)m->counts[p->off], want);
            }
            continue;
        }
        int wz = zero_grad_bias(m, i);
        if (wz >= 0 && !grads) { /* it stays where it was but for rounding noise times lr: absolute check */
            tmp = realloc(tmp, (size_t)p->numel * sizeof(float));
            dt_param_to_torch(p, dt_param_data(m, p), tmp);
            double rn = 0;
            char nm[300];
            double *ref = malloc((size_t)p->numel * sizeof(double));
            snprintf(nm, sizeof nm, "%s%s/%s", has_fp64 ? "fp64/" : "", what, p->name);
            if (dt_h5_read_doubles(fix, path, nm, p->ndim, shape, ref) == DT_OK)
                for (int64_t j = 0; j < p->numel; j++)
                    rn += (tmp[j] - ref[j]) * (tmp[j] - ref[j]);
            free(ref);
            n++;
            if (!(sqrt(rn) <= 1e-6 * sqrt((double)p->numel))) {
                bad++;
                tap_diag("%s %s: differs by %.2e (RMS), allowed 1e-6 for a bias with zero gradient", what, p->name,
                         sqrt(rn / p->numel));
            }
            continue;
        }
        if (wz >= 0) {
            const dt_param *wp = &m->params[wz];
            double own = norm(dt_param_grad(m, p), p->numel), wn = norm(dt_param_grad(m, wp), wp->numel);
            n++;
            if (!(own <= 1e-5 * wn)) {
                bad++;
                tap_diag("%s %s: norm %.2e, expected zero (under 1e-5 of %s's %.2e)", what, p->name, own, wp->name, wn);
            }
            continue;
        }
        tmp = realloc(tmp, (size_t)p->numel * sizeof(float));
        dt_param_to_torch(p, grads ? dt_param_grad(m, p) : dt_param_data(m, p), tmp);
        double spread;
        double e = compare(what, p->name, tmp, p->ndim, shape, p->numel, &spread);
        double tol = fmax(base_tol, 10 * spread);
        if (param_node(m, i) < relaxed_below)
            tol = fmax(tol, KINK_TOL);
        max_spread = fmax(max_spread, spread);
        n++;
        if (!(e <= tol)) {
            bad++;
            tap_diag("%s %s: error %.2e over tolerance %.2e", what, p->name, e, tol);
        } else if (getenv("DT_TEST_VERBOSE")) {
            tap_diag("%s %s: error %.2e (tolerance %.2e)", what, p->name, e, tol);
        }
        if (worst < 0 || e / tol > worst / worst_tol) { /* the closest to its tolerance */
            worst = e;
            worst_tol = tol;
            worst_name = p->name;
        }
    }
    free(tmp);
    TAP_OK(bad == 0, "%s: %d tensors within tolerance; nearest to it %s %.2e (tolerance %.2e)%s", what, n, worst_name,
           worst, worst_tol, has_fp64 ? "; reference float64" : "");
    if (has_fp64)
        tap_diag("  PyTorch's own fp32-vs-fp64 error in %s reaches %.2e", what, max_spread);
}

/* PyTorch's state after step 1: after1 for weights and buffers, grads + wd*params for momentum
 * (each parameter's wd: its group's; the grads times clip_coef1, step 1's clipping factor, when
 * the fixture clips) */
static int start_step2(dt_model *m, dt_optim *opt, double clip_coef1)
{
    if (opt->kind != DT_OPT_SGD) { /* weights and buffers only: the moments stay ours */
        char an[300];
        snprintf(an, sizeof an, "%safter1", has_fp64 ? "fp64/" : "");
        hid_t ga = H5Gopen2(fix, an, H5P_DEFAULT);
        if (ga < 0)
            return DT_ERR_INPUT;
        int rc = dt_model_load_state(m, ga, path);
        H5Gclose(ga);
        return rc;
    }
    const char *pre = has_fp64 ? "fp64/" : "";
    char nm[300];
    snprintf(nm, sizeof nm, "%safter1", pre);
    hid_t g = H5Gopen2(fix, nm, H5P_DEFAULT);
    if (g < 0)
        return DT_ERR_INPUT;
    int rc = dt_model_load_state(m, g, path);
    H5Gclose(g);
    for (int i = 0; i < m->n_params && rc == DT_OK; i++) {
        const dt_param *p = &m->params[i];
        if (!dt_param_trainable(p))
            continue;
        int64_t shape[4];
        for (int d = 0; d < p->ndim; d++)
            shape[d] = p->shape[d];
        double *gr = malloc((size_t)p->numel * sizeof(double)), *pa = malloc((size_t)p->numel * sizeof(double));
        float *buf = malloc((size_t)p->numel * sizeof(float));
        char gn[300];
        snprintf(gn, sizeof gn, "%sgrads/%s", pre, p->name);
        snprintf(nm, sizeof nm, "params/%s", p->name);
        rc = dt_h5_read_doubles(fix, path, gn, p->ndim, shape, gr);
        if (rc == DT_OK)
            rc = dt_h5_read_doubles(fix, path, nm, p->ndim, shape, pa);
        const double wd = dt_optim_decay_of(opt, p);
        for (int64_t j = 0; rc == DT_OK && j < p->numel; j++)
            buf[j] = (float)((float)(gr[j] * clip_coef1) + wd * pa[j]); /* the first step sets buf = g + wd*p */
        if (rc == DT_OK)
            dt_param_from_torch(p, buf, opt->momentum_buf + p->off);
        free(gr);
        free(pa);
        free(buf);
    }
    return rc;
}

static int step(dt_model *m, const float *x, const int32_t *labels, int n, float eps, double *loss)
{
    DT_TRY(dt_model_forward(m, x, n));
    DT_TRY(dt_model_loss(m, labels, n, eps, loss));
    DT_TRY(dt_model_backward(m, n, 0));
    return DT_OK;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: compare FIXTURE.h5\n");
        return 2;
    }
    path = argv[1];
    dt_log_init();
    dt_check_hdf5_init();
    dt_cpu_set_threads(0);
    fix = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fix < 0) {
        TAP_OK(0, "open %s", path);
        return tap_done();
    }
    char arch[64] = "", schema[64] = "";
    long long batch = 0, c = 0, h = 0, w = 0, k = 0, version = 0, nesterov = 0;
    double eps = 0, lr = 0, mom = 0, wd = 0;
    int attrs = attr_str("schema", schema, sizeof schema) == 0 && attr_int("version", &version) == 0 &&
                attr_str("arch", arch, sizeof arch) == 0 && attr_int("batch", &batch) == 0 &&
                attr_int("in_channels", &c) == 0 && attr_int("height", &h) == 0 && attr_int("width", &w) == 0 &&
                attr_int("num_classes", &k) == 0 && attr_double("label_smoothing", &eps) == 0 &&
                attr_double("lr", &lr) == 0 && attr_double("momentum", &mom) == 0 &&
                attr_double("weight_decay", &wd) == 0 && attr_int("nesterov", &nesterov) == 0;
    if (!TAP_OK(attrs && strcmp(schema, "dtrain-fixture") == 0 && version == 1,
                "%s: a dtrain-fixture version 1 for %s, batch %lld of %lldx%lldx%lld, %lld classes", path, arch, batch,
                h, w, c, k))
        return tap_done();
    has_fp64 = H5Lexists(fix, "fp64", H5P_DEFAULT) > 0;

    dt_model m;
    dt_optim opt;
    /* planned unfused: every ReLU's input is then kept for check_kinks (a fused residual tail keeps
     * neither the BN's output nor the add's, and reading its place found garbage "flips" that
     * relaxed the tolerances upstream); test_fusion shows the fused schedule equals this one bit
     * for bit in fp32 */
    int created = dt_model_create(&m, arch, (int)c, (int)k, &dt_backend_cpu) == DT_OK;
    if (created)
        dt_model_set_fusion(&m, 0);
    if (!TAP_OK(created && dt_model_plan(&m, (int)batch, (int)h, (int)w) == DT_OK,
                "build and plan %s", arch))
        return tap_done();
    dt_model_set_dropout(&m, 0.0f); /* the fixtures run without dropout: its masks cannot match */
    dt_model_set_stochastic_depth(&m, 0.0f); /* nor stochastic depth */
    hid_t params = H5Gopen2(fix, "params", H5P_DEFAULT);
    TAP_OK(params >= 0 && dt_model_load_state(&m, params, path) == DT_OK,
           "initial state_dict loads: every name and shape matches torchvision's");
    if (params >= 0)
        H5Gclose(params);

    int64_t nx = batch * h * w * c, shp_x[4] = {batch, h, w, c}, shp_l[1] = {batch}, shp_z[2] = {batch, k};
    float *x = malloc((size_t)nx * sizeof(float));
    double *lab = malloc((size_t)batch * sizeof(double));
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    int ok = dt_h5_read_floats(fix, path, "input", 4, shp_x, x) == DT_OK &&
             dt_h5_read_doubles(fix, path, "labels", 1, shp_l, lab) == DT_OK;
    for (long long i = 0; i < batch; i++)
        labels[i] = (int32_t)lab[i];
    TAP_OK(ok, "input and labels");
    dt_optim_init(&opt, &m, (float)lr, (float)mom, 0.0f, (float)wd, (int)nesterov, 0);
    double norm_wd = NAN, bias_wd = NAN; /* torchvision's parameter groups, when the fixture has them */
    if (H5Aexists(fix, "norm_weight_decay") > 0)
        attr_double("norm_weight_decay", &norm_wd);
    if (H5Aexists(fix, "bias_weight_decay") > 0)
        attr_double("bias_weight_decay", &bias_wd);
    dt_optim_set_group_decay(&opt, (float)norm_wd, (float)bias_wd);
    if (!isnan(norm_wd) || !isnan(bias_wd))
        tap_diag("parameter groups: norm weight decay %g, bias weight decay %g", norm_wd, bias_wd);
    double clip = 0, clip_coef1 = 1; /* torch.nn.utils.clip_grad_norm_, when the fixture clips */
    char optname[16] = "sgd";
    if (H5Aexists(fix, "opt") > 0 && dt_h5_attr_read_str(fix, path, "opt", optname, sizeof optname) != DT_OK)
        TAP_OK(0, "the fixture's optimizer cannot be read");
    const int adamw = !strcmp(optname, "adamw");
    double opt_eps = 1e-8;
    if (adamw) {
        attr_double("opt_eps", &opt_eps);
        TAP_OK(dt_optim_use_adam(&opt, &m, 0.9, 0.999, opt_eps, 1) == DT_OK, "torch.optim.AdamW, eps %g, lr %g", opt_eps,
               lr);
    }
    if (H5Aexists(fix, "clip_grad_norm") > 0 && attr_double("clip_grad_norm", &clip) == 0 &&
        attr_double("clip_coef1", &clip_coef1) == 0) {
        TAP_OK(dt_optim_set_clip(&opt, &m, (float)clip) == DT_OK && clip_coef1 < 1,
               "clipping the gradients' norm to %g (PyTorch's step 1 clipped them by %.6f)", clip, clip_coef1);
    }

    double loss = 0, spread = 0, ref_loss = 0, ref_loss2 = 0;
    int64_t none[1] = {0};
    dt_model_step_begin(&m, (float)lr, 0, 0);
    ok = step(&m, x, labels, (int)batch, (float)eps, &loss) == DT_OK;
    double el = compare("", "logits", dt_model_logits(&m), 2, shp_z, batch * k, &spread);
    dt_h5_read_doubles(fix, path, has_fp64 ? "fp64/loss" : "loss", 0, none, &ref_loss);
    TAP_OK(ok && el < fmax(1e-4, 10 * spread) && fabs(loss - ref_loss) / fabs(ref_loss) < 1e-4,
           "step 1: logits error %.2e, loss %.7f (PyTorch %.7f)", el, loss, ref_loss);
    int flips = check_kinks(&m, "kinks1"), flips1 = flips;
    TAP_OK(flips >= 0, "step 1: %d of the near-zero ReLU inputs flipped%s", flips,
           flips > 0 ? "; upstream parameters held to 0.2" : "");
    compare_all(&m, "grads", 1e-3);
    dt_optim_step(&opt, &m, NULL);
    compare_all(&m, "after1", 1e-3);

    TAP_OK(start_step2(&m, &opt, clip_coef1) == DT_OK, "step 2 starts from PyTorch's weights, buffers and momentum after step 1");
    relaxed_below = -1;
    dt_model_step_begin(&m, (float)lr, 1, 0);
    ok = step(&m, x, labels, (int)batch, (float)eps, &loss) == DT_OK;
    flips = check_kinks(&m, "kinks2");
    TAP_OK(flips >= 0, "step 2: %d of the near-zero ReLU inputs flipped%s", flips,
           flips > 0 ? "; upstream parameters held to 0.2" : "");
    double torch_loss2 = 0;
    dt_h5_read_doubles(fix, path, "loss2", 0, none, &torch_loss2);
    dt_h5_read_doubles(fix, path, has_fp64 ? "fp64/loss2" : "loss2", 0, none, &ref_loss2);
    double tol2 = fmax(1e-4, has_fp64 ? 10 * fabs(torch_loss2 - ref_loss2) / fabs(ref_loss2) : 0);
    (void)flips1;
    TAP_OK(ok && fabs(loss - ref_loss2) / fabs(ref_loss2) < tol2, "step 2: loss %.7f (PyTorch %.7f%s), tolerance %.1e",
           loss, ref_loss2, has_fp64 ? " in float64" : "", tol2);
    dt_optim_step(&opt, &m, NULL);
    compare_all(&m, "after2", 1e-3);

    free(x);
    free(lab);
    free(labels);
    dt_optim_free(&opt);
    dt_model_free(&m);
    H5Fclose(fix);
    return tap_done();
}
