/* runs.h: reading dtrain's run directories for dtreport, and the numbers each run's row shows.
 *
 * A run is a directory holding run.json (dtrain's resolved configuration) and metrics.jsonl (one
 * JSON object a line: "kind":"step" per print interval, "kind":"epoch" per complete epoch; see
 * doc/dtrain.1, FILES). Each PATH given is a run itself when it holds run.json, else its immediate
 * subdirectories holding run.json are runs; a subdirectory with metrics.jsonl but no run.json is
 * reported as skipped, any other is ignored. "Holding" means a name of any type there.
 *
 * Nothing here trusts the files: whatever they hold, the reader returns (no crash, no unbounded
 * work per byte) with the run marked ok, partial or skipped and notes saying why. Either file that
 * is not a regular one (a FIFO, whose open would wait for a writer forever; a device; a directory)
 * is not read: the run is skipped with a note saying what it is. metrics.jsonl is read a line at a
 * time, never whole: memory holds one line (at most 1 MiB) and the records kept. A number is shown
 * only when it comes from lines that parsed and checked; a line that does not is never guessed:
 *   - the last line of metrics.jsonl without its newline and not valid JSON (being written, or a
 *     crash): ignored, the run is partial;
 *   - any other line that is not a JSON object with the fields of its kind, of the right types and
 *     ranges, and any line over 1 MiB (not parsed): the run is skipped, and the note names the file
 *     and line; so is a metrics.jsonl over 1 GiB;
 *   - an epoch logged twice (a resumed run): the last line counts, and a note says so;
 *   - an epoch missing between run.json's start_epoch and the last one logged (a record lost, as a
 *     full disk did before dtrain wrote an epoch's line before model_best.h5): a note names them,
 *     as the training time leaves them out;
 *   - lines of an unknown kind are ignored (later dtrain versions may add some).
 * A run is complete when an epoch line for its last epoch (run.json's epochs - 1) exists, or its
 * --desired-acc was reached (dtrain stops there); otherwise it is partial: stopped, when its last
 * line is dtrain's "kind":"end" line (by a signal, resumable, or by --max-steps), else "in
 * progress" (still running, or killed before it could write that line). A run with no complete
 * epoch has no row, only a note.
 *
 * Library code: nothing is printed except dt_error lines for failures of the calls themselves
 * (memory, reading a PATH given); what is wrong with a run is in its notes, for the caller to show.
 */
#ifndef DT_REPORT_RUNS_H
#define DT_REPORT_RUNS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dt_run_state { DT_RUN_OK = 0, DT_RUN_PARTIAL, DT_RUN_SKIPPED };

/* A run's setup: what its run.json says its steps do beyond the tables' own columns (arch, dataset,
 * device, per-rank batch, opt level), as text. Runs are compared (speed-up, efficiency) only when
 * every field is the same text, or absent from both: a run.json written before dtrain recorded a
 * field is compared only with others without it (unknown is not taken for any value).
 *   recipe     run.json's "recipe": the name, "none" when null (dtrain without --recipe)
 *   optimizer  "optimizer"."name", " nesterov" added for SGD's Nesterov momentum
 *   schedule   "lr_schedule"
 *   crop       "augmentation"."train_crop_size"
 *   augment    "augmentation"'s auto_augment and random_erase: "ta_wide, erase 0.1", "none"
 *   mix        "mixup_alpha" and "cutmix_alpha": "mixup 0.2, cutmix 1", "none"
 *   ema        "model_ema": "on", "off" when null
 *   ddp        "ddp"'s accum_steps, sync_bn and overlap: "accum 1", "accum 2, sync-bn, no overlap" */
enum dt_setup_field {
    DT_SETUP_RECIPE, DT_SETUP_OPTIMIZER, DT_SETUP_SCHEDULE, DT_SETUP_CROP, DT_SETUP_AUGMENT, DT_SETUP_MIX,
    DT_SETUP_EMA, DT_SETUP_DDP, DT_SETUP_N
};
/* the fields' names above, in enum order */
extern const char *const dt_setup_names[DT_SETUP_N];

/* one "kind":"epoch" line; NaN for a value that is null or absent where that is allowed */
typedef struct dt_run_epoch {
    int epoch;
    int64_t step;                         /* global step at its end; -1 absent */
    double train_loss, train_top1, train_top5;
    double val_loss, val_top1, val_top5;  /* NaN: not validated that epoch */
    double img_per_s, time_s, loss_scale; /* train img/s over the epoch, its training seconds */
} dt_run_epoch;

/* one "kind":"step" line (a print interval) */
typedef struct dt_run_step {
    int epoch;
    int64_t epoch_step, step;  /* -1 absent */
    double img_per_s;          /* the interval's own rate */
    double loss_scale;         /* NaN absent */
    int warmup;                /* 1: left out of the steady-state median (see dt_runs_compute) */
} dt_run_step;

typedef struct dt_run_note {
    char *text;   /* one line, for the report's footnote: "metrics.jsonl:7: not valid JSON" */
    char *detail; /* more for standard error (a JSON parser's message), or NULL */
} dt_run_note;

