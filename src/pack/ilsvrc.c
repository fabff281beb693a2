/* ilsvrc.c: the labels of ILSVRC2012's flat validation folder (pack_internal.h), from either ground
 * truth people have: Kaggle's LOC_val_solution.csv (ImageId,PredictionString; the WNID first), or
 * the devkit's ILSVRC2012_validation_ground_truth.txt (line i: the ILSVRC2012_ID of
 * ILSVRC2012_val_<i as 8 digits>) with the devkit's meta.mat to say which WNID each ID is.
 *
 * Why meta.mat is read and LOC_synset_mapping.txt is not: the devkit's IDs are not in WNID order
 * (ID 1 is n02119789, kit fox), while LOC_synset_mapping.txt lists the WNIDs sorted (n01440764,
 * tench, first). Read as "line i is ID i" it would give nearly every image a wrong label, and
 * nothing would show it until the accuracy did. meta.mat is the file that pairs IDs with WNIDs, so
 * dtpack reads it (MATLAB v5: only what its 'synsets' struct array needs). A text mapping is taken
 * only when each line names its ID ("490 n01751748"), so it cannot be misread by position. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define ZLIB_CONST /* next_in points at const bytes */
#include <zlib.h>

#include "pack/pack_internal.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

enum { STEM_MAX = 64, WNID_MAX = 32 };

/* the whole of path, NUL-terminated; inputs here are a few MiB, 1 GiB is refused */
static int slurp(const char *what, const char *path, char **out, size_t *n_out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    struct stat s;
    if (!f || fstat(fileno(f), &s) != 0 || !S_ISREG(s.st_mode)) {
        dt_error("%s %s: cannot read: %s", what, path, f ? "not a regular file" : strerror(errno));
        if (f)
            fclose(f);
        return DT_ERR_INPUT;
    }
    if (s.st_size > (1L << 30)) {
        dt_error("%s %s: %lld bytes: too large for a ground truth or synset file", what, path, (long long)s.st_size);
        fclose(f);
        return DT_ERR_INPUT;
    }
    size_t n = (size_t)s.st_size;
    char *b = malloc(n + 1);
    if (!b || fread(b, 1, n, f) != n) {
        dt_error("%s %s: %s", what, path, b ? "short read" : "out of memory");
        free(b);
        fclose(f);
        return b ? DT_ERR_SYS : DT_ERR_NOMEM;
    }
    fclose(f);
    b[n] = 0;
    *out = b;
    *n_out = n;
    return DT_OK;
}

/* the next line of *p (its '\r' dropped, NUL-terminated in place), or NULL at the end */
static char *next_line(char **p, char *end)
{
    if (*p >= end)
        return NULL;
    char *l = *p, *nl = memchr(l, '\n', (size_t)(end - l));
    char *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    *e = 0;
    if (e > l && e[-1] == '\r')
        e[-1] = 0;
    return l;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* index of wnid among the sorted classes, or -1 */
static int class_of(const char *wnid, char *const *classes, int n_classes)
{
    char *const *hit = bsearch(&wnid, classes, (size_t)n_classes, sizeof *classes, cmp_str);
    return hit ? (int)(hit - classes) : -1;
}

/* ---------------------------------------------------------------------------------------------- */
/* the devkit's synsets: ILSVRC2012_ID -> WNID                                                    */

typedef struct synset {
    long id;
    char wnid[WNID_MAX];
} synset;

typedef struct synsets {
    synset *v;
    size_t n, cap;
} synsets;

static int synset_add(synsets *s, long id, const char *wnid, const char *path, const char *where)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].id == id) { /* n is a few thousand at most: a linear look is enough */
            dt_error("--synsets %s: %s: ILSVRC2012_ID %ld given twice (%s and %s)", path, where, id, s->v[i].wnid,
                     wnid);
            return DT_ERR_INPUT;
        }
    DT_TRY(dt_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v));
    s->v[s->n].id = id;
    snprintf(s->v[s->n].wnid, WNID_MAX, "%s", wnid);
    s->n++;
    return DT_OK;
}

static const synset *synset_find(const synsets *s, long id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].id == id)
            return &s->v[i];
    return NULL;
}

