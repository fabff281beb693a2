/* test_augment.c: data/augment.c without torch (tests/torch/augment.sh compares its pixels with
 * torchvision's): the draws' structure and frequencies for each policy (ops uniform for RandAugment and
 * TrivialAugmentWide, their bins and signs, AutoAugment's sub-policy pairs and per-op probabilities),
 * RandomErasing's boxes (area and aspect ranges, inside the image, p, the fall-back when no box fits),
 * erase_apply writing exactly its box, identities (magnitude 0, Invert twice, Rotate 90 four times),
 * the direction of translations, 1 and 3 channels, and no byte written outside the image or the
 * scratch whatever the parameters. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "tap.h"
#include "util/rng.h"

/* |observed - expected| within 5 standard deviations of a binomial count (+1 for tiny expectations) */
static int near_count(int64_t obs, int64_t n, double p)
{
    const double mean = (double)n * p, sd = sqrt((double)n * p * (1.0 - p));
    return fabs((double)obs - mean) <= 5.0 * sd + 1.0;
}

static void fill_random(uint8_t *x, size_t n, dt_rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (uint8_t)dt_rng_below(r, 256);
}

static void test_names(void)
{
    static const char *const names[] = {"imagenet", "cifar10", "svhn", "ra", "ta_wide"};
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= dt_aug_policy_parse(names[i]) == DT_AUG_AA_IMAGENET + i &&
              !strcmp(dt_aug_policy_name(DT_AUG_AA_IMAGENET + i), names[i]);
    TAP_OK(ok && dt_aug_policy_parse("augmix") == -1 && dt_aug_policy_parse("") == -1 &&
               dt_aug_policy_parse(NULL) == -1 && !strcmp(dt_aug_policy_name(DT_AUG_NONE), "none"),
           "policy names: train.py's five parse and print back; augmix, empty and NULL are refused");
    TAP_OK(!strcmp(dt_aug_op_name(DT_AUG_IDENTITY), "Identity") && !strcmp(dt_aug_op_name(DT_AUG_SHEAR_X), "ShearX") &&
               !strcmp(dt_aug_op_name(DT_AUG_AUTOCONTRAST), "AutoContrast") &&
               !strcmp(dt_aug_op_name(DT_AUG_INVERT), "Invert") && !strcmp(dt_aug_op_name(DT_AUG_N_OPS), "?"),
           "op names are torchvision's strings");
}

/* RandAugment: num_ops steps, ops uniform over the 14, magnitude the fixed bin's, signs fair */
static void test_draw_ra(void)
{
    const int N = 100000, h = 37, w = 45;
    dt_aug_cfg cfg = {DT_AUG_RA, 2, 9, 31, DT_AUG_BILINEAR, 0, {0, 0, 0}};
    dt_rng r;
    dt_rng_seed(&r, 1, 0);
    int64_t count[DT_AUG_N_OPS] = {0}, neg[DT_AUG_N_OPS] = {0};
    int shape = 1, mags = 1;
    for (int i = 0; i < N; i++) {
        dt_aug_step s[DT_AUG_MAX_STEPS];
        const int n = dt_aug_draw(&cfg, h, w, &r, s);
        shape &= n == 2;
        for (int k = 0; k < n; k++) {
            count[s[k].op]++;
            neg[s[k].op] += signbit(s[k].magnitude) != 0;
            mags &= fabs(s[k].magnitude) == dt_aug_magnitude(DT_AUG_RA, s[k].op, 9, 31, h, w);
        }
    }
    int uniform = count[DT_AUG_INVERT] == 0, signs = 1;
    for (int op = 0; op <= DT_AUG_EQUALIZE; op++) {
        uniform &= near_count(count[op], 2 * N, 1.0 / 14);
        signs &= dt_aug_op_signed(op) ? near_count(neg[op], count[op], 0.5) : neg[op] == 0;
    }
    TAP_OK(shape && uniform && mags && signs,
           "RandAugment: 2 ops per image, each of the 14 (no Invert) about 1/14 of %d (Identity %lld, Equalize %lld), "
           "magnitudes bin 9's, signed ones negated about half the time (ShearX %lld of %lld)", 2 * N,
           (long long)count[DT_AUG_IDENTITY], (long long)count[DT_AUG_EQUALIZE], (long long)neg[DT_AUG_SHEAR_X],
           (long long)count[DT_AUG_SHEAR_X]);
    cfg.ra_num_ops = 100;
    dt_aug_step s[DT_AUG_MAX_STEPS];
    const int capped = dt_aug_draw(&cfg, h, w, &r, s);
    cfg.ra_num_ops = 0;
    TAP_OK(capped == DT_AUG_MAX_STEPS && dt_aug_draw(&cfg, h, w, &r, s) == 0,
           "RandAugment: num_ops 100 capped to %d steps, 0 gives none", DT_AUG_MAX_STEPS);
}

