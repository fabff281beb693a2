/* tree.c: dt_pack_tree (pack.h): an ImageNet-style folder tree, SRC/<split>/<class>/<file>, listed
 * in torchvision ImageFolder's order, each file read, checked and, when it must be, converted or
 * resized to an RGB JPEG by worker threads (OpenMP), then written in order (pack.c). ILSVRC2012's
 * flat val/ is listed by its ground truth (ilsvrc.c) in its sorted twin's order and names. Also
 * refuses an output directory inside the tree, and draws the progress line. */
#include "config.h"

#include "pack/pack.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "data/image.h"
#include "data/shard.h"
#include "pack/pack_internal.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"

/* path's real path in out (PATH_MAX). When path does not exist (yet), the real path of its deepest
 * existing ancestor with the rest appended, "." and ".." applied to the text (the directories
 * dt_pack_make_dir creates are plain directories, so ".." there is their parent). DT_OK or DT_ERR_SYS. */
static int resolve_path(const char *path, char *out)
{
    char abs[2 * PATH_MAX], head[2 * PATH_MAX];
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return DT_ERR_SYS;
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    }
    snprintf(head, sizeof head, "%s", abs);
    while (!realpath(head, out)) { /* drop components until what is left exists */
        if (errno != ENOENT)
            return DT_ERR_SYS;
        char *slash = strrchr(head, '/');
        if (!slash)
            return DT_ERR_SYS;
        if (slash == head) { /* "/x" with no x: the root exists */
            snprintf(out, PATH_MAX, "/");
            head[1] = 0;
            break;
        }
        *slash = 0;
    }
    const char *rest = abs + strlen(head);
    while (*rest) {
        while (*rest == '/')
            rest++;
        size_t n = strcspn(rest, "/");
        if (n == 0 || (n == 1 && rest[0] == '.')) {
            /* nothing */
        } else if (n == 2 && rest[0] == '.' && rest[1] == '.') {
            char *slash = strrchr(out, '/');
            if (slash)
                slash[slash == out] = 0; /* "/a" -> "/", "/a/b" -> "/a" */
        } else {
            size_t len = strlen(out);
            if (len + 1 + n >= PATH_MAX)
                return DT_ERR_SYS;
            snprintf(out + len, PATH_MAX - len, "%s%.*s", len > 1 ? "/" : "", (int)n, rest);
        }
        rest += n;
    }
    return DT_OK;
}

/* An output directory inside the tree being packed would be packed as well: under SRC/<split>/ it
 * becomes a class (its shards skipped as undecodable images), and a second run finds it among the
 * classes. Compared by real path, so symbolic links and ".." do not hide it. */
