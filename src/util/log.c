/* log.c: rank-tagged logging (contract in log.h). */
#include "config.h"

#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_MAX 64

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_rank = 0;
static int log_world = 1;
static int log_device = -1;
static char log_host[HOST_MAX];
static enum dt_log_level log_level = DT_LOG_INFO;
static FILE *log_stream; /* NULL: stderr */
static int log_fd = -1;  /* the per-rank file, or -1 */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

const char *dt_log_level_name(enum dt_log_level level)
{
    return (unsigned)level < sizeof level_names / sizeof level_names[0] ? level_names[level] : "?";
}

int dt_log_parse_level(const char *text, enum dt_log_level *out)
{
    for (int i = 0; text && i < (int)(sizeof level_names / sizeof level_names[0]); i++)
        if (strcmp(text, level_names[i]) == 0) {
            *out = (enum dt_log_level)i;
            return 0;
        }
    return -1;
}

/* copy at most HOST_MAX - 1 bytes of s into log_host (a longer name is cut on purpose) */
static void set_host_text(const char *s)
{
    size_t n = strnlen(s, HOST_MAX - 1);
    memcpy(log_host, s, n);
    log_host[n] = '\0';
}

/* caller holds log_lock */
static void fill_host_locked(const char *host)
{
    if (host) {
        set_host_text(host);
        return;
    }
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0)
        snprintf(buf, sizeof buf, "unknown-host");
    buf[sizeof buf - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot && dot != buf)
        *dot = '\0';
    set_host_text(buf);
}

void dt_log_init(void)
{
    pthread_mutex_lock(&log_lock);
    if (!log_host[0])
        fill_host_locked(NULL);
    pthread_mutex_unlock(&log_lock);
    const char *env = getenv("DT_LOG_LEVEL");
    enum dt_log_level lv;
    if (env && *env) {
        if (dt_log_parse_level(env, &lv) == 0)
            dt_log_set_level(lv);
        else
            dt_warn("DT_LOG_LEVEL='%s' is not one of error, warn, info, debug; keeping %s", env,
                    dt_log_level_name(dt_log_get_level()));
    }
}

void dt_log_set_rank(int rank, int world)
{
    pthread_mutex_lock(&log_lock);
    log_rank = rank;
    log_world = world;
    pthread_mutex_unlock(&log_lock);
}

void dt_log_set_device(int device)
{
    pthread_mutex_lock(&log_lock);
    log_device = device;
    pthread_mutex_unlock(&log_lock);
}

void dt_log_set_host(const char *host)
{
    pthread_mutex_lock(&log_lock);
    fill_host_locked(host);
    pthread_mutex_unlock(&log_lock);
}

void dt_log_set_level(enum dt_log_level level)
{
    pthread_mutex_lock(&log_lock);
    log_level = level;
    pthread_mutex_unlock(&log_lock);
}

enum dt_log_level dt_log_get_level(void)
{
    pthread_mutex_lock(&log_lock);
    enum dt_log_level lv = log_level;
    pthread_mutex_unlock(&log_lock);
    return lv;
}

void dt_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&log_lock);
    log_stream = stream;
    pthread_mutex_unlock(&log_lock);
}

int dt_log_open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        dt_error("cannot open log file %s: %s", path, strerror(e));
        return -1;
    }
    pthread_mutex_lock(&log_lock);
    int old = log_fd;
    log_fd = fd;
    pthread_mutex_unlock(&log_lock);
    if (old >= 0)
        close(old);
    return 0;
}

void dt_log_close_file(void)
{
    pthread_mutex_lock(&log_lock);
    int old = log_fd;
    log_fd = -1;
    pthread_mutex_unlock(&log_lock);
    if (old >= 0)
        close(old);
}

/* write all of buf to fd, retrying short writes and EINTR; errors are dropped (nowhere to report) */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += w;
        n -= (size_t)w;
    }
}

static _Thread_local char last_error[1024];

const char *dt_log_last_error(void)
{
    return last_error;
}

void dt_log_clear_error(void)
{
    last_error[0] = 0;
}

void dt_vlog(enum dt_log_level level, const char *fmt, va_list ap)
{
    int saved_errno = errno; /* logging must not disturb the caller's errno */
    if (level == DT_LOG_ERROR) { /* whatever the threshold: libdt hands it to the caller (dt_handle_error) */
        va_list keep;
        va_copy(keep, ap);
        vsnprintf(last_error, sizeof last_error, fmt, keep);
        va_end(keep);
    }
    char line[DT_LOG_LINE_MAX + 2];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);

    pthread_mutex_lock(&log_lock);
    if (level > log_level) {
        pthread_mutex_unlock(&log_lock);
        errno = saved_errno;
        return;
    }
    if (!log_host[0])
        fill_host_locked(NULL);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    int k = snprintf(line + n, sizeof line - n, ".%03ld [rank %d", ts.tv_nsec / 1000000L, log_rank);
    n += (size_t)k;
    if (log_world > 0)
        n += (size_t)snprintf(line + n, sizeof line - n, "/%d", log_world);
    n += (size_t)snprintf(line + n, sizeof line - n, " %s", log_host);
    if (log_device >= 0)
        n += (size_t)snprintf(line + n, sizeof line - n, " gpu%d", log_device);
    n += (size_t)snprintf(line + n, sizeof line - n, "] %s: ", dt_log_level_name(level));

    char full[4 * DT_LOG_LINE_MAX]; /* the message whole, when it is longer than the line has room for */
    va_list again;
    va_copy(again, ap);
    int m = vsnprintf(line + n, DT_LOG_LINE_MAX - n, fmt, ap);
    if (m < 0)
        m = 0;
    if ((size_t)m >= DT_LOG_LINE_MAX - n) { /* cut the middle: the start says what, the end why */
        static const char cut[] = " [...] ";
        int whole = vsnprintf(full, sizeof full, fmt, again);
        size_t len = whole < 0 ? 0 : (size_t)whole < sizeof full ? (size_t)whole : sizeof full - 1;
        size_t room = DT_LOG_LINE_MAX - n - 1, tail = room / 4, head = room - tail - (sizeof cut - 1);
        memcpy(line + n, full, head);
        memcpy(line + n + head, cut, sizeof cut - 1);
        memcpy(line + n + head + sizeof cut - 1, full + len - tail, tail);
        n += room;
    } else {
        n += (size_t)m;
    }
    va_end(again);
    while (n > 0 && line[n - 1] == '\n') /* callers may end with \n: one line either way */
        n--;
    line[n++] = '\n';

    FILE *f = log_stream ? log_stream : stderr;
    fwrite(line, 1, n, f);
    fflush(f);
    if (log_fd >= 0)
        write_all(log_fd, line, n);
    pthread_mutex_unlock(&log_lock);
    errno = saved_errno;
}

void dt_log(enum dt_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vlog(level, fmt, ap);
    va_end(ap);
}