/* TrivialAugmentWide: one step, ops uniform, bins uniform, signs fair */
static void test_draw_ta(void)
{
    const int N = 140000, h = 32, w = 32;
    dt_aug_cfg cfg = {DT_AUG_TA_WIDE, 2, 9, 31, DT_AUG_NEAREST, 0, {0, 0, 0}};
    dt_rng r;
    dt_rng_seed(&r, 2, 0);
    int64_t count[DT_AUG_N_OPS] = {0}, neg[DT_AUG_N_OPS] = {0}, bins[31] = {0}, binned = 0;
    int shape = 1, found = 1;
    for (int i = 0; i < N; i++) {
        dt_aug_step s[DT_AUG_MAX_STEPS];
        shape &= dt_aug_draw(&cfg, h, w, &r, s) == 1;
        count[s[0].op]++;
        neg[s[0].op] += signbit(s[0].magnitude) != 0;
        if (!dt_aug_op_binned(s[0].op)) {
            found &= s[0].magnitude == 0;
            continue;
        }
        if (s[0].op == DT_AUG_POSTERIZE) /* 31 bins over 7 values: no bin to tell */
            continue;
        int b = 0;
        while (b < 31 && dt_aug_magnitude(DT_AUG_TA_WIDE, s[0].op, b, 31, h, w) != fabs(s[0].magnitude))
            b++;
        found &= b < 31;
        bins[b < 31 ? b : 0]++;
        binned++;
    }
    int uniform = count[DT_AUG_INVERT] == 0, signs = 1, bins_uniform = 1;
    for (int op = 0; op <= DT_AUG_EQUALIZE; op++) {
        uniform &= near_count(count[op], N, 1.0 / 14);
        signs &= dt_aug_op_signed(op) ? near_count(neg[op], count[op], 0.5) : neg[op] == 0;
    }
    for (int b = 0; b < 31; b++)
        bins_uniform &= near_count(bins[b], binned, 1.0 / 31);
    TAP_OK(shape && uniform && signs && found && bins_uniform,
           "TrivialAugmentWide: 1 op per image, each of the 14 about 1/14 of %d, its 31 bins about 1/31 each "
           "(bin 0 %lld, bin 30 %lld of %lld), signed ones negated about half the time",
           N, (long long)bins[0], (long long)bins[30], (long long)binned);
}

/* AutoAugment: every step sequence is a sub-policy's pair (or one of its ops) with the pair's bins, and
 * each op occurs with the frequency the sub-policies' probabilities give */