typedef struct dt_run {
    char *source; /* the PATH it was found under, as given */
    char *dir;    /* the run directory as found: PATH or PATH/NAME */
    char *name;   /* its label: the directory's name, or dir where two runs share a name */
    char *stem;   /* file-name-safe and unique: plot files are <stem>-top1.svg, ... */
    /* run.json (strings never NULL once it parsed: "?" where absent) */
    int have_config;
    char *arch, *dataset, *device, *precision; /* precision: "fp32" at O0, else fp16/bf16 */
    int world_size, nodes, ranks_per_node, batch_per_rank, global_batch, epochs, opt_level; /* -1: absent */
    int dynamic_scale;  /* amp.loss_scale was "dynamic" */
    char *setup[DT_SETUP_N]; /* the setup's fields (above); NULL where run.json does not say */
    int setup_bad;           /* a field was invalid ("?"): the run is compared with no other */
    double desired_acc; /* NaN: not set */
    int start_epoch;    /* run.json's (--start-epoch): the first epoch the run logs; 0 when absent */
    /* metrics.jsonl */
    dt_run_epoch *epoch_lines; /* sorted by epoch, one per epoch */
    size_t n_epoch_lines;
    dt_run_step *step_lines;   /* in file order */
    size_t n_step_lines;
    int state;        /* enum dt_run_state */
    int in_progress;  /* has epochs, but not the last one (see above) */
    /* the last "kind":"end" line, unless training lines follow it (a resumed run): why dtrain stopped */
    int ended;            /* 1: such a line ends the file */
    int stopped;          /* ended before its last epoch (a signal: resumable; or --max-steps) */
    char end_reason[16];  /* done, max-steps, desired-acc, signal */
    int end_signal, end_epoch;
    long long end_step;
    dt_run_note *notes;
    size_t n_notes, cap_notes;
    /* derived by dt_runs_compute; NaN or -1 where there is nothing to show */
    double img_s;       /* steady-state train img/s */
    double epoch_time;  /* median of the epochs' time_s */
    double train_time;  /* sum of the epochs' time_s */
    double best_top1, best_top5;
    int best_top1_epoch, best_top5_epoch;
    double time_to_acc; /* training seconds up to and including acc_epoch */
    int acc_epoch;      /* the first epoch whose val top-1 >= desired_acc */
    double speedup, efficiency; /* against the baseline; efficiency in percent */
    long baseline;      /* index in the set of the run it is compared with; -1 none (alone or itself) */
} dt_run;

typedef struct dt_run_set {
    dt_run *runs; /* after dt_runs_compute: the table's runs first, ordered by (arch, dataset, ranks,
                   * name), then those without a row ordered by dir */
    size_t n, cap;
    char **sources; /* the PATHs as given */
    size_t n_sources;
} dt_run_set;

/* Initialises r (zeros, -1 and NaN, state ok) with copies of source and dir; name is dir's last
 * component. DT_OK or DT_ERR_NOMEM. dt_run_free releases it (and may be called on a zeroed run). */
int dt_run_init(dt_run *r, const char *source, const char *dir);
void dt_run_free(dt_run *r);

/* Adds a note (text and detail copied; detail may be NULL) and lowers the state to at least
 * state. DT_OK or DT_ERR_NOMEM. */
int dt_run_note_add(dt_run *r, int state, const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads run.json's text (len bytes, need not end in NUL). On a bad file the run is skipped with a
 * note; the return is DT_OK all the same, DT_ERR_NOMEM only when memory runs out. */
int dt_run_parse_config(dt_run *r, const char *text, size_t len);

/* Reads metrics.jsonl's bytes (len, any content) into r->epoch_lines and r->step_lines, following
 * the rules above, and sets state and notes. Call after dt_run_parse_config (the epochs count
 * decides "in progress"). DT_OK, or DT_ERR_NOMEM. */
int dt_run_parse_metrics(dt_run *r, const char *data, size_t len);

/* The same from a stream, read to its end chunk bytes at a time (0: 64 KiB) and cut into lines
 * there, holding only the line being put together: the same records, state and notes as
 * dt_run_parse_metrics on the stream's bytes (both hand each line to one parser), plus a note
 * when a read fails (the run skipped). A regular file over 1 GiB is not read at all. f stays the
 * caller's. DT_OK, or DT_ERR_NOMEM. */
int dt_run_read_metrics(dt_run *r, FILE *f, size_t chunk);

/* Finds and reads the runs under each path (see above) into s, which the caller zeroes first;
 * then calls dt_runs_compute. DT_OK (runs that cannot be read are skipped, with notes);
 * DT_ERR_INPUT after a dt_error line when a path does not exist or is not a directory;
 * DT_ERR_SYS when one cannot be listed; DT_ERR_NOMEM. s holds what was read either way. */
int dt_runs_load(dt_run_set *s, const char *const *paths, int n_paths);

/* Appends a copy of *r to s (taking over its allocations; *r is zeroed). DT_OK or DT_ERR_NOMEM. */
int dt_runs_append(dt_run_set *s, dt_run *r);

/* Orders the runs, makes names and stems unique, and derives each run's numbers:
 *   img_s: the median of the step lines' img_per_s, leaving out each epoch's first print interval
 *     (warm-up; also the first after a restart that replays steps, seen as epoch_step not rising),
 *     unless that is the epoch's only one; without step lines, the median of the epochs' img_per_s;
 *   speedup = img_s / baseline's img_s, efficiency = 100 * speedup / (ranks / baseline's ranks),
 *     where the baseline is the run with the fewest ranks (then the first by name) among the rows
 *     of the same arch, dataset, device, per-rank batch, opt level, precision and setup; none for
 *     the baseline itself. DT_OK or DT_ERR_NOMEM. */
int dt_runs_compute(dt_run_set *s);

/* 1 when two runs have the same setup (above): every field the same text, or absent from both */
int dt_run_same_setup(const dt_run *a, const dt_run *b);

/* 1 when the run has a row in the tables: not skipped, at least one epoch */
int dt_run_in_table(const dt_run *r);

void dt_runs_free(dt_run_set *s);

#ifdef __cplusplus
}
#endif
#endif