/* MATLAB v5 (the format's document: "MAT-File Format", MathWorks): a 128-byte header, then data
 * elements, each a tag (type, byte count; or a small element: count in the type's upper half and
 * up to 4 bytes of data in the tag) and its data padded to 8 bytes. miCOMPRESSED holds one element
 * deflated with zlib. An array (miMATRIX) holds its flags (class), dimensions, name, then by class:
 * numbers in one element, characters in one, a struct its field names and then each element's
 * fields as arrays. Little-endian files only (the devkit's is). */
enum { MI_INT8 = 1, MI_UINT8, MI_INT16, MI_UINT16, MI_INT32, MI_UINT32, MI_SINGLE, MI_DOUBLE = 9, MI_INT64 = 12,
       MI_UINT64, MI_MATRIX, MI_COMPRESSED, MI_UTF8 };
enum { MX_STRUCT = 2, MX_CHAR = 4 };

typedef struct mat_cur {
    const uint8_t *p;
    size_t n;
} mat_cur;

typedef struct mat_el {
    uint32_t type;
    const uint8_t *data;
    size_t n;
} mat_el;

typedef struct mat_arr {
    int cls;
    size_t numel;
    char name[64];
    mat_cur rest; /* what follows the name */
} mat_arr;

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the next element of c; -1 when it does not fit */
static int mat_next(mat_cur *c, mat_el *e)
{
    if (c->n < 8)
        return -1;
    uint32_t t = rd32(c->p);
    if (t >> 16) { /* small element */
        e->type = t & 0xffff;
        e->n = t >> 16;
        e->data = c->p + 4;
        c->p += 8;
        c->n -= 8;
        return e->n <= 4 ? 0 : -1;
    }
    size_t nb = rd32(c->p + 4);
    if (nb > c->n - 8)
        return -1;
    e->type = t;
    e->n = nb;
    e->data = c->p + 8;
    size_t total = 8 + nb, pad = t == MI_COMPRESSED ? 0 : (8 - total % 8) % 8; /* compressed: not padded */
    total += pad < c->n - total ? pad : c->n - total;
    c->p += total;
    c->n -= total;
    return 0;
}

/* an array's class, size and name; an empty element is an empty array */
static int mat_array(const mat_el *e, mat_arr *a)
{
    memset(a, 0, sizeof *a);
    if (e->type != MI_MATRIX)
        return -1;
    if (e->n == 0)
        return 0;
    mat_cur c = {e->data, e->n};
    mat_el f, d, nm;
    if (mat_next(&c, &f) || f.type != MI_UINT32 || f.n < 8 || mat_next(&c, &d) || d.type != MI_INT32 || d.n < 8 ||
        d.n % 4 || mat_next(&c, &nm) || (nm.type != MI_INT8 && nm.type != MI_UINT8))
        return -1;
    a->cls = f.data[0];
    a->numel = 1;
    for (size_t i = 0; i < d.n; i += 4) {
        uint32_t k = rd32(d.data + i);
        if (k > (1u << 24) || (k && a->numel > ((size_t)1 << 28) / k))
            return -1;
        a->numel *= k;
    }
    snprintf(a->name, sizeof a->name, "%.*s", (int)(nm.n < 63 ? nm.n : 63), (const char *)nm.data);
    a->rest = c;
    return 0;
}