static void test_draw_aa(int policy)
{
    const int N = 100000, h = 32, w = 32;
    dt_aug_cfg cfg = {policy, 2, 9, 31, DT_AUG_BILINEAR, 0, {0, 0, 0}};
    const dt_aug_sub_op(*subs)[2];
    const int nsub = dt_aug_subpolicies(policy, &subs);
    double expect[DT_AUG_N_OPS] = {0}, expect_n[3] = {0};
    for (int i = 0; i < nsub; i++) {
        const double p0 = subs[i][0].p, p1 = subs[i][1].p;
        expect[subs[i][0].op] += p0 / nsub;
        expect[subs[i][1].op] += p1 / nsub;
        expect_n[0] += (1 - p0) * (1 - p1) / nsub;
        expect_n[1] += (p0 * (1 - p1) + (1 - p0) * p1) / nsub;
        expect_n[2] += p0 * p1 / nsub;
    }
    dt_rng r;
    dt_rng_seed(&r, 3, (uint64_t)policy);
    int64_t count[DT_AUG_N_OPS] = {0}, neg[DT_AUG_N_OPS] = {0}, nsteps[3] = {0};
    int legal = 1;
    for (int i = 0; i < N; i++) {
        dt_aug_step s[DT_AUG_MAX_STEPS];
        const int n = dt_aug_draw(&cfg, h, w, &r, s);
        nsteps[n < 0 || n > 2 ? 0 : n]++;
        legal &= n >= 0 && n <= 2;
        /* some sub-policy explains the steps: both ops in order, or one of them, with its magnitudes */
        int explained = n == 0;
        for (int j = 0; j < nsub && !explained && n > 0; j++)
            for (int first = 0; first < 2 && !explained; first++) {
                if (n == 2 && first == 1)
                    break;
                int ok = 1;
                for (int k = 0; k < n; k++) {
                    const dt_aug_sub_op *o = &subs[j][first + k];
                    const double m = o->bin >= 0 ? dt_aug_magnitude(policy, o->op, o->bin, 10, h, w) : 0.0;
                    ok &= s[k].op == o->op && fabs(s[k].magnitude) == m && o->p > 0;
                }
                explained = ok;
            }
        legal &= explained;
        for (int k = 0; k < n && k < 2; k++) {
            count[s[k].op]++;
            neg[s[k].op] += signbit(s[k].magnitude) != 0;
        }
    }
    int freq = 1, signs = 1;
    for (int op = 0; op < DT_AUG_N_OPS; op++) {
        freq &= near_count(count[op], N, expect[op]);
        /* Color's bin 0 is 0: negated it is -0, still half of the time */
        signs &= dt_aug_op_signed(op) ? near_count(neg[op], count[op], 0.5) : neg[op] == 0;
    }
    for (int k = 0; k < 3; k++)
        freq &= near_count(nsteps[k], N, expect_n[k]);
    TAP_OK(legal && freq && signs && nsub == 25,
           "AutoAugment %s: each image's steps are one of the 25 sub-policies' pairs (or one op of it) with their "
           "bins; 0, 1, 2 steps %lld, %lld, %lld times (expected %.0f, %.0f, %.0f), each op as often as "
           "sum(p) / 25 says, signs fair", dt_aug_policy_name(policy), (long long)nsteps[0], (long long)nsteps[1],
           (long long)nsteps[2], N * expect_n[0], N * expect_n[1], N * expect_n[2]);
}

static void test_draw_misc(void)
{
    dt_aug_cfg cfg = {DT_AUG_NONE, 2, 9, 31, DT_AUG_BILINEAR, 0, {0, 0, 0}};
    dt_rng r, a, b;
    dt_rng_seed(&r, 4, 0);
    dt_aug_step s[DT_AUG_MAX_STEPS], t[DT_AUG_MAX_STEPS];
    const int none = dt_aug_draw(&cfg, 32, 32, &r, s);
    cfg.policy = DT_AUG_AA_SVHN;
    dt_rng_seed(&a, 5, 7);
    dt_rng_seed(&b, 5, 7);
    int same = 1;
    for (int i = 0; i < 1000; i++) {
        const int n = dt_aug_draw(&cfg, 32, 32, &a, s);
        same &= n == dt_aug_draw(&cfg, 32, 32, &b, t);
        for (int k = 0; k < n; k++)
            same &= s[k].op == t[k].op && s[k].magnitude == t[k].magnitude;
    }
    TAP_OK(none == 0 && same, "no policy draws nothing; the same stream draws the same steps");
}

