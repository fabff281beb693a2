/* pack.c: dtpack's packers (contract in pack.h). */
#include "config.h"

#include "pack/pack.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "data/image.h"
#include "data/shard.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/clock.h"
#include "util/log.h"

/* ---------------------------------------------------------------------------------------------- */
/* output directory, manifest and progress                                                        */

static int make_dir(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                goto fail;
            *s = '/';
        }
    if (mkdir(p, 0777) == 0)
        return DT_OK;
    struct stat st;
    if (errno == EEXIST && stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
        dt_error("%s: the output directory exists and is not a directory", p);
        return DT_ERR_INPUT;
    }
    if (errno == EEXIST)
        return DT_OK;
fail:
    dt_error("%s: cannot create the output directory: %s", p, strerror(errno));
    return DT_ERR_SYS;
}

/* path's real path in out (PATH_MAX). When path does not exist (yet), the real path of its deepest
 * existing ancestor with the rest appended, "." and ".." applied to the text (the directories
 * make_dir creates are plain directories, so ".." there is their parent). DT_OK or DT_ERR_SYS. */
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

/* the manifest's entries other than split's, then (when add) add[0..n_add) */
static int manifest_replace(const char *dir, const char *split, const dt_manifest_entry *add, int n_add)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DT_MANIFEST_NAME);
    dt_manifest_entry *e = NULL;
    int n = 0;
    if (access(path, F_OK) == 0 && dt_manifest_read(dir, &e, &n) != DT_OK)
        return DT_ERR_INPUT; /* it said why: a damaged manifest is not overwritten */
    dt_manifest_entry *all = malloc((size_t)(n + n_add + 1) * sizeof *all);
    if (!all) {
        free(e);
        return DT_ERR_NOMEM;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].split, split) != 0)
            all[k++] = e[i];
    for (int i = 0; i < n_add; i++)
        all[k++] = add[i];
    int rc = dt_manifest_write(dir, all, k);
    free(all);
    free(e);
    return rc;
}

/* removes split's shards (and temporaries) left by an earlier pack */
static void remove_old_shards(const char *dir, const char *split)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t n = strlen(split);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *s = de->d_name[0] == '.' ? de->d_name + 1 : de->d_name;
        if (strncmp(s, split, n) == 0 && s[n] == '-' && strlen(s + n) >= 10 && strstr(s + n, ".h5")) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
}

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

/* a shard writer plus the split's manifest entries */
typedef struct split_out {
    dt_shard_writer w;
    dt_manifest_entry *e;
    int n;
    size_t cap;
    int64_t shard_bytes;
} split_out;

static int split_flush(split_out *so, dt_pack_stats *st)
{
    if (!so->w.count)
        return DT_OK;
    DT_TRY(dt_grow((void **)&so->e, &so->cap, (size_t)so->n + 1, sizeof *so->e));
    dt_manifest_entry *m = &so->e[so->n];
    memset(m, 0, sizeof *m);
    snprintf(m->split, sizeof m->split, "%s", so->w.spec.split);
    DT_TRY(dt_shard_writer_flush(&so->w, m->file, sizeof m->file, &m->count, &m->bytes, &m->crc));
    so->n++;
    st->shards++;
    st->bytes += (int64_t)m->bytes;
    return DT_OK;
}

static int split_add(split_out *so, const uint8_t *data, size_t n, int32_t label, const char *name, dt_pack_stats *st)
{
    DT_TRY(dt_shard_writer_add(&so->w, data, n, label, name));
    st->images++;
    if ((int64_t)so->w.bytes >= so->shard_bytes)
        DT_TRY(split_flush(so, st));
    return DT_OK;
}

static int split_begin(split_out *so, const dt_shard_spec *spec, const dt_pack_opts *o)
{
    memset(so, 0, sizeof *so);
    so->shard_bytes = o->shard_bytes;
    DT_TRY(manifest_replace(spec->dir, spec->split, NULL, 0)); /* interrupted: the split is not listed */
    remove_old_shards(spec->dir, spec->split);
    dt_shard_writer_init(&so->w, spec, 0);
    return DT_OK;
}