/* a numeric scalar's value */
static int mat_number(const mat_arr *a, double *v)
{
    mat_cur c = a->rest;
    mat_el e;
    if (a->cls < 6 || a->cls > 15 || a->numel != 1 || mat_next(&c, &e))
        return -1;
    const uint8_t *p = e.data;
    uint32_t lo = e.n >= 4 ? rd32(p) : 0;
    switch (e.type) {
    case MI_INT8: *v = e.n >= 1 ? (int8_t)p[0] : -1; return e.n >= 1 ? 0 : -1;
    case MI_UINT8: *v = e.n >= 1 ? p[0] : -1; return e.n >= 1 ? 0 : -1;
    case MI_INT16: *v = e.n >= 2 ? (int16_t)(p[0] | p[1] << 8) : -1; return e.n >= 2 ? 0 : -1;
    case MI_UINT16: *v = e.n >= 2 ? (p[0] | p[1] << 8) : -1; return e.n >= 2 ? 0 : -1;
    case MI_INT32: *v = (int32_t)lo; return e.n >= 4 ? 0 : -1;
    case MI_UINT32: *v = lo; return e.n >= 4 ? 0 : -1;
    case MI_INT64: case MI_UINT64: *v = lo; return e.n >= 8 && rd32(p + 4) == 0 ? 0 : -1; /* IDs are small */
    case MI_SINGLE: {
        float f;
        memcpy(&f, p, 4);
        *v = f;
        return e.n >= 4 ? 0 : -1;
    }
    case MI_DOUBLE:
        if (e.n < 8)
            return -1;
        memcpy(v, p, 8);
        return 0;
    }
    return -1;
}

/* a character array's text (ASCII, at most out_len - 1 characters) */
static int mat_string(const mat_arr *a, char *out, size_t out_len)
{
    mat_cur c = a->rest;
    mat_el e;
    if (a->cls != MX_CHAR || a->numel >= out_len || mat_next(&c, &e))
        return -1;
    size_t w = e.type == MI_UINT16 ? 2 : e.type == MI_UINT8 || e.type == MI_INT8 || e.type == MI_UTF8 ? 1 : 0;
    if (!w || e.n < a->numel * w)
        return -1;
    for (size_t i = 0; i < a->numel; i++) {
        unsigned ch = w == 2 ? (unsigned)(e.data[2 * i] | e.data[2 * i + 1] << 8) : e.data[i];
        if (ch < 33 || ch > 126)
            return -1;
        out[i] = (char)ch;
    }
    out[a->numel] = 0;
    return 0;
}

/* the IDs and WNIDs of the struct array 'synsets' (an array already read by mat_array) */
static int mat_synsets(const mat_arr *a, const char *path, synsets *s)
{
    mat_cur c = a->rest;
    mat_el len, names;
    if (a->cls != MX_STRUCT || mat_next(&c, &len) || len.type != MI_INT32 || len.n != 4 ||
        mat_next(&c, &names) || (names.type != MI_INT8 && names.type != MI_UINT8)) {
        dt_error("--synsets %s: 'synsets' is not a struct array", path);
        return DT_ERR_INPUT;
    }
    size_t fl = rd32(len.data), nf = fl ? names.n / fl : 0;
    int f_id = -1, f_wnid = -1;
    for (size_t f = 0; f < nf; f++) {
        const char *fn = (const char *)names.data + f * fl;
        if (!strncmp(fn, "ILSVRC2012_ID", fl) && strnlen(fn, fl) == 13)
            f_id = (int)f;
        if (!strncmp(fn, "WNID", fl) && strnlen(fn, fl) == 4)
            f_wnid = (int)f;
    }
    if (f_id < 0 || f_wnid < 0) {
        dt_error("--synsets %s: 'synsets' has no field %s", path, f_id < 0 ? "ILSVRC2012_ID" : "WNID");
        return DT_ERR_INPUT;
    }
    for (size_t i = 0; i < a->numel; i++) {
        double id = 0;
        char wnid[WNID_MAX] = "";
        int bad = 0;
        for (size_t f = 0; f < nf && !bad; f++) {
            mat_el e;
            mat_arr fa;
            if (mat_next(&c, &e) || mat_array(&e, &fa))
                bad = 1;
            else if ((int)f == f_id)
                bad = mat_number(&fa, &id) || id != (double)(long)id || id < 1 || id > 1e6;
            else if ((int)f == f_wnid)
                bad = mat_string(&fa, wnid, sizeof wnid);
        }
        if (bad) {
            dt_error("--synsets %s: synsets(%zu): its ILSVRC2012_ID or WNID cannot be read (a positive whole number "
                     "and a WNID such as n01440764 expected)",
                     path, i + 1);
            return DT_ERR_INPUT;
        }
        char where[48];
        snprintf(where, sizeof where, "synsets(%zu)", i + 1);
        DT_TRY(synset_add(s, (long)id, wnid, path, where));
    }
    return DT_OK;
}

