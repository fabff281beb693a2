/* dtpack.c: packs datasets into dtrain's HDF5 shards (doc/dtpack.1 is the manual).
 *   dtpack imagenet SRC -o OUT [--split S]... [--resize-short N] [--quality Q] [--shard-size MiB]
 *                                [--threads N] [--strict] [--val-labels FILE [--synsets meta.mat]]
 *   dtpack fashion-mnist|mnist SRC -o OUT        IDX files (gzip'd or not)
 *   dtpack cifar10 SRC -o OUT                    CIFAR-10 binary batches
 *   dtpack verify OUT                            dtrain's start-up checks, every split, every CRC-32
 * Exit codes: 0 success, 1 failure at run time (I/O, a full disk), 2 a bad command line or bad input
 * (a damaged data set, an empty or truncated input file, -o inside the input tree), one line naming it. */
#include "config.h"

#include <getopt.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pack/pack.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

enum { EXIT_USAGE = 2, EXIT_INPUT = 2 };
enum { OPT_SPLIT = 256, OPT_RESIZE, OPT_QUALITY, OPT_SHARD, OPT_THREADS, OPT_STRICT, OPT_NO_PROGRESS, OPT_LOG,
       OPT_VAL_LABELS, OPT_SYNSETS };

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: dtpack FORMAT SRC -o OUT [OPTIONS]\n"
            "       dtpack verify OUT\n"
            "Packs a dataset into dtrain's HDF5 shards (OUT/<split>-NNNNN.h5 and OUT/manifest.tsv).\n"
            "\n"
            "Formats:\n"
            "  imagenet        SRC/<split>/<class>/<image>: the JPEG bytes as they are (PNG, grayscale\n"
            "                  and CMYK files become RGB JPEGs; unreadable ones are reported and skipped)\n"
            "  fashion-mnist   SRC/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] -> train, val\n"
            "  mnist           the same files, classes named 0..9\n"
            "  cifar10         SRC/data_batch_{1..5}.bin -> train, SRC/test_batch.bin -> val\n"
            "  verify          dtrain's start-up checks of OUT (every split), and every CRC-32\n"
            "\n"
            "Options:\n"
            "  -o, --out DIR         output directory (created when missing)\n"
            "      --split NAME      imagenet: a split to pack (repeatable; default: train and val,\n"
            "                        those present); classes come from the first\n"
            "      --resize-short N  imagenet: re-encode images whose shorter side exceeds N at N\n"
            "      --quality Q       JPEG quality of re-encoded images, 1..100 (default 90)\n"
            "      --shard-size MIB  target shard size in MiB (default 256)\n"
            "      --threads N       decoding threads (default: all cores)\n"
            "      --strict          stop at the first unreadable image instead of skipping it\n"
            "      --val-labels FILE imagenet: SRC/val/ is ILSVRC2012's flat folder, labelled by FILE:\n"
            "                        Kaggle's LOC_val_solution.csv, or the devkit's\n"
            "                        ILSVRC2012_validation_ground_truth.txt with --synsets\n"
            "      --synsets FILE    the devkit's data/meta.mat: which WNID each class ID is\n"
            "      --no-progress     no progress line (it shows only on a terminal anyway)\n"
            "      --log-level LEVEL error, warn, info or debug\n"
            "  -h, --help            show this help;  -V, --version  show the version\n");
}