/* RandomErasing's draws: p, and the boxes' area, aspect and place */
static void test_erase_draw(void)
{
    const int N = 40000, h = 224, w = 160;
    dt_rng r;
    dt_rng_seed(&r, 6, 0);
    int64_t erased = 0, top = 0, bottom = 0, left = 0, right = 0;
    int rules = 1;
    double amin = 1, amax = 0;
    for (int i = 0; i < N; i++) {
        dt_erase_box b;
        if (!dt_erase_draw(0.5, h, w, &r, &b)) {
            rules &= b.i == 0 && b.j == 0 && b.h == 0 && b.w == 0;
            continue;
        }
        erased++;
        const double eh = b.h, ew = b.w, area = (double)h * w;
        /* each side is round(sqrt(...)): within 1/2 of the unrounded size */
        rules &= b.h < h && b.w < w && b.i >= 0 && b.j >= 0 && b.i + b.h <= h && b.j + b.w <= w;
        rules &= (eh + 0.5) * (ew + 0.5) >= 0.02 * area && (eh - 0.5) * (ew - 0.5) <= 0.33 * area;
        rules &= (eh + 0.5) / (ew - 0.5) >= 0.3 && (eh - 0.5) / (ew + 0.5) <= 3.3;
        amin = fmin(amin, eh * ew / area);
        amax = fmax(amax, eh * ew / area);
        top += b.i == 0;
        bottom += b.i + b.h == h;
        left += b.j == 0;
        right += b.j + b.w == w;
    }
    TAP_OK(rules && near_count(erased, N, 0.5) && top && bottom && left && right,
           "RandomErasing p 0.5 on %dx%d: %lld of %d erase; boxes inside, smaller than the image, area %.4f..%.4f "
           "of it (scale 0.02..0.33 up to rounding), aspect 0.3..3.3 up to rounding, touching each side sometimes",
           h, w, (long long)erased, N, amin, amax);

    int never = 1, always = 1, fallback = 1;
    int64_t tiny_erased = 0, tiny_empty = 0;
    for (int i = 0; i < 2000; i++) {
        dt_erase_box b;
        never &= !dt_erase_draw(0.0, h, w, &r, &b);
        always &= dt_erase_draw(1.0, h, w, &r, &b);
        /* a 1 x 1000 image: every box needs 2 rows or more (area >= 20 pixels), so all 10 tries fail */
        fallback &= !dt_erase_draw(1.0, 1, 1000, &r, &b) && b.h == 0 && b.w == 0;
        if (dt_erase_draw(1.0, 2, 2, &r, &b)) {
            tiny_erased++;
            tiny_empty += b.h == 0 || b.w == 0;
            fallback &= b.h < 2 && b.w < 2 && b.i + b.h <= 2 && b.j + b.w <= 2;
        }
    }
    TAP_OK(never && always && fallback,
           "RandomErasing: p 0 never, p 1 always on %dx%d; on 1x1000 the 10 attempts always fail (no erasing); on 2x2 "
           "%lld of 2000 erase a box of at most 1x1 (%lld of them empty, as get_params rounds)",
           h, w, (long long)tiny_erased, (long long)tiny_empty);
}

/* erase_apply writes its box and nothing else (clipped when it overhangs), c = 1 and 3 */
static void test_erase_apply(void)
{
    dt_rng r;
    dt_rng_seed(&r, 7, 0);
    enum { H = 13, W = 17, PAD = 32 };
    uint8_t buf[PAD + H * W * 3 + PAD], ref[H * W * 3];
    const uint8_t fill[3] = {11, 22, 33};
    const dt_erase_box boxes[] = {{2, 3, 4, 5}, {0, 0, H, W}, {H - 1, W - 1, 1, 1}, {5, 5, 0, 4}, {10, 14, 9, 9}};
    int ok = 1;
    for (int c = 1; c <= 3; c += 2)
        for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
            const dt_erase_box *b = &boxes[k];
            memset(buf, 0xa5, sizeof buf);
            fill_random(buf + PAD, (size_t)H * W * c, &r);
            memcpy(ref, buf + PAD, (size_t)H * W * c);
            dt_erase_apply(b, buf + PAD, H, W, c, fill);
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int ch = 0; ch < c; ch++) {
                        const size_t i = ((size_t)y * W + x) * c + ch;
                        const int in = y >= b->i && y < b->i + b->h && x >= b->j && x < b->j + b->w;
                        ok &= buf[PAD + i] == (in ? fill[ch] : ref[i]);
                    }
            for (size_t i = 0; i < PAD; i++)
                ok &= buf[i] == 0xa5 && buf[PAD + (size_t)H * W * c + i] == 0xa5;
        }
    TAP_OK(ok, "erase_apply: exactly the box's pixels take the fill (c = 1 and 3; empty, whole, overhanging boxes)");
}

