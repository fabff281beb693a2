/* agree.h: every rank must train with the same options. Ranks started with different ones (an MPMD
 * command line, a script that builds each rank's arguments) would otherwise exchange buffers of
 * different sizes (a truncated collective, a crash) or train a different model, data or schedule in
 * silence. So the first collective of a run compares a fingerprint of the options that shape a step,
 * the model, the data or the schedule, and a mismatch is one line and exit 2 on every rank, before
 * anything is written.
 *
 * The exchange has a fixed size whatever the options: an all-reduce (min) of DT_AGREE_SLOTS hashes
 * and their complements, so every rank learns which slot differs; only then, an all-gather of that
 * slot's record (DT_AGREE_REC_BYTES from each rank) to say who has what. Slot 0 is the version and
 * the list of options compared, so two different builds of dtrain disagree there first, never on
 * sizes. Compared: -a, DATA, --synthetic, -b, the crop, the epochs and steps, every learning-rate and
 * optimiser option, the seed, --deterministic, --device cpu|cuda, the AMP flags, the DDP flags,
 * --resume, --pretrained, --evaluate, --checkpoint-every. Not compared, since each rank may have its
 * own or only rank 0 uses them: -j, --threads, -p, --log-level, --comm-timeout, --results and
 * --run-name (rank 0 makes the run directory), the GPU index (the local rank's). The options and
 * their order come from the table in train/flags.h: a new option is compared unless its row says
 * .fp = DT_FP_NOT. */
#ifndef DT_TRAIN_AGREE_H
#define DT_TRAIN_AGREE_H

#include <stdint.h>

#include "libdt/comm.h"
#include "train/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* These sizes are part of what ranks exchange: they never change, so no two builds truncate. */
#define DT_AGREE_SLOTS 128
#define DT_AGREE_NAME 24
#define DT_AGREE_TEXT 96
#define DT_AGREE_REC_BYTES 128

typedef struct dt_agree_rec {
    uint64_t hash;             /* FNV-1a of the name and the whole text: equal options, equal hashes */
    char name[DT_AGREE_NAME];  /* "-a", "DATA", "--lr"; "dtrain" for slot 0 */
    char text[DT_AGREE_TEXT];  /* "with -a resnet50", "without --sync-bn" (cut in the middle if long) */
} dt_agree_rec;

typedef struct dt_agree_set {
    int used;                             /* slots in use; the others hold zeros */
    dt_agree_rec rec[DT_AGREE_SLOTS];
} dt_agree_set;

/* The fingerprint of cfg (pure: no I/O, no communication). Always DT_OK. */
int dt_agree_fingerprint(const dt_train_cfg *cfg, dt_agree_set *out);
/* What a rank contributes to the all-reduce (min): for slot i, sum[2i] = hash, sum[2i+1] = ~hash, as
 * int64. The minimum over ranks of both says whether the slot's hashes are all the same. */
void dt_agree_summary(const dt_agree_set *s, int64_t sum[2 * DT_AGREE_SLOTS]);
/* After the all-reduce: the first slot whose ranks differ, or -1 when every slot agrees. */
int dt_agree_first_difference(const int64_t sum[2 * DT_AGREE_SLOTS]);
/* The one line for one slot's records from n ranks (recs[r] is rank r's): the ranks grouped by value,
 * rank 0's group last, e.g. "ranks 1, 3 were started with -a resnet18, rank 0 with -a resnet50:
 * every rank needs the same options". Returns the length written (cut to fit n bytes). */
int dt_agree_describe(const dt_agree_rec *recs, int n_ranks, char *buf, size_t n);

/* The exchange (every rank, as the first collective of a run): DT_OK when every rank has the same
 * fingerprint; DT_ERR_INPUT on every rank when not, after rank 0 logged the one line; or the
 * communicator's error (a timeout, already said). */
int dt_agree_options(dt_comm *comm, const dt_train_cfg *cfg);

#ifdef __cplusplus
}
#endif
#endif
