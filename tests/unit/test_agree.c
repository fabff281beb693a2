/* test_agree.c: the fingerprint of dtrain's options (train/agree.h), without communication. Equal
 * options agree; each option that shapes the run, changed on one rank, is the first difference and
 * is named in the line; per-rank options (-j, --threads, -p, --comm-timeout, --results, --run-name)
 * are not compared; another build's option list disagrees at slot 0; the all-reduce (min) is
 * emulated here as MPI does it. And the start-up's one deadline (libdt/comm.h, dt_comm_startup): the
 * operations share its budget of waiting, until the caller sets a step. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h"
#include "tap.h"
#include "train/agree.h"
#include "util/check.h"

/* the all-reduce (min over ranks) of the ranks' summaries, then the first difference */
static int first_difference(const dt_train_cfg *cfgs, int n)
{
    int64_t acc[2 * DT_AGREE_SLOTS], one[2 * DT_AGREE_SLOTS];
    dt_agree_set s;
    for (int r = 0; r < n; r++) {
        dt_agree_fingerprint(&cfgs[r], &s);
        dt_agree_summary(&s, r ? one : acc);
        for (int i = 0; r && i < 2 * DT_AGREE_SLOTS; i++)
            acc[i] = one[i] < acc[i] ? one[i] : acc[i];
    }
    return dt_agree_first_difference(acc);
}

/* rank 0 has cfg a, rank 1 has b: the slot they differ at and its line */
static int differ(const dt_train_cfg *a, const dt_train_cfg *b, char *line, size_t n)
{
    dt_train_cfg two[2] = {*a, *b};
    int slot = first_difference(two, 2);
    line[0] = 0;
    if (slot >= 0) {
        dt_agree_set s0, s1;
        dt_agree_fingerprint(a, &s0);
        dt_agree_fingerprint(b, &s1);
        dt_agree_rec recs[2] = {s0.rec[slot], s1.rec[slot]};
        dt_agree_describe(recs, 2, line, n);
    }
    return slot;
}