/* meta.mat's synsets */
static int read_meta_mat(const char *path, const uint8_t *b, size_t n, synsets *s)
{
    if (n < 128 || b[126] != 'I' || b[127] != 'M') {
        dt_error("--synsets %s: %s", path,
                 n >= 128 && b[126] == 'M' && b[127] == 'I' ? "a big-endian MAT file: dtpack reads little-endian ones"
                                                            : "a truncated MAT file header");
        return DT_ERR_INPUT;
    }
    mat_cur c = {b + 128, n - 128};
    mat_el e;
    while (c.n >= 8) {
        if (mat_next(&c, &e)) {
            dt_error("--synsets %s: an element at byte %zu runs past the end of the file (truncated?)", path,
                     (size_t)(c.p - b));
            return DT_ERR_INPUT;
        }
        uint8_t *raw = NULL;
        mat_el inner = e;
        if (e.type == MI_COMPRESSED) { /* one element, deflated: inflate it whole (it is small) */
            size_t cap = 4 * e.n + 4096;
            z_stream z = {0};
            int zr = inflateInit(&z);
            z.next_in = e.data;
            z.avail_in = (uInt)e.n;
            while (zr == Z_OK) {
                uint8_t *nr = realloc(raw, cap);
                if (!nr) {
                    zr = Z_MEM_ERROR;
                    break;
                }
                raw = nr;
                z.next_out = raw + z.total_out;
                z.avail_out = (uInt)(cap - z.total_out);
                zr = inflate(&z, Z_NO_FLUSH);
                if (zr == Z_OK || (zr == Z_BUF_ERROR && z.avail_out == 0)) {
                    zr = Z_OK;
                    cap *= 2;
                }
            }
            size_t got = z.total_out;
            inflateEnd(&z);
            mat_cur ic = {raw, got};
            if (zr != Z_STREAM_END || mat_next(&ic, &inner)) {
                dt_error("--synsets %s: a compressed element at byte %zu does not inflate: %s", path,
                         (size_t)(e.data - b) - 8, zr == Z_MEM_ERROR ? "out of memory" : "damaged data");
                free(raw);
                return zr == Z_MEM_ERROR ? DT_ERR_NOMEM : DT_ERR_INPUT;
            }
        }
        mat_arr a;
        int rc = DT_OK, found = 0;
        if (inner.type == MI_MATRIX && mat_array(&inner, &a) == 0 && !strcmp(a.name, "synsets")) {
            rc = mat_synsets(&a, path, s);
            found = 1;
        }
        free(raw);
        if (found)
            return rc;
    }
    dt_error("--synsets %s: no variable 'synsets' in this MAT file (the devkit's data/meta.mat has it)", path);
    return DT_ERR_INPUT;
}

