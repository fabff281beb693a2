/* checkpoint.c: training state in HDF5 (contract in checkpoint.h). */
#include "config.h"

#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/state.h"
#include "util/atomic.h"
#include "util/check.h"
#include "util/h5.h"
#include "util/log.h"

#define CKPT_SCHEMA "dtrain-checkpoint"
#define CKPT_VERSION 1
#define WEIGHTS_SCHEMA "dtrain-weights" /* tools/dt-export-torchvision */
#define WEIGHTS_VERSION 1

/* n floats of the backend's memory x, through a host copy */
static int write_flat(hid_t loc, const char *name, const dt_backend *be, const float *x, int64_t n)
{
    hsize_t d = (hsize_t)n;
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!h)
        return DT_ERR_NOMEM;
    be->mem_get(h, x, (size_t)n * sizeof(float));
    int64_t bad = dt_floats_nonfinite(h, n);
    int rc = DT_ERR_STATE;
    if (bad >= 0) /* never a file that cannot be resumed from */
        dt_error("%s holds %g at element %lld: a diverged model is not saved", name, h[bad], (long long)bad);
    else
        rc = dt_h5_write(loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, &d, h);
    free(h);
    return rc;
}

static int attr_double(hid_t obj, const char *name, double v)
{
    int64_t bits;
    memcpy(&bits, &v, 8);
    return dt_h5_attr_write_i64(obj, name, bits);
}

static int read_double(hid_t obj, const char *source, const char *name, double *v)
{
    int64_t bits;
    DT_TRY(dt_h5_attr_read_i64(obj, source, name, &bits));
    memcpy(v, &bits, 8);
    return DT_OK;
}

