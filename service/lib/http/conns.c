/*
 * Every open connection, for what MHD does not do itself: a total
 * deadline for a request's headers and one for its body (MHD's timeout is
 * of idleness, and a byte every few seconds keeps a connection forever),
 * and a cap on the connections of one client address. A connection past
 * its deadline, or over its address's cap, is shut down (shutdown(2)): MHD
 * reads the end of it and closes it as any other. MHD says a connection
 * is closed (MHD_CONNECTION_NOTIFY_CLOSED) before it closes its socket,
 * and the entry leaves the list then, under the lock the shutdowns are
 * made under: a descriptor shut down is never one MHD has handed on.
 *
 * MHD accepts CONN_RESERVE connections beyond --max-connections. A new
 * connection that finds max_connections live ones sheds the stalest of
 * those still waiting for their headers (the one whose header deadline
 * comes first): a thousand clients trickling partial headers cannot keep
 * /livez or a real request waiting in the listen backlog until their
 * deadline; they only shorten each other's lives.
 */
#include "http_int.h"

struct http__conn {
    int fd;
    uint64_t deadline_ns;           /* 0: none (a handler, a reply, a
                                       stream or a long-poll has it) */
    const char *what;               /* "headers" or "body", for the log */
    int shut;                       /* shut down, MHD closes it soon */
    struct sockaddr_in6 addr;       /* IPv4 mapped, for the per-address cap */
    char client[INET6_ADDRSTRLEN];
    struct http__conn *prev, *next;
};

static void client_key(const struct sockaddr *sa, struct sockaddr_in6 *key, char *text,
                       size_t len)
{
    memset(key, 0, sizeof *key);
    snprintf(text, len, "?");
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;

        key->sin6_addr.s6_addr[10] = key->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&key->sin6_addr.s6_addr[12], &in4->sin_addr, 4);
        inet_ntop(AF_INET, &in4->sin_addr, text, (socklen_t)len);
    } else if (sa && sa->sa_family == AF_INET6) {
        key->sin6_addr = ((const struct sockaddr_in6 *)sa)->sin6_addr;
        inet_ntop(AF_INET6, &key->sin6_addr, text, (socklen_t)len);
    }
}

/* Shuts c down (MHD reads its end and closes it); conn_lock held. */
static void conn_shut(struct http_server *srv, struct http__conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->deadline_ns = 0;
    if (!c->shut) {
        c->shut = 1;
        srv->nconns_live--;
    }
}

/*
 * The live connection other than c still waiting for its headers that
 * came first (its header deadline is the earliest), or NULL when none is;
 * conn_lock held.
 */
static struct http__conn *stalest_waiting(const struct http_server *srv,
                                          const struct http__conn *c)
{
    struct http__conn *best = NULL;

    for (struct http__conn *o = srv->conns; o; o = o->next)
        if (o != c && !o->shut && o->deadline_ns && o->what[0] == 'h' &&
            (!best || o->deadline_ns < best->deadline_ns))
            best = o;
    return best;
}

/* Open connections of c's address, c included; the caller holds the lock. */
static size_t same_address(const struct http_server *srv, const struct http__conn *c)
{
    size_t n = 0;

    for (const struct http__conn *o = srv->conns; o; o = o->next)
        n += memcmp(&o->addr.sin6_addr, &c->addr.sin6_addr, 16) == 0;
    return n;
}

/*
 * A connection over its address's cap gets a 503 problem, written at once
 * into its empty socket buffer (no request of it has been read, and none
 * will be), and is shut down: MHD reads its end and closes it.
 */
static void refuse_over_cap(struct http_server *srv, struct http__conn *c)
{
    char body[256], msg[512];
    int blen, mlen;

    blen = snprintf(body, sizeof body,
                    "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\","
                    "\"status\":503,\"detail\":\"more than %u connections are open from "
                    "this address\",\"limit\":\"max_connections_per_address\","
                    "\"value\":%u}", srv->max_per_address, srv->max_per_address);
    mlen = snprintf(msg, sizeof msg,
                    "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                    "Retry-After: 1\r\nContent-Type: application/problem+json\r\n"
                    "Content-Length: %d\r\n\r\n%s", blen, body);
    /* At best: the client may be gone already. */
    (void)send(c->fd, msg, (size_t)mlen, MSG_DONTWAIT | MSG_NOSIGNAL);
    conn_shut(srv, c);
}