/* --synsets: meta.mat, or "<ILSVRC2012_ID> <WNID>[ words]" lines */
static int read_synsets(const char *path, synsets *s)
{
    char *b;
    size_t n;
    DT_TRY(slurp("--synsets", path, &b, &n));
    int rc = DT_OK;
    if (n >= 19 && !memcmp(b, "MATLAB 5.0 MAT-file", 19)) {
        rc = read_meta_mat(path, (const uint8_t *)b, n, s);
    } else if (n >= 10 && !memcmp(b, "MATLAB 7.3", 10)) {
        dt_error("--synsets %s: a MATLAB 7.3 (HDF5) file: dtpack reads the devkit's meta.mat, MATLAB 5.0", path);
        rc = DT_ERR_INPUT;
    } else {
        char *p = b, *l;
        for (int line = 1; rc == DT_OK && (l = next_line(&p, b + n)); line++) {
            char wnid[WNID_MAX], where[32];
            long id;
            int used = 0;
            if (!*l)
                continue;
            if (sscanf(l, "%ld %31s%n", &id, wnid, &used) != 2 || id < 1 || (l[used] && l[used] != ' ')) {
                dt_error("--synsets %s: line %d: '%.40s' is not '<ILSVRC2012_ID> <WNID>': the devkit's IDs are not in "
                         "WNID order (ID 1 is n02119789), so a list by position such as LOC_synset_mapping.txt "
                         "cannot say which ID is which; give the devkit's data/meta.mat",
                         path, line, l);
                rc = DT_ERR_INPUT;
                break;
            }
            snprintf(where, sizeof where, "line %d", line);
            rc = synset_add(s, id, wnid, path, where);
        }
        if (rc == DT_OK && s->n == 0) {
            dt_error("--synsets %s: no '<ILSVRC2012_ID> <WNID>' lines", path);
            rc = DT_ERR_INPUT;
        }
    }
    free(b);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* the ground truth: ImageId -> class                                                             */

typedef struct gt_entry {
    char stem[STEM_MAX]; /* ImageId: the file name without its extension */
    int32_t label;
    int line, used;
} gt_entry;

static int cmp_stem(const void *a, const void *b)
{
    return strcmp(((const gt_entry *)a)->stem, ((const gt_entry *)b)->stem);
}

/* the WNID's class, or one line naming the ground truth's line */
static int label_of(const char *gt, int line, const char *image, const char *wnid, const char *how,
                    char *const *classes, int n_classes, const char *classes_dir, int32_t *label)
{
    int c = class_of(wnid, classes, n_classes);
    if (c < 0) {
        dt_error("--val-labels %s: line %d: %s is %s%s, not among the %d class folders of %s", gt, line, image, wnid,
                 how, n_classes, classes_dir);
        return DT_ERR_INPUT;
    }
    *label = c;
    return DT_OK;
}

static int read_gt(const char *gt, const char *synsets_path, char *const *classes, int n_classes,
                   const char *classes_dir, gt_entry **out, size_t *n_out)
{
    char *b;
    size_t n;
    DT_TRY(slurp("--val-labels", gt, &b, &n));
    int csv = n >= 8 && !memcmp(b, "ImageId,", 8);
    synsets syn = {0};
    gt_entry *v = NULL;
    size_t nv = 0, cap = 0;
    int rc = DT_OK;
    if (csv && synsets_path) {
        dt_error("--synsets %s: %s is Kaggle's LOC_val_solution.csv, which names the WNIDs itself: --synsets is for "
                 "the devkit's ILSVRC2012_validation_ground_truth.txt",
                 synsets_path, gt);
        rc = DT_ERR_INPUT;
    } else if (!csv && !synsets_path) {
        dt_error("--val-labels %s: the devkit's ground truth gives class IDs, not WNIDs: add --synsets with the "
                 "devkit's data/meta.mat, which says which WNID each ID is",
                 gt);
        rc = DT_ERR_INPUT;
    } else if (!csv) {
        rc = read_synsets(synsets_path, &syn);
    }
    char *p = b, *l;
    int line = 0;
    if (rc == DT_OK && csv) {
        l = next_line(&p, b + n);
        line = 1;
        if (strcmp(l, "ImageId,PredictionString") != 0) {
            dt_error("--val-labels %s: line 1: '%.60s' is not LOC_val_solution.csv's header ImageId,PredictionString",
                     gt, l);
            rc = DT_ERR_INPUT;
        }
    }
    while (rc == DT_OK && (l = next_line(&p, b + n))) {
        line++;
        if (!*l && p >= b + n)
            break; /* the last line's newline */
        if ((rc = dt_grow((void **)&v, &cap, nv + 1, sizeof *v)) != DT_OK)
            break;
        gt_entry *e = &v[nv];
        memset(e, 0, sizeof *e);
        e->line = line;
        if (csv) {
            char *comma = strchr(l, ','), wnid[WNID_MAX] = "";
            if (!comma || comma == l || comma - l >= STEM_MAX || sscanf(comma + 1, "%31s", wnid) != 1) {
                dt_error("--val-labels %s: line %d: '%.60s' is not 'ImageId,WNID ...'", gt, line, l);
                rc = DT_ERR_INPUT;
                break;
            }
            snprintf(e->stem, STEM_MAX, "%.*s", (int)(comma - l), l);
            rc = label_of(gt, line, e->stem, wnid, "", classes, n_classes, classes_dir, &e->label);
        } else {
            char *end;
            errno = 0;
            long id = strtol(l, &end, 10);
            while (*end == ' ' || *end == '\t')
                end++;
            snprintf(e->stem, STEM_MAX, "ILSVRC2012_val_%08d", line);
            const synset *sy = end != l && !*end && !errno ? synset_find(&syn, id) : NULL;
            if (end == l || *end || errno) {
                dt_error("--val-labels %s: line %d: '%.40s' is not a class ID (one ILSVRC2012_ID per line)", gt, line,
                         l);
                rc = DT_ERR_INPUT;
            } else if (!sy) {
                dt_error("--val-labels %s: line %d: class ID %ld is out of range: not among the %zu ILSVRC2012_IDs of "
                         "--synsets %s",
                         gt, line, id, syn.n, synsets_path);
                rc = DT_ERR_INPUT;
            } else {
                char how[64];
                snprintf(how, sizeof how, " (class ID %ld)", id);
                rc = label_of(gt, line, e->stem, sy->wnid, how, classes, n_classes, classes_dir, &e->label);
            }
        }
        nv++;
    }
    if (rc == DT_OK && nv == 0) {
        dt_error("--val-labels %s: no labels in it", gt);
        rc = DT_ERR_INPUT;
    }
    free(syn.v);
    free(b);
    if (rc != DT_OK) {
        free(v);
        return rc;
    }
    *out = v;
    *n_out = nv;
    return DT_OK;
}

int dt_pack_ilsvrc_labels(const char *dir, char *const *files, int n_files, char *const *classes, int n_classes,
                          const char *classes_dir, const char *gt, const char *synsets_path, int32_t *labels)
{
    gt_entry *v;
    size_t nv;
    DT_TRY(read_gt(gt, synsets_path, classes, n_classes, classes_dir, &v, &nv));
    qsort(v, nv, sizeof *v, cmp_stem);
    int rc = DT_OK;
    for (size_t i = 1; i < nv && rc == DT_OK; i++)
        if (!strcmp(v[i - 1].stem, v[i].stem)) {
            int a = v[i - 1].line < v[i].line ? v[i - 1].line : v[i].line, b = v[i - 1].line ^ v[i].line ^ a;
            dt_error("--val-labels %s: lines %d and %d both label %s (a duplicate entry)", gt, a, b, v[i].stem);
            rc = DT_ERR_INPUT;
        }
    /* each file's ImageId is its name without the extension: files in val/ and the ground truth
     * must pair one to one */
    int unlabelled = 0, first_unlabelled = -1;
    for (int i = 0; i < n_files && rc == DT_OK; i++) {
        gt_entry key;
        const char *dot = strrchr(files[i], '.');
        size_t len = dot && dot != files[i] ? (size_t)(dot - files[i]) : strlen(files[i]);
        snprintf(key.stem, STEM_MAX, "%.*s", (int)len, files[i]);
        gt_entry *e = len < STEM_MAX ? bsearch(&key, v, nv, sizeof *v, cmp_stem) : NULL;
        if (!e) {
            if (!unlabelled++)
                first_unlabelled = i;
            continue;
        }
        if (e->used) {
            dt_error("%s: %s and %s are both ImageId %s of --val-labels %s (a duplicate entry)", dir,
                     files[e->used - 1], files[i], e->stem, gt);
            rc = DT_ERR_INPUT;
        }
        e->used = i + 1;
        labels[i] = e->label;
    }
    if (rc == DT_OK && unlabelled) {
        dt_error("%s/%s: no label in --val-labels %s (%d file%s of %s without one)", dir, files[first_unlabelled], gt,
                 unlabelled, unlabelled > 1 ? "s" : "", dir);
        rc = DT_ERR_INPUT;
    }
    size_t missing = 0, first_missing = 0;
    for (size_t i = 0; i < nv && rc == DT_OK; i++)
        if (!v[i].used && !missing++)
            first_missing = i;
    if (rc == DT_OK && missing) {
        dt_error("--val-labels %s: line %d: %s has no file in %s (%zu label%s for missing files)", gt,
                 v[first_missing].line, v[first_missing].stem, dir, missing, missing > 1 ? "s" : "");
        rc = DT_ERR_INPUT;
    }
    free(v);
    return rc;
}