int main(void)
{
    dt_train_cfg base;
    dt_train_defaults(&base);
    base.data = "/data/fm";
    dt_agree_set s;
    dt_agree_fingerprint(&base, &s);
    TAP_OK(s.used > 30 && s.used < DT_AGREE_SLOTS, "%d options and the version fit in %d slots", s.used - 1, DT_AGREE_SLOTS);
    TAP_OK(!strcmp(s.rec[0].name, "dtrain") && strstr(s.rec[0].text, PACKAGE_VERSION), "slot 0: %s", s.rec[0].text);
    int unique = 1;
    for (int i = 0; i < s.used; i++)
        for (int j = i + 1; j < s.used; j++)
            unique &= strcmp(s.rec[i].name, s.rec[j].name) != 0;
    TAP_OK(unique, "every option has a slot of its own");

    char line[1024];
    dt_train_cfg same[4] = {base, base, base, base};
    TAP_OK(first_difference(same, 4) == -1, "4 ranks with the same options agree");

    /* per-rank options are not compared */
    dt_train_cfg own = base;
    own.workers = 9;
    own.threads = 3;
    own.print_freq = 1;
    own.comm_timeout = 5;
    own.results = "/elsewhere";
    own.run_name = "x";
    TAP_OK(differ(&base, &own, line, sizeof line) == -1, "-j, --threads, -p, --comm-timeout, --results, --run-name: "
                                                         "each rank its own");

    /* the brief's cases, and the line */
    dt_train_cfg b = base;
    b.arch = "resnet18";
    int slot = differ(&base, &b, line, sizeof line);
    TAP_OK(slot > 0 && !strcmp(s.rec[slot].name, "-a") &&
               !strcmp(line, "rank 1 was started with -a resnet18, rank 0 with -a resnet50: every rank needs the "
                             "same options"),
           "-a: %s", line);
    b = base;
    b.data = "/data/fm2";
    slot = differ(&base, &b, line, sizeof line);
    TAP_OK(slot > 0 && !strcmp(line, "rank 1 was started with DATA /data/fm2, rank 0 with DATA /data/fm: every rank "
                                     "needs the same options"),
           "DATA: %s", line);
    b = base;
    b.batch = 32;
    differ(&base, &b, line, sizeof line);
    TAP_OK(strstr(line, "rank 1 was started with -b 32, rank 0 with -b 64") != NULL, "-b: %s", line);
    b = base;
    b.sync_bn = 1;
    differ(&base, &b, line, sizeof line);
    TAP_OK(strstr(line, "rank 1 was started with --sync-bn, rank 0 without --sync-bn") != NULL, "a flag: %s", line);
    b = base;
    b.lr = nextafter(0.1, 1); /* the next double: the same at %g */
    differ(&base, &b, line, sizeof line);
    TAP_OK(strstr(line, "rank 1 was started with --lr 0.1000000000000000") && strstr(line, "rank 0 with --lr 0.1:"),
           "--lr, exactly: %s", line);

    /* every option that shapes the run is compared: one changed at a time is found */
#define CHANGE(flag, stmt)                                                                                             \
    do {                                                                                                               \
        dt_train_cfg c_ = base;                                                                                        \
        dt_train_cfg *c = &c_;                                                                                         \
        stmt;                                                                                                          \
        int sl_ = differ(&base, c, line, sizeof line);                                                                 \
        TAP_OK(sl_ > 0 && !strcmp(s.rec[sl_].name, flag) && strstr(line, flag), "%s: %s", flag, line);                 \
    } while (0)
    CHANGE("--synthetic", c->synthetic = 1);
    CHANGE("--crop", c->crop = 160);
    CHANGE("--crop-padding", c->crop_padding = -1);
    CHANGE("--epochs", c->epochs = 5);
    CHANGE("--start-epoch", c->start_epoch = 2);
    CHANGE("--max-steps", c->max_steps = 2);
    CHANGE("--no-lr-scaling", c->no_lr_scaling = 1);
    CHANGE("--warmup-epochs", c->warmup_epochs = 5);
    CHANGE("--lr-schedule", c->lr_schedule = DT_LR_COSINE);
    CHANGE("--lr-steps", c->lr_steps[2] = 85);
    CHANGE("--lr-gamma", c->lr_gamma = 0.5);
    CHANGE("--lr-step-size", c->lr_step_size = 10);
    CHANGE("--lr-min", c->lr_min = 1e-3);
    CHANGE("--lr-power", c->lr_power = 2);
    CHANGE("--lr-per-step", c->lr_per_step = 1);
    CHANGE("--lr-warmup-method", c->warmup_method = DT_WARMUP_CONSTANT);
    CHANGE("--lr-warmup-decay", c->warmup_decay = 0.5);
    CHANGE("--momentum", c->momentum = 0.8);
    CHANGE("--wd", c->wd = 5e-4);
    CHANGE("--norm-weight-decay", c->norm_wd = 0);
    CHANGE("--bias-weight-decay", c->bias_wd = 0);
    CHANGE("--clip-grad-norm", c->clip_grad_norm = 1);
    CHANGE("--nesterov", c->nesterov = 1);
    CHANGE("--opt", c->opt = DT_OPTC_ADAMW);
    CHANGE("--opt-eps", c->opt_eps = 1e-6);
    CHANGE("--adam-beta1", c->adam_beta1 = 0.8);
    CHANGE("--adam-beta2", c->adam_beta2 = 0.99);
    CHANGE("--rmsprop-alpha", c->rmsprop_alpha = 0.95);
    CHANGE("--lars-eta", c->lars_eta = 0.02);
    CHANGE("--model-ema", c->model_ema = 1);
    CHANGE("--ra-sampler", c->ra_sampler = 1);
    CHANGE("--mixup-alpha", c->mixup_alpha = 0.2);
    CHANGE("--cutmix-alpha", c->cutmix_alpha = 1.0);
    CHANGE("--ra-reps", c->ra_reps = 4);
    CHANGE("--model-ema-steps", c->model_ema_steps = 8);
    CHANGE("--model-ema-decay", c->model_ema_decay = 0.999);
    CHANGE("--label-smoothing", c->label_smoothing = 0.1);
    CHANGE("--accum-steps", c->accum_steps = 2);
    CHANGE("--desired-acc", c->desired_acc = 0.75);
    CHANGE("--seed", c->seed = 7);
    CHANGE("--deterministic", c->deterministic = 1);
    CHANGE("--device", c->cuda = 1);
    CHANGE("--opt-level", c->opt_level = 2);
    CHANGE("--precision", c->amp.bf16 = 1);
    CHANGE("--keep-batchnorm-fp32", c->amp.keep_batchnorm_fp32 = 1);
    CHANGE("--master-weights", c->amp.master_weights = 0);
    CHANGE("--loss-scale", c->amp.loss_scale = "128");
    CHANGE("--loss-scale-window", c->scale_window = 100);
    CHANGE("--allreduce-fp32", c->amp.allreduce_fp32 = 1);
    CHANGE("--max-nonfinite", c->max_nonfinite = 3);
    CHANGE("--bucket-mb", c->bucket_mb = 1);
    CHANGE("--first-bucket-mb", c->first_bucket_mb = 2);
    CHANGE("--no-overlap", c->no_overlap = 1);
    CHANGE("--sync-bn", c->sync_bn = 1);
    CHANGE("--resume", c->resume = "auto");
    CHANGE("--pretrained", c->pretrained = "w.h5");
    CHANGE("--evaluate", c->evaluate = 1);
    CHANGE("--checkpoint-every", c->checkpoint_every = 100);

    /* cosine does not read --lr-steps: a difference there alone is none */
    dt_train_cfg cos1 = base, cos2 = base;
    cos1.lr_schedule = cos2.lr_schedule = DT_LR_COSINE;
    cos2.lr_steps[0] = 3;
    TAP_OK(differ(&cos1, &cos2, line, sizeof line) == -1, "cosine: --lr-steps not compared");
    /* multisteplr reads them */
    cos1.lr_schedule = cos2.lr_schedule = DT_LR_MULTISTEPLR;
    TAP_OK(differ(&cos1, &cos2, line, sizeof line) >= 0 && strstr(line, "--lr-steps 3,60,80"),
           "multisteplr: --lr-steps compared (%s)", line);
    /* a schedule's default warm-up equals the same warm-up given: no difference */
    dt_train_cfg w1 = base, w2 = base;
    w1.lr_schedule = w2.lr_schedule = DT_LR_STEPLR;
    w2.warmup_method = DT_WARMUP_CONSTANT;
    w2.warmup_decay = 0.01;
    TAP_OK(differ(&w1, &w2, line, sizeof line) == -1, "steplr: its default warm-up (constant, 0.01) equals it given");

    /* the first difference wins; several ranks and values; rank 0's value last */
    dt_train_cfg ranks[6] = {base, base, base, base, base, base};
    ranks[1].arch = ranks[3].arch = ranks[4].arch = "resnet18";
    ranks[5].arch = "vgg11";
    ranks[2].batch = 8; /* later in the list than -a */
    slot = first_difference(ranks, 6);
    dt_agree_rec recs[6];
    for (int r = 0; r < 6; r++) {
        dt_agree_fingerprint(&ranks[r], &s);
        recs[r] = s.rec[slot];
    }
    dt_agree_describe(recs, 6, line, sizeof line);
    TAP_OK(!strcmp(line, "ranks 1, 3, 4 were started with -a resnet18, rank 5 with -a vgg11, ranks 0, 2 with -a "
                         "resnet50: every rank needs the same options"),
           "6 ranks: %s", line);

    /* many values and ranks: the line stays one line, counting what it does not name */
    enum { N = 200 };
    dt_agree_rec *many = calloc(N, sizeof *many);
    char names[N][16];
    for (int r = 0; r < N; r++) {
        dt_train_cfg c = base;
        snprintf(names[r], sizeof names[r], "m%d", r % 7 == 0 ? 0 : r % 5);
        c.arch = names[r];
        dt_agree_fingerprint(&c, &s);
        many[r] = s.rec[1];
    }
    dt_agree_describe(many, N, line, sizeof line);
    TAP_OK(strstr(line, "more rank") && strstr(line, ": every rank needs the same options") &&
               tap_count_lines(line) == 0 && strlen(line) < 700,
           "200 ranks, 5 values: %s", line);
    free(many);

    /* a long path: cut in the middle, hashed whole */
    char p1[300], p2[300];
    memset(p1, 'a', sizeof p1 - 1);
    p1[sizeof p1 - 1] = 0;
    memcpy(p2, p1, sizeof p2);
    p2[150] = 'b'; /* differs only in the part that is cut */
    dt_train_cfg l1 = base, l2 = base;
    l1.data = p1;
    l2.data = p2;
    TAP_OK(differ(&l1, &l2, line, sizeof line) > 0 && strstr(line, "..."), "long paths that differ in the middle: %.80s...",
           line);

    /* another build (other options compared): slot 0 */
    dt_agree_fingerprint(&base, &s);
    dt_agree_rec v[2] = {s.rec[0], s.rec[0]};
    snprintf(v[1].text, sizeof v[1].text, "with dtrain %s (%d options compared)", PACKAGE_VERSION, s.used);
    v[1].hash ^= 1;
    dt_agree_describe(v, 2, line, sizeof line);
    TAP_OK(strstr(line, "rank 1 was started with dtrain") && strstr(line, "rank 0 with dtrain"), "versions: %s", line);

    /* the start-up budget: shared by the operations, only while no step is set */
    dt_comm *c = NULL;
    TAP_OK(dt_comm_self(&c) == DT_OK, "a communicator");
    c->timeout_s = 600;
    TAP_OK(dt_comm_wait_limit(c) == 600, "outside start-up: timeout_s per operation");
    dt_comm_startup(c, 10);
    TAP_OK(c->step == DT_COMM_STARTUP && dt_comm_wait_limit(c) == 10, "start-up: the budget (10 s)");
    dt_comm_waited(c, 4);
    dt_comm_waited(c, 3);
    TAP_OK(dt_comm_wait_limit(c) == 3, "two operations waited 4 s and 3 s: 3 s left for the next");
    dt_comm_waited(c, 5);
    TAP_OK(dt_comm_wait_limit(c) == 0, "spent: the next operation times out at once");
    c->step = 0; /* training began */
    TAP_OK(dt_comm_wait_limit(c) == 600 && !c->startup, "the caller set step 0: timeout_s again");
    dt_comm_waited(c, 1000);
    TAP_OK(dt_comm_wait_limit(c) == 600, "waiting after start-up charges nothing");
    dt_comm_startup(c, 2000);
    TAP_OK(dt_comm_wait_limit(c) == 600, "a budget above timeout_s: timeout_s");
    dt_comm_startup(c, 0);
    TAP_OK(!c->startup && dt_comm_wait_limit(c) == 600, "seconds <= 0 ends start-up");
    dt_comm_free(c);
    return tap_done();
}
