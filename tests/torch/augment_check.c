/* augment_check.c FILE.h5: data/augment.c against torchvision 0.14 on what tests/torch/augment_torch.py
 * wrote: the policies' tables (ops, signs, every bin's magnitude for several image sizes, AutoAugment's
 * sub-policies) equal; every op on every image (noise, smooth structures, flat and tiny ones; 1 and 3
 * channels; both signs, extreme magnitudes, nearest and bilinear) against _apply_op's pixels; erasing
 * against F.erase's. TAP, one line per op (over all images and magnitudes) with its worst difference.
 *
 * Tolerance, measured: ours transcribes torch 1.13's float32 operations in its order, with the fused
 * multiply-adds its AVX2 kernels make (sgemm's grid, grid_sample's unnormalisation and bilinear sum,
 * linspace), so on the x86-64 machine with AVX2 where the oracle was made every value of every case is
 * equal (worst difference 0 of 255, 0 values differ, 14.6 million compared). Where torch's kernels
 * do not fuse, a bilinear sum rounds the other way now and then: done so here (the grid, the
 * unnormalisation or the sum unfused) 0.02% to 0.06% of the bilinear shears' values differ, by 1,
 * while the nearest ones stay equal (no sample lies within rounding of a half). So an op passes when
 * every value is within PIX_TOL (1; nearest geometry excepted, where a moved sample would take its
 * neighbour's value) and at most MISS_TOL (0.2%) of its values over all cases differ at all. A wrong
 * formula differs in far more (measured by breaking data/augment.c on purpose): shears of the wrong
 * sign in 56% to 63% of the values (by up to 255), about the centre instead of the top-left corner
 * 61% to 67%, rotation the wrong way 37%, grid_sample without its half-pixel offset 26% to 69% of
 * every geometric op's, equalize's step // 256 16% (by up to 244) and without its step // 2 41%,
 * the sharpness blur truncated 14%, blends rounded instead of truncated 20% to 32%, autocontrast
 * rounded 41%, solarize's >= as > 2.6%, the contrast mean off by 0.01 0.47%. Erasing must be equal.
 * A table's magnitudes come from torch.linspace, whose last bit is its kernel's (unfused, 51 to 167 of
 * them move by an ulp): each must be within 2 float32 ulps of torchvision's, and the line counts how
 * many are equal (all of them where the oracle was made); ops, signs and sub-policies must be equal. */
#include "config.h"

#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "../unit/tap.h"
#include "util/check.h"
#include "util/h5.h"

#define PIX_TOL 1
#define MISS_TOL 2e-3

static const char *const table_names[] = {"imagenet", "cifar10", "svhn", "ra", "ra_17", "ta_wide", "ta_wide_17"};
static const int sizes[][2] = {{32, 32}, {28, 28}, {37, 45}, {224, 224}, {45, 37}}; /* (h, w) as written */

static int op_of(const char *name)
{
    for (int op = 0; op < DT_AUG_N_OPS; op++)
        if (!strcmp(name, dt_aug_op_name(op)))
            return op;
    return -1;
}

static int64_t attr_i64(hid_t g, const char *file, const char *name)
{
    int64_t v = -1;
    return dt_h5_attr_read_i64(g, file, name, &v) == DT_OK ? v : -1;
}

