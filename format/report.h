/*
 * The report channel (api/report-format.md): the JSON lines a coordinator
 * writes on `--report-fd N` and the service reads. Both ends live here: the
 * writer (report_writer, used by coord/coord.c) with the records it writes,
 * and the reader's side, which turns a line into a record. Errors: a
 * writer whose reader went away is broken (report_broken) and drops what
 * follows; the job then stops.
 */
#ifndef ECOPT_REPORT_H
#define ECOPT_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"

/* The version every record carries as "v". */
#define REPORT_VERSION 1
/* Metric records written at once, and the longest one waits. */
#define REPORT_BATCH_BYTES 16384
#define REPORT_BATCH_SECONDS 0.02

/* The writing end. Plain data: report_writer_init makes it ready. */
struct report_writer {
    int fd;               /* -1: no channel, every write is dropped */
    int broken;           /* the reader went away */
    char *buf;            /* metric records not yet written */
    size_t len, cap;
    double flushed;       /* ec_clock() of the last write */
};

void report_writer_init(struct report_writer *w, int fd);
/* Writes what is held and frees the buffer; the descriptor stays open. */
void report_writer_close(struct report_writer *w);
/* Whether the channel's reader went away (the job should stop). */
int report_broken(const struct report_writer *w);

/*
 * A metric record (describe_metric_record's line). Metric records are held
 * and written together, up to REPORT_BATCH_BYTES or REPORT_BATCH_SECONDS:
 * a job that reports every round costs its reader one wake-up per batch.
 * Every other record goes out at once, with what was held before it.
 */
void report_metric(struct report_writer *w, const ec_metric *row);

/* The start record: the coordinator's pid, the backend, the dataset (with
   its version when it has one), the problem and the parameters. */
void report_start(struct report_writer *w, const char *backend, const ec_dataset *ds,
                  const char *version, const ec_problem *pb, const ec_params *prm);

/* The final record of a run: status, stop, outcome (format/outcome.h),
   reason, rounds, the last row, the usage and, for eclk, what its
   contraction rule did. */
void report_final(struct report_writer *w, const ec_summary *sum, const ec_params *prm,
                  double cpu_seconds, double rss_sum_bytes);

/* The final record of a job stopped before its run: status and stop as
   given, rounds 0. */
void report_stopped(struct report_writer *w, const char *status, ec_stop stop,
                    const char *reason);

/* The final record of a job that could not start (stop start_failed). */
void report_failure(struct report_writer *w, const char *reason);

/* The parameters as the start record has them (and `ecopt run --format
   json`): describe_params with each algorithm's own. */
json_t *report_params_json(const ec_params *prm);
/* What eclk's contraction rule did over the run. */
json_t *report_eclk_json(const ec_eclk_report *r);

/* "succeeded", "cancelled" or "failed", the final status of a stop. */
const char *report_status_of(ec_stop stop);

/* ---- the reading end ------------------------------------------------------ */

enum report_type { REPORT_OTHER, REPORT_START, REPORT_METRIC, REPORT_FINAL };
enum report_status { REPORT_FAILED, REPORT_SUCCEEDED, REPORT_CANCELLED };

/*
 * One record as a reader needs it. Pointers are borrowed from the JSON
 * object parsed and live as long as it does.
 */
struct report_record {
    enum report_type type;      /* REPORT_OTHER: a type this reader does
                                   not know (readers ignore it) */
    /* start */
    json_t *dataset, *problem, *params;
    /* metric: the row, and whether it read (a bad one is dropped) */
    ec_metric row;
    int row_ok;
    /* final */
    enum report_status status;  /* anything unknown is REPORT_FAILED */
    const char *stop;           /* ec_stop_name or "start_failed"; NULL */
    const char *reason;         /* "" when absent */
    long long rss_sum_bytes;    /* usage.rss_sum_bytes; -1 when absent */
    json_t *eclk;               /* ECLK's end record, borrowed; NULL when
                                   absent or not an object */
};

/* The record of a parsed line (a JSON object). */
void report_parse(json_t *rec, struct report_record *out);

/*
 * A metric record's row as the API serves it: the record's own line (its
 * numbers exactly as the coordinator formatted them) without "type" and
 * "v", malloc'd. NULL when the record is not the plain shape that makes
 * this safe; the row is then formatted from its numbers.
 */
char *report_metric_doc(json_t *rec, const char *line, size_t len);

#endif
