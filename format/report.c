/*
 * The report channel of report.h: the writer's batching and the records
 * of api/report-format.md.
 */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "describe.h"
#include "ecopt/clock.h"
#include "outcome.h"

void report_writer_init(struct report_writer *w, int fd)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
}

int report_broken(const struct report_writer *w)
{
    return w->broken;
}

/* Writes what is held, whole; a reader that went away breaks the channel,
 * since nobody would see the job's results. */
static void flush(struct report_writer *w)
{
    size_t off = 0;

    while (off < w->len && !w->broken) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->broken = 1;
        else
            off += (size_t)n;
    }
    w->len = 0;
    w->flushed = ec_clock();
}

void report_writer_close(struct report_writer *w)
{
    if (w->len && w->fd >= 0)
        flush(w);               /* rows held when no final record came */
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

/* One record and a newline; soon: a metric record, which may wait. */
static void put_line(struct report_writer *w, const char *text, size_t len, int soon)
{
    if (w->fd < 0 || w->broken)
        return;
    if (w->len + len + 1 > w->cap) {
        size_t cap = w->len + len + 1 + REPORT_BATCH_BYTES;
        char *nb = realloc(w->buf, cap);
        if (!nb) {
            w->broken = 1;
            return;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, text, len);
    w->len += len;
    w->buf[w->len++] = '\n';
    if (!soon || w->len >= REPORT_BATCH_BYTES ||
        ec_clock() - w->flushed >= REPORT_BATCH_SECONDS)
        flush(w);
}

/* A record other than a metric: with "v", keys sorted, written at once.
   Takes rec. */
static void put_record(struct report_writer *w, json_t *rec)
{
    char *text;

    if (w->fd < 0 || w->broken || !rec) {
        json_decref(rec);
        return;
    }
    json_object_set_new(rec, "v", json_integer(REPORT_VERSION));
    text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(rec);
    if (!text) {
        w->broken = 1;
        return;
    }
    put_line(w, text, strlen(text), 0);
    free(text);
}

void report_metric(struct report_writer *w, const ec_metric *row)
{
    /* Every evaluation point: written directly, not through Jansson. */
    char rec[DESCRIBE_RECORD_MAX];
    int n;

    if (w->fd < 0 || w->broken)
        return;
    n = describe_metric_record(row, rec, sizeof rec);
    put_line(w, rec, (size_t)n, 1);
}

const char *report_status_of(ec_stop stop)
{
    switch (stop) {
    case EC_STOP_TARGET:
    case EC_STOP_MAX_ROUNDS:
        return "succeeded";
    case EC_STOP_CANCELLED:
        return "cancelled";
    default:
        return "failed";
    }
}

json_t *report_params_json(const ec_params *prm)
{
    json_t *o = describe_params(prm);

    /* ECLK's rule, guard and constants are describe_params' own. */
    if (o && prm->algo == EC_ALGO_EF21)
        json_object_set_new(o, "step_factor", describe_real(prm->step_factor));
    return o;
}

json_t *report_eclk_json(const ec_eclk_report *r)
{
    return describe_eclk_report(r);
}

void report_start(struct report_writer *w, const char *backend, const ec_dataset *ds,
                  const char *version, const ec_problem *pb, const ec_params *prm)
{
    json_t *dataset;

    if (w->fd < 0 || w->broken)
        return;
    dataset = describe_dataset(ds);
    if (dataset && version)
        json_object_set_new(dataset, "sha256", json_string(version));
    put_record(w, json_pack("{s:s, s:i, s:s, s:o, s:o, s:o}", "type", "start", "pid",
                            (int)getpid(), "backend", backend, "dataset", dataset,
                            "problem", describe_problem(pb), "params",
                            report_params_json(prm)));
}

void report_final(struct report_writer *w, const ec_summary *sum, const ec_params *prm,
                  double cpu_seconds, double rss_sum_bytes)
{
    json_t *fin;

    if (w->fd < 0 || w->broken)
        return;
    fin = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o}", "type", "final", "status",
                    report_status_of(sum->stop), "stop", ec_stop_name(sum->stop),
                    "outcome",
                    outcome_name(outcome_of_stop(sum->stop, sum->last.rel_gap)),
                    "reason", sum->reason, "rounds", (json_int_t)sum->rounds, "last",
                    describe_metric(&sum->last));
    if (fin && prm->algo == EC_ALGO_ECLK)
        json_object_set_new(fin, "eclk", report_eclk_json(&sum->eclk));
    if (fin)
        json_object_set_new(fin, "usage",
                            json_pack("{s:f, s:I}", "cpu_seconds", cpu_seconds,
                                      "rss_sum_bytes", (json_int_t)rss_sum_bytes));
    put_record(w, fin);
}