/* one op on a copy of img: 1 when the result equals want */
static int op_gives(int op, double m, int interp, const uint8_t *img, const uint8_t *want, int h, int w, int c)
{
    const size_t n = (size_t)h * w * c;
    uint8_t *x = malloc(n), *scratch = malloc(dt_aug_scratch_bytes(h, w, c));
    memcpy(x, img, n);
    dt_aug_op(op, m, interp, x, h, w, c, scratch);
    const int eq = !memcmp(x, want, n);
    free(x);
    free(scratch);
    return eq;
}

static void test_identities(void)
{
    dt_rng r;
    dt_rng_seed(&r, 8, 0);
    static const int shapes[][2] = {{32, 32}, {37, 45}, {31, 31}, {3, 5}};
    int zero = 1, invert = 1, rot = 1, shift = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int c = 1; c <= 3; c += 2) {
            const int h = shapes[s][0], w = shapes[s][1];
            const size_t n = (size_t)h * w * c;
            uint8_t *img = malloc(n), *x = malloc(n), *want = malloc(n),
                    *scratch = malloc(dt_aug_scratch_bytes(h, w, c));
            fill_random(img, n, &r);
            /* magnitude 0: the geometric ops sample exactly on the pixels, the blends have factor 1 */
            for (int interp = 0; interp < 2; interp++) {
                for (int op = DT_AUG_IDENTITY; op <= DT_AUG_SHARPNESS; op++)
                    zero &= op_gives(op, 0.0, interp, img, img, h, w, c);
                zero &= op_gives(DT_AUG_POSTERIZE, 8.0, interp, img, img, h, w, c);
            }
            memcpy(x, img, n);
            dt_aug_op(DT_AUG_INVERT, 0, 0, x, h, w, c, scratch);
            int changed = memcmp(x, img, n) != 0;
            dt_aug_op(DT_AUG_INVERT, 0, 0, x, h, w, c, scratch);
            invert &= changed && !memcmp(x, img, n);
            if (h == w) /* a quarter turn maps the pixel grid onto itself: four are the image */
                for (int interp = 0; interp < 2; interp++) {
                    memcpy(x, img, n);
                    for (int k = 0; k < 4; k++)
                        dt_aug_op(DT_AUG_ROTATE, 90.0, interp, x, h, w, c, scratch);
                    rot &= !memcmp(x, img, n);
                }
            /* TranslateX 3 moves the image 3 columns right (zeros enter), TranslateY -2 two rows up;
             * int() truncates 3.9 to 3 and -2.7 to -2 */
            for (int y = 0; y < h; y++)
                for (int xx = 0; xx < w; xx++)
                    for (int k = 0; k < c; k++)
                        want[((size_t)y * w + xx) * c + k] = xx >= 3 ? img[((size_t)y * w + xx - 3) * c + k] : 0;
            shift &= op_gives(DT_AUG_TRANSLATE_X, 3.9, DT_AUG_NEAREST, img, want, h, w, c) &&
                     op_gives(DT_AUG_TRANSLATE_X, 3.9, DT_AUG_BILINEAR, img, want, h, w, c);
            for (int y = 0; y < h; y++)
                for (int xx = 0; xx < w; xx++)
                    for (int k = 0; k < c; k++)
                        want[((size_t)y * w + xx) * c + k] = y + 2 < h ? img[((size_t)(y + 2) * w + xx) * c + k] : 0;
            shift &= op_gives(DT_AUG_TRANSLATE_Y, -2.7, DT_AUG_NEAREST, img, want, h, w, c) &&
                     op_gives(DT_AUG_TRANSLATE_Y, -2.7, DT_AUG_BILINEAR, img, want, h, w, c);
            free(img);
            free(x);
            free(want);
            free(scratch);
        }
    TAP_OK(zero, "magnitude 0 (shears, translations, rotation, blends; Posterize 8) leaves the image as it is, "
                 "nearest and bilinear, c = 1 and 3");
    TAP_OK(invert, "Invert twice is the image");
    TAP_OK(rot, "Rotate 90 four times is the image (square sizes, both interpolations)");
    TAP_OK(shift, "TranslateX 3.9 shifts 3 columns right, TranslateY -2.7 two rows up, zeros entering");

    /* Color on one channel: unchanged (adjust_saturation returns it); Contrast: towards the channel's mean */
    uint8_t g[4] = {0, 100, 200, 100}, want[4] = {0, 100, 200, 100}, scratch[4];
    const int color1 = op_gives(DT_AUG_COLOR, 0.9, DT_AUG_NEAREST, g, want, 2, 2, 1);
    dt_aug_op(DT_AUG_CONTRAST, -1.0, DT_AUG_NEAREST, g, 2, 2, 1, scratch); /* factor 0: every value the mean 100 */
    TAP_OK(color1 && g[0] == 100 && g[1] == 100 && g[2] == 100 && g[3] == 100,
           "one channel: Color leaves it, Contrast factor 0 makes it its mean");
}

