/* bench_conv: oneDNN's three convolution passes on one model's shapes, on NHWC (dtrain's layout)
 * and on the blocked layout oneDNN picks itself (nChw8c on AVX2, nChw16c on AVX-512), with the
 * reorders between the two. It calls oneDNN directly, without dtrain's library: the numbers are the
 * kernels', and it builds against oneDNN 2.x (Debian 12's) or 3.x (--with-dnnl=PREFIX).
 *   bench/bench_conv [SET] [BATCH] [REPEAT]
 * SET: resnet18 (default), mobilenet_v2 or regnet (regnet_y_800mf's grouped 3x3 convolutions).
 * Prints per shape and layout the best of REPEAT (default 3) runs of each pass in ms, the reorders
 * of x and y into the blocked layout, oneDNN's kernels, then the model's total per training step
 * (every pass of every convolution, counted as often as the model has it; the stem without its
 * data gradient). Threads: OMP_NUM_THREADS; instruction set: ONEDNN_MAX_CPU_ISA (AVX2 emulates an
 * AVX2-only processor). Not a test: numbers vary with the machine's load. */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    int c, hw, oc, k, s, groups, count; /* count: how many of it the model has */
} shape;

static const shape resnet18[] = {{3, 224, 64, 7, 2, 1, 1},    {64, 56, 64, 3, 1, 1, 4},   {64, 56, 128, 3, 2, 1, 1},
                                 {64, 56, 128, 1, 2, 1, 1},   {128, 28, 128, 3, 1, 1, 3}, {128, 28, 256, 3, 2, 1, 1},
                                 {128, 28, 256, 1, 2, 1, 1},  {256, 14, 256, 3, 1, 1, 3}, {256, 14, 512, 3, 2, 1, 1},
                                 {256, 14, 512, 1, 2, 1, 1},  {512, 7, 512, 3, 1, 1, 3},  {0}};
static const shape mobilenet_v2[] = {
    {32, 112, 32, 3, 1, 32, 1},   {32, 112, 16, 1, 1, 1, 1},    {16, 112, 96, 1, 1, 1, 1},    {96, 112, 96, 3, 2, 96, 1},
    {96, 56, 24, 1, 1, 1, 1},     {24, 56, 144, 1, 1, 1, 2},    {144, 56, 144, 3, 1, 144, 1}, {144, 56, 24, 1, 1, 1, 1},
    {192, 28, 192, 3, 1, 192, 2}, {192, 28, 32, 1, 1, 1, 2},    {384, 14, 384, 3, 1, 384, 4}, {384, 14, 64, 1, 1, 1, 3},
    {960, 7, 960, 3, 1, 960, 2},  {960, 7, 160, 1, 1, 1, 2},    {320, 7, 1280, 1, 1, 1, 1},   {0}};
