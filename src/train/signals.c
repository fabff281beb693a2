/* signals.c: stop signals, and the ranks' agreement on them (contract in trainer_int.h).
 *
 * SIGTERM, SIGUSR1 (Slurm's warning before the time limit), SIGINT and SIGHUP only note the signal;
 * the ranks then agree after every step and every validation batch (a MAX all-reduce), so that all
 * of them stop after the same one and write one checkpoint. */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "train/trainer_int.h"
#include "util/check.h"
#include "util/log.h"

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

void dt_run_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a dropped ssh session: checkpoint and exit 3, as SIGTERM */
    sa.sa_handler = SIG_IGN;      /* a closed stdout (dtrain | head): writes fail with EPIPE instead */
    sigaction(SIGPIPE, &sa, NULL);
}

int32_t dt_run_local_signal(void)
{
    return stop_signal;
}

int dt_run_note_signal(dt_run *r, int32_t sig)
{
    if (sig && !r->stopped_by && r->launch.rank == 0)
        dt_warn("signal %d: stopping after this step, writing the checkpoint", sig);
    if (sig)
        r->stopped_by = sig;
    return sig != 0;
}

int dt_run_agree_signal(dt_run *r)
{
    int32_t sig = stop_signal;
    if (r->comm->size > 1 && r->comm->ops->allreduce(r->comm, &sig, &sig, 1, DT_INT32, DT_MAX) != DT_OK)
        return 0;
    return dt_run_note_signal(r, sig);
}
