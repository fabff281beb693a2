/* tbevents.c: TensorBoard event files, TFRecord framing and protobuf encoding by hand (contract in
 * tbevents.h). Each record is built in one buffer, [length | crc | Event | crc], and written with one
 * fwrite, so a crash leaves at most the last record cut short (TensorBoard skips a truncated tail). */
#include "config.h"

#include "train/tbevents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

_Static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE 754 binary64 and binary32 expected");

struct dt_tb {
    FILE *file;
    char *path;
    uint8_t *buf; /* the record being built */
    size_t cap;
};

uint32_t dt_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* --- protobuf wire format: little-endian, whatever the host ------------------------------------ */
enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
/* field numbers: tensorboard/compat/proto/event.proto, summary.proto */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

/* field keys here are all below 16: one byte */
static uint8_t *put_key(uint8_t *p, int field, int wire)
{
    *p++ = (uint8_t)((field << 3) | wire);
    return p;
}

static uint8_t *put_double(uint8_t *p, int field, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return put_le64(put_key(p, field, WIRE_FIXED64), u);
}

static uint8_t *put_bytes(uint8_t *p, int field, const void *s, size_t n)
{
    p = put_varint(put_key(p, field, WIRE_LEN), n);
    memcpy(p, s, n);
    return p + n;
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- records ------------------------------------------------------------------------------------ */
/* Room for a record around an Event of n bytes; returns where the Event goes, or NULL (logged). */
static uint8_t *record_begin(dt_tb *w, size_t n)
{
    if (dt_grow((void **)&w->buf, &w->cap, 16 + n, 1) != DT_OK) {
        dt_error("%s: out of memory for a %zu-byte event", w->path, n);
        return NULL;
    }
    return w->buf + 12;
}

/* Frames the n-byte Event at w->buf + 12 and writes the record. */
static int record_end(dt_tb *w, size_t n)
{
    uint8_t *b = w->buf;
    put_le64(b, (uint64_t)n);
    put_le32(b + 8, dt_crc32c_mask(dt_crc32c(b, 8)));
    put_le32(b + 12 + n, dt_crc32c_mask(dt_crc32c(b + 12, n)));
    if (fwrite(b, 1, 16 + n, w->file) != 16 + n) {
        dt_error("%s: cannot write a TensorBoard event: %s", w->path, strerror(errno));
        return DT_ERR_SYS;
    }
    return DT_OK;
}

int dt_tb_scalar(dt_tb *w, const char *tag, int64_t step, double value)
{
    if (!w || !tag) {
        dt_error("dt_tb_scalar: %s is NULL", w ? "the tag" : "the writer");
        return DT_ERR_STATE;
    }
    size_t tlen = strlen(tag);
    size_t vlen = 1 + varint_len(tlen) + tlen + 1 + 4; /* Value {tag, simple_value} */
    size_t slen = 1 + varint_len(vlen) + vlen;         /* Summary {value} */
    size_t n = 9 + 1 + varint_len((uint64_t)step) + 1 + varint_len(slen) + slen;
    uint8_t *p0 = record_begin(w, n), *p = p0;
    if (!p)
        return DT_ERR_NOMEM;
    p = put_double(p, EVENT_WALL_TIME, wall_time());
    p = put_varint(put_key(p, EVENT_STEP, WIRE_VARINT), (uint64_t)step); /* int64: two's complement */
    p = put_varint(put_key(p, EVENT_SUMMARY, WIRE_LEN), slen);
    p = put_varint(put_key(p, SUMMARY_VALUE, WIRE_LEN), vlen);
    p = put_bytes(p, VALUE_TAG, tag, tlen);
    float f = (float)value;
    uint32_t u;
    memcpy(&u, &f, 4);
    p = put_le32(put_key(p, VALUE_SIMPLE_VALUE, WIRE_FIXED32), u); /* in a oneof: written even when 0 */
    if ((size_t)(p - p0) != n) {
        dt_error("%s: internal error: event of %zu bytes, %zu expected", w->path, (size_t)(p - p0), n);
        return DT_ERR_STATE;
    }
    return record_end(w, n);
}

static int write_file_version(dt_tb *w)
{
    static const char version[] = "brain.Event:2";
    size_t vl = sizeof version - 1;
    size_t n = 9 + 1 + varint_len(vl) + vl;
    uint8_t *p = record_begin(w, n);
    if (!p)
        return DT_ERR_NOMEM;
    put_bytes(put_double(p, EVENT_WALL_TIME, wall_time()), EVENT_FILE_VERSION, version, vl);
    return record_end(w, n);
}

/* --- the file ----------------------------------------------------------------------------------- */
/* The short host name (up to the first dot), made safe for a file name. */
static void short_host(char *h, size_t size)
{
    if (gethostname(h, size) != 0)
        h[0] = '\0';
    h[size - 1] = '\0';
    h[strcspn(h, ".")] = '\0';
    for (char *c = h; *c; c++)
        if (*c == '/')
            *c = '_';
    if (!h[0])
        snprintf(h, size, "localhost");
}

int dt_tb_open(dt_tb **out, const char *dir)
{
    *out = NULL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        dt_error("TensorBoard directory %s: cannot create it: %s", dir, strerror(errno));
        return DT_ERR_SYS;
    }
    dt_tb *w = calloc(1, sizeof *w);
    DT_CHECK_ALLOC(w);
    char host[256];
    short_host(host, sizeof host);
    long long secs = (long long)time(NULL);
    long pid = (long)getpid();
    int rc = DT_OK;
    /* ".0" as TensorFlow names a process's first writer; a name taken (a second writer in the same
     * second) moves on to the next number rather than appending to another writer's file */
    for (int i = 0; i < 1000 && !w->file; i++) {
        free(w->path);
        w->path = NULL;
        if (asprintf(&w->path, "%s/events.out.tfevents.%lld.%s.%ld.%d", dir, secs, host, pid, i) < 0) {
            w->path = NULL;
            dt_error("TensorBoard events file in %s: out of memory for its name", dir);
            rc = DT_ERR_NOMEM;
            goto fail;
        }
        w->file = fopen(w->path, "wbx");
        if (!w->file && errno != EEXIST) {
            dt_error("%s: cannot create the TensorBoard events file: %s", w->path, strerror(errno));
            rc = DT_ERR_SYS;
            goto fail;
        }
    }
    if (!w->file) {
        dt_error("%s: cannot create the TensorBoard events file: %s", w->path, strerror(EEXIST));
        rc = DT_ERR_SYS;
        goto fail;
    }
    DT_TRY_GOTO(write_file_version(w), rc, fail);
    DT_TRY_GOTO(dt_tb_flush(w), rc, fail);
    *out = w;
    return DT_OK;
fail:
    if (w->file) {
        fclose(w->file);
        unlink(w->path);
    }
    free(w->path);
    free(w->buf);
    free(w);
    return rc;
}

const char *dt_tb_path(const dt_tb *w)
{
    return w->path;
}

int dt_tb_flush(dt_tb *w)
{
    if (fflush(w->file) != 0 || fsync(fileno(w->file)) != 0) {
        dt_error("%s: cannot flush the TensorBoard events: %s", w->path, strerror(errno));
        return DT_ERR_SYS;
    }
    return DT_OK;
}

void dt_tb_close(dt_tb *w)
{
    if (!w)
        return;
    int flushed = dt_tb_flush(w) == DT_OK; /* logs its own error */
    if (fclose(w->file) != 0 && flushed)
        dt_error("%s: cannot close the TensorBoard events file: %s", w->path, strerror(errno));
    free(w->path);
    free(w->buf);
    free(w);
}
