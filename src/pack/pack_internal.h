/* pack_internal.h: what dtpack's packers (tree.c, idx.c, cifar.c) share from pack.c: the output
 * directory, and one split's images written into shards and recorded in the manifest. Nothing
 * outside src/pack includes it. Errors follow pack.h: one line said, then DT_ERR_INPUT for bad
 * input, DT_ERR_SYS (and the like) for the rest. */
#ifndef DT_PACK_PACK_INTERNAL_H
#define DT_PACK_PACK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "data/shard.h"
#include "pack/pack.h"

/* Creates the output directory and its missing parents. DT_OK when it is (already) a directory. */
int dt_pack_make_dir(const char *path);

/* One split being packed: a shard writer plus the split's manifest entries so far. */
typedef struct dt_pack_split {
    dt_shard_writer writer;
    dt_manifest_entry *entries;
    int n_entries;
    size_t cap;          /* allocated entries */
    int64_t shard_bytes; /* a shard is written once it holds this many bytes */
} dt_pack_split;

/* Takes the split out of the manifest (so that an interrupted pack leaves no split that looks
 * complete), removes its shards left by an earlier pack, and starts the writer. */
int dt_pack_split_begin(dt_pack_split *so, const dt_shard_spec *spec, const dt_pack_opts *o);
/* Adds one image (counted in st->images), writing the shard once it is full (st->shards, st->bytes). */
int dt_pack_split_add(dt_pack_split *so, const uint8_t *data, size_t n, int32_t label, const char *name,
                      dt_pack_stats *st);
/* ok: writes the last shard and lists the split's shards in the manifest (a split with no images is
 * DT_ERR_INPUT); not ok: DT_ERR_INPUT and the split stays unlisted. Frees so either way. */
int dt_pack_split_end(dt_pack_split *so, dt_pack_stats *st, int ok);

/* ILSVRC2012's flat validation folder (ilsvrc.c): labels[i] is the index, among the sorted classes
 * (the folders of classes_dir), of the WNID that the ground truth gt gives files[i] (dir's sorted file
 * names). gt is Kaggle's LOC_val_solution.csv (known by its header) or the devkit's ground truth,
 * which needs synsets (the devkit's meta.mat, or "<ILSVRC2012_ID> <WNID>" lines). Files and labels
 * pair one to one by ImageId (the file name without its extension); the first file without a
 * label, label without a file, class ID out of range, WNID not among the classes or duplicate is
 * one line, DT_ERR_INPUT. */
int dt_pack_ilsvrc_labels(const char *dir, char *const *files, int n_files, char *const *classes, int n_classes,
                          const char *classes_dir, const char *gt, const char *synsets, int32_t *labels);

#endif
