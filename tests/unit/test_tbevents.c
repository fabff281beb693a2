/* test_tbevents.c: the TensorBoard event writer.
 *   - CRC-32C: the check value, RFC 3720 (iSCSI) B.4 vectors, and a bitwise reference on random data;
 *   - a file of scalars read back here: its name, the framing of every record (length, both masked
 *     CRCs), the record count, and each Event decoded by a small protobuf reader (file_version, tag,
 *     step, simple_value bits), including a negative step, a zero value and a tag over 127 bytes;
 *   - a second writer in the same directory gets its own file; a bad directory gives DT_ERR_SYS and
 *     one error line naming it.
 * test_tbevents --write DIR writes the scalars tests/train/tbevents.sh expects (read there by
 * tests/tools/tfevents_dump.py through TensorBoard or protobuf), prints the file's path, exits 0. */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "train/tbevents.h"
#include "util/check.h"

static uint32_t crc_bitwise(const uint8_t *b, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* --- a small protobuf reader: just what an Event with a scalar needs ---------------------------- */
typedef struct {
    const uint8_t *p, *end;
} rd;

static int rd_varint(rd *r, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && r->p < r->end; s += 7) {
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* Next field: its number, wire type, and its value (varint, fixed) or bytes (length-delimited). */
static int rd_field(rd *r, int *field, int *wire, uint64_t *v, rd *sub)
{
    uint64_t key;
    if (r->p >= r->end || !rd_varint(r, &key))
        return 0;
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0:
        return rd_varint(r, v);
    case 1:
    case 5: {
        int n = *wire == 1 ? 8 : 4;
        if (r->end - r->p < n)
            return 0;
        *v = get_le(r->p, n);
        r->p += n;
        return 1;
    }
    case 2:
        if (!rd_varint(r, v) || (uint64_t)(r->end - r->p) < *v)
            return 0;
        sub->p = r->p;
        sub->end = r->p + *v;
        r->p += *v;
        return 1;
    default:
        return 0;
    }
}

typedef struct {
    int ok;
    double wall_time;
    int64_t step;
    char version[32];
    char tag[256];
    uint32_t value_bits;
    int n_values, has_value;
} event;

static void decode_value(rd v, event *e)
{
    int f, w;
    uint64_t x;
    rd s;
    e->n_values++;
    while (v.p < v.end) {
        if (!rd_field(&v, &f, &w, &x, &s)) {
            e->ok = 0;
            return;
        }
        if (f == 1 && w == 2 && x < sizeof e->tag) {
            memcpy(e->tag, s.p, x);
            e->tag[x] = '\0';
        } else if (f == 2 && w == 5) {
            e->value_bits = (uint32_t)x;
            e->has_value = 1;
        } else {
            e->ok = 0;
        }
    }
}

static event decode_event(const uint8_t *p, size_t n)
{
    event e = {.ok = 1};
    rd r = {p, p + n}, s, t;
    int f, w, f2, w2;
    uint64_t x, x2;
    while (e.ok && r.p < r.end) {
        if (!rd_field(&r, &f, &w, &x, &s)) {
            e.ok = 0;
        } else if (f == 1 && w == 1) {
            memcpy(&e.wall_time, &x, 8);
        } else if (f == 2 && w == 0) {
            e.step = (int64_t)x;
        } else if (f == 3 && w == 2 && x < sizeof e.version) {
            memcpy(e.version, s.p, x);
            e.version[x] = '\0';
        } else if (f == 5 && w == 2) {
            while (e.ok && s.p < s.end) {
                if (!rd_field(&s, &f2, &w2, &x2, &t) || f2 != 1 || w2 != 2)
                    e.ok = 0;
                else
                    decode_value(t, &e);
            }
        } else {
            e.ok = 0;
        }
    }
    return e;
}

/* --- the file ----------------------------------------------------------------------------------- */
#define MAX_RECORDS 64

typedef struct {
    uint8_t *data;
    size_t size;
    int n, framing_ok;
    size_t off[MAX_RECORDS], len[MAX_RECORDS];
} file;

/* Reads path and checks the framing of every record; framing_ok is 0 at the first bad one. */
static file read_records(const char *path)
{
    file fl = {.framing_ok = 1};
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        fl.framing_ok = 0;
        if (f)
            fclose(f);
        return fl;
    }
    long sz = ftell(f);
    rewind(f);
    fl.data = malloc(sz > 0 ? (size_t)sz : 1);
    fl.size = fl.data && sz > 0 ? fread(fl.data, 1, (size_t)sz, f) : 0;
    fclose(f);
    size_t o = 0;
    while (o < fl.size && fl.framing_ok) {
        const uint8_t *b = fl.data + o;
        if (fl.size - o < 12 || fl.n == MAX_RECORDS) {
            tap_diag("record %d: %zu bytes left, not a header", fl.n, fl.size - o);
            fl.framing_ok = 0;
            break;
        }
        uint64_t len = get_le(b, 8);
        if ((uint32_t)get_le(b + 8, 4) != dt_crc32c_mask(crc_bitwise(b, 8))) {
            tap_diag("record %d: the length's CRC is wrong", fl.n);
            fl.framing_ok = 0;
        } else if (len > fl.size - o - 12 || fl.size - o - 12 - len < 4) {
            tap_diag("record %d: length %llu runs past the end", fl.n, (unsigned long long)len);
            fl.framing_ok = 0;
        } else if ((uint32_t)get_le(b + 12 + len, 4) != dt_crc32c_mask(crc_bitwise(b + 12, len))) {
            tap_diag("record %d: the data's CRC is wrong", fl.n);
            fl.framing_ok = 0;
        } else {
            fl.off[fl.n] = o + 12;
            fl.len[fl.n] = len;
            fl.n++;
            o += 16 + len;
        }
    }
    return fl;
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char path[4096];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) != 0)
            rm_tree(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The set tests/train/tbevents.sh expects, in this order. */
static int write_known(const char *dir)
{
    dt_tb *w;
    int rc = dt_tb_open(&w, dir);
    if (rc != DT_OK)
        return rc;
    static const double loss[] = {2.5, 1.25, 0.625};
    for (int s = 1; s <= 3 && rc == DT_OK; s++) {
        rc = dt_tb_scalar(w, "Loss/train", s, loss[s - 1]);
        if (rc == DT_OK && s == 1)
            rc = dt_tb_scalar(w, "Lr", s, 0.1);
        if (rc == DT_OK)
            rc = dt_tb_scalar(w, "LossScale", s, 65536);
    }
    if (rc == DT_OK)
        rc = dt_tb_flush(w);
    if (rc == DT_OK)
        printf("%s\n", dt_tb_path(w));
    dt_tb_close(w);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write"))
        return write_known(argv[2]) == DT_OK ? 0 : 1;
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
        return 2;
    }

    /* CRC-32C */
    TAP_OK(dt_crc32c("123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = 0x%08x", dt_crc32c("123456789", 9));
    TAP_OK(dt_crc32c("", 0) == 0, "crc32c of nothing is 0");
    uint8_t v[32];
    memset(v, 0, 32);
    uint32_t c0 = dt_crc32c(v, 32);
    memset(v, 0xff, 32);
    uint32_t c1 = dt_crc32c(v, 32);
    for (int i = 0; i < 32; i++)
        v[i] = (uint8_t)i;
    uint32_t c2 = dt_crc32c(v, 32);
    for (int i = 0; i < 32; i++)
        v[i] = (uint8_t)(31 - i);
    uint32_t c3 = dt_crc32c(v, 32);
    TAP_OK(c0 == 0x8A9136AAu && c1 == 0x62A8AB43u && c2 == 0x46DD794Eu && c3 == 0x113FDB5Cu,
           "RFC 3720 B.4: zeros 0x%08x, ones 0x%08x, incrementing 0x%08x, decrementing 0x%08x", c0, c1, c2, c3);
    uint8_t buf[1024];
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (size_t n = 0; n <= sizeof buf; n += 1 + n / 8) {
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        bad += dt_crc32c(buf, n) != crc_bitwise(buf, n);
    }
    TAP_OK(bad == 0, "table-driven CRC equals the bitwise one on random data (%d differ)", bad);
    TAP_OK(dt_crc32c_mask(0) == 0xa282ead8u && dt_crc32c_mask(0x12345678u) == ((0x12345678u >> 15 | 0x12345678u << 17) + 0xa282ead8u),
           "mask");

    const char *td = getenv("TMPDIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/dtrain-tbevents.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(root)) {
        TAP_OK(0, "mkdtemp %s", root);
        return tap_done();
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tb", root);

    /* a file of scalars */
    dt_tb *w = NULL;
    time_t t0 = time(NULL);
    TAP_OK(dt_tb_open(&w, dir) == DT_OK && w, "open (creating %s)", dir);
    if (!w) {
        rm_tree(root);
        return tap_done();
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", dt_tb_path(w));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = '\0';
    char want_name[512];
    snprintf(want_name, sizeof want_name, "/events\\.out\\.tfevents\\.[0-9]+\\.%s\\.%ld\\.0$", host, (long)getpid());
    TAP_OK(tap_match(path, want_name) && !strncmp(path, dir, strlen(dir)), "name: %s", path);
    long long secs = atoll(strstr(path, "tfevents.") + 9);
    TAP_OK(secs >= (long long)t0 - 1 && secs <= (long long)time(NULL) + 1, "seconds in the name: %lld", secs);

    char long_tag[201];
    memset(long_tag, 'x', 200);
    long_tag[200] = '\0';
    memcpy(long_tag, "Long/", 5);
    struct {
        const char *tag;
        int64_t step;
        double value;
    } sc[] = {{"Loss/train", 1, 2.5}, {"Lr", 1, 0.1}, {"Loss/train", 200, 0.625}, {"Zero", 3, 0.0},
              {"Neg", -5, -1e30}, {"Big", INT64_C(1) << 40, 65536}, {long_tag, 7, 3.0}};
    int n_sc = (int)(sizeof sc / sizeof sc[0]);
    int rc = DT_OK;
    for (int i = 0; i < n_sc && rc == DT_OK; i++)
        rc = dt_tb_scalar(w, sc[i].tag, sc[i].step, sc[i].value);
    TAP_OK(rc == DT_OK, "%d scalars written", n_sc);
    tap_log_begin();
    TAP_OK(dt_tb_scalar(w, NULL, 1, 1.0) == DT_ERR_STATE, "a NULL tag is refused");
    free(tap_log_take());
    tap_log_end();
    TAP_OK(dt_tb_flush(w) == DT_OK, "flush");
    dt_tb_close(w);
    dt_tb_close(NULL);

    file fl = read_records(path);
    TAP_OK(fl.framing_ok && fl.size > 0, "framing: every length and data CRC checks (%zu bytes)", fl.size);
    TAP_OK(fl.n == 1 + n_sc, "%d records, %d expected", fl.n, 1 + n_sc);
    if (fl.n >= 1) {
        event e = decode_event(fl.data + fl.off[0], fl.len[0]);
        TAP_OK(e.ok && !strcmp(e.version, "brain.Event:2") && e.n_values == 0 && e.step == 0,
               "record 0: file_version '%s'", e.version);
        TAP_OK(e.wall_time >= (double)t0 - 1 && e.wall_time <= (double)time(NULL) + 1 && e.wall_time != (double)(long long)e.wall_time,
               "record 0: wall_time %.6f, now, with a fractional part", e.wall_time);
    }
    int bad_ev = 0;
    for (int i = 0; i < n_sc && i + 1 < fl.n; i++) {
        event e = decode_event(fl.data + fl.off[i + 1], fl.len[i + 1]);
        float want = (float)sc[i].value;
        uint32_t want_bits;
        memcpy(&want_bits, &want, 4);
        if (!e.ok || e.n_values != 1 || !e.has_value || strcmp(e.tag, sc[i].tag) || e.step != sc[i].step ||
            e.value_bits != want_bits || e.version[0] || e.wall_time < (double)t0 - 1) {
            tap_diag("record %d: ok %d, %d values, tag '%s', step %lld, value %g", i + 1, e.ok, e.n_values, e.tag,
                     (long long)e.step, (double)bits_f(e.value_bits));
            bad_ev++;
        }
    }
    TAP_OK(bad_ev == 0, "each scalar decodes to its tag, step and float value (%d wrong)", bad_ev);
    free(fl.data);

    /* a second writer in the same directory and second: its own file */
    dt_tb *w2 = NULL;
    int rc2 = dt_tb_open(&w2, dir);
    TAP_OK(rc2 == DT_OK && w2 && strcmp(dt_tb_path(w2), path) != 0, "a second writer: %s", w2 ? dt_tb_path(w2) : "(none)");
    if (w2) {
        file f2 = read_records(dt_tb_path(w2));
        file f1 = read_records(path);
        TAP_OK(f2.framing_ok && f2.n == 1 && f1.framing_ok && f1.n == 1 + n_sc, "the first file is untouched");
        free(f1.data);
        free(f2.data);
    }
    dt_tb_close(w2);

    /* bad directories */
    char file_path[4300], bad_dir[4400];
    snprintf(file_path, sizeof file_path, "%s/file", root);
    FILE *f = fopen(file_path, "w");
    if (f)
        fclose(f);
    snprintf(bad_dir, sizeof bad_dir, "%s/sub", file_path);
    const char *bads[] = {bad_dir, file_path, "/nonexistent-dtrain-dir/a/b"};
    for (int i = 0; i < 3; i++) {
        tap_log_begin();
        dt_tb *wb = (dt_tb *)1;
        int brc = dt_tb_open(&wb, bads[i]);
        char *log = tap_log_take();
        tap_log_end();
        int lines = tap_count_lines(log);
        log[strcspn(log, "\n")] = '\0';
        TAP_OK(brc == DT_ERR_SYS && wb == NULL && lines == 1 && strstr(log, "error:") &&
                   strstr(log, bads[i]) && tap_match(log, "Not a directory|No such file"),
               "bad directory %s: DT_ERR_SYS, one line: %s", bads[i], log);
        free(log);
    }

    rm_tree(root);
    return tap_done();
}