/* one policy's tables against torchvision's: one TAP line (a diagnostic names the first difference) */
static void check_table(hid_t f, const char *file, const char *name)
{
    char path[64], pname[32] = "";
    snprintf(path, sizeof path, "tables/%s", name);
    hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
    const int64_t nb = g >= 0 ? attr_i64(g, file, "num_bins") : -1;
    const int policy = g >= 0 && dt_h5_attr_read_str(g, file, "policy", pname, sizeof pname) == DT_OK
                           ? dt_aug_policy_parse(pname) : -1;
    if (g < 0 || nb < 2 || policy < 0) {
        TAP_OK(0, "table %s cannot be read", name);
        if (g >= 0)
            H5Gclose(g);
        return;
    }
    int ops[DT_AUG_N_OPS], ok = 1;
    const int n = dt_aug_space_ops(policy, ops);
    char **names = NULL;
    int32_t sgn[DT_AUG_N_OPS], binned[DT_AUG_N_OPS];
    int64_t s1[1] = {n};
    if (dt_h5_read_strings(g, file, "ops", n, &names) != DT_OK ||
        dt_h5_read(g, file, "array", "signed", 1, s1, H5T_NATIVE_INT32, sgn) != DT_OK ||
        dt_h5_read(g, file, "array", "binned", 1, s1, H5T_NATIVE_INT32, binned) != DT_OK) {
        TAP_OK(0, "table %s: %d ops expected, not as written", name, n);
        H5Gclose(g);
        return;
    }
    for (int k = 0; k < n && ok; k++)
        if (strcmp(names[k], dt_aug_op_name(ops[k])) || sgn[k] != dt_aug_op_signed(ops[k]) ||
            binned[k] != dt_aug_op_binned(ops[k])) {
            tap_diag("%s: op %d is %s (signed %d, binned %d) in torchvision, %s (%d, %d) here", name, k, names[k],
                     sgn[k], binned[k], dt_aug_op_name(ops[k]), dt_aug_op_signed(ops[k]), dt_aug_op_binned(ops[k]));
            ok = 0;
        }
    dt_h5_strings_free(names, n);
    double *mags = malloc((size_t)n * (size_t)nb * sizeof *mags);
    int checked = 0, exact = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && ok && mags; s++) {
        const int h = sizes[s][0], w = sizes[s][1];
        char ds[32];
        snprintf(ds, sizeof ds, "mag_%dx%d", h, w);
        int64_t s2[2] = {n, nb};
        if (dt_h5_read(g, file, "array", ds, 2, s2, H5T_NATIVE_DOUBLE, mags) != DT_OK) {
            ok = 0;
            break;
        }
        for (int k = 0; k < n && ok; k++)
            for (int b = 0; b < nb && ok; b++) {
                const double ours = dt_aug_magnitude(policy, ops[k], b, (int)nb, h, w), want = mags[k * nb + b];
                exact += ours == want;
                if (!(fabs(ours - want) <= 2 * FLT_EPSILON * fabs(want))) {
                    tap_diag("%s %dx%d: %s bin %d is %.9g in torchvision, %.9g here", name, h, w,
                             dt_aug_op_name(ops[k]), b, want, ours);
                    ok = 0;
                }
                checked++;
            }
    }
    free(mags);
    const dt_aug_sub_op(*subs)[2];
    const int nsub = dt_aug_subpolicies(policy, &subs);
    if (ok && nsub) { /* AutoAugment's sub-policies */
        char **sub_ops = NULL;
        double p[25][2];
        int32_t bins[25][2];
        int64_t s2[2] = {25, 2};
        if (nsub != 25 || dt_h5_read_strings(g, file, "sub_ops", 50, &sub_ops) != DT_OK ||
            dt_h5_read(g, file, "array", "sub_p", 2, s2, H5T_NATIVE_DOUBLE, p) != DT_OK ||
            dt_h5_read(g, file, "array", "sub_bin", 2, s2, H5T_NATIVE_INT32, bins) != DT_OK)
            ok = 0;
        for (int i = 0; i < 25 && ok; i++)
            for (int j = 0; j < 2 && ok; j++)
                if (op_of(sub_ops[2 * i + j]) != subs[i][j].op || p[i][j] != subs[i][j].p ||
                    bins[i][j] != subs[i][j].bin) {
                    tap_diag("%s: sub-policy %d op %d is (%s, %g, %d) in torchvision, (%s, %g, %d) here", name, i, j,
                             sub_ops[2 * i + j], p[i][j], bins[i][j], dt_aug_op_name(subs[i][j].op), subs[i][j].p,
                             subs[i][j].bin);
                    ok = 0;
                }
        dt_h5_strings_free(sub_ops, 50);
    }
    H5Gclose(g);
    TAP_OK(ok,
           "table %s (%s, %d bins): %d ops, their signs%s equal torchvision's, %d magnitudes over %zu image sizes "
           "within 2 ulps (%d equal)",
           name, pname, (int)nb, n, nsub ? ", the 25 sub-policies" : "", checked, sizeof sizes / sizeof sizes[0], exact);
}

