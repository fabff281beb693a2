/* pack.h: dtpack's inputs turned into shards (data/shard.h): an ImageNet-style folder tree, IDX
 * files (MNIST, Fashion-MNIST) and CIFAR-10 binary batches; and the check of a packed directory.
 * Each packer writes its split's shards atomically and then records them in the manifest; a split
 * being packed is first removed from the manifest, so an interrupted run leaves no split that looks
 * complete; a write that fails leaves no temporary file. The inputs are checked before anything is
 * written where that is cheap (files listed, IDX files read, CIFAR batch sizes). Bad input (an
 * empty or truncated file, an empty split, a damaged packed directory) returns DT_ERR_INPUT after
 * one line naming the file (and index); other errors (I/O, a full disk) DT_ERR_SYS and the like. */
#ifndef DT_PACK_PACK_H
#define DT_PACK_PACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_pack_opts {
    const char *out;        /* output directory (created when missing) */
    int64_t shard_bytes;    /* target shard size */
    int resize_short;       /* 0: keep the JPEG bytes; N: re-encode with the shorter side at most N */
    int quality;            /* JPEG quality of re-encoded images */
    int threads;            /* 0: all cores */
    int strict;             /* 1: a bad file is fatal instead of skipped */
    int progress;           /* 1: a progress line on stderr (a terminal) */
    const char *val_labels; /* imagenet: the ground truth of a flat val/ (ILSVRC2012's), or NULL */
    const char *synsets;    /* imagenet: the devkit's meta.mat for val_labels' class IDs, or NULL */
} dt_pack_opts;

/* What a pack did, for the summary line and the tests. */
typedef struct dt_pack_stats {
    int64_t images, shards, bytes;
    int64_t passed, converted_png, converted_gray, converted_cmyk, resized, skipped;
} dt_pack_stats;

/* ImageNet layout: src/<split>/<class>/<file> for each split named (train, val; 1 to 16). Classes
 * are the sorted subdirectory names of the first split (torchvision's ImageFolder order); later
 * splits must use only those. Files are taken by content, whatever their extension; hidden files
 * are ignored. o->out may not be inside src (real paths, o->out existing or not). With
 * o->val_labels, split val is ILSVRC2012's flat folder (files, no class folders) labelled by that
 * ground truth (pack_internal.h: dt_pack_ilsvrc_labels), and packs to the shards its sorted twin
 * would: in class order, each image named <wnid>/<file>. */
int dt_pack_tree(const char *src, const char *const *splits, int n_splits, const dt_pack_opts *o, dt_pack_stats *st);
/* MNIST-style IDX: src/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] -> splits train and val.
 * fashion selects Fashion-MNIST's class names (else the digits). */
int dt_pack_idx(const char *src, int fashion, const dt_pack_opts *o, dt_pack_stats *st);
/* CIFAR-10 binary version: src/data_batch_{1..5}.bin -> train, src/test_batch.bin -> val. */
int dt_pack_cifar10(const char *src, const dt_pack_opts *o, dt_pack_stats *st);
/* dtrain's start-up checks of a packed directory (train and val opened, then
 * dt_dataset_check_splits), then every other split opened and checked against train, all with
 * CRCs; a line per split on stdout. DT_ERR_INPUT after one line for bad data. */
int dt_pack_verify(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