void report_stopped(struct report_writer *w, const char *status, ec_stop stop,
                    const char *reason)
{
    put_record(w, json_pack("{s:s, s:s, s:s, s:s, s:i}", "type", "final", "status",
                            status, "stop", ec_stop_name(stop), "reason", reason,
                            "rounds", 0));
}

void report_failure(struct report_writer *w, const char *reason)
{
    put_record(w, json_pack("{s:s, s:s, s:s, s:s}", "type", "final", "status",
                            "failed", "stop", "start_failed", "reason", reason));
}

void report_parse(json_t *rec, struct report_record *out)
{
    const char *type = json_string_value(json_object_get(rec, "type"));
    const char *status;
    json_t *rss;

    memset(out, 0, sizeof *out);
    out->type = REPORT_OTHER;
    out->reason = "";
    out->rss_sum_bytes = -1;
    if (!type)
        return;
    if (strcmp(type, "start") == 0) {
        out->type = REPORT_START;
        out->dataset = json_object_get(rec, "dataset");
        out->problem = json_object_get(rec, "problem");
        out->params = json_object_get(rec, "params");
    } else if (strcmp(type, "metric") == 0) {
        out->type = REPORT_METRIC;
        out->row_ok = describe_metric_from_json(rec, &out->row) == 0;
    } else if (strcmp(type, "final") == 0) {
        out->type = REPORT_FINAL;
        status = json_string_value(json_object_get(rec, "status"));
        out->status = status && strcmp(status, "succeeded") == 0   ? REPORT_SUCCEEDED
                      : status && strcmp(status, "cancelled") == 0 ? REPORT_CANCELLED
                                                                   : REPORT_FAILED;
        out->stop = json_string_value(json_object_get(rec, "stop"));
        if (json_is_string(json_object_get(rec, "reason")))
            out->reason = json_string_value(json_object_get(rec, "reason"));
        rss = json_object_get(json_object_get(rec, "usage"), "rss_sum_bytes");
        if (json_is_integer(rss) && json_integer_value(rss) >= 0)
            out->rss_sum_bytes = (long long)json_integer_value(rss);
        if (json_is_object(json_object_get(rec, "eclk")))
            out->eclk = json_object_get(rec, "eclk");
    }
}

/* Removes the member `pat` (a whole "key":value) and one comma beside it. */
static int cut_member(char *s, size_t *len, const char *pat)
{
    size_t pl = strlen(pat);
    char *p = strstr(s, pat), *from, *to;

    if (!p || (p[pl] != ',' && p[pl] != '}') || strstr(p + pl, pat))
        return -1;
    if (p > s && p[-1] == ',') {
        from = p - 1;
        to = p + pl;
    } else if (p[pl] == ',') {
        from = p;
        to = p + pl + 1;
    } else {
        return -1;
    }
    memmove(from, to, (size_t)(s + *len + 1 - to));
    *len -= (size_t)(to - from);
    return 0;
}

char *report_metric_doc(json_t *rec, const char *line, size_t len)
{
    static const char *const keys[] = {DESCRIBE_METRIC_FIELDS(DESCRIBE_METRIC_NAME)};
    char *doc;

    if (!line || json_object_size(rec) != DESCRIBE_METRIC_NFIELDS + 2 ||
        json_integer_value(json_object_get(rec, "v")) != REPORT_VERSION ||
        !json_is_integer(json_object_get(rec, "v")))
        return NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(rec, keys[i]);
        if (!json_is_number(v) && !json_is_null(v))
            return NULL;
    }
    if (memchr(line, '\0', len) || !(doc = malloc(len + 1)))
        return NULL;
    memcpy(doc, line, len);
    doc[len] = '\0';
    if (cut_member(doc, &len, "\"type\":\"metric\"") < 0 ||
        cut_member(doc, &len, "\"v\":1") < 0) {
        free(doc);
        return NULL;
    }
    return doc;
}