static int split_end(split_out *so, dt_pack_stats *st, int ok)
{
    int rc = ok ? split_flush(so, st) : DT_ERR_INPUT;
    if (rc == DT_OK && so->n == 0) { /* a split dtrain would refuse: say so now, not at training time */
        dt_error("%s: no images to pack into split %s", so->w.spec.source, so->w.spec.split);
        rc = DT_ERR_INPUT;
    }
    if (rc == DT_OK)
        rc = manifest_replace(so->w.spec.dir, so->w.spec.split, so->e, so->n);
    dt_shard_writer_free(&so->w);
    free(so->e);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* ImageNet-style trees                                                                           */

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
    size_t n;
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
        it->n = n;
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
        int bad = !small || dt_image_resize(rgb, w, h, small, sw, sh, &scr) != 0;
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
    if (dt_jpeg_encode(rgb, w, h, o->quality, &it->bytes, &it->n, it->err, sizeof it->err) == 0)
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

/* packs one split's listed files (items is consumed) */
static int pack_tree_split(const char *root, const char *split, char **classes, int n_classes, item *items, int64_t n,
                           const dt_pack_opts *o, dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_ENCODED, .num_classes = n_classes,
                          .classes = (const char *const *)classes, .source = root};
    split_out so;
    int rc = split_begin(&so, &spec, o);
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
                rc = split_add(&so, it->bytes, it->n, it->label, it->name, st);
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
    int rc2 = split_end(&so, st, rc == DT_OK); /* an I/O error stays one (exit 1), bad input exit 2 */
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
        if ((rc = list_split(r2, classes, n_classes, &items[s], &n_items[s])) != DT_OK)
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
        rc = make_dir(o->out);
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

/* ---------------------------------------------------------------------------------------------- */
/* IDX (MNIST, Fashion-MNIST)                                                                     */

/* dir/base.gz, else dir/base, opened as a regular file (gzread of a FIFO would block) that is not
 * empty; NULL after one line naming it */
static gzFile open_gz(const char *dir, const char *base, char *path, size_t n)
{
    snprintf(path, n, "%s/%s.gz", dir, base);
    if (access(path, F_OK) != 0)
        snprintf(path, n, "%s/%s", dir, base);
    uint64_t size;
    int fd = dt_open_regular(path, "IDX file", NULL, &size);
    if (fd < 0)
        return NULL;
    if (size == 0) {
        dt_error("%s: empty file (an IDX file starts with its header, then the data)", path);
        close(fd);
        return NULL;
    }
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        dt_error("%s: cannot read: out of memory", path);
        close(fd);
    }
    return f;
}

enum { GZ_SHORT = 1 };

/* n bytes into buf. DT_OK; GZ_SHORT at the end of the data, with *done < n and nothing said (the
 * caller knows what was cut); DT_ERR_INPUT after a read or decompression error, said naming path
 * (a cut gzip stream: "unexpected end of file"). */
