/* rdzv.c: the TCP rendezvous at MASTER_ADDR:MASTER_PORT (rdzv.h).
 *
 * Messages have fixed sizes, integers in network order:
 *   hello   rank r -> 0   "dtrdzv1" NUL, rank, world size, host name (64 bytes)       80 bytes
 *   reply   0 -> rank r   "dtrdzv1" NUL, kind, a, b, c                                24 bytes
 *           ACK      at once: a = rank 0's world size
 *           WELCOME  when every rank came: a = world size, b = node, c = ranks on that node
 *           REFUSE   a = why (WHY_SIZE, WHY_TWICE), b = rank 0's world size
 *   bcast   0 -> rank r   n (4 bytes), then n bytes
 *   barrier one byte r -> 0 from every rank, then one byte 0 -> r
 * Sockets are non-blocking and every wait is a poll against the caller's deadline. */
#include "config.h"

#include "libdt/rdzv.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

#define MAGIC "dtrdzv1" /* 7 characters and the NUL: 8 bytes */
#define HOST_LEN 64
#define HELLO_LEN (8 + 4 + 4 + HOST_LEN)
#define REPLY_LEN (8 + 4 * 4)
#define BCAST_MAX (1u << 20)

enum { ACK = 1, WELCOME = 2, REFUSE = 3 };
enum { WHY_SIZE = 1, WHY_TWICE = 2 };

struct dt_rdzv {
    int rank, size;
    int fd;          /* ranks other than 0: the connection to rank 0 */
    int *peer;       /* rank 0: the connection of rank r (r >= 1; -1 while none) */
    char where[300]; /* host:port, for messages */
};

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Moves all n bytes of buf through fd (sends when out) before the deadline: 1 when done, 0 when the
 * other end closed first, -1 on an error (errno), -2 at the deadline. */
static int io_all(int fd, void *buf, size_t n, int out, double deadline)
{
    uint8_t *p = buf;
    while (n > 0) {
        double left = deadline - dt_seconds();
        if (left <= 0)
            return -2;
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int k = poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return -1;
        if (k <= 0)
            continue;
        ssize_t m = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (m < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        if (m == 0)
            return 0;
        p += m;
        n -= (size_t)m;
    }
    return 1;
}

static int send_reply(int fd, uint32_t kind, uint32_t a, uint32_t b, uint32_t c, double deadline)
{
    uint8_t m[REPLY_LEN];
    memcpy(m, MAGIC, 8);
    put32(m + 8, kind);
    put32(m + 12, a);
    put32(m + 16, b);
    put32(m + 20, c);
    return io_all(fd, m, sizeof m, 1, deadline);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void dt_rdzv_close(dt_rdzv **zp)
{
    dt_rdzv *z = zp ? *zp : NULL;
    if (!z)
        return;
    close_fd(&z->fd);
    for (int r = 1; z->peer && r < z->size; r++)
        close_fd(&z->peer[r]);
    free(z->peer);
    free(z);
    *zp = NULL;
}

/* "1, 3, 4" (at most 8, then "and N more"): the ranks r >= 1 whose flag is 0 */
static void list_missing(const int *have, int size, char *out, size_t n)
{
    size_t k = 0;
    int shown = 0, more = 0;
    out[0] = 0;
    for (int r = 1; r < size; r++) {
        if (have[r])
            continue;
        if (shown == 8) {
            more++;
            continue;
        }
        int w = snprintf(out + k, n - k, "%s%d", shown ? ", " : "", r);
        if (w > 0 && (size_t)w < n - k)
            k += (size_t)w;
        shown++;
    }
    if (more)
        snprintf(out + k, n - k, " and %d more", more);
}

/* the listening socket on port, on every address of this node (IPv6 with IPv4 mapped, or IPv4) */
static int listen_on(const char *where, int port, int *out)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), v6 = fd >= 0;
    if (!v6)
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        dt_error("rendezvous: socket: %s", strerror(errno));
        return DT_ERR_SYS;
    }
    int one = 1, zero = 0; /* an earlier run's connections in TIME_WAIT do not hold the port; a listener does */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    socklen_t len;
    if (v6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a;
        s->sin6_family = AF_INET6;
        s->sin6_addr = in6addr_any;
        s->sin6_port = htons((uint16_t)port);
        len = sizeof *s;
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&a;
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_ANY);
        s->sin_port = htons((uint16_t)port);
        len = sizeof *s;
    }
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            dt_error("rendezvous: rank 0 cannot listen on port %d (the rendezvous %s): the port is in use on this node "
                     "(an earlier run, a second launch or another program holds it): start with another port "
                     "(torchrun --master_port) or end what holds it (ss -ltnp 'sport = :%d' names it)",
                     port, where, port);
        else
            dt_error("rendezvous: rank 0 cannot listen on port %d (the rendezvous %s): %s", port, where, strerror(e));
        return DT_ERR_SYS;
    }
    *out = fd;
    return DT_OK;
}

