/* clock.h: the monotonic clock in seconds, and the pause of a polling wait. */
#ifndef DT_UTIL_CLOCK_H
#define DT_UTIL_CLOCK_H

#include <time.h>

static inline double dt_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A polling loop's pause: 20 us for the first 10 ms since start (short operations finish
 * quickly), then 200 us (a long wait leaves the cores to the threads that compute). */
static inline void dt_poll_pause(double start)
{
    struct timespec ts = {0, dt_seconds() - start < 0.01 ? 20000 : 200000};
    nanosleep(&ts, NULL);
}

#endif
