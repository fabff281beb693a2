/* shard.h: the HDF5 shard format (doc/formats.md, schema "dtrain-shard" version 1): writing shards
 * and their manifest atomically (dtpack), and opening a packed split for reading (the loader).
 *
 * A packed dataset is a directory: <split>-<NNNNN>.h5 shards and one manifest.tsv listing them with
 * counts, sizes and CRC-32s. A shard is "encoded" (JPEG bytes concatenated in one contiguous 1-D
 * uint8 dataset with int64 offsets) or "raw" (uint8 pixels [N, H, W, C]). Images are read with
 * pread() at the dataset's file address, so reader threads never take HDF5's global lock. */
#ifndef DT_DATA_SHARD_H
#define DT_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "util/crc.h" /* dt_crc32: the manifest's checksums */

#ifdef __cplusplus
extern "C" {
#endif

#define DT_SHARD_SCHEMA "dtrain-shard"
#define DT_SHARD_VERSION 1
#define DT_MANIFEST_NAME "manifest.tsv"
#define DT_MANIFEST_HEADER "# dtrain-manifest 1"

enum dt_shard_kind { DT_SHARD_ENCODED, DT_SHARD_RAW };


/* ---- writing (dtpack) ------------------------------------------------------------------------ */

/* One split's classes and where its shards go. */
typedef struct dt_shard_spec {
    const char *dir;            /* output directory (exists) */
    const char *split;          /* "train", "val", "test" */
    enum dt_shard_kind kind;
    int num_classes;
    const char *const *classes; /* num_classes names (wnids in sorted order, or class names) */
    int h, w, c;                /* raw shards: image shape */
    const char *source;         /* what was packed (for the shard's "source" attribute) */
} dt_shard_spec;

/* A shard being filled in memory, then written in one go to <dir>/.<split>-<NNNNN>.h5.tmp and
 * renamed to its name once complete and synced. */
typedef struct dt_shard_writer {
    dt_shard_spec spec;
    int index;                  /* NNNNN */
    int64_t count;
    uint8_t *data;              /* encoded bytes or raw pixels */
    size_t bytes, cap;
    int64_t *offsets;           /* encoded: count + 1 */
    int32_t *labels;
    char **names;               /* source names (may be NULL entries) */
    size_t cap_offsets, cap_labels, cap_names; /* allocated elements of each array */
} dt_shard_writer;

void dt_shard_writer_init(dt_shard_writer *w, const dt_shard_spec *spec, int index);
/* Appends one image (encoded bytes, or h*w*c raw pixels). DT_OK or DT_ERR_NOMEM. */
int dt_shard_writer_add(dt_shard_writer *w, const uint8_t *data, size_t bytes, int32_t label, const char *name);
/* Writes the shard (temporary name, fsync, rename); fills its manifest line values. Resets the
 * writer for reuse with the next index. Errors are logged naming the file; a failure at any step
 * (H5Fcreate included) leaves no temporary file. */
int dt_shard_writer_flush(dt_shard_writer *w, char *file, size_t file_len, int64_t *count, uint64_t *bytes,
                          uint32_t *crc);
void dt_shard_writer_free(dt_shard_writer *w);

/* One manifest line. */
typedef struct dt_manifest_entry {
    char split[16];
    char file[64];
    int64_t count;
    uint64_t bytes;
    uint32_t crc;
} dt_manifest_entry;

/* Writes <dir>/manifest.tsv atomically (temporary name, fsync, rename); a failure leaves no
 * temporary behind. */
int dt_manifest_write(const char *dir, const dt_manifest_entry *e, int n);
/* Reads <dir>/manifest.tsv; *e is malloc'd. Refuses, with one line naming the file (and the line),
 * returning DT_ERR_INPUT: anything but a regular file (a FIFO is refused without blocking), an
 * empty file, a wrong first line, a malformed line, a shard file listed twice. A manifest with no
 * shard lines (a split being packed) reads as n = 0. */
int dt_manifest_read(const char *dir, dt_manifest_entry **e, int *n);

/* Opens path read-only without blocking on it (open() and read() of a FIFO with no writer never
 * return) and refuses anything but a regular file. Returns the descriptor (blocking again,
 * close-on-exec) and the file's size in *size, or -1 after one line: "<path>: cannot open the
 * <what>: <reason>[ (<hint>)]" or "<path>: the <what> is a FIFO, not a regular file". hint
 * (optional) follows a failed open. */
int dt_open_regular(const char *path, const char *what, const char *hint, uint64_t *size);

/* ---- reading (the loader) -------------------------------------------------------------------- */

typedef struct dt_shard {
    char path[4096];
    int fd;
    int64_t count;
    int64_t first;              /* global index of its first image */
    uint64_t data_addr;         /* file address of /images or /pixels (contiguous) */
    int64_t *offsets;           /* encoded: count + 1 offsets into /images */
} dt_shard;

typedef struct dt_dataset {
    char dir[4096];
    char split[16];
    enum dt_shard_kind kind;
    int num_classes;
    char **classes;
    int h, w, c;                /* raw: image shape */
    int64_t count;              /* images over all shards */
    int n_shards;
    dt_shard *shards;
    int32_t *labels;            /* count labels, global order */
} dt_dataset;

/* Opens every shard of `split` listed in dir's manifest and checks it: a regular file (a FIFO or a
 * directory is refused before anything reads it), schema and version, the manifest's count and
 * size, the same classes and kind in every shard, contiguous data, offsets that increase and end
 * at the data's size, labels within the classes. verify_crc also reads every file in full against
 * the manifest's CRC-32. Each failure is one line naming the manifest or the shard (and the
 * index), returning DT_ERR_INPUT. */
int dt_dataset_open(dt_dataset *ds, const char *dir, const char *split, int verify_crc);
void dt_dataset_close(dt_dataset *ds);

/* The checks across splits that dtrain makes at start-up and dtpack verify makes for every split:
 * `other` (val, ...) has the kind, the class list (names in the same order) and, raw, the image
 * shape of `ref` (train). DT_OK, or DT_ERR_INPUT after one line naming both splits' first shards
 * (and the first class index that differs). */
int dt_dataset_check_splits(const dt_dataset *ref, const dt_dataset *other);

/* Bytes of image i (global index): encoded size, or h*w*c for raw. */
size_t dt_dataset_item_bytes(const dt_dataset *ds, int64_t i);
/* Reads image i into buf (at least dt_dataset_item_bytes). Thread-safe (pread). On a short read or
 * I/O error logs one line naming the shard, the index and the file. */
int dt_dataset_read(const dt_dataset *ds, int64_t i, uint8_t *buf);
/* The shard holding global index i, and i's index inside it. */
const dt_shard *dt_dataset_locate(const dt_dataset *ds, int64_t i, int64_t *local);

#ifdef __cplusplus
}
#endif
#endif