/* /model_ema: the average as a state_dict (fp32, torchvision's names and layouts), n_averaged */
static int write_ema(hid_t f, const dt_model *m, const dt_ema *e)
{
    hid_t g = H5Gcreate2(f, "model_ema", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return DT_ERR_HDF5;
    const dt_fp32_state s = {e->avg_w, e->avg_b, e->counts};
    int rc = dt_h5_attr_write_i64(g, "n_averaged", e->n_averaged);
    if (rc == DT_OK)
        rc = dt_model_save_state_from(m, g, &s);
    H5Gclose(g);
    return rc;
}

static int write_all(hid_t f, const dt_model *m, const dt_optim *opt, const dt_amp *amp, const dt_ema *ema,
                     const dt_progress *pr, const char *config)
{
    DT_TRY(dt_h5_attr_write_str(f, "schema", CKPT_SCHEMA));
    DT_TRY(dt_h5_attr_write_i64(f, "version", CKPT_VERSION));
    DT_TRY(dt_h5_attr_write_str(f, "arch", m->arch));
    DT_TRY(dt_h5_attr_write_i64(f, "epoch", pr->epoch));
    DT_TRY(dt_h5_attr_write_i64(f, "step", pr->step));
    DT_TRY(dt_h5_attr_write_i64(f, "global_step", pr->global_step));
    DT_TRY(dt_h5_attr_write_i64(f, "model_step", (int64_t)m->step));
    DT_TRY(attr_double(f, "best_top1_bits", pr->best_top1));
    DT_TRY(dt_h5_attr_write_i64(f, "best_epoch", pr->best_epoch));
    DT_TRY(dt_h5_attr_write_str(f, "config", config ? config : "{}"));
    int rc = DT_OK;
    hid_t g = H5Gcreate2(f, "progress", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const dt_epoch_sums *e = &pr->sums;
    rc = g < 0 ? DT_ERR_HDF5 : DT_OK;
    if (rc == DT_OK && (attr_double(g, "loss_bits", e->loss) || attr_double(g, "seconds_bits", e->seconds) ||
                        attr_double(g, "data_seconds_bits", e->data_seconds) ||
                        dt_h5_attr_write_i64(g, "hits1", e->hits1) || dt_h5_attr_write_i64(g, "hits5", e->hits5) ||
                        dt_h5_attr_write_i64(g, "seen", e->seen) || dt_h5_attr_write_i64(g, "images", e->images) ||
                        dt_h5_attr_write_i64(g, "steps", e->steps)))
        rc = DT_ERR_HDF5;
    if (g >= 0)
        H5Gclose(g);
    DT_TRY(rc);
    g = H5Gcreate2(f, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    rc = g < 0 ? DT_ERR_HDF5 : dt_model_save_state(m, g);
    if (g >= 0)
        H5Gclose(g);
    DT_TRY(rc);
    g = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    rc = g < 0 ? DT_ERR_HDF5 : dt_h5_attr_write_i64(g, "steps", opt->steps);
    if (rc == DT_OK)
        rc = dt_h5_attr_write_str(g, "name", dt_optim_name(opt));
    if (rc == DT_OK && opt->momentum_buf)
        rc = write_flat(g, "momentum", m->be, opt->momentum_buf, m->n_weights);
    if (rc == DT_OK && opt->second_buf)
        rc = write_flat(g, "second_moment", m->be, opt->second_buf, m->n_weights);
    if (g >= 0)
        H5Gclose(g);
    DT_TRY(rc);
    if (amp && amp->master) {
        g = H5Gcreate2(f, "amp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        rc = g < 0 ? DT_ERR_HDF5 : write_flat(g, "master", m->be, amp->master, m->n_weights);
        if (g >= 0)
            H5Gclose(g);
        DT_TRY(rc);
    }
    if (ema)
        DT_TRY(write_ema(f, m, ema));
    if (amp) {
        g = H5Gcreate2(f, "scaler", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        rc = g < 0 ? DT_ERR_HDF5 : dt_scaler_save(&amp->scaler, g);
        if (g >= 0)
            H5Gclose(g);
    }
    return rc;
}

int dt_checkpoint_save(const char *path, const dt_model *m, const dt_optim *opt, const dt_amp *amp,
                       const dt_ema *ema, const dt_progress *pr, const char *config_json)
{
    char tmp[4200], dir[4200], buf[4200];
    snprintf(buf, sizeof buf, "%s", path);
    snprintf(dir, sizeof dir, "%s", dirname(buf)); /* dirname may write into buf: not into dir */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    hid_t f = dt_atomic_create_h5(tmp, "checkpoint"); /* leaves nothing behind when it fails */
    if (f < 0)
        return DT_ERR_SYS;
    dt_check_defer(); /* one line below, with the first failure's reason: not HDF5's call and source */
    int rc = write_all(f, m, opt, amp, ema, pr, config_json);
    if (H5Fclose(f) < 0 && rc == DT_OK)
        rc = DT_ERR_HDF5;
    if (rc == DT_OK)
        rc = dt_commit_file(dir, tmp, path);
    const char *why = dt_check_reason();
    if (rc != DT_OK) {
        dt_error("checkpoint %s not written: %s; the previous one (if any) is intact", path,
                 *why ? why : dt_status_str(rc));
        unlink(tmp);
    }
    return rc;
}

static int read_flat(hid_t loc, const char *source, const char *name, const dt_backend *be, float *x, int64_t n)
{
    int64_t shape[1] = {n};
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!h)
        return DT_ERR_NOMEM;
    int rc = dt_h5_read(loc, source, "tensor", name, 1, shape, H5T_NATIVE_FLOAT, h);
    int64_t bad = rc == DT_OK ? dt_floats_nonfinite(h, n) : -1;
    if (bad >= 0) {
        dt_error("%s: %s holds %g at element %lld: a checkpoint must be finite", source, name, h[bad], (long long)bad);
        rc = DT_ERR_INPUT;
    }
    if (rc == DT_OK)
        be->mem_put(x, h, (size_t)n * sizeof(float));
    free(h);
    return rc;
}

/* DT_OK when the checkpoint's optimizer (its /optimizer's name; none before Adam and RMSprop came:
 * SGD) is opt's, else one line naming both: another's state cannot be carried on */
static int same_optimizer(hid_t g, const char *path, const dt_optim *opt)
{
    char name[32] = "sgd";
    if (H5Aexists(g, "name") > 0 && dt_h5_attr_read_str(g, path, "name", name, sizeof name) != DT_OK)
        return DT_ERR_INPUT;
    if (strcmp(name, dt_optim_name(opt))) {
        dt_error("%s: a checkpoint trained with --opt %s, not --opt %s: its optimizer state does not carry over", path,
                 name, dt_optim_name(opt));
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

/* f (open read-only: path) after checking its schema (a checkpoint, or with weights_ok also an
 * exported weights file) and architecture; f is closed and -1 returned after one line */
static hid_t checked(hid_t f, const char *path, const dt_model *m, int weights_ok)
{
    if (f < 0)
        return -1;
    char schema[64] = "", arch[64] = "";
    int64_t version = 0;
    int ok = dt_h5_attr_read_str(f, path, "schema", schema, sizeof schema) == DT_OK &&
             dt_h5_attr_read_i64(f, path, "version", &version) == DT_OK;
    int is_ckpt = ok && !strcmp(schema, CKPT_SCHEMA) && version == CKPT_VERSION;
    int is_weights = ok && weights_ok && !strcmp(schema, WEIGHTS_SCHEMA) && version == WEIGHTS_VERSION;
    if (ok && !is_ckpt && !is_weights) {
        dt_error("%s: not a dtrain %s of version %d (schema '%s' version %lld)", path,
                 weights_ok ? "checkpoint or weights file" : "checkpoint", CKPT_VERSION, schema, (long long)version);
        ok = 0;
    }
    if (ok && (is_ckpt || H5Aexists(f, "arch") > 0)) {
        ok = dt_h5_attr_read_str(f, path, "arch", arch, sizeof arch) == DT_OK;
        if (ok && strcmp(arch, m->arch)) {
            dt_error("%s: a %s of %s, not of %s", path, is_ckpt ? "checkpoint" : "weights file", arch, m->arch);
            ok = 0;
        }
    }
    if (!ok) {
        H5Fclose(f);
        return -1;
    }
    return f;
}

/* opens path read-only (probed first) and checks it as checked() does; -1 after one line */
static hid_t open_for(const char *path, const dt_model *m, int weights_ok)
{
    return checked(dt_h5_open_ro(path, weights_ok ? "weights file" : "checkpoint"), path, m, weights_ok);
}

hid_t dt_checkpoint_open(const char *path, hid_t f, const dt_model *m)
{
    return checked(f >= 0 ? f : dt_h5_open_ro(path, "checkpoint"), path, m, 0);
}

/* group `name` of f, or -1 after one line naming the file and the group */
static hid_t open_group(hid_t f, const char *path, const char *name)
{
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        dt_error("%s: has no /%s group", path, name);
        return -1;
    }
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    if (g < 0)
        dt_error("%s: group /%s cannot be opened: %s", path, name, dt_errstr_hdf5(g, 0));
    return g;
}

static int load_model(hid_t f, const char *path, dt_model *m)
{
    hid_t g = open_group(f, path, "model");
    if (g < 0)
        return DT_ERR_INPUT;
    int rc = dt_model_load_state(m, g, path);
    H5Gclose(g);
    return rc;
}

int dt_checkpoint_config(hid_t f, const char *path, char *buf, size_t n)
{
    return dt_h5_attr_read_str(f, path, "config", buf, n);
}

int64_t dt_checkpoint_epoch(const char *path)
{
    int64_t epoch = -1;
    if (access(path, F_OK) != 0)
        return -1;
    hid_t f = dt_h5_open_ro(path, "checkpoint");
    if (f >= 0) {
        if (H5Aexists(f, "epoch") <= 0 || dt_h5_attr_read_i64(f, path, "epoch", &epoch) != DT_OK)
            epoch = -1;
        H5Fclose(f);
    }
    return epoch;
}

int dt_checkpoint_load_weights(const char *path, dt_model *m)
{
    hid_t f = open_for(path, m, 1);
    if (f < 0)
        return DT_ERR_INPUT;
    int rc = load_model(f, path, m);
    H5Fclose(f);
    return rc == DT_OK ? DT_OK : DT_ERR_INPUT;
}

/* /model_ema into e; a checkpoint without it (trained without --model-ema) leaves e empty (the
 * trainer decides: the average starts from the model, or -e has none to evaluate) */
static int read_ema(hid_t f, const char *path, dt_model *m, dt_ema *e)
{
    if (H5Lexists(f, "model_ema", H5P_DEFAULT) <= 0) {
        e->n_averaged = 0;
        e->empty = 1;
        return DT_OK;
    }
    hid_t g = open_group(f, path, "model_ema");
    if (g < 0)
        return DT_ERR_INPUT;
    const dt_fp32_state s = {e->avg_w, e->avg_b, e->counts};
    int rc = DT_ERR_INPUT;
    if (dt_h5_attr_read_i64(g, path, "n_averaged", &e->n_averaged) == DT_OK &&
        dt_model_load_state_to(m, g, path, &s) == DT_OK) {
        e->empty = 0;
        rc = DT_OK;
    }
    H5Gclose(g);
    return rc;
}

int dt_checkpoint_load(const char *path, dt_model *m, dt_optim *opt, dt_amp *amp, dt_ema *ema, dt_progress *pr)
{
    hid_t f = open_for(path, m, 0);
    if (f < 0)
        return DT_ERR_INPUT;
    int rc = dt_checkpoint_read(f, path, m, opt, amp, ema, pr);
    H5Fclose(f);
    return rc;
}

int dt_checkpoint_read(hid_t f, const char *path, dt_model *m, dt_optim *opt, dt_amp *amp, dt_ema *ema,
                       dt_progress *pr)
{
    int rc = DT_ERR_INPUT;
    int64_t mstep;
    hid_t g = -1;
    if (dt_h5_attr_read_i64(f, path, "epoch", &pr->epoch) || dt_h5_attr_read_i64(f, path, "step", &pr->step) ||
        dt_h5_attr_read_i64(f, path, "global_step", &pr->global_step) ||
        dt_h5_attr_read_i64(f, path, "model_step", &mstep) || read_double(f, path, "best_top1_bits", &pr->best_top1))
        goto out;
    pr->best_epoch = -1; /* not recorded before dtrain 0.1.0's issue 36 */
    if (H5Aexists(f, "best_epoch") > 0 && dt_h5_attr_read_i64(f, path, "best_epoch", &pr->best_epoch))
        goto out;
    if (load_model(f, path, m) != DT_OK)
        goto out;
    memset(&pr->sums, 0, sizeof pr->sums);
    if (H5Lexists(f, "progress", H5P_DEFAULT) > 0) {
        dt_epoch_sums *e = &pr->sums;
        if ((g = open_group(f, path, "progress")) < 0 || read_double(g, path, "loss_bits", &e->loss) ||
            read_double(g, path, "seconds_bits", &e->seconds) ||
            read_double(g, path, "data_seconds_bits", &e->data_seconds) ||
            dt_h5_attr_read_i64(g, path, "hits1", &e->hits1) || dt_h5_attr_read_i64(g, path, "hits5", &e->hits5) ||
            dt_h5_attr_read_i64(g, path, "seen", &e->seen) || dt_h5_attr_read_i64(g, path, "images", &e->images) ||
            dt_h5_attr_read_i64(g, path, "steps", &e->steps))
            goto out;
        H5Gclose(g);
        g = -1;
    }
    m->step = (uint64_t)mstep;
    if ((g = open_group(f, path, "optimizer")) < 0 || dt_h5_attr_read_i64(g, path, "steps", &opt->steps) ||
        same_optimizer(g, path, opt) ||
        (opt->momentum_buf && read_flat(g, path, "momentum", m->be, opt->momentum_buf, m->n_weights)) ||
        (opt->second_buf && read_flat(g, path, "second_moment", m->be, opt->second_buf, m->n_weights)))
        goto out;
    H5Gclose(g);
    g = -1;
    if (amp && amp->master) {
        if (H5Lexists(f, "amp", H5P_DEFAULT) <= 0) {
            dt_error("%s: has no fp32 master weights (saved at another opt level?)", path);
            goto out;
        }
        if ((g = open_group(f, path, "amp")) < 0 || read_flat(g, path, "master", m->be, amp->master, m->n_weights))
            goto out;
        H5Gclose(g);
        g = -1;
    }
    if (amp) {
        if ((g = open_group(f, path, "scaler")) < 0 || dt_scaler_load(&amp->scaler, g, path))
            goto out;
        H5Gclose(g);
        g = -1;
    }
    if (ema && read_ema(f, path, m, ema) != DT_OK)
        goto out;
    rc = dt_amp_put_state(amp ? &amp->scaler : NULL, opt->steps, m); /* where the step's ops read them */
out:
    if (g >= 0)
        H5Gclose(g);
    return rc;
}

/* a run directory's name ends in -job<ID>, or has -job<ID>- before its run name or suffix */
static int of_job(const char *name, const char *job)
{
    char key[96];
    snprintf(key, sizeof key, "-job%s", job);
    for (const char *p = strstr(name, key); p; p = strstr(p + 1, key))
        if (p[strlen(key)] == 0 || p[strlen(key)] == '-')
            return 1;
    return 0;
}

int dt_checkpoint_find(const char *results, const char *arch, const char *job, char *out, size_t n, hid_t *file)
{
    DIR *d = opendir(results);
    time_t newest = 0;
    hid_t kept = -1; /* the newest so far, open */
    out[0] = 0;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.' || (job && !of_job(de->d_name, job)))
                continue;
            char p[4400];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s/checkpoint.h5", results, de->d_name);
            if (stat(p, &st) != 0 || st.st_mtime < newest)
                continue;
            dt_check_hdf5_init(); /* readable, and of this architecture */
            hid_t f = dt_h5_probe(p, "checkpoint") == DT_OK ? H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
            char a[64] = "";
            if (f < 0) { /* said: the newest checkpoint may be this one, and an older one is taken */
                dt_warn("--resume: passing over %s: not readable as HDF5 (%s)", p, dt_errstr_hdf5(f, 0));
                continue;
            }
            int ok = H5Aexists(f, "arch") > 0 && dt_h5_attr_read_str(f, p, "arch", a, sizeof a) == DT_OK && !strcmp(a, arch);
            if (ok) {
                newest = st.st_mtime;
                snprintf(out, n, "%s", p);
                if (kept >= 0)
                    H5Fclose(kept);
                kept = file ? f : -1;
            }
            if (f != kept)
                H5Fclose(f);
        }
        closedir(d);
    }
    if (file)
        *file = kept;
    return out[0] ? DT_OK : DT_ERR_INPUT;
}
