/* HTTP request counters and their Prometheus text. */
#include "http_int.h"

#include "strbuf.h"

/* Latency histogram bounds in seconds; one more bucket holds +Inf. */
static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,   0.25,   0.5,   1,    2.5,   5,
                                   10};

_Static_assert(sizeof bucket_le / sizeof bucket_le[0] == NBUCKETS,
               "NBUCKETS is the number of bucket_le bounds");

void http__record(struct http_server *srv, struct http_exchange *x,
                  uint64_t ns)
{
    struct route_stats *s =
        &srv->stats[x->route >= 0 ? (size_t)x->route : srv->nroutes];
    double secs = (double)ns / 1e9;
    size_t b = 0;

    while (b < NBUCKETS && secs > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&s->by_status[http__status_slot(x->status)], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->sum_us, ns / 1000, memory_order_relaxed);
}

/* ------------------------------------------------------------------ */
/* The Prometheus text                                                  */

char *http_metrics_text(const struct http_server *srv)
{
    struct strbuf b = STRBUF_INIT;

    /* Patterns and methods were checked at start: no label escaping. */
    strbuf_addf(&b, "# HELP ecopt_http_requests_total HTTP requests answered, "
              "by route, method and status code.\n"
              "# TYPE ecopt_http_requests_total counter\n");
    for (size_t r = 0; r <= srv->nroutes; r++) {
        const char *route = r < srv->nroutes ? srv->routes[r].pattern
                                             : "unmatched";
        const char *method = r < srv->nroutes ? srv->routes[r].method : "*";

        for (size_t k = 0; k <= NSTATUS; k++) {
            unsigned long long c = atomic_load_explicit(
                &srv->stats[r].by_status[k], memory_order_relaxed);
            char code[16];

            if (!c)
                continue;
            if (k < NSTATUS)
                http__fmt(code, sizeof code, "%d", http__status_table[k].code);
            else
                http__fmt(code, sizeof code, "other");
            strbuf_addf(&b, "ecopt_http_requests_total{route=\"%s\",method="
                      "\"%s\",code=\"%s\"} %llu\n", route, method, code, c);
        }
    }
    strbuf_addf(&b, "# HELP ecopt_http_request_duration_seconds Time from the "
              "request line to the end of the reply.\n"
              "# TYPE ecopt_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r <= srv->nroutes; r++) {
        const char *route = r < srv->nroutes ? srv->routes[r].pattern
                                             : "unmatched";
        const char *method = r < srv->nroutes ? srv->routes[r].method : "*";
        unsigned long long cum = 0;

        for (size_t k = 0; k <= NBUCKETS; k++)
            cum += atomic_load_explicit(&srv->stats[r].bucket[k],
                                        memory_order_relaxed);
        if (!cum)
            continue;
        cum = 0;
        for (size_t k = 0; k <= NBUCKETS; k++) {
            char le[16];

            cum += atomic_load_explicit(&srv->stats[r].bucket[k],
                                        memory_order_relaxed);
            if (k < NBUCKETS)
                http__fmt(le, sizeof le, "%g", bucket_le[k]);
            else
                http__fmt(le, sizeof le, "+Inf");
            strbuf_addf(&b, "ecopt_http_request_duration_seconds_bucket{route="
                      "\"%s\",method=\"%s\",le=\"%s\"} %llu\n", route, method,
                      le, cum);
        }
        strbuf_addf(&b, "ecopt_http_request_duration_seconds_sum{route=\"%s\","
                  "method=\"%s\"} %.6f\n", route, method,
                  (double)atomic_load_explicit(&srv->stats[r].sum_us,
                                               memory_order_relaxed) / 1e6);
        strbuf_addf(&b, "ecopt_http_request_duration_seconds_count{route=\"%s\","
                  "method=\"%s\"} %llu\n", route, method, cum);
    }
    return strbuf_detach(&b, NULL);
}