static void summary(const char *what, const dt_pack_stats *s, double secs)
{
    printf("dtpack %s: %lld images in %lld shards (%.1f MiB) in %.1f s: %lld stored as they were, %lld PNG, "
           "%lld grayscale and %lld CMYK converted to RGB JPEG, %lld resized, %lld skipped\n",
           what, (long long)s->images, (long long)s->shards, s->bytes / 1048576.0, secs, (long long)s->passed,
           (long long)s->converted_png, (long long)s->converted_gray, (long long)s->converted_cmyk,
           (long long)s->resized, (long long)s->skipped);
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},
        {"split", required_argument, NULL, OPT_SPLIT},
        {"resize-short", required_argument, NULL, OPT_RESIZE},
        {"quality", required_argument, NULL, OPT_QUALITY},
        {"shard-size", required_argument, NULL, OPT_SHARD},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"strict", no_argument, NULL, OPT_STRICT},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"val-labels", required_argument, NULL, OPT_VAL_LABELS},
        {"synsets", required_argument, NULL, OPT_SYNSETS},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    /* HDF5 1.10's exit handler crashes on a file whose H5Fclose failed (a disk full in the middle of
     * a shard: SIGSEGV after the error was said). dtpack closes every file itself, so the handler
     * has nothing to do; this must come before any other HDF5 call. */
    H5dont_atexit();
    dt_log_init();
    dt_pack_opts o = {.shard_bytes = 256L << 20, .quality = 90, .progress = isatty(2)};
    const char *splits[16];
    int n_splits = 0, c;
    long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:hV", opts, NULL)) != -1) {
        int common = dt_cli_common(c, OPT_LOG, "dtpack", argv, opts, usage);
        if (common == DT_CLI_GO_ON)
            continue;
        if (common != DT_CLI_MINE)
            return common;
        switch (c) {
        case 'o': o.out = optarg; break;
        case OPT_SPLIT:
            if (n_splits == 16 || !*optarg || strchr(optarg, '/') || strlen(optarg) > 15) {
                dt_error("--split %s: a split is a plain name of 1..15 characters, at most 16 of them", optarg);
                return EXIT_USAGE;
            }
            splits[n_splits++] = optarg;
            break;
        case OPT_RESIZE:
            if (dt_parse_long("--resize-short", optarg, 8, 16384, &v))
                return EXIT_USAGE;
            o.resize_short = (int)v;
            break;
        case OPT_QUALITY:
            if (dt_parse_long("--quality", optarg, 1, 100, &v))
                return EXIT_USAGE;
            o.quality = (int)v;
            break;
        case OPT_SHARD:
            if (dt_parse_long("--shard-size", optarg, 1, 1 << 20, &v))
                return EXIT_USAGE;
            o.shard_bytes = (int64_t)v << 20;
            break;
        case OPT_THREADS:
            if (dt_parse_long("--threads", optarg, 1, 4096, &v))
                return EXIT_USAGE;
            o.threads = (int)v;
            break;
        case OPT_STRICT: o.strict = 1; break;
        case OPT_NO_PROGRESS: o.progress = 0; break;
        case OPT_VAL_LABELS:
        case OPT_SYNSETS:
            if (dt_parse_text(c == OPT_SYNSETS ? "--synsets" : "--val-labels", optarg) != DT_OK)
                return EXIT_USAGE; /* it goes into messages */
            *(c == OPT_SYNSETS ? &o.synsets : &o.val_labels) = optarg;
            break;
        }
    }
    int nargs = argc - optind;
    if (nargs < 1) {
        dt_error("no FORMAT: give imagenet, fashion-mnist, mnist, cifar10 or verify (see dtpack --help)");
        return EXIT_USAGE;
    }
    static const char *const formats[] = {"imagenet", "fashion-mnist", "mnist", "cifar10", "verify", NULL};
    int fmt;
    if (dt_parse_choice("FORMAT", argv[optind], formats, &fmt))
        return EXIT_USAGE;
    if (nargs != 2) {
        dt_error("dtpack %s takes exactly one %s (see dtpack --help)", argv[optind], fmt == 4 ? "directory" : "SRC");
        return EXIT_USAGE;
    }
    const char *src = argv[optind + 1];
    if (dt_parse_text(fmt == 4 ? "OUT" : "SRC", src) != DT_OK) /* it goes into messages */
        return EXIT_USAGE;
    if (fmt == 4) {
        int vrc = dt_pack_verify(src);
        return vrc == DT_OK ? EXIT_SUCCESS : vrc == DT_ERR_INPUT ? EXIT_INPUT : EXIT_FAILURE;
    }
    if (!o.out) {
        dt_error("-o/--out: missing: where should the shards go? (see dtpack --help)");
        return EXIT_USAGE;
    }
    if (n_splits && fmt != 0) {
        dt_error("--split: only for imagenet trees (%s has fixed splits train and val)", argv[optind]);
        return EXIT_USAGE;
    }
    if ((o.val_labels || o.synsets) && fmt != 0) {
        dt_error("%s: only for imagenet trees (ILSVRC2012's flat val/)", o.val_labels ? "--val-labels" : "--synsets");
        return EXIT_USAGE;
    }
    if (o.synsets && !o.val_labels) {
        dt_error("--synsets %s: maps the class IDs of the devkit's ground truth: give that with --val-labels",
                 o.synsets);
        return EXIT_USAGE;
    }
    dt_pack_stats st;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc;
    if (fmt == 0) {
        if (!n_splits) { /* train and val, those present */
            static const char *const def[] = {"train", "val"};
            for (int i = 0; i < 2; i++) {
                char p[4200];
                snprintf(p, sizeof p, "%s/%s", src, def[i]);
                if (access(p, F_OK) == 0)
                    splits[n_splits++] = def[i];
            }
            if (!n_splits) {
                dt_error("%s: has neither train/ nor val/ (name the split folders with --split)", src);
                return EXIT_INPUT;
            }
        }
        rc = dt_pack_tree(src, splits, n_splits, &o, &st);
    } else if (fmt == 3) {
        rc = dt_pack_cifar10(src, &o, &st);
    } else {
        rc = dt_pack_idx(src, fmt == 1, &o, &st);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == DT_ERR_INPUT) /* said in one line, naming the file */
        return EXIT_INPUT;
    if (rc != DT_OK) {
        dt_error("dtpack %s %s: failed; %s holds no complete copy of the splits that failed", argv[optind], src, o.out);
        return EXIT_FAILURE;
    }
    summary(argv[optind], &st, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
    return dt_cli_exit(run(argc, argv)); /* 1 when what went to standard output was lost (cli.h) */
}