static const shape regnet[] = {{64, 112, 64, 3, 2, 4, 1},   {64, 56, 64, 3, 1, 4, 0},     {144, 56, 144, 3, 2, 9, 1},
                               {144, 28, 144, 3, 1, 9, 2},  {320, 28, 320, 3, 2, 20, 1},  {320, 14, 320, 3, 1, 20, 7},
                               {784, 14, 784, 3, 2, 49, 1}, {784, 7, 784, 3, 1, 49, 1},   {0}};

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        dnnl_status_t st_ = (call);                                                                                    \
        if (st_ != dnnl_success) {                                                                                     \
            fprintf(stderr, "bench_conv: %s failed (status %d)\n", #call, (int)st_);                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int repeat = 3;

#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_ref;
typedef dnnl_memory_desc_t md_own;
static md_own md_make(int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag)
{
    md_own m;
    CK(dnnl_memory_desc_create_with_tag(&m, nd, dims, dnnl_f32, tag));
    return m;
}
#define REF(m) (m)
#else
typedef const dnnl_memory_desc_t *md_ref;
typedef dnnl_memory_desc_t md_own;
static md_own md_make(int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag)
{
    md_own m;
    CK(dnnl_memory_desc_init_by_tag(&m, nd, dims, dnnl_f32, tag));
    return m;
}
#define REF(m) (&(m))
#endif

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* memory of md, filled with small values (denormals and zeros would flatter the kernels) */
static dnnl_memory_t filled(md_ref md)
{
    dnnl_memory_t m;
    void *p;
    CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_get_data_handle(m, &p));
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    for (size_t i = 0; i < n; i++)
        ((float *)p)[i] = (float)((i * 2654435761u) % 1999) / 1999.f - .5f;
    return m;
}

/* the best of repeat runs of p (after one to warm up) */
static double best_ms(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
    double best = 0;
    for (int r = 0; r <= repeat; r++) {
        double t = now_ms();
        CK(dnnl_primitive_execute(p, strm, nargs, args));
        CK(dnnl_stream_wait(strm));
        t = now_ms() - t;
        if (r == 1 || (r > 1 && t < best))
            best = t;
    }
    return best;
}

static double reorder_ms(md_ref from, md_ref to)
{
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    CK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    CK(dnnl_primitive_create(&p, pd));
    dnnl_memory_t a = filled(from), b = filled(to);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    double t = best_ms(p, 2, args);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(a);
    dnnl_memory_destroy(b);
    return t;
}

static const char *impl(const_dnnl_primitive_desc_t pd)
{
    const char *s = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s ? s : "?";
}

/* one shape on one layout; adds the step's share to *step (passes) and *reo (reorders, blocked) */
static void run(int n, const shape *sh, int blocked, double *step, double *reo)
{
    const int k = sh->k, s = sh->s, p = k / 2, oh = (sh->hw + 2 * p - k) / s + 1;
    dnnl_dims_t sd = {n, sh->c, sh->hw, sh->hw}, dd = {n, sh->oc, oh, oh}, st = {s, s}, dil = {0, 0}, pl = {p, p};
    dnnl_dims_t pr = {(oh - 1) * s + k - sh->hw - p, (oh - 1) * s + k - sh->hw - p};
    dnnl_format_tag_t tag = blocked ? dnnl_format_tag_any : dnnl_nhwc;
    md_own src = md_make(4, sd, tag), dst = md_make(4, dd, tag), nsrc = md_make(4, sd, dnnl_nhwc),
           ndst = md_make(4, dd, dnnl_nhwc), wei;
    if (sh->groups == 1) {
        dnnl_dims_t wd = {sh->oc, sh->c, k, k};
        wei = md_make(4, wd, dnnl_format_tag_any);
    } else {
        dnnl_dims_t wd = {sh->groups, sh->oc / sh->groups, sh->c / sh->groups, k, k};
        wei = md_make(5, wd, dnnl_format_tag_any);
    }
    dnnl_primitive_desc_t pf, pd, pw;
#if DNNL_VERSION_MAJOR >= 3
    CK(dnnl_convolution_forward_primitive_desc_create(&pf, eng, dnnl_forward_training, dnnl_convolution_direct, src,
                                                      wei, NULL, dst, st, dil, pl, pr, NULL));
    CK(dnnl_convolution_backward_data_primitive_desc_create(&pd, eng, dnnl_convolution_direct, src, wei, dst, st, dil,
                                                            pl, pr, pf, NULL));
    CK(dnnl_convolution_backward_weights_primitive_desc_create(&pw, eng, dnnl_convolution_direct, src, wei, NULL, dst,
                                                               st, dil, pl, pr, pf, NULL));
#else
    dnnl_convolution_desc_t cf, cd, cw;
    CK(dnnl_dilated_convolution_forward_desc_init(&cf, dnnl_forward_training, dnnl_convolution_direct, &src, &wei, NULL,
                                                  &dst, st, dil, pl, pr));
    CK(dnnl_primitive_desc_create(&pf, &cf, NULL, eng, NULL));
    CK(dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &src, &wei, &dst, st, dil, pl,
                                                        pr));
    CK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, pf));
    CK(dnnl_dilated_convolution_backward_weights_desc_init(&cw, dnnl_convolution_direct, &src, &wei, NULL, &dst, st,
                                                           dil, pl, pr));
    CK(dnnl_primitive_desc_create(&pw, &cw, NULL, eng, pf));
