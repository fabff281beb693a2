/* dtrain.c: the training program's main (thin: the work lives in libdtcore).
 *
 * This build answers --version (with the optional parts built in) and --help; the training loop
 * itself comes with the trainer (doc/design.md, "Status"). Exit codes: 0 success, 1 failure at run
 * time, 2 bad command line. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "dist/spawn.h"
#include "util/buildinfo.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

enum { EXIT_USAGE = 2 };
enum { OPT_LOG_LEVEL = 256, OPT_NPROC };

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: dtrain [OPTIONS]\n"
            "Distributed, mixed-precision training of ImageNet-class CNNs (one task per GPU under srun).\n"
            "\n"
            "Options:\n"
            "  -h, --help             show this help and exit\n"
            "  -V, --version          show the version and the optional parts built in (CUDA, cuDNN, NCCL,\n"
            "                         PMI2, MPI) and exit\n"
            "      --log-level LEVEL  error, warn, info or debug (default: info, or $DT_LOG_LEVEL)\n"
            "      --nproc-per-node N without Slurm: run N workers here, one per GPU (CPU runs use mpirun)\n"
            "\n"
            "This is dtrain %s: the training options arrive with the trainer; see README.md.\n",
            PACKAGE_VERSION);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"nproc-per-node", required_argument, NULL, OPT_NPROC},
        {NULL, 0, NULL, 0},
    };
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    dt_log_init();
    opterr = 0; /* our own one-line messages */
    int c;
    long nproc = 0;
    while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
        int lv;
        switch (c) {
        case OPT_NPROC:
            if (dt_parse_long("--nproc-per-node", optarg, 1, 1024, &nproc) != DT_OK)
                return EXIT_USAGE;
            break;
        case 'h': usage(stdout); return EXIT_SUCCESS;
        case 'V': dt_buildinfo_print(stdout, "dtrain"); return EXIT_SUCCESS;
        case OPT_LOG_LEVEL:
            if (dt_parse_choice("--log-level", optarg, levels, &lv) != DT_OK)
                return EXIT_USAGE;
            dt_log_set_level((enum dt_log_level)lv);
            break;
        case ':': dt_error("%s: missing value (see dtrain --help)", argv[optind - 1]); return EXIT_USAGE;
        default:
            if (optopt)
                dt_error("-%c: unknown option (see dtrain --help)", optopt);
            else
                dt_error("%s: unknown option (see dtrain --help)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (nproc) { /* the workers run this program with the same arguments, less this option */
        char **child = calloc((size_t)argc + 1, sizeof *child);
        if (!child)
            return EXIT_FAILURE;
        int k = 0;
        child[k++] = "/proc/self/exe";
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--nproc-per-node")) {
                i++;
                continue;
            }
            if (!strncmp(argv[i], "--nproc-per-node=", 17))
                continue;
            child[k++] = argv[i];
        }
        int rc = dt_spawn_local((int)nproc, child, dt_gpu_count() > 0, 30.0);
        free(child);
        return rc;
    }
    if (optind < argc) {
        dt_error("%s: unexpected argument; this dtrain %s build has no training loop yet (see dtrain --help)",
                 argv[optind], PACKAGE_VERSION);
        return EXIT_USAGE;
    }
    usage(stderr);
    return EXIT_USAGE;
}