static int check_out_outside(const char *src, const char *out)
{
    char rs[PATH_MAX], ro[PATH_MAX];
    if (!realpath(src, rs))
        return DT_OK; /* listing src says what is wrong with it */
    if (resolve_path(out, ro) != DT_OK) {
        dt_error("-o %s: cannot resolve the path: %s", out, strerror(errno));
        return DT_ERR_INPUT;
    }
    size_t n = strlen(rs);
    if (!strcmp(rs, "/") || (!strncmp(ro, rs, n) && (ro[n] == '/' || ro[n] == 0))) {
        dt_error("-o %s: the output directory (%s) is inside the input tree %s (%s), so dtpack would read its own "
                 "output as images or classes: choose one outside",
                 out, ro, src, rs);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

/* the progress line on stderr: images done, rate and time left, redrawn at most twice a second */
typedef struct progress {
    const char *what;
    int64_t total, done;
    double start, last;
    int on;
} progress;

static void progress_show(progress *p, int final)
{
    double t = dt_seconds();
    if (!p->on || (!final && t - p->last < 0.5))
        return;
    p->last = t;
    double rate = p->done / (t - p->start + 1e-9), eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    fprintf(stderr, "\r%s: %lld/%lld images, %.0f img/s, ETA %dm%02ds   ", p->what, (long long)p->done,
            (long long)p->total, rate, (int)eta / 60, (int)eta % 60);
    if (final)
        fputc('\n', stderr);
    fflush(stderr);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sorted names of the entries of dir that are directories (want_dirs) or regular files */
static int list_dir(const char *dir, int want_dirs, char ***out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) {
        dt_error("%s: cannot list: %s", dir, strerror(errno));
        return DT_ERR_INPUT;
    }
    char **v = NULL;
    int n = 0, rc = DT_OK;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[8192];
        struct stat s;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (stat(p, &s) != 0 || (want_dirs ? !S_ISDIR(s.st_mode) : !S_ISREG(s.st_mode)))
            continue;
        if (dt_grow((void **)&v, &cap, (size_t)n + 1, sizeof *v)) {
            rc = DT_ERR_NOMEM;
            break;
        }
        if (!(v[n] = strdup(de->d_name))) {
            rc = DT_ERR_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == DT_OK)
        qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return rc;
}

static void free_list(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* one file's trip through a worker: the bytes to store, or why not */
typedef struct item {
    char *path;     /* full path */
    char *name;     /* <class>/<file> */
    int32_t label;
    uint8_t *bytes; /* to store (owned, or the original buffer) */
    size_t len;
    int what;       /* 0 pass, 1 png, 2 gray, 3 cmyk (converted), 4 resized, -1 skipped */
    char err[256];
} item;

static int read_file(const char *path, uint8_t **buf, size_t *n, char *err, size_t errlen)
{
    *buf = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat s;
    if (fstat(fileno(f), &s) != 0 || s.st_size < 0) {
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
        fclose(f);
        return -1;
    }
    size_t size = (size_t)s.st_size;
    uint8_t *b = malloc(size ? size : 1);
    if (!b || fread(b, 1, size, f) != size) {
        snprintf(err, errlen, "%s", b ? "short read" : "out of memory");
        free(b);
        fclose(f);
        return -1;
    }
    fclose(f);
    *buf = b;
    *n = size;
    return 0;
}

static void process_item(item *it, const dt_pack_opts *o)
{
    uint8_t *buf, *rgb = NULL, *small = NULL;
    size_t n;
    enum dt_image_kind kind;
    int w, h;
    it->what = -1;
    if (read_file(it->path, &buf, &n, it->err, sizeof it->err) != 0)
        return;
    if (n == 0) {
        snprintf(it->err, sizeof it->err, "empty file");
        free(buf);
        return;
    }
    if (dt_image_probe(buf, n, &kind, &w, &h, it->err, sizeof it->err) != 0) {
        free(buf);
        return;
    }
    int shrink = o->resize_short > 0 && (w < h ? w : h) > o->resize_short;
    if (kind == DT_IMAGE_JPEG_RGB && !shrink) {
        it->bytes = buf;
        it->len = n;
        it->what = 0;
        return;
    }
    if (dt_image_decode_rgb(buf, n, &rgb, &w, &h, it->err, sizeof it->err) != 0) {
        free(buf);
        return;
    }
    free(buf);
    if (shrink) { /* the shorter side to resize_short, the longer in proportion (as PIL's resize) */
        int sw = w < h ? o->resize_short : (int)((double)w * o->resize_short / h + 0.5);
        int sh = w < h ? (int)((double)h * o->resize_short / w + 0.5) : o->resize_short;
        dt_image_scratch scr = {0};
        small = malloc((size_t)sw * sh * 3);
        int bad = !small || dt_image_resize(rgb, w, h, small, sw, sh, DT_FILTER_BILINEAR, &scr) != 0;
        dt_image_scratch_free(&scr);
        if (bad) {
            snprintf(it->err, sizeof it->err, "resizing to %dx%d failed", sw, sh);
            free(rgb);
            free(small);
            return;
        }
        free(rgb);
        rgb = small;
        w = sw;
        h = sh;
    }
    if (dt_jpeg_encode(rgb, w, h, o->quality, &it->bytes, &it->len, it->err, sizeof it->err) == 0)
        it->what = kind == DT_IMAGE_PNG ? 1 : kind == DT_IMAGE_JPEG_GRAY ? 2 : kind == DT_IMAGE_JPEG_CMYK ? 3 : 4;
    free(rgb);
}

/* the (path, label) list of one split, in ImageFolder's order */
static int list_split(const char *root, char **classes, int n_classes, item **out, int64_t *n_out)
{
    item *v = NULL;
    int64_t n = 0;
    size_t cap = 0;
    int rc = DT_OK;
    for (int c = 0; c < n_classes && rc == DT_OK; c++) {
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/%s", root, classes[c]);
        struct stat s;
        if (stat(dir, &s) != 0)
            continue; /* a class with no images in this split */
        char **files;
        int nf;
        if ((rc = list_dir(dir, 0, &files, &nf)) != DT_OK)
            break;
        for (int i = 0; i < nf && rc == DT_OK; i++) {
            if (dt_grow((void **)&v, &cap, (size_t)n + 1, sizeof *v)) {
                rc = DT_ERR_NOMEM;
                break;
            }
            item *it = &v[n];
            memset(it, 0, sizeof *it);
            size_t lp = strlen(dir) + strlen(files[i]) + 2, ln = strlen(classes[c]) + strlen(files[i]) + 2;
            it->path = malloc(lp);
            it->name = malloc(ln);
            if (!it->path || !it->name) {
                free(it->path);
                free(it->name);
                rc = DT_ERR_NOMEM;
                break;
            }
            snprintf(it->path, lp, "%s/%s", dir, files[i]);
            snprintf(it->name, ln, "%s/%s", classes[c], files[i]);
            it->label = c;
            n++;
        }
        free_list(files, nf);
    }
    *out = v;
    *n_out = n;
    return rc;
}

static void free_items(item *items, int64_t n)
{
    for (int64_t i = 0; items && i < n; i++) {
        free(items[i].bytes);
        free(items[i].path);
        free(items[i].name);
    }
    free(items);
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    return x->label != y->label ? (x->label < y->label ? -1 : 1) : strcmp(x->name, y->name);
}

/* ILSVRC2012's flat val/: its files labelled by the ground truth (ilsvrc.c), listed in the order and
 * under the names its sorted twin (val/<wnid>/<file>) has, so that both pack to the same shards */
static int list_flat(const char *root, const char *classes_dir, char **classes, int n_classes, const dt_pack_opts *o,
                     item **out, int64_t *n_out)
{
    char **files;
    int nf;
    *out = NULL;
    *n_out = 0;
    DT_TRY(list_dir(root, 0, &files, &nf));
    int32_t *labels = malloc((size_t)(nf ? nf : 1) * sizeof *labels);
    int rc = labels ? dt_pack_ilsvrc_labels(root, files, nf, classes, n_classes, classes_dir, o->val_labels,
                                            o->synsets, labels)
                    : DT_ERR_NOMEM;
    item *v = rc == DT_OK ? calloc((size_t)(nf ? nf : 1), sizeof *v) : NULL;
    if (rc == DT_OK && !v)
        rc = DT_ERR_NOMEM;
    int64_t n = 0;
    for (; n < nf && rc == DT_OK; n++) {
        item *it = &v[n];
        const char *cls = classes[labels[n]];
        size_t lp = strlen(root) + strlen(files[n]) + 2, ln = strlen(cls) + strlen(files[n]) + 2;
        it->path = malloc(lp);
        it->name = malloc(ln);
        if (!it->path || !it->name) {
            rc = DT_ERR_NOMEM;
            break;
        }
        snprintf(it->path, lp, "%s/%s", root, files[n]);
        snprintf(it->name, ln, "%s/%s", cls, files[n]);
        it->label = labels[n];
    }
    if (rc == DT_OK) {
        qsort(v, (size_t)n, sizeof *v, cmp_item);
    } else {
        free_items(v, v ? nf : 0); /* calloc'd: the items not reached hold NULLs */
        v = NULL;
        n = 0;
    }
    free(labels);
    free_list(files, nf);
    *out = v;
    *n_out = n;
    return rc;
}

/* packs one split's listed files (items is consumed) */
static int pack_tree_split(const char *root, const char *split, char **classes, int n_classes, item *items, int64_t n,
                           const dt_pack_opts *o, dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_ENCODED, .num_classes = n_classes,
                          .classes = (const char *const *)classes, .source = root};
    dt_pack_split so;
    int rc = dt_pack_split_begin(&so, &spec, o);
    if (rc != DT_OK) {
        free_items(items, n);
        return rc;
    }
    int64_t added = 0;
    progress pg = {.what = split, .total = n, .start = dt_seconds(), .on = o->progress};
    int threads = o->threads;
#ifdef _OPENMP
    if (threads < 1)
        threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    const int64_t chunk = 64 * (int64_t)threads;
    for (int64_t c0 = 0; c0 < n && rc == DT_OK; c0 += chunk) {
        int64_t c1 = c0 + chunk < n ? c0 + chunk : n;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int64_t i = c0; i < c1; i++)
            process_item(&items[i], o);
        for (int64_t i = c0; i < c1; i++) { /* in order: the same shards whatever the thread count */
            item *it = &items[i];
            if (rc == DT_OK && it->what < 0) {
                st->skipped++;
                if (pg.on)
                    fputc('\n', stderr);
                if (o->strict) {
                    dt_error("%s: %s (--strict: stopping)", it->path, it->err);
                    rc = DT_ERR_INPUT;
                } else {
                    dt_warn("%s: skipped: %s", it->path, it->err);
                }
            } else if (rc == DT_OK) {
                int64_t *cnt[] = {&st->passed, &st->converted_png, &st->converted_gray, &st->converted_cmyk,
                                  &st->resized};
                (*cnt[it->what])++;
                rc = dt_pack_split_add(&so, it->bytes, it->len, it->label, it->name, st);
                added++;
            }
            free(it->bytes);
            free(it->path);
            free(it->name);
            it->bytes = NULL;
            it->path = it->name = NULL;
        }
        pg.done = c1;
        progress_show(&pg, 0);
    }
    progress_show(&pg, 1);
    free_items(items, n);
    if (rc == DT_OK && added == 0) {
        dt_error("%s: none of its %lld files is a readable image: split %s would be empty", root, (long long)n, split);
        rc = DT_ERR_INPUT;
    }
    int rc2 = dt_pack_split_end(&so, st, rc == DT_OK); /* an I/O error stays one (exit 1), bad input exit 2 */
    return rc ? rc : rc2;
}

int dt_pack_tree(const char *src, const char *const *splits, int n_splits, const dt_pack_opts *o, dt_pack_stats *st)
{
    memset(st, 0, sizeof *st);
    if (n_splits < 1 || n_splits > 16) {
        dt_error("%d splits: pack 1 to 16 at a time", n_splits);
        return DT_ERR_INPUT;
    }
    DT_TRY(check_out_outside(src, o->out));
    int flat[16] = {0}, n_flat = 0;
    for (int s = 0; s < n_splits; s++) /* the flat one: val, labelled by --val-labels */
        n_flat += flat[s] = o->val_labels && !strcmp(splits[s], "val");
    if (o->val_labels && (!n_flat || flat[0])) {
        dt_error("--val-labels %s: labels a flat split val packed after train (--split train --split val): %s",
                 o->val_labels,
                 n_flat ? "its classes come from the first split's folders" : "no split val is being packed");
        return DT_ERR_INPUT;
    }
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", src, splits[0]);
    char **classes;
    int n_classes;
    DT_TRY(list_dir(root, 1, &classes, &n_classes));
    if (n_classes == 0) {
        dt_error("%s: no class folders (expected %s/<class>/<image files>)", root, root);
        free_list(classes, n_classes);
        return DT_ERR_INPUT;
    }
    int rc = DT_OK;
    for (int s = 1; s < n_splits && rc == DT_OK; s++) { /* later splits: only the first split's classes */
        char r2[4096];
        snprintf(r2, sizeof r2, "%s/%s", src, splits[s]);
        char **c2;
        int n2;
        if ((rc = list_dir(r2, 1, &c2, &n2)) != DT_OK)
            break;
        if (flat[s] && n2) {
            dt_error("%s: holds class folders (%s): --val-labels %s is for ILSVRC2012's flat val/ of image files", r2,
                     c2[0], o->val_labels);
            rc = DT_ERR_INPUT;
        }
        char **f2 = NULL;
        int nf2 = 0;
        if (!flat[s] && !n2 && rc == DT_OK && (rc = list_dir(r2, 0, &f2, &nf2)) == DT_OK && nf2) {
            dt_error("%s: %d files and no class folders: for ILSVRC2012's flat %s/ give its ground truth with "
                     "--val-labels (LOC_val_solution.csv, or the devkit's with --synsets meta.mat)",
                     r2, nf2, splits[s]);
            rc = DT_ERR_INPUT;
        }
        free_list(f2, nf2);
        for (int i = 0; i < n2 && rc == DT_OK; i++)
            if (!bsearch(&c2[i], classes, (size_t)n_classes, sizeof *classes, cmp_str)) {
                dt_error("%s/%s: class '%s' is not among the %d classes of %s", r2, c2[i], c2[i], n_classes, root);
                rc = DT_ERR_INPUT;
            }
        free_list(c2, n2);
    }
    /* every split listed before anything is written: a split with no files fails before the
     * output changes */
    item *items[16] = {0};
    int64_t n_items[16] = {0};
    for (int s = 0; s < n_splits && rc == DT_OK; s++) {
        char r2[4096];
        snprintf(r2, sizeof r2, "%s/%s", src, splits[s]);
        if ((rc = flat[s] ? list_flat(r2, root, classes, n_classes, o, &items[s], &n_items[s])
                          : list_split(r2, classes, n_classes, &items[s], &n_items[s])) != DT_OK)
            break;
        if (n_items[s] == 0) {
            dt_error("%s: no image files under its class folders", r2);
            rc = DT_ERR_INPUT;
        }
        for (int64_t k = 0, c = 0; s == 0 && rc == DT_OK && c < n_classes; c++) { /* items are in label order */
            int any = 0;
            for (; k < n_items[0] && items[0][k].label == c; k++)
                any = 1;
            if (!any)
                dt_warn("%s/%s: class %d has no files: it gets no training images", r2, classes[c], (int)c);
        }
    }
    if (rc == DT_OK)
        rc = dt_pack_make_dir(o->out);
    for (int s = 0; s < n_splits; s++) {
        char r2[4096];
        snprintf(r2, sizeof r2, "%s/%s", src, splits[s]);
        if (rc == DT_OK)
            rc = pack_tree_split(r2, splits[s], classes, n_classes, items[s], n_items[s], o, st);
        else
            free_items(items[s], n_items[s]);
        items[s] = NULL;
    }
    free_list(classes, n_classes);
    return rc;
}