/* the agreement of one op over all cases: worst difference, values compared / differing / beyond PIX_TOL,
 * the largest share of differing values in one case, and where the worst was */
typedef struct agree {
    int cases, worst;
    int64_t pixels, differ, beyond;
    double worst_share;
    char where[160];
} agree;

static agree stats[DT_AUG_N_OPS][2]; /* [op][interp] */

static int run_cases(hid_t f, const char *file, const char *name)
{
    char path[96];
    snprintf(path, sizeof path, "cases/%s", name);
    hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
    if (g < 0)
        return -1;
    const int64_t h = attr_i64(g, file, "h"), w = attr_i64(g, file, "w"), c = attr_i64(g, file, "c"),
                  n = attr_i64(g, file, "n");
    const size_t px = (size_t)(h * w * c);
    uint8_t *in = malloc(px), *out = malloc(px * (size_t)(n > 0 ? n : 1)), *buf = malloc(px),
            *scratch = malloc(dt_aug_scratch_bytes((int)h, (int)w, (int)c));
    double *mag = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int32_t *interp = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    char **ops = NULL;
    int64_t s1[1] = {n}, s3[3] = {h, w, c}, s4[4] = {n, h, w, c};
    int rc = 0;
    if (h < 1 || w < 1 || c < 1 || n < 1 || !in || !out || !buf || !scratch || !mag || !interp ||
        dt_h5_read(g, file, "array", "in", 3, s3, H5T_NATIVE_UINT8, in) != DT_OK ||
        dt_h5_read(g, file, "array", "out", 4, s4, H5T_NATIVE_UINT8, out) != DT_OK ||
        dt_h5_read(g, file, "array", "magnitude", 1, s1, H5T_NATIVE_DOUBLE, mag) != DT_OK ||
        dt_h5_read(g, file, "array", "interp", 1, s1, H5T_NATIVE_INT32, interp) != DT_OK ||
        dt_h5_read_strings(g, file, "ops", n, &ops) != DT_OK)
        rc = -1;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const int op = op_of(ops[i]), ip = interp[i] ? DT_AUG_BILINEAR : DT_AUG_NEAREST;
        if (op < 0) {
            rc = -1;
            break;
        }
        memcpy(buf, in, px);
        dt_aug_op(op, mag[i], ip, buf, (int)h, (int)w, (int)c, scratch);
        const uint8_t *want = out + (size_t)i * px;
        int worst = 0;
        int64_t differ = 0, beyond = 0, first = -1;
        for (size_t k = 0; k < px; k++) {
            const int d = abs((int)buf[k] - (int)want[k]);
            differ += d > 0;
            beyond += d > PIX_TOL;
            if (d > worst) {
                worst = d;
                first = (int64_t)k;
            }
        }
        agree *a = &stats[op][ip];
        a->cases++;
        a->pixels += (int64_t)px;
        a->differ += differ;
        a->beyond += beyond;
        const double share = (double)differ / (double)px;
        if (worst > a->worst || share > a->worst_share) {
            const int64_t p = first < 0 ? 0 : first / c;
            snprintf(a->where, sizeof a->where, "%s, magnitude %.9g: %.3g%% of values differ, worst %d at (%d, %d)",
                     name, mag[i], 100.0 * share, worst, (int)(p / w), (int)(p % w));
        }
        a->worst = worst > a->worst ? worst : a->worst;
        a->worst_share = share > a->worst_share ? share : a->worst_share;
    }
    dt_h5_strings_free(ops, n);
    free(in);
    free(out);
    free(buf);
    free(scratch);
    free(mag);
    free(interp);
    H5Gclose(g);
    return rc;
}