void http__conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    struct http_server *srv = cls;
    struct http__conn *c = *socket_context;
    const union MHD_ConnectionInfo *ci;
    struct http__conn *stale;
    int over = 0, shed = 0;

    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!c)
            return;
        pthread_mutex_lock(&srv->conn_lock);
        if (!c->shut)
            srv->nconns_live--;
        if (c->prev)
            c->prev->next = c->next;
        else
            srv->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&srv->conn_lock);
        free(c);
        *socket_context = NULL;
        return;
    }
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || !(c = calloc(1, sizeof *c)))
        return;         /* not tracked: MHD's own timeout still holds */
    c->fd = ci->connect_fd;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    client_key(ci ? ci->client_addr : NULL, &c->addr, c->client, sizeof c->client);
    c->deadline_ns = http__mono_ns() + srv->header_timeout_ns;
    c->what = "headers";
    pthread_mutex_lock(&srv->conn_lock);
    c->next = srv->conns;
    if (c->next)
        c->next->prev = c;
    srv->conns = c;
    srv->nconns_live++;
    *socket_context = c;
    if (srv->max_per_address && same_address(srv, c) > srv->max_per_address) {
        refuse_over_cap(srv, c);
        over = 1;
    } else if (srv->nconns_live > srv->max_connections &&
               (stale = stalest_waiting(srv, c))) {
        conn_shut(srv, stale);
        shed = 1;
    }
    pthread_mutex_unlock(&srv->conn_lock);
    if (shed && atomic_fetch_add_explicit(&srv->shed_for_room, 1,
                                           memory_order_relaxed) % 1000 == 0 &&
        !srv->quiet)
        fprintf(stderr, "http closed a connection still waiting for its headers to make "
                "room for a new one (more than %u open, max_connections; one line per "
                "1000 such)\n", srv->max_connections);
    /* One line per thousand: a flood must not flood the log too. */
    if (over && atomic_fetch_add_explicit(&srv->refused_per_address, 1,
                                          memory_order_relaxed) % 1000 == 0 &&
        !srv->quiet)
        fprintf(stderr, "http closed a connection from %s: more than %u open from that "
                "address (max_connections_per_address; one line per 1000 such)\n",
                c->client, srv->max_per_address);
}

void http__conn_deadline(struct http_exchange *x, unsigned which)
{
    struct http_server *srv = x->srv;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct http__conn *c = ci ? ci->socket_context : NULL;
    uint64_t span = which == HTTP__DL_HEADERS ? srv->header_timeout_ns
                  : which == HTTP__DL_BODY    ? srv->body_timeout_ns
                  : which == HTTP__DL_UPLOAD  ? srv->upload_timeout_ns
                                              : 0;

    if (!c)
        return;
    pthread_mutex_lock(&srv->conn_lock);
    c->deadline_ns = span ? http__mono_ns() + span : 0;
    c->what = which == HTTP__DL_HEADERS ? "headers" : "body";
    pthread_mutex_unlock(&srv->conn_lock);
}

uint64_t http__conns_expire(struct http_server *srv, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    char client[INET6_ADDRSTRLEN];
    const char *what = NULL;
    unsigned n = 0;

    pthread_mutex_lock(&srv->conn_lock);
    for (struct http__conn *c = srv->conns; c; c = c->next) {
        if (!c->deadline_ns)
            continue;
        if (c->deadline_ns <= now) {
            if (!n++) {
                memcpy(client, c->client, sizeof client);
                what = c->what;
            }
            conn_shut(srv, c);
        } else if (c->deadline_ns < next) {
            next = c->deadline_ns;
        }
    }
    pthread_mutex_unlock(&srv->conn_lock);
    if (n) {
        atomic_fetch_add_explicit(&srv->dropped_slow, n, memory_order_relaxed);
        if (!srv->quiet)
            fprintf(stderr, "http closed %u connection%s past a deadline (the first from "
                    "%s, its %s not in within the limit)\n", n, n == 1 ? "" : "s", client,
                    what);
    }
    return next;
}