/* dt_aug_apply and every op, whatever the size, channels, policy and magnitude, write only inside the
 * image and the scratch */
static void test_bounds(void)
{
    enum { PAD = 64 };
    static const int shapes[][2] = {{1, 1}, {2, 2}, {1, 7}, {7, 1}, {3, 3}, {28, 28}, {37, 45}};
    static const double wild[] = {0.0, 1e300, -1e300, 1e9, -77.7, 255.5, 300.0, -3.0, 12.0};
    dt_rng r;
    dt_rng_seed(&r, 9, 0);
    int ok = 1, calls = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int c = 1; c <= 3; c += 2) {
            const int h = shapes[s][0], w = shapes[s][1];
            const size_t n = (size_t)h * w * c, sb = dt_aug_scratch_bytes(h, w, c);
            uint8_t *buf = malloc(n + 2 * PAD), *scr = malloc(sb + 2 * PAD);
            memset(buf, 0x5a, n + 2 * PAD);
            memset(scr, 0x5a, sb + 2 * PAD);
            fill_random(buf + PAD, n, &r);
            for (int policy = DT_AUG_NONE; policy <= DT_AUG_TA_WIDE; policy++)
                for (int i = 0; i < 60; i++) {
                    const dt_aug_cfg cfg = {policy, 3, (int)dt_rng_below(&r, 31), 31, i & 1, 1.0, {1, 2, 3}};
                    dt_aug_apply(&cfg, buf + PAD, h, w, c, &r, scr + PAD);
                    calls++;
                }
            for (int op = 0; op < DT_AUG_N_OPS; op++)
                for (size_t k = 0; k < sizeof wild / sizeof wild[0]; k++)
                    for (int interp = 0; interp < 2; interp++) {
                        dt_aug_op(op, wild[k], interp, buf + PAD, h, w, c, scr + PAD);
                        calls++;
                    }
            for (size_t i = 0; i < PAD; i++)
                ok &= buf[i] == 0x5a && buf[PAD + n + i] == 0x5a && scr[i] == 0x5a && scr[PAD + sb + i] == 0x5a;
            free(buf);
            free(scr);
        }
    TAP_OK(ok, "%d calls of dt_aug_apply (every policy, erasing on) and dt_aug_op (every op, magnitudes up to +-1e300) "
               "on 1x1 .. 37x45, c = 1 and 3: the bytes around the image and the scratch untouched", calls);
}

int main(void)
{
    test_names();
    test_draw_ra();
    test_draw_ta();
    for (int p = DT_AUG_AA_IMAGENET; p <= DT_AUG_AA_SVHN; p++)
        test_draw_aa(p);
    test_draw_misc();
    test_erase_draw();
    test_erase_apply();
    test_identities();
    test_bounds();
    return tap_done();
}