static int gz_read_all(gzFile f, const char *path, void *buf, size_t n, size_t *done)
{
    uint8_t *p = buf;
    *done = 0;
    while (*done < n) {
        size_t left = n - *done;
        unsigned want = left > (1u << 30) ? 1u << 30 : (unsigned)left;
        int got = gzread(f, p + *done, want);
        if (got < 0) {
            int e;
            dt_error("%s: %s", path, gzerror(f, &e));
            return DT_ERR_INPUT;
        }
        if (got == 0)
            return GZ_SHORT;
        *done += (size_t)got;
    }
    return DT_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* one IDX split read into memory and checked, before anything is written */
typedef struct idx_split {
    char pi[4200], pl[4200]; /* the image and label files */
    uint32_t n, rows, cols;
    uint8_t *pix, *lab;
} idx_split;

static void idx_free(idx_split *d)
{
    free(d->pix);
    free(d->lab);
    d->pix = d->lab = NULL;
}

static int idx_load(const char *src, const char *prefix, idx_split *d)
{
    char base[64];
    memset(d, 0, sizeof *d);
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    gzFile fi = open_gz(src, base, d->pi, sizeof d->pi), fl = NULL;
    int rc = DT_ERR_INPUT;
    uint8_t hi[16], hl[8];
    size_t got;
    int r;
    if (!fi)
        goto out;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    if (!(fl = open_gz(src, base, d->pl, sizeof d->pl)))
        goto out;
    if ((r = gz_read_all(fi, d->pi, hi, 16, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: %zu bytes, shorter than the IDX header (16 bytes)", d->pi, got);
        goto out;
    }
    if ((r = gz_read_all(fl, d->pl, hl, 8, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: %zu bytes, shorter than the IDX header (8 bytes)", d->pl, got);
        goto out;
    }
    d->n = be32(hi + 4);
    d->rows = be32(hi + 8);
    d->cols = be32(hi + 12);
    uint32_t nl = be32(hl + 4);
    if (be32(hi) != 0x803 || be32(hl) != 0x801) {
        dt_error("%s: not an IDX %s file (magic %08x, expected %08x)", be32(hi) != 0x803 ? d->pi : d->pl,
                 be32(hi) != 0x803 ? "ubyte image" : "ubyte label", be32(hi) != 0x803 ? be32(hi) : be32(hl),
                 be32(hi) != 0x803 ? 0x803u : 0x801u);
        goto out;
    }
    if (d->n == 0 || nl == 0) {
        dt_error("%s: its header says 0 %s: nothing to pack", d->n == 0 ? d->pi : d->pl,
                 d->n == 0 ? "images" : "labels");
        goto out;
    }
    if (d->n != nl || d->rows == 0 || d->cols == 0 || d->rows > 4096 || d->cols > 4096) {
        dt_error("%s: %u images of %ux%u with %u labels in %s: counts must agree and sizes be 1..4096", d->pi, d->n,
                 d->rows, d->cols, nl, d->pl);
        goto out;
    }
    size_t img = (size_t)d->rows * d->cols;
    d->pix = malloc(img * d->n);
    d->lab = malloc(d->n);
    if (!d->pix || !d->lab) {
        rc = DT_ERR_NOMEM;
        goto out;
    }
    if ((r = gz_read_all(fi, d->pi, d->pix, img * d->n, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: its header promises %u images of %ux%u, the data holds %zu whole ones", d->pi,
                     d->n, d->rows, d->cols, got / img);
        goto out;
    }
    if ((r = gz_read_all(fl, d->pl, d->lab, d->n, &got)) != DT_OK) {
        if (r == GZ_SHORT)
            dt_error("%s: truncated: its header promises %u labels, the data holds %zu", d->pl, d->n, got);
        goto out;
    }
    for (uint32_t i = 0; i < d->n; i++)
        if (d->lab[i] > 9) {
            dt_error("%s: label %u of image %u is outside 0..9", d->pl, d->lab[i], i);
            goto out;
        }
    rc = DT_OK;
out:
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    if (rc != DT_OK)
        idx_free(d);
    return rc;
}

static int pack_idx_split(const idx_split *d, const char *split, const char *const *classes, const dt_pack_opts *o,
                          dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_RAW, .num_classes = 10, .classes = classes,
                          .h = (int)d->rows, .w = (int)d->cols, .c = 1, .source = d->pi};
    split_out so;
    DT_TRY(split_begin(&so, &spec, o));
    size_t img = (size_t)d->rows * d->cols;
    int rc = DT_OK;
    for (uint32_t i = 0; i < d->n && rc == DT_OK; i++) {
        rc = split_add(&so, d->pix + (size_t)i * img, img, d->lab[i], NULL, st);
        st->passed++;
    }
    int rc2 = split_end(&so, st, rc == DT_OK);
    return rc ? rc : rc2;
}

int dt_pack_idx(const char *src, int fashion, const dt_pack_opts *o, dt_pack_stats *st)
{
    static const char *const fashion_names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    static const char *const digits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    memset(st, 0, sizeof *st);
    const char *const *cls = fashion ? fashion_names : digits;
    idx_split train, val;
    DT_TRY(idx_load(src, "train", &train)); /* both splits read and checked before anything is written */
    int rc = idx_load(src, "t10k", &val);
    if (rc == DT_OK) {
        if ((rc = make_dir(o->out)) == DT_OK && (rc = pack_idx_split(&train, "train", cls, o, st)) == DT_OK)
            rc = pack_idx_split(&val, "val", cls, o, st);
        idx_free(&val);
    }
    idx_free(&train);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* CIFAR-10                                                                                       */

enum { CIFAR_REC = 1 + 3 * 1024 }; /* label, then the R, G and B planes of 32x32 */

/* every batch a non-empty regular file of whole records: checked before anything is written */
static int cifar_check(const char *src, const char *const *files, int n_files)
{
    for (int f = 0; f < n_files; f++) {
        char path[4200];
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", src, files[f]);
        int fd = dt_open_regular(path, "CIFAR-10 batch", NULL, &size);
        if (fd < 0)
            return DT_ERR_INPUT;
        close(fd);
        if (size == 0) {
            dt_error("%s: empty file (a CIFAR-10 batch holds records of %d bytes)", path, (int)CIFAR_REC);
            return DT_ERR_INPUT;
        }
        if (size % CIFAR_REC) {
            dt_error("%s: record %llu is cut short (%llu of %d bytes): the file is truncated", path,
                     (unsigned long long)(size / CIFAR_REC), (unsigned long long)(size % CIFAR_REC), (int)CIFAR_REC);
            return DT_ERR_INPUT;
        }
    }
    return DT_OK;
}

static int pack_cifar_split(const char *src, const char *const *files, int n_files, const char *split,
                            const char *const *classes, const dt_pack_opts *o, dt_pack_stats *st)
{
    dt_shard_spec spec = {.dir = o->out, .split = split, .kind = DT_SHARD_RAW, .num_classes = 10, .classes = classes,
                          .h = 32, .w = 32, .c = 3, .source = src};
    split_out so;
    DT_TRY(split_begin(&so, &spec, o));
    int rc = DT_OK;
    uint8_t rec[CIFAR_REC], hwc[3 * 1024];
    for (int f = 0; f < n_files && rc == DT_OK; f++) {
        char path[4200];
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", src, files[f]);
        int fd = dt_open_regular(path, "CIFAR-10 batch", NULL, &size);
        FILE *fp = fd < 0 ? NULL : fdopen(fd, "rb");
        if (!fp) {
            if (fd >= 0) {
                dt_error("%s: cannot read: %s", path, strerror(errno));
                close(fd);
            }
            rc = DT_ERR_INPUT;
            break;
        }
        for (int64_t i = 0; rc == DT_OK; i++) {
            size_t got = fread(rec, 1, CIFAR_REC, fp);
            if (got == 0 && feof(fp))
                break;
            if (got != CIFAR_REC) {
                dt_error("%s: record %lld is cut short (%zu of %d bytes)", path, (long long)i, got, (int)CIFAR_REC);
                rc = DT_ERR_INPUT;
            } else if (rec[0] > 9) {
                dt_error("%s: record %lld has label %u, outside 0..9", path, (long long)i, rec[0]);
                rc = DT_ERR_INPUT;
            } else {
                for (int p = 0; p < 1024; p++) /* planes R, G, B -> interleaved */
                    for (int ch = 0; ch < 3; ch++)
                        hwc[p * 3 + ch] = rec[1 + ch * 1024 + p];
                rc = split_add(&so, hwc, sizeof hwc, rec[0], NULL, st);
                st->passed++;
            }
        }
        fclose(fp);
    }
    int rc2 = split_end(&so, st, rc == DT_OK);
    return rc ? rc : rc2;
}

int dt_pack_cifar10(const char *src, const dt_pack_opts *o, dt_pack_stats *st)
{
    static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin"};
    static const char *const test[] = {"test_batch.bin"};
    const char *names[10] = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
    char buf[10][64];
    memset(st, 0, sizeof *st);
    DT_TRY(cifar_check(src, train, 5));
    DT_TRY(cifar_check(src, test, 1));
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/batches.meta.txt", src);
    if (access(meta, F_OK) == 0) { /* the class names the batches come with, when present */
        uint64_t size;
        int fd = dt_open_regular(meta, "class name file", NULL, &size);
        FILE *m = fd < 0 ? NULL : fdopen(fd, "r");
        if (!m) {
            if (fd >= 0) {
                dt_error("%s: cannot read: %s", meta, strerror(errno));
                close(fd);
            }
            return DT_ERR_INPUT;
        }
        int k = 0;
        char line[128];
        while (k < 10 && fgets(line, sizeof line, m)) {
            line[strcspn(line, "\r\n")] = 0;
            if (*line)
                snprintf(buf[k++], sizeof buf[0], "%.63s", line);
        }
        fclose(m);
        for (int i = 0; k == 10 && i < 10; i++)
            names[i] = buf[i];
    }
    DT_TRY(make_dir(o->out));
    DT_TRY(pack_cifar_split(src, train, 5, "train", names, o, st));
    return pack_cifar_split(src, test, 1, "val", names, o, st);
}

/* ---------------------------------------------------------------------------------------------- */

/* prints what one split holds */
static void verify_report(const char *dir, const dt_dataset *ds)
{
    printf("%s: split %s: %lld images of %d classes in %d shards, every CRC-32 matches\n", dir, ds->split,
           (long long)ds->count, ds->num_classes, ds->n_shards);
}

int dt_pack_verify(const char *dir)
{
    dt_manifest_entry *e;
    int n;
    DT_TRY(dt_manifest_read(dir, &e, &n));
    /* dtrain's start-up first: train and val open with every check, then the checks across splits
     * (the same calls); then every other split against train */
    dt_dataset train, ds;
    int rc = dt_dataset_open(&train, dir, "train", 1);
    if (rc == DT_OK) {
        verify_report(dir, &train);
        if ((rc = dt_dataset_open(&ds, dir, "val", 1)) == DT_OK) {
            rc = dt_dataset_check_splits(&train, &ds);
            if (rc == DT_OK)
                verify_report(dir, &ds);
            dt_dataset_close(&ds);
        }
    }
    const char *done[64] = {"train", "val"};
    int n_done = 2;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        int seen = 0;
        for (int j = 0; j < n_done && !seen; j++)
            seen = !strcmp(done[j], e[i].split);
        if (seen)
            continue;
        if (n_done == 64) {
            dt_error("%s/%s: more than 64 splits", dir, DT_MANIFEST_NAME);
            rc = DT_ERR_INPUT;
            break;
        }
        done[n_done++] = e[i].split;
        if ((rc = dt_dataset_open(&ds, dir, e[i].split, 1)) != DT_OK)
            break;
        rc = dt_dataset_check_splits(&train, &ds);
        if (rc == DT_OK)
            verify_report(dir, &ds);
        dt_dataset_close(&ds);
    }
    if (train.n_shards)
        dt_dataset_close(&train);
    free(e);
    return rc;
}