#endif
#define Q(pd_, what) dnnl_primitive_desc_query_md(pd_, what, 0)
    dnnl_primitive_t f, bd, bw;
    CK(dnnl_primitive_create(&f, pf));
    CK(dnnl_primitive_create(&bd, pd));
    CK(dnnl_primitive_create(&bw, pw));
    dnnl_memory_t fx = filled(Q(pf, dnnl_query_src_md)), fw = filled(Q(pf, dnnl_query_weights_md)),
                  fy = filled(Q(pf, dnnl_query_dst_md)), ddy = filled(Q(pd, dnnl_query_diff_dst_md)),
                  dw = filled(Q(pd, dnnl_query_weights_md)), ddx = filled(Q(pd, dnnl_query_diff_src_md)),
                  wx = filled(Q(pw, dnnl_query_src_md)), wdy = filled(Q(pw, dnnl_query_diff_dst_md)),
                  wdw = filled(Q(pw, dnnl_query_diff_weights_md));
    dnnl_exec_arg_t af[3] = {{DNNL_ARG_SRC, fx}, {DNNL_ARG_WEIGHTS, fw}, {DNNL_ARG_DST, fy}};
    dnnl_exec_arg_t ad[3] = {{DNNL_ARG_DIFF_DST, ddy}, {DNNL_ARG_WEIGHTS, dw}, {DNNL_ARG_DIFF_SRC, ddx}};
    dnnl_exec_arg_t aw[3] = {{DNNL_ARG_SRC, wx}, {DNNL_ARG_DIFF_DST, wdy}, {DNNL_ARG_DIFF_WEIGHTS, wdw}};
    const int stem = sh->c < 8; /* the model's input has no gradient */
    double tf = best_ms(f, 3, af), td = stem ? 0 : best_ms(bd, 3, ad), tw = best_ms(bw, 3, aw);
    double rx = blocked ? reorder_ms(REF(nsrc), Q(pf, dnnl_query_src_md)) : 0;
    double ry = blocked ? reorder_ms(REF(ndst), Q(pf, dnnl_query_dst_md)) : 0;
    printf("%4d %3dx%-3d %4d -> %-4d k%d s%d g%-4d %-7s %8.2f %8.2f %8.2f | %6.2f %6.2f | %s / %s / %s\n", n, sh->hw,
           sh->hw, sh->c, sh->oc, k, s, sh->groups, blocked ? "blocked" : "nhwc", tf, td, tw, rx, ry, impl(pf),
           stem ? "-" : impl(pd), impl(pw));
    fflush(stdout);
    *step += sh->count * (tf + td + tw);
    /* the reorders a step pays on blocked activations: x and y forward, dy, dx and x backward */
    *reo += sh->count * (2 * rx + (stem ? 0 : rx) + 2 * ry);
    dnnl_memory_t all[] = {fx, fw, fy, ddy, dw, ddx, wx, wdy, wdw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        dnnl_memory_destroy(all[i]);
    dnnl_primitive_destroy(f);
    dnnl_primitive_destroy(bd);
    dnnl_primitive_destroy(bw);
    dnnl_primitive_desc_destroy(pf);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(pw);
#if DNNL_VERSION_MAJOR >= 3
    md_own own[] = {src, dst, nsrc, ndst, wei};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        dnnl_memory_desc_destroy(own[i]);
#endif
}

int main(int argc, char **argv)
{
    const char *set = argc > 1 ? argv[1] : "resnet18";
    int n = argc > 2 ? atoi(argv[2]) : 32;
    repeat = argc > 3 ? atoi(argv[3]) : 3;
    const shape *list = !strcmp(set, "resnet18")       ? resnet18
                        : !strcmp(set, "mobilenet_v2") ? mobilenet_v2
                        : !strcmp(set, "regnet")       ? regnet
                                                       : NULL;
    if (!list || n < 1 || repeat < 1) {
        fprintf(stderr, "usage: bench_conv [resnet18|mobilenet_v2|regnet] [BATCH >= 1] [REPEAT >= 1]\n");
        return 2;
    }
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    const dnnl_version_t *v = dnnl_version();
    printf("bench_conv %s batch %d, oneDNN %d.%d.%d, best of %d; ms: forward, data gradient, weight gradient | "
           "reorders of x and y into the blocked layout\n",
           set, n, v->major, v->minor, v->patch, repeat);
    double step[2] = {0, 0}, reo = 0, unused = 0;
    for (const shape *sh = list; sh->c; sh++) {
        run(n, sh, 0, &step[0], &unused);
        run(n, sh, 1, &step[1], &reo);
    }
    printf("%s step, every pass of every convolution: nhwc %.0f ms, blocked %.0f ms + %.0f ms of reorders\n", set,
           step[0], step[1], reo);
    return 0;
}