static void check_erase(hid_t f, const char *file, const char *name)
{
    char path[96];
    snprintf(path, sizeof path, "erase/%s", name);
    hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
    const int64_t h = g >= 0 ? attr_i64(g, file, "h") : -1, w = g >= 0 ? attr_i64(g, file, "w") : -1,
                  c = g >= 0 ? attr_i64(g, file, "c") : -1, n = g >= 0 ? attr_i64(g, file, "n") : -1;
    const size_t px = h > 0 && w > 0 && c > 0 ? (size_t)(h * w * c) : 1;
    uint8_t *in = malloc(px), *out = malloc(px * (size_t)(n > 0 ? n : 1)), *buf = malloc(px),
            *fill = malloc(3 * (size_t)(n > 0 ? n : 1));
    int32_t *boxes = malloc(4 * sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    int64_t s2[2] = {n, 4}, sf[2] = {n, 3}, s3[3] = {h, w, c}, s4[4] = {n, h, w, c};
    int ok = g >= 0 && h > 0 && w > 0 && c > 0 && n > 0 && in && out && buf && fill && boxes &&
             dt_h5_read(g, file, "array", "in", 3, s3, H5T_NATIVE_UINT8, in) == DT_OK &&
             dt_h5_read(g, file, "array", "out", 4, s4, H5T_NATIVE_UINT8, out) == DT_OK &&
             dt_h5_read(g, file, "array", "boxes", 2, s2, H5T_NATIVE_INT32, boxes) == DT_OK &&
             dt_h5_read(g, file, "array", "fill", 2, sf, H5T_NATIVE_UINT8, fill) == DT_OK;
    int equal = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        const dt_erase_box b = {boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3]};
        memcpy(buf, in, px);
        dt_erase_apply(&b, buf, (int)h, (int)w, (int)c, fill + 3 * i);
        equal += !memcmp(buf, out + (size_t)i * px, px);
    }
    TAP_OK(ok && equal == n, "erase %s: %d of %d boxes (empty ones included) erase as F.erase", name, equal, (int)n);
    free(in);
    free(out);
    free(buf);
    free(fill);
    free(boxes);
    if (g >= 0)
        H5Gclose(g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: augment_check FILE.h5 (made by tests/torch/augment_torch.py)\n");
        return 2;
    }
    hid_t f = dt_h5_open_ro(argv[1], "augmentation cases");
    if (f < 0)
        return 1;
    for (size_t i = 0; i < sizeof table_names / sizeof table_names[0]; i++)
        check_table(f, argv[1], table_names[i]);

    hid_t g = H5Gopen2(f, "cases", H5P_DEFAULT);
    H5G_info_t info;
    int images = 0, bad = g < 0 || H5Gget_info(g, &info) < 0;
    for (hsize_t i = 0; !bad && i < info.nlinks; i++) {
        char name[64];
        if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0 ||
            run_cases(f, argv[1], name) < 0) {
            TAP_OK(0, "cases %s cannot be read", name);
            bad = 1;
        }
        images++;
    }
    if (g >= 0)
        H5Gclose(g);
    for (int op = 0; op < DT_AUG_N_OPS; op++)
        for (int ip = 0; ip < 2; ip++) {
            const agree *a = &stats[op][ip];
            const int geometric = op >= DT_AUG_SHEAR_X && op <= DT_AUG_ROTATE;
            if (!a->cases) {
                if (ip == DT_AUG_NEAREST || geometric)
                    TAP_OK(0, "%s: no cases", dt_aug_op_name(op));
                continue;
            }
            /* nearest samples move whole pixels: only their share is bounded */
            const double share = (double)a->differ / (double)a->pixels;
            const int ok = (ip == DT_AUG_NEAREST && geometric ? 1 : a->beyond == 0) && share <= MISS_TOL;
            TAP_OK(ok, "%s%s: %d cases on %d images, %lld values: worst difference %d of 255, %.3g%% differ (%lld), "
                   "%lld by more than %d, at most %.3g%% in one case (tolerance: %d, %g%%)",
                   dt_aug_op_name(op), geometric ? (ip ? " bilinear" : " nearest") : "", a->cases, images,
                   (long long)a->pixels, a->worst, 100.0 * share, (long long)a->differ, (long long)a->beyond, PIX_TOL,
                   100.0 * a->worst_share, PIX_TOL, 100.0 * MISS_TOL);
            if (a->worst)
                tap_diag("  worst: %s", a->where);
        }
    check_erase(f, argv[1], "smooth37x45");
    check_erase(f, argv[1], "noise28g");
    H5Fclose(f);
    return tap_done();
}