/* the peer's numeric address, for messages */
static void peer_name(const struct sockaddr_storage *a, socklen_t len, char *out, size_t n)
{
    char h[NI_MAXHOST];
    if (getnameinfo((const struct sockaddr *)a, len, h, sizeof h, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(h, sizeof h, "?");
    snprintf(out, n, "%s", strncmp(h, "::ffff:", 7) ? h : h + 7);
}

/* rank 0: every other rank's hello, checked, acknowledged at once; then each its WELCOME */
static int gather(dt_rdzv *z, int port, double deadline, double timeout_s, int *node, int *local_size)
{
    int lfd = -1, rc = DT_OK;
    DT_TRY(listen_on(z->where, port, &lfd));
    char(*host)[HOST_LEN] = calloc((size_t)z->size, HOST_LEN);
    int *have = calloc((size_t)z->size, sizeof *have);
    if (!host || !have) {
        rc = DT_ERR_NOMEM;
        goto out;
    }
    gethostname(host[0], HOST_LEN - 1);
    have[0] = 1;
    for (int got = 1; got < z->size;) {
        double left = deadline - dt_seconds();
        if (left <= 0) {
            char miss[160];
            list_missing(have, z->size, miss, sizeof miss);
            dt_error("rendezvous %s: %d of the %d ranks did not come within %.0f s (missing: rank %s): did they "
                     "start, and does their MASTER_ADDR reach this node? (--comm-timeout sets the limit)",
                     z->where, z->size - got, z->size, timeout_s, miss);
            rc = DT_ERR_TIMEOUT;
            goto out;
        }
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1) <= 0)
            continue;
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        int c = accept4(lfd, (struct sockaddr *)&from, &flen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            continue; /* EAGAIN, EINTR, ECONNABORTED: the next one */
        char who[NI_MAXHOST + 8];
        peer_name(&from, flen, who, sizeof who);
        uint8_t h[HELLO_LEN];
        double hello_by = dt_seconds() + 10 < deadline ? dt_seconds() + 10 : deadline;
        if (io_all(c, h, sizeof h, 0, hello_by) != 1 || memcmp(h, MAGIC, 8) != 0) {
            dt_warn("rendezvous %s: a connection from %s that is not a dtrain rank (ignored)", z->where, who);
            close(c);
            continue;
        }
        uint32_t r = get32(h + 8), s = get32(h + 12);
        h[HELLO_LEN - 1] = 0;
        const char *their = (const char *)h + 16;
        if (s != (uint32_t)z->size) {
            send_reply(c, REFUSE, WHY_SIZE, (uint32_t)z->size, 0, deadline);
            dt_error("rendezvous %s: rank %u (%s, %s) has WORLD_SIZE=%u, rank 0 has %d: every rank of one launch has "
                     "the same world size (two launches with the same MASTER_PORT?)",
                     z->where, r, their, who, s, z->size);
            close(c);
            rc = DT_ERR_INPUT;
            goto out;
        }
        if (r == 0 || r >= (uint32_t)z->size || have[r]) {
            send_reply(c, REFUSE, WHY_TWICE, (uint32_t)z->size, 0, deadline);
            dt_error("rendezvous %s: rank %u came twice (from %s and from %s, %s): every process of a launch needs "
                     "its own RANK (two launches with the same MASTER_PORT?)",
                     z->where, r, r < (uint32_t)z->size ? host[r] : "?", their, who);
            close(c);
            rc = DT_ERR_INPUT;
            goto out;
        }
        send_reply(c, ACK, (uint32_t)z->size, 0, 0, deadline); /* one that went since fails at its WELCOME */
        z->peer[r] = c;
        snprintf(host[r], HOST_LEN, "%s", their);
        have[r] = 1;
        got++;
    }
    /* nodes: distinct host names in the order of their first rank */
    for (int r = 0; r < z->size && rc == DT_OK; r++) {
        int first = r, n_node = 0, count = 0;
        for (int q = 0; q < z->size; q++)
            if (!strcmp(host[q], host[r])) {
                count++;
                if (q < first)
                    first = q;
            }
        for (int q = 0; q < first; q++) { /* nodes whose first rank comes before this node's */
            int earlier = 0;
            for (int p = 0; p < q && !earlier; p++)
                earlier = !strcmp(host[p], host[q]);
            n_node += !earlier;
        }
        if (r == 0) {
            *node = n_node;
            *local_size = count;
        } else if (send_reply(z->peer[r], WELCOME, (uint32_t)z->size, (uint32_t)n_node, (uint32_t)count, deadline) !=
                   1) {
            dt_error("rendezvous %s: rank %d (%s) went away before the rendezvous completed", z->where, r, host[r]);
            rc = DT_ERR_SYS;
        }
    }
out:
    close(lfd);
    free(host);
    free(have);
    return rc;
}

/* a connection to one of host's addresses, or -1 with errno */
static int try_connect(const struct addrinfo *p, double deadline)
{
    int fd = socket(p->ai_family, p->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, p->ai_addr, p->ai_addrlen) == 0)
        return fd;
    if (errno == EINPROGRESS) {
        double left = deadline - dt_seconds();
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        /* at most 3 s a try: a dropped SYN is sent again by the next try */
        int k = poll(&pf, 1, left > 3 ? 3000 : left > 0 ? (int)(left * 1000) + 1 : 0);
        int err = 0;
        socklen_t len = sizeof err;
        if (k == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
            return fd;
        errno = k == 1 ? err : ETIMEDOUT;
    }
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* a rank other than 0: connect (again and again until the deadline: rank 0 may start later), hello,
 * rank 0's ACK, then its WELCOME */
static int join(dt_rdzv *z, const char *host, int port, double deadline, double timeout_s, int *node, int *local_size)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int last = 0; /* the last connect's errno */
    while (z->fd < 0) {
        if (dt_seconds() >= deadline) {
            dt_error("rendezvous: no rank 0 at %s within %.0f s (%s): is rank 0 running, and is MASTER_ADDR an "
                     "address of its node? (--comm-timeout sets the limit)",
                     z->where, timeout_s,
                     last == ECONNREFUSED ? "connection refused: nothing listens there"
                     : last == ETIMEDOUT  ? "no answer to connecting: the address drops packets or is not up"
                     : last               ? strerror(last)
                                          : "the name did not resolve");
            if (ai)
                freeaddrinfo(ai);
            return DT_ERR_TIMEOUT;
        }
        if (!ai) {
            int g = getaddrinfo(host, ps, &hints, &ai);
            if (g == EAI_AGAIN) {
                pause_s(0.2);
                continue;
            }
            if (g != 0) {
                dt_error("rendezvous: MASTER_ADDR '%s' does not resolve: %s", host, gai_strerror(g));
                return DT_ERR_SYS;
            }
        }
        for (const struct addrinfo *p = ai; p && z->fd < 0; p = p->ai_next)
            if ((z->fd = try_connect(p, deadline)) < 0)
                last = errno;
        if (z->fd < 0)
            pause_s(0.1);
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(z->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t h[HELLO_LEN];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    put32(h + 8, (uint32_t)z->rank);
    put32(h + 12, (uint32_t)z->size);
    gethostname((char *)h + 16, HOST_LEN - 1);
    int k = io_all(z->fd, h, sizeof h, 1, deadline);
    uint8_t m[REPLY_LEN];
    for (int acked = 0;;) {
        if (k == 1)
            k = io_all(z->fd, m, sizeof m, 0, deadline);
        if (k == -2 && !acked) {
            dt_error("rendezvous: %s took the connection but never answered within %.0f s: that is not a dtrain rank "
                     "0 (another program holds the port?)",
                     z->where, timeout_s);
            return DT_ERR_TIMEOUT;
        }
        if (k == -2) {
            dt_error("rendezvous %s: rank 0 answered, but not every rank came within %.0f s (rank 0's log names the "
                     "missing ones; --comm-timeout sets the limit)",
                     z->where, timeout_s);
            return DT_ERR_TIMEOUT;
        }
        if (k != 1) {
            dt_error("rendezvous %s: %s closed the connection before the rendezvous completed (its log says why)",
                     z->where, acked ? "rank 0" : "the listener");
            return DT_ERR_SYS;
        }
        uint32_t kind = get32(m + 8), a = get32(m + 12), b = get32(m + 16), c = get32(m + 20);
        if (memcmp(m, MAGIC, 8) != 0) {
            dt_error("rendezvous: %s answered, but not as a dtrain rank 0 (another program holds the port?)",
                     z->where);
            return DT_ERR_SYS;
        }
        if (kind == REFUSE && a == WHY_SIZE) {
            dt_error("rendezvous %s: rank 0 has a world of %u ranks, this rank %d has WORLD_SIZE=%d: every rank of one "
                     "launch has the same world size (two launches with the same MASTER_PORT?)",
                     z->where, b, z->rank, z->size);
            return DT_ERR_INPUT;
        }
        if (kind == REFUSE) {
            dt_error("rendezvous %s: rank 0 already has a rank %d: every process of a launch needs its own RANK (two "
                     "launches with the same MASTER_PORT?)",
                     z->where, z->rank);
            return DT_ERR_INPUT;
        }
        if (kind == WELCOME && a == (uint32_t)z->size) {
            *node = (int)b;
            *local_size = (int)c;
            return DT_OK;
        }
        if (kind != ACK) {
            dt_error("rendezvous %s: rank 0's answer %u is not one this dtrain knows (another version?)", z->where,
                     kind);
            return DT_ERR_SYS;
        }
        acked = 1;
    }
}

int dt_rdzv_open(dt_rdzv **out, const char *host, int port, int rank, int size, double timeout_s, int *node,
                 int *local_size)
{
    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size || port < 1 || port > 65535) {
        dt_error("rendezvous: rank %d of %d at port %d: out of range", rank, size, port);
        return DT_ERR_INPUT;
    }
    dt_rdzv *z = calloc(1, sizeof *z);
    if (!z || !(z->peer = malloc((size_t)size * sizeof *z->peer))) {
        free(z);
        return DT_ERR_NOMEM;
    }
    z->rank = rank;
    z->size = size;
    z->fd = -1;
    for (int r = 0; r < size; r++)
        z->peer[r] = -1;
    snprintf(z->where, sizeof z->where, "%s:%d", host, port);
    double deadline = dt_seconds() + timeout_s;
    *node = 0;
    *local_size = 1;
    int rc = DT_OK;
    if (size > 1)
        rc = rank == 0 ? gather(z, port, deadline, timeout_s, node, local_size)
                       : join(z, host, port, deadline, timeout_s, node, local_size);
    if (rc != DT_OK) {
        dt_rdzv_close(&z);
        return rc;
    }
    *out = z;
    return DT_OK;
}

int dt_rdzv_bcast(dt_rdzv *z, void *buf, size_t n, double timeout_s)
{
    double deadline = dt_seconds() + timeout_s;
    uint8_t hdr[4];
    if (n > BCAST_MAX) {
        dt_error("rendezvous: a broadcast of %zu bytes (at most %u)", n, BCAST_MAX);
        return DT_ERR_STATE;
    }
    put32(hdr, (uint32_t)n);
    if (z->rank == 0) {
        for (int r = 1; r < z->size; r++) {
            int k = io_all(z->peer[r], hdr, 4, 1, deadline);
            if (k == 1)
                k = io_all(z->peer[r], buf, n, 1, deadline);
            if (k != 1) {
                dt_error("rendezvous %s: %zu bytes for rank %d: %s", z->where, n, r,
                         k == -2 ? "it took none within the deadline (it stalls)" : "it went away");
                return k == -2 ? DT_ERR_TIMEOUT : DT_ERR_SYS;
            }
        }
        return DT_OK;
    }
    int k = io_all(z->fd, hdr, 4, 0, deadline);
    if (k == 1 && get32(hdr) != (uint32_t)n) {
        dt_error("rendezvous %s: rank 0 sends %u bytes where rank %d expects %zu (different dtrain versions?)",
                 z->where, get32(hdr), z->rank, n);
        return DT_ERR_STATE;
    }
    if (k == 1)
        k = io_all(z->fd, buf, n, 0, deadline);
    if (k == -2) {
        dt_error("rendezvous %s: no %zu bytes from rank 0 within %.0f s (it stalls before making them; "
                 "--comm-timeout sets the limit)",
                 z->where, n, timeout_s);
        return DT_ERR_TIMEOUT;
    }
    if (k != 1) {
        dt_error("rendezvous %s: rank 0 ended before sending its %zu bytes (its log says why)", z->where, n);
        return DT_ERR_SYS;
    }
    return DT_OK;
}

int dt_rdzv_barrier(dt_rdzv *z, double timeout_s)
{
    double deadline = dt_seconds() + timeout_s;
    uint8_t b = 'b';
    if (z->rank != 0) {
        int k = io_all(z->fd, &b, 1, 1, deadline);
        if (k == 1)
            k = io_all(z->fd, &b, 1, 0, deadline);
        if (k == 1)
            return DT_OK;
        if (k == -2)
            dt_error("rendezvous %s: barrier: not every rank came within %.0f s (rank 0's log names them)", z->where,
                     timeout_s);
        else
            dt_error("rendezvous %s: barrier: rank 0 ended (its log says why)", z->where);
        return k == -2 ? DT_ERR_TIMEOUT : DT_ERR_SYS;
    }
    int *have = calloc((size_t)z->size, sizeof *have), rc = DT_OK;
    struct pollfd *pf = calloc((size_t)z->size, sizeof *pf);
    if (!have || !pf) {
        free(have);
        free(pf);
        return DT_ERR_NOMEM;
    }
    for (int got = 1; got < z->size && rc == DT_OK;) {
        double left = deadline - dt_seconds();
        if (left <= 0) {
            char miss[160];
            list_missing(have, z->size, miss, sizeof miss);
            dt_error("rendezvous %s: barrier: rank %s did not come within %.0f s", z->where, miss, timeout_s);
            rc = DT_ERR_TIMEOUT;
            break;
        }
        for (int r = 1; r < z->size; r++)
            pf[r] = (struct pollfd){.fd = have[r] ? -1 : z->peer[r], .events = POLLIN};
        if (poll(pf + 1, (nfds_t)z->size - 1, left > 1 ? 1000 : (int)(left * 1000) + 1) <= 0)
            continue;
        for (int r = 1; r < z->size && rc == DT_OK; r++) {
            if (have[r] || !pf[r].revents)
                continue;
            ssize_t m = recv(z->peer[r], &b, 1, 0);
            if (m == 1) {
                have[r] = 1;
                got++;
            } else if (m == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                dt_error("rendezvous %s: barrier: rank %d went away", z->where, r);
                rc = DT_ERR_SYS;
            }
        }
    }
    for (int r = 1; r < z->size && rc == DT_OK; r++)
        if (io_all(z->peer[r], &b, 1, 1, deadline) != 1) {
            dt_error("rendezvous %s: barrier: rank %d went away", z->where, r);
            rc = DT_ERR_SYS;
        }
    free(have);
    free(pf);
    return rc;
}
